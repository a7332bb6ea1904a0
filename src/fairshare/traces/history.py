"""What the job-history kinds share: one task run per record, absolute times, a derived cluster.

A job history (Slurm ``sacct -P``, Kueue Workloads, a CSV, serve's store) records what
ran: per task, when its job was submitted, when the task started and when it ended, in
wall-clock time. Each history kind turns its rows into :class:`Run` records (one per
row, streamed); :func:`convert_history` does the rest the same way for all of them:

- **time**: scenario time 0 is the history's earliest submit (``origin``); ``--window
  START:END`` keeps the jobs *submitted* in ``[origin + START, origin + END)``, with their
  whole runs (a replay needs all the work a job asked for). With a window, the origin is
  found by a first pass over the input (the file is read twice; memory stays bounded).
- **durations**: end - start of each run; a run without an end (still running when the
  history was taken) is censored at the history's last time and counted.
- **skipped**: a run that never started (cancelled or still pending) is counted, not
  converted: its duration is unknown.
- **queues**: the record's queue name (a dotted path), or what ``--queue-map FILE`` maps
  it to (``{name: dotted.path}``, YAML or JSON): a history then lands on the queues of an
  imported config (``ImportedConfig.queue_paths``).
- **cluster**: ``--machines N`` of ``--node-capacity R=A,...``; by default every task's
  largest demand per resource is the node size (every task fits), and the node count is
  the peak of the history's own concurrent demand over that size (rounded up): the
  cluster the history ran on, at least.
- **memory** is in GiB (the loader's convention, as the other kinds).

Memory while converting: the per-job aggregate of :class:`~fairshare.traces.base.JobTable`
(one float per task) and, for the derived cluster, two events per run; never a row.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from fairshare.traces.base import (CommonOptions, Conversion, JobTable, NodeFitCache, build_scenario, parse_capacity,
                                   parse_weights)
from fairshare.traces.common import BadData, Progress, TraceError, clean_name, sample_keep

#: the resources a history can name, in the scenario's order (those never demanded are left out)
RESOURCES = ["cpu", "memory", "gpu"]
KIB = 1024


@dataclass
class Run:
    """One task run (or ``count`` identical ones) of a history, times in epoch seconds."""

    job_key: str  # groups the runs of one job, and is the sampling key
    name: str  # the job's name in the scenario
    queue: str | None  # the history's queue name: a dotted path, or a --queue-map key
    submit_s: float
    start_s: float | None  # None: never started (skipped, counted)
    end_s: float | None  # None: still running (censored at the history's last time)
    demand: dict[str, float]
    where: str  # FILE:LINE, for the bad-data report
    count: int = 1
    class_name: str | None = None


@dataclass
class HistoryOptions:
    """Options every history kind takes (their ``Options`` extend it)."""

    machines: int | None = None
    node_capacity: str | None = None
    queue_map: str | None = None
    weights: str | None = None


def add_history_arguments(parser: argparse.ArgumentParser, title: str) -> argparse._ArgumentGroup:
    g = parser.add_argument_group(title)
    g.add_argument("--machines", type=int, default=None, metavar="N",
                   help="nodes (default: the peak of the history's concurrent demand over --node-capacity)")
    g.add_argument("--node-capacity", default=None, metavar="R=A,...",
                   help="per node, memory in GiB, e.g. cpu=64,memory=256,gpu=8 (default: the largest demand "
                        "of one task per resource)")
    g.add_argument("--queue-map", default=None, metavar="FILE",
                   help="YAML or JSON {history queue: dotted.queue.path}: put the history on an imported "
                        "config's queues")
    g.add_argument("--weights", default=None, metavar="Q=W,...", help="queue weights (default 1)")
    return g


def history_options(ns: argparse.Namespace) -> dict[str, Any]:
    """The :class:`HistoryOptions` fields from parsed arguments (checked)."""
    if ns.machines is not None and ns.machines <= 0:
        raise TraceError(f"--machines: must be a positive whole number, got {ns.machines}")
    return {"machines": ns.machines, "node_capacity": ns.node_capacity, "queue_map": ns.queue_map,
            "weights": ns.weights}


def read_yaml_option(path: str, flag: str) -> Any:
    """The YAML (or JSON) document of an option's file, read by the scenario loader's
    ``read_document``; errors name the flag and the file."""
    from fairshare.model.errors import ScenarioError
    from fairshare.model.loader import read_document

    try:
        return read_document(path, what=f"{flag} file")
    except ScenarioError as exc:
        raise TraceError(f"{flag}: {exc}") from None


def load_queue_map(path: str | None) -> dict[str, str]:
    """``--queue-map FILE``: ``{history queue: dotted path}``; errors name the file and the entry."""
    if not path:
        return {}
    data = read_yaml_option(path, "--queue-map")
    if not isinstance(data, dict):
        raise TraceError(f"--queue-map: {path}: expected a mapping {{history queue: dotted.queue.path}}")
    out: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(value, str) or not value.strip() or any(not p for p in value.split(".")):
            raise TraceError(f"--queue-map: {path}: {key}: expected a dotted queue path, got {value!r}")
        out[str(key)] = ".".join(clean_name(p) for p in value.split("."))
    return out


def queue_path(name: str | None, queue_map: dict[str, str], unmapped: set[str]) -> str | None:
    """The scenario queue of a history queue name: mapped, else its parts (split at ``.``
    and ``/``: a Kueue ``namespace/localqueue`` is ``namespace.localqueue``) cleaned."""
    if not name:
        return None
    if queue_map:
        hit = queue_map.get(name)
        if hit is not None:
            return hit
        unmapped.add(name)
    return ".".join(clean_name(p) for p in name.replace("/", ".").split(".") if p) or None


def parse_time(text: str) -> float | None:
    """An ISO 8601 time (``2014-07-03T11:33:16``, ``...Z``, ``...+02:00``) -> epoch seconds.

    A time without a zone is read as UTC: only differences matter here, and the whole file
    then has one offset. ``Unknown``, ``None`` and empty (sacct's "not yet") give None;
    anything else that does not parse raises ValueError.
    """
    text = text.strip()
    if not text or text in ("Unknown", "None", "N/A", "null"):
        return None
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


#: binary memory units (Slurm's K/M/G/T, Kubernetes' Ki/Mi/Gi/Ti) and decimal ones (k/M/G/T in
#: Kubernetes quantities are powers of 1000), as bytes
_BINARY = {"K": KIB, "M": KIB**2, "G": KIB**3, "T": KIB**4, "P": KIB**5}
_DECIMAL = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def quantity(text: str) -> float:
    """A Kubernetes quantity (``500m``, ``2``, ``600Mi``, ``1G``, ``1e3``) as a plain number.

    Binary suffixes (``Ki``..``Pi``) are powers of 1024, decimal ones (``k``, ``M``, ``G``,
    ``T``) of 1000, ``m`` is a thousandth. ValueError otherwise.
    """
    text = str(text).strip()
    if text.endswith("i") and len(text) > 2 and text[-2] in _BINARY:
        return _finite(float(text[:-2]) * _BINARY[text[-2]])
    if text and text[-1] == "m":
        return _finite(float(text[:-1]) / 1000)
    if text and text[-1] in _DECIMAL and not text[-1].isdigit():
        return _finite(float(text[:-1]) * _DECIMAL[text[-1]])
    return _finite(float(text))


def _finite(x: float) -> float:
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"not a finite amount >= 0: {x}")
    return x


@dataclass
class _Sweep:
    """The history's concurrent demand over time (for the derived cluster size)."""

    events: list[tuple[float, int, tuple[float, ...]]] = field(default_factory=list)

    def add(self, start_s: float, end_s: float, amounts: tuple[float, ...]) -> None:
        self.events.append((start_s, 1, amounts))
        self.events.append((end_s, 0, amounts))  # 0 before 1: an end frees before a start at the same time

    def peak(self, width: int) -> list[float]:
        running = [0.0] * width
        peak = [0.0] * width
        for _t, starts, amounts in sorted(self.events, key=lambda e: (e[0], e[1])):
            sign = 1 if starts else -1
            for i, a in enumerate(amounts):
                running[i] += sign * a
                if running[i] > peak[i]:
                    peak[i] = running[i]
        return peak


def convert_history(name: str, runs: Callable[[BadData, Progress | None], Iterator[Run]], common: CommonOptions,
                    opts: HistoryOptions, bad: BadData, progress: Progress | None, *, origin_s: float | None = None,
                    notes: list[str] | None = None, stats: dict[str, Any] | None = None) -> Conversion:
    """Stream ``runs(bad, progress)`` into a scenario (module docstring).

    ``origin_s``: scenario time 0 in epoch seconds (a CSV of relative seconds: 0); None:
    the earliest submit of the history.
    """
    queue_map = load_queue_map(opts.queue_map)
    fixed_capacity = (parse_capacity(opts.node_capacity, "--node-capacity", RESOURCES)
                      if opts.node_capacity else None)
    fit = NodeFitCache([{"name": "node", "capacity": fixed_capacity}]) if fixed_capacity else None
    window = common.window_start_s is not None or common.window_end_s is not None
    origin_given = origin_s is not None
    if window and origin_s is None:
        origin_s = _earliest_submit(runs, common.limit)
    low = high = None
    if window:
        low = origin_s + (common.window_start_s or 0.0)
        high = None if common.window_end_s is None else origin_s + common.window_end_s
    table = JobTable()
    sweep = _Sweep() if opts.machines is None else None  # only a derived node count needs it
    largest = [0.0] * len(RESOURCES)
    unmapped: set[str] = set()
    still_running: list[tuple[float, tuple[float, ...]]] = []  # (start, amounts) of runs without an end
    rows = never_started = outside = sampled_out = 0
    earliest = math.inf
    latest = -math.inf
    for run in runs(bad, progress):
        if common.limit is not None and rows >= common.limit:
            break
        rows += 1
        if run.start_s is None:
            never_started += run.count
            continue
        if not _possible(run):
            bad.add("impossible times", run.where, "end before start" if run.end_s is not None
                    and run.end_s < run.start_s else "start before submit")
            continue
        earliest = min(earliest, run.submit_s)  # time 0: before the window and the sample choose
        if low is not None and (run.submit_s < low or (high is not None and run.submit_s >= high)):
            outside += 1
            continue
        if not sample_keep(run.job_key, common.sample, common.seed):
            sampled_out += 1
            continue
        demand = {r: a for r, a in run.demand.items() if a > 0}
        if not demand:
            bad.add("impossible demand", run.where, "no cpu, memory or gpu demand")
            continue
        if fit is not None and not fit.fits(demand):
            shown = ", ".join(f"{r}={a:g}" for r, a in demand.items())
            bad.add("impossible demand", run.where, f"{shown} fits no node (--node-capacity {opts.node_capacity})")
            continue
        amounts = tuple(demand.get(r, 0.0) * run.count for r in RESOURCES)
        for i, r in enumerate(RESOURCES):
            largest[i] = max(largest[i], demand.get(r, 0.0))
        latest = max(latest, run.start_s, run.end_s if run.end_s is not None else run.start_s)
        if sweep is not None and run.end_s is None:
            still_running.append((run.start_s, amounts))  # added to the sweep when the end is known
        elif sweep is not None:
            sweep.add(run.start_s, run.end_s, amounts)
        queue = queue_path(run.queue, queue_map, unmapped)
        # a censored run is added once per task (JobTable censors one task per call)
        for repeat in ([run.count] if run.end_s is not None else [1] * run.count):
            table.add_task(run.job_key, name=run.name, queue=queue, submit_s=run.submit_s, demand=demand,
                           duration_s=None if run.end_s is None else run.end_s - run.start_s,
                           run_start_s=run.start_s, repeat=repeat, class_name=run.class_name)
    censored = table.censored
    if table.jobs:
        table.close_censored(latest)
    for began, amounts in still_running:
        sweep.add(began, latest, amounts)
    origin = origin_s if origin_s is not None else (earliest if math.isfinite(earliest) else 0.0)
    for job in table.jobs.values():
        job.submit_s -= origin
    resources = [r for i, r in enumerate(RESOURCES) if largest[i] > 0 or (fixed_capacity or {}).get(r, 0) > 0]
    resources = resources or ["cpu"]
    nodes, node_note = _nodes(resources, fixed_capacity, largest, sweep, opts.machines)
    scenario = build_scenario(resources, nodes, table, parse_weights(opts.weights, "--weights"))
    counts = {"task records read": rows, "jobs": len(scenario["jobs"]), "tasks": table.tasks, **(stats or {}),
              "tasks never started (skipped)": never_started, "runs censored at the history's end": censored}
    if window:
        counts["jobs outside the window"] = outside
    if common.sample < 1:
        counts["jobs sampled out"] = sampled_out
    counts["nodes"] = node_note
    time_zero = (f"epoch {origin:g}" if origin_given else "the earliest submit") + (
        f" ({datetime.fromtimestamp(origin, timezone.utc).isoformat()})" if origin else "")
    return Conversion(name, scenario, counts, [*(notes or []), f"memory in GiB; scenario time 0 is {time_zero}",
                                               *_unmapped_note(unmapped)], bad)


def _unmapped_note(unmapped: set[str]) -> list[str]:
    if not unmapped:
        return []
    shown = ", ".join(sorted(unmapped)[:5]) + (", ..." if len(unmapped) > 5 else "")
    return [f"{len(unmapped)} queues not in --queue-map kept under their own names: {shown}"]


def _earliest_submit(runs: Callable[[BadData, Progress | None], Iterator[Run]], limit: int | None) -> float:
    """The first pass of a windowed conversion: the history's earliest submit (bad rows
    are reported by the second pass, not this one)."""
    earliest = math.inf
    for k, run in enumerate(runs(BadData(), None)):
        if limit is not None and k >= limit:
            break
        if run.start_s is not None and _possible(run):
            earliest = min(earliest, run.submit_s)
    return earliest if math.isfinite(earliest) else 0.0


def _possible(run: Run) -> bool:
    """A started run whose times are in order: submit <= start <= end."""
    return run.submit_s <= run.start_s and (run.end_s is None or run.start_s <= run.end_s)


def _nodes(resources: list[str], fixed: dict[str, float] | None, largest: list[float], sweep: _Sweep | None,
           machines: int | None) -> tuple[list[dict[str, Any]], str]:
    """The node list: the given size, or the derived one (module docstring)."""
    if fixed is not None:
        capacity = {r: fixed.get(r, 0.0) for r in resources}
    else:
        capacity = {r: largest[RESOURCES.index(r)] or 1.0 for r in resources}
    if machines is None and sweep is not None:
        peak = sweep.peak(len(RESOURCES))
        machines = max([1] + [math.ceil(peak[RESOURCES.index(r)] / capacity[r] - 1e-9)
                              for r in resources if capacity[r] > 0])
    capacity = {r: int(a) if float(a).is_integer() else a for r, a in capacity.items()}
    shown = ",".join(f"{r}={a:g}" for r, a in capacity.items())
    return [{"name": "node", "count": machines, "capacity": capacity}], f"{machines} x {shown}"
