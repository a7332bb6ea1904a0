"""The fair-share preemption planner (``engine/preemption.py``): victims, placement,
budget, and the potential that makes it loop-free."""

from __future__ import annotations

import random

import pytest

from fairshare.engine.preemption import Claimant, RunningTaskView, plan, potential, ratio

def anywhere(_node: str) -> bool:
    return True


def run_plan(claimants, running, usage, fair, free, order, capacity, budget=10):
    return plan(claimants, running, job_usage=usage, job_fair=fair, capacity=capacity, node_free=free,
                node_order=order, max_victims=budget)


def test_late_tenant_takes_back_from_the_most_recent_tasks():
    # two nodes <4 cpu>; A runs 8 one-cpu tasks (ids 0-3 on n0, 4-7 on n1, started at
    # 0..7), fair share 4 cpu each for A and B. B's tasks <1 cpu> fit nowhere: one victim
    # per task suffices on either node; the tie rule (fewest victims, then least work
    # lost, then node order) takes the newest tasks: 7, 6, 5, 4 (all on n1). Then A holds
    # 4 = its fair share and B 4 = its own: nothing more to take.
    running = [RunningTaskView(i, "A", "n0" if i < 4 else "n1", (1.0,), float(i)) for i in range(8)]
    got = run_plan([Claimant("B", 0, (1.0,), anywhere)], running, {"A": (8.0,), "B": (0.0,)},
                   {"A": (4.0,), "B": (4.0,)}, {"n0": (0.0,), "n1": (0.0,)}, ["n0", "n1"], (8.0,))
    assert [(p.job, p.node, p.victims) for p in got] == [("B", "n1", (v,)) for v in (7, 6, 5, 4)]
    # a claimant with 2 pending tasks claims at most 2
    got = run_plan([Claimant("B", 0, (1.0,), anywhere, pending=2)], running, {"A": (8.0,), "B": (0.0,)},
                   {"A": (4.0,), "B": (4.0,)}, {"n0": (0.0,), "n1": (0.0,)}, ["n0", "n1"], (8.0,))
    assert [p.victims for p in got] == [(7,), (6,)]


def test_never_below_the_victims_fair_share():
    # A holds exactly its fair share (4 of 8): nothing may be taken from it
    running = [RunningTaskView(i, "A", "n0", (1.0,), float(i)) for i in range(4)]
    got = run_plan([Claimant("B", 0, (1.0,), anywhere)], running, {"A": (4.0,), "B": (0.0,)},
                   {"A": (4.0,), "B": (4.0,)}, {"n0": (0.0,)}, ["n0"], (4.0,))
    assert got == []


def test_victim_keeps_at_least_the_preemptors_new_ratio():
    # capacity 10; A holds 6 (fair 5: ratio 1.2); B holds 0 (fair 5) and wants a 4-cpu
    # task: after the move B's ratio is 4/5 = 0.8; A would keep 6 - 4 = 2 (ratio 0.4 <
    # max(1, 0.8)): refused. A 1-cpu task: A keeps 5 (ratio 1.0 >= max(1, 0.2)): allowed.
    running = [RunningTaskView(0, "A", "n0", (4.0,), 0.0), RunningTaskView(1, "A", "n0", (1.0,), 1.0),
               RunningTaskView(2, "A", "n0", (1.0,), 2.0)]
    state = dict(usage={"A": (6.0,), "B": (0.0,)}, fair={"A": (5.0,), "B": (5.0,)}, free={"n0": (0.0,)},
                 order=["n0"], capacity=(10.0,))
    assert run_plan([Claimant("B", 0, (4.0,), anywhere)], running, **state) == []
    got = run_plan([Claimant("B", 0, (1.0,), anywhere)], running, **state)
    assert [p.victims for p in got] == [(2,)]  # the most recent 1-cpu task


def test_only_nodes_where_freeing_helps():
    # resources <cpu, gpu>: n0 has no GPU; A fills both nodes' cpu. B needs <1 cpu, 1 gpu>:
    # freeing cpu on n0 would be waste; the victim is on n1.
    running = [RunningTaskView(0, "A", "n0", (4.0, 0.0), 0.0), RunningTaskView(1, "A", "n1", (4.0, 0.0), 1.0),
               RunningTaskView(2, "A", "n0", (4.0, 0.0), 5.0)]
    got = run_plan([Claimant("B", 0, (1.0, 1.0), anywhere)], running, {"A": (12.0, 0.0), "B": (0.0, 0.0)},
                   {"A": (6.0, 0.0), "B": (1.0, 1.0)}, {"n0": (0.0, 0.0), "n1": (0.0, 2.0)}, ["n0", "n1"],
                   (12.0, 2.0))
    assert [(p.node, p.victims) for p in got] == [("n1", (1,))]


def test_constraints_are_honoured():
    running = [RunningTaskView(0, "A", "n0", (1.0,), 0.0), RunningTaskView(1, "A", "n1", (1.0,), 1.0)]
    got = run_plan([Claimant("B", 0, (1.0,), lambda node: node == "n0")], running, {"A": (2.0,), "B": (0.0,)},
                   {"A": (1.0,), "B": (1.0,)}, {"n0": (0.0,), "n1": (0.0,)}, ["n0", "n1"], (2.0,))
    assert [(p.node, p.victims) for p in got] == [("n0", (0,))]


def test_budget_bounds_the_victims_of_one_round():
    # B needs 3 cpu on one node; A's one-cpu tasks: 3 victims, but the budget is 2
    running = [RunningTaskView(i, "A", "n0", (1.0,), float(i)) for i in range(8)]
    args = ([Claimant("B", 0, (3.0,), anywhere)], running, {"A": (8.0,), "B": (0.0,)},
            {"A": (4.0,), "B": (4.0,)}, {"n0": (0.0,)}, ["n0"], (8.0,))
    assert run_plan(*args, budget=2) == []
    got = run_plan(*args, budget=3)
    assert [p.victims for p in got] == [(7, 6, 5)]


def test_ratio_edges():
    assert ratio((0.0,), (0.0,), (1.0,)) == 1.0
    assert ratio((1.0,), (0.0,), (4.0,)) == float("inf")
    # dominant shares: <2 cpu, 1 gpu> of <8, 2> is 0.5; fair <4, 0> is 0.5: ratio 1
    assert ratio((2.0, 1.0), (4.0, 0.0), (8.0, 2.0)) == pytest.approx(1.0)


def fill_nodes(rng, node_cap, jobs, second: list[int], gangs=frozenset()):
    """Fill each node (in order) with random tasks (<1-3, one of ``second``>) of random
    jobs until the next does not fit; the tasks of ``gangs`` marked as a gang's. Fair
    shares: a random weighted split of the capacity. Returns (running, usage, free, fair)."""
    m = 2
    capacity = tuple(sum(c[r] for c in node_cap.values()) for r in range(m))
    running, usage = [], {j: (0.0, 0.0) for j in jobs}
    free = {n: list(c) for n, c in node_cap.items()}
    tid = 0
    for n in node_cap:
        while True:
            d = (float(rng.choice([1, 2, 3])), float(rng.choice(second)))
            if not all(d[r] <= free[n][r] for r in range(m)):
                break
            j = rng.choice(jobs)
            running.append(RunningTaskView(tid, j, n, d, float(rng.randint(0, 100)), j in gangs))
            tid += 1
            free[n] = [free[n][r] - d[r] for r in range(m)]
            usage[j] = tuple(usage[j][r] + d[r] for r in range(m))
    weights = {j: rng.choice([1, 2, 3]) for j in jobs}
    total = sum(weights.values())
    fair = {j: tuple(c * weights[j] / total for c in capacity) for j in jobs}
    return running, usage, free, fair


def random_state(seed: int):
    """Nodes filled with random tasks of random jobs, fair shares a random weighted split
    of the capacity, claimants the jobs below their fair share (most starved first)."""
    rng = random.Random(seed)
    m = 2
    nodes = [f"n{i}" for i in range(rng.randint(1, 4))]
    node_cap = {n: (8.0, float(rng.choice([0, 2]))) for n in nodes}
    capacity = tuple(sum(node_cap[n][r] for n in nodes) for r in range(m))
    jobs = [f"j{i}" for i in range(rng.randint(2, 5))]
    running, usage, free, fair = fill_nodes(rng, node_cap, jobs, [0, 0, 1])
    claimants = [Claimant(j, 0, (float(rng.choice([1, 2])), float(rng.choice([0, 1]))), anywhere)
                 for j in sorted(jobs, key=lambda j: ratio(usage[j], fair[j], capacity))
                 if ratio(usage[j], fair[j], capacity) < 1]
    got = run_plan(claimants, running, usage, fair, {n: tuple(f) for n, f in free.items()}, nodes, capacity,
                   budget=rng.randint(1, 6))
    return running, usage, fair, capacity, claimants, got


def apply_checking_the_potential(running, usage, fair, capacity, claimants, got):
    """Apply each planned preemption in turn (victims out, the claimant's demand in),
    checking that no task is chosen twice and that Phi rises lexicographically at every
    one; yields each preemption after its checks, for more of them."""
    m = len(capacity)
    by_id = {t.task_id: t for t in running}
    seen: set[int] = set()
    phi = potential(usage, fair, capacity)
    for p in got:
        assert not (set(p.victims) & seen)
        seen.update(p.victims)
        for v in p.victims:
            t = by_id[v]
            usage[t.job] = tuple(max(0.0, usage[t.job][r] - t.demand[r]) for r in range(m))
        claim = next(c for c in claimants if c.job == p.job)
        usage[p.job] = tuple(usage[p.job][r] + claim.demand[r] for r in range(m))
        after = potential(usage, fair, capacity)
        assert after > phi, (p, phi, after)
        phi = after
        yield p


@pytest.mark.parametrize("seed", range(40))
def test_every_preemption_raises_the_potential(seed):
    """Apply each planned preemption of a random state: Phi (sorted share / fair share of
    every job) must increase lexicographically at every one, and no task is chosen twice."""
    for _p in apply_checking_the_potential(*random_state(seed)):
        pass


def test_the_random_states_do_preempt():
    """(The property above is not vacuous: most random states plan preemptions.)"""
    planned = [len(random_state(seed)[-1]) for seed in range(40)]
    assert sum(1 for n in planned if n) >= 20, planned
