"""The shape-restricted descent through queues (issue 24, round 8): at a node with queues
among its children, ``descend_tree`` takes only the children with a live shape
(``ShapeIndex.alive_queues_under`` and ``alive_jobs_under``) and tries them lowest key
first (``descent.first_runnable_child``, or its compiled port), instead of popping every
child of its pick heap and pushing back those that cannot run.

The trees here are shaped like the Google 2011 trace's (priority bands over many user
queues, most of whose jobs have no shape that may fit), with FIFO queues, mixed children
(jobs and queues), sub-queues, excluded jobs, stale heap entries and a runnable check that
finds a shape fitting nowhere midway. The walk must give the heap walk's pick after the
same runnable checks in the same order, and leave the heaps it no longer reads untouched.
"""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest
from test_candidates import _Index
from test_online_parity import steady_run

from fairshare.model import parse_scenario
from fairshare.policies.machinery import compiled, descent
from fairshare.policies.machinery.descent import descend_tree
from fairshare.policies.machinery.ties import DIGITS

_hdrf_kernel = compiled._hdrf_kernel
needs_compiled = pytest.mark.skipif(not compiled.available(), reason=f"{compiled.describe()}")
SHAPES = 8


def banded_tree(rng: random.Random):
    """Root -> 2-3 bands -> 5-40 user queues each (some with sub-queues, some FIFO, some
    jobs straight under a band) -> 0-4 jobs. Returns (parent, is_job, fifo)."""
    parent, is_job, fifo = [-1], [False], set()

    def add(p: int, job: bool) -> int:
        parent.append(p)
        is_job.append(job)
        return len(parent) - 1

    for _ in range(rng.randint(2, 3)):
        band = add(0, False)
        for _ in range(rng.randint(5, 40)):
            if rng.random() < 0.1:
                add(band, True)  # (a band with jobs among its queues: mixed children)
                continue
            user = add(band, False)
            if rng.random() < 0.2:
                fifo.add(user)
            for _ in range(rng.randint(0, 4)):
                if rng.random() < 0.15:
                    sub = add(user, False)
                    for _ in range(rng.randint(1, 3)):
                        add(sub, True)
                else:
                    add(user, True)
    return parent, is_job, fifo


def walks(name: str):
    """The walk ``descent.<name>``: the reference, and the compiled port with and without
    the key tables (without, it calls the reference)."""
    out = [pytest.param(getattr(descent, name), False, id="reference")]
    for tables in (False, True):
        out.append(pytest.param(None if _hdrf_kernel is None else getattr(_hdrf_kernel, name), tables,
                                id=f"compiled-{'tables' if tables else 'node_key'}", marks=needs_compiled))
    return out


@pytest.mark.parametrize("tries", [1, 3, 8])
@pytest.mark.parametrize("walk, with_tables", walks("first_runnable_child"))
@pytest.mark.parametrize("seed", range(40))
def test_the_walk_by_live_children_is_the_heap_walk(monkeypatch, seed, walk, with_tables, tries):
    monkeypatch.setattr(descent, "HEAP_TRIES", tries)
    compare_walks(seed, walk, with_tables)


def test_the_index_takes_over_after_the_first_tries(monkeypatch):
    # past HEAP_TRIES children tried in vain the rest comes from the index: with one try,
    # in most of these trees (bands of up to 40 user queues, most without a live shape)
    monkeypatch.setattr(descent, "HEAP_TRIES", 1)
    switched = [compare_walks(seed, descent.first_runnable_child, False) for seed in range(20)]
    assert sum(n > 0 for n in switched) >= 10, switched


def banded_state(rng: random.Random) -> SimpleNamespace:
    """A random banded tree (``banded_tree``) with its tables: demanding jobs (``live``,
    counted along their paths), some excluded, most filed under a shape in ``index`` (a
    ShapeIndex; ``shape_of``), keys (``share``, ``running``, ``position``)."""
    parent, is_job, fifo = banded_tree(rng)
    n = len(parent)
    kids: list[list[int]] = [[] for _ in range(n)]
    for v in range(1, n):
        kids[parent[v]].append(v)
    key = [f"v{v}" for v in range(n)]
    jobs = [v for v in range(n) if is_job[v]]
    live, excluded = [0] * n, [0] * n
    for v in jobs:
        if rng.random() < 0.85:
            a = v
            while a >= 0:
                live[a] += 1
                a = parent[a]
    for v in jobs:
        if live[v] and rng.random() < 0.1:  # (counted along the path, as TreeExclusion does)
            a = v
            while a >= 0:
                excluded[a] += 1
                a = parent[a]
    index = _Index(parent, key, is_job)
    # most jobs filed under shapes that will not be live: most user queues have none live
    shape_of = {}
    for v in jobs:
        if rng.random() < 0.95:
            shape_of[v] = rng.randrange(SHAPES)
            index.file_shape(key[v], shape_of[v])
    share = [rng.choice([0.0, 0.1, 0.25, 0.5, 1 / 3]) for _ in range(n)]
    running = [rng.randint(0, 2) for _ in range(n)]
    position = [kids[parent[v]].index(v) if v else 0 for v in range(n)]
    return SimpleNamespace(parent=parent, is_job=is_job, fifo=fifo, n=n, kids=kids, key=key, jobs=jobs, live=live,
                           excluded=excluded, index=index, shape_of=shape_of, share=share, running=running,
                           position=position)


def compare_walks(seed: int, walk, with_tables: bool) -> int:
    """One random banded tree's descent by the heap walk with the shape masks and by the
    index past ``HEAP_TRIES``: the same pick after the same checks, the heaps' current
    entries unchanged. Returns how often the index walk ran."""
    rng = random.Random(seed)
    tree = banded_state(rng)
    parent, is_job, fifo, n, kids, key = tree.parent, tree.is_job, tree.fifo, tree.n, tree.kids, tree.key
    jobs, live, excluded, index, shape_of = tree.jobs, tree.live, tree.excluded, tree.index, tree.shape_of
    share, running, position = tree.share, tree.running, tree.position
    version = [1] * n
    heaps = []
    for v in range(n):  # current entries of the demanding children, and some stale ones
        heap = [(round(share[c], DIGITS), running[c], position[c], 1, c) for c in kids[v] if live[c] > 0]
        heap += [(rng.random(), 0, position[c], 0, c) for c in kids[v] if rng.random() < 0.3]
        heap.sort()
        heaps.append(heap)
    alive = {s for s in range(SHAPES) if rng.random() < 0.3} or {0}
    lucky = {key[v] for v in jobs if rng.random() < 0.3}
    dead_on_check = rng.choice(sorted(alive))  # found to fit nowhere by its first check

    def fifo_jobs(v: int):
        return [c for c in kids[v] if is_job[c]] if v in fifo else None

    def node_key(c: int) -> tuple:
        return (round(share[c], DIGITS), running[c], position[c])

    def decide(how: str):
        index.reset_excluded()
        index.only_shapes(alive)
        asked: list[str] = []
        calls = {"children": 0}
        found_dead: set[int] = set()

        def runnable(name: str) -> bool:
            asked.append(name)
            shape = shape_of.get(index.index[name], -1)
            fits = shape in alive and shape != dead_on_check
            if shape == dead_on_check and shape not in found_dead:  # (its first check: it fits nowhere)
                found_dead.add(shape)
                index.exclude_shape(shape, ())
            return fits and name in lucky

        def counted_walk(*args, **kwargs):
            calls["children"] += 1
            return walk(*args, **kwargs)

        given = [list(h) for h in heaps]
        kwargs = {}
        if how == "by children":
            kwargs = {"node_key": node_key, "first_child": counted_walk,
                      "tables": (share, running, position) if with_tables else None}
        got = descend_tree(0, given, is_job=is_job, key=key, live=live, fifo_jobs=fifo_jobs, version=version,
                           present=[True] * n, runnable=runnable, excluded=excluded, shapes=index, **kwargs)
        return got, asked, calls["children"], given

    # the heap walk with the shape masks (no ``node_key``: neither shortcut) against the new
    # walk: the same pick after the same checks in the same order
    want, asked_by_heap, _, _ = decide("by heap")
    got, asked, children_walks, heaps_after = decide("by children")
    assert (got, asked) == (want, asked_by_heap)
    # the heaps hold the same current entries (those tried were pushed back)
    assert [sorted(e for e in h if e[3] == 1) for h in heaps_after] == [sorted(e for e in h if e[3] == 1)
                                                                        for h in heaps]
    return children_walks


@pytest.mark.parametrize("walk, with_tables", walks("first_runnable_filed"))
@pytest.mark.parametrize("shapes", [SHAPES, 700])  # (700: the live bits read from an int of many bytes)
@pytest.mark.parametrize("seed", range(40))
def test_the_filed_jobs_walk_is_the_sorted_walk(seed, walk, with_tables, shapes):
    # a jobs-only queue's jobs read from the index per shape (the compiled port fills its
    # heap of keys from the groups): the jobs of the shapes in ``bits`` tried by key, the
    # same pick after the same checks as the reference's sorted list of them
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    # (ties, and shares that round to 0.1 or just above it: 0.1 + 6e-13 rounds to
    # 0.100000000001; the compiled walk keys only the shares near the lowest; an infinite
    # share sends it to its heap of every key)
    near = [0.1, 0.1 - 4e-13, 0.1 + 3e-13, 0.1 + 6e-13, 0.1 + 2e-9] + ([math.inf] if seed % 8 == 7 else [])
    share = [rng.choice(near + ([0.0, 0.25, 1 / 3] if seed % 2 else [])) for _ in range(n)]
    running = [rng.randint(0, 2) for _ in range(n)]
    position = rng.sample(range(n), n)  # (distinct among siblings)
    live = [rng.choice([0, 1, 1, 1]) for _ in range(n)]
    excluded = [rng.choice([0, 0, 0, 1]) for _ in range(n)] if rng.random() < 0.5 else None
    shape_of = [rng.randrange(shapes) for _ in range(n)]
    shape_mask = [1 << shape for shape in shape_of]
    filed: dict[int, dict[int, None]] = {}
    for c in rng.sample(range(n), n):
        filed.setdefault(shape_of[c], {})[c] = None
    bits = rng.getrandbits(shapes)
    key = [f"j{c}" for c in range(n)]
    fails = set(rng.sample(range(n), rng.randint(0, n)))
    clears = {c: 1 << rng.randrange(shapes) for c in rng.sample(range(n), rng.randint(0, min(n, 3)))}

    def node_key(c: int) -> tuple:
        return (round(share[c], DIGITS), running[c], position[c])

    results = []
    for how in ("sorted", "walk"):
        alive, asked = [bits], []

        def runnable(name):
            c = int(name[1:])
            asked.append(c)
            alive[0] &= ~clears.get(c, 0)
            return c not in fails

        common = dict(live=live, excluded=excluded, shape_mask=shape_mask, alive=alive, key=key, runnable=runnable,
                      node_key=node_key)
        if how == "sorted":
            jobs = [c for c in range(n) if bits >> shape_of[c] & 1]
            got = descent.first_runnable_by_key(jobs, **common)
        else:
            got = walk(filed, bits, **common, tables=(share, running, position) if with_tables else None)
        results.append((got, asked))
    assert results[0] == results[1]


@pytest.mark.parametrize("seed", range(30))
def test_the_live_queues_follow_the_filing(seed):
    # a node's queue children with a job of a live shape below: after filings, refilings
    # and unfilings at random, ``alive_queues_under`` gives the recount, each queue once
    rng = random.Random(seed)
    parent, is_job, _ = banded_tree(rng)
    n = len(parent)
    key = [f"v{v}" for v in range(n)]
    jobs = [v for v in range(n) if is_job[v]]
    index = _Index(parent, key, is_job)
    shape_of: dict[int, int] = {}
    for _ in range(4 * len(jobs)):
        v = rng.choice(jobs)
        if rng.random() < 0.25:
            index._unfile_shape(v)
            shape_of.pop(v, None)
        else:
            shape_of[v] = rng.randrange(SHAPES)
            index.file_shape(key[v], shape_of[v])
    below: dict[int, set[int]] = {}  # queue -> the shapes filed below it
    for v, shape in shape_of.items():
        q = parent[v]
        while q >= 0:
            below.setdefault(q, set()).add(shape)
            q = parent[q]
    for alive in ({0}, {1, 3}, set(range(SHAPES))):
        index.only_shapes(alive)
        for p in range(n):
            got = index.alive_queues_under(p)
            assert len(got) == len(set(got))
            assert set(got) == {q for q in range(1, n) if parent[q] == p and not is_job[q]
                                and below.get(q, set()) & alive}
    index.reset_excluded()


def banded_scenario(seed: int):
    """A full cluster under bands of many user queues (some FIFO, a few with sub-queues),
    jobs of a few shapes that fit on few nodes: most users' jobs have no shape that fits
    on a freed node."""
    rng = random.Random(seed)
    res = ["cpu", "mem"]
    queues, leaves = [], []
    for b in range(3):
        users = []
        for u in range(rng.randint(6, 14)):
            user: dict = {"name": f"u{u}", "weight": rng.choice([1, 1, 2])}
            if rng.random() < 0.2:
                user["children"] = [{"name": "a"}, {"name": "b"}]
                leaves += [f"b{b}.u{u}.a", f"b{b}.u{u}.b"]
            else:
                if rng.random() < 0.3:
                    user["order"] = "fifo"
                leaves.append(f"b{b}.u{u}")
            users.append(user)
        queues.append({"name": f"b{b}", "weight": 3 - b, "children": users})
    demands = [{"cpu": 1, "mem": 1}, {"cpu": 2, "mem": 1}, {"cpu": 4, "mem": 8}, {"cpu": 8, "mem": 2},
               {"cpu": 1, "mem": 6}]
    jobs = [{"name": f"j{i}", "queue": rng.choice(leaves), "tasks": [{"demand": rng.choice(demands)}]}
            for i in range(rng.randint(60, 90))]
    nodes = [{"name": f"n{i}", "capacity": {"cpu": 8, "mem": 8}} for i in range(4)]
    return parse_scenario({"resources": res, "cluster": {"nodes": nodes}, "queues": queues, "jobs": jobs},
                          f"<banded seed={seed}>")


@pytest.mark.parametrize("tries", [1, descent.HEAP_TRIES])
@pytest.mark.parametrize("core", ["compiled", "pure-python"])
@pytest.mark.parametrize("policy", ["hdrf", "dff"])
@pytest.mark.parametrize("seed", range(3))
def test_banded_steady_state_matches_reference(monkeypatch, core, policy, seed, tries):
    # the sorters' descents (every decision a descent: no candidate lists) through bands of
    # user queues on a full cluster, against the reference sorter, launch by launch; with
    # the index taking over after one child tried, the new walk ran (the sorter's
    # ``_first_child`` called)
    monkeypatch.setattr(descent, "HEAP_TRIES", tries)
    if core == "compiled":
        if not compiled.available():
            pytest.skip(compiled.describe())
        monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
    else:
        monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1")
    from fairshare.engine import Scheduler

    walked = {"children": 0}
    built = Scheduler.__init__

    def counting_init(self, *args, **kwargs):  # (count the children's walks of the online sorter)
        built(self, *args, **kwargs)
        first_child = getattr(self.sorter, "_first_child", None)
        if first_child is not None:
            def counted(*a, **k):
                walked["children"] += 1
                return first_child(*a, **k)

            self.sorter._first_child = counted

    sc = banded_scenario(seed)
    want, _ = steady_run(sc, policy, reference=True, seed=seed, plain=True)
    monkeypatch.setattr(Scheduler, "__init__", counting_init)
    got, _ = steady_run(sc, policy, reference=False, seed=seed, plain=True)
    assert got == want
    assert len(want) > 300
    assert tries > 1 or walked["children"] >= 10, walked
