"""Simulator and serve give the same reasons for the same state (issue 21, "Done when").

The workload of test_live_parity.py runs in the simulator, which explains every job at
every instant (``engine.explain``, at the quiet point after the instant's decision). The
live service (``ManualExecutor``, its clock moved by hand to the simulated times) then gets
the same jobs and the same completions in the same order, and after each of its passes
``GET /v1/jobs/{id}/explain``'s document (``LiveService.explain``) is compared with the
simulator's at that instant: same reasons, same counterfactuals, every number, once the
names are translated (the simulator's job names are serve's job ids, the k-th launch's
task id of one run is the k-th launch's of the other).
"""

from __future__ import annotations

import pytest

from live_helpers import ManualExecutor, config_doc, feed_completions, make_config
from test_live_parity import WORKLOAD, durations, jobs_doc
from fairshare.engine.explain import explain
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from fairshare.model.loader import parse_scenario
from fairshare.policies import make_policy
from fairshare.sim.simulator import SimOptions, Simulator

ADMIN = Principal("admin", admin=True)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def simulate_with_reasons(policy: str):
    """The simulator's launches ``(job, node, start, task id)`` and, per instant, each
    job's explanation there (``{time: {job: document}}``)."""
    doc = config_doc()
    del doc["auth"]
    doc["jobs"] = jobs_doc()
    sim = Simulator(parse_scenario(doc, "parity"), make_policy(policy), SimOptions(seed=0))
    launches, explained = [], {}
    start, step = sim.executor.start, sim.engine.step

    def record_launch(launch, t):
        start(launch, t)
        launches.append((launch.job, launch.node, t, launch.task_id))

    def step_and_explain(t, events, commit=None):
        instant = step(t, events, commit)
        explained[t] = {name: explain(sim.scheduler, name, t).to_json() for name in sorted(sim.scheduler.jobs)}
        return instant

    sim.executor.start = record_launch
    sim.engine.step = step_and_explain
    assert sim.run().all_finished
    return launches, explained


def renamed(value, names: dict, tasks: dict):
    """``value`` (a JSON document) with every job name and task id of the simulator as
    serve's; a list of task ids sorted (tasks that started at the same time are listed
    by id, and the ids are each runtime's own)."""
    if isinstance(value, dict):
        return {k: (sorted(tasks[t] for t in v) if k == "tasks" and isinstance(v, list) else renamed(v, names, tasks))
                for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, names, tasks) for v in value]
    if isinstance(value, str):
        return names.get(value, value)
    return value


@pytest.mark.parametrize("policy", ["drf", "hdrf"])
def test_serve_explains_each_state_as_the_simulator_does(tmp_path, policy):
    sim_launches, sim_explained = simulate_with_reasons(policy)
    dur = durations()
    ends = [t + dur[job] for job, _, t, _ in sim_launches]

    config = make_config()
    commands = CommandBook()
    ex = ManualExecutor(config.nodes, commands)
    clock = Clock()
    svc = LiveService(config, Store(tmp_path / "fs.db"), ex, policy=policy, commands=commands, clock=clock,
                      wall_clock=clock)
    svc._t0 = 0.0  # (the service's clock is the simulated one, and so is the wall clock)
    svc.recover()
    ids = svc.submit(ADMIN, {"jobs": jobs_doc()})
    names = {n: str(i) for i, (n, *_rest) in zip(ids, WORKLOAD)}
    compared = 0

    def compare(t: float) -> int:
        # the task ids launched so far, the k-th of one run as the k-th of the other
        tasks = {sim_launches[k][3]: la.task_id for k, la in enumerate(ex.started)}
        count = 0
        for name, expected in sim_explained[t].items():
            if expected["state"] not in ("pending", "running"):
                continue
            got = renamed(svc.explain(ADMIN, int(names[name])), {}, {la.task_id: la.task_id for la in ex.started})
            want = renamed({k: expected[k] for k in ("state", "reasons", "would_start_if")}, names, tasks)
            assert {k: got[k] for k in ("state", "reasons", "would_start_if")} == want, f"job {name} at {t}"
            count += bool(expected["reasons"])
        return count

    svc.step()  # t = 0: every job arrives, one round
    compared += compare(0.0)
    for t in feed_completions(svc, ex, ends, before_pass=lambda t: setattr(clock, "t", t)):
        compared += compare(t)
    assert [(la.node) for la in ex.started] == [node for _, node, _, _ in sim_launches]
    # (the workload keeps jobs waiting at most instants: the comparison is not empty)
    assert compared >= 10
