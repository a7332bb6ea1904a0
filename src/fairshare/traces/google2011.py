"""Google cluster data 2011 (clusterdata-2011-2) ``task_events`` -> scenario.

Mapping (docs/traces.md#google2011):

- **Jobs**: one scenario job per Google job (``j<job_id>``), its tasks one class. Its
  demand is the largest ``cpu_request`` and ``memory_request`` seen for any of its tasks
  (requests are normalized to the largest machine, 1.0; taking the largest means no task
  runs on less than it asked for). Submit: the job's first event in the window.
- **Task runs and durations**: every SCHEDULE (1) opens a run of ``(job, task_index)``;
  EVICT (2), FAIL (3), FINISH (4), KILL (5) and LOST (6) close it; the duration is the
  difference. A task evicted and scheduled again is two runs (the count is runs, not task
  indexes). Runs open at the start of the window (timestamp 0 means "before the trace",
  Google's schema) start at the window start; runs still open at the window end are
  **censored** there and counted in the summary.
- **Queues**: priority band, then user (``--hierarchy``). Bands as the trace's own
  documentation (google/cluster-data, ClusterData2011_2.md) defines them: priorities 0-1
  ``free``, 9-11 ``production``; the rest (2-8) here ``batch``. Users are the trace's hashed
  names, shortened to their first 8 characters (longer when two users share a prefix).
  A job's band is the priority of its first event.
- **Nodes**: the trace's machines are normalized too; the 2011 machine_events are not among
  the inputs, so the cluster is the published machine mix of this trace (Reiss et al.,
  "Heterogeneity and dynamicity of clouds at scale", SoCC 2012, Table 1: 12,583 machines
  in ten (cpu, memory) shapes), scaled to ``--machines`` by largest remainders.
- Rows are expected in time order (the trace's parts are); reading stops at the first
  event after the window end.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairshare.traces.base import CommonOptions, Conversion, NodeFitCache, parse_weights, queue_documents
from fairshare.traces.common import (BadData, LineReader, Progress, TraceError, clean_name, durations_value,
                                     parse_float, sample_keep)

NAME = "google2011"
SUMMARY = "Google cluster data 2011: task_events parts (.csv or .csv.gz)"
RESOURCES = ["cpu", "memory"]
COLUMNS = 13
TRACE_START_S = 600.0  # "real times start at 600 s" (schema: timestamp 0 = before the window)

SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING = range(9)
RUN_ENDS = {EVICT, FAIL, FINISH, KILL, LOST}

#: Reiss et al. SoCC'12 Table 1: (machines, cpu, memory) of the 2011 trace, normalized units.
MACHINE_MIX = [
    (6732, 0.50, 0.50),
    (3863, 0.50, 0.25),
    (1001, 0.50, 0.75),
    (795, 1.00, 1.00),
    (126, 0.25, 0.25),
    (52, 0.50, 0.12),
    (5, 0.50, 0.03),
    (5, 0.50, 0.97),
    (3, 1.00, 0.50),
    (1, 0.50, 0.06),
]
FULL_MACHINES = sum(n for n, _, _ in MACHINE_MIX)  # 12,583

HIERARCHIES = ("band-user", "band", "user", "flat")
WHOLE_COLUMNS = ((0, "timestamp"), (2, "job_id"), (3, "task_index"), (5, "event_type"), (8, "priority"))
WHOLE_INDEX = {name: i for i, name in WHOLE_COLUMNS}


def _is_int(text: str, may_be_empty: bool) -> bool:
    if may_be_empty and not text:
        return True
    try:
        int(text)
    except ValueError:
        return False
    return True


def band_of(priority: int) -> str:
    if priority <= 1:
        return "free"
    if priority >= 9:
        return "production"
    return "batch"


@dataclass
class Options:
    hierarchy: str = "band-user"
    machines: int = FULL_MACHINES
    weights: str | None = None  # e.g. "production=4,batch=2,free=1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("google2011 options")
    g.add_argument("--hierarchy", choices=HIERARCHIES, default="band-user",
                   help="queue tree: priority band then user (default), band only, user only, or flat")
    g.add_argument("--machines", type=int, default=FULL_MACHINES, metavar="N",
                   help=f"nodes: the trace's machine mix scaled to N machines (default {FULL_MACHINES:,}, "
                        "the whole cell)")
    g.add_argument("--weights", default=None, metavar="Q=W,...",
                   help="queue weights by name or dotted path, e.g. production=4,batch=2 (default all 1)")


def options_from_args(ns: argparse.Namespace) -> Options:
    if ns.machines <= 0:
        raise TraceError(f"--machines: must be a positive whole number, got {ns.machines}")
    return Options(ns.hierarchy, ns.machines, ns.weights)


def default_inputs(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.startswith("task_events"))


def machine_nodes(machines: int) -> list[dict[str, Any]]:
    """The machine mix scaled to ``machines`` (largest remainders; ties to the larger group)."""
    exact = [n * machines / FULL_MACHINES for n, _, _ in MACHINE_MIX]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), -MACHINE_MIX[i][0], i))
    for i in order[: machines - sum(counts)]:
        counts[i] += 1
    nodes = []
    for count, (_, cpu, mem) in zip(counts, MACHINE_MIX):
        if count:
            nodes.append({"name": f"m-c{cpu:g}-m{mem:g}", "count": count, "capacity": {"cpu": cpu, "memory": mem}})
    return nodes


class _Job:
    __slots__ = ("submit_s", "user", "priority", "cpu", "memory", "durations", "order")

    def __init__(self, submit_s: float, user: str, priority: int, order: int):
        self.submit_s = submit_s
        self.user = user
        self.priority = priority
        self.cpu = 0.0
        self.memory = 0.0
        self.durations: list[float] = []
        self.order = order


def convert(inputs: list[Path], common: CommonOptions, opts: Options, bad: BadData,
            progress: Progress | None = None) -> Conversion:
    if opts.hierarchy not in HIERARCHIES:
        raise TraceError(f"--hierarchy: one of {', '.join(HIERARCHIES)}, got {opts.hierarchy!r}")
    start_s = TRACE_START_S if common.window_start_s is None else max(common.window_start_s, 0.0)
    end_limit_s = common.window_end_s
    nodes = machine_nodes(opts.machines)
    jobs: dict[int, _Job] = {}
    skipped_jobs: set[int] = set()  # sampled out (a set of ids, not of rows)
    open_runs: dict[tuple[int, int], float] = {}  # (job, task) -> run start (trace seconds)
    last_s = start_s
    rows = 0
    stats_events = 0
    done_bytes = 0
    stopped_at_window = False
    for path in inputs:
        reader = LineReader(path, bad, progress, done_bytes)
        for line in reader:
            if common.limit is not None and rows >= common.limit:
                break
            rows += 1
            f = line.text.split(",")
            where = f"{path}:{line.number}"
            if len(f) != COLUMNS:
                if len(f) == 1 and not f[0].strip():
                    continue
                bad.add("truncated last line" if reader.last_unterminated else "wrong number of columns", where,
                        f"{len(f)} fields, expected {COLUMNS}")
                continue
            try:
                t_us, job_id, task, event = (int(f[i]) for i in (0, 2, 3, 5))
                priority = int(f[8]) if f[8] else 0
            except ValueError:
                column = next(name for i, name in WHOLE_COLUMNS if not _is_int(f[i], i == 8))
                bad.add("unparsable field", where, f"{column}: {f[WHOLE_INDEX[column]]!r} is not a whole number")
                continue
            t_s = t_us / 1e6
            if not 0 <= event <= 8:
                bad.add("unknown event type", where, f"event_type: {event}")
                continue
            if t_s == 0:
                t_s = start_s  # before the trace window (schema): treat as at its start
            if end_limit_s is not None and t_s > end_limit_s:
                stopped_at_window = True
                break
            if job_id in skipped_jobs:
                continue
            job = jobs.get(job_id)
            if job is None:
                if not sample_keep(str(job_id), common.sample, common.seed):
                    skipped_jobs.add(job_id)
                    continue
                job = jobs[job_id] = _Job(t_s, f[6], priority, len(jobs))
            stats_events += 1
            if t_s > last_s:
                last_s = t_s
            if f[9] or f[10]:
                try:
                    cpu = parse_float(f[9]) if f[9] else 0.0
                    mem = parse_float(f[10]) if f[10] else 0.0
                except ValueError:
                    bad.add("unparsable field", where, f"cpu_request {f[9]!r} or memory_request {f[10]!r} is not a number")
                    continue
                if cpu < 0 or mem < 0:
                    bad.add("impossible demand", where, f"negative request (cpu {cpu}, memory {mem})")
                    continue
                if cpu > job.cpu:
                    job.cpu = cpu
                if mem > job.memory:
                    job.memory = mem
            key = (job_id, task)
            if event == SCHEDULE:
                if key in open_runs:  # a run we never saw end: close it here, count it
                    bad.add("SCHEDULE of a task already running", where, f"job {job_id} task {task}")
                    job.durations.append(max(0.0, t_s - max(open_runs[key], start_s)))
                open_runs[key] = t_s
            elif event in RUN_ENDS:
                began = open_runs.pop(key, None)
                if began is not None and t_s >= start_s:
                    job.durations.append(t_s - max(began, start_s))
        done_bytes += reader.bytes_read
        if stopped_at_window or (common.limit is not None and rows >= common.limit):
            break
    end_s = end_limit_s if end_limit_s is not None else last_s
    censored = 0
    for (job_id, _task), began in open_runs.items():
        job = jobs[job_id]
        job.durations.append(end_s - max(began, start_s))
        censored += 1
    open_runs.clear()

    # Build the scenario: jobs with at least one run and a positive, placeable demand.
    biggest = (max(n["capacity"]["cpu"] for n in nodes), max(n["capacity"]["memory"] for n in nodes))
    fit = NodeFitCache(nodes)
    user_names: dict[str, str] = {}
    taken: dict[str, str] = {}
    job_docs = []
    queue_paths: list[str] = []
    seen_paths: set[str] = set()
    never_ran = 0
    runs = 0
    for job_id, job in sorted(jobs.items(), key=lambda kv: (kv[1].submit_s, kv[1].order)):
        if not job.durations:
            never_ran += 1
            continue
        if job.cpu <= 0 and job.memory <= 0:
            bad.add("job without a resource request", f"job {job_id}", f"{len(job.durations)} runs dropped")
            continue
        if not fit.fits({"cpu": job.cpu, "memory": job.memory}):
            bad.add("impossible demand", f"job {job_id}",
                    f"cpu {job.cpu:g}, memory {job.memory:g} fits no machine (largest {biggest[0]:g}, {biggest[1]:g})")
            continue
        user = user_names.get(job.user)
        if user is None:
            width = 8
            while True:
                candidate = clean_name(job.user[:width]) if job.user else "unknown"
                if taken.get(candidate, job.user) == job.user or width >= len(job.user):
                    break
                width += 4
            taken[candidate] = job.user
            user = user_names[job.user] = candidate
        band = band_of(job.priority)
        queue = {"band-user": f"{band}.{user}", "band": band, "user": user, "flat": None}[opts.hierarchy]
        if queue and queue not in seen_paths:
            seen_paths.add(queue)
            queue_paths.append(queue)
        demand = {}
        if job.cpu > 0:
            demand["cpu"] = job.cpu
        if job.memory > 0:
            demand["memory"] = job.memory
        entry: dict[str, Any] = {"name": f"j{job_id}"}
        if queue:
            entry["queue"] = queue
        entry["submit"] = round(max(0.0, job.submit_s - start_s), 3)
        entry["tasks"] = [{"demand": demand, "count": len(job.durations), "duration": durations_value(job.durations)}]
        runs += len(job.durations)
        job_docs.append(entry)
    scenario: dict[str, Any] = {"resources": RESOURCES, "cluster": {"nodes": nodes}}
    if queue_paths:
        scenario["queues"] = queue_documents(queue_paths, parse_weights(opts.weights, "--weights"))
    scenario["jobs"] = job_docs
    stats = {
        "inputs": len(inputs), "rows read": rows, "events used": stats_events,
        "window (trace s)": f"{start_s:g} .. {end_s:g}", "jobs": len(job_docs), "task runs": runs,
        "runs censored at the window end": censored, "jobs never scheduled in the window (dropped)": never_ran,
        "nodes": sum(n["count"] for n in nodes),
    }
    if common.sample < 1:
        stats["jobs sampled out"] = len(skipped_jobs)
    notes = [f"nodes: the 2011 trace's machine mix (Reiss et al. SoCC'12 Table 1) scaled to {opts.machines:,} "
             "machines; cpu and memory normalized to the largest machine (1.0)"]
    if censored:
        notes.append(f"{censored:,} task runs were still running at the window end and are censored there "
                     "(their duration is a lower bound)")
    return Conversion(NAME, scenario, stats, notes, bad)
