"""Queue guarantees and limits online (``engine/bounds.py``), for every online policy:
a limit is never exceeded at any instant, and a guaranteed queue is served first."""

from __future__ import annotations

import random

import pytest
from replay import replay

from fairshare.engine import Scheduler
from fairshare.engine.bounds import QueueBounds
from fairshare.model import parse_scenario
from fairshare.model.queues import ROOT
from fairshare.policies import REGISTRY, PolicyModeError, make_policy


def online_policies() -> list[str]:
    """Every registered policy with an online mode (the rest raise PolicyModeError)."""
    names = []
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 1}}, "jobs": []}, "<probe>")
    for name in REGISTRY:
        try:
            make_policy(name).online(sc.resources, sc.queues, sc.capacity)
        except PolicyModeError:
            continue
        names.append(name)
    return names


ONLINE = online_policies()


def test_the_online_policies_are_found():
    # (the list the tests below run over; a policy that gains an online mode joins it)
    assert {"drf", "hdrf", "dff", "fifo", "timefair", "slots"} <= set(ONLINE)


def random_bounded_workload(seed: int) -> dict:
    rng = random.Random(seed)
    nodes = [{"name": f"n{i}", "capacity": {"cpu": rng.choice([4, 8]), "mem": rng.choice([8, 16])}}
             for i in range(rng.randint(1, 4))]
    total_cpu = sum(n["capacity"]["cpu"] for n in nodes)
    queues, jobs = [], []
    for i in range(rng.randint(2, 4)):
        entry: dict = {"name": f"q{i}", "weight": rng.choice([1, 2])}
        if rng.random() < 0.6:
            entry["limit"] = {rng.choice(["cpu", "mem"]): float(rng.randint(1, 10))}
        queues.append(entry)
        for k in range(rng.randint(1, 2)):
            jobs.append({"name": f"j{i}{k}", "queue": f"q{i}", "submit": rng.choice([0, 0, 2, 5]),
                         "tasks": [{"demand": {"cpu": rng.choice([0.5, 1, 2]), "mem": rng.choice([0, 1, 2])},
                                    "count": rng.randint(3, 25)}]})
    guaranteed = rng.randrange(len(queues))
    if "limit" not in queues[guaranteed]:
        queues[guaranteed]["guarantee"] = {"cpu": float(rng.randint(1, max(1, total_cpu // 2)))}
    return {"resources": ["cpu", "mem"], "cluster": {"nodes": nodes}, "queues": queues, "jobs": jobs}


@pytest.mark.parametrize("policy", ONLINE)
@pytest.mark.parametrize("seed", range(12))
def test_limits_hold_at_every_instant(policy, seed):
    sc = parse_scenario(random_bounded_workload(seed), "<random>")
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
    rng = random.Random(seed)
    lengths = {j.name: rng.choice([1, 2, 3]) for j in sc.jobs}
    limits = {q.path: q.limit_vector(sc.resources) for q in sc.queues if q.path and q.limit}
    queue_of = {j.name: j.queue for j in sc.jobs}
    checked = []

    def observe(now: float) -> None:
        used = {path: [0.0] * sc.m for path in limits}
        for task in sched.tasks.values():
            for path in sc.queues.ancestors(queue_of[task.job]):
                if path in used:
                    for r, d in enumerate(task.demand):
                        used[path][r] += d
        for path, lim in limits.items():
            for r in range(sc.m):
                assert used[path][r] <= lim[r] + 1e-9, (policy, now, path, sc.resources[r], used[path][r], lim[r])
        checked.append(now)

    replay(sched, sc.jobs, lambda launch: lengths[launch.job], observe=observe)
    assert checked  # the check ran at every instant of the run


@pytest.mark.parametrize("policy", ONLINE)
def test_a_late_guaranteed_queue_is_served_first(policy):
    # 8 one-cpu slots, tasks of 10 s. b fills all 8 at t=0; a (guaranteed 6 cpu) arrives at
    # t=1. At t=10 b's 8 tasks end together: a is owed 6 and takes 6 first, then the
    # policy's order places the last 2 (a and b tie or b: either way a holds >= 6).
    data = {"resources": ["cpu"], "cluster": {"nodes": [{"name": "n", "count": 2, "capacity": {"cpu": 4}}]},
            "queues": [{"name": "a", "guarantee": {"cpu": 6}}, {"name": "b"}],
            "jobs": [{"name": "late", "queue": "a", "submit": 1, "tasks": [{"demand": {"cpu": 1}, "count": 100}]},
                     {"name": "early", "queue": "b", "tasks": [{"demand": {"cpu": 1}, "count": 100}]}]}
    sc = parse_scenario(data, "<late>")
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
    held: dict[float, int] = {}

    def observe(now: float) -> None:
        held[now] = sum(1 for t in sched.tasks.values() if t.job == "late")

    replay(sched, sc.jobs, lambda launch: 10.0, observe=observe, until=10)
    assert held[1] == 0  # (no preemption: the cluster is full of b's tasks)
    assert held[10] >= 6, (policy, held)


def test_without_bounds_the_engine_tracks_nothing():
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "queues": [{"name": "a"}],
                         "jobs": [{"name": "j", "queue": "a", "tasks": [{"demand": {"cpu": 1}}]}]}, "<x>")
    assert Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf")).bounds is None


def test_the_table_settles_every_queue_and_the_root_and_moves_only_the_bounded():
    # a (cpu limit 2) with child x, b unbounded
    sc = parse_scenario({"resources": ["cpu", "mem"], "cluster": {"capacity": {"cpu": 8, "mem": 8}},
                         "queues": [{"name": "a", "limit": {"cpu": 2}, "children": [{"name": "x"}]}, {"name": "b"}],
                         "jobs": []}, "<x>")
    table = QueueBounds(sc.queues, sc.resources)
    assert table.chain("a.x") == ("a.x", "a", ROOT)  # nearest first, the root (the cluster) last
    table.take("a.x", (1.0, 1.0))  # a task starts: only a, the bounded queue, moves
    table.take("b", (2.0, 0.5))
    assert table.current("a") == [1.0, 1.0] and table.current("b") == [0.0, 0.0] == table.usage["a"]
    # a: 1 cpu used of its 2, so one more cpu fits and two do not; b and the root have no limit
    assert not table.over_limit("a.x", (1.0, 0.0)) and table.over_limit("a.x", (2.0, 0.0))
    assert not table.over_limit("b", (100.0, 0.0)) and not table.owed("b", (1.0, 0.0))
    # the ledger settles both jobs' changes, in job-name order; nothing moves any more
    assert table.settle([("a.x", 1, [1.0, 1.0]), ("b", 1, [2.0, 0.5])]) == {"a.x", "a", "b", ROOT}
    table.settled("a.x"), table.settled("b")
    assert table.running == {ROOT: 2, "a": 1, "a.x": 1, "b": 1}
    assert table.usage[ROOT] == [3.0, 1.5] and table.current("a") == [1.0, 1.0]
    assert table.over_limit("a.x", (2.0, 0.0))  # (the test reads the settled part too)
    table.give_back("a.x", (1.0, 1.0))
    assert table.current("a") == [0.0, 0.0] and table.usage["a"] == [1.0, 1.0]  # (until it settles)
    # track_all: every queue moves (preemption reads them all)
    every = QueueBounds(sc.queues, sc.resources, track_all=True)
    every.take("b", (2.0, 0.5))
    assert every.current("b") == [2.0, 0.5] and every.current("a") == [0.0, 0.0]
