"""The model's predicates, each defined once (issue 18): the fit test (``fits``), the queue
bound test (``within``), both through ``fit_limit`` and its one ``FIT_TOLERANCE``, and node
eligibility (``satisfies``).

Table-driven at the tolerance's edge (an amount exactly at ``fit_limit`` fits, the next
float above does not), then the callers that keep a specialised form for speed checked
against the definitions (engine/bounds.py's precomputed bounds, engine/fitmemo.py's
vectorized scan), then the edges through the loader, the queue validation and the trace
converters, which now accept exactly what placement would place.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import sys
from operator import gt

import numpy as np
import pytest
from builders import job, q
from hypothesis import given, settings
from hypothesis import strategies as st

from fairshare.engine.bounds import QueueBounds
from fairshare.engine import fitmemo
from fairshare.engine.fitmemo import FitMemo
from fairshare.engine.placement import NodePool
from fairshare.engine.shapes import PendingShapes
from fairshare.model import Node, ScenarioError, TaskClass, parse_scenario
from fairshare.model.cluster import satisfies
from fairshare.model.resources import FIT_TOLERANCE, fit_limit, fit_limits, fits, within
from fairshare.traces.base import NodeFitCache, fits_some_node

TOL = FIT_TOLERANCE  # 1e-9


def above(x: float) -> float:
    """The next float above ``x``: the first amount past an edge."""
    return math.nextafter(x, math.inf)


# --- fit_limit, fits, within: the one tolerance ---------------------------------------------

def test_the_one_tolerance_is_1e_9():
    assert FIT_TOLERANCE == 1e-9


@pytest.mark.parametrize("bound, limit", [
    (0.0, 1e-9),                  # 0 + 1e-9 * max(1, 0): absolute below 1
    (0.5, 0.5 + 1e-9),            # 0.5 + 1e-9 * 1
    (1.0, 1.0 + 1e-9),            # 1 + 1e-9 * 1
    (4.0, 4.0 + 4e-9),            # 4 + 1e-9 * 4: relative above 1
    (1000.0, 1000.0 + 1e-6),      # 1000 + 1e-9 * 1000
    (-2.0, -2.0 + 2e-9),          # -2 + 1e-9 * |-2| (a free amount overdrawn by noise)
    (math.inf, math.inf),
])
def test_fit_limit_by_hand(bound, limit):
    assert fit_limit(bound) == limit


@pytest.mark.parametrize("demand, free, expected", [
    ((1.0, 2.0), (1.0, 2.0), True),                      # exactly the free amounts
    ((1.0 + 1e-9, 2.0), (1.0, 2.0), True),               # 1 + 1e-9 is fit_limit(1)
    ((above(1.0 + 1e-9), 2.0), (1.0, 2.0), False),       # one float past it
    ((1.0, 2.0 + 2e-9), (1.0, 2.0), True),               # 2 + 1e-9 * 2
    ((1.0, above(2.0 + 2e-9)), (1.0, 2.0), False),
    ((1e-9, 0.0), (0.0, 0.0), True),                     # a resource the node lacks: absolute 1e-9
    ((above(1e-9), 0.0), (0.0, 0.0), False),
    ((0.5 + 1e-9,), (0.5,), True),                       # below 1 still absolute
    ((0.5 + 1.5e-9,), (0.5,), False),                    # (the old trace test, 0.5 * (1 + 1e-9), refused it)
    ((1000.0 + 1e-6,), (1000.0,), True),                 # 1e-9 * 1000 above
    ((above(1000.0 + 1e-6),), (1000.0,), False),
    ((), (), True),
])
def test_fits_at_the_edge(demand, free, expected):
    assert fits(demand, free) is expected
    assert (not any(map(gt, demand, fit_limits(free)))) is expected  # placement's precomputed form


def test_fits_refuses_vectors_of_different_lengths():
    with pytest.raises(ValueError):
        fits((1.0, 1.0), (2.0,))


@pytest.mark.parametrize("usage, demand, bound, expected", [
    (3.0, 1.0, 4.0, True),                      # 3 + 1 = 4: exactly at the limit
    (3.0, 1.0 + 4e-9, 4.0, True),               # 4 + 4e-9 = fit_limit(4)
    (3.0, 1.0 + 5e-9, 4.0, False),              # past 4 + 1e-9 * 4
    (0.0, above(4.0 + 4e-9), 4.0, False),       # one float past it
    (0.0, 0.5, 0.5, True),
    (0.0, 0.5 + 1e-9, 0.5, True),               # 0.5 + 1e-9, absolute below 1
    (0.0, above(0.5 + 1e-9), 0.5, False),
    (0.25, 0.25 + 2e-9, 0.5, False),
    (0.0, 1e-9, 0.0, True),                     # a zero limit still has the tolerance
    (0.0, 2e-9, 0.0, False),
    (10.0, 0.0, 4.0, False),                    # already past it: any demand is over
    (0.0, 5.0, math.inf, True),                 # no limit
])
def test_within_at_the_edge(usage, demand, bound, expected):
    assert within(usage, demand, bound) is expected


SPECIAL = [0.0, -0.0, 0.5, 1.0, -1.0, 2.0, 4.0, 1000.0, 1e-9, 2e-9, 1.0 + 1e-9, 4.0 + 4e-9,
           above(1.0 + 1e-9), above(4.0 + 4e-9), 1.0000000000000002, 0.9999999999999999,
           1e300, 5e-324, math.inf, -math.inf, math.nan]
floats = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True))


@given(st.lists(st.tuples(floats, floats), max_size=5))
def test_fits_is_within_from_nothing(pairs):
    demand = [d for d, _ in pairs]
    free = [f for _, f in pairs]
    # 0.0 + d is d for every float but -0.0, which compares as 0.0
    assert fits(demand, free) == all(within(0.0, d, f) for d, f in pairs)
    assert fits(demand, free) == (not any(map(gt, demand, fit_limits(free))))


@given(floats)
def test_fit_limit_is_the_documented_formula(bound):
    ref = bound + FIT_TOLERANCE * max(1.0, abs(bound))
    got = fit_limit(bound)
    assert got == ref or (math.isnan(got) and math.isnan(ref))


# --- satisfies: node eligibility ------------------------------------------------------------

V100 = (("gpu_model", "V100"), ("zone", "a"))


@pytest.mark.parametrize("attributes, constraints, expected", [
    (V100, (), True),                                                   # no constraints: every node
    ((), (), True),
    (V100, (("gpu_model", ("V100",)),), True),
    (V100, (("gpu_model", ("A10", "V100")),), True),                    # one of the allowed values
    (V100, (("gpu_model", ("T4",)),), False),
    (V100, (("gpu_model", ("V100",)), ("zone", ("b",))), False),        # every constraint must hold
    (V100, (("gpu_model", ("V100",)), ("zone", ("a", "b"))), True),
    (V100, (("rack", ("r1",)),), False),                                # the node lacks the attribute
    (V100, (("rack", ("None",)),), False),                              # ... even against the string "None"
    (dict(V100), {"gpu_model": ["V100"]}.items(), True),                # mapping and items() work as well
])
def test_satisfies(attributes, constraints, expected):
    assert satisfies(attributes, constraints) is expected


# --- the specialised forms, against the definitions -------------------------------------------

AMOUNTS = [0.0, 0.5, 1.0, 1e-9, 2e-9, 4e-9, 5e-9, 1.0 + 1e-9, above(1.0 + 1e-9), 3.0, 4.0]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_queue_bounds_are_within(data):
    # engine/bounds.py tests ``usage + demand > fit_limit(bound)`` against bounds widened
    # once; that must be ``not within(usage, demand, bound)`` on every input
    bounds = st.sampled_from([0.0, 0.5, 1.0, 2.0, 4.0, 1000.0])
    limit = data.draw(st.tuples(bounds, bounds))
    guarantee = data.draw(st.tuples(bounds, bounds))
    spec = {"cluster": {"capacity": {"cpu": 10 ** 6, "mem": 10 ** 6}},
            "jobs": [job("j", {"cpu": 1, "mem": 1}, queue="a")],
            "queues": [q("a", 1)]}
    spec["queues"][0]["limit"] = dict(zip(("cpu", "mem"), limit))
    spec["queues"][0]["guarantee"] = {r: min(g, x) for r, g, x in zip(("cpu", "mem"), guarantee, limit) if g > 0}
    sc = parse_scenario(spec, "<test>")
    qb = QueueBounds(sc.queues, sc.resources)
    usage = data.draw(st.tuples(st.sampled_from(AMOUNTS + [4.0 + 4e-9]), st.sampled_from(AMOUNTS)))
    demand = data.draw(st.tuples(st.sampled_from(AMOUNTS), st.sampled_from(AMOUNTS)))
    qb.usage["a"] = list(usage)
    lim = sc.queues["a"].limit_vector(sc.resources)
    gua = sc.queues["a"].guarantee_vector(sc.resources)
    assert qb.over_limit("a", demand) == any(d > 0 and not within(u, d, x) for u, d, x in zip(usage, demand, lim))
    uses = [r for r in range(2) if gua[r] > 0 and demand[r] > 0]
    assert qb.owed("a", demand) == (bool(uses) and all(within(usage[r], demand[r], gua[r]) for r in uses))


def freed_scan(demands):
    """Four nodes in two zones, every demand pending with and without a zone constraint,
    and every node freed once since a mark: (pool, nodes, memo, mark)."""
    caps = [(1.0, 4.0), (0.5, 0.0), (1000.0, 2.0), (4.0, 4.0)]
    nodes = [Node(f"n{i}", cap, attributes=(("zone", "ab"[i % 2]),)) for i, cap in enumerate(caps)]
    pool = NodePool(nodes, 2)
    shapes = PendingShapes(2)
    for k, d in enumerate(demands):
        for constraints in ((), (("zone", ("a",)),)):
            shapes.track(TaskClass(f"c{k}", d, 1, constraints=constraints), +1)
    shapes.new.clear()
    memo = FitMemo(pool, shapes)
    mark = pool.freed_mark()
    for i in range(len(nodes)):  # free every node once
        pool.give_back(i, (0.0, 0.0), pool.take(i, (0.0, 0.0)))
    return pool, nodes, memo, mark


def test_the_scan_of_freed_nodes_is_fits():
    # engine/fitmemo.py tests every pending shape against a freed node in one NumPy
    # comparison; it must find exactly the shapes ``fits`` finds, at the edge included
    demands = [(1.0, 4.0), (1.0 + 1e-9, 4.0 + 4e-9), (above(1.0 + 1e-9), 1.0), (0.5 + 1e-9, 1e-9),
               (0.5, above(1e-9)), (1000.0 + 1e-6, 2.0), (above(1000.0 + 1e-6), 0.0), (4.0, above(4.0 + 4e-9))]
    pool, nodes, memo, mark = freed_scan(demands)
    local, searched = memo.candidate_shapes(mark, 100)
    assert searched == []
    expected = {}
    for d in demands:
        for constraints in ((), (("zone", ("a",)),)):
            at = {i for i, nd in enumerate(nodes) if satisfies(nd.attributes, constraints) and fits(d, nd.capacity)}
            if at:
                expected[(d, constraints)] = at
    assert local == expected
    assert (((1.0 + 1e-9, 4.0 + 4e-9), ()) in local) and (((above(1.0 + 1e-9), 1.0), ()) in local)  # n3 holds it


def test_the_scan_by_node_and_its_recheck_after_a_launch_are_fits():
    # scan_freed (by node, with the shapes' needs as matrix columns) gives what
    # candidate_shapes gives; after a task takes room on a node, still_fitting keeps
    # exactly the shapes that ``fits`` still finds there, at the edge included
    pool, _nodes, memo, mark = freed_scan([(1.0, 4.0), (1.0 + 1e-9, 4.0 + 4e-9), (0.5, 1.0), (0.5 + 1e-9, 1e-9),
                                           (0.25, 0.0), (1000.0 + 1e-6, 2.0), (4.0, above(4.0 + 4e-9)), (2.0, 2.0)])
    fitting_on, found = memo.scan_freed(mark, 100)
    local, _ = memo.candidate_shapes(mark, 100)
    assert found == [] and local
    assert {(key, node) for node, (keys, _needs, _numbers) in fitting_on.items() for key in keys} == \
        {(key, node) for key, at in local.items() for node in at}
    for node, (keys, needs, _numbers) in fitting_on.items():
        assert needs.T.tolist() == [list(pool.effective_need(key[0])) for key in keys]
    dropped = kept = 0
    for taken in [(0.5, 0.0), (0.5 - 1e-9, 2.0), (1.0, 1.0)]:  # room taken on each node in turn
        for node in sorted(fitting_on):
            if not fits(taken, pool.available(node)):
                continue
            pool.take(node, taken)
            before = fitting_on[node]
            after = memo.still_fitting(node, before)
            expected = [key for key in before[0] if fits(key[0], pool.available(node))]
            assert after[0] == expected
            assert after[1].T.tolist() == [list(key[0]) for key in expected]
            fitting_on[node] = after
            dropped += len(before[0]) - len(expected)
            kept += len(expected)
    assert dropped and kept  # both cases met


def test_the_fit_kernel_ports_the_reference_as_it_is():
    # engine/_fit_kernel.pyx repeats restrict_reference's test: one changed must be changed
    # in the other too before the digest is renewed
    digest = hashlib.sha256(inspect.getsource(fitmemo.restrict_reference).encode()).hexdigest()[:16]
    assert digest == fitmemo.RESTRICT_PORTED_FROM, \
        f"restrict_reference changed since _fit_kernel.pyx ported it: mirror the change there, then set its digest to {digest}"


def test_the_fit_kernel_is_built_where_a_compiler_is():
    # as the sorter core (tests/test_compiled_core.py): `make test` sets
    # FAIRSHARE_REQUIRE_COMPILED=1 where a compiler is, and there the install builds it
    if os.environ.get("FAIRSHARE_REQUIRE_COMPILED") != "1":
        pytest.skip("FAIRSHARE_REQUIRE_COMPILED is not 1 (make test sets it where a compiler is)")
    assert fitmemo.compiled_restrict is not None


@pytest.mark.skipif(fitmemo.compiled_restrict is None, reason="engine/_fit_kernel.pyx not built")
@pytest.mark.parametrize("seed", range(3))
def test_the_compiled_fit_test_is_the_numpy_one(seed):
    # engine/_fit_kernel.pyx's restrict must give restrict_reference's shapes, needs and
    # numbers, in column order, on every float it compares: the tolerance's edge, NaN and
    # infinities on either side, no shape fitting, every shape fitting (then the whole
    # record itself), a strided matrix
    rng = np.random.default_rng(seed)
    edge = [0.0, 0.5, 1.0, 1.0 + 1e-9, fit_limit(1.0), 2.0, math.nan, math.inf, -1.0]
    outcomes = set()
    for _ in range(400):
        m, n = int(rng.integers(1, 6)), int(rng.integers(0, 30))
        needs = np.ascontiguousarray(rng.choice(edge, size=(m, n)))
        keys = [((float(i),), ()) for i in range(n)]
        numbers = rng.integers(-1, 50, size=n).astype(np.intp)
        limits = tuple(float(x) for x in rng.choice(edge + [fit_limit(2.0)], size=m))
        for ks, ns, nums in ((keys, needs, numbers), (keys[::2], needs[:, ::2], numbers[::2])):
            whole = (ks, ns, nums)
            want = fitmemo.restrict_reference(ks, ns, nums, limits, None)
            got = fitmemo.compiled_restrict(ks, ns, nums, limits, None)
            assert got[0] == want[0] and got[2].tolist() == want[2].tolist()
            assert got[1].shape == want[1].shape and np.array_equal(got[1], want[1], equal_nan=True)
            same = fitmemo.compiled_restrict(ks, ns, nums, limits, whole) is whole
            assert same == (fitmemo.restrict_reference(ks, ns, nums, limits, whole) is whole)
            outcomes.add((same, len(want[0]) == 0))
    assert outcomes >= {(True, False), (False, True), (False, False)}  # all, none and some fit


@pytest.mark.skipif(fitmemo.compiled_restrict is None, reason="engine/_fit_kernel.pyx not built")
def test_the_compiled_fit_test_reads_any_layout_and_refuses_other_types():
    # restrict reads its arrays through the buffer protocol by their strides (issue 24,
    # round 13): a column-major matrix and a reversed vector give the reference's answer;
    # an array of another type or shape is refused by name, as the typed memoryviews it
    # replaced refused it; every buffer taken is released, whatever the outcome (a buffer
    # held holds a reference to its array: the counts come back to where they were)
    needs = np.asfortranarray([[0.5, 2.0, 0.1], [0.2, 0.3, 0.9]])
    numbers = np.arange(3, dtype=np.intp)[::-1]
    held = sys.getrefcount(needs), sys.getrefcount(numbers)
    keys, limits = [("a",), ("b",), ("c",)], (1.0, 1.0)
    want = fitmemo.restrict_reference(keys, needs, numbers, limits, None)
    got = fitmemo.compiled_restrict(keys, needs, numbers, limits, None)
    # columns 0 and 2 fit (2.0 > 1.0 in column 1), numbers read backwards: 2 and 0
    assert got[0] == want[0] == [("a",), ("c",)] and got[2].tolist() == want[2].tolist() == [2, 0]
    assert got[1].tolist() == want[1].tolist() == [[0.5, 0.1], [0.2, 0.9]]
    with pytest.raises(ValueError, match="float64"):
        fitmemo.compiled_restrict(keys, needs.astype(np.float32), numbers, limits, None)
    with pytest.raises(ValueError, match="intp"):
        fitmemo.compiled_restrict(keys, needs, numbers.astype(np.int32), limits, None)
    with pytest.raises(ValueError, match="2-dimensional"):
        fitmemo.compiled_restrict(keys, needs[0], numbers, limits, None)
    with pytest.raises(ValueError, match="3 limits for 2 rows"):
        fitmemo.compiled_restrict(keys, needs, numbers, (1.0, 1.0, 1.0), None)
    for restrict in (fitmemo.restrict_reference, fitmemo.compiled_restrict):  # (a number short: as NumPy)
        with pytest.raises(IndexError):
            restrict(keys, needs, numbers[:2], limits, None)
    with pytest.raises(ValueError, match="intp"):  # (needs' buffer taken, then numbers' refused)
        fitmemo.compiled_restrict(keys, needs, numbers.astype(np.float64), limits, None)
    del got, want
    assert (sys.getrefcount(needs), sys.getrefcount(numbers)) == held


# --- the edges through the loader, the queue validation and the traces ------------------------

def one_node(demand: dict, capacity: dict, constraints=None, attributes=None):
    node = {"name": "n", "capacity": capacity}
    if attributes:
        node["attributes"] = attributes
    task = {"demand": demand, "count": 1}
    if constraints:
        task["constraints"] = constraints
    return {"resources": list(capacity), "cluster": {"nodes": [node]}, "jobs": [{"name": "j", "tasks": [task]}]}


@pytest.mark.parametrize("cpu, accepted", [
    (2.0, True),
    (2.0 + 2e-9, True),         # fit_limit(2) = 2 + 2e-9: the loader used to refuse this (exact test)
    (2.0 + 3e-9, False),
])
def test_loader_accepts_what_fits(cpu, accepted):
    data = one_node({"cpu": cpu, "mem": 1.0}, {"cpu": 2.0, "mem": 1.0})
    if accepted:
        assert parse_scenario(data, "<test>").jobs[0].classes[0].demand == (cpu, 1.0)
    else:
        with pytest.raises(ScenarioError) as info:
            parse_scenario(data, "<test>")
        assert [e.path for e in info.value.errors] == ["jobs[0].tasks[0].demand"]


@pytest.mark.parametrize("constraints, accepted", [
    ({"gpu_model": "V100"}, True),
    ({"gpu_model": ["T4", "V100"]}, True),
    ({"gpu_model": "T4"}, False),
    ({"rack": "None"}, False),  # a node without the attribute
])
def test_loader_eligibility(constraints, accepted):
    data = one_node({"cpu": 1}, {"cpu": 2}, constraints, {"gpu_model": "V100"})
    if accepted:
        parse_scenario(data, "<test>")
    else:
        with pytest.raises(ScenarioError) as info:
            parse_scenario(data, "<test>")
        assert [e.path for e in info.value.errors] == ["jobs[0].tasks[0].constraints"]


@pytest.mark.parametrize("second, accepted", [
    (40.0, True),               # 60 + 40 = 100
    (40.0 + 1e-7, True),        # 100 + 1e-7 = fit_limit(100): refused before (1e-12 relative)
    (40.0 + 2e-7, False),
])
def test_guarantees_fit_in_the_cluster_within_the_tolerance(second, accepted):
    queues = [dict(q("a", 1), guarantee={"cpu": 60}), dict(q("b", 1), guarantee={"cpu": second})]
    data = {"cluster": {"capacity": {"cpu": 100}}, "jobs": [job("j", {"cpu": 1}, queue="a")], "queues": queues}
    if accepted:
        parse_scenario(data, "<test>")
    else:
        with pytest.raises(ScenarioError) as info:
            parse_scenario(data, "<test>")
        assert [e.path for e in info.value.errors] == ["queues"]  # the top level's problem


NODES = [{"name": "small", "capacity": {"cpu": 0.5, "memory": 0.25}},
         {"name": "gpu", "capacity": {"cpu": 8, "gpu": 2}, "attributes": {"gpu_model": "V100", "slot": 3}}]


@pytest.mark.parametrize("demand, constraints, expected", [
    ({"cpu": 0.5, "memory": 0.25}, None, True),
    ({"cpu": 0.5 + 1e-9, "memory": 0.25}, None, True),     # fit_limit(0.5); refused before: 0.5 * (1 + 1e-9)
    ({"cpu": 0.5 + 2e-9, "memory": 0.25}, None, False),
    ({"cpu": 8 + 8e-9, "gpu": 2}, None, True),             # fit_limit(8) = 8 + 8e-9
    ({"cpu": 8 + 9e-9, "gpu": 2}, None, False),
    ({"cpu": 1, "gpu": 1}, {"gpu_model": ["V100"]}, True),
    ({"cpu": 1, "gpu": 1}, {"gpu_model": ["T4"]}, False),
    ({"cpu": 1, "gpu": 1}, {"slot": [3]}, True),           # values compared as strings, as the loader reads them
    ({"cpu": 0.1}, {"rack": ["None"]}, False),             # no node has a rack; matched "None" before
    ({"gpu": 1e-9}, None, True),                          # a resource "small" lacks: absolute 1e-9
])
def test_trace_converters_fit_as_the_loader(demand, constraints, expected):
    assert fits_some_node(demand, NODES, constraints) is expected
    assert NodeFitCache(NODES).fits(demand, constraints) is expected
