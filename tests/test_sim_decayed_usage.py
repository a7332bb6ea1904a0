"""The simulator's decayed usage outputs (docs/simulation.md, "Decayed usage"): per queue,
at every instant, what the sorter's ledger holds (``sim.recorder.DecayedUsageRecorder``),
written to ``decayed_usage.csv`` and summary.json's ``queues.*.decayed_usage``.

Checked three ways: against an independent ledger per queue charged from the timeline's
queue rows (decayed usage is linear, so a queue's usage is the decay of its allocation
steps, whatever its jobs did); against the sorter's own ledger and leaves at the end;
and, with a half-life of 0, nothing new written."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import replace

import pytest

from fairshare.model.loader import parse_scenario
from fairshare.model.resources import dominant_share
from fairshare.model.scenario import FairnessConfig
from fairshare.policies import make_policy
from fairshare.policies.hdrf_online import HISTORY
from fairshare.policies.machinery.decay import DecayLedger
from fairshare.sim import SimOptions, simulate
from fairshare.sim.metrics import summarize
from fairshare.sim.output import decayed_usage_csv, write_outputs
from fairshare.sim.simulator import Simulator
from fairshare.sim.stream import StreamingOutput

HOUR = 3600.0


def scenario(half_life: float = 4 * HOUR, *, nested: bool = False):
    """Two teams on 6 CPUs / 24 GB: team a from 0 with two jobs (one finite, so its
    history moves to the queue's history leaf), team b from 5 h; tasks of 1 and 2 h."""
    queues = ([{"name": "a", "children": [{"name": "x"}, {"name": "y"}]}, {"name": "b"}] if nested
              else [{"name": "a"}, {"name": "b"}])
    a = "a.x" if nested else "a"
    data = {
        "resources": ["cpu", "memory"],
        "cluster": {"capacity": {"cpu": 6, "memory": 24}},
        "queues": queues,
        "jobs": [
            {"name": "a1", "queue": a, "submit": 0,
             "tasks": [{"demand": {"cpu": 1, "memory": 2}, "count": 12, "duration": HOUR}]},
            {"name": "a2", "queue": "a.y" if nested else "a", "submit": HOUR,
             "tasks": [{"demand": {"cpu": 1, "memory": 6}, "duration": 2 * HOUR}]},
            {"name": "b1", "queue": "b", "submit": 5 * HOUR,
             "tasks": [{"demand": {"cpu": 2, "memory": 2}, "duration": HOUR}]},
        ],
    }
    if half_life:
        data["fairness"] = {"half_life": half_life}
    return parse_scenario(data, "<decayed usage test>")


def replayed(result, half_life: float) -> dict[tuple[float, str], list[float]]:
    """Per (instant, queue), the decayed usage of the queue's allocation steps in the
    timeline, from a ledger of its own (a queue is one entity that holds its rows)."""
    ledger = DecayLedger(half_life, result.scenario.m)
    out = {}
    sampled = sorted({(t, q) for t, q, *_ in result.decayed_usage})
    rows = [r for r in result.rows if r[1] == "queue"]
    k = 0
    for t, queue in sampled:
        while k < len(rows) and rows[k][0] <= t:
            ledger.charge(rows[k][2], rows[k][0], rows[k][5])
            k += 1
        out[(t, queue)] = ledger.usage(queue, t)
    return out


@pytest.mark.parametrize("policy", ["hdrf", "hdrf-naive", "capacity", "dff"])
@pytest.mark.parametrize("nested", [False, True])
def test_a_tree_policys_queue_usage_is_its_allocation_decayed(policy, nested):
    h = 4 * HOUR
    result = simulate(scenario(h, nested=nested), policy, SimOptions(until=20 * HOUR))
    assert result.decayed_usage, "no samples"
    # (a finished job's history stays with its queue: a1 ends before the run does)
    assert result.jobs["a1"].finish is not None
    expected = replayed(result, h)
    for t, queue, _d, _e, usage in result.decayed_usage:
        assert usage == pytest.approx(expected[(t, queue)], rel=1e-9, abs=1e-6), (t, queue)
    # sampled at every instant of the run (the timeline's among them) and at its end
    sampled = {r[0] for r in result.decayed_usage}
    assert {r[0] for r in result.rows} | {result.end_time} <= sampled


def test_the_samples_are_what_the_sorter_orders_by():
    h = 4 * HOUR
    sim = Simulator(scenario(h), make_policy("hdrf"), SimOptions(until=9 * HOUR))  # (9 h: an instant)
    result = sim.run()
    sorter = sim.scheduler.sorter
    ledger = sorter.decay
    end = result.end_time
    assert sorter._keyed_at == end  # (the leaves were last charged at the end: compare them)
    w = ledger.weight(end)
    for queue in ("a", "b"):
        names = [n for n in ledger.entries if n == HISTORY + queue or
                 (n in sorter.jobs and sorter.jobs[n].queue == queue)]
        usage = [math.fsum(ledger.usage(n, end)[r] for n in names) for r in range(2)]
        leaves = [sorter.leaf_usage[sorter.index[n]] for n in names]
        key = [math.fsum(leaf[r] for leaf in leaves) for r in range(2)]  # A + U/W summed over the leaves
        t, q, decayed, effective, sampled = result.decayed_usage_end[queue]
        assert (t, q) == (end, queue)
        assert sampled == pytest.approx(usage, rel=1e-12)
        assert decayed == pytest.approx(dominant_share([u / w for u in usage], sorter.capacity), rel=1e-12)
        assert effective == pytest.approx(dominant_share(key, sorter.capacity), rel=1e-12)
    assert HISTORY + "a" in ledger.entries  # (a1 finished: its usage is its queue's history)
    summary = summarize(result, fairness_gap=False)
    for queue in ("a", "b"):
        assert summary["queues"][queue]["decayed_usage"] == dict(zip(("cpu", "memory"),
                                                                     result.decayed_usage_end[queue][4]))
        assert summary["queues"][queue]["decayed_share"] == result.decayed_usage_end[queue][2]


def test_a_flat_policy_forgets_a_finished_jobs_usage():
    # drf orders jobs and forgets a finished job's history: queue a's usage is then a2's alone
    h = 4 * HOUR
    sim = Simulator(scenario(h), make_policy("drf"), SimOptions(until=20 * HOUR))
    result = sim.run()
    assert result.jobs["a1"].finish is not None
    ledger = sim.scheduler.sorter.decay
    assert set(ledger.entries) == {"a2", "b1"}
    end_a = result.decayed_usage_end["a"]
    assert end_a[4] == pytest.approx(ledger.usage("a2", result.end_time), rel=1e-12)
    # before a1 ended, a's usage was both jobs'
    both = [row for row in result.decayed_usage if row[1] == "a" and row[0] < result.jobs["a1"].finish]
    assert both and all(u > 0 for u in both[-1][4])


def test_the_files(tmp_path):
    result = simulate(scenario(), "hdrf", SimOptions(until=10 * HOUR))
    paths = write_outputs(tmp_path, result, summarize(result, fairness_gap=False))
    text = paths["decayed_usage"].read_text(encoding="utf-8")
    assert text == decayed_usage_csv(result)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["time", "queue", "decayed_share", "effective_share", "cpu", "memory"]
    assert len(rows) == 1 + len(result.decayed_usage)
    for line, (t, queue, decayed, effective, usage) in zip(rows[1:], result.decayed_usage):
        assert (float(line[0]), line[1]) == (t, queue)
        assert [float(x) for x in line[2:]] == pytest.approx([decayed, effective, *usage], rel=1e-11)


def test_half_life_0_writes_nothing_new(tmp_path):
    result = simulate(scenario(0.0), "hdrf", SimOptions(until=10 * HOUR))
    assert result.decayed_usage is None and result.decayed_usage_end is None
    paths = write_outputs(tmp_path, result, summarize(result, fairness_gap=False))
    assert "decayed_usage" not in paths and not (tmp_path / "decayed_usage.csv").exists()
    summary = summarize(result, fairness_gap=False)
    assert all("decayed_usage" not in q for q in summary["queues"].values())


def test_a_streaming_run_has_the_summary_values_without_samples(tmp_path):
    sc = scenario()
    up = simulate(sc, "hdrf", SimOptions(until=10 * HOUR))
    empty = replace(sc, jobs=())
    sink = StreamingOutput(empty, tmp_path, scenario_name="s")
    streamed = Simulator(empty, make_policy("hdrf"), SimOptions(until=10 * HOUR), arrivals=iter(sc.jobs),
                         sink=sink).run()
    summary = sink.finish(streamed)
    assert streamed.decayed_usage is None
    for queue in ("a", "b"):
        assert summary["queues"][queue]["decayed_usage"] == pytest.approx(
            dict(zip(("cpu", "memory"), up.decayed_usage_end[queue][4])), rel=1e-12)


def test_cumulative_usage_is_the_resource_seconds_used():
    # half-life infinite: nothing decays, U is the resource-seconds each queue held
    sc = replace(scenario(), fairness=FairnessConfig(math.inf))
    result = simulate(sc, "hdrf", SimOptions(until=10 * HOUR))
    for queue in ("a", "b"):
        steps = [(t, alloc) for t, kind, e, _r, _s, alloc in result.rows if kind == "queue" and e == queue]
        held = [0.0, 0.0]
        for i, (t, alloc) in enumerate(steps):
            nxt = steps[i + 1][0] if i + 1 < len(steps) else result.end_time
            held = [h + a * (nxt - t) for h, a in zip(held, alloc)]
        assert result.decayed_usage_end[queue][4] == pytest.approx(held, rel=1e-12)


@pytest.mark.parametrize("half_life", [0.0, 4 * HOUR])
def test_the_reports_show_decayed_usage_when_there_is_some(half_life):
    from fairshare.report.html import run_report
    from fairshare.report.terminal import simulate_text

    result = simulate(scenario(half_life), "hdrf", SimOptions(until=10 * HOUR))
    summary = summarize(result, fairness_gap=False)
    page = run_report(result, summary, scenario_name="s")
    text = simulate_text(summary, None)
    assert ("Decayed usage per top-level queue" in page) == bool(half_life)
    assert ("decayed share at end" in text) == bool(half_life)
    if half_life:
        share_b = f"{100 * summary['queues']['b']['decayed_share']:.2f}%"
        assert share_b in text


def test_simulate_and_compare_write_the_file(tmp_path, capsys):
    import json
    from pathlib import Path

    from fairshare.cli import main

    example = Path(__file__).resolve().parents[1] / "examples" / "repro" / "memory_idle_team.yaml"
    out = tmp_path / "one"
    assert main(["simulate", str(example), "--policy", "hdrf", "--until", "604800", "--out", str(out)]) == 0
    rows = list(csv.reader((out / "decayed_usage.csv").open(encoding="utf-8")))
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    last = {row[1]: row for row in rows[1:] if float(row[0]) == 604800}
    assert set(last) == {"a", "b"}
    for queue, row in last.items():
        assert float(row[2]) == pytest.approx(summary["queues"][queue]["decayed_share"], rel=1e-11)
        assert float(row[4]) == pytest.approx(summary["queues"][queue]["decayed_usage"]["cpu"], rel=1e-11)
    assert "decayed share at end" in capsys.readouterr().out
    assert main(["compare", str(example), "--policies", "drf,hdrf", "--until", "604800",
                 "--out", str(tmp_path / "both")]) == 0
    assert (tmp_path / "both" / "drf" / "decayed_usage.csv").read_text(encoding="utf-8").startswith(
        "time,queue,decayed_share,effective_share,cpu,memory\n")
    page = (tmp_path / "both" / "report.html").read_text(encoding="utf-8")
    assert "Decayed share of each top-level queue under drf" in page
    assert "Decayed share of each top-level queue under hdrf" in page
