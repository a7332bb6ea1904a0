"""serve's own job history: the SQLite store of ``fairshare serve --db FILE`` -> scenario.

Also ``fairshare export --db FILE -o SCENARIO`` (the same conversion). Read with the
history kinds' shared rules (``traces/history.py``, docs/traces.md#fairshare-db). The
database is opened read-only (SQLite ``mode=ro``): a running service is not disturbed
and the file is never changed. Its schema is ``live/store.py``'s (version 3 or 4).

- **Jobs**: one per ``jobs`` row, under its name and queue (dotted, as submitted);
  submit ``jobs.submitted_at``. Task classes and demands from the stored job document
  (``jobs.spec``: ``tasks[class_index].demand``).
- **Tasks**: one per ``tasks`` row that started. Its duration is its *last attempt's*
  (``finished_at - started_at``): earlier attempts that were preempted or failed and
  retried are the old policy's lost work, not the workload's. A task still running is
  censored at the history's last time; one never started (pending, cancelled while
  pending) is counted, not converted. A task cancelled while running keeps the time it ran.
- **Queues and cluster**: ``--config CLUSTER.yaml`` (the file serve ran with) gives the
  ``resources``, ``cluster`` and ``queues`` as they are; without it, the queues are the
  jobs' and their weights the last ``queues set`` weights stored (``queue_changes``), and
  the cluster is ``--machines`` x ``--node-capacity`` (or derived, like every history).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fairshare.traces.base import CommonOptions, Conversion
from fairshare.traces.common import BadData, Progress, TraceError, clean_name
from fairshare.traces.history import (HistoryOptions, Run, add_history_arguments, convert_history, history_options,
                                      read_yaml_option)

NAME = "fairshare-db"
SUMMARY = "fairshare serve's SQLite store (--db): the jobs that ran, per task, read-only"
#: the store schema versions this reader knows (live/store.py SCHEMA_VERSION and the ones
#: before whose job tables are the same: 5 added only the decayed usage table)
READABLE_VERSIONS = ("3", "4", "5")


@dataclass
class Options(HistoryOptions):
    config: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = add_history_arguments(parser, "fairshare-db options")
    g.add_argument("--config", default=None, metavar="CLUSTER.yaml",
                   help="serve's config file: its resources, cluster and queues replace the derived ones")


def options_from_args(ns: argparse.Namespace) -> Options:
    return Options(**history_options(ns), config=ns.config)


def default_inputs(directory: Path) -> list[Path]:
    return sorted([*directory.glob("*.db"), *directory.glob("*.sqlite")])


def open_read_only(path: Path) -> sqlite3.Connection:
    """The store, read-only; a clear error when it is not a fairshare store we can read."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        got = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"{path}: not a fairshare serve database ({exc})") from None
    if got is None or got[0] not in READABLE_VERSIONS:
        db.close()
        raise TraceError(f"{path}: store schema version {got[0] if got else 'unknown'}; this fairshare reads "
                         f"versions {', '.join(READABLE_VERSIONS)}")
    return db


def stored_weights(db: sqlite3.Connection) -> dict[str, float]:
    """The queue weights of the stored ``queues set`` changes (the last one of each queue wins)."""
    weights: dict[str, float] = {}
    for (change,) in db.execute("SELECT change FROM queue_changes ORDER BY id"):
        try:
            doc = json.loads(change)
        except json.JSONDecodeError:
            continue
        for queue, weight in (doc.get("weights") or {}).items():
            if isinstance(weight, (int, float)) and weight > 0:
                weights[queue] = float(weight)
    return weights


def db_runs(path: Path, db: sqlite3.Connection, bad: BadData) -> Iterator[Run]:
    """One run per task row, in task order (a job's tasks are contiguous: one insert)."""
    spec_of: tuple[int, Any] = (-1, None)
    # tasks whose cancel ended a running attempt: finish_tasks records a task event
    # "cancelled"; cancel_job (pending tasks) records only the job's "cancel"
    cancelled_running = {r[0] for r in db.execute("SELECT task_id FROM events WHERE kind='cancelled' AND "
                                                  "task_id IS NOT NULL")}
    rows = db.execute("SELECT t.id, t.job_id, t.class_index, t.class_name, t.state, t.started_at, t.finished_at, "
                      "j.name, j.queue, j.spec, j.submitted_at FROM tasks t JOIN jobs j ON j.id = t.job_id "
                      "ORDER BY t.id")
    for row in rows:
        where = f"{path}:tasks.id={row['id']}"
        if spec_of[0] != row["job_id"]:
            try:
                spec_of = (row["job_id"], json.loads(row["spec"]))
            except json.JSONDecodeError as exc:
                spec_of = (row["job_id"], None)
                bad.add("unparsable field", f"{path}:jobs.id={row['job_id']}", f"spec: {exc}")
        spec = spec_of[1]
        try:
            demand = {r: float(a) for r, a in spec["tasks"][row["class_index"]]["demand"].items()}
        except (TypeError, KeyError, IndexError, ValueError, AttributeError):
            if spec is not None:
                bad.add("missing field", where, f"jobs.spec tasks[{row['class_index']}].demand")
            continue
        # pending: waiting (again, if requeued or preempted: that attempt did not finish);
        # cancelled while pending (cancel_job: it may keep the started_at of an attempt
        # preempted before) is not a run either
        waiting = row["state"] == "pending" or (row["state"] == "cancelled" and row["id"] not in cancelled_running)
        started = None if waiting else row["started_at"]
        end = None if row["state"] == "running" else row["finished_at"]
        classes = len(spec.get("tasks") or []) if isinstance(spec, dict) else 1
        yield Run(f"job{row['job_id']}", clean_name(row["name"]), row["queue"], float(row["submitted_at"]),
                  started, end, demand, where, class_name=row["class_name"] if classes > 1 else None)


def convert(inputs: list[Path], common: CommonOptions, opts: Options, bad: BadData,
            progress: Progress | None = None) -> Conversion:
    if len(inputs) != 1:
        raise TraceError(f"fairshare-db: expected one database file, got {len(inputs)}")
    path = inputs[0]
    config = _read_config(opts.config) if opts.config else None
    db = open_read_only(path)
    try:
        weights = stored_weights(db)
        if weights and not opts.weights:
            opts = replace(opts, weights=",".join(f"{q}={w:g}" for q, w in weights.items()))

        def runs(bad: BadData, progress: Progress | None) -> Iterator[Run]:
            yield from db_runs(path, db, bad)

        result = convert_history(NAME, runs, common, opts, bad, progress,
                                 notes=["a task's duration is its last attempt's; earlier (preempted, retried) "
                                        "attempts are not workload"])
    finally:
        db.close()
    if config is not None:
        _apply_config(result, config, opts.config)
    return result


def _read_config(path: str) -> dict[str, Any]:
    doc = read_yaml_option(path, "--config")
    if not isinstance(doc, dict) or "cluster" not in doc:
        raise TraceError(f"--config: {path}: expected serve's config (a mapping with cluster:)")
    return doc


def _apply_config(result: Conversion, config: dict[str, Any], path: str) -> None:
    """serve's resources, cluster and queues replace the derived ones (the jobs stay)."""
    scenario = result.scenario
    jobs = scenario.pop("jobs")
    for key in ("resources", "cluster", "queues"):
        if key in config:
            scenario[key] = config[key]
    scenario["jobs"] = jobs
    result.stats["nodes"] = f"from {path}"
