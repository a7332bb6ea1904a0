"""The conformance checks' workloads: small scenarios built from plain dicts.

``scenario(capacity, jobs, queues, nodes)`` goes through the loader (``parse_scenario``),
so every workload is one a scenario file could hold; ``job(...)`` and ``q(...)`` build its
entries. The paper examples (``drf_41``, ``fig4``) take ``k``, the number of tasks each of
the paper's tasks is split into (demand / k): the static answer is ``build(1)``'s, the
online run's tiny tasks ``build(k)``'s. The random workloads feed the online checks'
driver (``conformance.driver``): heterogeneous nodes, a two-level queue tree, a node lost
and two added, a job cancelled. The tests build their scenarios with the same functions
(``tests/builders.py``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from fairshare.model import Node, parse_scenario
from fairshare.model.queues import QueueTree
from fairshare.model.scenario import Scenario


# --- builders --------------------------------------------------------------------------------

def q(name: str, weight: float = 1, *children: dict, order: str | None = None) -> dict:
    """A queue entry with its children."""
    d: dict = {"name": name, "weight": weight}
    if children:
        d["children"] = list(children)
    if order:
        d["order"] = order
    return d


def job(name: str, demand: dict, queue: str | None = None, *, weight: float = 1, count: int | None = None,
        classes: list[dict] | None = None, submit: float = 0) -> dict:
    """A job entry: one task class of ``demand`` (``count`` tasks; None: unbounded), or the
    given ``classes``."""
    d: dict = {"name": name, "weight": weight, "submit": submit}
    if queue:
        d["queue"] = queue
    if classes is not None:
        d["tasks"] = classes
    else:
        task: dict = {"demand": demand}
        if count is not None:
            task["count"] = count
        d["tasks"] = [task]
    return d


def scenario(capacity: dict | None = None, jobs: list[dict] = (), queues: list[dict] | None = None,
             nodes: list[dict] | None = None) -> Scenario:
    """A scenario on one pooled ``capacity`` or on ``nodes`` entries, through the loader."""
    data: dict = {"cluster": {"capacity": capacity} if nodes is None else {"nodes": nodes}, "jobs": list(jobs)}
    if queues:
        data["queues"] = queues
    return parse_scenario(data, "<test>")


def scaled(demand: dict, k: int) -> dict:
    return {r: v / k for r, v in demand.items()}


# --- the paper examples ----------------------------------------------------------------------

def drf_41(k: int) -> Scenario:
    """DRF Sec. 4.1: <9 CPU, 18 GB>, A <1, 4>, B <3, 1>; both at 2/3 (x = 3 A-tasks,
    y = 2 B-tasks: x + 3y = 9, 4x + y = 18, 4x/18 = 3y/9)."""
    return scenario(capacity={"cpu": 9, "mem": 18},
                    jobs=[job("A", scaled({"cpu": 1, "mem": 4}, k)), job("B", scaled({"cpu": 3, "mem": 1}, k))])


def fig4(k: int) -> Scenario:
    """H-DRF Fig. 4: 10 CPUs, 10 GPUs; n1 -> n1,1 <1, 0>; n2 -> n2,1 <1, 0>, n2,2 <0, 1>."""
    return scenario(capacity={"cpu": 10, "gpu": 10}, queues=[q("n1"), q("n2")],
                    jobs=[job("n11", scaled({"cpu": 1}, k), "n1"), job("n21", scaled({"cpu": 1}, k), "n2"),
                          job("n22", scaled({"gpu": 1}, k), "n2")])


#: the paper examples whose divisible allocation the tiny tasks must reach
#: (``online.check_tiny_tasks_reach_the_static_allocation``). At k = 16: DRF Sec. 4.1's
#: largest task share is max(3/16 / 9, 4/16 / 18) = 1/48, so jobs are held to
#: (2 + 1) / 48 = 0.0625 of their static dominant share; Fig. 4's is 1/16 / 10 = 1/160,
#: bound (3 + 1) / 160 = 0.025.
PAPER_EXAMPLES = {"DRF Sec. 4.1": drf_41, "H-DRF Fig. 4": fig4}


# --- the static checks' scenarios ------------------------------------------------------------

def mixed_scenario() -> Scenario:
    """Hierarchy with an empty queue, a FIFO queue, zero demands, a multiclass job and
    heterogeneous nodes: the shapes every policy must cope with."""
    return scenario(
        nodes=[{"name": "cpu", "count": 2, "capacity": {"cpu": 16, "mem": 64}},
               {"name": "gpu", "count": 1, "capacity": {"cpu": 16, "mem": 64, "gpu": 4}}],
        queues=[q("prod", 2, q("web"), q("batch", 1, order="fifo")), q("dev"), q("empty")],
        jobs=[job("web1", {"cpu": 2, "mem": 4}, "prod.web"),
              job("etl1", {"cpu": 1, "mem": 8}, "prod.batch", submit=0),
              job("etl2", {"cpu": 4, "mem": 2}, "prod.batch", submit=10),
              job("train", {}, "dev", classes=[{"class": "gpu", "demand": {"cpu": 1, "gpu": 1}, "count": 10},
                                               {"class": "prep", "demand": {"cpu": 2, "mem": 2}, "count": 30}]),
              job("notebook", {"mem": 3}, "dev", weight=2),
              job("root_job", {"cpu": 1, "mem": 1})])


# --- the online checks' workloads ------------------------------------------------------------

@dataclass(frozen=True)
class Workload:
    """What the driver feeds an Engine: a scenario (resources, nodes, queues, jobs), node
    losses and additions ``(time, "lose" | "add", name | Node)``, job cancellations
    ``(time, job)``, the seed of the task durations (drawn in launch order), and
    optionally nodes to use instead of the scenario's (ones the loader would refuse)."""

    scenario: Scenario
    node_events: tuple[tuple[float, str, object], ...] = ()
    cancels: tuple[tuple[float, str], ...] = ()
    seed: int = 0
    until: float = 1e9
    nodes: tuple[Node, ...] | None = None


def random_workload(seed: int) -> Workload:
    """Several heterogeneous nodes, a two-level queue tree, multi-resource demands, jobs
    arriving over 0-20 s with bounded counts, one node lost and two added (one of them the
    lost node coming back), one job cancelled. Nodes are small (4-16 CPUs) against tasks of
    1-4 CPUs so that slot scheduling (4 slots a node) oversubscribes them."""
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "count": 1,
              "capacity": {"cpu": rng.choice([4, 8, 16]), "mem": rng.choice([8, 16, 32]),
                           "gpu": rng.choice([0, 2, 4])}} for i in range(4)]
    # every task fits on some node at the start (the infeasible case is its own check)
    nodes[0]["capacity"] = {"cpu": 16, "mem": 32, "gpu": 4}
    queues = [q("prod", 3, q("web", 1), q("batch", 2)), q("dev", 1)]
    leaves = ["prod.web", "prod.batch", "dev", ""]
    jobs = []
    for i in range(8):
        demand = {"cpu": rng.randint(1, 4), "mem": rng.randint(1, 8)}
        if rng.random() < 0.3:
            demand["gpu"] = 1
        jobs.append(job(f"j{i}", demand, rng.choice(leaves), weight=rng.choice([1, 1, 2, 3]),
                        count=rng.randint(3, 12), submit=float(rng.randint(0, 20))))
    # the job cancelled at 9 s: there from the start, with more tasks than it can run by then
    jobs[0]["submit"] = 0.0
    jobs[0]["tasks"][0]["count"] = 60
    sc = scenario(nodes=nodes, queues=queues, jobs=jobs)
    comeback = Node("n9", (8.0, 16.0, 2.0))
    events = ((7.0, "lose", "n1"), (12.0, "add", comeback),
              (15.0, "add", next(n for n in sc.cluster.nodes if n.name == "n1")))
    return Workload(sc, node_events=events, cancels=((9.0, "j0"),), seed=seed)


def gang_workload(seed: int) -> Workload:
    """Gangs among small jobs: six nodes on three racks (attribute ``rack``), a gang on
    one node (``pack: node``), one on one rack, one anywhere with two task classes, and
    small jobs that fill the gaps; every node lost in turn for 1.5 s, from 3 s every
    2.5 s (the tasks of a gang on a lost node make the rest of the gang stop), a small
    job cancelled at 9 s."""
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "count": 1, "attributes": {"rack": f"r{i // 2}"},
              "capacity": {"cpu": rng.choice([8, 16]), "mem": rng.choice([16, 32])}} for i in range(6)]
    queues = [q("train", 2), q("batch", 1)]
    jobs = []
    for i in range(4):
        jobs.append(job(f"s{i}", {"cpu": rng.randint(1, 3), "mem": rng.randint(1, 4)}, rng.choice(["train", "batch"]),
                        count=rng.randint(6, 20), submit=float(rng.randint(0, 10))))
    packs = [("node", rng.randint(2, 4), 2), ({"attribute": "rack"}, rng.randint(3, 5), 3), (None, 0, 2)]
    for i, (pack, count, cpu) in enumerate(packs):
        gang = job(f"g{i}", {"cpu": cpu, "mem": 2}, rng.choice(["train", "batch"]), count=count or None,
                   submit=float(rng.randint(0, 12)),
                   classes=None if count else [{"class": "worker", "demand": {"cpu": 2, "mem": 2}, "count": 4},
                                               {"class": "ps", "demand": {"cpu": 1, "mem": 4}, "count": 2}])
        gang["gang"] = True
        if pack is not None:
            gang["pack"] = pack
        jobs.append(gang)
    sc = scenario(nodes=nodes, queues=queues, jobs=jobs)
    events = []
    for k, node in enumerate(sc.cluster.nodes):  # (one node down at a time, every node once)
        events += [(3.0 + 2.5 * k, "lose", node.name), (4.5 + 2.5 * k, "add", node)]
    return Workload(sc, node_events=tuple(events), cancels=((9.0, "s0"),), seed=seed)


def gang_preemption_workload(seed: int) -> Workload:
    """Fair-share preemption among gangs (``preemption: {after: 2}``): two nodes of 8 cpus;
    at 0 s a gang of queue ``a`` takes 12 of the 16 cpus (more than a fair share, so it
    is a victim, whole); from 1 s a stream of 1-cpu tasks in ``b`` starves; at 6-8 s a
    small gang arrives in ``c`` and must take its room back (whole, ``pack: node`` in
    odd seeds), and a second gang of ``a`` is queued behind. Sizes vary with the seed."""
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "count": 1, "attributes": {"rack": f"r{i}"}, "capacity": {"cpu": 8, "mem": 32}}
             for i in range(2)]
    big = job("g_big", {"cpu": 3, "mem": 2}, "a", count=4)
    small = job("g_small", {"cpu": 2, "mem": 1}, "c", count=rng.choice([2, 3]), submit=float(rng.randint(6, 8)))
    later = job("g_later", {"cpu": 2, "mem": 2}, "a", count=2, submit=3.0)
    for gang in (big, small, later):
        gang["gang"] = True
    if seed % 2:
        small["pack"] = "node"
    stream = job("stream", {"cpu": 1, "mem": rng.choice([1, 2])}, "b", submit=1.0)
    data = {"cluster": {"nodes": nodes}, "queues": [q("a"), q("b"), q("c")], "jobs": [big, stream, later, small],
            "preemption": {"after": 2, "tolerance": 0.02, "max_per_round": 8}}
    return Workload(parse_scenario(data, "<gang preemption>"), seed=seed, until=40.0)


def priority_workload(seed: int) -> Workload:
    """Jobs of priorities -1 to 3 in two queues, all of one task shape on nodes without
    constraints (so a job that launches could as well have launched any other of its
    queue: the order within a queue is the only thing that decides), arriving over 0-10 s;
    a node lost at 6 s and back at 12 s, a job cancelled at 8 s."""
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "count": 1, "capacity": {"cpu": 8, "mem": 16}} for i in range(3)]
    jobs = []
    for i in range(10):
        entry = job(f"p{i}", {"cpu": 2, "mem": 4}, rng.choice(["a", "b"]), count=rng.randint(2, 8),
                    submit=float(rng.randint(0, 10)))
        entry["priority"] = rng.randint(-1, 3)
        jobs.append(entry)
    sc = scenario(nodes=nodes, queues=[q("a", 1), q("b", 2, order="fifo")], jobs=jobs)
    return Workload(sc, node_events=((6.0, "lose", "n1"), (12.0, "add", sc.cluster.nodes[1])),
                    cancels=((8.0, "p0"),), seed=seed)


def bounded_workload(seed: int) -> Workload:
    """``random_workload`` with limits on two queues and a guarantee on a third (the
    guarantee within the cluster's smallest possible CPU count, 16)."""
    base = random_workload(seed)
    rng = random.Random(seed + 1000)
    bounds = {"prod.web": ({}, {"cpu": float(rng.randint(2, 6))}),
              "dev": ({}, {"mem": float(rng.randint(4, 12))}),
              "prod.batch": ({"cpu": float(rng.randint(2, 8))}, {})}
    entries = [(node.path, node.weight, node.order) for node in base.scenario.queues if node.path]
    tree = QueueTree.build(entries, "fair", bounds)
    return replace(base, scenario=replace(base.scenario, queues=tree))


def sim_scenario() -> Scenario:
    """A small scenario for the simulator: exponential durations (so the seed matters),
    two nodes, a node failure and its return."""
    data_jobs = []
    for i, (demand, queue) in enumerate([({"cpu": 2, "mem": 4}, "a"), ({"cpu": 1, "mem": 1}, "a"),
                                         ({"cpu": 3, "mem": 2}, "b"), ({"cpu": 1, "mem": 6}, "")]):
        jb = job(f"s{i}", demand, queue, weight=1 + i % 2, count=6, submit=float(i))
        jb["tasks"][0]["duration"] = {"dist": "exponential", "mean": 3.0}
        data_jobs.append(jb)
    return parse_scenario({"cluster": {"nodes": [{"name": "m", "count": 2, "capacity": {"cpu": 8, "mem": 16}}]},
                           "queues": [q("a", 2), q("b", 1)], "jobs": data_jobs,
                           "events": [{"time": 4, "node_fail": "m-1"},
                                      {"time": 9, "node_add": {"name": "m-1", "capacity": {"cpu": 8, "mem": 16}}}]},
                          "<conformance>")
