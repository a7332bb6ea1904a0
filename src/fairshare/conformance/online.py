"""The online checks: what every policy with an online mode must do.

Modelled on scikit-learn's ``utils/estimator_checks.py``: each check is a plain function
``check_xxx(policy_factory) -> None`` that builds its own workload, drives a fresh
``Engine`` (``conformance.driver``) or ``sim.simulate`` with ``policy_factory()`` and
raises ``AssertionError`` with a message naming the policy and what went wrong.
``conformance.checks`` lists them with their names; ``check_policy`` runs them.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from fairshare.conformance.driver import EventHeap, drive, engine_for
from fairshare.conformance.static import NotApplicable
from fairshare.conformance.workloads import (PAPER_EXAMPLES, Workload, bounded_workload, gang_preemption_workload,
                                             gang_workload, job, priority_workload, q, random_workload, scenario,
                                             sim_scenario)
from fairshare.engine import JobArrived, Wake
from fairshare.model import Node
from fairshare.model.resources import fit_limit
from fairshare.model.scenario import ClusterEvent, FairnessConfig, Scenario
from fairshare.policies import Policy, PolicyModeError
from fairshare.sim import SimOptions, simulate

PolicyFactory = Callable[[], Policy]


def name_of(policy: Policy) -> str:
    return f"{policy!r}"


def must_not_raise(what: str, fn: Callable[[], object]):
    """Run ``fn``; for the checks whose property is "no exception", an exception is the
    failure: raise it as an AssertionError naming the case."""
    try:
        return fn()
    except AssertionError:
        raise
    except Exception as exc:
        raise AssertionError(f"{what}: raised {exc!r}") from exc


def has_online_mode(policy: Policy) -> bool:
    """Whether ``policy.online(...)`` gives a sorter rather than refusing (PolicyModeError)."""
    sc = scenario(capacity={"cpu": 4, "mem": 4})
    try:
        policy.online(sc.resources, sc.queues, sc.capacity)
    except PolicyModeError:
        return False
    return True


def _first_difference(a: list, b: list) -> str:
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"decision {k}: {x} vs {y}"
    return f"lengths {len(a)} vs {len(b)}"


# --- capacity, limits, slots -----------------------------------------------------------------

def check_capacity_never_exceeded(policy_factory: PolicyFactory) -> None:
    """After every ``Engine.step``, on every node and for every resource, the demands of
    the tasks running there sum to at most the node's capacity; and every launch is
    admissible. Within one step nothing is released, so the state at the end of a step
    bounds every decision of that step: checking it checks every decision."""
    for seed in range(4):
        policy = policy_factory()
        run = drive(policy, random_workload(seed))
        assert not run.problems, f"{name_of(policy)}, seed {seed}: {run.problems[:3]}"
        for inst in run.instants:
            for node, tasks in inst.running.items():
                cap = inst.capacity.get(node)
                assert cap is not None or not tasks, \
                    f"{name_of(policy)}, seed {seed}, t={inst.now}: tasks running on {node}, which is not up"
                for r, c in enumerate(cap or ()):
                    used = sum(demand[r] for _, demand in tasks)
                    assert used <= fit_limit(c), (  # (the model's one fit tolerance)
                        f"{name_of(policy)}, seed {seed}, t={inst.now}: node {node} resource {r} holds "
                        f"{used} > capacity {c} ({len(tasks)} tasks)")
        assert any(inst.launches for inst in run.instants), f"{name_of(policy)}, seed {seed}: nothing launched"


def check_queue_limits_hold(policy_factory: PolicyFactory) -> None:
    """Queue limits (docs/policies.md, "Guarantees and limits") hold after every decision
    round: per limited queue and resource, the running tasks below it hold at most the
    limit, on three random workloads with node losses and cancellations."""
    _assert_queue_limits_hold(policy_factory, [bounded_workload(seed) for seed in range(3)])


def with_half_life(workload: Workload, half_life: float) -> Workload:
    """``workload`` with the scenario's ``fairness: {half_life}`` set."""
    return replace(workload, scenario=replace(workload.scenario, fairness=FairnessConfig(half_life)))


def with_queue_half_lives(workload: Workload, half_lives: dict[str, float]) -> Workload:
    """``workload`` with these queues' own ``fairness: {half_life}`` (queue path -> seconds)."""
    tree = workload.scenario.queues
    nodes = {node.path: replace(node, half_life=half_lives.get(node.path, node.half_life)) for node in tree}
    return replace(workload, scenario=replace(workload.scenario, queues=type(tree)(nodes)))


def has_decayed_usage(policy: Policy) -> bool:
    """Whether the policy's sorter accepts a half-life (docs/policies.md, "Fairness with
    memory"); the others refuse it with a ValueError."""
    sc = scenario(capacity={"cpu": 4, "mem": 4})
    try:
        policy.online(sc.resources, sc.queues, sc.capacity).set_half_life(10.0)
    except ValueError:
        return False
    return True


def check_half_life_zero_is_instantaneous(policy_factory: PolicyFactory) -> None:
    """``fairness: {half_life: 0}`` launches exactly what no ``fairness:`` section does
    (docs/policies.md, "Fairness with memory"): same tasks, same nodes, same instants, on
    two random workloads and a bounded one."""
    for workload in (random_workload(0), random_workload(1), bounded_workload(2)):
        plain = drive(policy_factory(), workload).log
        zero = drive(policy_factory(), with_half_life(workload, 0.0)).log
        assert plain, "no launch: the check compares nothing"
        assert zero == plain, (f"{name_of(policy_factory())}, seed {workload.seed}: half_life 0 launches differ "
                               f"from the instantaneous policy at {_first_difference(zero, plain)}")


def check_decayed_limits_hold(policy_factory: PolicyFactory) -> None:
    """With decayed usage on (half-lives of 2 s and infinite, against 1-5 s tasks; and
    per queue: the first two queues 2 s and infinite, the others none), the engine's
    limits still hold after every round (:func:`check_queue_limits_hold`). Not applicable
    to a policy without memory."""
    if not has_decayed_usage(policy_factory()):
        raise NotApplicable(f"{name_of(policy_factory())} has no decayed usage (fairness.half_life)")
    per_queue = bounded_workload(2)
    first, second = per_queue.scenario.queues.paths[:2]
    _assert_queue_limits_hold(policy_factory, [with_half_life(bounded_workload(seed), half_life)
                                               for seed, half_life in ((0, 2.0), (1, math.inf))] +
                              [with_queue_half_lives(per_queue, {first: 2.0, second: math.inf})])


def _assert_queue_limits_hold(policy_factory: PolicyFactory, workloads: list[Workload]) -> None:
    for workload in workloads:
        seed = workload.seed
        sc = workload.scenario
        run = drive(policy_factory(), workload)
        assert run.instants, "no decision round ran"
        limits = {node.path: node.limit_vector(sc.resources) for node in sc.queues if node.limit}
        queue_of = {jb.name: jb.queue for jb in sc.jobs}
        for inst in run.instants:
            used = {path: [0.0] * sc.m for path in limits}
            for tasks in inst.running.values():
                for jname, demand in tasks:
                    for path in sc.queues.ancestors(queue_of[jname]):
                        if path in used:
                            for r, d in enumerate(demand):
                                used[path][r] += d
            for path, lim in limits.items():
                for r, res in enumerate(sc.resources):
                    assert used[path][r] <= fit_limit(lim[r]), (
                        f"{name_of(policy_factory())}, seed {seed}, t={inst.now}: queue {path} holds "
                        f"{used[path][r]:g} {res}, past its limit {lim[r]:g}")


# --- gangs and priorities --------------------------------------------------------------------

def check_gangs_run_whole_and_packed(policy_factory: PolicyFactory) -> None:
    """No gang ever runs partly: after every ``Engine.step``, a gang job with a task
    running has every one of its tasks started (running or finished; the executor's own
    account, tasks lost, failed or killed not counted). And ``pack`` holds: the running
    tasks of a ``pack: node`` gang on one node, of a ``pack: {attribute: A}`` gang on
    nodes with one value of A. On three workloads where a node loss hits gangs."""
    for seed in range(3):
        policy = policy_factory()
        workload = gang_workload(seed)
        sc = workload.scenario
        gangs = {jb.name: jb for jb in sc.jobs if jb.gang}
        attributes = {nd.name: dict(nd.attributes) for nd in sc.cluster.nodes}
        run = drive(policy, workload)
        assert not run.problems, f"{name_of(policy)}, seed {seed}: {run.problems[:3]}"
        started_whole = set()
        for inst in run.instants:
            where: dict[str, list[str]] = {}
            for node, tasks in inst.running.items():
                for jname, _demand in tasks:
                    if jname in gangs:
                        where.setdefault(jname, []).append(node)
            for jname, nodes in where.items():
                gang = gangs[jname]
                started = inst.started.get(jname, 0)
                assert started == gang.total_count, (
                    f"{name_of(policy)}, seed {seed}, t={inst.now}: gang {jname} runs {len(nodes)} task(s) with "
                    f"{started} of its {gang.total_count} started: it runs partly")
                started_whole.add(jname)
                if gang.pack is None:
                    continue
                attribute = gang.pack[1]
                groups = set(nodes) if attribute is None else {attributes[n].get(attribute) for n in nodes}
                assert len(groups) == 1 and None not in groups, (
                    f"{name_of(policy)}, seed {seed}, t={inst.now}: gang {jname} (pack {gang.pack}) runs on "
                    f"{sorted(set(nodes))}")
        assert started_whole, f"{name_of(policy)}, seed {seed}: no gang ever ran"


def check_preemption_takes_gangs_whole(policy_factory: PolicyFactory) -> None:
    """No preemption splits a gang: every gang among a step's victims loses all of its
    tasks (each task of a job runs as long as the others here, so a running gang runs
    all of them), and a gang that preempts starts all of its tasks or none. On the gang
    preemption workloads; a policy without a static allocation (no fair shares, no
    preemption) is not applicable. Not vacuous: some gang must be preempted."""
    try:
        policy_factory().allocate(gang_preemption_workload(0).scenario)
    except PolicyModeError as exc:
        raise NotApplicable(f"no static allocation, so no fair-share preemption: {exc}") from None
    lengths = {}  # (one length per job: a gang's tasks end together)
    duration = lambda launch, rng: lengths.setdefault(launch.job, float(rng.randint(15, 40)))  # noqa: E731
    gang_victims = 0
    for seed in range(4):
        policy = policy_factory()
        workload = gang_preemption_workload(seed)
        lengths.clear()
        gangs = {jb.name: jb.total_count for jb in workload.scenario.jobs if jb.gang}
        run = drive(policy, workload, duration=duration)
        assert not run.problems, f"{name_of(policy)}, seed {seed}: {run.problems[:3]}"
        for inst in run.instants:
            for p in inst.preempted:
                lost = Counter(task.job for task in p.victims if task.job in gangs)
                for jname, n in lost.items():
                    assert n == gangs[jname], (
                        f"{name_of(policy)}, seed {seed}, t={inst.now}: preempting for {p.job} stopped {n} of "
                        f"gang {jname}'s {gangs[jname]} tasks: it split the gang")
                gang_victims += len(lost)
                if p.job in gangs:
                    started = len(p.launches) if p.launches else int(p.launch is not None)
                    assert started in (0, gangs[p.job]), (
                        f"{name_of(policy)}, seed {seed}, t={inst.now}: gang {p.job} preempted and started "
                        f"{started} of its {gangs[p.job]} tasks")
    assert gang_victims, f"{name_of(policy)}: no gang was ever preempted on the gang preemption workloads"


def check_priority_order_within_queue(policy_factory: PolicyFactory) -> None:
    """Within a queue, higher priority first: at every launch (in decision order), no
    job of the same queue with a higher priority has a task waiting. Every task has one
    shape and no node is constrained, so a waiting job of higher priority could have
    taken the launch's room: its waiting is an inversion. Pending tasks are counted
    from the executor's own account (count minus tasks started and not lost)."""
    for seed in range(3):
        policy = policy_factory()
        workload = priority_workload(seed)
        sc = workload.scenario
        cancelled_at = dict((name, t) for t, name in workload.cancels)
        by_name = {jb.name: jb for jb in sc.jobs}
        run = drive(policy, workload)
        assert not run.problems, f"{name_of(policy)}, seed {seed}: {run.problems[:3]}"
        inversions_possible = 0
        for inst in run.instants:
            started = Counter(inst.started)
            started.subtract(Counter(la.job for la in inst.launches))  # (as the step began)
            for la in inst.launches:
                mine = by_name[la.job]
                for other in sc.jobs:
                    if other.queue != mine.queue or other.priority <= mine.priority or other.submit_s > inst.now \
                            or cancelled_at.get(other.name, float("inf")) <= inst.now:
                        continue
                    inversions_possible += 1
                    waiting = other.total_count - started[other.name]
                    assert waiting <= 0, (
                        f"{name_of(policy)}, seed {seed}, t={inst.now}: {la.job} (priority {mine.priority}) "
                        f"launched while {other.name} (priority {other.priority}) of queue {mine.queue!r} "
                        f"had {waiting} task(s) waiting")
                started[la.job] += 1
        assert inversions_possible, f"{name_of(policy)}, seed {seed}: no launch beside a job of higher priority"


def check_slot_limit(policy_factory: PolicyFactory) -> None:
    """Slot scheduling's own invariant (the policy declares ``slots_per_node()``): after
    every step no node runs more tasks than it has slots, and every launch is admissible.
    Its resources may be oversubscribed (that is the policy)."""
    for seed in range(4):
        policy = policy_factory()
        run = drive(policy, random_workload(seed))
        slots = policy.slots_per_node()  # (as declared once the run is over)
        assert slots is not None, f"{name_of(policy)} declares no slots per node"
        assert not run.problems, f"{name_of(policy)}, seed {seed}: {run.problems[:3]}"
        for inst in run.instants:
            for node, tasks in inst.running.items():
                assert len(tasks) <= slots, \
                    f"{name_of(policy)}, seed {seed}, t={inst.now}: node {node} runs {len(tasks)} tasks > {slots} slots"
        assert any(inst.launches for inst in run.instants), f"{name_of(policy)}, seed {seed}: nothing launched"


# --- determinism and reuse -------------------------------------------------------------------

def check_same_seed_same_launches(policy_factory: PolicyFactory) -> None:
    """Two fresh policy objects and Engines on the same workload make the same launches,
    in the same order, on the same nodes, with the same task ids; and two simulations
    with the same seed produce the same timeline."""
    for seed in range(3):
        wl = random_workload(seed)
        first = drive(policy_factory(), wl)
        second = drive(policy_factory(), wl)
        assert first.log, f"seed {seed}: nothing launched"
        assert first.log == second.log, \
            f"{name_of(policy_factory())}, seed {seed}: launches differ at {_first_difference(first.log, second.log)}"
    sc = sim_scenario()
    a = simulate(sc, policy_factory(), SimOptions(seed=7))
    b = simulate(sc, policy_factory(), SimOptions(seed=7))
    assert a.rows == b.rows and a.jobs == b.jobs, f"{name_of(policy_factory())}: two simulations with seed 7 differ"


def check_no_mutation_and_reusable(policy_factory: PolicyFactory) -> None:
    """A run changes neither the scenario nor its jobs nor the policy's options, and one
    policy object run again (a second Engine, a second simulation) decides exactly as a
    fresh one, also after a first run stopped part-way (jobs still running, nodes lost:
    whatever a sorter kept from it must not leak into the next)."""
    wl = random_workload(11)
    before = copy.deepcopy(wl.scenario)
    policy = policy_factory()
    params = copy.deepcopy(policy.params())
    name = name_of(policy)
    first = drive(policy, wl)
    must_not_raise(f"{name}, a run stopped part-way", lambda: drive(policy, replace(wl, until=8.0)))
    again = must_not_raise(f"{name}, the policy object run again", lambda: drive(policy, wl))
    fresh = drive(policy_factory(), wl)
    assert again.log == fresh.log == first.log, f"{name}: a reused policy object decides differently: " \
        f"{_first_difference(again.log, fresh.log)}"
    sc = sim_scenario()
    sim_before = copy.deepcopy(sc)
    a = must_not_raise(f"{name}, a simulation", lambda: simulate(sc, policy, SimOptions(seed=3)))
    b = must_not_raise(f"{name}, a second simulation", lambda: simulate(sc, policy, SimOptions(seed=3)))
    assert a.rows == b.rows, f"{name}: a reused policy object simulates differently"
    for got, want in ((wl.scenario, before), (sc, sim_before)):
        assert repr(got.jobs) == repr(want.jobs) and repr(got.cluster) == repr(want.cluster) \
            and repr(vars(got.queues)) == repr(vars(want.queues)) and got.events == want.events, \
            f"{name}: a run mutated the scenario"
    assert policy.params() == params, f"{name}: a run changed the policy's options {params} -> {policy.params()}"


# --- empty and infeasible --------------------------------------------------------------------

def check_empty_cluster_and_empty_queue(policy_factory: PolicyFactory) -> None:
    """No nodes at all (the sorter sees zero capacity); no jobs; queues with no jobs and a
    job whose count is 0: no exception and no launch, in a step at 0 s with the arrivals
    and one at 1 s with nothing but a ``Wake`` (both decide). (Nodes without the demanded
    resource are the infeasible-demand check's.)"""
    name = name_of(policy_factory())
    demanding = [job("a", {"cpu": 1, "mem": 1}, "busy"), job("b", {"mem": 2}, "busy", weight=2)]
    idle = [q("busy", 1, q("leaf")), q("idle")]
    cases = {
        "no nodes": (scenario(capacity={"cpu": 4, "mem": 4}, queues=[q("busy")], jobs=demanding), ()),
        "no jobs": (scenario(capacity={"cpu": 4, "mem": 4}, queues=idle, jobs=[]), None),
        "empty queues, zero counts": (scenario(capacity={"cpu": 4, "mem": 4}, queues=idle,
                                               jobs=[job("z", {"cpu": 1}, "busy.leaf", count=0)]), None),
    }
    for case, (sc, nodes) in cases.items():
        nodes = sc.cluster.nodes if nodes is None else nodes

        def run(sc=sc, nodes=nodes) -> list:
            engine, _ = engine_for(policy_factory(), sc, tuple(nodes), EventHeap())
            first = engine.step(0.0, [JobArrived(jb) for jb in sc.jobs] + [Wake()]).launches
            return first + engine.step(1.0, [Wake()]).launches

        launches = must_not_raise(f"{name}, {case}", run)
        assert launches == [], f"{name}, {case}: launched {launches}"


def check_infeasible_demand_reported_not_raised(policy_factory: PolicyFactory) -> None:
    """A job whose task is bigger than every node never launches and does not stop the
    others, and nothing raises. Three ways in: a job built with more CPU than any node
    has, and nodes with none of the GPUs a job needs (the loader refuses both in a file,
    but the engine must not rely on that: the live service takes jobs from clients),
    both given to the Engine; and a valid scenario whose only node big enough fails at
    0.5 s. In the Engine every other task runs; in the simulator (the first and the
    last case) the other jobs finish and ``notes`` says that the big one could not."""
    name = name_of(policy_factory())
    feasible = scenario(nodes=[{"name": "n", "count": 2, "capacity": {"cpu": 8, "mem": 16}}],
                        queues=[q("a"), q("b")],
                        jobs=[job("huge", {"cpu": 8, "mem": 1}, "a", count=3),
                              job("small", {"cpu": 1, "mem": 2}, "a", count=10),
                              job("other", {"cpu": 2, "mem": 1}, "b", count=10, submit=1)])
    huge = feasible.job("huge")
    sc = feasible.with_job(replace(huge, classes=(replace(huge.classes[0], demand=(9.0, 1.0)),)))
    # and nodes with none of a resource a job needs: a GPU job on CPU-only nodes
    no_gpu = scenario(capacity={"cpu": 16, "mem": 32, "gpu": 4}, queues=[q("a"), q("b")],
                      jobs=[job("huge", {"cpu": 1, "gpu": 1}, "a", count=3),
                            job("small", {"cpu": 1, "mem": 2}, "a", count=10),
                            job("other", {"cpu": 2, "mem": 1}, "b", count=10, submit=1)])
    no_gpu_nodes = tuple(Node(f"c-{i}", (8.0, 16.0, 0.0)) for i in range(2))
    for case, wl, nodes in (("cpu 9 > 8", sc, None), ("no gpu on any node", no_gpu, no_gpu_nodes)):
        run = must_not_raise(f"{name}, {case}", lambda: drive(policy_factory(), Workload(wl, nodes=nodes)))
        assert not run.problems, f"{name}, {case}: {run.problems[:3]}"
        launched = Counter(la.job for inst in run.instants for la in inst.launches)
        assert launched["huge"] == 0, f"{name}, {case}: launched the infeasible job {launched}"
        assert launched["small"] == 10 and launched["other"] == 10, \
            f"{name}, {case}: the feasible jobs did not all run: {launched}"

    big_node_fails = scenario(
        nodes=[{"name": "big", "count": 1, "capacity": {"cpu": 16, "mem": 16}},
               {"name": "n", "count": 2, "capacity": {"cpu": 8, "mem": 16}}],
        queues=[q("a"), q("b")],
        jobs=[job("huge", {"cpu": 9, "mem": 1}, "a", count=3, submit=1),
              job("small", {"cpu": 1, "mem": 2}, "a", count=10),
              job("other", {"cpu": 2, "mem": 1}, "b", count=10, submit=1)])
    big_node_fails = replace(big_node_fails, events=(ClusterEvent(0.5, "node_fail", "big"),))
    for case, sim_sc in (("built", sc), ("big node failed", big_node_fails)):
        result = must_not_raise(f"{name}, {case}", lambda: simulate(sim_sc, policy_factory(), SimOptions(seed=1)))
        assert not result.all_finished and result.jobs["huge"].finish is None, \
            f"{name}, {case}: the infeasible job finished"
        assert result.jobs["small"].finish is not None and result.jobs["other"].finish is not None, \
            f"{name}, {case}: the feasible jobs did not finish in the simulator"
        assert any("huge" in note and "fit on no node" in note for note in result.notes), \
            f"{name}, {case}: the simulator's notes do not report the infeasible job: {result.notes}"


# --- weights ---------------------------------------------------------------------------------

#: the weights check's cluster: 40 nodes of <10 CPU, 10 GB>, tasks of <1, 1>: 400 tasks fit
#: (slot scheduling, 4 slots a node: 160)
WEIGHT_NODES = 40


def _assert_three_to_one(policy_factory: PolicyFactory, jobs: list[dict], queues: list[dict] | None, what: str):
    name = name_of(policy_factory())
    sc = scenario(nodes=[{"name": "w", "count": WEIGHT_NODES, "capacity": {"cpu": 10, "mem": 10}}],
                  queues=queues, jobs=jobs)
    # tasks of heavy last 1 s, of light 1.37 s: releases interleave, and each instant
    # re-fills only what one job released
    run = drive(policy_factory(), Workload(sc, until=30.0),
                duration=lambda launch, rng: 1.0 if launch.job == "heavy" else 1.37)
    assert len(run.instants) >= 30, f"{name}: {len(run.instants)} instants"
    for inst in run.instants:
        per_job = Counter(jname for tasks in inst.running.values() for jname, _ in tasks)
        heavy, light = per_job["heavy"], per_job["light"]
        total = heavy + light
        assert total > 0, f"{name}, {what}, t={inst.now}: nothing runs"
        # weights 3 : 1 -> heavy holds 3/4 of the running tasks, within one task
        assert abs(heavy - 0.75 * total) <= 1.0, (
            f"{name}, {what}, t={inst.now}: heavy {heavy}, light {light}: not 3 : 1 within one task "
            f"(heavy should be {0.75 * total})")


def check_job_weights_respected(policy_factory: PolicyFactory) -> None:
    """Two always-demanding jobs in one queue, weights 3 and 1, identical <1 CPU, 1 GB>
    tasks on 40 nodes of <10, 10> (400 tasks fit), lasting 1 s and 1.37 s: after every
    instant the weight-3 job runs three quarters of the running tasks, within one task
    (300 and 100 on the full cluster) (DRF Sec. 4.3: dominant shares in the ratio of
    the weights; identical tasks make that a task ratio)."""
    _assert_three_to_one(policy_factory, [job("heavy", {"cpu": 1, "mem": 1}, "q", weight=3),
                                          job("light", {"cpu": 1, "mem": 1}, "q", weight=1)],
                         [q("q")], "job weights")


def check_queue_weights_respected(policy_factory: PolicyFactory) -> None:
    """The same with the weights on two queues (3 and 1) holding one weight-1 job each:
    hierarchical policies divide by the queue weights (H-DRF Sec. 3)."""
    _assert_three_to_one(policy_factory, [job("heavy", {"cpu": 1, "mem": 1}, "big"),
                                          job("light", {"cpu": 1, "mem": 1}, "small")],
                         [q("big", 3), q("small", 1)], "queue weights")


# --- the limit of tiny tasks -----------------------------------------------------------------

#: scale factor: every task of a paper example is split into k tasks of demand / k
TINY_K = 16
WARMUP_S, HORIZON_S = 20.0, 60.0


def online_dominant_shares(policy: Policy, sc: Scenario) -> dict[str, float]:
    """Time-averaged dominant share of each job over [WARMUP_S, HORIZON_S] of a run where
    every job always demands and job i's tasks last 1 + 0.37 i s (distinct, so releases
    interleave and the freed space is re-filled by the policy)."""
    durations = {jb.name: 1.0 + 0.37 * i for i, jb in enumerate(sc.jobs)}
    run = drive(policy, Workload(sc, until=HORIZON_S), duration=lambda la, rng: durations[la.job])
    cap = sc.capacity
    acc = {jb.name: 0.0 for jb in sc.jobs}
    for k, inst in enumerate(run.instants):  # the state after an instant holds until the next
        nxt = run.instants[k + 1].now if k + 1 < len(run.instants) else HORIZON_S
        lo, hi = max(inst.now, WARMUP_S), min(nxt, HORIZON_S)
        if hi <= lo:
            continue
        usage: dict[str, list[float]] = {jb.name: [0.0] * len(cap) for jb in sc.jobs}
        for tasks in inst.running.values():
            for jname, demand in tasks:
                for r, d in enumerate(demand):
                    usage[jname][r] += d
        for jname, u in usage.items():
            acc[jname] += max((x / c for x, c in zip(u, cap) if c > 0), default=0.0) * (hi - lo)
    return {jname: v / (HORIZON_S - WARMUP_S) for jname, v in acc.items()}


def examples_for(policy: Policy, examples: dict[str, Callable[[int], Scenario]]) -> dict:
    """The examples that have every resource the policy's options name (an option
    declared ``value="resource"``, e.g. ``cpu``'s ``resource``): an example without the
    one resource a policy is about says nothing of it."""
    named = {policy.params().get(opt.param) for opt in type(policy).options if opt.value == "resource"} - {None}
    return {k: build for k, build in examples.items() if named <= set(build(1).resources)}


def check_tiny_tasks_reach_the_static_allocation(policy_factory: PolicyFactory,
                                                 examples: dict[str, Callable[[int], Scenario]] | None = None) -> None:
    """Split every task of a paper example (default ``workloads.PAPER_EXAMPLES``) into
    ``TINY_K`` tasks of demand / k, run online with tasks finishing and restarting, and
    time-average each job's dominant share: it must equal ``policy.allocate(example)``'s
    within ``(jobs + 1) x task_share`` (the bound of tests/test_online_convergence.py:
    every job is within one task of the divisible limit, and whole tasks hold back at
    most one task per job; ``task_share`` is the largest dominant share of one scaled
    task, so the bound is O(1/k)).

    A policy without a static allocation fails this check (there is nothing to compare
    with): the policy must exempt itself, with its reason."""
    name = name_of(policy_factory())
    examples = examples_for(policy_factory(), PAPER_EXAMPLES if examples is None else examples)
    for example, build in examples.items():
        try:
            static = policy_factory().allocate(build(1))
        except PolicyModeError as exc:
            raise AssertionError(f"{name} has no static allocation to compare with: {exc}") from None
        small = build(TINY_K)
        task_share = max(max((d / c for d, c in zip(jb.composite_demand(), small.capacity) if c > 0), default=0.0)
                         for jb in small.jobs)
        tol = (len(small.jobs) + 1) * task_share
        got = online_dominant_shares(policy_factory(), small)
        for jname, ja in static.jobs.items():
            assert abs(got[jname] - ja.dominant_share) <= tol, (
                f"{name}, {example} at k={TINY_K}: {jname} online {got[jname]:.4f}, static "
                f"{ja.dominant_share:.4f}, allowed {tol:.4f} = ({len(small.jobs)} jobs + 1) x {task_share:.4f}")
