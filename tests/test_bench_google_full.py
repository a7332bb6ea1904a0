"""``benchmarks/bench_google_full.py``'s progress counters (``Backlog``): what they count
is what the run did, and counting changes nothing in the run."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from fairshare.policies import make_policy
from fairshare.sim import SimOptions, Simulator
from fairshare.sim.stream import StreamingOutput
from test_sim_stream import random_scenario

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_google_full.py"


def bench_module():
    spec = importlib.util.spec_from_file_location("bench_google_full", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def streamed(tmp_path: Path, name: str, policy: str, counted: bool):
    scenario = random_scenario(3, jobs=40, events=None)
    empty = replace(scenario, jobs=())
    sink = StreamingOutput(empty, tmp_path / name, scenario_name="s")
    sim = Simulator(empty, make_policy(policy), SimOptions(seed=1), arrivals=iter(scenario.jobs), sink=sink)
    backlog = bench_module().Backlog(sim) if counted else None
    result = sim.run()
    sink.finish(result)
    return (tmp_path / name / "summary.json").read_bytes(), result, backlog


@pytest.mark.parametrize("policy", ["hdrf", "drf"])
def test_backlog_counts_the_runs_decisions_and_changes_nothing(tmp_path, policy):
    plain, result, _ = streamed(tmp_path, "plain", policy, counted=False)
    counted, counted_result, backlog = streamed(tmp_path, "counted", policy, counted=True)
    assert counted == plain
    assert counted_result.decisions == result.decisions
    # every decision asked the sorter once or twice (a guarantee first): the picks counted
    assert backlog.calls["pick"] + backlog.calls["pick_among"] >= result.decisions > 0
    if policy == "hdrf":  # (a tree sorter with views: its catch-ups and flushes are counted)
        assert backlog.calls["catch_up"] > 0 and backlog.items["catch_up"] >= backlog.calls["catch_up"]
        assert backlog.calls["flush"] > 0 and backlog.items["flush"] >= backlog.calls["flush"]
    else:
        assert backlog.calls["catch_up"] == backlog.calls["flush"] == 0
    line = backlog.line(result.tasks_completed)
    assert f"{result.decisions / result.tasks_completed:.2f} decisions" in line
    assert "0 jobs in the system (0 demanding" in line  # (all finished)
    assert ("sorter slots" in line) == (policy == "hdrf")  # (only a tree sorter has a node table)
    # the next line counts from this one: nothing since
    assert "0.00 decisions" in backlog.line(result.tasks_completed)
