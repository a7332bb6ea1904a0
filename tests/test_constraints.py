"""Placement constraints from real traces (issue 4, part 2).

* ``constraints`` (Alibaba's ``gpu_spec``: allowed GPU models) place only on matching nodes;
* ``cluster.devices`` (fractional GPUs, Alibaba's ``gpu_milli``): a demand < 1 takes part of
  one device, a whole demand k takes k devices with nothing else on them;
* ``max_per_node`` (DLRM's ``max_instance_per_node``);
* constrained fairness: a job whose classes are all constrained competes for the capacity
  of its eligible nodes only (``max_r U_r / C^elig_r``, docs/policies.md).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from replay import replay

from fairshare.cli import main
from fairshare.engine import NodePool, Scheduler
from fairshare.model import Node, ScenarioError, parse_scenario
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, simulate


def gpu_cluster(nodes: list[dict], jobs: list[dict], *, devices: bool = True, events: list | None = None):
    cluster: dict = {"nodes": nodes}
    if devices:
        cluster["devices"] = ["gpu"]
    data: dict = {"resources": ["cpu", "gpu"], "cluster": cluster, "jobs": jobs}
    if events:
        data["events"] = events
    return parse_scenario(data, "<test>")


def gpu_node(name: str, model: str, gpus: int, count: int = 1, cpu: int = 32) -> dict:
    return {"name": name, "count": count, "capacity": {"cpu": cpu, "gpu": gpus}, "attributes": {"gpu_model": model}}


def scheduler(sc, policy: str = "drf", **kw) -> Scheduler:
    return Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy), devices=sc.cluster.devices,
                     **kw)


def launches_by_node(sched: Scheduler, jobs=(), now: float = 0.0) -> dict[str, Counter]:
    """Submit ``jobs`` at ``now``, decide once; the launches per job and node."""
    for job in jobs:
        sched.submit(job, now)
    out: dict[str, Counter] = {}
    for launch in sched.schedule(now):
        out.setdefault(launch.job, Counter())[launch.node] += 1
    return out


# --- gpu_spec: constraints on a heterogeneous GPU cluster ----------------------------------

# 2 T4 nodes, 2 V100 nodes, 1 A10 node (4 GPUs each), in that cluster order.
HETERO = [gpu_node("t4", "T4", 4, count=2), gpu_node("v100", "V100", 4, count=2), gpu_node("a10", "A10", 4)]


@pytest.mark.parametrize("allowed, nodes", [
    ("V100", {"v100-0", "v100-1"}),
    (["A10", "V100"], {"v100-0", "v100-1", "a10"}),
    (["T4"], {"t4-0", "t4-1"}),
])
def test_gpu_spec_places_only_on_allowed_models(allowed, nodes):
    # the constrained job asks for 20 one-GPU tasks, more than its models hold, so first
    # fit would spill onto every node if the constraint were ignored
    sc = gpu_cluster(HETERO, [{"name": "A", "tasks": [{"demand": {"cpu": 1, "gpu": 1}, "count": 20,
                                                          "constraints": {"gpu_model": allowed}}]}])
    placed = launches_by_node(scheduler(sc), sc.jobs)["A"]
    assert set(placed) == nodes
    assert sum(placed.values()) == 4 * len(nodes)  # 4 GPUs on each allowed node, all used


def test_gpu_spec_through_the_simulator_finishes_on_allowed_nodes_only():
    sc = gpu_cluster(HETERO, [
        {"name": "A", "tasks": [{"demand": {"cpu": 1, "gpu": 1}, "count": 30, "duration": 5,
                                 "constraints": {"gpu_model": ["A10", "V100"]}}]},
        {"name": "B", "tasks": [{"demand": {"cpu": 1, "gpu": 1}, "count": 30, "duration": 5}]}])
    run = simulate(sc, "drf", SimOptions(seed=0))
    assert run.all_finished
    assert run.jobs["A"].tasks_completed == 30


# --- devices: fractional and whole GPUs --------------------------------------------------------

def device_pool(gpus: int) -> NodePool:
    # resources (cpu, gpu); gpu (index 1) counted in devices
    return NodePool([Node("n", (64.0, float(gpus)))], 2, devices=(1,))


# (case, GPUs on the node, gpu demands placed in order, expected device numbers per task, None = no fit)
DEVICE_CASES = [
    # 0.6 + 0.6 = 1.2 cannot share one device: one each; a third 0.6 fits nowhere although
    # 0.4 + 0.4 = 0.8 >= 0.6 is free in total
    ("fractions do not straddle devices", 2, [0.6, 0.6, 0.6], [(0,), (1,), None]),
    # best fit: the second 0.5 joins the first on device 0 (0.5 free, the least that holds
    # it), which leaves device 1 entirely free for a whole GPU
    ("fractions pack, whole device stays free", 2, [0.5, 0.5, 1], [(0,), (0,), (1,)]),
    # 0.3 on device 0 leaves 0.7 there; 2 whole GPUs take devices 1 and 2; then 1 whole GPU
    # fits nowhere (1 - 0.3 = 0.7 free in total is not a free device)
    ("whole devices must be entirely free", 3, [0.3, 2, 1], [(0,), (1, 2), None]),
    # ten tenths fill device 0 exactly (float noise tolerated), the eleventh goes to device 1
    ("ten tenths fill one device", 2, [0.1] * 11, [(0,)] * 10 + [(1,)]),
]


@pytest.mark.parametrize("case, gpus, demands, expected", DEVICE_CASES, ids=[c[0] for c in DEVICE_CASES])
def test_device_placement(case, gpus, demands, expected):
    pool = device_pool(gpus)
    got = []
    for d in demands:
        demand = (1.0, float(d))
        node = pool.place(demand)
        if node is None:
            got.append(None)
            continue
        held = pool.take(node, demand)
        got.append(dict(held)[1])
    assert got == expected


def test_released_fractions_free_the_whole_device_again():
    pool = device_pool(1)
    tenth = (0.0, 0.1)
    held = [pool.take(0, tenth) for _ in range(10)]  # device 0 full, 10 x 0.1
    assert pool.place((0.0, 1.0)) is None
    for h in held:
        pool.give_back(0, tenth, h)
    assert pool.states[0].device_free == [[1.0]]  # snapped back to exactly 1, not 0.9999999999999999
    assert pool.place((0.0, 1.0)) == 0


def test_scheduler_reports_devices_and_frees_them_on_finish():
    sc = gpu_cluster([gpu_node("g", "T4", 2)], [
        {"name": "frac", "tasks": [{"demand": {"cpu": 1, "gpu": 0.5}, "count": 2}]},
        {"name": "whole", "tasks": [{"demand": {"cpu": 1, "gpu": 1}, "count": 2}]}])
    sched = scheduler(sc, "fifo")
    for job in sc.jobs:
        sched.submit(job, 0.0)
    first = sched.schedule(0.0)
    # fifo: frac's two halves share device 0, whole's first task takes device 1, its second waits
    assert [(launch.job, launch.devices) for launch in first] == [
        ("frac", (("gpu", (0,)),)), ("frac", (("gpu", (0,)),)), ("whole", (("gpu", (1,)),))]
    for launch in first[:2]:
        sched.finish(launch.task_id, 1.0)
    second = sched.schedule(1.0)
    assert [(launch.job, launch.devices) for launch in second] == [("whole", (("gpu", (0,)),))]


def test_without_devices_fractions_pool_on_the_node():
    # the same cluster without `devices`: gpu is an ordinary divisible resource, so
    # 0.6 + 0.6 + 0.6 = 1.8 <= 2 all fit on the one node
    sc = gpu_cluster([gpu_node("g", "T4", 2)], [{"name": "A", "tasks": [{"demand": {"cpu": 1, "gpu": 0.6},
                                                                          "count": 3}]}], devices=False)
    assert launches_by_node(scheduler(sc), sc.jobs)["A"] == Counter({"g": 3})
    sc = gpu_cluster([gpu_node("g", "T4", 2)], [{"name": "A", "tasks": [{"demand": {"cpu": 1, "gpu": 0.6},
                                                                          "count": 3}]}])
    assert launches_by_node(scheduler(sc), sc.jobs)["A"] == Counter({"g": 2})  # one 0.6 per device


# --- max_per_node ------------------------------------------------------------------------------

@pytest.mark.parametrize("placement, expected", [
    # first fit fills n-0 up to the limit 2, then n-1, then n-2: 2 + 2 + 1 = 5 tasks
    ("first-fit", {"n-0": 2, "n-1": 2, "n-2": 1}),
    # best fit prefers the fullest node, so the same order: the limit is what moves it on
    ("best-fit", {"n-0": 2, "n-1": 2, "n-2": 1}),
])
def test_max_per_node_spreads_a_jobs_tasks(placement, expected):
    sc = gpu_cluster([gpu_node("n", "T4", 8, count=3)],
                     [{"name": "A", "tasks": [{"demand": {"cpu": 1, "gpu": 1}, "count": 5, "max_per_node": 2}]}])
    assert launches_by_node(scheduler(sc, placement=placement), sc.jobs)["A"] == Counter(expected)


def test_max_per_node_limits_running_tasks_and_frees_on_finish():
    # one node, limit 1: the job runs one task at a time, 3 tasks of 10 s end at 30 s
    sc = gpu_cluster([gpu_node("n", "T4", 8)],
                     [{"name": "A", "tasks": [{"demand": {"cpu": 1, "gpu": 1}, "count": 3, "duration": 10,
                                               "max_per_node": 1}]},
                      {"name": "B", "tasks": [{"demand": {"cpu": 1, "gpu": 1}, "count": 3, "duration": 10}]}])
    log = replay(scheduler(sc), sc.jobs, lambda launch: 10.0)
    assert [t for t, job, _c, _n in log if job == "A"] == [0.0, 10.0, 20.0]
    assert [t for t, job, _c, _n in log if job == "B"] == [0.0, 0.0, 0.0]  # B has no limit


def test_max_per_node_is_per_job():
    # two jobs with the same class shape and limit 1 on 2 nodes: each gets one task per node
    task = {"demand": {"cpu": 1, "gpu": 1}, "count": 4, "max_per_node": 1}
    sc = gpu_cluster([gpu_node("n", "T4", 8, count=2)], [{"name": "A", "tasks": [task]},
                                                        {"name": "B", "tasks": [task]}])
    placed = launches_by_node(scheduler(sc), sc.jobs)
    assert placed == {"A": Counter({"n-0": 1, "n-1": 1}), "B": Counter({"n-0": 1, "n-1": 1})}


# --- constrained fairness ------------------------------------------------------------------------

# Node order: 2 T4 nodes (4 GPUs each) first, then 1 V100 node (4 GPUs): T = 12 GPUs in all.
# A is constrained to V100 (E = 4 GPUs eligible), B is not; both want one GPU per task, forever.
# Constrained DRF equalises a / E = b / T with a + b = T (every GPU used), so
#   a = T E / (T + E) = 12 * 4 / 16 = 3,  b = 12 - 3 = 9,  shares 3/4 = 9/12 = 0.75.
# Plain DRF equalises a / T = b / T: A takes a GPU on every second decision until the V100
# node is full (a = 4, b = 4 on the T4s), then B takes the other 4 T4 GPUs: a = 4, b = 8.
FAIR_NODES = [gpu_node("t4", "T4", 4, count=2), gpu_node("v100", "V100", 4)]
FAIR_JOBS = [{"name": "A", "tasks": [{"demand": {"gpu": 1}, "constraints": {"gpu_model": "V100"}}]},
             {"name": "B", "tasks": [{"demand": {"gpu": 1}}]}]


@pytest.mark.parametrize("policy, a, b", [
    ("drf", 3, 9),     # a / 4 = b / 12 = 0.75
    ("hdrf", 3, 9),    # no queues: H-DRF is DRF
    ("fifo", 4, 8),    # not a capacity share: A (first) takes all 4 V100 GPUs, B the T4s
])
def test_constrained_job_competes_for_its_eligible_capacity(policy, a, b):
    sc = gpu_cluster(FAIR_NODES, FAIR_JOBS, devices=False)
    sched = scheduler(sc, policy)
    for job in sc.jobs:
        sched.submit(job, 0.0)
    placed = launches_by_node(sched)
    assert sum(placed["A"].values()) == a
    assert sum(placed["B"].values()) == b
    assert set(placed["A"]) == {"v100"}
    # Scheduler.usage is the real allocation; the sorter holds A's usage scaled by
    # T / E = 12 / 4 = 3, so the sorter's U' / T is A's share of its eligible GPUs
    assert sched.usage("A") == (0.0, float(a))
    expected_sorter = float(a) * 3.0 if policy in ("drf", "hdrf") else float(a)
    assert sched.sorter.jobs["A"].usage == pytest.approx([0.0, expected_sorter], rel=1e-12)


def test_plain_reading_for_comparison():
    # the engine switch off (usage reported as is): plain DRF, a = 4, b = 8 (see FAIR_NODES)
    sc = gpu_cluster(FAIR_NODES, FAIR_JOBS, devices=False)
    sched = scheduler(sc)
    sched.normalize_constrained = False
    for job in sc.jobs:
        sched.submit(job, 0.0)
    placed = launches_by_node(sched)
    assert (sum(placed["A"].values()), sum(placed["B"].values())) == (4, 8)


def test_unconstrained_job_is_reported_as_is():
    # factor 1 exactly: the sorter receives the very demand tuple, no multiplication
    sc = gpu_cluster(FAIR_NODES, [{"name": "B", "tasks": [{"demand": {"cpu": 0.1, "gpu": 0.7}, "count": 9}]}],
                     devices=False)
    sched = scheduler(sc)
    sched.submit(sc.jobs[0], 0.0)
    rt = sched.jobs["B"]
    assert rt.factor is None and rt.reported[0] is sc.jobs[0].classes[0].demand
    assert len(sched.schedule(0.0)) == 9
    # the sorter adds the demand 9 times, as it always did (bit for bit, no factor)
    expected = [0.0, 0.0]
    for _ in range(9):
        expected = [u + d for u, d in zip(expected, (0.1, 0.7))]
    assert sched.sorter.jobs["B"].usage == expected


def test_constraint_matching_every_node_is_factor_one():
    nodes = [gpu_node("v", "V100", 4, count=3)]
    sc = gpu_cluster(nodes, [{"name": "A", "tasks": [{"demand": {"gpu": 1}, "constraints": {"gpu_model": "V100"}}]}],
                     devices=False)
    sched = scheduler(sc)
    sched.submit(sc.jobs[0], 0.0)
    assert sched.jobs["A"].factor is None


def test_eligible_capacity_follows_node_changes():
    sc = gpu_cluster(FAIR_NODES, FAIR_JOBS, devices=False)
    sched = scheduler(sc)
    for job in sc.jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)  # a = 3 on the V100 node, b = 9
    # every node has 32 cpu and 4 gpu, so both factors are T / E = 3 nodes / 1 node = 3
    assert sched.jobs["A"].factor == (3.0, 3.0)
    # a T4 node dies: T = 8, E = 4, factor 2; A keeps its 3 tasks, reported 3 * 2 = 6
    sched.lose_node("t4-0", 1.0)
    assert sched.jobs["A"].factor == (2.0, 2.0)
    assert sched.sorter.jobs["A"].usage == [0.0, 6.0]
    assert sched.sorter.jobs["A"].running == 3
    # a second V100 node (4 gpu, no cpu) joins: gpu T = 12, E = 8, factor 1.5, reported
    # 3 * 1.5 = 4.5; cpu unchanged, T = 64, E = 32, factor 2
    sched.add_node(Node("v100-b", (0.0, 4.0), "v100-b", (("gpu_model", "V100"),)), 2.0)
    assert sched.jobs["A"].factor == (2.0, 1.5)
    assert sched.sorter.jobs["A"].usage == [0.0, 4.5]
    assert sched.usage("A") == (0.0, 3.0)  # the real usage never moves


def test_timefair_keeps_real_usage():
    # timefair reads sorter usage as used capacity (packing), so it is never normalized
    sc = gpu_cluster(FAIR_NODES, FAIR_JOBS, devices=False)
    sched = scheduler(sc, "timefair")
    for job in sc.jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)
    assert sched.jobs["A"].factor is None
    assert sched.sorter.jobs["A"].usage == list(sched.usage("A"))


def test_simulation_outputs_stay_real_for_constrained_jobs():
    # every timeline row of a job: allocation = running tasks x demand (gpu 1), although the
    # sorter holds A's usage scaled by 3
    jobs = [{"name": "A", "tasks": [{"demand": {"gpu": 1}, "count": 12, "duration": 3,
                                     "constraints": {"gpu_model": "V100"}}]},
            {"name": "B", "tasks": [{"demand": {"gpu": 1}, "count": 30, "duration": 2}]}]
    run = simulate(gpu_cluster(FAIR_NODES, jobs, devices=False), "drf", SimOptions(seed=0))
    job_rows = [row for row in run.rows if row[1] == "job"]
    assert job_rows
    for _t, _kind, _name, running, share, alloc in job_rows:
        assert alloc == (0.0, float(running))
        assert share == pytest.approx(running / 12)  # the reported share is the plain one
    cluster_rows = [row for row in run.rows if row[1] == "cluster"]
    assert max(row[5][1] for row in cluster_rows) <= 12.0


# --- validation ------------------------------------------------------------------------------

BAD = [
    ("fractional device demand above 1",
     {"cluster": {"devices": ["gpu"], "nodes": [{"capacity": {"gpu": 4}}]},
      "jobs": [{"tasks": [{"demand": {"gpu": 0.5}}]}, {"tasks": [{"demand": {"gpu": 1.5}}]}]},
     ["jobs[1].tasks[0].demand.gpu"]),
    ("node with a fraction of a device",
     {"cluster": {"devices": ["gpu"], "nodes": [{"capacity": {"gpu": 2.5}}]},
      "jobs": [{"tasks": [{"demand": {"gpu": 1}}]}]},
     ["cluster.nodes[0].capacity.gpu"]),
    ("unknown device resource",
     {"cluster": {"devices": ["gpu", "tpu"], "nodes": [{"capacity": {"gpu": 2}}]},
      "jobs": [{"tasks": [{"demand": {"gpu": 1}}]}]},
     ["cluster.devices[1]"]),
    ("devices not a list",
     {"cluster": {"devices": "gpu", "nodes": [{"capacity": {"gpu": 2}}]},
      "jobs": [{"tasks": [{"demand": {"gpu": 1}}]}]},
     ["cluster.devices"]),
    ("added node with a fraction of a device",
     {"cluster": {"devices": ["gpu"], "nodes": [{"name": "a", "capacity": {"gpu": 2}}]},
      "jobs": [{"tasks": [{"demand": {"gpu": 1}}]}],
      "events": [{"time": 1, "node_add": {"name": "b", "capacity": {"gpu": 0.5}}}]},
     ["events[0].node_add.capacity.gpu"]),
    ("max_per_node zero",
     {"cluster": {"capacity": {"cpu": 4}}, "jobs": [{"tasks": [{"demand": {"cpu": 1}, "max_per_node": 0}]}]},
     ["jobs[0].tasks[0].max_per_node"]),
    ("max_per_node a fraction",
     {"cluster": {"capacity": {"cpu": 4}}, "jobs": [{"tasks": [{"demand": {"cpu": 1}, "max_per_node": 1.5}]}]},
     ["jobs[0].tasks[0].max_per_node"]),
    ("max_per_node a string",
     {"cluster": {"capacity": {"cpu": 4}}, "jobs": [{"tasks": [{"demand": {"cpu": 1}, "max_per_node": "two"}]}]},
     ["jobs[0].tasks[0].max_per_node"]),
]


@pytest.mark.parametrize("case, data, paths", BAD, ids=[c[0] for c in BAD])
def test_bad_device_and_limit_fields_name_their_path(case, data, paths):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data, "<test>")
    assert sorted(e.path for e in err.value.errors) == sorted(paths)


def test_cli_rejects_a_bad_device_demand_with_status_2(tmp_path: Path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("cluster:\n  devices: [gpu]\n  nodes: [{capacity: {cpu: 8, gpu: 4}}]\n"
                    "jobs:\n  - {tasks: [{demand: {cpu: 1}}]}\n  - {tasks: [{demand: {cpu: 1}}]}\n"
                    "  - {tasks: [{demand: {cpu: 1, gpu: 1.5}}]}\n")
    status = main(["simulate", str(path), "--policy", "drf", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2
    assert "jobs[2].tasks[0].demand.gpu: 1.5 is neither a fraction of one device (< 1) nor a whole number" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_the_usage_docs_example_runs_as_described():
    # docs/usage.md "Devices, constraints and per-node limits": its YAML must load and run
    import yaml

    text = (Path(__file__).resolve().parents[1] / "docs" / "usage.md").read_text(encoding="utf-8")
    section = text.split("### Devices, constraints and per-node limits", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    sc = parse_scenario(yaml.safe_load(block), "docs/usage.md")
    assert sc.cluster.devices == (sc.resources.index("gpu"),)
    sched = scheduler(sc)
    placed = launches_by_node(sched, sc.jobs)
    assert set(placed["train"]) <= {"v100-0", "v100-1"}          # constraints: {gpu_model: V100}
    assert max(placed["serving"].values()) <= 2                   # max_per_node: 2
    # 20 notebooks of 0.47 GPU: two share a GPU (0.94 <= 1), so they fill 10 devices
    devices_used = {(launch_node, dev) for launch_node, dev in notebook_devices(sched)}
    assert len(devices_used) == 10


def notebook_devices(sched: Scheduler):
    for task in sched.tasks.values():
        if task.job == "notebook":
            for _r, devs in task.devices:
                yield task.node_index, devs[0]


def test_a_node_back_with_other_attributes_changes_where_constrained_tasks_go():
    # v100-0 fails and comes back labelled T4: the V100-only job may no longer use it
    sc = gpu_cluster([gpu_node("v100", "V100", 4, count=2)],
                     [{"name": "A", "tasks": [{"demand": {"gpu": 1}, "count": 8,
                                               "constraints": {"gpu_model": "V100"}}]}], devices=False)
    sched = scheduler(sc)
    sched.submit(sc.jobs[0], 0.0)
    sched.schedule(0.0)
    assert {t.node_index for t in sched.tasks.values()} == {0, 1}
    lost = sched.lose_node("v100-0", 1.0)
    assert len(lost) == 4
    sched.add_node(Node("v100-0", (0.0, 4.0), "v100", (("gpu_model", "T4"),)), 2.0)
    assert sched.schedule(2.0) == []  # the 4 lost tasks wait: no V100 has room


# --- placement memos: the same decisions as a fresh search every time ------------------------

class FreshSearchScheduler(Scheduler):
    """Asks the index afresh for every placement: the ground truth for the memos."""

    def _locate(self, key, demand, constraints, allowed, fit):
        return self.pool.place(demand, constraints, allowed)


def random_gpu_scenario(seed: int):
    import random

    rng = random.Random(seed)
    models = ["T4", "V100", "A10"]
    nodes = [{"name": f"n{i}", "capacity": {"cpu": rng.choice([4, 8, 16]), "gpu": rng.choice([1, 2, 4])},
              "attributes": {"gpu_model": rng.choice(models)}} for i in range(12)]
    jobs = []
    for i in range(10):
        task: dict = {"demand": {"cpu": rng.choice([0.5, 1, 2, 3]), "gpu": rng.choice([0, 0.3, 0.5, 0.8, 1, 2])},
                      "count": rng.randint(3, 30), "duration": 1}
        if rng.random() < 0.4:
            task["constraints"] = {"gpu_model": rng.sample(models, rng.choice([1, 2]))}
        if rng.random() < 0.3:
            task["max_per_node"] = rng.choice([1, 2])
        jobs.append({"name": f"j{i}", "submit": rng.choice([0, 0, 1, 3]), "tasks": [task]})
    events = [{"time": 2, "node_fail": "n3"}, {"time": 5, "node_add": {"name": "n3"}}]
    return gpu_cluster(nodes, jobs, events=events)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("placement", ["first-fit", "best-fit"])
def test_placement_memos_decide_as_a_fresh_search(seed, placement):
    sc = random_gpu_scenario(seed)
    lengths = {j.name: 1.0 + (k % 3) for k, j in enumerate(sc.jobs)}
    node_events = [(2.0, "lose", "n3"), (5.0, "add", sc.cluster.nodes[3])]
    logs = []
    for cls in (Scheduler, FreshSearchScheduler):
        sched = cls(sc.resources, sc.cluster.nodes, sc.queues, make_policy("drf"), devices=sc.cluster.devices,
                    placement=placement)
        logs.append(replay(sched, sc.jobs, lambda launch: lengths[launch.job], node_events=node_events))
    assert logs[0] == logs[1]
    assert len(logs[0]) >= sum(c.count for j in sc.jobs for c in j.classes) // 2  # the runs did work
