"""The compiled descent (issue 24, round 9): ``_hdrf_kernel.descend_tree`` against the
reference ``descent.descend_tree``, and ``_hdrf_kernel.shape_bits`` against
``descent.shape_bits`` (``ShapeIndex.only_shapes``).

The descent's answer is not all that must match: the engine's exclusions depend on which
jobs it asked ``runnable`` about, so the two must make the same calls in the same order,
renew the same deferred pick entries at the same moments, and leave the same heaps (the
port uses ``heapq``'s own pops and pushes). The trees are the banded ones of
``test_shape_index_descent`` (FIFO queues, mixed children, sub-queues, stale entries,
excluded jobs, a shape found to fit nowhere midway), read with the shapes restricted or
not, with deferred renewals, and with the reference walks or the kernel's.
"""

from __future__ import annotations

import random

import pytest
import test_shape_index_descent
from test_candidates import _Index
from test_online_parity import steady_run
from test_shape_index_descent import SHAPES, banded_scenario, banded_state

from fairshare.engine import Scheduler
from fairshare.policies import make_policy
from fairshare.policies.machinery import compiled, descent
from fairshare.policies.machinery.ties import DIGITS

_hdrf_kernel = compiled._hdrf_kernel
pytestmark = pytest.mark.skipif(not compiled.available(), reason=compiled.describe())


def descend_both_ways(seed: int, tries: int, monkeypatch) -> list:
    """One random banded tree's state, descended by the reference and by the kernel from
    copies of it; returns each run's (pick, runnable calls, renewals, heaps after)."""
    monkeypatch.setattr(descent, "HEAP_TRIES", tries)
    rng = random.Random(seed)
    state = banded_state(rng)
    n, kids, key, jobs, index = state.n, state.kids, state.key, state.jobs, state.index
    parent, is_job, fifo, live, excluded = state.parent, state.is_job, state.fifo, state.live, state.excluded
    shape_of, share, running, position = state.shape_of, state.share, state.running, state.position
    counts = [len(k) for k in kids]
    version = [1] * n
    present = [rng.random() < 0.95 for _ in range(n)]
    # some queues' heaps left to renew when read (``deferred``), the others filled
    lazy = [not is_job[v] and rng.random() < 0.3 for v in range(n)]
    heaps, deferred = [], {}
    for v in range(n):
        if lazy[v]:
            heap = [(rng.random(), 0, position[c], 0, c) for c in kids[v] if rng.random() < 0.5]  # (stale)
            deferred[v] = {c: None for c in kids[v]}
        else:
            heap = [(round(share[c], DIGITS), running[c], position[c], 1, c) for c in kids[v] if live[c] > 0]
            heap += [(rng.random(), 0, position[c], 0, c) for c in kids[v] if rng.random() < 0.3]
        heap.sort()
        heaps.append(heap)
    restricted = rng.random() < 0.8
    alive = {s for s in range(SHAPES) if rng.random() < 0.3} or {0}
    lucky = {key[v] for v in jobs if rng.random() < 0.3}
    dead_on_check = rng.choice(sorted(alive))
    with_exclusions = rng.random() < 0.7
    with_shapes = rng.random() < 0.9

    def fifo_jobs(v: int):
        return [c for c in kids[v] if is_job[c]] if v in fifo else None

    def node_key(c: int) -> tuple:
        return (round(share[c], DIGITS), running[c], position[c])

    runs = []
    for walk, first_runnable, first_child, own_index in (
            (descent.descend_tree, None, None, False),
            (_hdrf_kernel.descend_tree, None, None, False),  # (the reference walks, called back)
            (_hdrf_kernel.descend_tree, _hdrf_kernel.first_runnable_filed, _hdrf_kernel.first_runnable_child, False),
            # the index with the kernel's port: the descent reads its tables itself
            (_hdrf_kernel.descend_tree, _hdrf_kernel.first_runnable_filed, _hdrf_kernel.first_runnable_child, True)):
        index._queues_meeting = _hdrf_kernel.queues_meeting if own_index else descent.queues_meeting
        index.alive_shapes[0] = -1
        if restricted:
            index.only_shapes(sorted(alive))
        asked: list[str] = []
        renewed: list[list[int]] = []
        found_dead: set[int] = set()
        given = [list(h) for h in heaps]
        versions = list(version)
        later = {v: dict(nodes) for v, nodes in deferred.items()}

        def runnable(name: str) -> bool:
            asked.append(name)
            shape = shape_of.get(index.index[name], -1)
            if restricted and shape == dead_on_check and shape not in found_dead:
                found_dead.add(shape)
                index.exclude_shape(shape, ())
            return (not restricted or (shape in alive and shape != dead_on_check)) and name in lucky

        def renew(nodes: dict[int, None]) -> None:
            renewed.append(list(nodes))
            descent.renew_pick_entries(nodes, given, version=versions, share=share, running=running,
                                       position=position, live=live, present=present, parent=parent,
                                       kids=counts)

        got = walk(0, given, is_job=is_job, key=key, live=live, fifo_jobs=fifo_jobs, version=versions,
                   present=present, runnable=runnable, excluded=excluded if with_exclusions else None,
                   shapes=index if with_shapes else None, node_key=node_key, deferred=later, renew=renew,
                   first_runnable=first_runnable, first_child=first_child,
                   tables=(share, running, position) if first_child is not None else None)
        runs.append((got, asked, renewed, given, versions, later))
    return runs


@pytest.mark.parametrize("tries", [1, 3, 8])
@pytest.mark.parametrize("seed", range(60))
def test_the_compiled_descent_is_the_reference(monkeypatch, seed, tries):
    reference, *ports = descend_both_ways(seed, tries, monkeypatch)
    for port in ports:
        # the same pick, after the same runnable calls and renewals, the same heaps
        # (list for list: heapq's own operations) and versions left
        assert port == reference


class _CountingIndex(_Index):
    """A shape index that overrides the three readers the descent uses: each counts its
    calls and answers as ``ShapeIndex``'s does."""

    def __init__(self, *args):
        super().__init__(*args)
        self.calls = {"jobs_by_shape": 0, "few_queues": 0, "alive_queues_under": 0}

    def jobs_by_shape(self, v):
        self.calls["jobs_by_shape"] += 1
        return super().jobs_by_shape(v)

    def few_queues(self, v):
        self.calls["few_queues"] += 1
        return super().few_queues(v)

    def alive_queues_under(self, v):
        self.calls["alive_queues_under"] += 1
        return super().alive_queues_under(v)


def test_the_compiled_descent_calls_an_index_s_own_readers(monkeypatch):
    # the kernel reads ``ShapeIndex``'s tables itself only for the readers it knows:
    # overridden ones are called, as the reference calls them, with the same picks
    monkeypatch.setattr(test_shape_index_descent, "_Index", _CountingIndex)
    for seed in range(30):
        reference, *ports = descend_both_ways(seed, 3, monkeypatch)
        for port in ports:
            assert port == reference
    # one kernel descent alone, the index with the kernel's port: its readers are called
    state = banded_state(random.Random(7))
    index = state.index
    assert type(index) is _CountingIndex
    index._queues_meeting = _hdrf_kernel.queues_meeting
    index.only_shapes(range(SHAPES))
    share, running, position = state.share, state.running, state.position
    heaps = [sorted((round(share[c], DIGITS), running[c], position[c], 1, c) for c in state.kids[v]
                    if state.live[c] > 0) for v in range(state.n)]
    asked = []
    got = _hdrf_kernel.descend_tree(
        0, heaps, is_job=state.is_job, key=state.key, live=state.live, fifo_jobs=lambda v: None,
        version=[1] * state.n, present=[True] * state.n, runnable=lambda name: asked.append(name) and False,
        shapes=index, node_key=lambda c: (round(share[c], DIGITS), running[c], position[c]),
        first_runnable=_hdrf_kernel.first_runnable_filed, first_child=_hdrf_kernel.first_runnable_child,
        tables=(share, running, position))
    assert got is None and asked
    assert index.calls["jobs_by_shape"] > 0, index.calls
    assert index.calls["few_queues"] + index.calls["alive_queues_under"] > 0, index.calls


def test_the_walks_differ_where_it_matters(monkeypatch):
    # (the comparison can fail: the runs ask runnable about jobs and renew heaps, and the
    # picks are not all None)
    runs = [descend_both_ways(seed, 3, monkeypatch)[0] for seed in range(30)]
    assert sum(got is not None for got, *_ in runs) >= 5
    assert sum(len(asked) > 1 for _, asked, *_ in runs) >= 10
    assert sum(bool(renewed) for _, _, renewed, *_ in runs) >= 10


@pytest.mark.parametrize("core", ["compiled", "pure-python"])
def test_the_sorters_use_the_descent_the_environment_asks_for(monkeypatch, core):
    if core == "pure-python":
        monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1")
        want_descent, want_bits, want_meeting = descent.descend_tree, descent.shape_bits, descent.queues_meeting
    else:
        monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
        want_descent, want_bits, want_meeting = (_hdrf_kernel.descend_tree, _hdrf_kernel.shape_bits,
                                                 _hdrf_kernel.queues_meeting)
    sc = banded_scenario(0)
    for policy in ("hdrf", "dff"):
        sorter = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy)).sorter
        assert sorter._descend_tree is want_descent
        assert sorter._shape_bits is want_bits
        assert sorter._queues_meeting is want_meeting


@pytest.mark.parametrize("policy", ["hdrf", "dff"])
@pytest.mark.parametrize("seed", range(2))
def test_banded_steady_state_with_the_compiled_descent(monkeypatch, policy, seed):
    # the sorters' descents through bands of user queues on a full cluster, the compiled
    # descent against the reference sorter launch by launch, the compiled one called
    monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
    calls = {"descents": 0}
    kernel_descent = _hdrf_kernel.descend_tree

    def counted(*args, **kwargs):
        calls["descents"] += 1
        return kernel_descent(*args, **kwargs)

    sc = banded_scenario(seed)
    want, _ = steady_run(sc, policy, reference=True, seed=seed, plain=True)
    monkeypatch.setattr(_hdrf_kernel, "descend_tree", counted)
    got, _ = steady_run(sc, policy, reference=False, seed=seed, plain=True)
    assert got == want
    assert calls["descents"] >= 100, calls


@pytest.mark.parametrize("seed", range(200))
def test_the_compiled_shape_bits_are_the_reference(seed):
    rng = random.Random(seed)
    top = rng.choice([1, 8, 62, 63, 64, 65, 700])
    numbers = [rng.randrange(top) for _ in range(rng.randrange(40))]  # (repeats: bits set once)
    want = descent.shape_bits(numbers)
    assert _hdrf_kernel.shape_bits(numbers) == want
    assert _hdrf_kernel.shape_bits(tuple(numbers)) == want
    assert _hdrf_kernel.shape_bits(iter(numbers)) == want


def test_the_shape_bits_of_a_negative_number_raise_as_a_shift():
    for bits in (descent.shape_bits, _hdrf_kernel.shape_bits):
        with pytest.raises(ValueError, match="negative shift count"):
            bits([3, -1])
    assert _hdrf_kernel.shape_bits([]) == descent.shape_bits([]) == 0


def test_a_negative_mask_of_shapes_is_refused_both_ways():
    # (the reference's loop over the set bits would never end on a negative int)
    common = dict(live=[1], excluded=None, shape_mask=[1], alive=[-1], key=["j0"], runnable=lambda name: True,
                  node_key=lambda c: (0.0, 0, c))
    for walk, tables in ((descent.first_runnable_filed, None), (_hdrf_kernel.first_runnable_filed, None),
                         (_hdrf_kernel.first_runnable_filed, ([0.0], [0], [0]))):
        with pytest.raises(ValueError, match="bits must be a mask of shapes, not negative: -1"):
            walk({0: {0: None}}, -1, **common, tables=tables)
        assert walk({0: {0: None}}, 1, **common, tables=tables) == "j0"


@pytest.mark.parametrize("seed", range(200))
def test_the_compiled_queue_masks_test_is_the_reference(seed):
    # the masks tested as C integers while the live shapes are below bit 63, by Python's
    # ``&`` above: masks of up to 700 bits against both
    rng = random.Random(seed)
    n = rng.randint(0, 60)
    shape_mask = [rng.choice([0, rng.getrandbits(8), rng.getrandbits(64), rng.getrandbits(700)]) for _ in range(n)]
    queues = rng.sample(range(n), rng.randint(0, n))
    alive = rng.choice([0, rng.getrandbits(8), rng.getrandbits(63), (1 << 63) - 1, 1 << 63, rng.getrandbits(700),
                        1 << rng.randrange(700)])
    want = descent.queues_meeting(queues, shape_mask, alive)
    assert _hdrf_kernel.queues_meeting(queues, shape_mask, alive) == want
    assert _hdrf_kernel.queues_meeting(tuple(queues), shape_mask, alive) == want


def test_the_shape_index_uses_the_queue_test_the_environment_asks_for(monkeypatch):
    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1")
    assert compiled.tree_queues_meeting() is descent.queues_meeting
    monkeypatch.delenv(compiled.PURE_PYTHON_ENV)
    assert compiled.tree_queues_meeting() is _hdrf_kernel.queues_meeting


def chain_descent(depth: int, descend_tree) -> str | None:
    """A chain of ``depth`` queues, one job at its end, descended from the root."""
    n = depth + 1
    heaps = [[(0.0, 0, 0, 0, v + 1)] for v in range(depth)] + [[]]
    is_job = [False] * depth + [True]
    key = [f"q{v}" for v in range(depth)] + ["job"]
    return descend_tree(0, heaps, is_job=is_job, key=key, live=[1] * n, fifo_jobs=lambda v: None,
                        version=[0] * n, present=[True] * n, runnable=lambda name: True)


@pytest.mark.parametrize("depth", [3, 200])
def test_a_chain_is_descended_to_its_job_both_ways(depth):
    assert chain_descent(depth, descent.descend_tree) == "job"
    assert chain_descent(depth, _hdrf_kernel.descend_tree) == "job"


def test_a_tree_deeper_than_the_recursion_limit_raises_recursionerror_both_ways():
    """The compiled walk's recursion is a C call: it counts each level against the
    interpreter's limit, as the reference's Python call does, so a tree past it raises
    RecursionError instead of overrunning the C stack (a crash)."""
    import sys

    depth = sys.getrecursionlimit() + 100
    with pytest.raises(RecursionError):
        chain_descent(depth, descent.descend_tree)
    with pytest.raises(RecursionError):
        chain_descent(depth * 100, _hdrf_kernel.descend_tree)  # (far past any C stack without the check)
