"""The audit (contract: ``fairshare audit``) on the papers' own examples.

Every counter-example of DRF (Ghodsi et al., NSDI'11) and H-DRF (Bhattacharya et al.,
SoCC'13) is a case below: the policy the paper says violates a property must be VIOLATED
with the paper's numbers as the witness, and the policy it says satisfies it must HOLD.
Together they show that every check can fail. Arithmetic is in the comments.
"""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fairshare
from fairshare.audit import (ALL_PROPERTY_NAMES, PROPERTY_NAMES, RTOL, AuditReport, audit, exceeds,
                             hierarchical_guarantees)
from fairshare.audit.properties import CHECKS, lie, misreports, waterfill, wording
from fairshare.model import parse_scenario
from fairshare.policies.base import PolicyModeError

# --------------------------------------------------------------------------------------
# builders


def job(name: str, demand: dict, **kw) -> dict:
    return {"name": name, "tasks": [{"demand": demand}], **kw}


def pooled(capacity: dict, jobs: list[dict], queues: list[dict] | None = None):
    data = {"cluster": {"capacity": capacity}, "jobs": jobs}
    if queues:
        data["queues"] = queues
    return parse_scenario(data)


# DRF Sec. 4.1 / Fig. 3: <9 CPU, 18 GB>; A <1,4> (memory-dominant: 4/18 > 1/9),
# B <3,1> (CPU-dominant: 3/9 > 1/18). DRF: 2x/9 = y/3, x + 3y = 9 -> A 3 tasks, B 2 tasks.
DRF_41 = pooled({"cpu": 9, "mem": 18}, [job("A", {"cpu": 1, "mem": 4}), job("B", {"cpu": 3, "mem": 1})])

# DRF Thm 1 / Fig. 5: <30, 30>; u1 <1,3>, u2 <1,1>. Asset Fairness equalises aggregate
# shares, 4x/30 = 2y/30 -> y = 2x; memory 3x + y = 30 -> x = 6, y = 12. u2 holds <12,12>,
# but half the cluster <15,15> runs 15 of its tasks. DRF: u1's share 3x/30 = u2's y/30
# -> y = 3x; memory 3x + 3x = 30 -> u1 5 tasks, u2 15 tasks (= its partition exactly).
DRF_THM1 = pooled({"cpu": 30, "mem": 30}, [job("u1", {"cpu": 1, "mem": 3}), job("u2", {"cpu": 1, "mem": 1})])

# DRF Thm 2: <21, 21>; u1 <3,2>, u2 <4,1>: CPU is both users' dominant resource (3/21 >
# 2/21, 4/21 > 1/21). Asset: 5x/21 = 5y/21 -> x = y; CPU 7x = 21 -> 3 tasks each, u1 gets
# 9 CPUs = 3/7 of the bottleneck < its max-min half, 10.5. DRF: 3x = 4y, 3x + 4y = 21 ->
# u1 3.5 tasks (10.5 CPUs), u2 2.625 tasks (10.5 CPUs).
DRF_THM2 = pooled({"cpu": 21, "mem": 21}, [job("u1", {"cpu": 3, "mem": 2}), job("u2", {"cpu": 4, "mem": 1})])

# DRF Thm 4 / Fig. 6: <100, 100>; u1 <16,1>, u2 <1,2>. CEEI = max x*y subject to
# 16x + y <= 100, x + 2y <= 100: both bind, x = 100/31 = 3.226, y = 1500/31 = 48.39.
# Lying <16,8> (memory x8): 16x + y = 100, 8x + 2y = 100 -> x = 100/24 = 4.167 lied tasks
# holding <66.67, 33.33>, i.e. min(66.67/16, 33.33/1) = 4.167 true tasks > 3.226.
# (The search finds <16, 8.5> even better: 4.255.)
DRF_THM4 = pooled({"cpu": 100, "mem": 100}, [job("u1", {"cpu": 16, "mem": 1}), job("u2", {"cpu": 1, "mem": 2})])

# DRF Thm 5 / Fig. 7: <100, 100>; <4,1>, <1,16>, <16,1>. CEEI gives (11.3, 5.4, 3.1) tasks;
# when u3 leaves it gives (23.8, 4.8): u2 drops from 5.35 to 100/21 = 4.76.
# DRF (strictly positive demands, Thm 14) is population monotonic.
DRF_THM5 = pooled({"cpu": 100, "mem": 100},
                  [job("u1", {"cpu": 4, "mem": 1}), job("u2", {"cpu": 1, "mem": 16}), job("u3", {"cpu": 16, "mem": 1})])

# DRF App. A, "excess demand": u1 <1,0>, nine users <0,1>, here on <10, 10>. DRF: u1 takes
# all of resource a (10 tasks), the nine share b (10/9 each). Reporting <1,1> makes u1 one
# of ten users of b: dominant share 1/10 each, so u1 gets 1 a and runs 1 true task.
EXCESS = pooled({"a": 10, "b": 10}, [job("u1", {"a": 1})] + [job(f"v{i}", {"b": 1}) for i in range(9)])

# DRF Sec. 6 after Thm 14: without strictly positive demands DRF loses population
# monotonicity. <10, 10>; u1 <0,2>, u2 <2,0>, u3 <1,2>. All three at dominant share s:
# u1 and u3 share b, 2*(5s) + 2*(5s) = 10 -> s = 0.5, u1 = u3 = 2.5 tasks, b saturated;
# u2 keeps growing on a: 2y + 2.5 = 10 -> y = 3.75. Without u1: u2 and u3 at equal s,
# a: 2y + y = 10 -> y = 3.33, and a saturates first, so u2 drops 3.75 -> 3.33.
DRF_ZERO_DEMANDS = pooled({"a": 10, "b": 10}, [job("u1", {"b": 2}), job("u2", {"a": 2}), job("u3", {"a": 1, "b": 2})])

# H-DRF Sec. 3.2: <10 CPU, 10 GPU>; n1 (w 1) holds n1,1 <1,1>; n2 (w 1) holds n2,1 <1,0>
# and n2,2 <0,1>. Collapsed leaf weights 0.5, 0.25, 0.25 -> weighted DRF: n1,1 grows at
# twice the rate, s + s/2 = 1 on each resource -> n1,1 2/3 of both, n2,1 1/3 CPU, n2,2 1/3 GPU:
# n2's dominant share 1/3 < its guarantee 1/2. H-DRF: n1 and n2 at equal dominant share,
# a + b = 10 CPUs with a = b -> 5 tasks each, n1 = n2 = 0.5.
HDRF_32 = pooled({"cpu": 10, "gpu": 10},
                 [job("n11", {"cpu": 1, "gpu": 1}, queue="n1"), job("n21", {"cpu": 1}, queue="n2"),
                  job("n22", {"gpu": 1}, queue="n2")],
                 [{"name": "n1"}, {"name": "n2"}])

# H-DRF Fig. 4(a) / Sec. 3.3: as above but n1,1 <1,0>. H-DRF: n1,1 5 CPUs, n2,1 5 CPUs,
# n2,2 10 GPUs. The Capacity Scheduler (Sec. 5.2, "C.S-Current") stops at the first
# saturated resource: CPU saturates at s = 0.5 with n2,2 at 5 GPUs, 5 left idle.
HDRF_FIG4 = pooled({"cpu": 10, "gpu": 10},
                   [job("n11", {"cpu": 1}, queue="n1"), job("n21", {"cpu": 1}, queue="n2"),
                    job("n22", {"gpu": 1}, queue="n2")],
                   [{"name": "n1"}, {"name": "n2"}])

# H-DRF Fig. 6/7 (Sec. 4.3, Thm 5): <100 CPU, 100 GPU>; n1,1 <3,2> in n1; n2,1 <1,1>,
# n2,2 <1,3> in n2. All demanding: n1 at 60% CPU = 20 tasks; n2,1 30 and n2,2 10 tasks
# (n2 at 40% CPU, 30 + 30 = 60% GPU, its dominant share equals n1's 0.6). Without n2,2,
# n1 and n2 both dominate on CPU: 3a/100 = b/100, 3a + b = 100 -> n1,1 16.67 tasks (50% CPU).
HDRF_FIG6 = pooled({"cpu": 100, "gpu": 100},
                   [job("n11", {"cpu": 3, "gpu": 2}, queue="n1"), job("n21", {"cpu": 1, "gpu": 1}, queue="n2"),
                    job("n22", {"cpu": 1, "gpu": 3}, queue="n2")],
                   [{"name": "n1"}, {"name": "n2"}])

# The Fig. 4(a) jobs on two nodes of <5 CPU, 5 GPU>, whole tasks (DRF Sec. 6.2).
FIG4_NODES = parse_scenario({
    "cluster": {"nodes": [{"name": "m", "count": 2, "capacity": {"cpu": 5, "gpu": 5}}]},
    "queues": [{"name": "n1"}, {"name": "n2"}],
    "jobs": [job("n11", {"cpu": 1}, queue="n1"), job("n21", {"cpu": 1}, queue="n2"),
             job("n22", {"gpu": 1}, queue="n2")],
})


# --------------------------------------------------------------------------------------
# the table


@dataclass(frozen=True)
class Case:
    id: str
    scenario: object
    policy: str
    holds: dict[str, bool | None]  # the verdicts asserted (others are not asserted)
    witness: dict[str, dict] = field(default_factory=dict)  # property -> expected witness entries
    discrete: bool = False


ALL_HOLD_NO_QUEUES = {"sharing_incentive": True, "envy_freeness": True, "pareto_efficiency": True,
                      "strategy_proofness": True, "hierarchical_share_guarantee": None,
                      "population_monotonicity": True}

CASES = [
    # DRF Thm 1: Asset violates sharing incentive, u2 12 < 15 tasks; DRF gives u2 exactly 15.
    Case("drf-thm1-asset", DRF_THM1, "asset", {"sharing_incentive": False},
         {"sharing_incentive": {"job": "u2", "tasks": 12.0, "partition_tasks": 15.0, "entitlement": 0.5}}),
    Case("drf-thm1-drf", DRF_THM1, "drf", {"sharing_incentive": True, "pareto_efficiency": True}),
    # DRF Thm 2: Asset gives u1 9 CPUs of the bottleneck, its max-min share is 21/2 = 10.5.
    Case("drf-thm2-asset", DRF_THM2, "asset", {"bottleneck_fairness": False},
         {"bottleneck_fairness": {"resource": "cpu", "job": "u1", "amount": 9.0, "fair_share": 10.5}}),
    Case("drf-thm2-drf", DRF_THM2, "drf", {"bottleneck_fairness": True, "sharing_incentive": True}),
    # DRF Thm 4: CEEI is not strategy-proof; u1 gains by inflating memory (3.226 -> >= 4.167).
    Case("drf-thm4-ceei", DRF_THM4, "ceei", {"strategy_proofness": False},
         {"strategy_proofness": {"job": "u1", "truthful_tasks": 100 / 31}}),
    Case("drf-thm4-drf", DRF_THM4, "drf", {"strategy_proofness": True}),
    # DRF Thm 5: CEEI violates population monotonicity; u3 leaving drops u2 5.35 -> 4.76.
    Case("drf-thm5-ceei", DRF_THM5, "ceei", {"population_monotonicity": False},
         {"population_monotonicity": {"removed": "u3", "hurt": "u2", "after": 100 / 21}}),
    Case("drf-thm5-drf", DRF_THM5, "drf", {"population_monotonicity": True}),
    Case("drf-zero-demands-drf", DRF_ZERO_DEMANDS, "drf", {"population_monotonicity": False},
         {"population_monotonicity": {"removed": "u1", "hurt": "u2", "before": 3.75, "after": 10 / 3}}),
    # DRF Sec. 4.1: DRF has every property; the dominant resources differ (memory vs CPU),
    # so bottleneck fairness does not apply; no queues, so neither does the H-DRF guarantee.
    Case("drf-41-drf", DRF_41, "drf", {**ALL_HOLD_NO_QUEUES, "bottleneck_fairness": None}),
    # DRF App. A excess demand: DRF is strategy-proof; the lie <1,1> only hurts u1.
    Case("drf-excess-drf", EXCESS, "drf", {"strategy_proofness": True}),
    # Envy: FIFO on Sec. 4.1: A (first) takes all 18 GB with 4.5 tasks <4.5, 18>; B, 0 tasks,
    # could run min(4.5/3, 18/1) = 1.5 tasks with A's allocation. Also short of its partition
    # <4.5, 9>: min(4.5/3, 9/1) = 1.5 tasks.
    Case("drf-41-fifo", DRF_41, "fifo", {"envy_freeness": False, "sharing_incentive": False},
         {"envy_freeness": {"job": "B", "envies": "A", "tasks": 0.0, "tasks_with_other_allocation": 1.5},
          "sharing_incentive": {"job": "B", "partition_tasks": 1.5}}),
    # H-DRF Sec. 3.2: collapsed gives n2 a dominant share of 1/3 < 1/2; H-DRF holds.
    Case("hdrf-32-collapsed", HDRF_32, "collapsed", {"hierarchical_share_guarantee": False},
         {"hierarchical_share_guarantee": {"node": "n2", "kind": "queue", "dominant_share": 1 / 3,
                                           "guarantee": 0.5}}),
    Case("hdrf-32-hdrf", HDRF_32, "hdrf", {"hierarchical_share_guarantee": True, "sharing_incentive": True,
                                           "pareto_efficiency": True, "envy_freeness": True}),
    # H-DRF Fig. 6/7: H-DRF violates population monotonicity, n1,1 20 -> 16.67 tasks.
    Case("hdrf-fig6-hdrf", HDRF_FIG6, "hdrf", {"population_monotonicity": False,
                                               "hierarchical_share_guarantee": True},
         {"population_monotonicity": {"removed": "n22", "hurt": "n11", "before": 20.0, "after": 50 / 3}}),
    # H-DRF Sec. 5.2: C.S-Current is not Pareto efficient, n2,2 could run 5 more tasks.
    Case("hdrf-fig4-capacity", HDRF_FIG4, "capacity", {"pareto_efficiency": False},
         {"pareto_efficiency": {"job": "n22", "tasks": 5.0, "could_run": 10.0}}),
    Case("hdrf-fig4-hdrf", HDRF_FIG4, "hdrf", {"pareto_efficiency": True, "hierarchical_share_guarantee": True}),
    # Whole tasks: C.S-Current stops with a GPU free on a node that n2,2's next task fits;
    # H-DRF places until nothing fits.
    Case("nodes-fig4-capacity", FIG4_NODES, "capacity", {"pareto_efficiency": False},
         {"pareto_efficiency": {"job": "n22"}}, discrete=True),
    Case("nodes-fig4-hdrf", FIG4_NODES, "hdrf", {"pareto_efficiency": True, "hierarchical_share_guarantee": True,
                                                 "sharing_incentive": True}, discrete=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_paper_examples(case: Case):
    report = audit(case.scenario, case.policy, discrete=case.discrete)
    got = {name: report.properties[name].holds for name in case.holds}
    assert got == case.holds, report.format_table()
    for prop, expected in case.witness.items():
        witness = report.properties[prop].witness
        for key, value in expected.items():
            if isinstance(value, float):
                assert witness[key] == pytest.approx(value, rel=1e-6), (prop, key, witness)
            else:
                assert witness[key] == value, (prop, key, witness)


# --------------------------------------------------------------------------------------
# the witnesses in detail


def test_thm4_lie_gains_at_least_the_papers_lie():
    # The search includes the paper's lie <16,8> (memory x8, 4.167 true tasks); the best
    # lie it finds can only be better.
    w = audit(DRF_THM4, "ceei").properties["strategy_proofness"].witness
    assert w["lying_tasks"] >= 100 / 24 * (1 - 1e-9)
    assert w["truthful_tasks"] == pytest.approx(100 / 31)
    labels = [label for label, _ in misreports((16.0, 1.0), (100.0, 100.0), ("cpu", "mem"))]
    assert "mem x8" in labels


def test_excess_demand_lie_hurts_the_liar():
    # DRF App. A: reporting <1,1> (the "b 1 (unused)" lie: one dominant share's worth of b)
    # takes u1 from 10 true tasks to 1.
    u1 = EXCESS.job("u1")
    assert dict((label, v) for label, v in misreports(u1.composite_demand(), EXCESS.capacity, EXCESS.resources))[
        "b 1 (unused)"] == (1.0, 1.0)
    honest = fairshare.allocate(EXCESS, "drf")
    lying = fairshare.allocate(EXCESS.with_job(lie(u1, (1.0, 1.0))), "drf")
    assert honest.jobs["u1"].tasks == pytest.approx(10.0)
    assert lying.jobs["u1"].allocation[0] == pytest.approx(1.0)  # 1/10 of a: 1 true task
    assert lying.jobs["v0"].tasks == pytest.approx(1.0)  # 1/10 of b each


def test_hierarchical_guarantee_witness_names_the_path():
    w = audit(HDRF_32, "collapsed").properties["hierarchical_share_guarantee"].witness
    assert w["path"] == [{"node": "n2", "fraction": 0.5}]


def test_multiclass_lie_scales_every_class_alike():
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 10, "mem": 10}}, "jobs": [
        {"name": "w", "tasks": [{"class": "map", "demand": {"cpu": 1, "mem": 2}, "count": 1},
                                {"class": "red", "demand": {"cpu": 3}, "count": 1}]}]})
    w = sc.job("w")
    # composite <2, 1>; report <4, 1>: cpu x2 in every class, memory untouched
    liar = lie(w, (4.0, 1.0))
    assert [c.demand for c in liar.classes] == [(2.0, 2.0), (6.0, 0.0)]
    assert liar.composite_demand() == (4.0, 1.0)
    assert [c.count for c in liar.classes] == [1, 1]


# --------------------------------------------------------------------------------------
# the pieces


def test_hierarchical_guarantees_h_drf_fig2():
    # H-DRF Sec. 2.1, Fig. 2: 480 slots; n1, n2 weight 1 -> 240 each; n2's children
    # weights 1, 2, 2 -> 48, 96, 96 slots, i.e. fractions 0.1, 0.2, 0.2; n1's one job 0.5.
    sc = pooled({"slot": 480},
                [job("a", {"slot": 1}, queue="n1"), job("b", {"slot": 1}, queue="n2"),
                 job("c", {"slot": 1}, queue="n2", weight=2), job("d", {"slot": 1}, queue="n2", weight=2)],
                [{"name": "n1"}, {"name": "n2"}, {"name": "idle", "weight": 5}])
    queues, jobs = hierarchical_guarantees(sc)
    assert queues == {"n1": 0.5, "n2": 0.5}  # "idle" has no jobs: not a demanding sibling
    assert jobs == pytest.approx({"a": 0.5, "b": 0.1, "c": 0.2, "d": 0.2})


def test_waterfill_weighted_max_min():
    # 12 units; claims a 1 (w 1), b inf (w 1), c inf (w 2): a gets its 1, the 11 left split
    # 1:2 -> b 11/3, c 22/3.
    out = waterfill(12.0, [("a", 1.0, 1.0), ("b", 1.0, float("inf")), ("c", 2.0, float("inf"))])
    assert out == pytest.approx({"a": 1.0, "b": 11 / 3, "c": 22 / 3})


def test_bottleneck_with_counts_and_weights():
    # CPU dominates both (2/10 > 1/100, 1/10 > 1/100). u1 (w 1) is capped at 2 tasks, a claim
    # of 4 CPUs; u2 (w 2) is unbounded. Water-fill: u1's weighted third, 10 * 1/3 = 3.33, is
    # below its claim of 4, so the level holds: u1 3.33 CPUs (1.67 tasks), u2 6.67 CPUs.
    sc = pooled({"cpu": 10, "mem": 100},
                [{"name": "u1", "tasks": [{"demand": {"cpu": 2, "mem": 1}, "count": 2}]},
                 {"name": "u2", "weight": 2, "tasks": [{"demand": {"cpu": 1, "mem": 1}}]}])
    res = audit(sc, "drf", respect_counts=True)
    assert res.properties["bottleneck_fairness"].holds is True
    alloc = fairshare.allocate(sc, "drf", respect_counts=True)
    assert alloc.jobs["u1"].allocation[0] == pytest.approx(10 / 3)


def test_tolerance_is_relative_with_a_unit_floor():
    assert RTOL == 1e-7
    assert not exceeds(1.0 + 1e-9, 1.0)
    assert exceeds(1.0 + 1e-6, 1.0)
    assert not exceeds(1e-5, 0.0, unit=1000.0)  # a starved job's float noise on a big cluster
    assert exceeds(1e6 * (1 + 1e-6), 1e6)


# --------------------------------------------------------------------------------------
# report shape (contract) and errors


def test_json_is_exactly_the_contract_shape():
    out = audit(DRF_THM1, "asset").to_json()
    assert set(out) == {"policy", "properties"}
    assert out["policy"] == "asset"
    assert list(out["properties"]) == list(PROPERTY_NAMES)
    for name, entry in out["properties"].items():
        assert {"holds", "witness"} <= set(entry)
        assert entry["holds"] in (True, False, None)
        assert (entry["witness"] is None) == (entry["holds"] is not False), name
        assert isinstance(entry["detail"], str) and entry["detail"]
    json.dumps(out, allow_nan=False)


def test_table_has_one_line_per_property():
    report = audit(HDRF_32, "collapsed")
    lines = report.format_table().splitlines()
    assert len(lines) == 1 + len(PROPERTY_NAMES)
    by_name = {line.split()[0]: line for line in lines[1:]}
    assert "VIOLATED" in by_name["hierarchical_share_guarantee"]
    assert "n2" in by_name["hierarchical_share_guarantee"]
    assert "n/a" in by_name["bottleneck_fairness"]
    assert "HOLDS" in by_name["pareto_efficiency"]


def test_one_module_per_property_in_the_reports_order():
    # The registry runs in the report's order; each check lives in the module named after
    # its property, whose docstring opens with the property and cites where it is defined.
    assert list(CHECKS) == list(ALL_PROPERTY_NAMES)
    for name, check in CHECKS.items():
        module = importlib.import_module(f"fairshare.audit.properties.{name}")
        assert check.__module__ == module.__name__
        assert module.__doc__.startswith(f"``{name}`` (")
        assert "Sec." in module.__doc__.splitlines()[0] or "docs/policies.md" in module.__doc__.splitlines()[0]


def test_detail_wording():
    ctx = SimpleNamespace(scenario=pooled({"cpu": 9, "mem": 18}, [job("A", {"cpu": 1, "mem": 4})]))
    assert wording.number(2 / 3) == "0.6667" and wording.number(math.inf) == "unbounded"
    assert wording.counted(1, "job") == "1 job" and wording.counted(3, "job") == "3 jobs"
    assert wording.vector(ctx, (1.0, 4.0)) == "<1 cpu, 4 mem>"
    assert wording.queue_note(ctx, ctx.scenario.job("A")) == ""  # in no queue
    in_fifo = SimpleNamespace(scenario=pooled({"cpu": 9}, [job("B", {"cpu": 1}, queue="f")],
                                              queues=[{"name": "f", "order": "fifo"}]))
    assert "fifo queue f" in wording.queue_note(in_fifo, in_fifo.scenario.job("B"))


def test_policy_without_static_allocation_raises():
    with pytest.raises(PolicyModeError):
        audit(DRF_41, "timefair")


def test_subset_of_properties_and_search_bound():
    report = audit(EXCESS, "drf", properties=["population_monotonicity"], max_jobs_searched=3)
    assert list(report.properties) == ["population_monotonicity"]
    assert "3 of 10 jobs" in report.properties["population_monotonicity"].detail
    with pytest.raises(ValueError):
        audit(EXCESS, "drf", properties=["no_such_property"])


def test_capped_jobs_have_no_further_demand():
    # u1 is capped at 1 task (<1,4>); with counts respected it is not short of its
    # partition (4.5 CPU, 9 GB -> 2.25 tasks) and envies nobody.
    sc = pooled({"cpu": 9, "mem": 18}, [{"name": "A", "tasks": [{"demand": {"cpu": 1, "mem": 4}, "count": 1}]},
                                        job("B", {"cpu": 3, "mem": 1})])
    report = audit(sc, "fifo", respect_counts=True)
    assert report.properties["sharing_incentive"].holds is True
    assert report.properties["envy_freeness"].holds is True
    assert report.properties["pareto_efficiency"].holds is True
    assert isinstance(report, AuditReport)


def test_slowdown_audits():
    # The slowdown policy (Tan et al.) on one multiclass job and one plain job.
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 9, "mem": 18}}, "jobs": [
        {"name": "A", "tasks": [{"class": "map", "demand": {"cpu": 1, "mem": 4}, "count": 2},
                                {"class": "red", "demand": {"cpu": 2, "mem": 1}, "count": 2}]},
        job("B", {"cpu": 3, "mem": 1})]})
    # Slowdown chooses A's class mix itself; the audit then values A's tasks at that mix
    # (its demand is allocation / tasks), so the LP grows A along the mix it was given.
    report = audit(sc, "slowdown")
    assert set(report.properties) == set(PROPERTY_NAMES)
    assert report.properties["hierarchical_share_guarantee"].holds is None
    assert report.properties["pareto_efficiency"].holds is True, report.format_table()
    json.dumps(report.to_json(), allow_nan=False)


# --------------------------------------------------------------------------------------
# DRF's and H-DRF's theorems as properties (small random scenarios)


@st.composite
def small_scenarios(draw, with_queues: bool):
    m = draw(st.integers(2, 3))
    res = ["cpu", "mem", "gpu"][:m]
    capacity = {r: draw(st.integers(5, 40)) for r in res}
    n = draw(st.integers(2, 4))
    jobs = []
    for i in range(n):
        demand = {r: draw(st.integers(0, 4)) for r in res}
        if not any(demand.values()):
            demand[res[0]] = 1
        entry = {"name": f"j{i}", "weight": draw(st.sampled_from([1, 1, 2, 3])),
                 "tasks": [{"demand": demand, "count": draw(st.one_of(st.none(), st.integers(1, 8)))}]}
        if with_queues:
            entry["queue"] = draw(st.sampled_from(["a", "b", "b.x"]))
        jobs.append(entry)
    data = {"cluster": {"capacity": capacity}, "jobs": jobs}
    if with_queues:
        data["queues"] = [{"name": "a", "weight": draw(st.sampled_from([1, 2]))},
                          {"name": "b", "children": [{"name": "x", "weight": 2}]}]
    return parse_scenario(data), draw(st.booleans())


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=small_scenarios(with_queues=False))
def test_drf_theorems(case):
    # DRF Thm 9 (Pareto), 10 (sharing incentive, bottleneck fairness), 11 (envy-free),
    # 12 (strategy-proof; searched for 2 jobs).
    sc, respect_counts = case
    report = audit(sc, "drf", respect_counts=respect_counts, max_jobs_searched=2,
                   properties=["sharing_incentive", "envy_freeness", "pareto_efficiency",
                               "bottleneck_fairness", "strategy_proofness"])
    assert not report.violated(), report.format_table()


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=small_scenarios(with_queues=True))
def test_hdrf_theorems(case):
    # H-DRF Thm 2 (hierarchical share guarantee, hence sharing incentive); Pareto efficiency
    # of the static allocation (every leaf stops at a saturated resource); bottleneck
    # fairness (one resource: H-DRF is hierarchical max-min).
    sc, respect_counts = case
    report = audit(sc, "hdrf", respect_counts=respect_counts,
                   properties=["hierarchical_share_guarantee", "sharing_incentive", "pareto_efficiency",
                               "bottleneck_fairness"])
    assert not report.violated(), report.format_table()
