"""``preempted``: a job whose tasks fair-share preemption re-queued says by whom, under
which rule, and the two ratios that made it legal (issue 21, item 1).

One node of 8 CPUs, two queues of weight 1, tasks of 1 CPU and 1000 s; preemption
after 30 s, at most 4 victims a round. A (queue a, 16 tasks) fills the node at t=0; B
(queue b, 16 tasks) arrives at t=10. The fair shares (hdrf, and drf alike: two equal
queues, one job each) are 4 CPUs each, a dominant share of 4/8 = 0.5; a ratio is share
/ fair share. B is starved from t=10, so at t=40 it claims one task per pass:

    pass  B before -> after        A before -> after (A keeps >= max(1, B after)?)
    1     0/8 / .5 = 0    -> 1/8 / .5 = .25    8/8 / .5 = 2    -> 7/8 / .5 = 1.75   yes
    2     .25  -> 2/8 / .5 = .5                1.75 -> 6/8 / .5 = 1.5               yes
    3     .5   -> .75                          1.5  -> 1.25                         yes
    4     .75  -> 1                            1.25 -> 1                            yes (1 >= 1)

The budget (4) ends the round: A's reason is the last preemption, 4 of its tasks
waiting. A's 4 tasks left running end at 1000 s; queue a (usage 0) goes before b (4
CPUs), so A's 4 re-queued tasks start again then and the reason is gone.

Within a queue (``within_queue``): L (priority 0) fills the node; H (priority 1) arrives
at t=10 in the same queue and at t=40 takes L's tasks, the ratios aside: the reason
carries the two priorities.
"""

from __future__ import annotations

import pytest

from builders import job, q
from fairshare.engine.explain import blocking_kind, explain
from fairshare.engine.preemption import ratio
from fairshare.model import parse_scenario
from fairshare.policies import make_policy
from fairshare.report.explain import reason_sentence
from fairshare.sim import SimOptions, Simulator

PREEMPTED_AT = 40.0  # B arrives at 10, starved for 30 s
RESTARTED_AT = 1000.0  # A's tasks still running end


def two_queues(**preemption) -> dict:
    doc = {"cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 8}}]},
           "queues": [q("a"), q("b")],
           "jobs": [job("A", {"cpu": 1}, "a"), job("B", {"cpu": 1}, "b", submit=10)],
           "preemption": {"after": 30, **preemption}}
    for entry in doc["jobs"]:
        entry["tasks"][0].update(count=16, duration=1000)
    return doc


def one_queue_priorities() -> dict:
    doc = {"cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 8}}]},
           "queues": [q("a")],
           "jobs": [job("A", {"cpu": 1}, "a"), job("B", {"cpu": 1}, "a", submit=10)],
           "preemption": {"after": 30, "within_queue": True}}
    doc["jobs"][0]["priority"] = 0
    doc["jobs"][1]["priority"] = 1
    for entry in doc["jobs"]:
        entry["tasks"][0].update(count=16, duration=1000)
    return doc


# (scenario, policy, the reason's numbers at t=40: the table of the module docstring, and
# what blocks A's re-queued tasks then: the full node, or H's priority)
CASES = {
    "loop-free, hdrf": (two_queues(), "hdrf", {"rule": "fair_share", "victim_ratio_before": 1.25,
                                               "victim_ratio": 1.0, "claimant_ratio_before": 0.75,
                                               "claimant_ratio": 1.0}, "no_node_fits"),
    "loop-free, drf": (two_queues(), "drf", {"rule": "fair_share", "victim_ratio_before": 1.25,
                                             "victim_ratio": 1.0, "claimant_ratio_before": 0.75,
                                             "claimant_ratio": 1.0}, "no_node_fits"),
    # (naive takes from any job above its fair share: A is above until the 4th, the same moves)
    "naive, hdrf": (two_queues(rule="naive"), "hdrf", {"rule": "naive", "victim_ratio_before": 1.25,
                                                       "victim_ratio": 1.0, "claimant_ratio_before": 0.75,
                                                       "claimant_ratio": 1.0}, "no_node_fits"),
    # (priorities: B, priority 1, takes 4 of A's 8 tasks; A's priority 0)
    "within_queue": (one_queue_priorities(), "hdrf", {"rule": "within_queue", "priority": 0,
                                                      "claimant_priority": 1}, "priority_held"),
}


def run_to(doc: dict, policy: str, at: float, **options):
    sim = Simulator(parse_scenario(doc, "preempted"), make_policy(policy), SimOptions(until=at, **options))
    sim.run()
    return sim


@pytest.mark.parametrize("case", CASES)
def test_the_reason_names_the_preemptor_the_rule_and_its_numbers(case):
    doc, policy, expected, blocker = CASES[case]
    sim = run_to(doc, policy, PREEMPTED_AT)
    sch = sim.scheduler
    assert sch.jobs["A"].preempted == 4  # (the round's budget)
    got = explain(sch, "A", sim.now).to_json()
    first = got["reasons"][0]
    assert (first["kind"], first["by"], first["at"], first["tasks"], first["waiting"]) == \
        ("preempted", "B", PREEMPTED_AT, 1, 4)
    for key, value in expected.items():
        assert first[key] == pytest.approx(value), key
    # what blocks the re-queued tasks now follows
    assert [r["kind"] for r in got["reasons"][1:2]] == [blocker]
    assert blocking_kind(sch, sch.jobs["A"]) == "preempted"
    assert reason_sentence(first).startswith("Preempted by job B at 40 s: 1 task(s) re-queued, 4 still waiting")


@pytest.mark.parametrize("policy", ["hdrf", "drf"])
def test_the_recorded_ratios_are_the_preemptors_own_and_satisfy_the_loop_free_rule(policy):
    sim = run_to(two_queues(), policy, PREEMPTED_AT)
    sch = sim.scheduler
    first = explain(sch, "A", sim.now).reasons[0]
    # the rule: the victim from above 1 to at least max(1, the claimant's new ratio), the
    # claimant from below 1 (engine/preemption.py, "Why it cannot loop")
    assert first["victim_ratio_before"] > 1.0
    assert first["claimant_ratio_before"] < 1.0
    assert first["victim_ratio"] >= max(1.0, first["claimant_ratio"]) * (1 - 1e-12)
    # the last move left the state the scheduler holds: its "after" ratios are the ones
    # the preemptor's own fair shares give now (nothing else moved in the round)
    preemptor = sim.engine.preemptor
    capacity = sch.pool.total_capacity
    assert preemptor.job_fair["A"] == pytest.approx((4.0,))  # (half of the 8 CPUs each)
    assert first["victim_ratio"] == pytest.approx(ratio(sch.usage("A"), preemptor.job_fair["A"], capacity))
    assert first["claimant_ratio"] == pytest.approx(ratio(sch.usage("B"), preemptor.job_fair["B"], capacity))
    # and the "before" ones are one task away (1 CPU / 8 / 0.5 = 0.25)
    assert first["victim_ratio_before"] - first["victim_ratio"] == pytest.approx(0.25)
    assert first["claimant_ratio"] - first["claimant_ratio_before"] == pytest.approx(0.25)


def test_the_reason_is_gone_once_the_requeued_tasks_start_again():
    doc = two_queues()
    before = run_to(doc, "hdrf", RESTARTED_AT - 1)
    assert explain(before.scheduler, "A", before.now).reasons[0]["kind"] == "preempted"
    after = run_to(doc, "hdrf", RESTARTED_AT)
    rt = after.scheduler.jobs["A"]
    assert (rt.preempted_by, rt.preempted_waiting) == (None, 0)
    assert all(r["kind"] != "preempted" for r in explain(after.scheduler, "A", after.now).reasons)


def test_simulate_reasons_counts_the_wait_as_preempted():
    sim = Simulator(parse_scenario(two_queues(), "preempted"), make_policy("hdrf"),
                    SimOptions(until=RESTARTED_AT + 10, reasons=True))
    result = sim.run()
    # A waits from 40 s (preempted) to 1000 s (its tasks start again): 960 s
    assert result.pending_by_reason["A"]["preempted"] == pytest.approx(RESTARTED_AT - PREEMPTED_AT)
    assert (PREEMPTED_AT, "A", "preempted") in result.reason_changes


def test_serve_gives_the_simulators_reason_for_the_same_preemption(tmp_path):
    """test_live_preemption's fill_then_starve (alice's 16 one-CPU tasks fill the 8 CPUs
    at t=0, bob's 8 arrive at t=1, preemption after 5 s: 4 victims at t=6) in serve and,
    as a scenario, in the simulator: the same ``preempted`` reason, every number, once
    the simulator's job names are translated to serve's ids."""
    from live_helpers import config_doc
    from test_live_preemption import ALICE, fill_then_starve

    svc, _ex, clock, a, b = fill_then_starve(tmp_path)
    clock.t = 6.0
    svc.step()
    served = svc.explain(ALICE, a)["reasons"][0]

    doc = config_doc()
    del doc["auth"]
    doc["preemption"] = {"after": 5}
    doc["jobs"] = [{"name": "a", "queue": "ads.prod", "tasks": [{"demand": {"cpu": 1}, "count": 16, "duration": 100}]},
                   {"name": "b", "queue": "dev", "submit": 1,
                    "tasks": [{"demand": {"cpu": 1}, "count": 8, "duration": 100}]}]
    sim = run_to(doc, "hdrf", 6.0)
    simulated = explain(sim.scheduler, "a", sim.now).to_json()["reasons"][0]
    # fair shares 4:4 of 8 CPUs (0.5 each); the 4th move: alice 5/8 / .5 = 1.25 -> 1,
    # bob 3/8 / .5 = .75 -> 1
    assert (simulated["victim_ratio_before"], simulated["claimant_ratio_before"]) == \
        pytest.approx((1.25, 0.75))
    assert served == {**simulated, "by": str(b)}
