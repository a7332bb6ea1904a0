"""The conformance checks (``fairshare.conformance``) can fail: deliberately broken
policies are caught.

A check that passes for every policy proves nothing unless it fails for a wrong one.
Each broken policy here is a registered policy with one realistic defect, built on the
public seam only (``REGISTRY`` classes, ``Policy.online``, ``slots_per_node``): the
sorter is wrapped, never copied, so these keep working when the policy modules move.
Each test asserts that the check meant to catch the defect raises AssertionError, and
that the unbroken policy passes the same check (so the failure is the defect's). Every
online check has its broken policy here; of the static ones, the two whose property a
policy's own code decides (weights, counts).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from fairshare.conformance import (check_capacity_never_exceeded, check_counts_are_caps_with_respect_counts,
                                   check_gangs_run_whole_and_packed, check_preemption_takes_gangs_whole,
                                   check_priority_order_within_queue,
                                   check_empty_cluster_and_empty_queue, check_infeasible_demand_reported_not_raised,
                                   check_job_weights_respected, check_no_mutation_and_reusable,
                                   check_queue_weights_respected, check_same_seed_same_launches, check_slot_limit,
                                   check_tiny_tasks_reach_the_static_allocation, check_weights_are_respected)
from fairshare.conformance.workloads import drf_41
from fairshare.policies import REGISTRY, make_policy

DRF = REGISTRY["drf"]
HDRF = REGISTRY["hdrf"]
SLOTS = REGISTRY["slots"]


class SorterWrapper:
    """Delegates everything to the policy's real sorter; subclasses override one thing."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, attr):
        return getattr(self._inner, attr)


# --- weights ---------------------------------------------------------------------------------

class WeightBlindSorter(SorterWrapper):
    def add_job(self, name, queue, weight, demand):
        self._inner.add_job(name, queue, 1.0, demand)  # the defect: every job weighs 1


class WeightBlindDRF(DRF):
    def online(self, *args, **kwargs):
        return WeightBlindSorter(super().online(*args, **kwargs))


class QueueWeightBlindHDRF(HDRF):
    """Sees a queue tree with every weight 1 (a sorter built from the queue names only)."""

    def online(self, resources, queues, capacity, **kwargs):
        from fairshare.model.queues import QueueTree

        flat = QueueTree.build([(p, 1.0, queues[p].order) for p in queues.paths if p])
        return super().online(resources, flat, capacity, **kwargs)


# --- capacity --------------------------------------------------------------------------------

class SlotCountingDRF(DRF):
    """Declares slot scheduling (8 tasks a node) while meaning to be DRF: the pool then
    places by slot count and stops checking the tasks' resources."""

    def slots_per_node(self):
        return 8


class PicksAnyJobSorter(SorterWrapper):
    def pick(self, runnable, now=0.0):
        # the defect: returns the first known job without asking whether it can run
        # (the engine's own assertion must turn that into a failure, not a launch)
        return next(iter(self._inner.jobs), None)

    def pick_among(self, names, runnable, now=0.0):
        return self.pick(runnable, now)


class PicksAnyJobDRF(DRF):
    def online(self, *args, **kwargs):
        return PicksAnyJobSorter(super().online(*args, **kwargs))


class DeclaresFewerSlots(SLOTS):
    """Tells the engine 2x its slots (read once, when the Scheduler is built), then
    declares its real count to everyone else."""

    _told_engine = False

    def slots_per_node(self):
        if not self._told_engine:
            self._told_engine = True
            return 2 * self.slots
        return self.slots


# --- determinism -----------------------------------------------------------------------------

class RotatingSorter(SorterWrapper):
    """Global state: the tie-break among runnable jobs rotates with a counter shared by
    every instance of the class, so a second, fresh run starts where the first ended."""

    turn = 0

    def pick(self, runnable, now=0.0):
        names = [n for n in self._inner.jobs if runnable(n)]
        if not names:
            return None
        RotatingSorter.turn += 1
        return names[RotatingSorter.turn % len(names)]

    def pick_among(self, names, runnable, now=0.0):
        return self.pick(lambda n: n in names and runnable(n), now)


class GlobalStateDRF(DRF):
    def online(self, *args, **kwargs):
        return RotatingSorter(super().online(*args, **kwargs))


class RandomTieSorter(SorterWrapper):
    """Unseeded randomness: a runnable job chosen by ``random.Random()`` (OS entropy)."""

    def __init__(self, inner):
        super().__init__(inner)
        self._rng = random.Random()

    def pick(self, runnable, now=0.0):
        names = [n for n in self._inner.jobs if runnable(n)]
        return self._rng.choice(names) if names else None

    def pick_among(self, names, runnable, now=0.0):
        return self.pick(lambda n: n in names and runnable(n), now)


class RandomDRF(DRF):
    def online(self, *args, **kwargs):
        return RandomTieSorter(super().online(*args, **kwargs))


# --- empty cluster, infeasible demand ----------------------------------------------------------

class PerResourceScaleDRF(DRF):
    """Precomputes 1 / capacity per resource: divides by zero when no node is up."""

    def online(self, resources, queues, capacity, **kwargs):
        self.scale = [1.0 / c for c in capacity]
        return super().online(resources, queues, capacity, **kwargs)


class RejectsOversizedSorter(SorterWrapper):
    """Validation by exception inside the core: a job needing more of a resource than the
    cluster has is refused with an error, which stops every other job too."""

    def __init__(self, inner, capacity):
        super().__init__(inner)
        self._capacity = capacity

    def add_job(self, name, queue, weight, demand):
        if any(d > c for d, c in zip(demand, self._capacity)):
            raise ValueError(f"job {name!r} needs more than the cluster has")
        self._inner.add_job(name, queue, weight, demand)


class RejectsOversizedDRF(DRF):
    def online(self, resources, queues, capacity, **kwargs):
        return RejectsOversizedSorter(super().online(resources, queues, capacity, **kwargs), capacity)


# --- reuse and the static limit ----------------------------------------------------------------

class CachedSorterDRF(DRF):
    """Builds its sorter once and hands the same one to every Scheduler."""

    _sorter = None

    def online(self, *args, **kwargs):
        if self._sorter is None:
            self._sorter = super().online(*args, **kwargs)
        return self._sorter


class FifoOnlineDRF(DRF):
    """DRF's static allocation, FIFO's online order."""

    def online(self, *args, **kwargs):
        return make_policy("fifo").online(*args, **kwargs)


# --- the static allocation ------------------------------------------------------------------------

class WeightBlindStaticDRF(DRF):
    """Allocates as if every job weighed 1."""

    def allocate(self, scenario, **kwargs):
        for jb in scenario.jobs:
            scenario = scenario.with_job(replace(jb, weight=1.0))
        return super().allocate(scenario, **kwargs)


class CountBlindDRF(DRF):
    """Drops ``respect_counts``: every job is taken to demand without end."""

    def allocate(self, scenario, *, respect_counts=False):
        return super().allocate(scenario)


def static_limit(factory):
    check_tiny_tasks_reach_the_static_allocation(factory, examples={"DRF Sec. 4.1": drf_41})


BROKEN = [
    # (broken policy, the check that must catch it, the unbroken policy that passes it)
    (WeightBlindDRF, check_job_weights_respected, DRF),
    (QueueWeightBlindHDRF, check_queue_weights_respected, HDRF),
    (SlotCountingDRF, check_capacity_never_exceeded, DRF),
    (PicksAnyJobDRF, check_capacity_never_exceeded, DRF),
    (DeclaresFewerSlots, check_slot_limit, SLOTS),
    (GlobalStateDRF, check_same_seed_same_launches, DRF),
    (RandomDRF, check_same_seed_same_launches, DRF),
    (PerResourceScaleDRF, check_empty_cluster_and_empty_queue, DRF),
    (RejectsOversizedDRF, check_infeasible_demand_reported_not_raised, DRF),
    (CachedSorterDRF, check_no_mutation_and_reusable, DRF),
    (FifoOnlineDRF, static_limit, DRF),
    (WeightBlindStaticDRF, check_weights_are_respected, DRF),
    (CountBlindDRF, check_counts_are_caps_with_respect_counts, DRF),
]


@pytest.mark.parametrize("broken, check, sound", BROKEN, ids=[b.__name__ for b, _, _ in BROKEN])
def test_a_broken_policy_fails_its_check(broken, check, sound):
    check(sound)  # the unbroken policy passes: the failure below is the defect's
    with pytest.raises(AssertionError):
        check(broken)


# --- gangs and priorities: rules of the engine, so the broken ones are schedulers --------
# (docs/architecture.md, "Where new code goes": a rule every policy must obey lives in
# engine/, and a policy cannot reach it. Each case breaks the scheduler the way a policy
# with that defect would act, and every registered online policy must then fail.)

def _first_member_only(classes, pending):
    """Starts one task of a gang: part of it."""
    return [j for j, p in enumerate(pending) if p > 0][:1]


def _pack_ignored(place_gang):
    return lambda pool, classes, members, demand, pack, running_on: place_gang(pool, classes, members, demand,
                                                                               None, running_on)


def _preempts_gang_tasks_singly(mp, sch):
    """A preemptor that sees a gang's tasks as single tasks (it takes one and leaves the
    rest), in a scheduler that does not stop the rest of a gang with it."""
    from fairshare.engine import preemption

    view = preemption.RunningTaskView
    mp.setattr(preemption, "RunningTaskView", lambda *fields: view(*fields[:5]))
    mp.setattr(sch.Scheduler, "fail", sch.Scheduler._fail_one)


BROKEN_SCHEDULERS = {
    "starts part of a gang": (lambda mp, sch: mp.setattr(sch, "gang_members", _first_member_only),
                              check_gangs_run_whole_and_packed),
    "ignores pack": (lambda mp, sch: mp.setattr(sch, "place_gang", _pack_ignored(sch.place_gang)),
                     check_gangs_run_whole_and_packed),
    "keeps a gang running when one of its tasks is lost": (
        lambda mp, sch: mp.setattr(sch.Scheduler, "fail", sch.Scheduler._fail_one), check_gangs_run_whole_and_packed),
    "preempts part of a gang": (_preempts_gang_tasks_singly, check_preemption_takes_gangs_whole),
    "ignores priorities": (lambda mp, sch: mp.setattr(sch.Scheduler, "_rank", lambda self, rt, demanding: None),
                           check_priority_order_within_queue),
}


@pytest.mark.parametrize("defect", sorted(BROKEN_SCHEDULERS))
@pytest.mark.parametrize("policy", ["drf", "hdrf", "fifo"])
def test_a_broken_gang_or_priority_rule_fails_its_check(defect, policy, monkeypatch):
    from fairshare.engine import scheduler

    breaks, check = BROKEN_SCHEDULERS[defect]
    check(lambda: make_policy(policy))  # sound: the failure below is the defect's
    breaks(monkeypatch, scheduler)
    with pytest.raises(AssertionError):
        check(lambda: make_policy(policy))
