"""``simulate --reasons``: per job, seconds pending by reason and the reason changes
(issue 21, item 4), on runs whose waits are derived by hand; off, nothing changes."""

from __future__ import annotations

import csv
import io

from fairshare.model.loader import parse_scenario
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, Simulator
from fairshare.sim.metrics import summarize
from fairshare.sim.output import timeline_csv

# One node of 2 CPUs; queue lim may hold 1 CPU; drf.
# t=0: A (2 tasks of 10 s) and B (1 task of 5 s) arrive: one task of each starts (equal
#   shares, 1/2 each); A's second waits: no node fits it.
# t=1: C (queue lim, 2 tasks of 4 s) arrives: no node fits it either.
# t=5: B ends; C (share 0) goes before A (1/2): C's first task starts; C's second now
#   waits on lim's limit (1 CPU held + 1 asked > 1), A's second on the node still.
# t=9: C's first ends: its second starts (share 0 again), C waits no more.
# t=10: A's first ends: A's second starts.
SCENARIO = {
    "resources": ["cpu"],
    "cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 2}}]},
    "queues": [{"name": "free"}, {"name": "lim", "limit": {"cpu": 1}}],
    "jobs": [
        {"name": "A", "queue": "free", "tasks": [{"demand": {"cpu": 1}, "count": 2, "duration": 10}]},
        {"name": "B", "queue": "free", "tasks": [{"demand": {"cpu": 1}, "count": 1, "duration": 5}]},
        {"name": "C", "queue": "lim", "submit": 1, "tasks": [{"demand": {"cpu": 1}, "count": 2, "duration": 4}]},
    ],
}


def run(reasons: bool):
    sc = parse_scenario(SCENARIO, "reasons")
    result = Simulator(sc, make_policy("drf"), SimOptions(reasons=reasons)).run()
    return result, summarize(result, fairness_gap=False), timeline_csv(result)


def test_seconds_by_reason_and_the_changes_follow_the_runs_starts():
    result, summary, timeline = run(True)
    starts = {name: o.start for name, o in result.jobs.items()}
    assert starts == {"A": 0, "B": 0, "C": 5}
    rows = [r for r in csv.DictReader(io.StringIO(timeline)) if r["kind"] == "reason"]
    changes = [(float(r["time"]), r["entity"], r["reason"]) for r in rows]
    assert changes == [(0.0, "A", "no_node_fits"), (1.0, "C", "no_node_fits"), (5.0, "C", "queue_limit"),
                       (9.0, "C", ""), (10.0, "A", "")]
    jobs = summary["jobs"]
    assert jobs["A"]["pending_by_reason"] == {"no_node_fits": 10.0 - 0.0}
    assert jobs["B"]["pending_by_reason"] == {}
    assert jobs["C"]["pending_by_reason"] == {"no_node_fits": 5.0 - 1.0, "queue_limit": 9.0 - 5.0}


def test_off_the_files_have_nothing_of_it_and_the_decisions_are_the_same():
    off, summary_off, timeline_off = run(False)
    on, summary_on, timeline_on = run(True)
    assert off.pending_by_reason is None and off.reason_changes is None
    assert all("pending_by_reason" not in entry for entry in summary_off["jobs"].values())
    assert timeline_off.splitlines()[0] == "time,kind,entity,running_tasks,dominant_share,cpu"
    # on: the same rows, each with an empty reason column, and the reason rows among them
    same = [line.rsplit(",", 1)[0] for line in timeline_on.splitlines()[1:] if ",reason," not in line]
    assert same == timeline_off.splitlines()[1:]
    assert on.rows == off.rows and on.decisions == off.decisions
