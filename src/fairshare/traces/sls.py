"""Hadoop YARN Scheduler Load Simulator (SLS) JSON input -> scenario.

The SLS "SLS JSON" input format (hadoop-sls, SchedulerLoadSimulator.md) is a sequence of
job objects, one after the other (not a JSON array; an array is accepted too)::

    {"am.type": "mapreduce", "job.start.ms": 0, "job.end.ms": 95375,
     "job.queue.name": "sls_queue_1", "job.id": "job_1", "job.user": "default",
     "job.tasks": [{"container.host": "/default-rack/node1", "container.start.ms": 6664,
                    "container.end.ms": 23707, "container.priority": 20, "container.type": "map"}]}

Mapping (docs/traces.md#sls):

- **Jobs**: one per job object (``job.count`` > 1 repeats it, as SLS does, ``-<k>``
  suffixed); submit ``job.start.ms`` / 1000. One task class per ``container.type``
  (``map``, ``reduce``, ...) and distinct resources; ``container.count`` repeats a task.
- **Durations**: ``(container.end.ms - container.start.ms)`` / 1000 s.
- **Resources**: ``cpu`` = ``container.vcores``, ``memory`` = ``container.memory-mb`` (or
  ``container.memory``) / 1024 GiB; absent: SLS's defaults, 1 vcore and 1024 MB.
- **Queues**: ``job.queue.name`` (a dotted YARN path; a leading ``root.`` is dropped), then
  the user with ``--hierarchy queue-user``.
- **Nodes**: one per distinct ``container.host`` (its rack, ``/rack/host``, becomes the
  attribute ``rack``), or ``--machines N``; each of ``--node-capacity`` (default SLS's
  NodeManager default, 10 vcores and 10240 MB). Hosts are not pinned: the policy places.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairshare.traces.base import CommonOptions, Conversion, JobTable, build_scenario, parse_capacity, parse_weights
from fairshare.traces.common import BadData, LineReader, Progress, TraceError, clean_name, sample_keep

NAME = "sls"
SUMMARY = "Hadoop YARN Scheduler Load Simulator JSON input (SLS format)"
RESOURCES = ["cpu", "memory"]
DEFAULT_VCORES = 1
DEFAULT_MEMORY_MB = 1024
MAX_OBJECT_CHARS = 256 << 20  # one job object larger than this is not an SLS job


@dataclass
class Options:
    hierarchy: str = "queue"
    machines: int | None = None
    node_capacity: str = "cpu=10,memory=10"
    weights: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("sls options")
    g.add_argument("--hierarchy", choices=("queue", "queue-user", "user", "flat"), default="queue",
                   help="queue tree: job.queue.name (default), then job.user; user only; or flat")
    g.add_argument("--machines", type=int, default=None, metavar="N",
                   help="N identical nodes instead of one per container.host")
    g.add_argument("--node-capacity", default="cpu=10,memory=10", metavar="R=A,...",
                   help="per node, memory in GiB (default cpu=10,memory=10: SLS's NodeManager default)")
    g.add_argument("--weights", default=None, metavar="Q=W,...", help="queue weights (default 1)")


def options_from_args(ns: argparse.Namespace) -> Options:
    if ns.machines is not None and ns.machines <= 0:
        raise TraceError(f"--machines: must be a positive whole number, got {ns.machines}")
    return Options(ns.hierarchy, ns.machines, ns.node_capacity, ns.weights)


def default_inputs(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.json"))


def iter_json_objects(path: Path, bad: BadData, progress: Progress | None = None,
                      base_bytes: int = 0) -> Iterator[tuple[int, Any]]:
    """``(first line, object)`` for each top-level JSON value, read line by line.

    Lines are collected until one could close the current value (a ``}`` at the same
    indentation as the line that opened it, or a one-line value), then decoded, so a
    pretty-printed job is parsed once and memory holds one job at a time. A syntax error
    is counted with its line and reading resumes at the next line that starts with ``{``;
    a file that ends inside a value is counted as truncated.
    """
    decoder = json.JSONDecoder()
    reader = LineReader(path, bad, progress, base_bytes)
    pieces: list[str] = []
    size = 0
    first_line = indent = 0
    skipping = False  # after a syntax error, until a line starts with "{"
    for line in reader:
        text = line.text
        if skipping and not text.startswith("{"):
            continue
        skipping = False
        if not pieces:
            if not text.strip().strip("[],"):
                continue
            first_line, indent = line.number, len(text) - len(text.lstrip())
        pieces.append(text)
        size += len(text)
        if size > MAX_OBJECT_CHARS:
            bad.add("unparsable JSON", f"{path}:{first_line}", f"one value longer than {MAX_OBJECT_CHARS:,} characters")
            pieces, size, skipping = [], 0, True
            continue
        body = text.strip().rstrip(",]").rstrip()
        closes = body.endswith("}") and (len(pieces) == 1 or (len(text) - len(text.lstrip()) == indent
                                                               and text.lstrip().startswith("}")))
        if not closes:
            continue
        buf = "\n".join(pieces)
        objects, consumed, error = _decode_all(decoder, buf)
        for offset, obj in objects:
            yield first_line + offset, obj
        if error is not None:
            offset, message = error
            bad.add("unparsable JSON", f"{path}:{first_line + offset}", message)
            pieces, size, skipping = [], 0, True
        elif consumed >= len(buf):
            pieces, size = [], 0
        else:  # a value continues on later lines: keep its start
            first_line += buf[:consumed].count("\n")
            pieces = [buf[consumed:]]
            size = len(pieces[0])
    if pieces:
        buf = "\n".join(pieces)
        objects, consumed, error = _decode_all(decoder, buf)
        for offset, obj in objects:
            yield first_line + offset, obj
        if error is not None or buf[consumed:].strip().strip("[],"):
            bad.add("truncated or corrupt file", f"{path}:{first_line}", "the file ends inside a JSON value")


def _decode_all(decoder: json.JSONDecoder, buf: str) -> tuple[list[tuple[int, Any]], int, tuple[int, str] | None]:
    """Decode the values in ``buf``: ``(values with their line offsets, characters consumed,
    (line offset, message) of a syntax error or None)``. An error at the very end of
    ``buf`` is not an error: the value continues on the next lines."""
    out: list[tuple[int, Any]] = []
    pos = 0
    end_of_data = len(buf.rstrip())
    while True:
        while pos < len(buf) and buf[pos] in " \t\r\n,[]":
            pos += 1
        if pos >= len(buf):
            return out, pos, None
        try:
            obj, end = decoder.raw_decode(buf, pos)
        except json.JSONDecodeError as exc:
            if exc.pos >= end_of_data - 1:
                return out, pos, None
            return out, pos, (buf[:exc.pos].count("\n"), exc.msg)
        out.append((buf[:pos].count("\n"), obj))
        pos = end


def _number(obj: dict, key: str, where: str, bad: BadData, default: float | None = None) -> float | None:
    value = obj.get(key, default)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        bad.add("unparsable field" if key in obj else "missing field", where, key)
        return None
    return float(value)


def convert(inputs: list[Path], common: CommonOptions, opts: Options, bad: BadData,
            progress: Progress | None = None) -> Conversion:
    if not inputs:
        raise TraceError("sls: no input file")
    capacity = parse_capacity(opts.node_capacity, "--node-capacity", RESOURCES)
    start_s = common.window_start_s or 0.0
    end_s = common.window_end_s
    table = JobTable()
    hosts: dict[str, str] = {}  # host -> rack, first-seen order
    jobs_read = outside = sampled_out = 0
    done_bytes = 0
    for path in inputs:
        for line_number, job in iter_json_objects(path, bad, progress, done_bytes):
            if common.limit is not None and jobs_read >= common.limit:
                break
            jobs_read += 1
            where = f"{path}:{line_number}"
            if not isinstance(job, dict):
                bad.add("not a job object", where, f"a JSON {type(job).__name__}")
                continue
            submit_ms = _number(job, "job.start.ms", where, bad)
            tasks = job.get("job.tasks")
            if submit_ms is None:
                continue
            if not isinstance(tasks, list) or not tasks:
                bad.add("missing field" if tasks is None else "unparsable field", where, "job.tasks: a non-empty list")
                continue
            submit = submit_ms / 1000
            if submit < start_s or (end_s is not None and submit > end_s):
                outside += 1
                continue
            job_id = str(job.get("job.id", f"job_{jobs_read}"))
            if not sample_keep(job_id, common.sample, common.seed):
                sampled_out += 1
                continue
            queue_path = str(job.get("job.queue.name", "default")).split(".")
            if queue_path[0] == "root" and len(queue_path) > 1:
                queue_path = queue_path[1:]
            queue_parts = [clean_name(q) for q in queue_path]
            user = clean_name(str(job.get("job.user", "default")))
            queue = {"queue": ".".join(queue_parts), "queue-user": ".".join([*queue_parts, user]),
                     "user": user, "flat": None}[opts.hierarchy]
            repeats = _number(job, "job.count", where, bad, 1)
            if repeats is None or repeats < 1 or repeats != int(repeats):
                if repeats is not None:
                    bad.add("impossible demand", where, f"job.count: {repeats:g}")
                continue
            parsed = []
            for t, task in enumerate(tasks):
                tw = f"{where}: job.tasks[{t}]"
                if not isinstance(task, dict):
                    bad.add("unparsable field", tw, "not an object")
                    continue
                t0 = _number(task, "container.start.ms", tw, bad)
                t1 = _number(task, "container.end.ms", tw, bad)
                count = _number(task, "container.count", tw, bad, 1)
                vcores = _number(task, "container.vcores", tw, bad, DEFAULT_VCORES)
                mem_key = "container.memory-mb" if "container.memory-mb" in task else "container.memory"
                memory_mb = _number(task, mem_key, tw, bad, DEFAULT_MEMORY_MB)
                if None in (t0, t1, count, vcores, memory_mb):
                    continue
                if t1 < t0 or count < 0 or count != int(count) or vcores < 0 or memory_mb < 0 \
                        or not (vcores > 0 or memory_mb > 0):
                    bad.add("impossible demand", tw, f"start {t0:g} ms, end {t1:g} ms, count {count:g}, "
                            f"vcores {vcores:g}, memory {memory_mb:g} MB")
                    continue
                demand = {"cpu": vcores, "memory": memory_mb / 1024}
                demand = {r: a for r, a in demand.items() if a > 0}
                if any(a > capacity.get(r, 0) for r, a in demand.items()):
                    bad.add("impossible demand", tw, f"{vcores:g} vcores, {memory_mb:g} MB fits no node "
                            f"({opts.node_capacity})")
                    continue
                host = task.get("container.host")
                if isinstance(host, str) and host.strip():
                    parts = [p for p in host.strip().split("/") if p]
                    hosts.setdefault(clean_name(parts[-1]), clean_name(parts[-2]) if len(parts) > 1 else "")
                kind = clean_name(str(task.get("container.type", "map")))
                parsed.append((kind, demand, (t1 - t0) / 1000, int(count)))
            for k in range(int(repeats)):
                name = clean_name(job_id) + (f"-{k}" if repeats > 1 else "")
                for kind, demand, duration, count in parsed:
                    if count:
                        table.add_task((job_id, k), name=name, queue=queue, submit_s=submit - start_s,
                                       demand=demand, duration_s=duration, class_name=kind, repeat=count)
        if common.limit is not None and jobs_read >= common.limit:
            break
    if opts.machines is not None:
        nodes: list[dict[str, Any]] = [{"name": "node", "count": opts.machines, "capacity": capacity}]
    elif hosts:
        nodes = []
        for host, rack in hosts.items():
            node: dict[str, Any] = {"name": host, "capacity": capacity}
            if rack:
                node["attributes"] = {"rack": rack}
            nodes.append(node)
    else:
        raise TraceError(f"{inputs[0]}: no container.host in the trace; give the cluster size with --machines N")
    scenario = build_scenario(RESOURCES, nodes, table, parse_weights(opts.weights, "--weights"))
    stats = {"jobs read": jobs_read, "jobs": len(scenario["jobs"]), "tasks": table.tasks,
             "jobs outside the window": outside, "nodes": sum(n.get("count", 1) for n in nodes)}
    if common.sample < 1:
        stats["jobs sampled out"] = sampled_out
    notes = ["cpu = vcores, memory in GiB (MB / 1024); hosts are not pinned, the policy places every task"]
    return Conversion(NAME, scenario, stats, notes, bad)
