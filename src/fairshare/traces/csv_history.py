"""A job history in any CSV, with a column mapping -> scenario.

Read with the history kinds' shared rules (``traces/history.py``, docs/traces.md#csv).
One row is one task run (or ``count`` identical ones); ``--columns`` says which header
column holds each field::

    --columns submit=SubmitTime,start=StartTime,end=EndTime,queue=Team,job=JobId,cpu=CPUs,memory=MemGB,gpu=GPUs

- **Fields**: ``submit`` and ``start`` (required), ``end`` or ``duration`` (seconds; one
  of them required), ``job`` (rows with the same value are one job; default: each row its
  own job), ``queue``, ``count``, and the demand ``cpu``, ``memory``, ``gpu`` (at least
  one). An empty ``start`` is a task that never started (counted); an empty ``end`` one
  still running (censored).
- **Times**: ``--time-format iso`` (default: ISO 8601, no zone = UTC), ``epoch`` (Unix
  seconds: time 0 is the earliest submit) or ``seconds`` (already trace seconds: kept as
  they are, time 0 is 0).
- **Memory**: ``--memory-unit`` of the memory column (default GiB; MiB, GB, MB, bytes).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fairshare.traces.base import CommonOptions, Conversion
from fairshare.traces.common import BadData, Progress, TraceError, clean_name, open_csv_with_header, parse_float
from fairshare.traces.history import (HistoryOptions, Run, add_history_arguments, convert_history, history_options,
                                      parse_time)

NAME = "csv"
SUMMARY = "a job history in any CSV: --columns maps submit, start, end, queue, job and demand columns"
FIELDS = ("submit", "start", "end", "duration", "job", "queue", "count", "cpu", "memory", "gpu")
DEMAND_FIELDS = ("cpu", "memory", "gpu")
MEMORY_UNITS_GIB = {"GiB": 1.0, "MiB": 1 / 1024, "GB": 1e9 / 2**30, "MB": 1e6 / 2**30, "bytes": 1 / 2**30}


@dataclass
class Options(HistoryOptions):
    columns: str = "submit=submit,start=start,end=end,queue=queue,job=job,cpu=cpu,memory=memory"
    time_format: str = "iso"
    memory_unit: str = "GiB"
    delimiter: str = ","


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = add_history_arguments(parser, "csv options")
    d = Options()
    g.add_argument("--columns", default=d.columns, metavar="FIELD=COLUMN,...",
                   help=f"which header column holds each field; fields: {', '.join(FIELDS)} (default {d.columns})")
    g.add_argument("--time-format", choices=("iso", "epoch", "seconds"), default="iso",
                   help="submit/start/end as ISO 8601 (default), Unix epoch seconds, or trace seconds kept as they are")
    g.add_argument("--memory-unit", choices=tuple(MEMORY_UNITS_GIB), default="GiB",
                   help="unit of the memory column (default GiB)")
    g.add_argument("--delimiter", default=",", metavar="CHAR", help="field separator (default ,)")


def options_from_args(ns: argparse.Namespace) -> Options:
    if len(ns.delimiter) != 1:
        raise TraceError(f"--delimiter: expected one character, got {ns.delimiter!r}")
    return Options(**history_options(ns), columns=ns.columns, time_format=ns.time_format,
                   memory_unit=ns.memory_unit, delimiter=ns.delimiter)


def default_inputs(directory: Path) -> list[Path]:
    return sorted([*directory.glob("*.csv"), *directory.glob("*.csv.gz")])


def parse_columns(text: str) -> dict[str, str]:
    """``--columns``: ``{field: header column}``; errors name the unknown or missing field."""
    out: dict[str, str] = {}
    for item in text.split(","):
        name, sep, column = item.partition("=")
        name, column = name.strip(), column.strip()
        if not sep or not column:
            raise TraceError(f"--columns: expected FIELD=COLUMN, got {item!r}")
        if name not in FIELDS:
            raise TraceError(f"--columns: unknown field {name!r} (fields: {', '.join(FIELDS)})")
        out[name] = column
    for required in ("submit", "start"):
        if required not in out:
            raise TraceError(f"--columns: the field {required!r} is required")
    if "end" not in out and "duration" not in out:
        raise TraceError("--columns: one of the fields 'end' or 'duration' is required")
    if not any(f in out for f in DEMAND_FIELDS):
        raise TraceError(f"--columns: at least one demand field is required ({', '.join(DEMAND_FIELDS)})")
    return out


def convert(inputs: list[Path], common: CommonOptions, opts: Options, bad: BadData,
            progress: Progress | None = None) -> Conversion:
    if not inputs:
        raise TraceError("csv: no input file")
    columns = parse_columns(opts.columns)
    memory_gib = MEMORY_UNITS_GIB[opts.memory_unit]
    read_time = parse_time if opts.time_format == "iso" else _seconds

    def runs(bad: BadData, progress: Progress | None) -> Iterator[Run]:
        done_bytes = 0
        for index, path in enumerate(inputs):
            reader, rows = _open(path, columns, opts.delimiter, bad, progress, done_bytes)
            for number, row in rows:
                where = f"{path}:{number}"
                try:
                    submit = read_time(row[columns["submit"]])
                    start = read_time(row[columns["start"]])
                    if "end" in columns:
                        end = read_time(row[columns["end"]])
                    else:
                        text = row[columns["duration"]].strip()
                        end = None if not text or start is None else start + parse_float(text)
                    count = int(parse_float(row[columns["count"]])) if "count" in columns else 1
                    demand = {r: parse_float(row[columns[r]] or "0") for r in DEMAND_FIELDS if r in columns}
                except (ValueError, KeyError) as exc:
                    bad.add("unparsable field", where, str(exc))
                    continue
                if submit is None:
                    bad.add("missing field", where, f"submit ({columns['submit']}) is empty")
                    continue
                if count < 1 or any(a < 0 for a in demand.values()):
                    bad.add("impossible demand", where, f"count {count}, demand {demand}")
                    continue
                if "memory" in demand:
                    demand["memory"] *= memory_gib
                job = row[columns["job"]].strip() if "job" in columns else ""
                job_key = f"{index}:{job or number}"
                name = clean_name(job or f"row{number}")
                queue = row[columns["queue"]].strip() if "queue" in columns else None
                yield Run(job_key, name, queue or None, submit, start, end, demand, where, count=count)
            done_bytes += reader.bytes_read

    return convert_history(NAME, runs, common, opts, bad, progress,
                           origin_s=0.0 if opts.time_format == "seconds" else None,
                           notes=[f"columns {', '.join(f'{k}={v}' for k, v in columns.items())}; "
                                  f"times {opts.time_format}; memory column in {opts.memory_unit}"])


def _seconds(text: str) -> float | None:
    text = text.strip()
    return None if not text else parse_float(text)


def _open(path: Path, columns: dict[str, str], delimiter: str, bad: BadData, progress: Progress | None,
          base_bytes: int):
    """The rows of one CSV; a mapped column missing from the header is an error naming the field."""
    try:
        return open_csv_with_header(path, tuple(dict.fromkeys(columns.values())), bad, progress, base_bytes,
                                    delimiter)
    except TraceError as exc:
        message = str(exc)
        absent = message.split("(header:")[0]
        fields = [f"{field}={column}" for field, column in columns.items() if f" {column}" in absent]
        raise TraceError(f"{message}; mapped by --columns {', '.join(fields)}" if fields else message) from None
