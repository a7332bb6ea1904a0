"""Facebook Hadoop SWIM samples (UC Berkeley SWIM workload suite) -> scenario.

Mapping (docs/traces.md#swim). A SWIM row has only bytes and times
(``job_id, submit_time_s, inter_arrival_s, map_input_bytes, shuffle_bytes,
reduce_output_bytes``), so task counts and durations are derived under stated, tunable
assumptions (Hadoop MapReduce's defaults where it has one):

- **map tasks**: one per ``--block-mib`` (default 128 MiB, the HDFS block) of input,
  at least one; each map's duration ``--task-overhead-s`` + (its share of the input) /
  ``--map-mibps``.
- **reduce tasks**: one per ``--reduce-gib`` (default 1 GiB) of shuffle, none when there
  is no shuffle; each reduce's duration ``--task-overhead-s`` + (its share of shuffle +
  output) / ``--reduce-mibps``.
- **demand**: ``--map-demand`` and ``--reduce-demand`` (default 1 cpu, 1 GiB / 1 cpu,
  2 GiB: a Hadoop 1 slot).
- **queues**: the trace has no users; ``--hierarchy size`` (default) puts each job in
  ``small`` (1 map), ``medium`` (<= 50 maps) or ``large`` (more); ``flat``: none.
- **nodes**: ``--machines`` (default 600 for FB-2009 files, 3,000 for FB-2010, as the
  SWIM README gives the clusters; 600 otherwise) of ``--node-capacity`` (default 8 cpu,
  16 GiB).
- Both classes are available from the job's submit time (the scenario format has no
  map-before-reduce dependency; docs/traces.md says what that changes).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairshare.traces.base import CommonOptions, Conversion, JobTable, build_scenario, parse_capacity, parse_weights
from fairshare.traces.common import BadData, LineReader, Progress, TraceError, clean_name, parse_float, sample_keep

NAME = "swim"
SUMMARY = "Facebook SWIM samples: tab-separated job_id, submit, gap, input, shuffle, output bytes"
RESOURCES = ["cpu", "memory"]
MIB = 1 << 20
GIB = 1 << 30


@dataclass
class Options:
    block_mib: float = 128.0
    reduce_gib: float = 1.0
    map_mibps: float = 32.0
    reduce_mibps: float = 16.0
    task_overhead_s: float = 5.0
    map_demand: str = "cpu=1,memory=1"
    reduce_demand: str = "cpu=1,memory=2"
    machines: int | None = None
    node_capacity: str = "cpu=8,memory=16"
    hierarchy: str = "size"
    weights: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("swim options")
    d = Options()
    g.add_argument("--block-mib", type=float, default=d.block_mib, metavar="MIB", help="input per map task (128)")
    g.add_argument("--reduce-gib", type=float, default=d.reduce_gib, metavar="GIB", help="shuffle per reduce task (1)")
    g.add_argument("--map-mibps", type=float, default=d.map_mibps, metavar="MIB/S", help="map throughput (32)")
    g.add_argument("--reduce-mibps", type=float, default=d.reduce_mibps, metavar="MIB/S",
                   help="reduce throughput over shuffle + output (16)")
    g.add_argument("--task-overhead-s", type=float, default=d.task_overhead_s, metavar="S",
                   help="fixed start-up time of every task (5)")
    g.add_argument("--map-demand", default=d.map_demand, metavar="R=A,...", help="per map task (cpu=1,memory=1)")
    g.add_argument("--reduce-demand", default=d.reduce_demand, metavar="R=A,...",
                   help="per reduce task (cpu=1,memory=2)")
    g.add_argument("--machines", type=int, default=None, metavar="N",
                   help="nodes (default: 600 for FB-2009 files, 3000 for FB-2010, else 600)")
    g.add_argument("--node-capacity", default=d.node_capacity, metavar="R=A,...", help="per node (cpu=8,memory=16)")
    g.add_argument("--hierarchy", choices=("size", "flat"), default="size",
                   help="queues small/medium/large by map count (default) or none")
    g.add_argument("--weights", default=None, metavar="Q=W,...", help="queue weights, e.g. small=2 (default 1)")


def options_from_args(ns: argparse.Namespace) -> Options:
    for flag in ("block_mib", "reduce_gib", "map_mibps", "reduce_mibps"):
        if not getattr(ns, flag) > 0:
            raise TraceError(f"--{flag.replace('_', '-')}: must be > 0, got {getattr(ns, flag)}")
    if not ns.task_overhead_s >= 0:
        raise TraceError(f"--task-overhead-s: must be >= 0, got {ns.task_overhead_s}")
    if ns.machines is not None and ns.machines <= 0:
        raise TraceError(f"--machines: must be a positive whole number, got {ns.machines}")
    return Options(ns.block_mib, ns.reduce_gib, ns.map_mibps, ns.reduce_mibps, ns.task_overhead_s, ns.map_demand,
                   ns.reduce_demand, ns.machines, ns.node_capacity, ns.hierarchy, ns.weights)


def default_inputs(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.tsv"))


def default_machines(path: Path) -> int:
    return 3000 if "FB-2010" in path.name else 600


def size_queue(maps: int) -> str:
    return "small" if maps <= 1 else ("medium" if maps <= 50 else "large")


def convert(inputs: list[Path], common: CommonOptions, opts: Options, bad: BadData,
            progress: Progress | None = None) -> Conversion:
    if not inputs:
        raise TraceError("swim: no input file")
    map_demand = parse_capacity(opts.map_demand, "--map-demand", RESOURCES)
    reduce_demand = parse_capacity(opts.reduce_demand, "--reduce-demand", RESOURCES)
    capacity = parse_capacity(opts.node_capacity, "--node-capacity", RESOURCES)
    for flag, demand in (("--map-demand", map_demand), ("--reduce-demand", reduce_demand)):
        if not any(a > 0 for a in demand.values()):
            raise TraceError(f"{flag}: at least one amount must be > 0")
        too_big = [r for r, a in demand.items() if a > capacity.get(r, 0)]
        if too_big:
            raise TraceError(f"{flag}: {too_big[0]} {demand[too_big[0]]:g} does not fit --node-capacity "
                             f"({opts.node_capacity})")
    machines = opts.machines or default_machines(inputs[0])
    start_s = common.window_start_s or 0.0
    end_s = common.window_end_s
    table = JobTable()
    block = opts.block_mib * MIB
    per_reduce = opts.reduce_gib * GIB
    rows = outside = sampled_out = 0
    maps_total = reduces_total = 0
    done_bytes = 0
    many = len(inputs) > 1
    for index, path in enumerate(inputs):
        reader = LineReader(path, bad, progress, done_bytes)
        for line in reader:
            if common.limit is not None and rows >= common.limit:
                break
            if not line.text.strip():
                continue
            rows += 1
            where = f"{path}:{line.number}"
            f = line.text.split("\t")
            if len(f) != 6:
                bad.add("truncated last line" if reader.last_unterminated else "wrong number of columns", where,
                        f"{len(f)} fields, expected 6")
                continue
            try:
                submit = parse_float(f[1])
                in_bytes, shuffle, out_bytes = (parse_float(x) for x in f[3:6])
            except ValueError as exc:
                bad.add("unparsable field", where, f"submit_time_s or a byte count does not parse ({exc})")
                continue
            if submit < 0 or in_bytes < 0 or shuffle < 0 or out_bytes < 0:
                bad.add("impossible demand", where, "a negative time or byte count")
                continue
            if submit < start_s or (end_s is not None and submit > end_s):
                outside += 1
                continue
            job_key = f"{index}:{f[0]}"
            if not sample_keep(job_key, common.sample, common.seed):
                sampled_out += 1
                continue
            maps = max(1, math.ceil(in_bytes / block))
            reduces = math.ceil(shuffle / per_reduce) if shuffle > 0 else 0
            name = clean_name(f"{'f%d-' % index if many else ''}{f[0]}")
            queue = size_queue(maps) if opts.hierarchy == "size" else None
            map_s = opts.task_overhead_s + in_bytes / maps / (opts.map_mibps * MIB)
            table.add_task(job_key, name=name, queue=queue, submit_s=submit - start_s, demand=map_demand,
                           duration_s=map_s, class_name="map", repeat=maps)
            if reduces:
                reduce_s = opts.task_overhead_s + (shuffle + out_bytes) / reduces / (opts.reduce_mibps * MIB)
                table.add_task(job_key, name=name, queue=queue, submit_s=submit - start_s,
                               demand=reduce_demand, duration_s=reduce_s, class_name="reduce", repeat=reduces)
            maps_total += maps
            reduces_total += reduces
        done_bytes += reader.bytes_read
    nodes: list[dict[str, Any]] = [{"name": "node", "count": machines, "capacity": capacity}]
    scenario = build_scenario(RESOURCES, nodes, table, parse_weights(opts.weights, "--weights"))
    stats = {"rows read": rows, "jobs": len(scenario["jobs"]), "map tasks": maps_total,
             "reduce tasks": reduces_total, "jobs outside the window": outside,
             "nodes": f"{machines} x {opts.node_capacity}"}
    if common.sample < 1:
        stats["jobs sampled out"] = sampled_out
    notes = [f"maps: one per {opts.block_mib:g} MiB of input (at least 1), {opts.map_mibps:g} MiB/s; reduces: one per "
             f"{opts.reduce_gib:g} GiB of shuffle, {opts.reduce_mibps:g} MiB/s; +{opts.task_overhead_s:g} s per task",
             "map and reduce classes are both runnable from submit (no map-before-reduce dependency)"]
    return Conversion(NAME, scenario, stats, notes, bad)
