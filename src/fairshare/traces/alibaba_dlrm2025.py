"""Alibaba GPU-disaggregated DLRM serving 2025 (cluster-trace-gpu-v2025) -> scenario.

Mapping (docs/traces.md#alibaba-dlrm2025):

- **Resources**: five kinds per instance, in the trace's units: ``cpu`` (cores), ``gpu``
  (devices), ``rdma`` (percent of one NIC), ``memory`` (GiB), ``disk`` (GiB); the
  ``*_request`` columns (not the limits).
- **Queues and jobs**: each application (``app_name``, a service) is a queue, i.e. a
  tenant. ``--group bucket`` (default): one job per (application, ``--bucket-s`` interval
  of creation time), so instances created over the month arrive over the month;
  ``--group app``: one job per application holding all its instances (submitted at its
  first creation); ``--group instance``: one job per instance. Within a job, one task class
  per distinct demand (and role, below).
- **Durations**: ``deletion_time - scheduled_time``. An instance with no
  ``creation_time`` existed before the window: it is submitted at 0 and runs from 0. One
  with no ``deletion_time`` is still running at the window end: **censored** there
  (counted). Created but never scheduled: left out and counted.
- **max_instance_per_node** (``-1`` = no limit) becomes the task class's ``max_per_node``
  when the loader of this build accepts that key; otherwise it is dropped and the summary
  says so.
- **Nodes**: the trace has no node list; it is derived. Instances have a ``role``: ``CN``
  (CPU-only serving) and ``HN`` (GPU nodes), so there are two node shapes, attribute
  ``role``, and each instance is constrained to its role's nodes (``--no-roles``: one
  shape, no constraint). A shape's capacity is ``--node-size`` times the largest request
  of that role on each resource (so every instance fits), and the count is chosen so the
  role's peak concurrent demand (over the trace's own schedule) uses ``--load`` of the
  shape's capacity on its busiest resource: ``count = ceil(max_r peak[r] / (load * cap[r]))``.
"""

from __future__ import annotations

import argparse
import heapq
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairshare.traces.base import CommonOptions, Conversion, JobTable, build_scenario, loader_accepts, parse_weights
from fairshare.traces.common import (BadData, ColumnError, Progress, TraceError, clean_name, number_columns,
                                     open_csv_with_header, sample_keep)

NAME = "alibaba-dlrm2025"
SUMMARY = "Alibaba DLRM serving 2025: disaggregated_DLRM_trace.csv"
RESOURCES = ["cpu", "gpu", "rdma", "memory", "disk"]
REQUEST_COLUMNS = {"cpu": "cpu_request", "gpu": "gpu_request", "rdma": "rdma_request", "memory": "memory_request",
                   "disk": "disk_request"}
COLUMNS = ("instance_sn", "role", "app_name", *REQUEST_COLUMNS.values(), "max_instance_per_node",
           "creation_time", "scheduled_time", "deletion_time")
DEFAULT_FILE = "disaggregated_DLRM_trace.csv"


@dataclass
class Options:
    group: str = "bucket"
    bucket_s: float = 3600.0
    roles: bool = True
    node_size: float = 2.0
    load: float = 0.8
    weights: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("alibaba-dlrm2025 options")
    g.add_argument("--group", choices=("bucket", "app", "instance"), default="bucket",
                   help="one job per (app, --bucket-s interval of creation) (default), per app, or per instance")
    g.add_argument("--bucket-s", type=float, default=3600.0, metavar="SECONDS",
                   help="the interval of --group bucket (default 3600)")
    g.add_argument("--no-roles", action="store_true",
                   help="one node shape for CN and HN instances, no role constraint")
    g.add_argument("--node-size", type=float, default=2.0, metavar="K",
                   help="a node holds K times the largest request of its role on each resource (default 2)")
    g.add_argument("--load", type=float, default=0.8, metavar="F",
                   help="size the node count so the trace's peak concurrent demand fills F of it (default 0.8)")
    g.add_argument("--weights", default=None, metavar="APP=W,...", help="application queue weights (default 1)")


def options_from_args(ns: argparse.Namespace) -> Options:
    if not ns.bucket_s > 0:
        raise TraceError(f"--bucket-s: must be > 0, got {ns.bucket_s}")
    if not ns.node_size >= 1:
        raise TraceError(f"--node-size: must be >= 1 (a node must hold the largest instance), got {ns.node_size}")
    if not 0 < ns.load <= 1:
        raise TraceError(f"--load: must be in (0, 1], got {ns.load}")
    return Options(ns.group, ns.bucket_s, not ns.no_roles, ns.node_size, ns.load, ns.weights)


def default_inputs(directory: Path) -> list[Path]:
    return [directory / DEFAULT_FILE]


def _peak(intervals: list[tuple[float, float, dict[str, float]]]) -> dict[str, float]:
    """Largest total concurrent demand per resource over [start, end) intervals (a sweep)."""
    events: list[tuple[float, int, int]] = []
    for i, (a, b, _d) in enumerate(intervals):
        events.append((a, 1, i))
        events.append((b, 0, i))  # ends before starts at the same instant
    heapq.heapify(events)
    current = dict.fromkeys(RESOURCES, 0.0)
    peak = dict.fromkeys(RESOURCES, 0.0)
    while events:
        _t, kind, i = heapq.heappop(events)
        sign = 1 if kind else -1
        for r, amount in intervals[i][2].items():
            current[r] += sign * amount
            if kind and current[r] > peak[r]:
                peak[r] = current[r]
    return peak


def convert(inputs: list[Path], common: CommonOptions, opts: Options, bad: BadData,
            progress: Progress | None = None) -> Conversion:
    if len(inputs) != 1:
        raise TraceError(f"alibaba-dlrm2025 takes one CSV file, got {len(inputs)} paths")
    path = inputs[0]
    start_s = common.window_start_s or 0.0
    end_s = common.window_end_s
    table = JobTable()
    keep_limit = loader_accepts("task", "max_per_node")
    largest: dict[str, dict[str, float]] = {}
    # (role, run start, run end or None, demand): for the node sizing sweep, one small tuple per instance kept
    runs: list[tuple[str, float, float | None, dict[str, float]]] = []
    rows = never_scheduled = outside = sampled_out = censored = limits_dropped = 0
    last_s = start_s
    _reader, data = open_csv_with_header(path, COLUMNS, bad, progress)
    for number, row in data:
        if common.limit is not None and rows >= common.limit:
            break
        rows += 1
        where = f"{path}:{number}"
        try:
            v = number_columns(row, (*REQUEST_COLUMNS.values(), "max_instance_per_node", "creation_time",
                                     "scheduled_time", "deletion_time"),
                               optional=(*REQUEST_COLUMNS.values(), "max_instance_per_node", "creation_time",
                                         "scheduled_time", "deletion_time"))
        except ColumnError as exc:
            bad.add("unparsable field", where, str(exc))
            continue
        demand = {r: v[c] or 0.0 for r, c in REQUEST_COLUMNS.items()}
        per_node = -1 if v["max_instance_per_node"] is None else int(v["max_instance_per_node"])
        created, scheduled, deleted = v["creation_time"], v["scheduled_time"], v["deletion_time"]
        negative = [r for r, a in demand.items() if a < 0]
        if negative or not any(a > 0 for a in demand.values()):
            bad.add("impossible demand", where, f"{REQUEST_COLUMNS[negative[0]]}: negative" if negative
                    else "every request is 0")
            continue
        role = clean_name(row["role"] or "none")
        app = clean_name(row["app_name"] or "none")
        if created is not None and scheduled is None:
            never_scheduled += 1
            continue
        began = start_s if created is None else max(scheduled, start_s)
        submit = start_s if created is None else created
        if (deleted is not None and deleted <= start_s) or (end_s is not None and submit > end_s):
            outside += 1
            continue
        if not sample_keep(row["instance_sn"], common.sample, common.seed):
            sampled_out += 1
            continue
        ended = deleted
        if ended is None or (end_s is not None and ended > end_s):
            ended = None
            censored += 1
        last_s = max(last_s, submit, began, ended or 0.0)
        demand = {r: a for r, a in demand.items() if a > 0}
        role_key = role if opts.roles else "all"
        big = largest.setdefault(role_key, dict.fromkeys(RESOURCES, 0.0))
        for r, a in demand.items():
            big[r] = max(big[r], a)
        runs.append((role_key, began, ended, demand))
        if opts.group == "bucket":
            bucket = int((submit - start_s) // opts.bucket_s)
            key, name = (app, bucket), f"{app}-b{bucket}"
        elif opts.group == "app":
            key, name = app, app
        else:
            key, name = row["instance_sn"], clean_name(row["instance_sn"])
        extra = {}
        if per_node > 0:
            if keep_limit:
                extra["max_per_node"] = per_node
            else:
                limits_dropped += 1
        table.add_task(key, name=name, queue=app, submit_s=submit - start_s, demand=demand,
                       duration_s=None if ended is None else ended - began,
                       constraints={"role": [role]} if opts.roles else None, extra=extra,
                       run_start_s=began - start_s)
    window_end = end_s if end_s is not None else last_s
    table.close_censored(window_end - start_s)
    if not runs:
        raise TraceError(f"{path}: no instance to convert (every row was bad, outside the window or sampled out)")
    nodes = []
    for role_key, big in largest.items():
        capacity = {r: opts.node_size * big[r] for r in RESOURCES if big[r] > 0}
        peak = _peak([(a, window_end if b is None else b, d) for rk, a, b, d in runs if rk == role_key])
        count = max(1, max(math.ceil(peak[r] / (opts.load * capacity[r]) - 1e-9) for r in capacity))
        node: dict[str, Any] = {"name": f"{role_key.lower()}-node", "count": count,
                                "capacity": {r: round(a, 6) for r, a in capacity.items()}}
        if opts.roles:
            node["attributes"] = {"role": role_key}
        nodes.append(node)
    del runs
    scenario = build_scenario(RESOURCES, nodes, table, parse_weights(opts.weights, "--weights"))
    stats = {
        "rows read": rows, "applications (queues)": len({j.get("queue") for j in scenario["jobs"]}),
        "jobs": len(scenario["jobs"]), "tasks (instances)": table.tasks,
        "instances never scheduled (left out)": never_scheduled, "instances outside the window": outside,
        "runs censored at the window end": censored,
        "nodes": ", ".join(f"{n['count']} x {n['name']}" for n in nodes),
        "window (trace s)": f"{start_s:g} .. {window_end:g}",
    }
    if common.sample < 1:
        stats["instances sampled out"] = sampled_out
    notes = ["units: cpu cores, gpu devices, rdma percent of a NIC, memory GiB, disk GiB (the *_request columns)",
             f"nodes derived (the trace has none): capacity = {opts.node_size:g} x the role's largest request per "
             f"resource; count sized so the trace's peak concurrent demand fills {opts.load:g} of it"]
    if limits_dropped:
        notes.append(f"max_instance_per_node NOT emitted on {limits_dropped:,} instances: this build's loader does not "
                     "know max_per_node")
    return Conversion(NAME, scenario, stats, notes, bad)
