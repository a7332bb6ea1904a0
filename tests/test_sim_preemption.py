"""Fair-share preemption in the simulator: the late tenant's wait, the outputs
(summary.json, timeline.csv), checkpoints, and determinism."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from fairshare.model import load_scenario, parse_scenario
from fairshare.model.scenario import PreemptionConfig
from fairshare.sim import SimOptions, simulate
from fairshare.sim.metrics import summarize
from fairshare.sim.output import timeline_csv

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "preemption.yaml"


def run(options: SimOptions, policy: str = "hdrf", scenario=None):
    sc = scenario or load_scenario(EXAMPLE)
    result = simulate(sc, policy, options)
    return result, summarize(result, fairness_gap=False)


def test_the_late_tenant_waits_without_preemption_and_not_with_it():
    # examples/preemption.yaml: 4 nodes of 16 cpus; training's 32 tasks of 4 cpus run an
    # hour (16 at a time fill the cluster); queries arrive at 60 s, fair share half the
    # cluster (32 cpus = 16 of its 2-cpu tasks).
    _, wait = run(SimOptions(seed=1, track_fair_share=True))
    assert wait["jobs"]["queries"]["start"] == 3600.0  # the first long tasks end
    assert "preemptions" not in wait and "tasks_preempted" not in wait["jobs"]["training"]
    # starved from 60 until the cluster frees at 3600, less the tolerance's worth: > 3500 s
    assert wait["queues"]["product"]["time_below_fair_share"] > 3500
    result, pre = run(SimOptions(seed=1, preemption=PreemptionConfig(after=30)))
    # starved at 60, preempts at 60 + 30 = 90: the timeout, then at most 4 tasks a round,
    # 8 victims of 4 cpus for 16 tasks of 2: two rounds (the second at the next event)
    assert pre["jobs"]["queries"]["start"] == 90.0
    assert pre["preemptions"] == 8 == pre["jobs"]["training"]["tasks_preempted"]
    assert pre["jobs"]["queries"]["tasks_preempted"] == 0
    assert pre["queues"]["product"]["time_below_fair_share"] < 60
    # every victim started at 0 and was stopped before its first 600 s checkpoint: it
    # loses all it ran, the time of its preemption (4 at 90 s, 4 at the next round)
    rows = [r for r in csv.DictReader(io.StringIO(timeline_csv(result))) if r["kind"] == "preempt"]
    lost = sum(int(r["running_tasks"]) * float(r["time"]) for r in rows)
    assert [int(r["running_tasks"]) for r in rows] == [4, 4] and float(rows[0]["time"]) == 90.0
    assert pre["jobs"]["training"]["work_lost"] == pytest.approx(lost)
    assert pre["work_lost"] == pytest.approx(lost)


def test_preempt_rows_in_the_timeline():
    result, _ = run(SimOptions(seed=1, preemption=PreemptionConfig(after=30)))
    rows = [r for r in csv.DictReader(io.StringIO(timeline_csv(result))) if r["kind"] == "preempt"]
    assert rows and {r["entity"] for r in rows} == {"training"}
    assert sum(int(r["running_tasks"]) for r in rows) == 8
    assert float(rows[0]["time"]) == 90.0 and float(rows[0]["cpu"]) == 4 * int(rows[0]["running_tasks"])


def test_checkpoints_keep_work_and_shorten_the_restart():
    # one node of 4 cpus; a's one task (4 cpus, 1000 s, checkpoint 100) from 0; b arrives
    # at 10 and preempts at 10 + 50 = 60 (fair share: 2 cpus each; taking a's only task
    # would leave a below its fair share, so the loop-free rule refuses; the naive rule
    # takes it): 60 s elapsed, no checkpoint yet: 60 s lost. With b's tasks of 2 cpus and
    # a's of 2: a's newest task goes, having run 60 s, kept 0.
    data = {"cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 4}}]},
            "queues": [{"name": "a"}, {"name": "b"}],
            "jobs": [{"name": "long", "queue": "a", "tasks": [{"demand": {"cpu": 2}, "count": 4, "duration": 1000,
                                                               "checkpoint": 25}]},
                     {"name": "late", "queue": "b", "submit": 10,
                      "tasks": [{"demand": {"cpu": 2}, "count": 1, "duration": 10}]}]}
    sc = parse_scenario(data, "<ckpt>")
    result, s = run(SimOptions(seed=0, preemption=PreemptionConfig(after=50, max_per_round=1)), scenario=sc)
    # at 60 a holds 4 cpus (2 tasks, ratio 2): one task (started at 0) is preempted:
    # 60 s elapsed, checkpoints every 25 s keep 50, 10 s lost; the credit shortens its
    # restart to 1000 - 50 = 950 s
    assert s["jobs"]["long"]["tasks_preempted"] == 1
    assert s["jobs"]["long"]["work_lost"] == pytest.approx(10.0)
    # long: 2 tasks at 0 (end 1000); the preempted one restarts when late's task ends
    # (60 + 10 = 70) and runs 950 s: ends 1020; the last two run 1000-2000 and 1020-2020
    assert s["jobs"]["long"]["finish"] == pytest.approx(2020.0)


def test_same_seed_same_preemptions():
    a, sa = run(SimOptions(seed=3, preemption=PreemptionConfig(after=30)))
    b, sb = run(SimOptions(seed=3, preemption=PreemptionConfig(after=30)))
    assert timeline_csv(a) == timeline_csv(b) and json.dumps(sa) == json.dumps(sb)


def test_policies_without_fair_shares_refuse_preemption():
    from fairshare.policies import PolicyModeError

    with pytest.raises(PolicyModeError, match="preemption needs the policy's fair shares"):
        run(SimOptions(seed=1, preemption=PreemptionConfig()), policy="timefair")


def test_cli_preempt_flag(tmp_path, capsys):
    from fairshare.cli import main

    assert main(["simulate", str(EXAMPLE), "--policy", "hdrf", "--preempt", "--out", str(tmp_path / "o")]) == 0
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert doc["preemptions"] == 8
    assert main(["simulate", str(EXAMPLE), "--policy", "timefair", "--preempt", "--out", str(tmp_path / "t")]) == 2
    assert "preemption needs the policy's fair shares" in capsys.readouterr().err


def test_the_books_settle_a_leaving_job_once():
    """``PreemptionBooks.settle``: a job's figures (nothing preempted: 0 and 0.0; None
    with preemption off) and its unused checkpoint credits go with it."""
    from fairshare.sim.preemption import PreemptionBooks

    job = load_scenario(EXAMPLE).jobs[0]
    books = PreemptionBooks(2, on=True)
    books.tasks_preempted[job.name], books.work_lost[job.name] = 3, 12.5
    books.credits[(job.name, 0)] = [600.0]
    assert books.settle(job) == (3, 12.5)
    assert books.settle(job) == (0, 0.0) and not books.credits and not books.tasks_preempted
    assert PreemptionBooks(2, on=False).settle(job) == (None, None)


# Preemption paced in time (docs/policies.md, "Preemption paced in time"): two nodes of 20
# cpus; "long" (queue a) starts 40 one-cpu tasks at 0 that run `unrelated` seconds, with
# 40 more pending (so it keeps a fair share of 20 and may be a victim); "short" (queue b)
# arrives at 10 with one-cpu tasks of 20 s. Fair shares 20/20 (hdrf, weights 1:1).
PACE_SUBMIT, PACE_AFTER, PACE_BUDGET, PACE_ROUND, PACE_FAIR = 10.0, 30.0, 4, 5.0, 20


def paced_scenario(unrelated: float):
    return parse_scenario({
        "cluster": {"nodes": [{"name": "n", "count": 2, "capacity": {"cpu": 20}}]},
        "queues": [{"name": "a"}, {"name": "b"}],
        "jobs": [{"name": "long", "queue": "a", "tasks": [{"demand": {"cpu": 1}, "count": 80, "duration": unrelated}]},
                 {"name": "short", "queue": "b", "submit": PACE_SUBMIT,
                  "tasks": [{"demand": {"cpu": 1}, "count": 200, "duration": 20}]}]}, "<paced>")


def running_at(result, job: str, t: float) -> int:
    """``job``'s running tasks at ``t`` by the timeline (its last row at or before ``t``)."""
    rows = [r for r in csv.DictReader(io.StringIO(timeline_csv(result)))
            if r["entity"] == job and r["kind"] == "job" and float(r["time"]) <= t]
    return int(rows[-1]["running_tasks"]) if rows else 0


@pytest.mark.parametrize("unrelated", [400.0, 4000.0])
def test_a_paced_round_gives_the_starved_queue_its_share_whatever_ends(unrelated):
    # starved from 10, it may preempt at 10 + 30 = 40; it needs 20 tasks, 4 a round:
    # ceil(20 / 4) = 5 rounds, at 40, 45, 50, 55 and 60 = 10 + 30 + (5 - 1) * 5
    deadline = PACE_SUBMIT + PACE_AFTER + (math.ceil(PACE_FAIR / PACE_BUDGET) - 1) * PACE_ROUND
    paced = PreemptionConfig(after=PACE_AFTER, tolerance=0.01, max_per_round=PACE_BUDGET, round=PACE_ROUND)
    result = simulate(paced_scenario(unrelated), "hdrf", SimOptions(seed=0, preemption=paced))
    assert running_at(result, "short", deadline) == PACE_FAIR
    # one round short of it, one budget short of it: the pace is the rate, not faster
    assert running_at(result, "short", deadline - PACE_ROUND) == PACE_FAIR - PACE_BUDGET
    # never more than the budget per round: each preempt row at its own paced instant
    rows = [r for r in csv.DictReader(io.StringIO(timeline_csv(result))) if r["kind"] == "preempt"]
    times = [float(r["time"]) for r in rows]
    assert all(int(r["running_tasks"]) <= PACE_BUDGET for r in rows) and len(set(times)) == len(times)
    assert all(b - a >= PACE_ROUND for a, b in zip(times, times[1:]))
    # without `round` (a round at every decision), the short tasks' ends (every 20 s) are
    # the only rounds after the deadline: still short of the share then
    unpaced = PreemptionConfig(after=PACE_AFTER, tolerance=0.01, max_per_round=PACE_BUDGET)
    result = simulate(paced_scenario(unrelated), "hdrf", SimOptions(seed=0, preemption=unpaced))
    assert running_at(result, "short", deadline) < PACE_FAIR


def test_round_in_the_preemption_section():
    base = {"cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 4}}]}, "queues": [{"name": "a"}], "jobs": []}
    assert parse_scenario({**base, "preemption": {"round": 5}}, "<r>").preemption == PreemptionConfig(round=5.0)
    assert parse_scenario({**base, "preemption": {}}, "<r>").preemption.round is None
    with pytest.raises(ValueError, match="preemption round must be > 0"):
        PreemptionConfig(round=-1.0)
