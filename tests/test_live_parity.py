"""Parity: the same workload through the simulator and through the live service gives the
same sequence of (job, node) decisions, given the same completion order.

The simulator runs the workload with fixed durations; its executor is wrapped to record
every launch and when it ends. The live service (on ``ManualExecutor``) then gets the
same jobs in one submission and, instant by instant, the same completions in the same
order (k-th launch of one run <-> k-th launch of the other). Both sides call the same
``Scheduler`` and policy objects through ``engine.step.Engine``; nothing here is a second
implementation. The real-Ray variant (completion order taken from Ray) is in
test_live_ray.py.
"""

from __future__ import annotations

import pytest

from live_helpers import (ManualExecutor, config_doc, feed_completions, make_config, replay, simulate_launches,
                          workload_jobs)
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.service import LiveService
from fairshare.live.store import Store

ADMIN = Principal("admin", admin=True)

# (name, queue, count, demand, duration s): heterogeneous demands that need the MIC and
# GPU nodes, so placement matters as much as the order
WORKLOAD = [
    ("A", "ads.prod", 6, {"cpu": 1, "memory": 2}, 3),
    ("B", "ads.test", 4, {"cpu": 2}, 5),
    ("C", "dev", 5, {"cpu": 1, "gpu": 1}, 2),
    ("D", "dev", 3, {"cpu": 1, "mic": 1}, 4),
    ("E", "ads.prod", 4, {"cpu": 1, "memory": 4}, 1),
]


def jobs_doc() -> list[dict]:
    return workload_jobs(WORKLOAD)


def simulate(policy: str):
    doc = config_doc()
    del doc["auth"]
    doc["jobs"] = jobs_doc()
    return simulate_launches(doc, policy, "parity")


def durations() -> dict[str, float]:
    return {n: float(t) for n, _, _, _, t in WORKLOAD}


@pytest.mark.parametrize("policy", ["drf", "hdrf", "dff", "capacity"])
def test_live_service_makes_the_simulators_decisions(tmp_path, policy):
    sim_launches = simulate(policy)
    # end of the k-th launch: start + the job's fixed duration (slots are off: no stretch)
    dur = durations()
    ends = [t + dur[job] for job, _, t in sim_launches]

    config = make_config()
    commands = CommandBook()
    ex = ManualExecutor(config.nodes, commands)
    svc = LiveService(config, Store(tmp_path / "fs.db"), ex, policy=policy, commands=commands, record_rounds=True)
    svc.recover()
    ids = svc.submit(ADMIN, {"jobs": [{k: v for k, v in j.items()} for j in jobs_doc()]})
    name_of = {str(i): n for i, (n, *_rest) in zip(ids, WORKLOAD)}
    svc.step()  # the instant t = 0: every job arrives, one scheduling round

    # then every later instant, in time order; within an instant completions go in launch
    # order (the simulator's heap breaks equal times by push order)
    for _t in feed_completions(svc, ex, ends):
        pass

    live = [(name_of[la.job], la.node) for la in ex.started]
    assert live == [(job, node) for job, node, _ in sim_launches]
    assert len(live) == sum(c for _, _, c, _, _ in WORKLOAD)  # 6 + 4 + 5 + 3 + 4 = 22 decisions
    assert {j["state"] for j in svc.list_jobs(None)} == {"succeeded"}
    # and a replay of the rounds the service recorded (arrivals, completions) decides the same
    assert [(la.job, la.node, la.task_id) for la in replay(svc, policy)] == \
        [(la.job, la.node, la.task_id) for la in ex.started]
