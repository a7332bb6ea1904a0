"""Replay: the same event history (submissions at 0, task ends at the simulator's times)
through the simulator's engine and through serve's (``LiveService`` on ``ManualExecutor``,
its engine clock moved to the simulated times) gives the same launches and, at every
launch, the same decayed usage per queue (``live.decay.queue_usage``).

Exactly equal, not within a tolerance: both sides run the same ``Scheduler``, sorter and
``DecayLedger`` code on the same floats (the times are the same numbers: serve's clock
is set to the simulator's instants), charge the entries in the same order (the same
decisions in the same order), and ``queue_usage`` sums them in the ledger's order,
which is that charge order on both sides; the job names differ (the simulator's own,
serve's job ids) but never enter the arithmetic.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from live_helpers import ManualExecutor, config_doc, feed_completions, make_config
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.decay import queue_usage
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from fairshare.model.loader import parse_scenario
from fairshare.policies import make_policy
from fairshare.sim.simulator import SimOptions, Simulator

ADMIN = Principal("admin", admin=True)
HALF_LIFE = 4.0  # short against the run (about 20 s): the history decays a lot meanwhile

# (name, queue, count, demand, duration s): mixed demands, queues of both levels
WORKLOAD = [
    ("A", "ads.prod", 6, {"cpu": 1, "memory": 2}, 3),
    ("B", "ads.test", 4, {"cpu": 2}, 5),
    ("C", "dev", 5, {"cpu": 1, "gpu": 1}, 2),
    ("D", "dev", 3, {"cpu": 1, "mic": 1}, 4),
    ("E", "ads.prod", 4, {"cpu": 1, "memory": 4}, 1),
    ("F", "dev", 8, {"cpu": 1}, 6),
]


def jobs_doc() -> list[dict]:
    return [{"name": n, "queue": q, "tasks": [{"demand": d, "count": c, "duration": t, "command": "true"}]}
            for n, q, c, d, t in WORKLOAD]


def simulate(policy: str):
    """The simulator's launches as ``(job, node, time, decayed usage per queue then)``."""
    doc = config_doc()
    del doc["auth"]
    doc["jobs"] = jobs_doc()
    doc["fairness"] = {"half_life": HALF_LIFE}
    sim = Simulator(parse_scenario(doc, "replay"), make_policy(policy), SimOptions(seed=0))
    launches = []
    start = sim.executor.start

    def record(launch, t):
        start(launch, t)
        launches.append((launch.job, launch.node, t, queue_usage(sim.scheduler, t)))

    sim.executor.start = record
    assert sim.run().all_finished
    return launches, queue_usage(sim.scheduler, sim.now + 10.0)


@pytest.mark.parametrize("policy", ["drf", "hdrf", "capacity"])
def test_simulator_and_serve_give_the_same_decayed_usage(tmp_path, policy):
    sim_launches, sim_after = simulate(policy)
    dur = {n: float(t) for n, *_rest, t in WORKLOAD}
    ends = [t + dur[job] for job, _, t, _ in sim_launches]

    clock = [0.0]
    config = replace(make_config(), half_life=HALF_LIFE)
    commands = CommandBook()
    ex = ManualExecutor(config.nodes, commands)
    svc = LiveService(config, Store(tmp_path / "fs.db"), ex, policy=policy, commands=commands,
                      clock=lambda: clock[0], wall_clock=lambda: 1_700_000_000.0 + clock[0])
    svc.recover()
    live = []
    start = ex.start

    def record(launch, now):
        start(launch, now)
        live.append((launch.job, launch.node, now, queue_usage(svc.scheduler, now)))

    ex.start = record
    ids = svc.submit(ADMIN, {"jobs": jobs_doc()})
    name_of = {str(i): n for i, (n, *_rest) in zip(ids, WORKLOAD)}
    svc.step()
    for _t in feed_completions(svc, ex, ends, before_pass=lambda t: clock.__setitem__(0, t)):
        pass

    assert [(name_of[j], node, t) for j, node, t, _ in live] == [(j, node, t) for j, node, t, _ in sim_launches]
    # exactly the same floats (module docstring), at each of the 30 launches
    assert [usage for *_head, usage in live] == [usage for *_head, usage in sim_launches]
    assert any(any(u > 0 for u in q) for *_head, usage in live for q in usage.values())
    # and after the run (the tree policies keep the finished jobs' history per queue)
    after = queue_usage(svc.scheduler, clock[0] + 10.0)
    assert after == sim_after
    if policy != "drf":
        assert all(after[q][0] > 0 for q in ("ads.prod", "ads.test", "dev"))
