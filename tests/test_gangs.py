"""Gangs and priorities within a queue (issue 20, items 1 and 3): the loader's keys, one
decision per gang, ``pack``, a gang stopped whole, priorities, the simulator's
``gang_wait``, and a property: no gang ever runs partly."""

from __future__ import annotations

import csv
import io

import pytest
from builders import job, q, scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairshare.conformance.driver import drive
from fairshare.conformance.workloads import Workload
from fairshare.engine import Engine, JobArrived, JobCancelled, NodeLost, Scheduler, TaskFinished
from fairshare.model import ScenarioError, parse_scenario
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, simulate
from fairshare.sim.metrics import summarize
from fairshare.sim.output import timeline_csv

RACKS = [{"name": "a1", "capacity": {"cpu": 4, "mem": 8}, "attributes": {"rack": "r1"}},
         {"name": "a2", "capacity": {"cpu": 4, "mem": 8}, "attributes": {"rack": "r1"}},
         {"name": "b1", "capacity": {"cpu": 8, "mem": 16}, "attributes": {"rack": "r2"}}]


def gang(name, cpu, count, queue=None, *, pack=None, submit=0.0, priority=None, duration=None):
    entry = job(name, {"cpu": cpu}, queue, count=count, submit=submit)
    entry["gang"] = True
    if pack is not None:
        entry["pack"] = pack
    if priority is not None:
        entry["priority"] = priority
    if duration is not None:
        entry["tasks"][0]["duration"] = duration
    return entry


class Recorder:
    """An executor that runs nothing: it records starts and kills."""

    def __init__(self, nodes):
        self._nodes, self.killed = tuple(nodes), []

    def nodes(self):
        return self._nodes

    def start(self, launch, now):
        pass

    def kill(self, task_id):
        self.killed.append(task_id)

    def poll(self):
        return []


def engine(jobs, *, queues=None, nodes=RACKS, policy="hdrf"):
    sc = scenario(jobs=jobs, queues=queues, nodes=nodes)
    sch = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
    return sc, Engine(sch, Recorder(sc.cluster.nodes))


# --- the loader --------------------------------------------------------------------------------

LOADER_CASES = [
    # (what, job entry, the path of the problem)
    ("gang not a bool", {"name": "g", "gang": "yes", "tasks": [{"demand": {"cpu": 1}, "count": 2}]}, "jobs[0].gang"),
    ("a gang's class without a count", {"name": "g", "gang": True, "tasks": [{"demand": {"cpu": 1}}]},
     "jobs[0].tasks[0].count"),
    ("pack without gang", {"name": "g", "pack": "node", "tasks": [{"demand": {"cpu": 1}, "count": 2}]},
     "jobs[0].pack"),
    ("pack neither node nor attribute", {"name": "g", "gang": True, "pack": "rack",
                                         "tasks": [{"demand": {"cpu": 1}, "count": 2}]}, "jobs[0].pack"),
    ("priority not whole", {"name": "g", "priority": 1.5, "tasks": [{"demand": {"cpu": 1}}]}, "jobs[0].priority"),
    # 3 x 3 = 9 CPUs on one node: the largest has 8
    ("pack node, larger than any node", {"name": "g", "gang": True, "pack": "node",
                                         "tasks": [{"demand": {"cpu": 3}, "count": 3}]}, "jobs[0]"),
    # 5 x 3 = 15 CPUs: rack r1 has 4 + 4 = 8, r2 has 8
    ("pack rack, larger than any rack", {"name": "g", "gang": True, "pack": {"attribute": "rack"},
                                         "tasks": [{"demand": {"cpu": 3}, "count": 5}]}, "jobs[0]"),
    # 9 x 2 = 18 CPUs: the cluster has 4 + 4 + 8 = 16
    ("larger than the cluster", {"name": "g", "gang": True, "tasks": [{"demand": {"cpu": 2}, "count": 9}]},
     "jobs[0]"),
    ("pack on an attribute no node has", {"name": "g", "gang": True, "pack": {"attribute": "zone"},
                                          "tasks": [{"demand": {"cpu": 1}, "count": 2}]}, "jobs[0]"),
]


@pytest.mark.parametrize("what, entry, path", LOADER_CASES, ids=[c[0] for c in LOADER_CASES])
def test_the_loader_refuses_bad_gang_keys_with_their_path(what, entry, path):
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"cluster": {"nodes": RACKS}, "jobs": [entry]}, "<test>")
    assert path in [e.path for e in err.value.errors], str(err.value)
    if path == "jobs[0]":
        assert "gang 'g' can never start" in str(err.value)


def test_the_loader_keeps_gang_pack_and_priority():
    sc = scenario(nodes=RACKS, jobs=[gang("g", 2, 4, pack={"attribute": "rack"}, priority=3),
                                     gang("h", 2, 2, pack="node"), job("plain", {"cpu": 1})])
    g, h, plain = sc.jobs
    assert (g.gang, g.pack, g.priority) == (True, ("attribute", "rack"), 3)
    assert (h.pack, h.priority) == (("node", None), 0)
    assert (plain.gang, plain.pack, plain.priority) == (False, None, 0)
    assert g.gang_demand()[0] == 8.0  # 4 tasks x 2 CPUs


# --- one decision per gang ---------------------------------------------------------------------

PLACEMENT_CASES = [
    # (what, the gang's cpu per task, count, pack, CPUs a small job holds first on a1, nodes expected)
    # a1 and a2 have 4 free, b1 8: first-fit takes a1 twice, a2 twice
    ("anywhere, first fit", 2, 4, None, 0, ["a1", "a1", "a2", "a2"]),
    # 1 CPU held on a1 leaves 3: one task there, then a2 x 2, then b1
    ("anywhere, around a small job", 2, 4, None, 1, ["a1", "a2", "a2", "b1"]),
    # one node: a1 holds 2 x 2 = 4 but not 3 x 2 = 6; a2 neither; b1 holds 6 of its 8
    ("pack node", 2, 3, "node", 0, ["b1", "b1", "b1"]),
    # r1 has 4 + 4 = 8 free, enough for 4 x 2
    ("pack rack, the first rack", 2, 4, {"attribute": "rack"}, 0, ["a1", "a1", "a2", "a2"]),
    # r1 has 3 + 4 = 7 < 8: the gang goes to r2 (b1: 8)
    ("pack rack, the first rack too full", 2, 4, {"attribute": "rack"}, 1, ["b1"] * 4),
]


@pytest.mark.parametrize("what, cpu, count, pack, held, nodes", PLACEMENT_CASES, ids=[c[0] for c in PLACEMENT_CASES])
def test_a_gang_starts_every_task_in_one_decision(what, cpu, count, pack, held, nodes):
    jobs = [gang("g", cpu, count, pack=pack, submit=1.0)]
    if held:
        jobs.append(job("small", {"cpu": held}, count=1))
    sc, eng = engine(jobs)
    arrivals = {jb.name: JobArrived(jb) for jb in sc.jobs}
    if held:
        assert [la.node for la in eng.step(0.0, [arrivals["small"]]).launches] == ["a1"]
    launches = eng.step(1.0, [arrivals["g"]]).launches
    assert [la.node for la in launches] == nodes


def test_a_gang_that_cannot_start_whole_starts_nothing_and_the_next_job_runs():
    # 16 CPUs; "small" holds 12 of them (a1, a2, 4 on b1): 4 left, the gang wants 3 x 2 = 6
    sc, eng = engine([job("small", {"cpu": 1}, "a", count=12), gang("g", 2, 3, "b", submit=1.0),
                      job("late", {"cpu": 1}, "a", count=2, submit=1.0)], queues=[q("a"), q("b")])
    eng.step(0.0, [JobArrived(sc.jobs[0])])
    launches = eng.step(1.0, [JobArrived(sc.jobs[1]), JobArrived(sc.jobs[2])]).launches
    # the gang (queue b, share 0) is first in H-DRF's order but blocked: the walk passes to
    # "late", which takes 2 of the 4 free CPUs
    assert [la.job for la in launches] == ["late", "late"]
    assert eng.scheduler.jobs["g"].running == 0


def test_the_sorter_sees_the_gangs_summed_demand_and_usage():
    sc, eng = engine([gang("g", 2, 4)])
    eng.step(0.0, [JobArrived(sc.jobs[0])])
    sorter = eng.scheduler.sorter
    assert sorter.jobs["g"].demand[0] == 8.0  # 4 tasks x 2 CPUs, one unit
    assert sorter.jobs["g"].usage[0] == 8.0  # the whole gang allocated in one decision: 8 of 16 CPUs


def test_a_gang_whose_task_is_lost_stops_whole_and_restarts_whole():
    sc, eng = engine([gang("g", 2, 4)])
    started = eng.step(0.0, [JobArrived(sc.jobs[0])]).launches
    assert [la.node for la in started] == ["a1", "a1", "a2", "a2"]
    # a1 lost: its two tasks are lost, the two on a2 are stopped (killed) and re-queued
    instant = eng.step(1.0, [NodeLost("a1")])
    on_a2 = [la.task_id for la in started if la.node == "a2"]
    assert eng.executor.killed == on_a2
    assert sorted(instant.applied[0].tasks) == sorted(la.task_id for la in started)
    # what is left: a2 (4) and b1 (8): the gang of 4 x 2 starts again, whole
    assert [la.node for la in instant.launches] == ["a2", "a2", "b1", "b1"]


def test_a_failed_gang_task_stops_the_rest_of_its_gang():
    sc, eng = engine([gang("g", 2, 2, pack="node")])
    first, second = eng.step(0.0, [JobArrived(sc.jobs[0])]).launches
    eng.step(1.0, [TaskFinished(first.task_id, ok=False)])
    assert second.task_id in eng.executor.killed
    assert eng.scheduler.jobs["g"].running == 2  # (started again, both)


# --- priorities within a queue -----------------------------------------------------------------

def test_within_a_queue_higher_priority_first_between_queues_unchanged():
    # one node of 4 CPUs (a1 alone); queue a: lo (arrived first) and hi (priority 2);
    # queue b: other. H-DRF splits 4 CPUs 2 and 2 between a and b, and within a, hi goes
    # before lo whatever their shares
    nodes = RACKS[:1]
    jobs = [job("lo", {"cpu": 1}, "a", count=4), job("other", {"cpu": 1}, "b", count=4),
            job("hi", {"cpu": 1}, "a", count=4)]
    jobs[2]["priority"] = 2
    sc, eng = engine(jobs, queues=[q("a"), q("b")], nodes=nodes)
    launches = eng.step(0.0, [JobArrived(jb) for jb in sc.jobs]).launches
    assert sorted(la.job for la in launches) == ["hi", "hi", "other", "other"]

    # the same without the priority: a's two go to lo (it arrived first), b's two unchanged
    jobs[2]["priority"] = 0
    sc, eng = engine(jobs, queues=[q("a"), q("b")], nodes=nodes)
    launches = eng.step(0.0, [JobArrived(jb) for jb in sc.jobs]).launches
    assert sorted(la.job for la in launches) == ["hi", "lo", "other", "other"]


def test_a_blocked_higher_priority_job_holds_its_queue_back_not_the_others():
    # b1 (8 CPUs) first, then a1 (4): "big" (queue a) takes 1 CPU of b1; hi (queue a,
    # priority 5) wants 8 CPUs a task: nowhere now. lo (queue a, priority 0) waits behind
    # it (strict priority within a queue); "other" (queue b) takes the room: a1's 4 CPUs
    # and b1's 7 left, 11 one-CPU tasks, it has 5
    jobs = [job("big", {"cpu": 1}, "a", count=1), job("hi", {"cpu": 8}, "a", count=1, submit=1.0),
            job("lo", {"cpu": 1}, "a", count=1, submit=1.0), job("other", {"cpu": 1}, "b", count=5, submit=1.0)]
    jobs[1]["priority"] = 5
    sc, eng = engine(jobs, queues=[q("a"), q("b")], nodes=[RACKS[2], RACKS[0]])
    assert [la.node for la in eng.step(0.0, [JobArrived(sc.jobs[0])]).launches] == ["b1"]
    launches = eng.step(1.0, [JobArrived(jb) for jb in sc.jobs[1:]]).launches
    assert [la.job for la in launches] == ["other"] * 5
    assert eng.scheduler.jobs["lo"].held
    # hi gone (cancelled): lo is released and runs
    launches = eng.step(2.0, [JobCancelled("hi")]).launches
    assert [la.job for la in launches] == ["lo"]


# --- the simulator -----------------------------------------------------------------------------

def test_summary_has_gang_wait_for_gangs_only_and_running_tasks_is_all_or_none():
    # 16 CPUs; "small" runs 12 one-CPU tasks of 3 s from 0; the gang (3 x 2 = 6 CPUs)
    # arrives at 1 and finds 4 free: it waits until the small tasks end at 3 (wait 3 - 1 = 2)
    sc = scenario(nodes=RACKS, queues=[q("a"), q("b")],
                  jobs=[{**job("small", {"cpu": 1}, "a", count=12), "tasks": [{"demand": {"cpu": 1}, "count": 12,
                                                                               "duration": 3}]},
                        gang("g", 2, 3, "b", submit=1.0, duration={"dist": "uniform", "low": 1, "high": 9})])
    result = simulate(sc, "hdrf", SimOptions(seed=4))
    summary = summarize(result, fairness_gap=False)
    assert summary["jobs"]["g"]["gang_wait"] == 2.0
    assert "gang_wait" not in summary["jobs"]["small"]
    rows = csv.DictReader(io.StringIO(timeline_csv(result)))
    counts = {int(row["running_tasks"]) for row in rows if row["entity"] == "g"}
    assert counts == {0, 3}  # (one drawn duration per start: its 3 tasks end together)


# --- the property ------------------------------------------------------------------------------

@st.composite
def gang_workloads(draw):
    nodes = [{"name": f"n{i}", "capacity": {"cpu": draw(st.sampled_from([4, 8])), "mem": 16},
              "attributes": {"rack": f"r{i % 2}"}} for i in range(draw(st.integers(2, 5)))]
    jobs = []
    for i in range(draw(st.integers(1, 6))):
        cpu, count = draw(st.integers(1, 3)), draw(st.integers(1, 5))
        entry = job(f"j{i}", {"cpu": cpu, "mem": 1}, draw(st.sampled_from(["a", "b"])), count=count,
                    submit=float(draw(st.integers(0, 6))))
        if draw(st.booleans()):
            entry["gang"] = True
            entry["pack"] = draw(st.sampled_from([None, "node", {"attribute": "rack"}]))
            if entry["pack"] is None:
                del entry["pack"]
        entry["priority"] = draw(st.integers(-1, 1))
        jobs.append(entry)
    try:
        sc = scenario(nodes=nodes, queues=[q("a"), q("b")], jobs=jobs)
    except ScenarioError:  # a gang that could never start: refused, not a workload
        sc = None
    losses = tuple((float(t), "lose", f"n{k % len(nodes)}") for k, t in enumerate(
        draw(st.lists(st.integers(1, 10), max_size=2, unique=True))))
    return sc, losses, draw(st.integers(0, 99)), draw(st.sampled_from(["drf", "hdrf", "dff", "fifo", "slots"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gang_workloads())
def test_no_gang_ever_runs_partly(case):
    sc, losses, seed, policy = case
    if sc is None:
        return
    run = drive(make_policy(policy), Workload(sc, node_events=losses, seed=seed))
    gangs = {jb.name: jb.total_count for jb in sc.jobs if jb.gang}
    for inst in run.instants:
        running = {name for tasks in inst.running.values() for name, _ in tasks}
        for name in running & set(gangs):
            assert inst.started[name] == gangs[name], (policy, inst.now, name, inst.started[name], gangs[name])


def test_serve_takes_gang_pack_and_priority():
    from fairshare.live.config import parse_jobs

    sc = scenario(nodes=RACKS)
    body = {"jobs": [{"name": "g", "gang": True, "pack": "node", "priority": 1,
                      "tasks": [{"demand": {"cpu": 1}, "count": 2, "command": "true"}]}]}
    (job,) = parse_jobs(body, sc.resources, sc.cluster.nodes, [])
    assert (job.gang, job.pack, job.priority) == (True, ("node", None), 1)  # (tests/test_live_gangs.py runs them)
