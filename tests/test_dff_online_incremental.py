"""The DFF sorter's incremental arrivals and departures equal its rebuilds, bit for bit.

``DFFSorter`` updates Fair Resources below the changed path and re-sums only the queues
whose usage sums drifted when a job arrives or leaves (docs/performance.md, "DFF at trace
speed"); with a weight that does not sum exactly it falls back to rebuilding everything
from scratch, as it did on every arrival and departure before. Driven by the same random
events (nested weighted queues, demands like 0.1 that do not sum exactly, tasks starting
and finishing, jobs blocking, arriving and leaving, saturated sets changing), both modes
must give the same pick and the same shares (compared as floats, so bit-identical) after
every event. tests/test_online_parity.py holds the sorter equal to the per-decision
reference on scheduler runs.
"""

from __future__ import annotations

import random

import pytest

from fairshare.model.queues import QueueTree
from fairshare.policies import make_policy

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
