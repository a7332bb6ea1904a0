"""Fair-share preemption on the engine (``Preemptor`` + ``Scheduler.preempt``), driven
by a minimal event loop: the late tenant gets its fair share after ``after`` seconds,
victims are never preempted in a loop, and without preemption it waits."""

from __future__ import annotations

import heapq
import random

import pytest

from fairshare.engine import Scheduler
from fairshare.engine.preemption import Preemptor, potential
from fairshare.model.scenario import PreemptionConfig
from fairshare.model import parse_scenario
from fairshare.policies import make_policy


def run(sc, policy: str, config: PreemptionConfig | None, duration_of, until: float, observe=None):
    """Completions, arrivals, then one decision round and (with ``config``) one preemption
    round per instant; a wake-up instant when a starved queue's wait ends. Returns the
    preemptions as (time, victim task ids, preemptor job) and the potential before each."""
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
    pre = Preemptor(config, sched.policy, sc.resources) if config else None
    heap: list = []
    seq = 0
    for job in sc.jobs:
        heapq.heappush(heap, (job.submit_s, 1, seq, job))
        seq += 1
    log = []
    while heap and heap[0][0] <= until:
        now = heap[0][0]
        while heap and heap[0][0] == now:
            _, kind, _, payload = heapq.heappop(heap)
            if kind == 0 and payload in sched.tasks:
                sched.finish(payload, now)
            elif kind == 1:
                sched.submit(payload, now)
        launches = list(sched.schedule(now))
        if pre is not None:
            planned = pre.round(sched, now)
            for p in planned:
                phi = potential({n: sched.usage(n) for n in pre.job_fair}, pre.job_fair, sched.pool.total_capacity)
                _stopped, launch = sched.preempt(p.victims, p.job, p.class_index, p.node, now)
                log.append((now, p.victims, p.job, phi,
                            potential({n: sched.usage(n) for n in pre.job_fair}, pre.job_fair,
                                      sched.pool.total_capacity)))
                if launch is not None:
                    launches.append(launch)
            if planned:  # what the victims left beyond the preemptors' tasks, and the timers
                launches.extend(sched.schedule(now))
                pre.round(sched, now, plan_now=False)
            wake = pre.wake_at()
            if wake is not None and wake > now:
                heapq.heappush(heap, (wake, 2, seq, None))
                seq += 1
        for launch in launches:
            heapq.heappush(heap, (now + duration_of(launch), 0, seq, launch.task_id))
            seq += 1
        if observe is not None:
            observe(now, sched)
    return log


LATE_TENANT = {
    "resources": ["cpu"],
    "cluster": {"nodes": [{"name": "n", "count": 2, "capacity": {"cpu": 4}}]},
    "queues": [{"name": "a"}, {"name": "b"}],
    "jobs": [{"name": "long", "queue": "a", "tasks": [{"demand": {"cpu": 1}, "count": 40}]},
             {"name": "late", "queue": "b", "submit": 60, "tasks": [{"demand": {"cpu": 1}, "count": 40}]}],
}


def held_by(sched, job: str) -> int:
    return sum(1 for t in sched.tasks.values() if t.job == job)


@pytest.mark.parametrize("policy", ["hdrf", "drf", "dff", "hdrf-naive", "asset"])
def test_late_tenant_reaches_its_fair_share_after_the_timeout(policy):
    # A's tasks run 1000 s and fill the 8 cpus at t=0; B arrives at t=60 (fair share 4
    # cpus). Without preemption B waits until t=1000; with after=30 it holds 4 at t=90.
    sc = parse_scenario(LATE_TENANT, "<late>")
    durations = lambda launch: 1000.0 if launch.job == "long" else 10.0  # noqa: E731
    held: dict[float, int] = {}

    def observe(now, sched):
        held[now] = held_by(sched, "late")

    run(sc, policy, None, durations, 500, observe)
    assert max(held.values()) == 0  # waits for the long tasks
    held.clear()
    log = run(sc, policy, PreemptionConfig(after=30, tolerance=0.05, max_per_round=4), durations, 500, observe)
    assert held[60] == 0 and held[90] == 4, held
    assert all(t >= 90 for t, *_ in log)
    victims = [v for _, vs, _, _, _ in log for v in vs]
    assert len(victims) == len(set(victims)) == 4  # each victim once; A keeps its fair 4


def random_run(seed: int):
    """A random workload of 2-4 queues, jobs arriving over time, long and short tasks."""
    rng = random.Random(seed)
    queues = [{"name": f"q{i}", "weight": rng.choice([1, 2])} for i in range(rng.randint(2, 4))]
    jobs = []
    for i, q in enumerate(queues):
        jobs.append({"name": f"j{i}", "queue": q["name"], "submit": rng.choice([0, 0, 20, 50, 120]),
                     "tasks": [{"demand": {"cpu": rng.choice([1, 2]), "mem": rng.choice([1, 2, 4])},
                                "count": rng.randint(10, 40)}]})
    sc = parse_scenario({"resources": ["cpu", "mem"],
                         "cluster": {"nodes": [{"name": "n", "count": rng.randint(1, 3),
                                                "capacity": {"cpu": 8, "mem": 16}}]},
                         "queues": queues, "jobs": jobs}, "<random>")
    lengths = {j.name: rng.choice([30.0, 100.0, 400.0]) for j in sc.jobs}
    log = run(sc, rng.choice(["hdrf", "drf", "dff"]), PreemptionConfig(after=10, tolerance=0.02, max_per_round=3),
              lambda launch: lengths[launch.job], 3000)
    return sc, log


@pytest.mark.parametrize("seed", range(15))
def test_random_workloads_preempt_without_loops(seed):
    sc, log = random_run(seed)
    victims = [v for _, vs, _, _, _ in log for v in vs]
    assert len(victims) == len(set(victims))  # (task ids are never reused: no task preempted twice)
    for _t, _vs, _job, before, after in log:
        assert after > before  # the potential rises at every preemption
    # bounded: no more victims than tasks ever started of the jobs above their share
    assert len(victims) <= sum(j.total_count for j in sc.jobs)


def test_the_random_workloads_do_preempt():
    """(Not vacuous: the workloads above preempt; 27 victims in 9 of the 15 when written.)"""
    victims = [len(vs) for seed in range(15) for _t, vs, *_ in random_run(seed)[1]]
    assert sum(victims) >= 10


# One 4-cpu node; a's tasks take 3 cpus, b's 1; fair shares 2 and 2. a holds one task (3,
# ratio 1.5), b one (1, ratio 0.5): b is starved. Taking a's task would leave a at 0
# (ratio 0 < 1): the loop-free rule refuses, b stays below (indivisible tasks). The naive
# rule takes it; b then fills the node (4, ratio 2), a is starved, takes 3 of b's tasks
# back, and so on: a loop, one turn per ``after`` seconds.
THRASH = {
    "resources": ["cpu"],
    "cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 4}}]},
    "queues": [{"name": "a"}, {"name": "b"}],
    "jobs": [{"name": "big", "queue": "a", "tasks": [{"demand": {"cpu": 3}}]},
             {"name": "small", "queue": "b", "tasks": [{"demand": {"cpu": 1}}]}],
}


@pytest.mark.parametrize("policy", ["hdrf", "drf"])
def test_the_naive_rule_thrashes_where_the_loop_free_rule_does_not(policy):
    sc = parse_scenario(THRASH, "<thrash>")
    durations = lambda launch: 10_000.0  # noqa: E731 - nothing ends during the run
    loop_free = run(sc, policy, PreemptionConfig(after=10, tolerance=0.05, max_per_round=4), durations, 500)
    naive = run(sc, policy, PreemptionConfig(after=10, tolerance=0.05, max_per_round=4, rule="naive"),
                durations, 500)
    assert loop_free == []
    jobs_hit = {job for _t, _vs, job, *_ in naive}
    assert len(naive) >= 10 and jobs_hit == {"big", "small"}  # back and forth, every 10-20 s


def test_the_preemption_section_and_checkpoints_are_validated():
    from fairshare.model.errors import ScenarioError

    data = {"cluster": {"capacity": {"cpu": 4}},
            "preemption": {"after": -1, "tolerance": 2, "max_per_round": 0.5, "rule": "yarn", "foo": 1,
                           "within_queue": "yes", "round": 0},
            "jobs": [{"name": "j", "tasks": [{"demand": {"cpu": 1}, "checkpoint": 0}]}]}
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "<bad>")
    got = {e.path: e.reason for e in info.value.errors}
    assert got == {"jobs[0].tasks[0].checkpoint": "must be > 0, got 0",
                   "preemption.foo": "unknown key (allowed: after, max_per_round, round, rule, tolerance, within_queue)",
                   "preemption.after": "must be >= 0, got -1",
                   "preemption.tolerance": "must be < 1 (a dominant share), got 2",
                   "preemption.max_per_round": "must be a whole number, got 0.5",
                   "preemption.rule": "must be one of loop-free, naive, got 'yarn'",
                   "preemption.within_queue": "must be true or false, got 'yes'",
                   "preemption.round": "must be > 0, got 0"}


def test_the_preemption_section_turns_it_on_with_defaults():
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "preemption": {},
                         "jobs": [{"name": "j", "tasks": [{"demand": {"cpu": 1}, "checkpoint": 60}]}]}, "<ok>")
    assert sc.preemption == PreemptionConfig() and sc.jobs[0].classes[0].checkpoint == 60.0
    assert parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "jobs": []}, "<off>").preemption is None
