"""The placement index's fast paths give the answers of the plain definitions.

``fit_limits`` (the fit test's tolerance evaluated once per free vector) against ``fits``;
the iterative first fit and collection of ``_MaxTree`` against the recursive descent they
replaced and against a linear scan; ``fits_on``, ``freed_fits``, ``max_free`` and each
constraint set's members (``satisfies``) against their definitions, on random pools changed
by random launches, finishes, node losses and returns (with constraints, devices, headroom
and slots).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import math
import random
from operator import gt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairshare.engine import placement
from fairshare.engine.placement import NodePool
from fairshare.model import Node
from fairshare.model import resources
from fairshare.model.cluster import satisfies
from fairshare.model.resources import fit_limits, fits

SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-9, -1e-9, 1.0 + 1e-9, 1.0 - 1e-10, -1.0000000000000002,
           0.9999999999999999, 1.0000000000000002, 1e300, -1e300, 5e-324,
           math.inf, -math.inf, math.nan]
floats = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True))


@given(st.lists(st.tuples(floats, floats), min_size=0, max_size=6))
def test_limits_is_the_fit_test(pairs):
    demand = [d for d, _ in pairs]
    free = [f for _, f in pairs]
    assert fits(demand, free) == (not any(map(gt, demand, fit_limits(free))))
    for d, f, t in zip(demand, free, fit_limits(free)):
        ref = f + 1e-9 * max(1.0, abs(f))
        assert t == ref or (math.isnan(t) and math.isnan(ref))


# --- the index against its definitions -----------------------------------------------------

def old_first_fit(tree, need, start=0):
    """The recursive descent ``_MaxTree.first_fit`` replaced (verbatim in substance)."""
    tree.flush()
    if not fits(need, tree.tree[1]):
        return None

    def descend(k, lo, hi):
        if hi <= start:
            return None
        if k >= tree.size:
            if lo >= len(tree.members):
                return None
            node = tree.members[lo]
            return node if fits(need, tree.pool.index_vector(node)) else None
        mid = (lo + hi) // 2
        if fits(need, tree.tree[2 * k]):
            found = descend(2 * k, lo, mid)
            if found is not None:
                return found
        if fits(need, tree.tree[2 * k + 1]):
            return descend(2 * k + 1, mid, hi)
        return None

    return descend(1, 0, tree.size)


AMOUNTS = [0.0, 0.25, 0.5, 1.0, 1.0 + 1e-10, 1.5, 2.0, 3.0, 4.0 - 1e-10, 4.0]
CONSTRAINTS = [(), (("zone", ("a",)),), (("zone", ("b",)),), (("zone", ("a", "b")),)]


@st.composite
def pools(draw):
    m = draw(st.integers(2, 3))
    use_devices = draw(st.booleans())
    slots = draw(st.sampled_from([None, None, None, 2]))
    nodes = []
    for i in range(draw(st.integers(1, 11))):
        cap = [draw(st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, 2.5])) for _ in range(m)]
        if use_devices:
            cap[1] = float(int(cap[1]))
        nodes.append(Node(f"n{i}", tuple(cap), attributes=(("zone", draw(st.sampled_from("ab"))),)))
    headroom = draw(st.sampled_from([None, None, tuple([2.0] * m)]))
    pool = NodePool(nodes, m, headroom=headroom, slots_per_node=slots,
                    devices=(1,) if use_devices else ())
    ops = draw(st.lists(st.tuples(st.sampled_from(["take", "take", "take", "give", "remove", "add"]),
                                  st.integers(0, 10 ** 6),
                                  st.tuples(*[st.sampled_from(AMOUNTS) for _ in range(m)])),
                        max_size=40))
    return pool, nodes, ops


def check(pool: NodePool, demand, constraints, mark) -> None:
    need = pool._effective(demand)
    tree = pool._tree(constraints)
    assert tree.members == [i for i, s in enumerate(pool.states) if satisfies(s.node.attributes, constraints)]
    vectors = {i: pool.index_vector(i) for i in tree.members}
    fitting = [i for i in tree.members if fits(need, vectors[i])]
    assert tree.feasible(need) == fitting
    for start in range(len(tree.members) + 2):
        expected = next((i for i in fitting if tree.position[i] >= start), None)
        assert tree.first_fit(need, start) == expected == old_first_fit(tree, need, start)
    for i in tree.members:
        assert pool.fits_on(i, demand) == fits(need, vectors[i])
    # both ways of testing the freed nodes: the loop, and the matrix a long log takes
    for vector_above in (10 ** 9, 0):
        placement._FREED_SCAN_VECTOR, before = vector_above, placement._FREED_SCAN_VECTOR
        try:
            freed = pool.freed_fits(demand, constraints, mark)
        finally:
            placement._FREED_SCAN_VECTOR = before
        if freed is not None:
            since = sorted(set(pool._freed[mark - pool._freed_base:]))
            assert freed == [i for i in since if i in tree.position and fits(need, pool.index_vector(i))]
    top = pool.max_free()
    every = [pool.index_vector(i) for i in range(len(pool.states))]
    assert list(top) == [max([-1.0] + [v[r] for v in every]) for r in range(pool.m)]


@settings(max_examples=150, deadline=None)
@given(pools(), st.data())
def test_index_answers_match_definitions(built, data):
    pool, nodes, ops = built
    running = []
    mark = pool.freed_mark()
    for op, pick, demand in ops:
        constraints = CONSTRAINTS[pick % len(CONSTRAINTS)]
        if op == "take":
            node = pool.place(demand, constraints)
            if node is not None:
                running.append((node, demand, pool.take(node, demand)))
        elif op == "give" and running:
            node, demand, held = running.pop(pick % len(running))
            pool.give_back(node, demand, held)
        elif op == "remove":
            idx = pick % len(nodes)
            if pool.alive(idx):
                pool.remove_node(nodes[idx].name)
                running = [r for r in running if r[0] != idx]
        elif op == "add":
            idx = pick % len(nodes)
            if not pool.alive(idx):
                old = nodes[idx]
                zone = "a" if (pick // 7) % 2 else "b"  # sometimes back with another zone
                pool.add_node(Node(old.name, old.capacity, attributes=(("zone", zone),)))
        query = data.draw(st.tuples(*[st.sampled_from(AMOUNTS) for _ in range(pool.m)]))
        check(pool, query, CONSTRAINTS[(pick // 3) % len(CONSTRAINTS)], mark)
        if pick % 5 == 0:
            mark = pool.freed_mark()


def test_long_freed_scan_after_the_log_is_trimmed():
    """The long scan's nodes (each node's latest log position at or after the mark) are
    the distinct nodes of the log from the mark, also after the log dropped its older
    half and for nodes added since the positions were first kept."""
    nodes = [Node(f"n{i}", (4.0, 4.0)) for i in range(40)]
    pool = NodePool(nodes, 2)
    marks = []
    for step in range(placement._FREED_LOG + 500):
        node = (step * 7) % (len(pool.states) - 1 if step > 3000 else len(pool.states))
        pool.give_back(node, (0.0, 0.0), pool.take(node, (1.0, 1.0)))
        if step == 3000:
            pool.add_node(Node("late", (4.0, 4.0)))
        if step % 700 == 0:
            marks.append(pool.freed_mark())
    pool.take(3, (3.5, 1.0))  # one freed node no longer fits
    assert pool._freed_base > 0  # (the log was trimmed)
    for mark in marks:
        start = mark - pool._freed_base
        if start < 0:
            assert pool.freed_fits((1.0, 1.0), (), mark) is None
            continue
        since = sorted(set(pool._freed[start:]))
        expected = [i for i in since if pool.fits_on(i, (1.0, 1.0))]
        assert len(pool._freed) - start > placement._FREED_SCAN_VECTOR or since == []
        assert pool.freed_fits((1.0, 1.0), (), mark) == expected


#: what engine/_fit_kernel.pyx repeats, by the digest that records it: one changed must be
#: changed in the other too before the digest is renewed
PORTS = {
    "TREE_PORTED_FROM": (placement.pull_levels_reference, placement.first_fit_reference),
    "LIMITS_PORTED_FROM": (resources.fit_limit, placement.free_row_reference),
    "ACCOUNTS_PORTED_FROM": (placement.taken_reference, placement.given_back_reference),
    "NODE_PORTED_FROM": (placement.take_plain_reference, placement.give_back_plain_reference),
}


@pytest.mark.parametrize("name", sorted(PORTS))
def test_the_kernel_port_digests(name):
    functions = PORTS[name]
    digest = hashlib.sha256("".join(map(inspect.getsource, functions)).encode()).hexdigest()[:16]
    assert digest == getattr(placement, name), \
        f"{' or '.join(f.__name__ for f in functions)} changed since _fit_kernel.pyx ported them: mirror " \
        f"the change there, then set placement.{name} to {digest}"


def test_the_pure_python_walks_run_where_the_kernel_is_not(monkeypatch):
    # FAIRSHARE_PURE_PYTHON=1 (or no compiler): the references are the walks in use
    monkeypatch.setenv("FAIRSHARE_PURE_PYTHON", "1")
    fresh = importlib.reload(placement)
    try:
        assert fresh.tree_first_fit is fresh.first_fit_reference
        assert fresh.pull_levels is fresh.pull_levels_reference
        assert fresh.take_plain is fresh.take_plain_reference
        assert fresh.give_back_plain is fresh.give_back_plain_reference
    finally:
        monkeypatch.delenv("FAIRSHARE_PURE_PYTHON")
        importlib.reload(placement)


#: numbers the compiled walks must compare as CPython does: the tolerance's edge, signed
#: zeros, NaN, infinities, and ints (compared exactly with floats, not as doubles)
EDGE = [0.0, -0.0, 1.0, 1.0 + 1e-9, 1.0000000000000002, 2.0, -1.0, math.nan, math.inf, -math.inf,
        0, 1, 2, 2 ** 53 + 1, float(2 ** 53)]


@pytest.mark.skipif(placement.compiled_first_fit is None, reason="engine/_fit_kernel.pyx not built")
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_compiled_tree_walks_are_the_references(data):
    # random leaf rows (tuples and lists, floats and ints) climbed into a tree by both
    # pull_levels, then every first fit from every start for random needs: the same rows,
    # element by element the same objects, and the same positions
    width = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(1, 9))
    size = 1
    while size < n:
        size *= 2
    number = st.sampled_from(EDGE)
    row = st.lists(number, min_size=width, max_size=width)
    padding = [-1.0] * width
    padding_limits = fit_limits(padding)
    trees = [([padding] * (2 * size), [padding_limits] * (2 * size)) for _ in range(2)]
    for _round in range(data.draw(st.integers(1, 3))):
        changed = data.draw(st.sets(st.integers(0, n - 1), min_size=1))
        rows = {p: (data.draw(row), data.draw(row)) for p in changed}
        for tree, limit in trees:
            for p, (vec, lim) in rows.items():
                tree[size + p], limit[size + p] = tuple(vec), tuple(lim)
        placement.pull_levels_reference(trees[0][0], trees[0][1], {(size + p) >> 1 for p in changed})
        placement.compiled_pull_levels(trees[1][0], trees[1][1], {(size + p) >> 1 for p in changed})
        for ours, theirs in zip(trees[0], trees[1]):
            assert len(ours) == len(theirs)
            for a, b in zip(ours, theirs):
                assert type(a) is type(b) and len(a) == len(b)
                assert all(x is y for x, y in zip(a, b))
        for _ in range(3):
            need = tuple(data.draw(row))
            for start in range(-1, n + 2):  # (the ends: no position, -1)
                assert placement.compiled_first_fit(trees[1][1], size, n, need, start) == \
                    placement.first_fit_reference(trees[0][1], size, n, need, start)


class _Amount(float):
    """A float subclass: the kernel hands it to ``fit_limit`` itself."""


def _same_floats(a, b) -> bool:
    return len(a) == len(b) and all(type(x) is type(y) and (x == y and math.copysign(1, x) == math.copysign(1, y)
                                                            or x != x and y != y) for x, y in zip(a, b))


@pytest.mark.skipif(placement.compiled_free_row is None, reason="engine/_fit_kernel.pyx not built")
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(floats, st.sampled_from(EDGE), st.integers(-2 ** 60, 2 ** 60)), max_size=6))
def test_the_compiled_free_row_is_the_reference(free):
    # the same tuple and the same limits, bit for bit (signed zeros, NaN, the tolerance's
    # edges at +-1, ints), from a list as the pool keeps it and from a tuple
    for given_free in (list(free), tuple(free), [_Amount(x) for x in free if isinstance(x, float)]):
        vec, limits = placement.compiled_free_row(given_free)
        ref_vec, ref_limits = placement.free_row_reference(given_free)
        assert vec == ref_vec or _same_floats(vec, ref_vec)
        assert _same_floats(limits, ref_limits), (given_free, limits, ref_limits)


def test_a_node_row_is_its_free_vector_and_its_limits_either_way(monkeypatch):
    # the row a pool keeps is (free vector, fit_limits of it), compiled or not
    rows = []
    for pure in (False, True):
        if pure:
            monkeypatch.setenv("FAIRSHARE_PURE_PYTHON", "1")
        else:
            monkeypatch.delenv("FAIRSHARE_PURE_PYTHON", raising=False)
        fresh = importlib.reload(placement)
        assert (fresh.free_row is fresh.free_row_reference) == (pure or fresh.compiled_free_row is None)
        pool = fresh.NodePool([Node("a", (4.0, 1.0 + 1e-9)), Node("b", (0.5, 3.0))], 2)
        pool.take(0, (1.5, 1.0))
        rows.append([pool._fit_row(i) for i in range(2)])
        assert rows[-1][0] == ((2.5, 1e-9 + 1.0 - 1.0), fit_limits((2.5, 1e-9 + 1.0 - 1.0)))
    monkeypatch.undo()
    importlib.reload(placement)
    assert rows[0] == rows[1]


@pytest.mark.skipif(placement.compiled_take_plain is None, reason="engine/_fit_kernel.pyx not built")
@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_task_start_and_end_are_the_references(seed):
    # _fit_kernel.take_plain / give_back_plain against take_plain_reference /
    # give_back_plain_reference on twin pools: after every step the same free lists (the
    # same floats), totals, rows, stale sets, dirty leaves, freed-nodes logs; the log is
    # trimmed on the way (its growing and trimming path) and a node lost ends a task
    rng = random.Random(seed)
    nodes = [Node(f"n{i}", (rng.choice([4.0, 8.0, 0.1 * 7]), rng.choice([2.0, 3.0]))) for i in range(6)]
    pools = [NodePool(nodes, 2) for _ in range(2)]
    steps = [(placement.compiled_take_plain, placement.compiled_give_back_plain),
             (placement.take_plain_reference, placement.give_back_plain_reference)]
    trees = [pool._tree(()) for pool in pools]  # (a tree told of each change)
    for pool in pools:
        pool._limits_np = np.zeros((6, 2))  # (built: each change marks its row stale)
    running: list[tuple[int, tuple]] = []
    for step in range(3 * placement._FREED_LOG):
        if step == 40:
            for pool in pools:
                pool.remove_node("n5")
        if running and (rng.random() < 0.5 or len(running) > 12):
            node, demand = running.pop(rng.randrange(len(running)))
            for pool, (_take, give_back) in zip(pools, steps):
                assert give_back(pool, node, demand) is None
        else:
            node, demand = rng.randrange(6), (rng.choice([0.5, 0.1 * 3, 1.0]), rng.choice([0.25, 1.0]))
            for pool, (take, _give_back) in zip(pools, steps):
                assert take(pool, node, demand) == ()
            running.append((node, demand))
        a, b = pools
        assert [st.free for st in a.states] == [st.free for st in b.states]
        assert [st.tasks for st in a.states] == [st.tasks for st in b.states]
        assert a.total_free == b.total_free and a._rows == b._rows and a._np_stale == b._np_stale
        assert trees[0].dirty == trees[1].dirty
        assert (a._freed, a._freed_base) == (b._freed, b._freed_base)
        assert a._last_freed.tolist() == b._last_freed.tolist()
    assert pools[0]._freed_base > 0  # (the log was trimmed)


def test_a_task_start_and_end_leave_the_node_row_made():
    # NodePool.take and give_back make the node's row at once (the engine reads it right
    # after): the row ``_fit_row`` would make from the free list, kept; with devices or
    # slots the row is left to be made on first use, as any other change leaves it
    pool = NodePool([Node("a", (4.0, 2.0)), Node("b", (1.0, 3.0))], 2)
    pool.take(0, (1.5, 0.5))
    assert pool._rows[0] == placement.free_row_reference([2.5, 1.5])
    pool.give_back(0, (1.5, 0.5))
    assert pool._rows[0] == placement.free_row_reference([4.0, 2.0])
    pool.take(1, (0.25, 3.0))
    made = pool._rows[1]
    pool._rows[1] = None
    assert made == pool._fit_row(1)
    slots = NodePool([Node("a", (4.0, 2.0))], 2, slots_per_node=2)
    slots.take(0, (1.0, 1.0))
    assert slots._rows[0] is None and slots._fit_row(0) == ((math.inf, math.inf), fit_limits((math.inf, math.inf)))
    gpus = NodePool([Node("a", (4.0, 2.0))], 2, devices=(1,))
    gpus.take(0, (1.0, 0.5))
    assert gpus._rows[0] is None


@pytest.mark.skipif(placement.compiled_taken is None, reason="engine/_fit_kernel.pyx not built")
@settings(max_examples=400, deadline=None)
@given(st.integers(1, 4).flatmap(lambda m: st.tuples(*[st.lists(st.one_of(floats, st.sampled_from(EDGE)),
                                                                min_size=m, max_size=m) for _ in range(4)])))
def test_the_compiled_task_accounts_are_the_references(rows):
    # a start and an end on a node: the same new free list and the same total, bit for bit
    # (the capacity object itself kept where the sum is not below it; signed zeros, NaN,
    # infinities, ints, which go through the reference), demand and capacity as tuples
    free, demand, capacity, total = rows
    for compiled, reference, args in (
            (placement.compiled_taken, placement.taken_reference, (free, tuple(demand))),
            (placement.compiled_given_back, placement.given_back_reference, (free, tuple(demand), tuple(capacity)))):
        total_c, total_r = list(total), list(total)
        out_c = compiled(list(args[0]), *args[1:], total_c)
        out_r = reference(list(args[0]), *args[1:], total_r)
        assert _same_floats(out_c, out_r), (args, out_c, out_r)
        assert _same_floats(total_c, total_r), (args, total_c, total_r)
        if reference is placement.given_back_reference:  # (the capacity's own objects kept)
            assert all((a is c) == (b is c) for a, b, c in zip(out_c, out_r, capacity))


def test_the_compiled_task_accounts_refuse_nothing_the_reference_takes():
    # rows of other lengths (the reference's zip stops at the shortest) and ints
    for free, demand, total in (([1.0, 2.0], (0.5,), [3.0, 4.0]), ([1, 2.0], (0.5, 1), [3.0, 4])):
        for fn in (placement.taken, placement.taken_reference):
            t = list(total)
            assert (fn(list(free), demand, t), t) == \
                (placement.taken_reference(list(free), demand, list(total)), [x - d for x, d in zip(total, demand)])
