"""Alibaba heterogeneous GPU cluster 2023 (cluster-trace-gpu-v2023, "openb") -> scenario.

Mapping (docs/traces.md#alibaba-gpu2023):

- **Nodes**: the node list (``--nodes``; default ``openb_node_list_all_node.csv`` next to
  the pod list): one node per row, ``cpu`` = ``cpu_milli``/1000 cores, ``memory`` =
  ``memory_mib``/1024 GiB, ``gpu`` = ``gpu`` devices; a GPU node gets the attribute
  ``gpu_model: <model>``.
- **Tasks**: a pod is a task. Demand: ``cpu_milli``/1000, ``memory_mib``/1024, and GPUs:
  ``num_gpu`` whole GPUs, or for a GPU-sharing pod (``num_gpu`` 1, ``gpu_milli`` < 1000) the
  fraction ``gpu_milli``/1000 of one GPU. ``gpu_spec`` (``A|B``) becomes the constraint
  ``{gpu_model: [A, B]}``. Duration: ``deletion_time - scheduled_time``; submit:
  ``creation_time``. Pods never scheduled (``Pending``, no ``scheduled_time``) did not run
  and have no duration: they are counted and left out (``--pending include`` keeps them
  with their pending time as duration). ``Failed`` pods ran until deleted and are kept.
- **Jobs and queues**: ``--group pod`` (default): one job per pod in the queue of its QoS
  class (``LS``, ``BE``, ``Burstable``, ``Guaranteed``). ``--group bucket``: one job per
  (QoS class, ``--bucket-s`` interval of creation time), one task class per distinct
  demand and constraint set.
- ``--node-sample F`` keeps a stable-hash fraction of the nodes: the same pods on a smaller
  cluster (the full list rarely queues a pod).
- **Fractional GPUs**: when the scenario loader knows device semantics (cluster
  ``devices: [gpu]``), the cluster says so; otherwise ``gpu: 0.3`` is a plain divisible
  amount (the summary says which).
- **Timeless pod lists** (``openb_pod_list_multigpu50.csv`` has only ``name, cpu_milli,
  memory_mib, num_gpu, gpu_milli``): the trace's paper (Weng et al., ATC'23) replays such
  a list as pods arriving in row order until the cluster is full. With ``--duration``
  (``SECONDS``, ``exp:MEAN``, ``lognormal:MU,SIGMA`` or ``uniform:LOW,HIGH``) any pod list
  converts that way: data row i (from 0) is submitted at ``i * --interarrival`` seconds
  (default 1, so every pod is its own arrival and the scheduler sees the rows in order),
  every pod is kept (``pod_phase`` and the timing columns, if any, are ignored) and runs
  for the given duration. A list without timing columns and no ``--duration`` is an
  error naming the option.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairshare.traces.base import (CommonOptions, Conversion, JobTable, NodeFitCache, build_scenario,
                                   loader_accepts, parse_weights)
from fairshare.traces.common import (BadData, ColumnError, Progress, TraceError, clean_name, csv_header, number_columns,
                                     open_csv_with_header, parse_float, sample_keep)

NAME = "alibaba-gpu2023"
SUMMARY = "Alibaba GPU cluster 2023: pod list CSV (+ --nodes node list CSV)"
RESOURCES = ["cpu", "memory", "gpu"]
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
               "creation_time", "deletion_time", "scheduled_time")
#: the columns a timeless pod list has (and all a --duration conversion needs)
TIMELESS_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
TIME_COLUMNS = ("creation_time", "deletion_time", "scheduled_time")
#: --duration DIST:PARAMS -> the scenario's ``{dist: ...}`` kind and its parameter names, in order
DURATION_DISTS = {"exp": ("exponential", ("mean",)), "exponential": ("exponential", ("mean",)),
                  "lognormal": ("lognormal", ("mu", "sigma")), "uniform": ("uniform", ("low", "high"))}
DURATION_FORMS = "SECONDS, exp:MEAN, lognormal:MU,SIGMA or uniform:LOW,HIGH"
DEFAULT_NODE_LIST = "openb_node_list_all_node.csv"
DEFAULT_POD_LIST = "openb_pod_list_default.csv"


@dataclass
class Options:
    nodes: Path | None = None
    group: str = "pod"
    bucket_s: float = 3600.0
    pending: str = "skip"
    weights: str | None = None
    node_sample: float = 1.0
    #: timeless replay (row order = arrival order): the --duration text, None = use the timing columns
    duration: str | None = None
    interarrival_s: float = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("alibaba-gpu2023 options")
    g.add_argument("--nodes", type=Path, default=None, metavar="CSV",
                   help=f"the node list (default: {DEFAULT_NODE_LIST} in the pod list's directory)")
    g.add_argument("--group", choices=("pod", "bucket"), default="pod",
                   help="one job per pod (default) or per (QoS class, --bucket-s interval of creation time)")
    g.add_argument("--bucket-s", type=float, default=3600.0, metavar="SECONDS",
                   help="the interval of --group bucket (default 3600)")
    g.add_argument("--pending", choices=("skip", "include"), default="skip",
                   help="pods never scheduled: leave out and count (default), or include with their pending "
                        "time (deletion - creation) as duration")
    g.add_argument("--weights", default=None, metavar="Q=W,...", help="QoS queue weights, e.g. LS=4,BE=1 (default 1)")
    g.add_argument("--node-sample", type=float, default=1.0, metavar="F",
                   help="keep this fraction of the nodes (stable hash of sn, salted by --seed): a smaller cluster "
                        "for the same pods; pods no kept node can hold are left out and counted (default 1)")
    g.add_argument("--duration", default=None, metavar="DURATION",
                   help=f"replay the list without its times: every pod, in row order, runs for DURATION "
                        f"({DURATION_FORMS}; seconds). Required for a list without timing columns "
                        "(openb_pod_list_multigpu50.csv)")
    g.add_argument("--interarrival", type=float, default=1.0, metavar="SECONDS",
                   help="with --duration: data row i is submitted at i * SECONDS (default 1: one pod per arrival, "
                        "in row order; 0: all at 0, still in row order)")


def options_from_args(ns: argparse.Namespace) -> Options:
    if not ns.bucket_s > 0:
        raise TraceError(f"--bucket-s: must be > 0, got {ns.bucket_s}")
    if not 0 < ns.node_sample <= 1:
        raise TraceError(f"--node-sample: must be in (0, 1], got {ns.node_sample}")
    if not (ns.interarrival >= 0 and ns.interarrival != float("inf")):
        raise TraceError(f"--interarrival: must be a finite number >= 0, got {ns.interarrival}")
    if ns.duration is not None:
        parse_duration(ns.duration)  # the error names the option before any file is read
    return Options(ns.nodes, ns.group, ns.bucket_s, ns.pending, ns.weights, ns.node_sample, ns.duration,
                   ns.interarrival)


def parse_duration(text: str) -> tuple[float | None, dict[str, Any] | None]:
    """``--duration``: a fixed number of seconds, or a distribution the scenario format knows.

    Returns ``(seconds, None)`` or ``(None, {dist: KIND, param: value, ...})``; a clear
    :class:`TraceError` naming ``--duration`` otherwise.
    """
    head, sep, params = text.strip().partition(":")
    if not sep:
        try:
            seconds = parse_float(head)
        except ValueError:
            seconds = float("nan")
        if not seconds > 0:
            raise TraceError(f"--duration: expected {DURATION_FORMS} with positive seconds, got {text!r}")
        return seconds, None
    form = DURATION_DISTS.get(head.strip().lower())
    if form is None:
        raise TraceError(f"--duration: unknown distribution {head!r}; expected {DURATION_FORMS}")
    kind, names = form
    try:
        values = [parse_float(v) for v in params.split(",")]
    except ValueError:
        values = []
    if len(values) != len(names):
        raise TraceError(f"--duration: {kind} takes {','.join(n.upper() for n in names)}, got {text!r}")
    spec: dict[str, Any] = {"dist": kind, **dict(zip(names, values))}
    # the loader's own rules: positive mean and sigma; uniform 0 <= low <= high (mu may be any number)
    problem = {"exponential": None if spec.get("mean", 0) > 0 else "MEAN must be > 0",
               "lognormal": None if spec.get("sigma", 0) > 0 else "SIGMA must be > 0",
               "uniform": None if 0 <= spec.get("low", -1) <= spec.get("high", -1) and spec.get("high", 0) > 0
               else "needs 0 <= LOW <= HIGH and HIGH > 0"}[kind]
    if problem:
        raise TraceError(f"--duration: {kind}: {problem}, got {text!r}")
    return None, spec


def default_inputs(directory: Path) -> list[Path]:
    return [directory / DEFAULT_POD_LIST]


def read_nodes(path: Path, bad: BadData, sample: float = 1.0, seed: int = 0) -> list[dict[str, Any]]:
    _reader, rows = open_csv_with_header(path, NODE_COLUMNS, bad)
    nodes: list[dict[str, Any]] = []
    names: set[str] = set()
    for number, row in rows:
        where = f"{path}:{number}"
        try:
            v = number_columns(row, ("cpu_milli", "memory_mib", "gpu"), optional=("gpu",))
        except ColumnError as exc:
            bad.add("unparsable field", where, str(exc))
            continue
        cpu, mem, gpu = v["cpu_milli"] / 1000, v["memory_mib"] / 1024, v["gpu"] or 0.0
        name = clean_name(row["sn"])
        if cpu < 0 or mem < 0 or gpu < 0 or not (cpu > 0 or mem > 0 or gpu > 0):
            bad.add("impossible node capacity", where, f"cpu {cpu:g}, memory {mem:g}, gpu {gpu:g}")
            continue
        if name in names:
            bad.add("duplicate node name", where, f"sn {row['sn']!r}")
            continue
        names.add(name)
        if not sample_keep(row["sn"], sample, seed):
            continue
        node: dict[str, Any] = {"name": name, "capacity": {"cpu": cpu, "memory": mem, "gpu": gpu}}
        model = row["model"].strip()
        if gpu > 0 and model:
            node["attributes"] = {"gpu_model": model}
        nodes.append(node)
    if not nodes:
        raise TraceError(f"{path}: no usable node (every row was bad or the file has no rows)")
    return nodes


def convert(inputs: list[Path], common: CommonOptions, opts: Options, bad: BadData,
            progress: Progress | None = None) -> Conversion:
    if len(inputs) != 1:
        raise TraceError(f"alibaba-gpu2023 takes one pod list, got {len(inputs)} paths (the node list goes in --nodes)")
    pods_path = inputs[0]
    if opts.duration is None and not any(c in csv_header(pods_path) for c in TIME_COLUMNS):
        raise TraceError(f"{pods_path}: a timeless pod list (no {', '.join(TIME_COLUMNS)} columns): give the pods' "
                         f"durations with --duration ({DURATION_FORMS}); they then arrive in row order, one every "
                         "--interarrival seconds")
    nodes_path = opts.nodes or pods_path.parent / DEFAULT_NODE_LIST
    if not nodes_path.exists():
        raise TraceError(f"--nodes: {nodes_path} does not exist (give the node list with --nodes)")
    nodes = read_nodes(nodes_path, bad, opts.node_sample, common.seed)
    full_fit = NodeFitCache(read_nodes(nodes_path, BadData()) if opts.node_sample < 1 else nodes)
    fit = _PodShapes(NodeFitCache(nodes), full_fit)
    models = sorted({n["attributes"]["gpu_model"] for n in nodes if "attributes" in n})
    if opts.duration is not None:
        return _convert_timeless(pods_path, nodes, models, fit, common, opts, bad, progress)
    table = JobTable()
    start_s = common.window_start_s or 0.0
    end_s = common.window_end_s
    last_s = start_s
    rows = pending = sampled_out = censored = outside = 0
    reader, pod_rows = open_csv_with_header(pods_path, POD_COLUMNS, bad, progress)
    for number, row in pod_rows:
        if common.limit is not None and rows >= common.limit:
            break
        rows += 1
        where = f"{pods_path}:{number}"
        try:
            # every number parsed first, in column order: the first bad one is the one named
            v = number_columns(row, ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli") + TIME_COLUMNS,
                               optional=("num_gpu", "gpu_milli", "deletion_time", "scheduled_time"))
        except ColumnError as exc:
            bad.add("unparsable field", where, str(exc))
            continue
        pod = fit.demand(row, where, bad)
        if pod is None:
            continue
        demand, constraints = pod
        created, deleted, scheduled = v["creation_time"], v["deletion_time"], v["scheduled_time"]
        if scheduled is None:
            if opts.pending == "skip" or deleted is None:
                pending += 1
                continue
            began, ended = created, deleted
        else:
            began, ended = scheduled, deleted
        if created < start_s and (ended is not None and ended <= start_s):
            outside += 1
            continue
        if end_s is not None and created > end_s:
            outside += 1
            continue
        if not sample_keep(row["name"], common.sample, common.seed):
            sampled_out += 1
            continue
        if ended is None or (end_s is not None and ended > end_s):
            censored += 1
            ended = None
        last_s = max(last_s, created, began, ended or 0.0)
        key, name, queue = _job_key(row, created - start_s, opts)
        table.add_task(key, name=name, queue=queue, submit_s=created - start_s, demand=demand,
                       duration_s=None if ended is None else ended - max(began, start_s),
                       constraints=constraints, run_start_s=max(began, start_s) - start_s)
    window_end = end_s if end_s is not None else last_s
    table.close_censored(window_end - start_s)
    scenario = build_scenario(RESOURCES, nodes, table, parse_weights(opts.weights, "--weights"), devices=["gpu"])
    stats = {
        "rows read": rows, "nodes": len(nodes), "GPU models": ", ".join(models) or "none",
        "jobs": len(scenario["jobs"]), "tasks (pods)": table.tasks,
        "pods never scheduled (left out)": pending, "pods outside the window": outside,
        "runs censored at the window end": censored,
        "window (trace s)": f"{start_s:g} .. {window_end:g}",
    }
    if common.sample < 1:
        stats["pods sampled out"] = sampled_out
    if opts.node_sample < 1:
        stats["pods no kept node can hold (left out)"] = fit.dropped_by_node_sample
    return Conversion(NAME, scenario, stats, _notes(), bad)


def _convert_timeless(pods_path: Path, nodes: list[dict[str, Any]], models: list[str], fit: _PodShapes,
                      common: CommonOptions, opts: Options, bad: BadData, progress: Progress | None) -> Conversion:
    """``--duration``: every pod in row order, data row i submitted at ``i * interarrival``.

    No pod is left out for its phase or times (the list is a workload, not a history);
    ``--window`` keeps the arrivals whose synthetic submit time falls in it.
    """
    seconds, spec = parse_duration(opts.duration or "")
    table = JobTable()
    start_s = common.window_start_s or 0.0
    end_s = common.window_end_s
    rows = sampled_out = outside = 0
    reader, pod_rows = open_csv_with_header(pods_path, TIMELESS_COLUMNS, bad, progress)
    for number, row in pod_rows:
        if common.limit is not None and rows >= common.limit:
            break
        arrival_s = rows * opts.interarrival_s  # the data row's index (from 0), bad rows included
        rows += 1
        pod = fit.demand(row, f"{pods_path}:{number}", bad)
        if pod is None:
            continue
        demand, constraints = pod
        if arrival_s < start_s or (end_s is not None and arrival_s > end_s):
            outside += 1
            continue
        if not sample_keep(row["name"], common.sample, common.seed):
            sampled_out += 1
            continue
        key, name, queue = _job_key(row, arrival_s - start_s, opts)
        table.add_task(key, name=name, queue=queue, submit_s=arrival_s - start_s, demand=demand,
                       duration_s=seconds, constraints=constraints, duration_spec=spec)
    scenario = build_scenario(RESOURCES, nodes, table, parse_weights(opts.weights, "--weights"), devices=["gpu"])
    shown = f"{seconds:g} s" if spec is None else ", ".join(f"{k} {v:g}" if k != "dist" else v for k, v in spec.items())
    stats = {
        "rows read": rows, "nodes": len(nodes), "GPU models": ", ".join(models) or "none",
        "jobs": len(scenario["jobs"]), "tasks (pods)": table.tasks,
        "arrivals": f"row order, data row i at i * {opts.interarrival_s:g} s",
        "durations (--duration)": shown,
        "pods outside the window": outside,
    }
    if common.sample < 1:
        stats["pods sampled out"] = sampled_out
    if opts.node_sample < 1:
        stats["pods no kept node can hold (left out)"] = fit.dropped_by_node_sample
    notes = _notes()
    notes.append("timeless replay: timing columns and pod_phase, where present, are not used")
    return Conversion(NAME, scenario, stats, notes, bad)


def _job_key(row: dict[str, str], submit_s: float, opts: Options) -> tuple[Any, str, str | None]:
    """(JobTable key, job name, queue) of a pod under ``--group``; no qos column: no queue."""
    qos = clean_name(row["qos"] or "none") if "qos" in row else None
    if opts.group == "pod":
        return row["name"], clean_name(row["name"]), qos
    bucket = int(max(0.0, submit_s) // opts.bucket_s)
    return (qos, bucket), f"{qos or 'pods'}-b{bucket}", qos


class _PodShapes:
    """A pod row's demand and constraints, checked against the (possibly sampled) nodes."""

    def __init__(self, fit: NodeFitCache, full_fit: NodeFitCache):
        self.fit = fit
        self.full_fit = full_fit
        self.dropped_by_node_sample = 0

    def demand(self, row: dict[str, str], where: str,
               bad: BadData) -> tuple[dict[str, float], dict[str, list[str]] | None] | None:
        """``(demand, constraints)``, or None when the row is bad (counted) or no kept node can hold it."""
        try:
            v = number_columns(row, ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"),
                               optional=("num_gpu", "gpu_milli"))
        except ColumnError as exc:
            bad.add("unparsable field", where, str(exc))
            return None
        cpu, mem = v["cpu_milli"] / 1000, v["memory_mib"] / 1024
        num_gpu, gpu_milli = v["num_gpu"] or 0.0, v["gpu_milli"] or 0.0
        if num_gpu > 1 and gpu_milli not in (0, 1000):
            bad.add("impossible demand", where, f"num_gpu {num_gpu:g} with gpu_milli {gpu_milli:g} (sharing is "
                    "only defined for one GPU)")
            return None
        gpu = num_gpu if num_gpu != 1 else (gpu_milli / 1000 if 0 < gpu_milli < 1000 else 1.0)
        if cpu < 0 or mem < 0 or gpu < 0 or not (cpu > 0 or mem > 0 or gpu > 0):
            bad.add("impossible demand", where, f"cpu {cpu:g}, memory {mem:g}, gpu {gpu:g}")
            return None
        demand = {r: a for r, a in (("cpu", cpu), ("memory", mem), ("gpu", gpu)) if a > 0}
        spec = [m for m in row.get("gpu_spec", "").strip().split("|") if m] if gpu > 0 else []
        constraints = {"gpu_model": sorted(set(spec))} if spec else None
        if not self.fit.fits(demand, constraints) and self.full_fit.fits(demand, constraints):
            self.dropped_by_node_sample += 1
            return None
        if not self.fit.fits(demand, constraints):
            bad.add("impossible demand", where, f"cpu {cpu:g}, memory {mem:g}, gpu {gpu:g}"
                    + (f" on gpu_model {'|'.join(spec)}" if spec else "") + " fits no node")
            return None
        return demand, constraints


def _notes() -> list[str]:
    notes = ["cpu in cores, memory in GiB, gpu in devices (fractions for GPU-sharing pods)",
             "gpu_spec -> constraints {gpu_model: [...]} on the task class; node attribute gpu_model"]
    notes.append("cluster devices: [gpu] emitted (the loader knows device semantics)"
                 if loader_accepts("cluster", "devices") else
                 "cluster devices: [gpu] NOT emitted: this build's loader does not know device semantics, so a "
                 "fractional gpu is a plain divisible amount")
    return notes
