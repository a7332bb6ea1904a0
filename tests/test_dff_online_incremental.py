"""The DFF sorter's incremental arrivals and departures equal its rebuilds, bit for bit.

``DFFSorter`` updates Fair Resources below the changed path and re-sums only the queues
whose usage sums drifted when a job arrives or leaves (docs/performance.md, "DFF at trace
speed"); with a weight that does not sum exactly it falls back to rebuilding everything
from scratch, as it did on every arrival and departure before. Driven by the same random
events (nested weighted queues, demands like 0.1 that do not sum exactly, tasks starting
and finishing, jobs blocking, arriving and leaving, saturated sets changing), both modes
must give the same pick and the same shares (compared as floats, so bit-identical) after
every event. The Fair Resource work an arrival costs is counted too: it must not grow
with the jobs already running (issue 24). tests/test_online_parity.py holds the sorter
equal to the per-decision reference on scheduler runs.
"""

from __future__ import annotations

import random
from array import array
from itertools import accumulate
from operator import add

import pytest

from fairshare.model.queues import QueueTree
from fairshare.policies import dff, make_policy
from fairshare.policies.dff_online import DFFSorter, fold_on
from fairshare.policies.machinery import views

M = 3
# weights: integers and dyadic fractions (exact sums) for the incremental mode
TREE = [("a", 1.0, "fair"), ("a.x", 2.0, "fair"), ("a.y", 0.5, "fair"), ("b", 3.0, "fair"), ("c", 1.0, "fifo")]
QUEUES = ["a.x", "a.y", "b", "c"]
DEMANDS = [(0.1, 0.3, 0.0), (1.7, 0.0, 0.2), (0.0, 0.0, 0.0), (0.3, 2.9, 1.1), (2.0, 1.0, 0.0), (0.0, 0.7, 0.0)]


def sorters(capacity):
    tree = QueueTree.build(TREE)
    policy = make_policy("dff")
    fast = policy.online(("cpu", "mem", "gpu"), tree, capacity)
    slow = policy.online(("cpu", "mem", "gpu"), tree, capacity)
    slow.exact = False  # the rebuild-everything mode a non-dyadic weight selects
    return fast, slow


def random_events(rng: random.Random, steps: int):
    """(kind, args) events over a changing set of jobs; tasks use the job's demand."""
    jobs: dict[str, tuple[float, ...]] = {}
    running: dict[str, int] = {}
    serial = 0
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.25 or not jobs:
            serial += 1
            name = f"j{serial}"
            demand = rng.choice(DEMANDS)
            jobs[name], running[name] = demand, 0
            yield "add_job", (name, rng.choice(QUEUES), rng.choice([1.0, 2.0, 0.25]), demand)
            continue
        name = rng.choice(sorted(jobs))
        if roll < 0.35 and running[name] == 0:
            del jobs[name], running[name]
            yield "remove_job", (name,)
        elif roll < 0.65:
            running[name] += 1
            yield "allocated", (name, jobs[name])
        elif roll < 0.85 and running[name] > 0:
            running[name] -= 1
            yield "released", (name, jobs[name])
        elif roll < 0.93:
            yield "set_demanding", (name, rng.random() < 0.6)
        else:
            yield "set_saturated", (frozenset(r for r in range(M) if rng.random() < 0.3),)


@pytest.mark.parametrize("seed", range(30))
def test_incremental_arrivals_and_departures_equal_rebuilds(seed):
    rng = random.Random(seed)
    fast, slow = sorters((10.0, 12.0, 4.0))
    blocked = {f"j{k}" for k in range(0, 400, 7)}  # some jobs' tasks never fit

    def runnable(name):
        return name not in blocked

    arrivals_after_a_decision = 0
    decided = False
    for kind, args in random_events(rng, 300):
        for sorter in (fast, slow):
            getattr(sorter, kind)(*args)
        arrivals_after_a_decision += decided and kind in ("add_job", "remove_job")
        if rng.random() < 0.5:
            decided = True
            assert fast.pick(runnable) == slow.pick(runnable)
            assert fast.shares() == slow.shares()
    assert fast.pick(runnable) == slow.pick(runnable)
    assert fast.shares() == slow.shares()
    # the incremental path ran (no rebuild pending, several arrivals/departures after decisions)
    assert fast.exact and arrivals_after_a_decision > 10


def test_a_weight_that_does_not_sum_exactly_selects_rebuilds():
    tree = QueueTree.build(TREE)
    sorter = make_policy("dff").online(("cpu", "mem", "gpu"), tree, (10.0, 12.0, 4.0))
    assert sorter.exact
    sorter.add_job("j1", "b", 1.0, (1.0, 0.0, 0.0))
    assert sorter.exact
    sorter.add_job("j2", "b", 0.1, (1.0, 0.0, 0.0))  # 0.1 + 1.0 rounds
    assert not sorter.exact
    assert sorter.pick(lambda name: True) == "j1"  # (a tie broken by position, as always)


def counting_sorter(capacity, exact=True):
    """A DFF sorter whose Fair Resource step (``dff.child_fr``) and fairness (Def. 2) count
    their calls."""
    calls = {"child_fr": 0, "fairness": 0}

    def child_fr(*args):
        calls["child_fr"] += 1
        return dff.child_fr(*args)

    def fairness(*args):
        calls["fairness"] += 1
        return dff.fairness(*args)

    sorter = DFFSorter(3, QueueTree.build(TREE), capacity, update_fr=dff.update_fr, child_fr=child_fr,
                       fairness=fairness)
    sorter.exact = exact
    return sorter, calls


def fr_work_per_arrival(running: int, demanding_with_usage: int) -> tuple[list[int], list[int], dict, dict]:
    """Fill queue ``b`` with ``running`` one-task jobs that run (usage, no longer demanding)
    and ``demanding_with_usage`` jobs that run a task and want more (in four groups of
    weight and needs), then let 20 jobs arrive one at a time, each followed by a decision:
    the ``child_fr`` and ``fairness`` calls each arrival and decision cost, and the shares
    at the end of this sorter and of one rebuilding from scratch."""
    fast, calls = counting_sorter((1e6, 1e6, 1e6))
    slow, _ = counting_sorter((1e6, 1e6, 1e6), exact=False)

    def both(kind, *args):
        for sorter in (fast, slow):
            getattr(sorter, kind)(*args)

    shapes = [(1.0, (0.5, 1.0, 0.0)), (2.0, (0.5, 1.0, 0.0)), (1.0, (1.0, 0.0, 1.0)), (2.0, (0.3, 0.0, 0.7))]
    for k in range(running):
        demand = (0.1 * (k % 7 + 1), 1.0 + k % 3, 0.0)
        both("add_job", f"r{k}", "b", 1.0, demand)
        both("allocated", f"r{k}", demand)
        both("set_demanding", f"r{k}", False)
    for k in range(demanding_with_usage):
        weight, demand = shapes[k % len(shapes)]
        both("add_job", f"d{k}", "b", weight, demand)
        both("allocated", f"d{k}", demand)
    assert fast.pick(lambda name: True) == slow.pick(lambda name: True)
    child_fr_calls, fairness_calls = [], []
    for k in range(20):
        calls["child_fr"] = calls["fairness"] = 0
        both("add_job", f"new{k}", "b", 1.0, (1.0, 1.0, 0.0))
        assert fast.pick(lambda name: True) == slow.pick(lambda name: True)
        child_fr_calls.append(calls["child_fr"])
        fairness_calls.append(calls["fairness"])
    return child_fr_calls, fairness_calls, fast.shares(), slow.shares()


def test_fair_resource_catch_up_work_does_not_grow_with_the_jobs():
    """An arrival changes the FR of every sibling (DFF Alg. 1), but only the demanding
    siblings with usage have a fairness a decision reads, and jobs of one queue with the
    same weight and needs share one FR: the Fair Resource work per arrival and decision
    is the same for 40 running jobs as for 800 (it was one ``child_fr`` and one fairness
    per running sibling), and the shares stay those of the rebuild."""
    small_fr, small_fairness, small_fast, small_slow = fr_work_per_arrival(running=40, demanding_with_usage=8)
    large_fr, large_fairness, large_fast, large_slow = fr_work_per_arrival(running=800, demanding_with_usage=8)
    assert small_fast == small_slow and large_fast == large_slow
    assert large_fr == small_fr and large_fairness == small_fairness
    # per arrival: the FRs below the root (queues a, b, c; a's sub-queues are empty) and one
    # per (weight, needs) group of b's demanding jobs with usage (4)
    assert max(large_fr) <= 3 + len({(1.0, 0b011), (2.0, 0b011), (1.0, 0b101), (2.0, 0b101)})
    assert max(large_fairness) < 40


@pytest.mark.parametrize("seed", range(10))
def test_with_decayed_usage_incremental_equals_rebuilds(seed):
    """With a half-life (docs/policies.md, "Fairness with memory"): time moving restates
    every leaf (``_restate``), a finished job's history joins its queue's hidden leaf, and
    the catch-up must still give what rebuilding everything does, bit for bit."""
    rng = random.Random(seed)
    fast, slow = sorters((10.0, 12.0, 4.0))
    for sorter in (fast, slow):
        sorter.set_half_life(50.0)
    now = 0.0
    for kind, args in random_events(rng, 300):
        if rng.random() < 0.4:
            now += rng.choice([1.0, 7.5, 60.0])  # (the others share an instant)
        extra = (now,) if kind in ("allocated", "released") else ()
        for sorter in (fast, slow):
            getattr(sorter, kind)(*args, *extra)
        if rng.random() < 0.5:
            assert fast.pick(lambda name: True, now) == slow.pick(lambda name: True, now)
            assert fast.shares() == slow.shares()
    assert fast.pick(lambda name: True, now) == slow.pick(lambda name: True, now)
    assert fast.shares() == slow.shares()
    assert fast.exact and fast._history  # (the incremental path ran, with history leaves)
    assert set(fast.decay.entries) == set(slow.decay.entries)


@pytest.mark.parametrize("ttl", [views.VIEW_TTL_EVENTS, None])
def test_views_without_a_time_to_live_are_kept_until_the_cache_is_full(ttl):
    # the DFF sorter keeps its views with no time to live (a set coming back replays what
    # changed, never rebuilds because it was away); others drop a view unused for ttl events
    rebuilt = []
    cache = views.ViewCache(views.SaturatedView, rebuilt.append, lambda view, leaves: None, lambda: 100, ttl=ttl)
    cache.select(frozenset({0}))
    cache.select(frozenset({1}))
    for _ in range(2 * views.VIEW_TTL_EVENTS):
        cache.tick()
    assert {v.saturated for v in cache} == ({frozenset({0}), frozenset({1})} if ttl is None else {frozenset({1})})
    for k in range(views.MAX_VIEWS + 1):  # (the least recently used still goes)
        cache.select(frozenset({k + 2}))
    assert len(cache) == views.MAX_VIEWS and frozenset({0}) not in {v.saturated for v in cache}
    assert len(rebuilt) == views.MAX_VIEWS + 3


def test_the_dff_sorter_keeps_its_views_with_no_time_to_live():
    sorter = DFFSorter(3, QueueTree.build(TREE), (1.0, 1.0, 1.0), update_fr=dff.update_fr, child_fr=dff.child_fr,
                       fairness=dff.fairness)
    assert sorter.views.ttl is None


@pytest.mark.parametrize("seed", range(40))
def test_the_resum_fold_is_accumulates_bit_for_bit(seed):
    # ``dff_online.fold_on`` (NumPy's ``add.accumulate`` over the column's doubles) against
    # ``itertools.accumulate`` with ``operator.add`` on the same floats, from ``done`` on:
    # decimals that do not sum exactly, magnitudes far apart (the order decides what is
    # lost), cancellations, ints, and zeros of both signs; compared as the doubles' bytes
    rng = random.Random(seed)
    pool = [0.1, 0.3, 1.7, 3.152, 0.81, 1e16, -1e16, 1e-300, 2.0 ** 60, -0.0, 0.0, 7]
    values = [rng.choice(pool) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6) * 10.0 ** rng.randint(-20, 20)
              for _ in range(rng.randint(1, 300))]
    column = array("d", values)
    start = rng.choice([0.0, -0.0, 0.1, 1e16, rng.uniform(-5, 5)])
    done = rng.randrange(len(column))
    want = list(accumulate(values[done:], add, initial=start))[1:]
    assert fold_on(start, column, done) == array("d", want).tobytes()
