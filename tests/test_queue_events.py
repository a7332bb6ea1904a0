"""Queue-tree changes as events: the model (``QueueTree.changed``), the scenario loader's
``events: [{time, queue: {...}}]`` and the scheduler applying them in place
(``Scheduler.change_queues`` through ``Engine.step``)."""

from __future__ import annotations

import pytest

from builders import job, q, scenario
from fairshare.engine import Engine, JobArrived, QueueChanged, Scheduler, TaskFinished
from fairshare.model.errors import ScenarioError
from fairshare.model.loader import parse_scenario
from fairshare.model.queues import QueueChange, QueueTree
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, simulate
from live_helpers import NullExecutor


def tree() -> QueueTree:
    return QueueTree.build([("ads", 1.0, "fair"), ("ads.prod", 1.0, "fair"), ("dev", 1.0, "fair")])


# --- the model ---------------------------------------------------------------------------------

def test_a_change_sets_only_the_fields_it_names_and_leaves_the_tree_it_came_from():
    old = tree()
    new = old.changed(QueueChange("ads", weight=3.0, limit=(("cpu", 8.0),)))
    assert (new["ads"].weight, new["ads"].limit, new["ads"].order, new["ads"].children) == \
        (3.0, (("cpu", 8.0),), "fair", ("ads.prod",))
    assert (old["ads"].weight, old["ads"].limit) == (1.0, ())
    # a bound of () removes it; None keeps it
    assert new.changed(QueueChange("ads", limit=()))["ads"].limit == ()
    assert new.changed(QueueChange("ads", weight=2.0))["ads"].limit == (("cpu", 8.0),)


def test_a_new_queue_goes_last_under_its_parent_and_a_removal_takes_its_subtree():
    new = tree().changed(QueueChange("ads.test", weight=2.0))
    assert new["ads"].children == ("ads.prod", "ads.test") and new["ads.test"].weight == 2.0
    assert new.paths == ["ads", "ads.prod", "ads.test", "dev"]
    gone = new.changed(QueueChange("ads", remove=True))
    assert gone.paths == ["dev"] and gone[""].children == ("dev",)


@pytest.mark.parametrize("change, reason", [
    (QueueChange("x.y"), "parent queue 'x' does not exist"),
    (QueueChange("nope", remove=True), "there is no such queue"),
    (QueueChange("ads..x"), "dotted queue path"),
    (QueueChange("ads", weight=0.0), "positive"),
])
def test_a_change_that_cannot_apply_says_why(change, reason):
    with pytest.raises(ValueError, match=reason):
        tree().changed(change)


# --- the loader --------------------------------------------------------------------------------

def doc(events, jobs=None, queues=None):
    return {"cluster": {"nodes": [{"name": "n", "count": 2, "capacity": {"cpu": 4, "mem": 8}}]},
            "queues": queues or [{"name": "ads", "children": [{"name": "prod"}]}, {"name": "dev"}],
            "jobs": jobs if jobs is not None else [{"name": "a", "queue": "ads.prod",
                                                    "tasks": [{"demand": {"cpu": 1}, "count": 4}]}],
            "events": events}


def test_queue_events_load_in_time_order_with_the_node_events():
    sc = parse_scenario(doc([{"time": 20, "queue": {"name": "dev", "weight": 3}},
                             {"time": 10, "node_fail": "n-1"},
                             {"time": 10, "queue": {"name": "ads", "limit": {"cpu": 2}, "guarantee": None}}]))
    assert [(ev.time_s, ev.kind, ev.node_name) for ev in sc.events] == \
        [(10, "node_fail", "n-1"), (10, "queue", "ads"), (20, "queue", "dev")]
    assert sc.events[1].queue_change == QueueChange("ads", None, None, (), (("cpu", 2.0),))


@pytest.mark.parametrize("events, jobs, field, reason", [
    ([{"time": 1, "queue": {"name": "dev", "weight": -1}}], None, "events[0].queue.weight", "must be > 0"),
    ([{"time": 1, "queue": {"name": "dev", "colour": "red"}}], None, "events[0].queue.colour", "unknown key"),
    ([{"time": 1, "queue": {"name": "dev", "remove": True, "weight": 2}}], None, "events[0].queue.remove",
     "cannot go with weight"),
    ([{"time": 1, "queue": {"name": "x.y"}}], None, "events[0].queue.name", "parent queue 'x' does not exist"),
    ([{"time": 1, "queue": {"name": "dev", "limit": {"gpu": 1}}}], None, "events[0].queue.limit.gpu",
     "unknown resource 'gpu'"),
    ([{"time": 1, "queue": {"name": "dev", "guarantee": {"cpu": 100}}}], None, "events[0].queue.guarantee.cpu",
     "more than the cluster's 8"),
    ([{"time": 5, "queue": {"name": "new"}}],
     [{"name": "early", "queue": "new", "submit": 4, "tasks": [{"demand": {"cpu": 1}}]}], "jobs[0].submit",
     "before its queue 'new' is added"),
    ([{"time": 5, "queue": {"name": "dev", "remove": True}}],
     [{"name": "late", "queue": "dev", "submit": 5, "tasks": [{"demand": {"cpu": 1}}]}], "jobs[0].queue",
     "after its queue 'dev' is removed"),
])
def test_a_bad_queue_event_is_reported_with_its_field(events, jobs, field, reason):
    with pytest.raises(ScenarioError) as got:
        parse_scenario(doc(events, jobs))
    assert any(e.path == field and reason in e.reason for e in got.value.errors), got.value.errors


def test_a_job_may_name_a_queue_an_event_adds_before_it_arrives():
    sc = parse_scenario(doc([{"time": 5, "queue": {"name": "dev.new", "weight": 2}}],
                            [{"name": "j", "queue": "dev.new", "submit": 5, "tasks": [{"demand": {"cpu": 1}}]}]))
    assert sc.jobs[0].queue == "dev.new" and "dev.new" not in sc.queues  # (the tree at the start)


# --- the scheduler -----------------------------------------------------------------------------

def engine(policy="hdrf"):
    sc = scenario(nodes=[{"name": "n", "count": 1, "capacity": {"cpu": 4, "mem": 8}}],
                  queues=[q("a", 1), q("b", 1)],
                  jobs=[job("ja", {"cpu": 1}, "a", count=20), job("jb", {"cpu": 1}, "b", count=20)])
    sch = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
    return Engine(sch, NullExecutor()), sc


def test_a_weight_change_applies_in_place_and_moves_the_next_decisions():
    eng, sc = engine()
    first = eng.step(0.0, [JobArrived(j) for j in sc.jobs]).launches
    assert sorted(la.job for la in first) == ["ja", "ja", "jb", "jb"]  # 2 CPUs each, weights 1:1
    before = eng.scheduler
    # b's weight 3: of the next 4 CPUs freed, b takes 3 (H-DRF: b's share / 3 stays the lowest)
    eng.step(1.0, [QueueChanged(QueueChange("b", weight=3.0))] + [TaskFinished(la.task_id) for la in first])
    assert eng.scheduler is before  # the same scheduler: jobs, tasks and counts kept
    running = sorted(t.job for t in eng.scheduler.tasks.values())
    assert running == ["ja", "jb", "jb", "jb"]
    assert eng.snapshot().queues["b"].running == 3


def test_a_limit_added_at_run_time_holds_from_the_next_decision():
    eng, sc = engine("drf")
    first = eng.step(0.0, [JobArrived(j) for j in sc.jobs]).launches
    eng.step(1.0, [QueueChanged(QueueChange("a", limit=(("cpu", 1.0),)))] +
             [TaskFinished(la.task_id) for la in first])
    assert sorted(t.job for t in eng.scheduler.tasks.values()) == ["ja", "jb", "jb", "jb"]


def test_removing_a_queue_a_job_still_uses_is_refused_and_an_unused_one_goes():
    eng, sc = engine()
    eng.step(0.0, [JobArrived(sc.jobs[0])])
    with pytest.raises(ValueError, match="job\\(s\\) 'ja' still use it"):
        eng.step(1.0, [QueueChanged(QueueChange("a", remove=True))])
    eng.step(2.0, [QueueChanged(QueueChange("b", remove=True))])
    assert eng.scheduler.queues.paths == ["a"]
    assert set(eng.snapshot().queues) == {"a"}


def test_a_scenario_with_a_queue_event_simulates_and_reports_the_new_queue():
    sc = parse_scenario(doc([{"time": 5, "queue": {"name": "dev.new", "weight": 2}}],
                            [{"name": "a", "queue": "ads.prod", "tasks": [{"demand": {"cpu": 1}, "count": 40,
                                                                            "duration": 2}]},
                             {"name": "j", "queue": "dev.new", "submit": 5,
                              "tasks": [{"demand": {"cpu": 1}, "count": 8, "duration": 2}]}]))
    result = simulate(sc, make_policy("hdrf"), SimOptions(seed=0))
    assert result.all_finished
    rows = [row for row in result.rows if row[1] == "queue" and row[2] == "dev.new"]
    assert rows and rows[0][0] == 5  # the new queue's first row is at its creation
    assert max(row[3] for row in rows) == 4  # then half the 8 CPUs (it is alone under dev)


def test_removing_a_queue_whose_job_still_runs_stops_the_simulation_with_the_reason():
    from fairshare.sim import SimulationError

    sc = parse_scenario(doc([{"time": 3, "queue": {"name": "ads", "remove": True}}],
                            [{"name": "a", "queue": "ads.prod", "tasks": [{"demand": {"cpu": 1}, "count": 40,
                                                                            "duration": 2}]}]))
    with pytest.raises(SimulationError, match="at 3 s: cannot remove queue 'ads': job\\(s\\) 'a' still use it"):
        simulate(sc, make_policy("hdrf"), SimOptions(seed=0))
