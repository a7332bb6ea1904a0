"""Gangs in the static allocations (issue 20, item 1): all of a gang's demand or none
(divisible, the exact filling), its whole placement or none (discrete, DRF Sec. 6.2's
greedy), for every filling policy; ceei and slowdown refuse gangs. docs/policies.md,
"Gangs and priorities within a queue", gives the reading."""

from __future__ import annotations

import pytest
from builders import job, q, scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import scenarios

from fairshare import allocate
from fairshare.conformance.workloads import drf_41
from fairshare.policies.base import PolicyModeError

FILLING = ["drf", "asset", "hdrf", "hdrf-naive", "capacity", "collapsed", "dff", "cpu", "fifo"]


def gang(name, demand, count, queue=None, *, pack=None, submit=0):
    entry = job(name, demand, queue, count=count, submit=submit)
    entry["gang"] = True
    if pack is not None:
        entry["pack"] = pack
    return entry


def drf_41_gang(count):
    """DRF Sec. 4.1 (<9 CPU, 18 GB>, A <1, 4>, B <3, 1>) with B a gang of ``count`` tasks,
    on one node of the whole capacity."""
    return scenario(nodes=[{"name": "n1", "capacity": {"cpu": 9, "mem": 18}}],
                    jobs=[job("A", {"cpu": 1, "mem": 4}), gang("B", {"cpu": 3, "mem": 1}, count)])


def tasks(alloc):
    return {name: ja.tasks for name, ja in alloc.jobs.items()}


# (count, discrete, expected tasks): the arithmetic in the comment
DRF_41_CASES = [
    # B's whole demand <6, 2> has dominant share 6/9 = 2/3; A reaches 2/3 at x = 3 (12/18);
    # <6, 2> fits in the <6, 6> left: B admitted. CPU is then 3 + 6 = 9, saturated: A stops.
    # The divisible DRF answer of Sec. 4.1 (3 and 2), now with B whole.
    (2, False, {"A": 3.0, "B": 2.0}),
    # B <3, 1> whole is at 3/9 = 1/3; A reaches 1/3 at x = 1.5 (6/18); B admitted (<3, 1>
    # fits in <7.5, 12>); A alone grows until memory: 4x + 1 = 18, x = 4.25 (CPU 7.25).
    (1, False, {"A": 4.25, "B": 1.0}),
    # B <9, 3> whole is at 9/9 = 1; A reaches 1 at x = 4.5, where memory (4.5 * 4 = 18)
    # saturates: <9, 3> does not fit in <4.5, 0>, B is frozen at 0.
    (3, False, {"A": 4.5, "B": 0.0}),
    # greedy: both at 0, A listed first takes a task (A at 4/18); B at 0 is lowest and
    # places its <6, 2> whole (free <8, 14>); then A (4/18 < 6/9) takes tasks until CPU:
    # 1 + 6 + 2 = 9, A = 3.
    (2, True, {"A": 3.0, "B": 2.0}),
    # A takes a task; B's <3, 1> is placed whole (free <8, 14>); A then takes 3 more by
    # memory: 4 + 1 + 12 = 17, a fifth would need 21 GB. A = 4.
    (1, True, {"A": 4.0, "B": 1.0}),
    # A takes a task (free <8, 14>); B's <9, 3> does not fit: blocked at 0. A alone: 4
    # tasks by memory (16 of 18 GB).
    (3, True, {"A": 4.0, "B": 0.0}),
]


@pytest.mark.parametrize("count, discrete, expected", DRF_41_CASES)
def test_drf_41_with_a_gang(count, discrete, expected):
    assert tasks(allocate(drf_41_gang(count), "drf", discrete=discrete)) == pytest.approx(expected)


def test_drf_41_without_a_gang_is_unchanged():
    # the same jobs, B divisible: Sec. 4.1's 3 and 2 (x + 3y = 9, 4x + y = 18)
    assert tasks(allocate(drf_41(1), "drf")) == pytest.approx({"A": 3.0, "B": 2.0})


def hdrf_two_queues(cpu):
    """Queues a and b (weight 1 each) on ``cpu`` CPUs: a holds a1 <1> and gang g (4 x <1>),
    b holds b1 <1>."""
    return scenario(nodes=[{"name": "n1", "capacity": {"cpu": cpu}}], queues=[q("a"), q("b")],
                    jobs=[job("a1", {"cpu": 1}, "a"), gang("g", {"cpu": 1}, 4, "a"), job("b1", {"cpu": 1}, "b")])


HDRF_CASES = [
    # g whole is at 4/12 = 1/3. a and b receive alike (a1 and b1 at x each); a1 reaches 1/3
    # at x = 4, where 8 of 12 are used: g's 4 fit, admitted. a is at 8/12, b at 4/12: b1
    # takes what is left, 0. The cost of indivisibility: a gets 8, b 4.
    (12, False, {"a1": 4.0, "g": 4.0, "b1": 4.0}),
    # on 10 CPUs g is at 4/10; x reaches 4 with 8 used: 4 do not fit in 2, g frozen at 0;
    # a1 and b1 share the rest: 5 each (H-DRF's answer without g).
    (10, False, {"a1": 5.0, "g": 0.0, "b1": 5.0}),
    # greedy on 12: a (listed first) -> a1 (listed before g) 1 task; b -> b1 1; a (tie, 1
    # task each, a first) -> g at 0 is lowest: 4 at once, a = 5; b1 to 5; then one each:
    # a1 2, b1 6 (a = 6, b = 6).
    (12, True, {"a1": 2.0, "g": 4.0, "b1": 6.0}),
]


@pytest.mark.parametrize("cpu, discrete, expected", HDRF_CASES)
def test_hdrf_gang_in_a_queue(cpu, discrete, expected):
    assert tasks(allocate(hdrf_two_queues(cpu), "hdrf", discrete=discrete)) == pytest.approx(expected)


def test_a_gang_waiting_when_nothing_else_grows_is_admitted():
    # A (2 x <1>) stops at its count at level 2/10; g (5 x <1>) waits at 5/10, which no
    # job being filled reaches: when nothing grows it is admitted, its 5 fit in the 8 left.
    sc = scenario(capacity={"cpu": 10}, jobs=[job("A", {"cpu": 1}, count=2), gang("g", {"cpu": 1}, 5)])
    assert tasks(allocate(sc, "drf", respect_counts=True)) == pytest.approx({"A": 2.0, "g": 5.0})


FIFO_CASES = [
    # the gang arrives first: its turn comes first, its 6 are admitted; Y takes the 4 left
    (0, 1, {"X": 2.0, "Y": 4.0}),
    # Y (unbounded) arrives first and takes all 10; the gang's turn finds 0 left: 0
    (1, 0, {"X": 0.0, "Y": 10.0}),
]


@pytest.mark.parametrize("gang_submit, other_submit, expected", FIFO_CASES)
def test_fifo_gives_a_gang_its_turn(gang_submit, other_submit, expected):
    sc = scenario(capacity={"cpu": 10}, jobs=[gang("X", {"cpu": 3}, 2, submit=gang_submit),
                                              job("Y", {"cpu": 1}, submit=other_submit)])
    assert tasks(allocate(sc, "fifo")) == pytest.approx(expected)


PACK_CASES = [
    # A's one task goes first (listed first) on n1, leaving n1 2 CPUs; the gang's 3 tasks of
    # 2 CPUs anywhere: first fit, 1 on n1 and 2 on n2
    (None, {"n1": 1, "n2": 2}),
    # on one node: n1's 2 free hold 1 of the 6, n2's 6 all of them
    ("node", {"n2": 3}),
]


@pytest.mark.parametrize("pack, expected", PACK_CASES)
def test_discrete_gang_honours_pack(pack, expected):
    sc = scenario(nodes=[{"name": "n1", "capacity": {"cpu": 4}}, {"name": "n2", "capacity": {"cpu": 6}}],
                  jobs=[job("A", {"cpu": 2}, count=1), gang("g", {"cpu": 2}, 3, pack=pack)])
    alloc = allocate(sc, "drf", discrete=True, respect_counts=True)
    placed = {node: sum(per_job["g"].values()) for node, per_job in alloc.placement.items() if "g" in per_job}
    assert placed == expected


def test_a_gang_over_its_queues_limit_is_not_admitted():
    # queue a's limit is 3 CPUs: g's 4 cannot be admitted (divisible and discrete); a1 takes the 3
    queues = [{"name": "a", "limit": {"cpu": 3}}, q("b")]
    sc = scenario(nodes=[{"name": "n1", "capacity": {"cpu": 10}}], queues=queues,
                  jobs=[job("a1", {"cpu": 1}, "a"), gang("g", {"cpu": 1}, 4, "a"), job("b1", {"cpu": 1}, "b")])
    for discrete in (False, True):
        got = tasks(allocate(sc, "hdrf", discrete=discrete))
        assert got["g"] == 0.0 and got["a1"] == pytest.approx(3.0)


@pytest.mark.parametrize("policy", ["ceei", "slowdown"])
def test_lp_policies_refuse_gangs_naming_the_job(policy):
    with pytest.raises(PolicyModeError, match=r"jobs\[1\] \('B'\).*gang"):
        allocate(drf_41_gang(2), policy)


def assert_gangs_whole(sc, alloc):
    for job_ in sc.jobs:
        if job_.gang:
            got = alloc.jobs[job_.name].tasks
            assert got == pytest.approx(0.0, abs=1e-9) or got == pytest.approx(job_.total_count, rel=1e-9), \
                f"gang {job_.name} got {got} of {job_.total_count} tasks"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(gangs=True), respect=st.booleans())
@pytest.mark.parametrize("policy", FILLING)
def test_divisible_gang_gets_all_or_nothing(policy, sc, respect):
    alloc = allocate(sc, policy, respect_counts=respect)
    assert_gangs_whole(sc, alloc)
    for r, cap in enumerate(sc.capacity):
        assert sum(ja.allocation[r] for ja in alloc.jobs.values()) <= cap * (1 + 1e-7) + 1e-12


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(gangs=True, nodes=True))
@pytest.mark.parametrize("policy", FILLING)
def test_discrete_gang_gets_its_whole_placement_or_nothing(policy, sc):
    alloc = allocate(sc, policy, discrete=True)
    assert_gangs_whole(sc, alloc)
    for job_ in sc.jobs:
        if job_.gang:
            placed = sum(sum(per_job.get(job_.name, {}).values()) for per_job in alloc.placement.values())
            assert placed == alloc.jobs[job_.name].tasks
