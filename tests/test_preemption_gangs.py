"""Preemption with gangs and priorities (``engine/preemption.py``; docs/policies.md,
"Gangs in preemption" and "Priority preemption within a queue"): a victim gang loses all
of its tasks, a starved gang preempts only when room for all of it results, a claim
within a queue takes only lower priorities; and none of it loops."""

from __future__ import annotations

import random

import pytest

from test_preemption import apply_checking_the_potential, fill_nodes

from fairshare.engine import Engine, JobArrived, Scheduler, TaskFinished, Wake
from fairshare.engine.preemption import Claimant, Preemptor, RunningTaskView, plan, ratio
from fairshare.model import parse_scenario
from fairshare.model.scenario import PreemptionConfig
from fairshare.policies import REGISTRY, PolicyModeError, make_policy


def anywhere(_node: str) -> bool:
    return True


def gang_claim(job: str, *demands, groups=None, victims=None) -> Claimant:
    total = tuple(sum(d[r] for d in demands) for r in range(len(demands[0])))
    return Claimant(job, 0, total, anywhere, 1, tuple((d, anywhere) for d in demands), groups, victims)


def tasks(job: str, node: str, n: int, cpu: float, first_id: int, started: float = 0.0, gang=False):
    return [RunningTaskView(first_id + k, job, node, (cpu,), started + k, gang) for k in range(n)]


def run_plan(claimants, running, usage, fair, free, capacity, budget=10, rule="loop-free"):
    return plan(claimants, running, job_usage=usage, job_fair=fair, capacity=capacity, node_free=free,
                node_order=sorted(free), max_victims=budget, rule=rule)


# Two nodes <4 cpu>, both full. G is a gang of 4 two-cpu tasks (ids 0-1 on n0, 2-3 on
# n1; 8 cpus); its fair share, all or nothing, is 0 (ratio inf). B claims one 1-cpu task
# (fair 4, holds 0: ratio 0).
GANG_ON_TWO_NODES = tasks("G", "n0", 2, 2.0, 0, gang=True) + tasks("G", "n1", 2, 2.0, 2, started=2.0, gang=True)
FULL = {"n0": (0.0,), "n1": (0.0,)}

CASES = {
    # G loses all 4 tasks (8 cpus), one victim against the budget: G's ratio 0/0 = 1 >=
    # max(1, B's new 1/4); B's task goes on n0 (the first node; the tasks freed on n1 are
    # room for the next round)
    "a victim gang loses all of its tasks": (
        [Claimant("B", 0, (1.0,), anywhere)], GANG_ON_TWO_NODES, {"G": (8.0,), "B": (0.0,)},
        {"G": (0.0,), "B": (4.0,)}, FULL, 1, [("B", "n0", (0, 1, 2, 3), ("G",))]),
    # the same gang entitled to all 8 (ratio 8/8 = 1: not above its fair share): untouched
    "a gang at its fair share is no victim": (
        [Claimant("B", 0, (1.0,), anywhere)], GANG_ON_TWO_NODES, {"G": (8.0,), "B": (0.0,)},
        {"G": (8.0,), "B": (4.0,)}, FULL, 1, []),
    # A holds 8 one-cpu tasks (ids 0-3 on n0 started 0-3, 4-7 on n1 started 4-7), fair 2
    # (ratio 4); gang C claims 2 x 3 cpus (fair 6: ratio 0 -> 1). A must keep max(1, 1) x 2
    # = 2 cpus: 6 may go, exactly what C needs (3 on each node). Newest first: 7, 6, 5 on
    # n1, then 3, 2, 1 on n0 (4 and 0 stay).
    "a gang claims room for all of it": (
        [gang_claim("C", (3.0,), (3.0,))], tasks("A", "n0", 4, 1.0, 0) + tasks("A", "n1", 4, 1.0, 4, started=4.0),
        {"A": (8.0,), "C": (0.0,)}, {"A": (2.0,), "C": (6.0,)}, FULL, 10, [("C", "n1", (7, 6, 5, 3, 2, 1), ())]),
    # the same with A entitled to 3: it may lose only 5 (8 - 3), one short of C's room: none
    "no preemption unless all of the gang fits": (
        [gang_claim("C", (3.0,), (3.0,))], tasks("A", "n0", 4, 1.0, 0) + tasks("A", "n1", 4, 1.0, 4, started=4.0),
        {"A": (8.0,), "C": (0.0,)}, {"A": (3.0,), "C": (6.0,)}, FULL, 10, []),
    # a budget of 5 victims is one short of the 6 needed: none (no partial room taken)
    "no partial room within the budget": (
        [gang_claim("C", (3.0,), (3.0,))], tasks("A", "n0", 4, 1.0, 0) + tasks("A", "n1", 4, 1.0, 4, started=4.0),
        {"A": (8.0,), "C": (0.0,)}, {"A": (2.0,), "C": (6.0,)}, FULL, 5, []),
    # pack: node (groups n0 and n1): C's 2 x 2 cpus on one node; A (fair 2, holds 8) may
    # lose 6. The newest tasks are on n1 (started 4-7): 7, 6, 5, 4 free n1 whole; none on n0
    "a packed gang's room is on one node": (
        [gang_claim("C", (2.0,), (2.0,), groups=(("n0",), ("n1",)))],
        tasks("A", "n0", 4, 1.0, 0) + tasks("A", "n1", 4, 1.0, 4, started=4.0),
        {"A": (8.0,), "C": (0.0,)}, {"A": (2.0,), "C": (4.0,)}, FULL, 10, [("C", "n1", (7, 6, 5, 4), ())]),
    # within a queue: H takes from L (rank 0) whatever L's ratio (L holds 4 of a fair 8:
    # below its share, no fair-share victim); newest first: 3, then 2 (H needs 2 cpus; it
    # has one task pending, so one claim)
    "a claim within its queue takes the lower priority": (
        [Claimant("H", 0, (2.0,), anywhere, 1, victims={"L": 0})], tasks("L", "n0", 4, 1.0, 0),
        {"L": (4.0,), "H": (0.0,)}, {"L": (8.0,), "H": (8.0,)}, {"n0": (0.0,)}, 10, [("H", "n0", (3, 2), ())]),
    # ... and never from a job it does not name (M of the same node, rank absent)
    "a claim within its queue takes only what it names": (
        [Claimant("H", 0, (2.0,), anywhere, 1, victims={"L": 0})], tasks("M", "n0", 4, 1.0, 0),
        {"M": (4.0,), "H": (0.0,)}, {"M": (8.0,), "H": (8.0,)}, {"n0": (0.0,)}, 10, []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gang_preemption_cases(case):
    claimants, running, usage, fair, free, budget, expected = CASES[case]
    capacity = (float(4 * len(free)),)
    got = run_plan(claimants, running, usage, fair, free, capacity, budget)
    assert [(p.job, p.node, p.victims, p.victim_gangs) for p in got] == expected


def random_gang_state(seed: int):
    """Two-resource nodes filled with random tasks of random jobs, some of them gangs
    (each gang's tasks over several nodes); fair shares a random weighted split, each
    gang's rounded to all (its holding) or nothing; claimants below their fair share,
    some of them gangs of 2-3 tasks."""
    rng = random.Random(seed)
    m = 2
    nodes = [f"n{i}" for i in range(rng.randint(1, 4))]
    capacity = (8.0 * len(nodes), 8.0 * len(nodes))
    jobs = [f"j{i}" for i in range(rng.randint(2, 5))]
    gangs = {j for j in jobs if rng.random() < 0.4}
    running, usage, free, fair = fill_nodes(rng, {n: (8.0, 8.0) for n in nodes}, jobs, [0, 1, 2], gangs)
    for g in gangs:
        fair[g] = usage[g] if rng.random() < 0.5 else (0.0, 0.0)
    claimants = []
    for j in sorted(jobs, key=lambda j: ratio(usage[j], fair[j], capacity)):
        if ratio(usage[j], fair[j], capacity) >= 1:
            continue
        if rng.random() < 0.4:
            members = tuple(((float(rng.choice([1, 2])), float(rng.choice([0, 1]))), anywhere)
                            for _ in range(rng.randint(2, 3)))
            total_demand = tuple(sum(d[r] for d, _e in members) for r in range(m))
            claimants.append(Claimant(j, 0, total_demand, anywhere, 1, members))
        else:
            claimants.append(Claimant(j, 0, (float(rng.choice([1, 2])), float(rng.choice([0, 1]))), anywhere))
    got = run_plan(claimants, running, usage, fair, {n: tuple(f) for n, f in free.items()}, capacity,
                   budget=rng.randint(1, 8))
    return running, usage, fair, capacity, claimants, got


@pytest.mark.parametrize("seed", range(60))
def test_gang_preemptions_raise_the_potential_and_never_split_a_gang(seed):
    """Every planned preemption of a random state with gangs: each gang among the victims
    loses all of its tasks, no task is chosen twice, and Phi (sorted share / fair share)
    increases lexicographically."""
    running, usage, fair, capacity, claimants, got = random_gang_state(seed)
    gang_ids: dict[str, set[int]] = {}
    for t in running:
        if t.gang:
            gang_ids.setdefault(t.job, set()).add(t.task_id)
    for p in apply_checking_the_potential(running, usage, fair, capacity, claimants, got):
        for g, ids in gang_ids.items():
            assert ids <= set(p.victims) or not (ids & set(p.victims)), (p, g)  # all of it or none
        assert set(p.victim_gangs) == {g for g, ids in gang_ids.items() if ids <= set(p.victims)}


def test_the_random_gang_states_preempt_gangs():
    """(The property above is not vacuous: gangs are taken and gangs claim.)"""
    victim_gangs = claims = 0
    for seed in range(60):
        _running, _usage, _fair, _capacity, claimants, got = random_gang_state(seed)
        victim_gangs += sum(len(p.victim_gangs) for p in got)
        claims += sum(1 for p in got if p.gang)
    assert victim_gangs >= 5 and claims >= 3, (victim_gangs, claims)


# --- through the engine, for every policy that can preempt --------------------------------

def preempting_policies() -> list[str]:
    """The registered policies with an online mode and a static allocation (fair shares)."""
    out = []
    for name in REGISTRY:
        try:
            make_policy(name).online(("cpu",), parse_scenario({"cluster": {"capacity": {"cpu": 1}}, "jobs": []},
                                                             "<probe>").queues, (1.0,))
            Preemptor(PreemptionConfig(), make_policy(name), ("cpu",))
        except PolicyModeError:
            continue
        out.append(name)
    return out


def random_gang_workload(seed: int, within_queue: bool = False):
    rng = random.Random(seed)
    queues = [{"name": f"q{i}", "weight": rng.choice([1, 2])} for i in range(rng.randint(2, 3))]
    jobs = []
    for i in range(rng.randint(3, 6)):
        entry = {"name": f"j{i}", "queue": rng.choice(queues)["name"], "submit": rng.choice([0, 0, 10, 30, 60]),
                 "priority": rng.choice([0, 0, 1]) if within_queue else 0,
                 "tasks": [{"demand": {"cpu": rng.choice([1, 2]), "mem": rng.choice([1, 2, 4])},
                            "count": rng.randint(2, 5) if i % 2 else rng.randint(6, 20)}]}
        if i % 2:
            entry["gang"] = True
        jobs.append(entry)
    return parse_scenario({"resources": ["cpu", "mem"],
                           "cluster": {"nodes": [{"name": "n", "count": rng.randint(2, 3),
                                                  "capacity": {"cpu": 8, "mem": 16}}]},
                           "queues": queues, "jobs": jobs,
                           "preemption": {"after": 5, "tolerance": 0.02, "max_per_round": 4,
                                          "within_queue": within_queue}}, "<random gangs>")


class Recorder:
    """The engine's executor: tasks end after their job's length (a gang's together)."""

    def __init__(self, sc, lengths):
        self.sc, self.lengths, self.events = sc, lengths, []

    def nodes(self):
        return self.sc.cluster.nodes

    def start(self, launch, now):
        self.events.append((now + self.lengths[launch.job], TaskFinished(launch.task_id)))

    def kill(self, task_id):
        self.events = [(t, e) for t, e in self.events if getattr(e, "task_id", None) != task_id]

    def poll(self):
        return []

    def report(self, event):
        pass


def run_engine(sc, policy: str, seed: int, until: float = 2000.0):
    """Every preemption of the run: (time, its epoch: the fair shares' key and the tasks
    ended so far, preemptor, victims per job, gang launches)."""
    rng = random.Random(seed)
    lengths = {j.name: rng.choice([50.0, 200.0, 800.0]) for j in sc.jobs}
    executor = Recorder(sc, lengths)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
    preemptor = Preemptor(sc.preemption, sched.policy, sc.resources)
    engine = Engine(sched, executor, preemptor)
    pending = sorted(((j.submit_s, JobArrived(j)) for j in sc.jobs), key=lambda te: te[0])
    executor.events.extend(pending)
    log = []
    now = 0.0
    ended = 0  # tasks ended so far: only preemptions and launches move usage between two ends
    while executor.events:
        now = min(t for t, _e in executor.events)
        if now > until:
            break
        events = [e for t, e in executor.events if t == now]
        executor.events = [(t, e) for t, e in executor.events if t != now]
        events = [e for e in events if not isinstance(e, TaskFinished) or e.task_id in sched.tasks]
        ended += sum(1 for e in events if isinstance(e, TaskFinished))
        instant = engine.step(now, events)
        for p in instant.preempted:
            lost = {}
            for task in p.victims:
                lost[task.job] = lost.get(task.job, 0) + 1
            log.append((now, (preemptor._key, ended), p.job, lost, len(p.launches)))
        wake = engine.wake_at()
        if wake is not None and wake > now and not any(isinstance(e, Wake) and t == wake for t, e in executor.events):
            executor.events.append((wake, Wake()))
    return log


@pytest.mark.parametrize("policy", preempting_policies())
@pytest.mark.parametrize("within_queue", [False, True])
def test_engine_preemption_never_splits_a_gang_and_never_loops(policy, within_queue):
    """Random small workloads with gangs (and priorities, with ``within_queue``): every
    victim gang loses all of the tasks it ran, a gang that preempts starts whole or not at
    all, and within an epoch (the fair shares unchanged and no task ended: the state moves
    only by launches and preemptions, the potential argument's setting) no job preempts
    a job that preempted it (no A -> B then B -> A). (Across epochs it may: a task's end
    lowers a share without a preemption.)"""
    gangs_hit = 0
    for seed in range(6):
        sc = random_gang_workload(seed, within_queue)
        gang_sizes = {j.name: j.total_count for j in sc.jobs if j.gang}
        taken: dict = {}  # epoch -> (preemptor, victim) pairs so far
        for now, epoch, preemptor, lost, gang_launches in run_engine(sc, policy, seed):
            for victim, n in lost.items():
                if victim in gang_sizes:
                    assert n == gang_sizes[victim], (seed, now, victim, n)  # (its tasks run and end together)
                    gangs_hit += 1
                pairs = taken.setdefault(epoch, set())
                assert (victim, preemptor) not in pairs, f"seed {seed}, t={now}: {victim} and {preemptor} loop"
                pairs.add((preemptor, victim))
            if preemptor in gang_sizes:
                assert gang_launches in (0, gang_sizes[preemptor])
    assert gangs_hit, f"{policy}: no gang was preempted in the random workloads"


# --- priority preemption within a queue -------------------------------------------------------

WITHIN = {
    "resources": ["cpu"],
    "cluster": {"nodes": [{"name": "n", "count": 2, "capacity": {"cpu": 4}}]},
    "queues": [{"name": "a"}, {"name": "b"}],
    "jobs": [{"name": "low", "queue": "a", "tasks": [{"demand": {"cpu": 1}, "count": 4}]},
             {"name": "other", "queue": "b", "tasks": [{"demand": {"cpu": 1}, "count": 4}]},
             {"name": "high", "queue": "a", "submit": 10, "priority": 5,
              "tasks": [{"demand": {"cpu": 1}, "count": 2}]}],
}


def high_priority_run(within_queue: bool | None):
    data = dict(WITHIN)
    if within_queue is not None:
        data["preemption"] = {"after": 5, "within_queue": within_queue}
    sc = parse_scenario(data, "<within>")
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
    engine = Engine(sched, Recorder(sc, {"low": 1000.0, "other": 1000.0, "high": 1000.0}),
                    None if sc.preemption is None else Preemptor(sc.preemption, sched.policy, sc.resources))
    engine.step(0.0, [JobArrived(j) for j in sc.jobs if j.submit_s == 0])
    engine.step(10.0, [JobArrived(j) for j in sc.jobs if j.submit_s == 10])
    instant = engine.step(15.0, [Wake()])
    held = {name: sum(1 for t in sched.tasks.values() if t.job == name) for name in ("low", "other", "high")}
    return held, instant.preempted


def test_within_queue_a_higher_priority_takes_from_its_own_queue_only():
    # low and other fill the 8 cpus at 0 (4 each: each queue at its fair share 4, so no
    # fair-share preemption); high (priority 5, queue a) arrives at 10 and waits. With
    # within_queue it takes 2 of low's tasks at 15 (after 5 s), none of other's
    held, preempted = high_priority_run(True)
    assert held == {"low": 2, "other": 4, "high": 2}
    assert {t.job for p in preempted for t in p.victims} == {"low"} and len(preempted) == 2
    # default off: the same section without within_queue, or no section, takes nothing
    for setting in (False, None):
        held, preempted = high_priority_run(setting)
        assert held == {"low": 4, "other": 4, "high": 0} and preempted == ()


def test_within_queue_is_off_by_default():
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "preemption": {}, "jobs": []}, "<default>")
    assert sc.preemption.within_queue is False
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "preemption": {"within_queue": True}, "jobs": []},
                        "<on>")
    assert sc.preemption.within_queue is True
