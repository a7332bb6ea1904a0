"""Slurm job history: ``sacct -P`` (``--parsable2``) output -> scenario.

Read with the history kinds' shared rules (``traces/history.py``, docs/traces.md#sacct).
The first line is the header; columns are found by name, in any order, e.g.::

    sacct -a -X -P -S 2026-01-01 -o JobID,Submit,Start,End,State,Account,User,ReqTRES,AllocTRES

- **Rows**: one job allocation per row. Job steps (``123.batch``, ``123.extern``,
  ``123.0``) are skipped and counted: the allocation row already holds the job's
  resources and times (``-X`` leaves them out). An array task (``123_4``) is a task of
  the array job ``123``; a pending array remainder (``123_[5-9]``) never started
  (counted). A heterogeneous job's components (``123+0``) are task classes of job 123.
- **Times**: submit ``Submit`` (without the column: ``Start``, and no wait is known),
  duration ``End - Start``; ``Start`` ``Unknown``/``None`` (cancelled before it started,
  pending) is skipped and counted, ``End`` ``Unknown`` (running) is censored.
- **Demand**: ``--tres req`` (default) reads ``ReqTRES``, ``alloc`` reads ``AllocTRES``
  (either falls back to the other column when it is empty, as for a job that never
  started): ``cpu`` -> cpu, ``mem`` -> memory in GiB (Slurm's units K/M/G/T are powers
  of 1024; no unit is M), ``gres/gpu`` -> gpu (typed ``gres/gpu:a100`` counted when the
  untyped total is absent). ``node=N`` > 1 splits the job into N tasks of 1/N each.
  Without a TRES column: cpu from ``AllocCPUS``/``NCPUS``/``ReqCPUS``, else 1 per job.
- **Queues**: ``--queue account`` (default), ``account.user``, ``user`` or
  ``partition``; then ``--queue-map``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fairshare.traces.base import CommonOptions, Conversion
from fairshare.traces.common import BadData, LineReader, Progress, TraceError, clean_name
from fairshare.traces.history import (KIB, HistoryOptions, Run, add_history_arguments, convert_history,
                                      history_options, parse_time)

NAME = "sacct"
SUMMARY = "Slurm job history: sacct -P output (Submit, Start, End, ReqTRES/AllocTRES, Account, User)"
QUEUE_COLUMNS = {"account": ("Account",), "account.user": ("Account", "User"), "user": ("User",),
                 "partition": ("Partition",)}
#: Slurm's memory units (sacct prints mem=16G, 500M, 1.50T): powers of 1024; no unit is megabytes
#: where the cpu count is when there is no TRES column (older sacct, a short --format)
CPU_COLUMNS = ("AllocCPUS", "NCPUS", "ReqCPUS")
MEMORY_GIB = {"K": 1 / KIB**2, "M": 1 / KIB, "G": 1.0, "T": float(KIB), "P": float(KIB**2)}


@dataclass
class Options(HistoryOptions):
    tres: str = "req"
    queue: str = "account"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = add_history_arguments(parser, "sacct options")
    g.add_argument("--tres", choices=("req", "alloc"), default="req",
                   help="demand from ReqTRES (default: what the job asked for) or AllocTRES (what it got)")
    g.add_argument("--queue", choices=tuple(QUEUE_COLUMNS), default="account",
                   help="the queue of a job: its Account (default), Account then User, User, or Partition")


def options_from_args(ns: argparse.Namespace) -> Options:
    return Options(**history_options(ns), tres=ns.tres, queue=ns.queue)


def default_inputs(directory: Path) -> list[Path]:
    return sorted([*directory.glob("*.sacct"), *directory.glob("*.sacct.gz")])


def parse_tres(text: str) -> dict[str, float]:
    """``cpu=4,mem=16G,gres/gpu=1,node=1,billing=4`` -> ``{cpu, memory (GiB), gpu, node}``.

    Raises ValueError naming the entry that does not parse; unknown TRES (billing,
    energy, licenses) are ignored."""
    out: dict[str, float] = {}
    typed_gpus = 0.0
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r} is not NAME=VALUE")
        try:
            if key == "cpu":
                out["cpu"] = float(value)
            elif key == "mem":
                unit = value[-1].upper() if value and value[-1].isalpha() else "M"
                number = value[:-1] if value and value[-1].isalpha() else value
                if unit not in MEMORY_GIB:
                    raise ValueError
                out["memory"] = float(number) * MEMORY_GIB[unit]
            elif key == "gres/gpu":
                out["gpu"] = float(value)
            elif key.startswith("gres/gpu:"):
                typed_gpus += float(value)
            elif key == "node":
                out["node"] = float(value)
        except ValueError:
            raise ValueError(f"{item!r} does not parse") from None
    if "gpu" not in out and typed_gpus:
        out["gpu"] = typed_gpus
    return out


def split_job_id(text: str) -> tuple[str, str | None, bool]:
    """``(job key, component or array task, is a step)`` of a JobID.

    ``123`` -> (``123``, None, False); ``123_4`` -> (``123``, ``4``, False); ``123_[1-3]``
    -> (``123``, ``[1-3]``, False); ``123+1`` -> (``123``, ``+1``, False); ``123.batch``,
    ``123_4.0`` -> step."""
    job, dot, _step = text.partition(".")
    if dot:
        return job.partition("_")[0].partition("+")[0], None, True
    if "_" in job:
        base, _, index = job.partition("_")
        return base, index, False
    if "+" in job:
        base, _, component = job.partition("+")
        return base, "+" + component, False
    return job, None, False


def convert(inputs: list[Path], common: CommonOptions, opts: Options, bad: BadData,
            progress: Progress | None = None) -> Conversion:
    if not inputs:
        raise TraceError("sacct: no input file")
    counts = {"job steps (skipped)": 0}
    header_notes: set[str] = set()

    def runs(bad: BadData, progress: Progress | None) -> Iterator[Run]:
        counts["job steps (skipped)"] = 0
        done_bytes = 0
        for path in inputs:
            reader = LineReader(path, bad, progress, done_bytes)
            yield from _file_runs(path, reader, opts, bad, counts, header_notes)
            done_bytes += reader.bytes_read

    result = convert_history(NAME, runs, common, opts, bad, progress, stats=counts,
                             notes=[f"demand from {'ReqTRES' if opts.tres == 'req' else 'AllocTRES'}; "
                                    "cpu, mem (GiB), gres/gpu; a job on node=N > 1 nodes is N tasks of 1/N each"])
    result.notes.extend(sorted(header_notes))
    return result


def _file_runs(path: Path, reader: LineReader, opts: Options, bad: BadData, counts: dict[str, int],
               notes: set[str]) -> Iterator[Run]:
    lines = iter(reader)
    first = next(lines, None)
    if first is None:
        raise TraceError(f"{path}: empty file (expected sacct -P output with a header line)")
    header = [h.strip() for h in first.text.lstrip("\ufeff").split("|")]
    column = {name: k for k, name in enumerate(header)}
    tres_order = ("ReqTRES", "AllocTRES") if opts.tres == "req" else ("AllocTRES", "ReqTRES")
    missing = [c for c in ("JobID", "Start", "End") if c not in column]
    if missing:
        raise TraceError(f"{path}:1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                         f"(header: {', '.join(header)}; sacct -P -o JobID,Submit,Start,End,Account,User,ReqTRES)")
    submit_column = "Submit" if "Submit" in column else "Start"
    if submit_column == "Start":
        notes.add(f"{path}: no Submit column: submit = Start (the history's waits are unknown)")
    tres_columns = [column[t] for t in tres_order if t in column]
    cpus_column = next((column[c] for c in CPU_COLUMNS if c in column), None)
    if not tres_columns:
        notes.add(f"{path}: no ReqTRES or AllocTRES column: demand = "
                  + (f"{header[cpus_column]} cpus" if cpus_column is not None else "1 cpu per job"))
    queue_columns = [column[c] for c in QUEUE_COLUMNS[opts.queue] if c in column]
    if len(queue_columns) < len(QUEUE_COLUMNS[opts.queue]):
        notes.add(f"{path}: no {' or '.join(QUEUE_COLUMNS[opts.queue])} column: "
                  + ("no queues" if not queue_columns else "queues from the columns present"))
    width = len(header)
    for line in lines:
        if not line.text.strip():
            continue
        where = f"{path}:{line.number}"
        f = line.text.split("|")
        if len(f) != width:
            bad.add("truncated last line" if reader.last_unterminated else "wrong number of columns", where,
                    f"{len(f)} fields, expected {width}")
            continue
        job_key, part, step = split_job_id(f[column["JobID"]].strip())
        if step:
            counts["job steps (skipped)"] += 1
            continue
        try:
            submit = parse_time(f[column[submit_column]])
            start = parse_time(f[column["Start"]])
            end = parse_time(f[column["End"]])
        except ValueError as exc:
            bad.add("unparsable field", where, f"Submit, Start or End: {exc}")
            continue
        tres_text = next((f[k] for k in tres_columns if f[k].strip()), "")
        try:
            if tres_columns:
                tres = parse_tres(tres_text)
            else:
                tres = {"cpu": float(f[cpus_column]) if cpus_column is not None else 1.0}
        except ValueError as exc:
            bad.add("unparsable field", where, f"{tres_order[0] if tres_columns else header[cpus_column]}: {exc}")
            continue
        nodes = max(1, int(tres.pop("node", 1) or 1))
        demand = {r: a / nodes for r, a in tres.items()}
        if submit is None and start is not None:
            bad.add("missing field", where, f"{submit_column} is {f[column[submit_column]].strip() or 'empty'}")
            continue
        queue = ".".join(clean_name(f[k]) for k in queue_columns if f[k].strip()) or None
        never_ran = part is not None and part.startswith("[")  # a pending array remainder
        component = f"het{part[1:]}" if part is not None and part.startswith("+") else None
        yield Run(job_key, clean_name(job_key), queue, submit or 0.0, None if never_ran or submit is None else start, end, demand, where,
                  count=nodes, class_name=component)
