"""The H-DRF sorter's node table stays as large as its live jobs on a stream of jobs
(``HDRFSorter._compact``: removed jobs' slots dropped, the others renumbered in order)
and each queue's heaps as large as its children in the table,
and the compaction changes no decision and no float: a stream of arrivals and departures
through many saturated sets decides as the reference sorter does and as the same sorter
that never compacts, with every share equal at every instant."""

from __future__ import annotations

import random
from unittest import mock

import pytest
from builders import job, q, scenario
from replay import replay

from fairshare.engine import Scheduler
from fairshare.policies import hdrf_online, make_policy
from fairshare.policies.machinery import compiled

RESOURCES = ("cpu", "mem", "gpu", "disk")
LEAVES = ("a.x", "a.y", "a.z.u", "a.z.v", "b", "c.w")


def stream(seed: int, jobs: int = 300):
    """Jobs arriving two per time unit, a few tasks each, demands with zeros (jobs block
    under different saturated sets) on a cluster they keep full: about 20 live at once,
    ``jobs`` in all."""
    rng = random.Random(seed)
    entries = []
    for i in range(jobs):
        demand = {r: (0 if rng.random() < 0.3 else rng.choice([0.5, 1, 2, 4])) for r in RESOURCES}
        if not any(demand.values()):
            demand[rng.choice(RESOURCES)] = 1
        entries.append(job(f"j{i}", demand, rng.choice(LEAVES), weight=rng.choice([1, 1, 2]),
                           count=rng.randint(1, 4), submit=i // 2))
    queues = [q("a", 1, q("x"), q("y", 2), q("z", 1, q("u"), q("v", 3))), q("b", 2), q("c", 1, q("w"))]
    nodes = [{"name": f"n{k}", "capacity": {r: 6 for r in RESOURCES}} for k in range(3)]
    return scenario(jobs=entries, queues=queues, nodes=nodes)


def run(sc, policy: str, *, reference: bool = False, seed: int = 0, half_life: float = 0.0):
    """The launches, the sorter's shares after every instant, and the node table's
    largest size against the most jobs live at once."""
    sorter = make_policy(policy).reference_sorter(sc.resources, sc.queues, sc.capacity) if reference else None
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy), sorter=sorter,
                      half_life=half_life)
    rng = random.Random(seed)
    lengths = {j.name: rng.choice([1, 2, 3, 5]) for j in sc.jobs}
    shares: list[dict[str, float]] = []
    sizes = {"slots": 0, "live": 0, "heap": 0}

    def observe(now: float) -> None:
        if reference:
            return
        shares.append(sched.sorter.shares())
        sizes["slots"] = max(sizes["slots"], len(sched.sorter.key))
        sizes["live"] = max(sizes["live"], len(sched.sorter.jobs))
        sizes["heap"] = max(sizes["heap"], *(len(heap) for view in sched.sorter.views
                                             for heap in (*view.pick_heap, *map(hdrf_online.pool_entries, view.pool_heap)) if heap))

    log = replay(sched, sc.jobs, lambda launch: lengths[launch.job], observe=observe)
    return log, shares, sizes


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("policy, half_life", [("hdrf", 0.0), ("capacity", 0.0), ("hdrf", 3.0)])
@pytest.mark.parametrize("seed", [0, 3])
def test_compaction_keeps_the_table_bounded_and_decides_the_same(monkeypatch, policy, half_life, seed, pure):
    # (with a half-life, decayed usage: the queues' history leaves are renumbered too)
    if not pure and not compiled.available():
        pytest.skip("the compiled core is not built")
    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1" if pure else "0")
    sc = stream(seed)
    queues = len(sc.queues)
    compactions: list[tuple[int, int]] = []  # (slots dropped, tombstones kept)
    original = hdrf_online.HDRFSorter._compact

    def counted(self):
        dropped = self.dropped
        original(self)
        compactions.append((self.dropped - dropped, self.tombstones))

    with mock.patch.object(hdrf_online, "COMPACT_MIN", 4), \
            mock.patch.object(hdrf_online.HDRFSorter, "_compact", counted):
        got, shares, sizes = run(sc, policy, seed=seed)
    with mock.patch.object(hdrf_online, "COMPACT_MIN", 10 ** 9):
        kept, kept_shares, kept_sizes = run(sc, policy, seed=seed)
    want, _, _ = run(sc, policy, reference=True, seed=seed)
    assert got == want and kept == want
    assert shares == kept_shares  # every share the same float, at every instant
    # many compactions ran, some keeping tombstones still pending in a view
    assert len(compactions) >= 5 and any(kept for _, kept in compactions), compactions
    # the table: a constant times the live jobs (the slots stay ever-growing without it)
    assert kept_sizes["slots"] >= queues + len(sc.jobs)
    assert sizes["slots"] <= queues + 4 * sizes["live"] + 16, (sizes, queues)
    # and a queue's heaps, by its children in the table (a queue has at most 3 sub-queues)
    for got_sizes in (sizes, kept_sizes):
        assert got_sizes["heap"] <= 4 * (got_sizes["live"] + 3) + 17, got_sizes


def test_compaction_renumbers_in_order_and_keeps_the_views_heaps_current():
    # the table after a compaction: the live jobs in their arrival order, every index,
    # child list and heap entry pointing at the renumbered slots
    sc = stream(1, jobs=120)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
    sorter = sched.sorter
    rng = random.Random(1)
    lengths = {j.name: rng.choice([1, 2, 3, 5]) for j in sc.jobs}
    checked = []

    def check(now: float) -> None:
        names = [k for k in sorter.key[len(sc.queues):] if k]
        assert names == sorted(names, key=lambda n: int(n[1:])), names  # arrival order kept
        assert all(sorter.key[v] == name for name, v in sorter.index.items())
        for p, children in enumerate(sorter.children):
            assert all(sorter.parent[c] == p for c in children)
            assert list(children) == sorted(children)
        for view in sorter.views:
            for heap in (*view.pick_heap, *map(hdrf_online.pool_entries, view.pool_heap)):
                assert all(0 <= e[-1] < len(sorter.key) for e in heap or ())
        checked.append(sorter.dropped)

    with mock.patch.object(hdrf_online, "COMPACT_MIN", 4):
        replay(sched, sc.jobs, lambda launch: lengths[launch.job], observe=check)
    assert checked[-1] > 0



@pytest.mark.parametrize("pure", [False, True])
def test_a_queues_heaps_stay_bounded_by_its_children_in_the_table(monkeypatch, pure):
    # 3,000 jobs pass through two queues, at most 5 of them in the table at a time, each
    # starting and ending three tasks with a descent after each: the heaps drop their
    # stale entries past 4 x (children in the table) + 16, not 4 x (children ever) + 16
    # (on the Google 2011 replay, a busy queue's heaps grew with every job it ever had)
    if not pure and not compiled.available():
        pytest.skip("the compiled core is not built")
    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1" if pure else "0")
    sc = scenario(capacity={"cpu": 100, "mem": 100}, queues=[q("a"), q("b")])
    sorter = make_policy("hdrf").online(sc.resources, sc.queues, sc.capacity)
    live: list[str] = []
    largest = 0
    for i in range(3000):
        name = f"j{i}"
        sorter.add_job(name, "a" if i % 3 else "b", 1.0, (1.0, 2.0 if i % 2 else 0.5))
        live.append(name)
        events = [(sorter.allocated, name)] * 3
        if len(live) > 4:
            events += [(sorter.released, live[0])] * 3
        for event, job_name in events:
            event(job_name, (1.0, 1.0))
            assert sorter.pick(lambda _name: True) is not None
        if len(live) > 4:
            sorter.remove_job(live.pop(0))
        view = sorter.views.current
        largest = max(largest, *(len(heap) for heap in (*view.pick_heap, *map(hdrf_online.pool_entries, view.pool_heap)) if heap))
    assert largest <= 4 * 5 + 17, largest

