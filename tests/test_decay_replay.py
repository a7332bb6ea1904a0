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

from live_helpers import ManualExecutor, config_doc, feed_completions, make_config, simulate_launches, workload_jobs
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.decay import queue_usage
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from test_live_parity import WORKLOAD as PARITY_WORKLOAD

ADMIN = Principal("admin", admin=True)
HALF_LIFE = 4.0  # short against the run (about 20 s): the history decays a lot meanwhile

# serve's parity workload (mixed demands, queues of both levels) and one more job in dev
WORKLOAD = PARITY_WORKLOAD + [("F", "dev", 8, {"cpu": 1}, 6)]


def simulate(policy: str):
    """The simulator's launches as ``(job, node, time, decayed usage per queue then)``,
    and the decayed usage 10 s after the run."""
    doc = config_doc()
    del doc["auth"]
    doc["jobs"] = workload_jobs(WORKLOAD)
    doc["fairness"] = {"half_life": HALF_LIFE}
    seen = {}

    def usage(sim, t):
        seen["sim"] = sim
        return queue_usage(sim.scheduler, t)

    launches = simulate_launches(doc, policy, "replay", observe=usage)
    return launches, queue_usage(seen["sim"].scheduler, seen["sim"].now + 10.0)


@pytest.mark.parametrize("policy", ["drf", "hdrf", "capacity", "dff"])
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
    ids = svc.submit(ADMIN, {"jobs": workload_jobs(WORKLOAD)})
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
