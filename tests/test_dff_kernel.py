"""The compiled DFF view catch-up (``policies/machinery/_dff_kernel.pyx``) against its
pure-Python reference (``DFFSorter._replay``), decision by decision and entry by entry.

``machinery/compiled.py`` gives the DFF sorter the compiled catch-up where it is built and
the pure-Python method otherwise (or with ``FAIRSHARE_PURE_PYTHON=1``). Here both run in
one process: each against the per-decision reference sorter, and the two in lockstep on a
full cluster (with and without decayed usage, whose history leaves take the override's
other path), where every share, schedulable count, version and heap entry of every view
must be the same. Without the compiled core its cases skip and the pure-Python ones run.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import heapq
import inspect
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay import lockstep
from strategies import scenarios
from test_online_parity import run, steady_run, steady_scenario

from fairshare import policies
from fairshare.engine import Scheduler
from fairshare.policies import dff_online, make_policy
from fairshare.policies.machinery import compiled, descent

CORES = ["compiled", "pure-python"]
needs_compiled = pytest.mark.skipif(not compiled.dff_available(), reason="the compiled DFF catch-up is not built")


@pytest.fixture(params=CORES)
def core(request, monkeypatch):
    """Sorters built in this test use the given core (``FAIRSHARE_PURE_PYTHON``)."""
    if request.param == "compiled":
        if not compiled.dff_available():
            pytest.skip("the compiled DFF catch-up is not built")
        monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
    else:
        monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1")
    return request.param


@pytest.mark.parametrize("method", sorted(compiled.DFF_PORTED_FROM))
def test_the_kernel_ports_the_methods_as_they_are(method):
    # _dff_kernel.pyx repeats these methods statement for statement: one changed must be
    # changed there too before its digest is renewed
    # (a sorter's method by ``DFFSorter.name`` or ``OnlineSorter.name``, a policy
    # function by ``dff.name``)
    source = inspect.getsource(functools.reduce(getattr, method.split("."), dff_online if "Sorter" in method else policies))
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    assert digest == compiled.DFF_PORTED_FROM[method], \
        f"{method} changed since _dff_kernel.pyx ported it: mirror the change there, then set its digest to {digest}"


@pytest.mark.parametrize("env, compiled_runs", [("1", False), ("0", compiled.dff_available())])
def test_the_sorter_uses_the_core_the_environment_asks_for(monkeypatch, env, compiled_runs):
    # ("0" does not force the fallback: the compiled core runs wherever it is built)
    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, env)
    sc = steady_scenario(0)
    sorter = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("dff")).sorter
    assert (sorter.views._replay != sorter._replay) == compiled_runs
    assert (sorter._task_changed is not None) == compiled_runs
    # (the candidates' walk and the pick renewal are the H-DRF kernel's: ``compiled.tree_*``)
    assert (sorter._pick_among_tree is not descent.pick_among_tree) == (env == "0" and compiled.available())
    assert (sorter._renew_pick_entries is not descent.renew_pick_entries) == (env == "0" and compiled.available())


@needs_compiled
def test_a_sorter_with_another_fairness_runs_the_reference_task_start_and_end(monkeypatch):
    # the compiled task start and end compute ``dff.fairness``: any other formula (here
    # the same one, wrapped) must run ``allocated`` and ``released`` in Python
    monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
    sc = steady_scenario(0)
    policy = make_policy("dff")
    sorter = policy.online(sc.resources, sc.queues, (1.0,) * len(sc.resources))
    assert sorter._task_changed is not None
    other = dff_online.DFFSorter(len(sc.resources), sc.queues, (1.0,) * len(sc.resources),
                                 update_fr=policies.dff.update_fr, child_fr=policies.dff.child_fr,
                                 fairness=lambda usage, fr: policies.dff.fairness(usage, fr))
    assert other._task_changed is None


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_jobs=8, counts=True), seed=st.integers(0, 100))
def test_each_core_matches_the_reference(core, sc, seed):
    assert run(sc, sc.cluster.nodes, "dff", {}, seed=seed) == \
        run(sc, sc.cluster.nodes, "dff", {}, reference=True, seed=seed)


@pytest.mark.parametrize("seed", [0, 2, 4, 7])  # (seeds whose clusters saturate in several ways)
def test_each_core_matches_the_reference_on_a_full_cluster(core, seed):
    sc = steady_scenario(seed)
    want, _ = steady_run(sc, "dff", reference=True, seed=seed, plain=False)
    for plain in (False, True):
        got, seen = steady_run(sc, "dff", reference=False, seed=seed, plain=plain)
        assert got == want, plain
        assert len(seen["sets"]) >= 3 and seen["batches"] >= 20, seen  # (batched catch-ups ran)


def view_state(sorter) -> tuple:
    """The current view, caught up, entry by entry: shares (as exact bits), schedulable
    counts, versions, the pool heaps' entries in heap order, the pick heaps' current
    entries lowest first as the last descent renewed them (``_renew_deferred``; the
    compiled renewal may lay a heap out otherwise and compact it at another time, its pops
    are the same: ``_hdrf_kernel.renew_pick_entries``), and the nodes whose pick entries
    wait for their parent's heap to be read (``deferred``), in the order marked."""
    view = sorter.views.current
    if view.pending:
        sorter.views.catch_up(view)
    pools = [[(share.hex(), ver, c) for share, ver, c in pool.entries()] for pool in view.pool_heap]
    picks = [sorted((key.hex(), *rest) for key, *rest in heap
                    if rest[2] == view.pick_version[rest[3]] and sorter.live[rest[3]] > 0 and sorter.alive[rest[3]])
             for heap in view.pick_heap]
    return (sorted(view.saturated), [x.hex() for x in view.share], list(view.unblocked), list(view.version),
            pools, picks, list(view.pick_version),
            {p: list(nodes) for p, nodes in view.deferred.items()})


def shared_state(sorter) -> tuple:
    """What every view reads and a task's start or end changes (``allocated``,
    ``released``, ``_leaf_changed``): usage and raw fairness as exact bits, the counts,
    each queue's jobs with usage (their columns, partial sums' validity, the demanding
    ones), the queues whose sums ran, the views' pending nodes, each job's own usage and
    running tasks."""
    def bits(row):
        return [float(x).hex() for x in row]
    return ([bits(row) for row in sorter.usage], bits(sorter.raw), list(sorter.running), list(sorter.live),
            [list(u) for u in sorter.used], [[bits(c) for c in cols] for cols in sorter.used_columns],
            list(sorter.used_sums_valid), [list(d) for d in sorter.used_demanding], list(sorter.drifted),
            {v: list(view.pending) for v, view in enumerate(sorter.views.views)},
            {name: (bits(job.usage), job.running) for name, job in sorter.jobs.items()})


def finite_jobs(sc):
    """``sc`` with every third job's tasks bounded (3 each): jobs finish and leave, and
    with decayed usage their history joins a hidden leaf of their queue."""
    jobs = [dataclasses.replace(job, classes=tuple(dataclasses.replace(c, count=3) for c in job.classes))
            if k % 3 == 0 else job for k, job in enumerate(sc.jobs)]
    return dataclasses.replace(sc, jobs=tuple(jobs))


@needs_compiled
@pytest.mark.parametrize("half_life", [0.0, 30.0])
def test_compiled_and_pure_python_hold_the_same_views_event_by_event(monkeypatch, half_life):
    sc = finite_jobs(steady_scenario(4))
    scheds = {}
    for name in CORES:
        monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1" if name == "pure-python" else "0")
        scheds[name] = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("dff"), half_life=half_life)
        for job in sc.jobs:
            scheds[name].submit(job, 0.0)
    fast, pure = scheds["compiled"], scheds["pure-python"]
    assert fast.sorter.views._replay != fast.sorter._replay  # (each runs the core meant)
    assert pure.sorter.views._replay == pure.sorter._replay
    assert fast.sorter._task_changed is not None  # (with decay it calls the reference)
    assert pure.sorter._task_changed is None
    if half_life:  # (the history leaves' path of the override is taken)
        assert fast.sorter.decay is not None
    launches = histories = 0
    left = len(fast.sorter.jobs)
    for k, got in lockstep(fast, pure, 300, seed=4):
        assert shared_state(fast.sorter) == shared_state(pure.sorter), k
        assert view_state(fast.sorter) == view_state(pure.sorter), k
        launches += len(got)
        histories += len(fast.sorter._history)
    assert launches > 300
    assert len(fast.sorter.jobs) < left  # (jobs finished and left the sorter)
    assert bool(histories) == bool(half_life)


def decided_view(sorter, view) -> tuple:
    """What decisions read of ``view`` (caught up): each present node's share (exact bits)
    and schedulable count, and each queue's override input, its pool's lowest current
    share (``_pool_min``)."""
    if view.pending:
        sorter.views.catch_up(view)
    present = list(sorter.alive_nodes)
    pool_mins = [sorter._pool_min(view, q) for q in range(sorter.queue_count)]
    return ([view.share[v].hex() for v in present], [view.unblocked[v] for v in present],
            [None if low is None else low.hex() for low in pool_mins])


@pytest.mark.parametrize("seed", [0, 2, 9, 11])  # (seeds whose sets differ by a few jobs' flags)
def test_a_set_first_seen_copies_the_current_view_and_equals_a_rebuild(core, monkeypatch, seed):
    # a set first seen starts from a copy of the current view, its differing jobs replayed
    # (``DFFSorter._new_view``), not from a rebuild over every node; caught up, it holds
    # what a view rebuilt from scratch holds, and so it does events later
    made, rebuilds = [], []
    new_view, rebuild = dff_online.DFFSorter._new_view, dff_online.DFFSorter._rebuild
    monkeypatch.setattr(dff_online.DFFSorter, "_new_view", lambda self, saturated: made.append(new_view(self, saturated))
                        or made[-1])
    monkeypatch.setattr(dff_online.DFFSorter, "_rebuild", lambda self, view: rebuilds.append(view) or rebuild(self, view))
    sc = steady_scenario(seed)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("dff"))
    for job in sc.jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)
    sorter, rng = sched.sorter, random.Random(seed)
    subsets = [[r for r in range(len(sc.resources)) if bits >> r & 1] for bits in range(1 << len(sc.resources))]
    for k, resources in enumerate(rng.sample(subsets, len(subsets)), 1):
        for step in ("set", "event"):
            if step == "set":  # (a set the cluster may not have reached: any set's view is defined)
                sorter.set_saturated(resources)
            else:
                sched.finish(rng.choice(sorted(sched.tasks)), float(k))
                sched.schedule(float(k))
            view = sorter.views.current
            fresh = dff_online._View(view.saturated, len(sorter.key), sorter.queue_count)
            rebuild(sorter, fresh)
            assert decided_view(sorter, view) == decided_view(sorter, fresh), (k, step)
    copies = [view for view in made if all(view is not rebuilt for rebuilt in rebuilds)]
    assert len(copies) >= 3, (len(made), len(copies))


def filled_view(seed: int) -> tuple:
    """A full cluster's DFF sorter after the fill: the sorter, its current view, what
    decisions read of it (caught up: ``decided_view``) and its demanding jobs."""
    sc = steady_scenario(seed)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("dff"))
    for job in sc.jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)
    sorter = sched.sorter
    view = sorter.views.current
    before = decided_view(sorter, view)
    return sorter, view, before, [v for v in sorter.alive_nodes if sorter.is_job[v] and sorter.live[v]]


@pytest.mark.parametrize("seed", [0, 2, 4])  # (seeds with jobs blocked after the fill)
def test_a_replay_keeps_the_pool_entries_that_would_not_change(core, seed):
    # a catch-up's batch re-pushes no node whose pool entry stands (schedulable before
    # and after with the same share, or unschedulable both times): replaying nodes that
    # did not change renews no version on the way up, and marks them for new pick
    # entries only; what decisions read stays the same
    sorter, view, before, jobs = filled_view(seed)
    assert {view.unblocked[v] for v in jobs} == {0, 1}  # (both kinds of job are replayed)
    versions = list(view.version)
    view.deferred.clear()
    sorter.views._replay(view, dict.fromkeys(jobs))
    assert list(view.version) == versions
    assert all(job in view.deferred[sorter.parent[job]] for job in jobs)
    assert decided_view(sorter, view) == before


@pytest.mark.parametrize("seed", [0, 2, 4])
def test_a_single_node_catch_up_keeps_the_pool_entries_that_would_not_change(core, seed):
    # a catch-up of one node takes the batch's path: a job replayed unchanged renews no
    # version on its way up (walked up alone, it and every ancestor were pushed again)
    sorter, view, before, jobs = filled_view(seed)
    for job in jobs:
        versions = list(view.version)
        sorter.views._replay(view, {job: None})
        assert list(view.version) == versions, job
        assert job in view.deferred[sorter.parent[job]]
    assert decided_view(sorter, view) == before


def pool_ops(seed: int) -> list:
    """Random pushes and pops on a pool: shares with ties (equal shares, zeros of both
    signs), versions with ties, so every field of the order decides somewhere."""
    rng = random.Random(seed)
    ops, size = [], 0
    for _ in range(400):
        if size and rng.random() < 0.4:
            ops.append(None)
            size -= 1
        else:
            ops.append((rng.choice([0.0, -0.0, 0.5, 1.25, 3.0, rng.random()]), rng.randrange(4), rng.randrange(50)))
            size += 1
    return ops


@pytest.mark.parametrize("seed", range(4))
def test_a_pool_heap_holds_what_a_heapq_list_of_tuples_holds(seed):
    # the typed-array pool (``PoolHeap``) moves entries as ``heapq`` moves the tuples:
    # the same entries in the same layout after every push and pop
    pool, heap = dff_online.PoolHeap(), []
    for entry in pool_ops(seed):
        if entry is None:
            pool.pop()
            heapq.heappop(heap)
        else:
            pool.push(*entry)
            heapq.heappush(heap, entry)
        assert [(s.hex(), v, c) for s, v, c in pool.entries()] == [(float(s).hex(), v, c) for s, v, c in heap]


@needs_compiled
@pytest.mark.parametrize("seed", range(4))
def test_the_kernel_sifts_a_pool_heap_as_the_reference_does(seed):
    # ``_dff_kernel``'s C sifts on the pool's arrays leave the layout ``PoolHeap``'s do,
    # op by op (a wrong comparison field or sift step reorders some entry)
    from fairshare.policies.machinery import _dff_kernel
    fast, pure = dff_online.PoolHeap(), dff_online.PoolHeap()
    for entry in pool_ops(seed):
        _dff_kernel.pool_heap_ops(fast, [entry])
        if entry is None:
            pure.pop()
        else:
            pure.push(*entry)
        assert [(s.hex(), v, c) for s, v, c in fast.entries()] == [(s.hex(), v, c) for s, v, c in pure.entries()]


@needs_compiled
@pytest.mark.parametrize("seed", [0, 2, 4])
def test_the_kernel_pushes_and_compacts_a_pool_as_the_reference_does(monkeypatch, seed):
    # re-keying a queue's children over and over grows its pool with stale entries until
    # it is compacted (past 4 x children + 16): the kernel's in-place compaction keeps
    # the reference's entries in the reference's layout, push by push
    monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
    from fairshare.policies.machinery import _dff_kernel
    sorter, view, _, jobs = filled_view(seed)
    queue = max(range(1, sorter.queue_count), key=lambda q: sum(sorter.parent[c] == q for c in jobs))
    children = [c for c in jobs if sorter.parent[c] == queue]
    assert len(children) >= 4
    fast, pure = view.derive(view.saturated), view.derive(view.saturated)
    for c in children:  # (all schedulable: every child's entry is kept by a compaction)
        fast.unblocked[c] = pure.unblocked[c] = 1
    compactions = []
    compact = sorter._compact_pool
    monkeypatch.setattr(sorter, "_compact_pool", lambda v, p: compactions.append(p) or compact(v, p))
    rng = random.Random(seed)
    for k in range(6 * (sorter.kids[queue] + 16)):
        child = children[k % len(children)]
        fast.share[child] = pure.share[child] = rng.random()  # (so the kept entries need the heapify)
        _dff_kernel.push_entries(sorter, fast, queue, [child])
        sorter._push(pure, queue, child)
        assert fast.pool_heap[queue].entries() == pure.pool_heap[queue].entries(), k
        assert list(fast.version) == list(pure.version), k
    assert compactions


@needs_compiled
@pytest.mark.parametrize("seed", [0, 2, 4])
def test_the_kernel_follows_the_pools_a_rebuild_puts_in_place(monkeypatch, seed):
    # the compiled replay keeps each queue's pool arrays between catch-ups; a rebuild of
    # the view (past a quarter of the nodes pending) puts new pools in place, and the next
    # replay must push into those: it leaves the pools the reference's replay leaves
    monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
    sorter, view, _, jobs = filled_view(seed)
    sorter.views._replay(view, dict.fromkeys(jobs))  # (the kernel's hold on the view made)
    assert view.kernel is not None
    sorter._rebuild(view)
    copy = view.derive(view.saturated)
    rng = random.Random(seed)
    changed = rng.sample(jobs, min(len(jobs), 6))
    for job in changed:
        sorter.raw[job] = rng.random() * 2  # (a share both views take: pushed again)
    sorter.views._replay(view, dict.fromkeys(changed))
    sorter._replay(copy, dict.fromkeys(changed))
    assert [pool.entries() for pool in view.pool_heap] == [pool.entries() for pool in copy.pool_heap]
    assert list(view.version) == list(copy.version)


def test_a_copied_scheduler_decides_as_the_original(core):
    """A deep copy of a scheduler whose views have caught up (``explain`` and ``forecast``
    probe one) decides as the original, view for view: the copy's views hold no compiled
    ``_Replay`` (its C pointers are into the original's buffers, ``_Replay.__reduce__``)
    and make their own at their first catch-up."""
    import copy

    sc = steady_scenario(4)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("dff"))
    for job in sc.jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)
    for _ in lockstep(sched, copy.deepcopy(sched), 20, seed=4):
        pass  # (the views catch up: the compiled ones keep their ``_Replay``)
    kept = [view.kernel for view in sched.sorter.views]
    assert any(kept) == (core == "compiled")
    twin = copy.deepcopy(sched)
    assert not any(view.kernel for view in twin.sorter.views)
    launches = 0
    for k, got in lockstep(sched, twin, 200, seed=4):
        assert view_state(sched.sorter) == view_state(twin.sorter), k
        launches += len(got)
    assert launches > 100
