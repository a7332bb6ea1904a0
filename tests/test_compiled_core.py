"""The compiled sorter core (``policies/machinery/_hdrf_kernel.pyx``) against its
pure-Python reference, decision by decision and float by float.

``machinery/compiled.py`` gives the H-DRF sorters the compiled view maintenance where it is
built and the pure-Python methods otherwise (or with ``FAIRSHARE_PURE_PYTHON=1``). Here
both cores run in one process: each against the per-decision reference sorter (as
``test_online_parity.py`` runs the default one), and the two in lockstep on a full
cluster, where every share, usage and running sum of the view decided with must be the
same float. Without the compiled core (no C compiler at install time) its cases skip
and the pure-Python ones still run.
"""

from __future__ import annotations

import gc
import hashlib
import heapq
import inspect
import math
import os
import random
import struct
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay import lockstep
from strategies import scenarios
from test_candidates import random_tree
from test_online_parity import CASES, run, steady_run, steady_scenario

from fairshare.engine import Scheduler
from fairshare.policies import make_policy
from fairshare.policies import hdrf_online
from fairshare.policies.machinery import compiled, descent
from fairshare.policies.machinery.ties import DIGITS

#: the policies whose sorter is ``HDRFSorter``, the one the compiled core serves
HDRF_CASES = [(policy, options) for policy, options in CASES if policy in ("hdrf", "hdrf-naive", "capacity")]
CORES = ["compiled", "pure-python"]
needs_compiled = pytest.mark.skipif(not compiled.available(), reason=f"{compiled.describe()}")
_hdrf_kernel = compiled._hdrf_kernel  # (None where it is not built: those cases skip)


@pytest.fixture(params=CORES)
def core(request, monkeypatch):
    """Sorters built in this test use the given core (``FAIRSHARE_PURE_PYTHON``)."""
    if request.param == "compiled":
        if not compiled.available():
            pytest.skip(compiled.describe())
        monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
    else:
        monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1")
    return request.param


def test_the_core_is_built_where_a_compiler_is():
    # `make test` sets FAIRSHARE_REQUIRE_COMPILED=1 where a C compiler and the Python
    # headers are present (compiled.compiler_present): there the install must have built it
    if os.environ.get("FAIRSHARE_REQUIRE_COMPILED") != "1":
        pytest.skip("FAIRSHARE_REQUIRE_COMPILED is not 1 (make test sets it where a compiler is)")
    assert compiled.available(), compiled.describe()


@pytest.mark.parametrize("method", sorted(compiled.PORTED_FROM))
def test_the_kernel_ports_the_methods_as_they_are(method):
    # the compiled core repeats these methods statement for statement: one changed (a
    # merge, a fix) must be changed in _hdrf_kernel.pyx too before the digest is renewed
    owner, name = method.split(".")
    source = inspect.getsource(getattr(descent if owner == "descent" else getattr(hdrf_online, owner), name))
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    assert digest == compiled.PORTED_FROM[method], \
        f"{method} changed since _hdrf_kernel.pyx ported it: mirror the change there, then set its digest to {digest}"


def test_the_sorter_uses_the_core_the_environment_asks_for(monkeypatch):
    sc = steady_scenario(0)

    def replay_of_a_new_sorter():
        sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
        return sched.sorter, sched.sorter.views._replay

    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1")
    sorter, replay_view = replay_of_a_new_sorter()
    assert replay_view == sorter._propagate
    assert sorter.views._rebuild == sorter._rebuild
    assert sorter._pick_among_tree is descent.pick_among_tree
    assert sorter._renew_pick_entries is descent.renew_pick_entries
    assert "FAIRSHARE_PURE_PYTHON is set" in compiled.describe()
    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "0")  # ("0" does not force it)
    sorter, replay_view = replay_of_a_new_sorter()
    assert (replay_view != sorter._propagate) == compiled.available()
    assert (sorter.views._rebuild != sorter._rebuild) == compiled.available()
    assert (sorter._pick_among_tree is not descent.pick_among_tree) == compiled.available()
    assert (sorter._renew_pick_entries is not descent.renew_pick_entries) == compiled.available()
    assert ("sorter core: compiled" in compiled.describe()) == compiled.available()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_jobs=8, counts=True), seed=st.integers(0, 100))
@pytest.mark.parametrize("policy, options", HDRF_CASES)
def test_each_core_matches_the_reference(core, policy, options, sc, seed):
    assert run(sc, sc.cluster.nodes, policy, options, seed=seed) == \
        run(sc, sc.cluster.nodes, policy, options, reference=True, seed=seed)


@pytest.mark.parametrize("seed", [0, 2, 4, 7])  # (seeds whose clusters saturate in several ways)
def test_each_core_matches_the_reference_on_a_full_cluster(core, seed):
    sc = steady_scenario(seed)
    want, _ = steady_run(sc, "hdrf", reference=True, seed=seed, plain=False)
    got, seen = steady_run(sc, "hdrf", reference=False, seed=seed, plain=True)
    assert got == want
    assert len(seen["sets"]) >= 3 and seen["batches"] >= 20, seen  # (batched catch-ups ran)


def view_floats(sorter) -> tuple:
    """The current view, caught up, as exact bits: every share, usage and running sum."""
    view = sorter.view
    # (a job node has no running sums: None)
    bits = lambda xs: None if xs is None else [x.hex() if isinstance(x, float) else x for x in xs]  # noqa: E731
    # (usage and contributions: every node's row of the flat tables, hdrf_online._View)
    return (bits(view.share), bits(view.usage), [bits(s) for s in view.s1],
            [bits(s) for s in view.s2], bits(view.low), list(view.low_set), list(view.unblocked),
            # (the pool heaps as lists: the kernel sifts them as ``heapq`` does)
            [heap and [(bits([x])[0], *rest) for x, *rest in hdrf_online.pool_entries(heap)] for heap in view.pool_heap],
            list(view.contrib_in), bits(view.contrib_vec), list(view.pool_version), list(view.updates))


@needs_compiled
@pytest.mark.parametrize("policy, options", HDRF_CASES)
def test_compiled_and_pure_python_hold_the_same_floats_event_by_event(monkeypatch, policy, options):
    sc = steady_scenario(4)
    scheds = {}
    for name in CORES:
        monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1" if name == "pure-python" else "0")
        scheds[name] = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy, **options))
        for job in sc.jobs:
            scheds[name].submit(job, 0.0)
    fast, pure = scheds["compiled"], scheds["pure-python"]
    assert fast.sorter.views._replay != fast.sorter._propagate  # (each runs the core meant)
    assert pure.sorter.views._replay == pure.sorter._propagate
    assert fast.sorter.views._rebuild != fast.sorter._rebuild
    assert pure.sorter.views._rebuild == pure.sorter._rebuild
    launches = 0
    for k, got in lockstep(fast, pure, 300, seed=4):
        assert view_floats(fast.sorter) == view_floats(pure.sorter), k
        launches += len(got)
    assert launches > 300


@pytest.mark.parametrize("core", CORES)
def test_a_copied_scheduler_decides_as_the_original(monkeypatch, core):
    """A deep copy of a scheduler whose views have caught up (``explain`` and ``forecast``
    probe one) decides as the original: the copy's views hold no compiled batch (its
    buffers are the original's, ``_Batch.__reduce__``) and make their own."""
    import copy

    if core == "compiled" and not compiled.available():
        pytest.skip("the compiled core is not built")
    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1" if core == "pure-python" else "0")
    sc = steady_scenario(4)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
    for job in sc.jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)
    for k, _ in lockstep(sched, copy.deepcopy(sched), 20, seed=4):
        pass  # (the views catch up, the compiled ones make their batches)
    batches = [getattr(view, "_kernel_batch", None) for view in sched.sorter.views]
    assert any(batches) == (core == "compiled")
    twin = copy.deepcopy(sched)
    assert not any(getattr(view, "_kernel_batch", None) for view in twin.sorter.views)
    launches = 0
    for k, got in lockstep(sched, twin, 200, seed=4):
        assert view_floats(sched.sorter) == view_floats(twin.sorter), k
        launches += len(got)
    assert launches > 100


def test_a_descent_leaves_no_cyclic_garbage(core):
    """Each descent's closures are freed by reference counting (``descend_tree`` breaks its
    recursion's cycle), not left for the cyclic collector: on the steady state they were
    most of what set off its collections."""
    sc = steady_scenario(2)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
    sched.pick_among_max = -1  # (every decision a descent)
    sched.freed_scan_max = -1
    for job in sc.jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)
    names = list(sched.sorter.index)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        asked: list[str] = []
        for target in names:
            sched.sorter.pick(lambda name: asked.append(name) or name == target)
        unreachable = gc.collect()
    finally:
        if was_enabled:
            gc.enable()
    assert len(asked) >= len(names)  # (every descent ran down to a job)
    assert unreachable == 0


@needs_compiled
def test_the_kernels_view_tuples_are_off_the_cyclic_collector(monkeypatch):
    """The tuples the kernel makes for a view (pick-heap entries) are untracked at once
    (``_hdrf_kernel.atomic``); the same values as the reference's (the lockstep test
    above). Usage, contributions and the pool heaps are typed arrays: no object per node."""
    monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
    sc = steady_scenario(3)
    was_enabled = gc.isenabled()
    gc.disable()  # (a collection would untrack them too: none runs here)
    try:
        sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
        for job in sc.jobs:
            sched.submit(job, 0.0)
        sched.schedule(0.0)
        view = sched.sorter.view
        for p in list(view.deferred):  # (every heap's renewal, as descents reading them make)
            sched.sorter._renew_deferred(view, view.deferred.pop(p))
    finally:
        if was_enabled:
            gc.enable()
    queues = [v for v in range(1, len(sched.sorter.key)) if not sched.sorter.is_job[v]]
    entries = [e for p in queues for e in view.pick_heap[p]]
    assert queues and entries
    assert not any(gc.is_tracked(t) for t in entries)


# --- the candidates' comparison and the pick-heap renewal (``machinery/descent.py``) -----------

#: shares that tie after rounding to DIGITS (0.1 and 0.1 + 1e-14) and some that do not
SHARES = [0.0, 0.1, 0.1 + 1e-14, 0.25, 0.5, 0.5 - 3e-13, 1 / 3]


def keyed_tree(rng: random.Random, n: int):
    """``random_tree`` with its index by name and random keys ``(share, running, position)``
    (positions among siblings)."""
    parent, kids, is_job, key, live = tree = random_tree(rng, n)
    share = [rng.choice(SHARES) for _ in range(n)]
    running = [rng.randint(0, 2) for _ in range(n)]
    position = [kids[parent[v]].index(v) if v else 0 for v in range(n)]
    return tree, {key[v]: v for v in range(n)}, (share, running, position)


def walk_among(pick, names: list[str], tree: dict, keys: tuple, runnable_set: set[str], with_tables: bool = True):
    """``pick`` (a ``pick_among_tree``) among ``names`` on ``tree`` (its ``index``,
    ``parent``, ``live`` and ``fifo_jobs``), the keys from ``keys`` (``share, running,
    position``): its answer and what it called (keys read, catch-ups, runnable checks)."""
    share, running, position = keys
    calls = {"keys": 0, "ready": 0, "runnable": []}

    def node_key(v: int) -> tuple:
        calls["keys"] += 1
        return (round(share[v], 12), running[v], position[v])

    def ready() -> None:
        calls["ready"] += 1

    def runnable(name: str) -> bool:
        calls["runnable"].append(name)
        return name in runnable_set

    got = pick(names, **tree, node_key=node_key, runnable=runnable,
               tables=(share, running, position, ready) if with_tables else None)
    return got, calls


@needs_compiled
@pytest.mark.parametrize("seed", range(60))
def test_the_compiled_candidate_walk_is_the_reference(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 40)
    (parent, kids, is_job, key, live), index, (share, running, position) = keyed_tree(rng, n)
    fifo = {v for v in range(1, n) if kids[v] and rng.random() < 0.3}
    runnable_set = {key[v] for v in range(n) if is_job[v] and rng.random() < 0.5}
    # candidates: the runnable jobs and others (a lowest one not runnable takes the slow path)
    names = sorted(runnable_set | {key[v] for v in range(n) if is_job[v] and rng.random() < 0.5})
    rng.shuffle(names)

    def fifo_jobs(v: int):
        return [c for c in kids[v] if is_job[c]] if v in fifo else None

    tree = dict(index=index, parent=parent, live=live, fifo_jobs=fifo_jobs)
    want, ref_calls = walk_among(descent.pick_among_tree, names, tree, (share, running, position), runnable_set)
    for with_tables in (True, False):
        got, calls = walk_among(_hdrf_kernel.pick_among_tree, names, tree, (share, running, position), runnable_set,
                                with_tables)
        assert got == want
        assert calls["runnable"] == ref_calls["runnable"]  # the same checks, in the same order
        if with_tables:
            # the catch-up runs once, and only where the reference read a key first
            assert calls["ready"] == (1 if ref_calls["keys"] else 0)
        else:
            assert calls["keys"] == ref_calls["keys"]


@needs_compiled
@pytest.mark.parametrize("seed", range(60))
def test_the_compiled_candidate_walk_without_fifo_queues_is_the_reference(seed):
    # no FIFO queue (``fifo_jobs`` an empty dict's ``get``, as the sorters pass it): the
    # kernel's walk keeps the candidates' paths in per-node marks (``among_by_marks``);
    # names repeat, some candidates are not demanding, shares are a view's doubles or a list
    rng = random.Random(seed)
    tables, index, keys = keyed_tree(rng, rng.randint(3, 60))
    parent, _kids, is_job, key, live = tables
    jobs = [name for name, job in zip(key, is_job) if job]
    runnable_set = {name for name in jobs if rng.random() < 0.5}
    names = [name for name in jobs if name in runnable_set or rng.random() < 0.5]
    names += rng.sample(names, min(len(names), rng.randint(0, 3)))  # (repeated names)
    rng.shuffle(names)
    if seed % 2:
        keys = (array("d", keys[0]), *keys[1:])
    tree = dict(index=index, parent=parent, live=live, fifo_jobs={}.get)
    outcomes = []
    for pick in (descent.pick_among_tree, _hdrf_kernel.pick_among_tree, _hdrf_kernel.pick_among_tree):
        got, calls = walk_among(pick, names, tree, keys, runnable_set)
        outcomes.append((got, calls["runnable"], bool(calls["keys"] or calls["ready"])))
    # the same pick after the same checks, caught up iff a key was read; and again (the
    # marks are cleared for the next call)
    assert outcomes[0] == outcomes[1] == outcomes[2]


@needs_compiled
@pytest.mark.parametrize("seed", range(20))
def test_a_candidate_walk_begun_inside_another_gives_both_the_reference(seed):
    # the walk without FIFO queues keeps its marks in module-wide scratch arrays and calls
    # back ``ready`` (Python code) while it holds them: another walk begun then (a nested
    # call here; in a live service another thread's, a forecast on a copy of the engine)
    # must not use or clear them. Each gives the reference's answer
    rng = random.Random(seed)
    walks = []
    for _ in range(2):
        tables, index, keys = keyed_tree(rng, rng.randint(8, 60))
        parent, _kids, is_job, key, live = tables
        jobs = [name for name, job in zip(key, is_job) if job]
        runnable_set = {name for name in jobs if rng.random() < 0.7}
        names = [name for name in jobs if rng.random() < 0.8]
        rng.shuffle(names)
        walks.append((names, dict(index=index, parent=parent, live=live, fifo_jobs={}.get), keys, runnable_set))
    want = [walk_among(descent.pick_among_tree, *walk)[0] for walk in walks]
    inner_got = []

    def nested(names, tree, keys, runnable_set):
        share, running, position = keys

        def ready() -> None:  # the outer walk's catch-up runs the inner walk, once
            if not inner_got:
                inner_got.append(walk_among(_hdrf_kernel.pick_among_tree, *walks[1])[0])

        return _hdrf_kernel.pick_among_tree(names, **tree, node_key=lambda v: (round(share[v], 12), running[v],
                                                                                 position[v]),
                                            runnable=lambda name: name in runnable_set,
                                            tables=(share, running, position, ready))

    outer_got = nested(*walks[0])
    if inner_got:  # (the outer walk read a key: its catch-up ran the inner one)
        assert inner_got == [want[1]]
    assert outer_got == want[0]
    # and the scratch is free again: a walk after both takes the marks and agrees
    assert walk_among(_hdrf_kernel.pick_among_tree, *walks[1])[0] == want[1]


@needs_compiled
def test_the_compiled_candidate_walk_makes_no_container_per_candidate():
    # without FIFO queues the paths are marks in C integers, not a dict of lists: a call
    # among 400 candidates adds a handful of objects the cyclic collector tracks, not one
    # per candidate's queue (each of them a young object a collection walks)
    rng = random.Random(7)
    n = 2000
    parent = [-1] + [rng.randrange(0, 1 + min(k - 1, 100)) for k in range(1, n)]  # (100 queues, 1,899 jobs)
    is_job = [v > 100 for v in range(n)]
    key = [f"v{v}" for v in range(n)]
    index = {name: v for v, name in enumerate(key)}
    live = [1] * n
    share = hdrf_online.doubles(n)
    running, position = [0] * n, list(range(n))
    names = [key[v] for v in rng.sample(range(101, n), 400)]

    def pick() -> str | None:
        return _hdrf_kernel.pick_among_tree(names, index=index, parent=parent, live=live, node_key=None,
                                            fifo_jobs={}.get, runnable=lambda name: True,
                                            tables=(share, running, position, lambda: None))

    want = descent.pick_among_tree(names, index=index, parent=parent, live=live,
                                   node_key=lambda v: (round(share[v], DIGITS), running[v], position[v]),
                                   fifo_jobs={}.get, runnable=lambda name: True)
    assert pick() == want
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        pick()
        made = gc.get_count()[0] - before
    finally:
        gc.enable()
    assert made < 10


@needs_compiled
@pytest.mark.parametrize("seed", range(20))
def test_the_compiled_pick_entry_renewal_is_the_reference(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 30)
    parent, kids, is_job, key, live = random_tree(rng, n)
    n_kids = [len(k) for k in kids]
    present = [k if rng.random() < 0.9 else "" for k in key]  # (some removed: tombstones)
    states = []
    for renew in (descent.renew_pick_entries, _hdrf_kernel.renew_pick_entries):
        r = random.Random(seed)
        heaps: list[list] = [[] for _ in range(n)]
        version = [0] * n
        compacted = 0
        for k in range(100):  # enough rounds that some heaps outgrow 4 x children + 16: compaction
            if k in (10, 20):  # (as a view's rebuild does: empty heaps, every live node renewed)
                heaps = [[] for _ in range(n)]
            before = list(map(id, heaps))
            share = [r.choice(SHARES) for _ in range(n)]
            running = [r.randint(0, 2) for _ in range(n)]
            renewed = range(1, n) if k in (10, 20) else r.sample(range(1, n), r.randint(1, n - 1))
            repick = {v: None for v in renewed}
            renew(repick, heaps, version=version, share=share, running=running, position=list(range(n)),
                  live=live, present=present, parent=parent, kids=n_kids)
            assert not repick
            compacted += sum(a != b for a, b in zip(before, map(id, heaps)))  # (a compacted heap is a new list)
        assert compacted > 0
        # the current entries, lowest first (the compiled renewal may lay a heap out
        # differently and keep other stale entries: the descent pops the same current ones)
        current = [sorted(e for e in heap if e[3] == version[e[4]] and live[e[4]] > 0 and present[e[4]])
                   for heap in heaps]
        assert all(heap[0] == min(heap) for heap in heaps if heap)  # (still heaps)
        states.append((current, version))
    assert states[0] == states[1]
    assert any(states[0][0])


@needs_compiled
@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_jobs_walk_is_the_reference(seed):
    # a jobs-only queue's jobs tried by key: the same job, after the same runnable checks in
    # the same order (the compiled walk selects the lowest untried key, the reference sorts),
    # with tied shares, excluded jobs, shapes no longer live, and checks that clear a shape
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    jobs = rng.sample(range(n), rng.randint(0, n))
    share = [rng.choice(SHARES) for _ in range(n)]
    running = [rng.randint(0, 2) for _ in range(n)]
    position = rng.sample(range(n), n)  # (distinct among siblings)
    live = [rng.choice([0, 1, 1, 1]) for _ in range(n)]
    excluded = [rng.choice([0, 0, 0, 1]) for _ in range(n)] if rng.random() < 0.5 else None
    shape_mask = [1 << rng.randrange(3) for _ in range(n)]
    key = [f"j{c}" for c in range(n)]
    fails = set(rng.sample(range(n), rng.randint(0, n)))
    clears = {c: 1 << rng.randrange(3) for c in rng.sample(range(n), rng.randint(0, min(n, 2)))}
    results = []
    for walk, tables in ((descent.first_runnable_by_key, None), (_hdrf_kernel.first_runnable_by_key, None),
                         (_hdrf_kernel.first_runnable_by_key, (share, running, position))):
        alive, asked = [0b111], []

        def runnable(name):
            c = int(name[1:])
            asked.append(c)
            alive[0] &= ~clears.get(c, 0)
            return c not in fails

        got = walk(list(jobs), live=live, excluded=excluded, shape_mask=shape_mask, alive=alive, key=key,
                   runnable=runnable, node_key=lambda c: (round(share[c], DIGITS), running[c], position[c]),
                   tables=tables)
        results.append((got, asked))
    assert results[0] == results[1] == results[2]


def lazy_renewal_run(renew, seed: int, lazy_on: bool):
    """100 rounds of pick-entry renewals on a random tree, a key changing only with its
    node marked (the sorters' invariant), with ``lazy`` for some queues (``lazy_on``) and
    their deferred entries renewed when a random heap is "read" and at the end. Returns
    each heap's current entries without versions, the versions and the deferred nodes."""
    rng = random.Random(seed)
    n = rng.randint(3, 30)
    parent, kids, is_job, key, live = random_tree(rng, n)
    n_kids = [len(k) for k in kids]
    present = [k if rng.random() < 0.9 else "" for k in key]
    lazy = [bool(kids[v]) and rng.random() < 0.6 for v in range(n)] if lazy_on else None
    r = random.Random(seed)
    heaps: list[list] = [[] for _ in range(n)]
    version, deferred = [0] * n, {}
    share, running = [0.0] * n, [0] * n
    tables = dict(version=version, share=share, running=running, position=list(range(n)), live=live,
                  present=present, parent=parent, kids=n_kids)
    for _ in range(100):
        renewed = r.sample(range(1, n), r.randint(1, n - 1))
        for v in renewed:
            share[v], running[v] = r.choice(SHARES), r.randint(0, 2)
        renew({v: None for v in renewed}, heaps, lazy=lazy, deferred=deferred if lazy_on else None, **tables)
        read = r.randrange(n)  # (a descent reads this heap: its deferred entries first)
        if read in deferred:
            renew(deferred.pop(read), heaps, **tables)
    held = {p: sorted(nodes) for p, nodes in deferred.items()}
    for p in list(deferred):
        renew(deferred.pop(p), heaps, **tables)
    current = [sorted(e[:3] + e[4:] for e in heap if e[3] == version[e[4]] and live[e[4]] > 0 and present[e[4]])
               for heap in heaps]
    assert all(heap[0] == min(heap) for heap in heaps if heap)
    return current, version, held


def test_lazy_pick_renewal_gives_the_eager_heaps():
    # a heap renewed only when read holds, once read, the current entries the eager
    # renewal holds (same keys: a key changes only with its node marked); and the compiled
    # renewal defers and renews exactly as the reference
    waited = 0
    for seed in range(30):
        eager, _, _ = lazy_renewal_run(descent.renew_pick_entries, seed, lazy_on=False)
        lazy, version, held = lazy_renewal_run(descent.renew_pick_entries, seed, lazy_on=True)
        assert lazy == eager and any(eager), seed
        waited += sum(map(len, held.values()))
        if compiled.available():
            assert lazy_renewal_run(_hdrf_kernel.renew_pick_entries, seed, lazy_on=True) == (lazy, version, held)
    assert waited  # (some entries were still waiting at the end)


def rounding_cases(rng: random.Random) -> list[float]:
    """Shares of every magnitude the kernel's fast path takes (0 <= x < 1000), the decimal
    half-points of its 12-digit grid ((N + 0.5) / 10**12, which Python rounds half-even on
    the exact binary value) and their neighbours a few ulps away on both sides, and what it
    leaves to Python's ``round`` (negative, 1000 and up, not finite)."""
    shares = [rng.random() * 10 ** rng.randint(-15, 3) for _ in range(20_000)]
    near_half = []
    for _ in range(20_000):
        x = (rng.randint(0, 10 ** 15) + 0.5) / 10 ** 12
        for _ in range(rng.randint(0, 3)):
            x = math.nextafter(x, math.inf if rng.random() < 0.5 else -math.inf)
        near_half.append(x)
    edges = [0.0, -0.0, 5e-324, 5e-13, 1.5e-12, 2.5e-12, 0.5, 999.9999999999995, math.nextafter(1000.0, 0.0),
             1000.0, 1e300, -1e-13, -0.4e-12, -2.5, math.inf, -math.inf]
    return shares + near_half + edges + SHARES


@needs_compiled
def test_the_kernels_rounding_is_round_bit_for_bit():
    # ``rounded_share``'s integer path and its fall back to ``round``: the same double as
    # Python's ``round(x, 12)``, sign of zero included (compared as bytes, not by ``==``)
    assert DIGITS == 12
    for x in rounding_cases(random.Random(0)):
        assert struct.pack("<d", _hdrf_kernel.share_key(x)) == struct.pack("<d", round(x, DIGITS)), x
    assert math.isnan(_hdrf_kernel.share_key(math.nan))


@needs_compiled
def test_the_kernels_pick_heap_heapify_is_heapqs():
    # ``heap_heapify`` (the renewal's and the compaction's): the list ``heapq.heapify``
    # leaves, the same objects in the same places, sizes on both sides of heapq's own
    # cache-friendly switch (above 2,500 entries the kernel calls heapq itself)
    rng = random.Random(3)
    for size in [*range(12), 31, 64, 500, 2500, 2501, 4000]:
        for _ in range(3):
            entries = [(round(rng.random(), 1), rng.randint(0, 3), rng.randint(0, 5), rng.randint(0, 9), c)
                       for c in range(size)]
            rng.shuffle(entries)
            expected, got = list(entries), list(entries)
            heapq.heapify(expected)
            _hdrf_kernel.pick_heap_heapify(got)
            assert all(a is b for a, b in zip(got, expected)) and len(got) == len(expected), size


@pytest.mark.parametrize("core", CORES)
def test_the_typed_pool_heaps_are_heapqs(core):
    """A pool heap's typed arrays (``hdrf_online.pool_heap``) are left in the layout
    ``heapq`` leaves a list of the entries in, by the reference's sifts
    (``pool_push``/``pool_pop``) and by the kernel's (``typed_push``/``typed_pop``/
    ``typed_heapify``): shares with ties, ints among them and a ``-0.0``."""
    import heapq

    if core == "compiled" and not compiled.available():
        pytest.skip("the compiled core is not built")
    rng = random.Random(1)
    shares = [0.25, 0.25, 0.5, 0.0, -0.0, 1, 2, 0.125]
    for _ in range(200):
        theirs: list[tuple] = []
        ops: list = []
        for _step in range(rng.randint(1, 60)):
            if theirs and rng.random() < 0.35:
                ops.append(None)
                heapq.heappop(theirs)
            elif rng.random() < 0.05:
                rng.shuffle(theirs)
                ops.append(("shuffle", list(theirs)))
                heapq.heapify(theirs)
            else:
                entry = (rng.choice(shares), rng.randint(0, 3), rng.randint(0, 5))
                ops.append(entry)
                heapq.heappush(theirs, entry)
        ours = hdrf_online.pool_heap()
        for op in ops:
            if isinstance(op, tuple) and op[0] == "shuffle":  # (a heap made anew: _compact_pool, a rebuild)
                ours = hdrf_online.pool_heap(op[1])
                if core == "compiled":
                    _hdrf_kernel.pool_heap_ops(ours, ["heapify"])
                else:
                    entries = hdrf_online.pool_entries(ours)
                    heapq.heapify(entries)
                    ours = hdrf_online.pool_heap(entries)
            elif core == "compiled":
                _hdrf_kernel.pool_heap_ops(ours, [op])
            elif op is None:
                hdrf_online.pool_pop(ours)
            else:
                hdrf_online.pool_push(ours, *op)
        assert hdrf_online.pool_entries(ours) == theirs
        assert [type(e[0]) for e in hdrf_online.pool_entries(ours)] == [float] * len(theirs)


@needs_compiled
def test_the_kernels_pick_heap_push_is_heapqs():
    """``heap_push`` leaves each list as ``heapq.heappush`` does: entries ``(share,
    running, position, version, node)`` with tied shares (one float object or equal
    ones, ``-0.0``, NaN), tied counts, and a non-int field compared by Python."""
    import heapq

    rng = random.Random(2)
    shared = 0.5
    shares = [shared, shared, 0.5, 0.0, -0.0, float("nan"), 0.75]
    for _ in range(200):
        ours, theirs = [], []
        entries = [(rng.choice(shares), rng.randint(0, 2), rng.choice([0, 1, 2.0]), rng.randint(0, 3),
                    rng.randint(0, 4)) for _ in range(rng.randint(1, 50))]
        for entry in entries:
            heapq.heappush(theirs, entry)
        _hdrf_kernel.pick_heap_push(ours, entries)
        assert list(map(id, ours)) == list(map(id, theirs))


def test_a_views_counters_are_c_integers():
    """A view's ``unblocked``, ``pool_version`` and ``updates`` are ``array('q')``
    (``machinery.views.counters``: the kernel reads them through their buffers), appended to
    as jobs arrive (``_compact`` squeezes them into arrays again: test_hdrf_compaction.py)."""
    from array import array

    view = hdrf_online._View(frozenset(), 5, 2)
    for table in (view.unblocked, view.pool_version, view.updates):
        assert isinstance(table, array) and table.typecode == "q" and list(table) == [0] * 5
    view.grow(2)
    assert len(view.updates) == 6


def test_a_views_per_node_state_is_typed_arrays():
    """A view's shares, pool minima and per-node vectors (usage, contributions) are C
    doubles and flags (``hdrf_online.doubles`` / ``flags``), a node's vector a row of m in
    one flat array, grown a row per job added (the kernel reads them through their
    buffers: no float object or tuple per node)."""
    from array import array

    view = hdrf_online._View(frozenset({1}), 5, 3)
    for table, typecode, length in ((view.share, "d", 5), (view.low, "d", 5), (view.low_set, "b", 5),
                                    (view.contrib_in, "b", 5), (view.usage, "d", 15), (view.contrib_vec, "d", 15)):
        assert isinstance(table, array) and table.typecode == typecode and list(table) == [0] * length
    view.grow(3)
    assert (len(view.share), len(view.usage), len(view.contrib_vec), len(view.low_set)) == (6, 18, 18, 6)


def test_the_makefiles_compiler_check_runs_before_the_package_is_installed():
    """The Makefile's ``compiler`` step runs ``python -P compiled.py`` before ``pip
    install``: with ``fairshare`` not importable it must answer ``compiler_present`` (exit
    0 or 1), not fail on an import (which made every fresh clone print a traceback and
    install gcc whether or not it had one)."""
    import subprocess
    import sys

    script = compiled.__file__
    # -I -S: no site-packages (so no editable install of fairshare), no PYTHONPATH
    done = subprocess.run([sys.executable, "-I", "-S", "-P", script], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == (0 if compiled.compiler_present() else 1), (done.returncode, done.stderr)
    probe = subprocess.run([sys.executable, "-I", "-S", "-c", "import fairshare"], capture_output=True, timeout=60)
    assert probe.returncode != 0  # (the check above really ran without the package)


@needs_compiled
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_catch_up_begun_inside_another_sorters_catch_up_leaves_both_exact(seed):
    # the compiled batch (``_hdrf_kernel.propagate``) keeps its marks in a module-wide
    # scratch and calls Python code while it holds them (a share function other than
    # ``hdrf_share``; ``views.every_child``), during which another engine's catch-up can
    # begin (in a live service, a forecast on a copy of the engine in an API thread). Here
    # one engine's share function runs a step of another engine, nested: both make the
    # launches each makes alone
    from test_online_parity import steady_scenario

    from fairshare.policies.hdrf import hdrf_share

    sc = steady_scenario(seed)
    steps = 60

    def engine():
        return Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))

    def start(sched):
        for job in sc.jobs:
            sched.submit(job, 0.0)
        return [(launch.job, launch.node) for launch in sched.schedule(0.0)]

    def step(sched, k):
        sched.finish(next(iter(sched.tasks)), float(k))
        return [(launch.job, launch.node) for launch in sched.schedule(float(k))]

    # each engine alone: its launches, and its view's exact floats after each step
    want, floats = [], []
    for _ in range(2):
        alone = engine()
        log, states = start(alone), []
        for k in range(1, steps + 1):
            log += step(alone, k)
            states.append(view_floats(alone.sorter))
        want.append(log)
        floats.append(states)

    outer, inner = engine(), engine()
    inner_log = start(inner)
    inner_steps = [0]
    nested = [0]
    busy = [False]

    def inner_step() -> None:
        inner_steps[0] += 1
        inner_log.extend(step(inner, inner_steps[0]))
        assert view_floats(inner.sorter) == floats[1][inner_steps[0] - 1]

    def share_running_another_engine(u, capacity, counted, weight):
        if not busy[0] and inner_steps[0] < steps:
            busy[0] = True
            nested[0] += 1
            inner_step()
            busy[0] = False
        return hdrf_share(u, capacity, counted, weight)

    outer.sorter.node_share = share_running_another_engine
    outer_log = start(outer)
    for k in range(1, steps + 1):
        outer_log += step(outer, k)
        assert view_floats(outer.sorter) == floats[0][k - 1], k
    while inner_steps[0] < steps:
        inner_step()
    assert nested[0] >= 40  # (inner steps ran inside an outer share computation)
    assert outer_log == want[0]
    assert inner_log == want[1]
