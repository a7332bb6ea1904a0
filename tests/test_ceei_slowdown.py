"""CEEI (Ghodsi et al., NSDI'11, Sec. 5.2 and 6.1.2) and multiclass slowdown fairness
(Tan et al., Sec. 2-4) on the papers' own examples, exact to the precision they print.

Arithmetic is in the comments next to each expected number. CEEI's answers are exact to
~1e-12; the slowdown's are LP vertices polished to machine precision.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fairshare
from fairshare.model import parse_scenario
from fairshare.policies.base import PolicyModeError
from fairshare.policies.slowdown import Slowdown, slowdown

EXACT = 1e-12  # relative tolerance for numbers the papers give as fractions
SLOWDOWN_EXACT = 1e-9  # the contract's divisible precision (LP, polished)

# --------------------------------------------------------------------------------------
# builders: scenarios from dicts, through the validating loader


def tasks(*classes: tuple) -> list[dict]:
    """Task classes as ``(name, demand)`` or ``(name, demand, count)``."""
    out = []
    for c in classes:
        d = {"class": c[0], "demand": c[1]}
        if len(c) > 2:
            d["count"] = c[2]
        out.append(d)
    return out


def job(name: str, demand: dict, *, weight: float = 1, count: int | None = None) -> dict:
    task = {"demand": demand} if count is None else {"demand": demand, "count": count}
    return {"name": name, "weight": weight, "tasks": [task]}


def workflow(name: str, *classes: tuple, weight: float = 1) -> dict:
    return {"name": name, "weight": weight, "tasks": tasks(*classes)}


def pooled(capacity: dict, jobs: list[dict]):
    return parse_scenario({"cluster": {"capacity": capacity}, "jobs": jobs}, "<test>")


def job_tasks(alloc) -> dict[str, float]:
    return {name: ja.tasks for name, ja in alloc.jobs.items()}


# --------------------------------------------------------------------------------------
# CEEI: the paper's examples

# DRF Sec. 5.2 (and Sec. 4.1's example): <9 CPU, 18 GB>, A <1 CPU, 4 GB>, B <3 CPU, 1 GB>.
SEC52 = pooled({"cpu": 9, "mem": 18}, [job("A", {"cpu": 1, "mem": 4}), job("B", {"cpu": 3, "mem": 1})])
# DRF Thm 4: <100, 100>, user 1 <16, 1>, user 2 <1, 2>.
THM4 = pooled({"r1": 100, "r2": 100}, [job("u1", {"r1": 16, "r2": 1}), job("u2", {"r1": 1, "r2": 2})])
# ... and user 1's lie <16, 8> (asks 8x the resource 2 it needs).
THM4_LIE = pooled({"r1": 100, "r2": 100}, [job("u1", {"r1": 16, "r2": 8}), job("u2", {"r1": 1, "r2": 2})])
# DRF Thm 5: <100, 100>, D1 = <4, 1>, D2 = <1, 16>, D3 = <16, 1>; then user 3 leaves.
THM5 = pooled({"r1": 100, "r2": 100}, [job("u1", {"r1": 4, "r2": 1}), job("u2", {"r1": 1, "r2": 16}),
                                       job("u3", {"r1": 16, "r2": 1})])
THM5_WITHOUT_U3 = THM5.without_job("u3")


@dataclass(frozen=True)
class CeeiCase:
    id: str
    scenario: object
    expected: dict[str, float]
    rel: float = EXACT
    abs: float = 0.0
    respect_counts: bool = False


CEEI_CASES = [
    # Sec. 5.2: max x*y s.t. x + 3y <= 9 (CPU), 4x + y <= 18 (mem). Both bind (the
    # Nash point under either constraint alone overuses the other resource):
    # x = 9 - 3y, 4(9 - 3y) + y = 18 -> 36 - 11y = 18 -> y = 18/11, x = 9 - 54/11 = 45/11.
    CeeiCase("drf-sec5.2", SEC52, {"A": 45 / 11, "B": 18 / 11}),
    # Thm 4, truthful: max x*y s.t. 16x + y <= 100, x + 2y <= 100. Resource 1 alone would
    # give x = 100/32, y = 50 -> r2 use 3.125 + 100 > 100; both bind:
    # 16x + y = 100, x + 2y = 100 -> 31x = 100 -> x = 100/31 (3.2), y = 1500/31 (48.4).
    CeeiCase("drf-thm4-truthful", THM4, {"u1": 100 / 31, "u2": 1500 / 31}),
    # Thm 4, u1 claims <16, 8>: 16x + y = 100, 8x + 2y = 100 -> 24x = 100 -> x = 25/6 (4.2),
    # y = 100 - 400/6 = 100/3 (33.3).
    CeeiCase("drf-thm4-lie", THM4_LIE, {"u1": 25 / 6, "u2": 100 / 3}),
    # Thm 5: "CEEI will yield the allocation A1 = (11.3, 5.4, 3.1)" (paper's precision).
    CeeiCase("drf-thm5-three-users", THM5, {"u1": 11.3, "u2": 5.4, "u3": 3.1}, rel=0.0, abs=0.05),
    # Thm 5, user 3 gone: "A2 = (23.8, 4.8)"; exactly 4x + y = 100, x + 16y = 100 ->
    # 63x = 1500 -> x = 500/21 (23.81), y = (100 - 500/21)/16 = 100/21 (4.76).
    CeeiCase("drf-thm5-without-u3", THM5_WITHOUT_U3, {"u1": 500 / 21, "u2": 100 / 21}),
    # Weighted incomes: one resource, weights 1 and 3 -> max log x + 3 log y s.t. x + y <= 8
    # -> spend in proportion to income: x = 8/4 = 2, y = 3 * 8/4 = 6.
    CeeiCase("weighted-incomes", pooled({"cpu": 8}, [job("a", {"cpu": 1}), job("b", {"cpu": 1}, weight=3)]),
             {"a": 2.0, "b": 6.0}),
    # Counts (respect_counts): Sec. 5.2 with A capped at 2 tasks (<2, 8> used). B alone on
    # what is left, <7, 10>: y = min(7/3, 10/1) = 7/3.
    CeeiCase("sec5.2-A-capped", pooled({"cpu": 9, "mem": 18}, [job("A", {"cpu": 1, "mem": 4}, count=2),
                                                              job("B", {"cpu": 3, "mem": 1})]),
             {"A": 2.0, "B": 7 / 3}, respect_counts=True),
    # Thm 5 with u3 capped at 1 task <16, 1>: u1, u2 clear <84, 99>:
    # 4x + y = 84, x + 16y = 99 -> 63x = 1344 - 99 = 1245 -> x = 1245/63 (19.76),
    # y = 84 - 4x = 312/63 (4.95). u3 at those prices would want 6.0 > 1, so the cap binds
    # (checked in the solver's KKT test).
    CeeiCase("thm5-u3-capped", pooled({"r1": 100, "r2": 100}, [
        job("u1", {"r1": 4, "r2": 1}), job("u2", {"r1": 1, "r2": 16}), job("u3", {"r1": 16, "r2": 1}, count=1)]),
             {"u1": 1245 / 63, "u2": 312 / 63, "u3": 1.0}, respect_counts=True),
    # A count that does not bind changes nothing: Sec. 5.2 with A's count 100 > 45/11.
    CeeiCase("sec5.2-loose-count", pooled({"cpu": 9, "mem": 18}, [job("A", {"cpu": 1, "mem": 4}, count=100),
                                                                 job("B", {"cpu": 3, "mem": 1})]),
             {"A": 45 / 11, "B": 18 / 11}, respect_counts=True),
]


@pytest.mark.parametrize("case", CEEI_CASES, ids=[c.id for c in CEEI_CASES])
def test_ceei_paper_examples(case: CeeiCase):
    alloc = fairshare.allocate(case.scenario, "ceei", respect_counts=case.respect_counts)
    assert alloc.policy == "ceei" and alloc.mode == "divisible"
    for name, expected in case.expected.items():
        assert alloc.jobs[name].tasks == pytest.approx(expected, rel=case.rel, abs=case.abs), name
    # never over capacity
    assert all(u <= 1 + 1e-12 for u in alloc.utilization)


def test_ceei_market_clears():
    # DRF Sec. 5.2: "CEEI ... finds a solution satisfying market clearance, where every
    # resource has been allocated": CPU 45/11 + 3*18/11 = 99/11 = 9, mem 180/11 + 18/11 = 18.
    alloc = fairshare.allocate(SEC52, "ceei")
    assert alloc.utilization == pytest.approx((1.0, 1.0), rel=EXACT)
    # "user A gets 4.1 CPUs, 16.4 GB, while user B gets 4.9 CPUs, 1.6 GB"
    assert alloc.jobs["A"].allocation == pytest.approx((4.1, 16.4), abs=0.05)
    assert alloc.jobs["B"].allocation == pytest.approx((4.9, 1.6), abs=0.05)


def true_tasks(allocation: tuple[float, ...], true_demand: tuple[float, ...]) -> float:
    """Tasks a bundle runs for the true demand: min_r alloc_r / demand_r (Leontief)."""
    return min(a / d for a, d in zip(allocation, true_demand) if d > 0)


def test_ceei_theorem4_misreport_gains():
    # DRF Thm 4: "user 1 improves her number of tasks from 3.2 to 4.2 by lying".
    truthful = fairshare.allocate(THM4, "ceei").jobs["u1"]
    lying = fairshare.allocate(THM4_LIE, "ceei").jobs["u1"]
    # truthful: 100/31 tasks of <16, 1> -> <1600/31, 100/31>, utility 100/31 = 3.226
    assert true_tasks(truthful.allocation, (16, 1)) == pytest.approx(100 / 31, rel=EXACT)
    # lie: 25/6 tasks of <16, 8> -> <66.67, 33.33>; with the true demand <16, 1> that runs
    # min(66.67/16, 33.33/1) = min(25/6, 33.3) = 25/6 = 4.167 tasks (the 8x memory is idle)
    assert lying.allocation == pytest.approx((400 / 6, 200 / 6), rel=EXACT)
    gained = true_tasks(lying.allocation, (16, 1))
    assert gained == pytest.approx(25 / 6, rel=EXACT)
    assert gained > truthful.tasks * 1.29  # 4.167 / 3.226 = 1.29: a 29% gain
    # ... at user 2's expense: 1500/31 = 48.4 -> 100/3 = 33.3 tasks
    assert fairshare.allocate(THM4_LIE, "ceei").jobs["u2"].tasks < fairshare.allocate(THM4, "ceei").jobs["u2"].tasks


def test_ceei_theorem5_population_monotonicity_violated():
    # DRF Thm 5: user 3 leaving makes user 2 worse off: 5.35 -> 100/21 = 4.76 tasks,
    # although user 3's resources <49.5, 3.1> were released.
    before = fairshare.allocate(THM5, "ceei").jobs["u2"].tasks
    after = fairshare.allocate(THM5_WITHOUT_U3, "ceei").jobs["u2"].tasks
    assert after == pytest.approx(100 / 21, rel=EXACT)
    assert before > after + 0.5


def test_ceei_multiclass_job_uses_its_count_mix():
    # One job, classes m1 (1 CPU, count 1) and m2 (3 CPU, count 3): mix 1/4, 3/4, composite
    # task 0.25*1 + 0.75*3 = 2.5 CPU; alone on 8 CPU: 8/2.5 = 3.2 composite tasks,
    # split 0.8 of m1 and 2.4 of m2.
    sc = pooled({"cpu": 8}, [workflow("M", ("m1", {"cpu": 1}, 1), ("m2", {"cpu": 3}, 3))])
    by_class = fairshare.allocate(sc, "ceei").jobs["M"].tasks_by_class
    assert by_class == pytest.approx({"m1": 0.8, "m2": 2.4}, rel=EXACT)


@pytest.mark.parametrize("policy", ["ceei", "slowdown"])
def test_no_discrete_mode(policy):
    with pytest.raises(PolicyModeError, match=policy):
        fairshare.allocate(SEC52, policy, discrete=True)


@st.composite
def market_scenarios(draw):
    m = draw(st.integers(1, 4))
    res = ["cpu", "mem", "gpu", "net"][:m]
    jobs = []
    for i in range(draw(st.integers(1, 6))):
        demand = {r: draw(st.sampled_from([0, 0, 1, 2, 5, 16])) for r in res}
        if not any(demand.values()):
            demand[res[0]] = 1
        jobs.append(job(f"j{i}", demand))
    return pooled({r: draw(st.integers(16, 100)) for r in res}, jobs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(market_scenarios())
def test_ceei_is_envy_free_and_non_wasteful(sc):
    # Equal incomes: at the equilibrium prices every bundle costs the same (the income),
    # so no job can run more of its own tasks with another's bundle (Varian; DRF Sec. 5.2).
    alloc = fairshare.allocate(sc, "ceei")
    demand = {j.name: j.classes[0].demand for j in sc.jobs}
    for i in sc.jobs:
        own = alloc.jobs[i.name].tasks
        for other in sc.jobs:
            assert true_tasks(alloc.jobs[other.name].allocation, demand[i.name]) <= own * (1 + 1e-9) + 1e-12
    # non-wasteful: every job uses a saturated resource (else it could grow)
    saturated = [u >= 1 - 1e-9 for u in alloc.utilization]
    for j in sc.jobs:
        assert any(sat and d > 0 for sat, d in zip(saturated, demand[j.name])), j.name
    assert all(u <= 1 + 1e-12 for u in alloc.utilization)


# --------------------------------------------------------------------------------------
# Slowdown: Tan et al.'s examples

TAN_CAP = {"cpu": 10, "mem": 1000}
# Tan Sec. 2, single class: A1 = (1 CPU, 125 GB), B1 = (2 CPU, 50 GB).
TAN_SINGLE = pooled(TAN_CAP, [workflow("A", ("A1", {"cpu": 1, "mem": 125})),
                              workflow("B", ("B1", {"cpu": 2, "mem": 50}))])
# Tan Sec. 2, multiclass: A = {(1, 125), (5, 80)}, B = {(2, 50), (4, 25), (6, 80)}.
TAN_MULTI = pooled(TAN_CAP, [
    workflow("A", ("A1", {"cpu": 1, "mem": 125}), ("A2", {"cpu": 5, "mem": 80})),
    workflow("B", ("B1", {"cpu": 2, "mem": 50}), ("B2", {"cpu": 4, "mem": 25}), ("B3", {"cpu": 6, "mem": 80}))])


@dataclass(frozen=True)
class SlowdownCase:
    id: str
    scenario: object
    expected: dict[str, dict[str, float]]  # job -> class -> tasks
    slowdowns: dict[str, float]  # job -> Def. 1 slowdown (dominant share)
    utilization: tuple[float, ...]
    options: dict = field(default_factory=dict)
    respect_counts: bool = False


SLOWDOWN_CASES = [
    # Tan Sec. 2: alone, A runs min(10/1, 1000/125) = 8 tasks, B min(10/2, 1000/50) = 5, so
    # eta = N_A/8 = N_B/5 and eta = min{10/(8*1 + 5*2), 1000/(8*125 + 5*50)} = min(10/18,
    # 1000/1250) = 5/9: N_A = 40/9, N_B = 25/9; CPU 40/9 + 50/9 = 10 (full), memory
    # (5000 + 1250)/9 = 694.4 GB -> 25/36.
    SlowdownCase("tan-sec2-single-class", TAN_SINGLE,
                 {"A": {"A1": 40 / 9}, "B": {"B1": 25 / 9}}, {"A": 5 / 9, "B": 5 / 9}, (1.0, 25 / 36)),
    # Tan Sec. 2 multiclass, by hand. Per unit of dominant share (demand / capacity, scaled
    # so the largest entry is 1): A1 (0.1, 0.125) -> (0.8, 1) memory-dominant,
    # A2 (0.5, 0.08) -> (1, 0.16); B1 (0.2, 0.05) -> (1, 0.25), B2 (0.4, 0.025) ->
    # (1, 0.0625), B3 (0.6, 0.08) -> (1, 0.133). Every B class is CPU-dominant, so B needs
    # CPU share eta whatever its mix. A reaches eta on memory with A1 (CPU 0.8 eta, the
    # least CPU per unit) or on CPU (CPU eta). CPU: 0.8 eta + eta <= 1 -> eta = 5/9 (vs 1/2
    # on the CPU route). Memory is then 5/9 for A plus B's, at most 0.25 * 5/9: slack.
    # Tie rule min-usage: B runs B2 only (least memory): N_B2 = (5/9)/0.4 = 25/18;
    # N_A1 = (5/9)/0.125 = 40/9. Memory 5/9 + 0.0625 * 5/9 = 85/144. Round 2: every class
    # needs the saturated CPU, nothing grows.
    SlowdownCase("tan-sec2-multiclass-min-usage", TAN_MULTI,
                 {"A": {"A1": 40 / 9, "A2": 0.0}, "B": {"B1": 0.0, "B2": 25 / 18, "B3": 0.0}},
                 {"A": 5 / 9, "B": 5 / 9}, (1.0, 85 / 144)),
    # Same, tie rule max-usage (Tan Sec. 4's last step: "increase the resource usage of r*",
    # here memory): B keeps CPU share 5/9 and takes the most memory per CPU, B1 (0.25):
    # N_B1 = (5/9)/0.2 = 25/9 -- the single-class answer again. Memory 5/9 + 0.25*5/9 = 25/36.
    SlowdownCase("tan-sec2-multiclass-max-usage", TAN_MULTI,
                 {"A": {"A1": 40 / 9, "A2": 0.0}, "B": {"B1": 25 / 9, "B2": 0.0, "B3": 0.0}},
                 {"A": 5 / 9, "B": 5 / 9}, (1.0, 25 / 36), options={"mix": "max-usage"}),
    # Rounds after a count binds (Tan Sec. 3 "multiple rounds"). <10 CPU, 10 GB>:
    # A one class (1, 1) with count 2; B classes b1 (2, 1), b2 (1, 3).
    # Shares per task: A (0.1, 0.1); b1 (0.2, 0.1), b2 (0.1, 0.3). Round 1: A's count caps
    # its slowdown at 0.2, so eta_1 = 0.2; B reaches 0.2 most cheaply on memory with b2
    # (per unit: 1/3 CPU + 1 mem = 4/3 < b1's 1 + 1/2): N_b2 = 0.2/0.3 = 2/3.
    # Round 2: A frozen (count). B alone: CPU left 1 - 0.2 = 0.8 for B, memory 0.8 for B;
    # its slowdown can reach 0.8 on either, min-usage picks memory with b2:
    # N_b2 = 0.8/0.3 = 8/3 (CPU 0.267 + A's 0.2 = 0.467, memory 0.2 + 0.8 = 1).
    # Round 3: memory is saturated and both of B's classes need it: done.
    SlowdownCase("rounds-after-count", pooled({"cpu": 10, "mem": 10}, [
        workflow("A", ("a", {"cpu": 1, "mem": 1}, 2)),
        workflow("B", ("b1", {"cpu": 2, "mem": 1}), ("b2", {"cpu": 1, "mem": 3}))]),
                 {"A": {"a": 2.0}, "B": {"b1": 0.0, "b2": 8 / 3}}, {"A": 0.2, "B": 0.8},
                 (0.2 + 0.8 / 3, 1.0), respect_counts=True),
    # A workflow that cannot raise its slowdown is frozen (our reading of the rounds).
    # <10 CPU, 10 GB>; X: x1 (1 CPU), x2 (1 GB, count 3); Y (1 CPU); Z (1 GB).
    # Round 1: Y needs CPU eta, Z memory eta; X via x1 (CPU) -> CPU 2 eta <= 1 -> 1/2, via
    # x2 its memory share is at most 3/10 -> eta_1 = 1/2 on CPU: x1 = Y = Z = 5, CPU full.
    # Round 2: x1 and Y need CPU. X's slowdown (1/2, on CPU) could only rise through x2,
    # capped at 0.3 < 1/2: the level cannot rise, X is frozen. Round 3: Z alone takes the
    # other 5 GB: Z = 10, slowdown 1; x2 stays 0 (it would not lower X's slowdown).
    SlowdownCase("stuck-workflow-frozen", pooled({"cpu": 10, "mem": 10}, [
        workflow("X", ("x1", {"cpu": 1}), ("x2", {"mem": 1}, 3)),
        job("Y", {"cpu": 1}), job("Z", {"mem": 1})]),
                 {"X": {"x1": 5.0, "x2": 0.0}, "Y": {"main": 5.0}, "Z": {"main": 10.0}},
                 {"X": 0.5, "Y": 0.5, "Z": 1.0}, (1.0, 1.0), respect_counts=True),
    # Weights (read as weighted DRF: slowdown_i / w_i equalised). One resource, weights 1
    # and 2: eta + 2 eta = 1 -> shares 1/3 and 2/3 of 9 CPU -> 3 and 6 tasks.
    SlowdownCase("weighted", pooled({"cpu": 9}, [job("a", {"cpu": 1}), job("b", {"cpu": 1}, weight=2)]),
                 {"a": {"main": 3.0}, "b": {"main": 6.0}}, {"a": 1 / 3, "b": 2 / 3}, (1.0,)),
]


@pytest.mark.parametrize("case", SLOWDOWN_CASES, ids=[c.id for c in SLOWDOWN_CASES])
def test_slowdown_paper_examples(case: SlowdownCase):
    alloc = fairshare.allocate(case.scenario, Slowdown(**case.options), respect_counts=case.respect_counts)
    assert alloc.policy == "slowdown" and alloc.mode == "divisible"
    for name, classes in case.expected.items():
        got = alloc.jobs[name].tasks_by_class
        assert got == pytest.approx(classes, rel=SLOWDOWN_EXACT, abs=1e-12), name
        # Def. 1 slowdown = the dominant share of the workflow's usage
        assert alloc.jobs[name].dominant_share == pytest.approx(case.slowdowns[name], rel=SLOWDOWN_EXACT)
    assert alloc.utilization == pytest.approx(case.utilization, rel=SLOWDOWN_EXACT)


def test_slowdown_definition_1():
    # Tan Sec. 2: "the slowdown of workflow A is equal to N_A / 8": Def. 1 is
    # inf{x : N/x feasible alone} = max_r usage_r / C_r; A1 per task (1/10, 125/1000).
    a = np.array([[0.1, 0.125]])
    assert slowdown(a, np.array([40 / 9])) == pytest.approx(5 / 9, rel=EXACT)  # 40/9 * 0.125
    assert slowdown(a, np.array([8.0])) == pytest.approx(1.0, rel=EXACT)  # A alone: 8 tasks


def test_slowdown_tan_example_is_exact():
    # The polished LP vertex reproduces Sec. 2's fractions to the last bits.
    alloc = fairshare.allocate(TAN_MULTI, "slowdown")
    assert alloc.jobs["A"].tasks_by_class["A1"] == pytest.approx(40 / 9, rel=1e-15)
    assert alloc.jobs["B"].tasks_by_class["B2"] == pytest.approx(25 / 18, rel=1e-15)
    assert alloc.notes[0].startswith("slowdown round 1: level 0.555556")


# Single class per job, every class demanding every resource: slowdown = weighted DRF
# (Tan Sec. 2: "the dominant resource fairness allocates ... 40/9 jobs for A and 25/9
# jobs for B"). With single classes the rounds also continue like DRF's progressive
# filling when a job does not need a saturated resource or reaches its count.
DRF_EQUIVALENT = [
    ("tan-sec2", TAN_SINGLE, False),
    ("drf-sec4.1", SEC52, False),
    ("drf-thm4", THM4, False),
    ("drf-thm5", THM5, False),
    ("three-resources-weighted", pooled({"cpu": 20, "mem": 30, "gpu": 8}, [
        job("a", {"cpu": 2, "mem": 1, "gpu": 1}), job("b", {"cpu": 1, "mem": 3, "gpu": 1}, weight=2),
        job("c", {"cpu": 1, "mem": 1, "gpu": 2}, weight=3)]), False),
    ("counts-bind", pooled({"cpu": 9, "mem": 18}, [
        job("A", {"cpu": 1, "mem": 4}, count=1), job("B", {"cpu": 3, "mem": 1}), job("C", {"cpu": 1, "mem": 1})]),
     True),
    ("zero-demands", pooled({"cpu": 10, "mem": 10, "gpu": 4}, [
        job("a", {"cpu": 1}), job("b", {"cpu": 1, "mem": 2}), job("c", {"mem": 1, "gpu": 1})]), False),
]


@pytest.mark.parametrize("name,sc,respect_counts", DRF_EQUIVALENT, ids=[c[0] for c in DRF_EQUIVALENT])
def test_slowdown_equals_drf_for_single_class_jobs(name, sc, respect_counts):
    got = job_tasks(fairshare.allocate(sc, "slowdown", respect_counts=respect_counts))
    want = job_tasks(fairshare.allocate(sc, "drf", respect_counts=respect_counts))
    assert got == pytest.approx(want, rel=SLOWDOWN_EXACT)


@pytest.mark.parametrize("options,field_name", [({"mix": "fastest"}, "mix"), ({"time_limit_s": 0}, "time_limit_s")])
def test_slowdown_rejects_bad_options(options, field_name):
    with pytest.raises(ValueError, match=field_name):
        Slowdown(**options)


def test_slowdown_chooses_resources_like_partition():
    # Why the round problem is a MILP (and NP-hard): <10 CPU, 10 GB>, three workflows with
    # a CPU-only class and a memory-only class, weights 1, 1, 2 (normalised 1/2, 1/2, 1).
    # Each reaches its level w' eta on one resource. Splits: {R} | {P, Q} -> loads eta and
    # (1/2 + 1/2) eta -> eta = 1; {R, P} | {Q} -> 3/2 eta -> eta = 2/3. So eta = 1:
    # R alone on one resource (10 tasks, slowdown 1), P and Q 5 tasks each on the other.
    sc = pooled({"cpu": 10, "mem": 10}, [
        workflow(n, ("c", {"cpu": 1}), ("m", {"mem": 1}), weight=w) for n, w in (("P", 1), ("Q", 1), ("R", 2))])
    alloc = fairshare.allocate(sc, "slowdown")
    shares = {n: ja.dominant_share for n, ja in alloc.jobs.items()}
    assert shares == pytest.approx({"P": 0.5, "Q": 0.5, "R": 1.0}, rel=SLOWDOWN_EXACT)
    assert alloc.utilization == pytest.approx((1.0, 1.0), rel=SLOWDOWN_EXACT)
    for name, ja in alloc.jobs.items():  # each runs one class only (which one is a tie)
        assert sorted(ja.tasks_by_class.values()) == pytest.approx([0.0, 10.0 if name == "R" else 5.0])
    # P and Q share a resource, R has the other to itself
    assert alloc.jobs["P"].tasks_by_class == pytest.approx(alloc.jobs["Q"].tasks_by_class)
    assert alloc.jobs["R"].tasks_by_class != pytest.approx(alloc.jobs["P"].tasks_by_class)


@st.composite
def workflow_scenarios(draw):
    m = draw(st.integers(1, 3))
    res = ["cpu", "mem", "gpu"][:m]
    jobs = []
    for i in range(draw(st.integers(1, 5))):
        classes = []
        for k in range(draw(st.integers(1, 3))):
            demand = {r: draw(st.sampled_from([0, 1, 2, 5])) for r in res}
            if not any(demand.values()):
                demand[res[0]] = 1
            classes.append((f"c{k}", demand, draw(st.sampled_from([None, 0, 2, 10]))))
        wf = workflow(f"w{i}", *[c if c[2] is not None else c[:2] for c in classes],
                      weight=draw(st.sampled_from([1, 2])))
        jobs.append(wf)
    return pooled({r: draw(st.integers(5, 40)) for r in res}, jobs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflow_scenarios(), st.booleans())
def test_slowdown_feasible_and_non_wasteful(sc, respect_counts):
    alloc = fairshare.allocate(sc, "slowdown", respect_counts=respect_counts)
    assert all(u <= 1 + 1e-9 for u in alloc.utilization)
    frozen = {name for note in alloc.notes if "froze" in note
              for name in note.split("froze ")[1].split(" (")[0].split(", ")}
    saturated = [u >= 1 - 1e-9 for u in alloc.utilization]
    for j in sc.jobs:
        got = alloc.jobs[j.name].tasks_by_class
        for c in j.classes:
            n = got[c.name]
            assert n >= 0
            capped = respect_counts and c.count is not None
            if capped:
                assert n <= c.count * (1 + 1e-12)
            if j.name in frozen:
                continue
            # every class of a workflow that was not frozen is blocked: it needs a
            # saturated resource or has reached its count
            assert any(s and d > 0 for s, d in zip(saturated, c.demand)) or (capped and n >= c.count * (1 - 1e-9)), \
                (j.name, c.name, alloc.to_json())
