"""The discrete-event simulator (``fairshare.sim``): event order, hand-computed runs, node
events, the slot thrashing model, determinism, conservation and the H-DRF Sec. 3.3
starvation scenario. Expected numbers show their arithmetic.
"""

from __future__ import annotations

import csv
import io

import pytest

from fairshare.model import parse_scenario
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, SimulationError, Simulator, simulate
from fairshare.sim.events import JOB_ARRIVAL, NODE_ADD, NODE_FAIL, TASK_END, EventQueue, engine_event
from fairshare.sim.metrics import summarize
from fairshare.sim.output import timeline_csv

REL = 1e-9


def build(data: dict):
    return parse_scenario(data, "<test>")


def run(data: dict, policy: str = "drf", **options):
    sc = build(data) if isinstance(data, dict) else data
    result = simulate(sc, policy, SimOptions(**options))
    return result, summarize(result)


def rows_of(result, kind: str, entity: str):
    return [r for r in result.rows if r[1] == kind and r[2] == entity]


def mean_running(result, job: str, start: float, end: float) -> float:
    """Time average of a job's running tasks over [start, end] from its timeline rows."""
    rows = rows_of(result, "job", job)
    total = 0.0
    for k, row in enumerate(rows):
        t0 = max(row[0], start)
        t1 = min(rows[k + 1][0] if k + 1 < len(rows) else end, end)
        if t1 > t0:
            total += row[3] * (t1 - t0)
    return total / (end - start)


# DRF Sec. 4.1's machine: 9 CPUs, 18 GB; A runs <1 CPU, 4 GB> tasks, B <3 CPU, 1 GB>.
def drf_example(count_a: int = 6, count_b: int = 4) -> dict:
    return {"cluster": {"capacity": {"cpu": 9, "memory": 18}},
            "jobs": [{"name": "A", "tasks": [{"demand": {"cpu": 1, "memory": 4}, "count": count_a, "duration": 10}]},
                     {"name": "B", "tasks": [{"demand": {"cpu": 3, "memory": 1}, "count": count_b, "duration": 10}]}]}


# --- the event heap --------------------------------------------------------------------------

def test_event_heap_orders_by_time_then_priority_then_insertion():
    q = EventQueue()
    q.push(5.0, JOB_ARRIVAL, "arrive@5")
    q.push(5.0, TASK_END, "end@5 first")
    q.push(5.0, NODE_FAIL, "fail@5")
    q.push(5.0, TASK_END, "end@5 second")
    q.push(1.0, JOB_ARRIVAL, "arrive@1")
    q.push(5.0, NODE_ADD, "add@5")
    order = [q.pop()[2] for _ in range(len(q))]
    assert order == ["arrive@1", "end@5 first", "end@5 second", "fail@5", "add@5", "arrive@5"]


def test_a_scenarios_cluster_events_become_engine_events_ranked_by_the_instant_order():
    from fairshare.engine.events import NodeAdded, NodeLost
    from fairshare.model.scenario import ClusterEvent

    sc = build(drf_example())
    node = sc.cluster.nodes[0]
    assert engine_event(ClusterEvent(3.0, "node_fail", node.name)) == (NODE_FAIL, NodeLost(node.name))
    assert engine_event(ClusterEvent(4.0, "node_add", node.name, node)) == (NODE_ADD, NodeAdded(node))
    assert NODE_FAIL < NODE_ADD < JOB_ARRIVAL  # (a job arriving at t sees the nodes as of t)
    with pytest.raises(ValueError, match="'reboot' at 5.0 s"):
        engine_event(ClusterEvent(5.0, "reboot", node.name))


# --- hand-computed runs ------------------------------------------------------------------------

def test_drf_example_counts_6_and_4_by_hand():
    # DRF Sec. 4.1 demands, one 9 CPU / 18 GB machine, counts A=6, B=4, every task 10 s.
    # t=0: DRF picks the lower dominant share (ties: fewer running, then arrival order):
    #   A (2/9), B (1/3), A (4/9), B (2/3), A (6/9): A 3 tasks <3, 12>, B 2 tasks <6, 2>;
    #   CPU 3 + 6 = 9 is full, memory 14 of 18. Both dominant shares 2/3.
    # t=10: all 5 finish; A has 3 left, B 2: the same 3 + 2 start again.
    # t=20: all done. Makespan 20; A and B complete at 20 (submitted at 0).
    # Utilization over [0, 20]: cpu 9/9 = 1, memory 14/18 = 0.7778.
    result, s = run(drf_example(6, 4))
    assert s["makespan"] == 20.0
    assert s["jobs"]["A"]["finish"] == 20.0 and s["jobs"]["A"]["completion_time"] == 20.0
    assert s["jobs"]["B"]["finish"] == 20.0 and s["jobs"]["B"]["completion_time"] == 20.0
    assert s["jobs"]["A"]["start"] == 0.0 and s["jobs"]["B"]["start"] == 0.0
    assert s["jobs"]["A"]["tasks_completed"] == 6 and s["jobs"]["B"]["tasks_completed"] == 4
    assert s["jobs"]["A"]["mean_running_tasks"] == pytest.approx(3.0, rel=REL)
    assert s["jobs"]["B"]["mean_running_tasks"] == pytest.approx(2.0, rel=REL)
    assert s["jobs"]["A"]["mean_allocation"] == pytest.approx({"cpu": 3.0, "memory": 12.0}, rel=REL)
    assert s["jobs"]["B"]["mean_allocation"] == pytest.approx({"cpu": 6.0, "memory": 2.0}, rel=REL)
    assert s["utilization"] == pytest.approx({"cpu": 1.0, "memory": 14 / 18}, rel=REL)
    # the timeline: the state at 0 holds until 20 (t=10 changes nothing, so no row)
    assert [(r[0], r[2], r[3]) for r in rows_of(result, "job", "A")] == [(0.0, "A", 3), (20.0, "A", 0)]
    assert rows_of(result, "job", "A")[0][4] == pytest.approx(2 / 3, rel=REL)
    assert s["starvation"] == {"max_s": 0.0, "job": None}
    # the run follows DRF's static allocation exactly while both demand: gap 0
    assert s["fairness_gap"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert s["fairness_gap"]["static_policy"] == "drf"


def test_drf_example_counts_7_and_4_by_hand():
    # As above until t=20, when B is done and A has 1 task left: it runs [20, 30].
    # Makespan 30. Utilization: cpu (9*20 + 1*10) / (9*30) = 190/270,
    # memory (14*20 + 4*10) / (18*30) = 320/540. A's mean running (3*20 + 1*10) / 30 = 7/3.
    _, s = run(drf_example(7, 4))
    assert s["makespan"] == 30.0
    assert s["jobs"]["A"]["completion_time"] == 30.0 and s["jobs"]["B"]["completion_time"] == 20.0
    assert s["utilization"] == pytest.approx({"cpu": 190 / 270, "memory": 320 / 540}, rel=REL)
    assert s["jobs"]["A"]["mean_running_tasks"] == pytest.approx(7 / 3, rel=REL)
    assert s["completion_time"]["mean"] == 25.0


def test_arrivals_see_resources_freed_at_the_same_instant():
    # One CPU. X (1 task, 10 s) runs [0, 10]; Y arrives at 10, exactly when X ends: the
    # completion is processed first, so Y starts at 10 (not later) and ends at 15.
    _, s = run({"cluster": {"capacity": {"cpu": 1}},
                "jobs": [{"name": "X", "tasks": [{"demand": {"cpu": 1}, "count": 1, "duration": 10}]},
                         {"name": "Y", "submit": 10, "tasks": [{"demand": {"cpu": 1}, "count": 1, "duration": 5}]}]})
    assert s["jobs"]["Y"]["start"] == 10.0 and s["jobs"]["Y"]["finish"] == 15.0
    assert s["makespan"] == 15.0
    assert s["jobs"]["Y"]["longest_starvation_s"] == 0.0


def test_waiting_job_starvation_is_measured():
    # One CPU; X holds it [0, 10]; Y arrives at 2 and waits 8 s, demanding and running nothing.
    _, s = run({"cluster": {"capacity": {"cpu": 1}},
                "jobs": [{"name": "X", "tasks": [{"demand": {"cpu": 1}, "count": 1, "duration": 10}]},
                         {"name": "Y", "submit": 2, "tasks": [{"demand": {"cpu": 1}, "count": 1, "duration": 5}]}]})
    assert s["jobs"]["Y"]["longest_starvation_s"] == 8.0  # 10 - 2
    assert s["starvation"] == {"max_s": 8.0, "job": "Y"}
    assert s["jobs"]["Y"]["completion_time"] == 13.0  # 15 - 2


def test_list_durations_cycle_per_class():
    # One CPU, tasks one after another with durations 1, 2, 3, 1, 2: they end at 1, 3, 6, 7, 9.
    result, s = run({"cluster": {"capacity": {"cpu": 1}},
                     "jobs": [{"name": "A", "tasks": [{"demand": {"cpu": 1}, "count": 5, "duration": [1, 2, 3]}]}]})
    assert s["makespan"] == 9.0
    assert [r[0] for r in rows_of(result, "job", "A")] == [0.0, 9.0]  # 1 running until the end


def test_zero_count_job_finishes_at_submit():
    _, s = run({"cluster": {"capacity": {"cpu": 1}},
                "jobs": [{"name": "A", "submit": 3, "tasks": [{"demand": {"cpu": 1}, "count": 0}]}]})
    assert s["jobs"]["A"]["start"] is None
    assert s["jobs"]["A"]["finish"] == 3.0 and s["jobs"]["A"]["completion_time"] == 0.0


# --- node events ------------------------------------------------------------------------------

TWO_NODES = {
    "cluster": {"nodes": [{"name": "a", "capacity": {"cpu": 2}}, {"name": "b", "capacity": {"cpu": 2}}]},
    "jobs": [{"name": "J", "tasks": [{"demand": {"cpu": 1}, "count": 4, "duration": 10}]}],
}


def test_node_failure_requeues_and_every_task_completes():
    # 4 one-CPU tasks on nodes a, b (2 CPUs each), 10 s each: first fit puts 2 on a, 2 on b.
    # b fails at 5: its 2 tasks go back to pending; a's finish at 10, then the 2 re-run on
    # a over [10, 20]. Makespan 20; 4 tasks completed, 2 lost.
    data = dict(TWO_NODES, events=[{"time": 5, "node_fail": "b"}])
    result, s = run(data)
    assert s["makespan"] == 20.0
    assert s["jobs"]["J"]["tasks_completed"] == 4 and s["jobs"]["J"]["finish"] == 20.0
    assert s["tasks"]["lost_to_node_failures"] == 2 and s["tasks"]["launched"] == 6
    # running tasks drop from 4 to 2 at the failure
    assert [(r[0], r[3]) for r in rows_of(result, "job", "J")] == [(0.0, 4), (5.0, 2), (20.0, 0)]
    # utilization counts a node only while it is up:
    # cpu-seconds used 4*5 + 2*5 + 2*10 = 50; up 4*5 + 2*15 = 50 -> 100%
    assert s["utilization"]["cpu"] == pytest.approx(1.0, rel=REL)


def test_node_add_runs_requeued_tasks_on_the_new_node():
    # As above, but a spare node of 2 CPUs joins at 7: the 2 lost tasks run there [7, 17].
    data = dict(TWO_NODES, events=[{"time": 5, "node_fail": "b"},
                                   {"time": 7, "node_add": {"name": "spare", "capacity": {"cpu": 2}}}])
    _, s = run(data)
    assert s["makespan"] == 17.0
    assert s["jobs"]["J"]["tasks_completed"] == 4


def test_failed_node_comes_back_with_its_capacity():
    # b fails at 5 and returns at 6 (no capacity given: its own): lost tasks re-run [6, 16].
    data = dict(TWO_NODES, events=[{"time": 5, "node_fail": "b"}, {"time": 6, "node_add": {"name": "b"}}])
    _, s = run(data)
    assert s["makespan"] == 16.0


def test_jobs_that_cannot_finish_when_nodes_are_gone_stay_unfinished():
    data = dict(TWO_NODES, events=[{"time": 5, "node_fail": "a"}, {"time": 5, "node_fail": "b"}])
    result, s = run(data)
    assert s["jobs"]["J"]["finish"] is None and s["jobs"]["J"]["completion_time"] is None
    assert s["makespan"] == 5.0 and not s["all_finished"]
    assert result.notes and "fit on no node" in result.notes[0]


@pytest.mark.parametrize("event, path", [
    ({"time": 1, "node_fail": "zzz"}, "events[0].node_fail"),
    ({"time": -1, "node_fail": "a"}, "events[0].time"),
    ({"node_fail": "a"}, "events[0].time"),
    ({"time": 1, "node_add": {"name": "new"}}, "events[0].node_add.capacity"),
    ({"time": 1, "node_add": {"name": "a", "capacity": {"cpu": 1}}}, "events[0].node_add.name"),
    ({"time": 1, "node_add": {"name": "x", "capacity": {"gpu": 1}}}, "events[0].node_add.capacity.gpu"),
    ({"time": 1, "node_fail": "a", "node_add": {"name": "x"}}, "events[0]"),
    ({"time": 1, "reboot": "a"}, "events[0].reboot"),
])
def test_event_validation_names_the_field(event, path):
    from fairshare.model import ScenarioError

    with pytest.raises(ScenarioError) as err:
        build(dict(TWO_NODES, events=[event]))
    assert path in err.value.paths


def test_failing_a_node_twice_is_rejected_at_the_second():
    from fairshare.model import ScenarioError

    with pytest.raises(ScenarioError) as err:
        build(dict(TWO_NODES, events=[{"time": 3, "node_fail": "a"}, {"time": 1, "node_fail": "a"}]))
    assert err.value.paths == ["events[0].node_fail"]  # time order: events[1] (t=1) came first


# --- --until and unbounded jobs --------------------------------------------------------------------

def test_until_leaves_unfinished_jobs_with_null_finish():
    # One CPU, 3 tasks of 10 s; stop at 15: task 1 done, task 2 running. Late arrives after 15.
    data = {"cluster": {"capacity": {"cpu": 1}},
            "jobs": [{"name": "A", "tasks": [{"demand": {"cpu": 1}, "count": 3, "duration": 10}]},
                     {"name": "Late", "submit": 99, "tasks": [{"demand": {"cpu": 1}, "count": 1}]}]}
    _, s = run(data, until=15)
    assert s["makespan"] == 15.0
    assert s["jobs"]["A"] | {"mean_allocation": None} == {
        "submit": 0.0, "start": 0.0, "finish": None, "completion_time": None, "tasks_completed": 1,
        "mean_running_tasks": 1.0, "mean_allocation": None, "queue": None, "tasks_total": 3,
        "longest_starvation_s": 0.0}
    assert s["jobs"]["Late"]["start"] is None and s["jobs"]["Late"]["finish"] is None
    assert s["completion_time"] == {"mean": None, "p95": None, "finished_jobs": 0, "unfinished_jobs": 2}


def test_until_is_required_for_unbounded_jobs():
    sc = build({"cluster": {"capacity": {"cpu": 1}}, "jobs": [{"name": "U", "tasks": [{"demand": {"cpu": 1}}]}]})
    with pytest.raises(SimulationError, match="until"):
        Simulator(sc, make_policy("drf"), SimOptions())


def test_run_ending_before_until_reports_the_last_finish():
    _, s = run(drf_example(6, 4), until=1000)
    assert s["makespan"] == 20.0 and s["all_finished"]


# --- slots: the thrashing model -----------------------------------------------------------------

def test_slots_oversubscribe_and_stretch_durations():
    # One node with 1 CPU and 3 slots: three 1-CPU tasks of 10 s start together (slots
    # ignore resources), the node is over-subscribed 3x, so each runs 3 * 10 = 30 s.
    result, s = run({"cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 1}}]},
                     "jobs": [{"name": "A", "tasks": [{"demand": {"cpu": 1}, "count": 3, "duration": 10}]}]},
                    policy=make_policy("slots", slots=3))
    assert s["makespan"] == 30.0
    assert s["tasks"]["stretched_by_oversubscription"] == 3
    cluster = rows_of(result, "cluster", "cluster")
    assert cluster[0][5] == (3.0,) and cluster[0][4] == 3.0  # 3 CPUs allocated of 1: dominant share 3


# --- determinism and conservation --------------------------------------------------------------------

RANDOM = {
    "resources": ["cpu", "memory"],
    "cluster": {"nodes": [{"name": "n", "count": 4, "capacity": {"cpu": 8, "memory": 32}}]},
    "queues": [{"name": "prod", "weight": 2, "children": [{"name": "etl"}, {"name": "web"}]}, {"name": "dev"}],
    "jobs": [
        {"name": "e1", "queue": "prod.etl", "tasks": [{"demand": {"cpu": 2, "memory": 4}, "count": 40,
                                                        "duration": {"dist": "exponential", "mean": 10}}]},
        {"name": "w1", "queue": "prod.web", "submit": 5,
         "tasks": [{"demand": {"cpu": 1, "memory": 6}, "count": 60, "duration": {"dist": "uniform", "low": 2, "high": 9}}]},
        {"name": "d1", "queue": "dev", "submit": 3,
         "tasks": [{"class": "map", "demand": {"cpu": 1, "memory": 1}, "count": 50,
                    "duration": {"dist": "lognormal", "mu": 1.5, "sigma": 0.5}},
                   {"class": "reduce", "demand": {"cpu": 3, "memory": 2}, "count": 10, "duration": [8, 12]}]},
        {"name": "d2", "queue": "dev", "submit": 20, "tasks": [{"demand": {"cpu": 4, "memory": 2}, "count": 15,
                                                                 "duration": {"dist": "exponential", "mean": 6}}]},
    ],
    "events": [{"time": 30, "node_fail": "n-1"}, {"time": 45, "node_add": {"name": "n-1"}}],
}


def _files(policy: str, seed: int) -> tuple[str, str]:
    from fairshare.sim.output import summary_json

    result = simulate(build(RANDOM), policy, SimOptions(seed=seed))
    return summary_json(summarize(result)), timeline_csv(result)


def test_same_seed_gives_identical_bytes():
    assert _files("hdrf", 7) == _files("hdrf", 7)


def test_different_seeds_give_different_runs():
    a, b = _files("hdrf", 7), _files("hdrf", 8)
    assert a[0] != b[0] and a[1] != b[1]


@pytest.mark.parametrize("policy, placement, headroom", [
    ("drf", "first-fit", False), ("hdrf", "best-fit", False), ("hdrf-naive", "packing", False),
    ("dff", "first-fit", False), ("capacity", "first-fit", False), ("fifo", "best-fit", False),
    ("collapsed", "packing", False), ("asset", "first-fit", False), ("hdrf", "first-fit", True),
    ("timefair", "first-fit", False),
])
def test_cluster_allocation_never_exceeds_capacity(policy, placement, headroom):
    result = simulate(build(RANDOM), policy, SimOptions(seed=3, placement=placement, headroom=headroom))
    caps = result.capacity_changes
    k = 0
    for t, kind, _entity, running, share, alloc in result.rows:
        while k + 1 < len(caps) and caps[k + 1][0] <= t:
            k += 1
        if kind == "cluster":
            for a, c in zip(alloc, caps[k][1]):
                assert a <= c + 1e-9, (policy, t, alloc, caps[k][1])
            assert share <= 1 + 1e-9
        assert running >= 0 and all(a >= -1e-9 for a in alloc)
    assert result.all_finished
    assert result.tasks_completed == 40 + 60 + 60 + 15


def test_timeline_rows_are_ordered_and_complete():
    result = simulate(build(RANDOM), "hdrf", SimOptions(seed=1))
    text = timeline_csv(result)
    table = list(csv.reader(io.StringIO(text)))
    assert table[0] == ["time", "kind", "entity", "running_tasks", "dominant_share", "cpu", "memory"]
    keys = [(float(r[0]), r[1], r[2]) for r in table[1:]]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)  # one row per entity per instant
    assert {r[1] for r in table[1:]} == {"job", "queue", "cluster"}
    entities = {r[2] for r in table[1:] if r[1] == "queue"}
    assert entities == {"prod", "prod.etl", "prod.web", "dev"}
    # a queue's allocation is the sum of its jobs' at every instant: check at the end of each
    # job row time by replaying the step functions
    state: dict[tuple[str, str], tuple[float, ...]] = {}
    for r in table[1:]:
        state[(r[1], r[2])] = tuple(float(x) for x in r[5:])
        if r[1] == "queue" and r[2] == "dev":
            d = [state.get(("job", n), (0.0, 0.0)) for n in ("d1", "d2")]
            assert state[("queue", "dev")] == pytest.approx(tuple(a + b for a, b in zip(*d)), abs=1e-9)


def test_queue_means_and_contract_keys():
    _, s = run(RANDOM, policy="hdrf", seed=2)
    assert list(s)[:5] == ["policy", "makespan", "utilization", "jobs", "queues"]
    for job in s["jobs"].values():
        assert {"submit", "start", "finish", "completion_time", "tasks_completed", "mean_running_tasks",
                "mean_allocation"} <= set(job)
    assert set(s["queues"]) == {"prod", "prod.etl", "prod.web", "dev"}
    for q in s["queues"].values():
        assert set(q) == {"mean_allocation", "mean_dominant_share"}
        assert 0 <= q["mean_dominant_share"] <= 1


# --- H-DRF Sec. 3.3: naive H-DRF starves a job, H-DRF does not ---------------------------------

# Fig. 4(a): n1 holds job n1,1 <1 CPU, 0 GPU>; n2 holds n2,1 <1 CPU, 0> and n2,2 <0, 1 GPU>.
# 10 nodes of <1 CPU, 1 GPU>, every job unbounded, every task 1 s. n2,2 arrives at 0.5, so
# CPU tasks end at whole seconds and GPU tasks at half seconds: they never free together.
# Naive H-DRF (Sec. 3.3): at t=1 n1,1 and n2,1 finish their 5 tasks each, but n2 counts
# n2,2's 10 GPUs (dominant share 100%), so all 10 CPUs go to n1,1, and again every second:
# "This will repeat itself until job n2,1 is completely starved". H-DRF (Sec. 3.4) ignores
# the saturated GPU and rescales, so n2,1 keeps its 5 CPUs.
FIG4A = {
    "resources": ["cpu", "gpu"],
    "cluster": {"nodes": [{"name": "n", "count": 10, "capacity": {"cpu": 1, "gpu": 1}}]},
    "queues": [{"name": "n1"}, {"name": "n2"}],
    "jobs": [{"name": "n11", "queue": "n1", "tasks": [{"demand": {"cpu": 1}, "duration": 1}]},
             {"name": "n21", "queue": "n2", "tasks": [{"demand": {"cpu": 1}, "duration": 1}]},
             {"name": "n22", "queue": "n2", "submit": 0.5, "tasks": [{"demand": {"gpu": 1}, "duration": 1}]}],
}


def test_hdrf_sec_3_3_naive_hdrf_starves_n21():
    result, s = run(FIG4A, policy="hdrf-naive", until=200)
    assert mean_running(result, "n21", 100, 200) < 0.5  # starved: 0 in the paper's limit
    assert mean_running(result, "n11", 100, 200) > 9.5  # n1,1 took all 10 CPUs
    assert s["starvation"]["job"] == "n21" and s["starvation"]["max_s"] > 150
    assert all(j["finish"] is None for j in s["jobs"].values())


def test_hdrf_sec_3_4_hdrf_keeps_n21_at_its_share():
    result, s = run(FIG4A, policy="hdrf", until=200)
    assert 4.5 < mean_running(result, "n21", 100, 200) < 5.5  # 5 CPUs, H-DRF's static share
    assert 4.5 < mean_running(result, "n11", 100, 200) < 5.5
    assert mean_running(result, "n22", 100, 200) > 9.5
    assert s["starvation"]["max_s"] < 1.0
    assert s["fairness_gap"]["value"] < 0.05


# --- the collector settings of a run ---------------------------------------------------------

def test_a_run_tunes_the_collector_and_restores_it():
    """``Simulator.run`` raises the young generation's threshold and freezes what is alive
    while it runs (docs/simulation.md, "Performance"), and puts both back after; a freeze
    made before the run (serve's) is left as it was."""
    import gc

    from fairshare.sim import simulator

    seen = []
    original = simulator.Simulator._run

    def spy(self):
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return original(self)

    before = gc.get_threshold()
    gc.unfreeze()  # (a clean start, whatever ran before in this process)
    try:
        gc.set_threshold(700, 10, 10)
        simulator.Simulator._run = spy
        simulate(build(drf_example()), "drf")
        assert seen[0][0] == simulator.SIM_GC_THRESHOLDS and seen[0][1] > 0
        assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
        gc.freeze()  # someone else's freeze: kept
        frozen = gc.get_freeze_count()
        simulate(build(drf_example()), "drf")
        assert gc.get_freeze_count() >= frozen
    finally:
        simulator.Simulator._run = original
        gc.unfreeze()
        gc.set_threshold(*before)
