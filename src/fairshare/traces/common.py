"""Shared machinery of the trace converters: bad-data accounting, streaming readers,
progress, and writing the scenario.

Every converter reads its input line by line (``csv`` over ``gzip`` where the file ends in
``.gz``) and aggregates per job as it goes; nothing here keeps a list of rows. A problem
with one row (too few columns, a field that does not parse, an impossible demand) is
*counted* in a :class:`BadData` collector with the line numbers of the first few, and the
row is skipped; ``--strict`` turns the first such problem into a :class:`TraceError`.
A truncated file (a ``.gz`` whose stream ends early, a last line cut in half) is counted
the same way and the rows read before it are kept.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

#: how many example line numbers each bad-data reason keeps
EXAMPLES_KEPT = 5
#: shortest task duration written (seconds); a zero-length run in a trace becomes this
MIN_DURATION_S = 0.001


class TraceError(Exception):
    """A trace that cannot be converted (a missing file or column), or bad data under --strict.

    ``str(exc)`` is the whole message: it names the file, the line when there is one, the
    field and the reason.
    """


@dataclass
class BadData:
    """Counts of skipped or repaired rows per reason, with the first few locations each.

    Invariant: ``counts[reason] >= len(examples[reason])`` and examples keep file order.
    """

    strict: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, reason: str, where: str, detail: str = "") -> None:
        """Record one problem: ``where`` is ``FILE:LINE`` (or ``FILE``), ``detail`` names the field."""
        location = f"{where}: {detail}" if detail else where
        if self.strict:
            raise TraceError(f"{where}: {reason}{': ' + detail if detail else ''} (--strict stops at the first bad row)")
        self.counts[reason] = self.counts.get(reason, 0) + 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < EXAMPLES_KEPT:
            shown.append(location)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def lines(self) -> list[str]:
        """Human-readable report, one reason per line (most frequent first, then by name)."""
        out = []
        for reason, n in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0])):
            more = "" if n <= len(self.examples[reason]) else ", ..."
            out.append(f"{n:,} x {reason} (first at {'; '.join(self.examples[reason])}{more})")
        return out

    def to_json(self) -> dict[str, Any]:
        return {reason: {"count": n, "first": list(self.examples[reason])}
                for reason, n in sorted(self.counts.items())}


class Progress:
    """Bytes-read progress over the input files, drawn with the simulator's bar.

    Reuses ``fairshare.sim.progress.ProgressBar`` (its throttling, terminal and log-file
    behaviour) with the text changed to megabytes read of the input's size on disk
    (compressed bytes for ``.gz``). ``None`` stream: silent.
    """

    def __init__(self, stream: TextIO | None, total_bytes: int, label: str):
        self.bar = None
        self.total_bytes = total_bytes
        if stream is not None and total_bytes > 0:
            from fairshare.sim.progress import WIDTH, ProgressBar

            class _BytesBar(ProgressBar):
                def _draw(self, now: float, done: int, wall: float) -> None:
                    frac = min(1.0, done / total_bytes)
                    filled = int(round(frac * WIDTH))
                    text = (f"{self.label}[{'#' * filled}{'.' * (WIDTH - filled)}] {100 * frac:5.1f}%  "
                            f"{done / 1e6:,.1f}/{total_bytes / 1e6:,.1f} MB read  {wall - self.started:,.1f} s elapsed")
                    self.stream.write("\r" + text + "\x1b[K" if self.tty else text + "\n")
                    self.stream.flush()
                    self._drawn = True

            self.bar = _BytesBar(stream, label=label)

    def update(self, done_bytes: int) -> None:
        if self.bar is not None:
            self.bar(0.0, done_bytes)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close(0.0, self.total_bytes)


class _Counting(io.RawIOBase):
    """A raw binary reader that counts the bytes taken from the underlying file."""

    def __init__(self, raw):
        self.raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer)
        self.count += n or 0
        return n or 0

    def close(self) -> None:
        self.raw.close()
        super().close()


@dataclass
class Line:
    number: int  # 1-based line number in the (decompressed) file
    text: str


class LineReader:
    """Lines of a text file, ``.gz`` decompressed on the fly, with truncation detection.

    Iterating yields :class:`Line` (without the newline). A gzip stream that ends early or
    is corrupt stops the iteration and is recorded in ``bad`` as "truncated or corrupt
    file"; a last line without a newline is yielded with ``last_unterminated`` set, so the
    caller can check it harder (a cut-off row usually has too few columns).
    """

    def __init__(self, path: Path, bad: BadData, progress: Progress | None = None, base_bytes: int = 0):
        self.path = path
        self.bad = bad
        self.progress = progress
        self.base_bytes = base_bytes
        self.last_unterminated = False
        self.bytes_read = 0

    def __iter__(self) -> Iterator[Line]:
        try:
            raw = open(self.path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        counting = _Counting(raw)
        buffered = io.BufferedReader(counting, buffer_size=1 << 20)
        binary = gzip.GzipFile(fileobj=buffered, mode="rb") if self.path.name.endswith(".gz") else buffered
        text = io.TextIOWrapper(binary, encoding="utf-8", errors="replace", newline="")
        number = 0
        try:
            while True:
                try:
                    chunk = text.readline()
                except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
                    self.bad.add("truncated or corrupt file", f"{self.path}:{number + 1}",
                                 f"{type(exc).__name__}: {exc}; rows before it were kept")
                    return
                if not chunk:
                    return
                number += 1
                if number % 4096 == 0 and self.progress is not None:
                    self.progress.update(self.base_bytes + counting.count)
                if chunk.endswith("\n"):
                    chunk = chunk[:-2] if chunk.endswith("\r\n") else chunk[:-1]
                else:
                    self.last_unterminated = True
                yield Line(number, chunk)
        finally:
            self.bytes_read = counting.count
            text.close()


def split_csv(text: str, delimiter: str = ",") -> list[str]:
    """One CSV row (quotes honoured only when present; the fast path is a plain split)."""
    if '"' not in text:
        return text.split(delimiter)
    return next(csv.reader([text], delimiter=delimiter))


class ColumnError(ValueError):
    """A column that does not parse; ``str()`` names the column and the text."""


def number_columns(row: dict[str, str], columns: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, float | None]:
    """The named columns of ``row`` as finite floats; an empty optional column is None.

    Raises :class:`ColumnError` naming the first column that does not parse.
    """
    out: dict[str, float | None] = {}
    for col in columns:
        text = row[col].strip()
        if not text and col in optional:
            out[col] = None
            continue
        try:
            out[col] = parse_float(text)
        except ValueError:
            raise ColumnError(f"{col}: {text!r} is not a number") from None
    return out


def parse_float(text: str) -> float:
    """A finite float; ValueError otherwise (``nan``/``inf`` are not data)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


def csv_header(path: Path) -> list[str]:
    """The column names of a CSV file's header line (empty for an empty file).

    Lets a converter choose how to read a file (a pod list with or without timing
    columns) before :func:`open_csv_with_header` checks the columns that choice needs.
    """
    for line in LineReader(path, BadData()):
        return [h.strip() for h in split_csv(line.text.lstrip("\ufeff"))]
    return []


def open_csv_with_header(path: Path, required: tuple[str, ...], bad: BadData,
                         progress: Progress | None = None, base_bytes: int = 0, delimiter: str = ","):
    """Rows of a CSV file with a header line, as ``(line number, {column: text})``.

    A missing required column is a :class:`TraceError` (nothing can be converted without
    it). A row with a different number of fields than the header is counted as
    "wrong number of columns" and skipped.
    """
    reader = LineReader(path, bad, progress, base_bytes)
    lines = iter(reader)
    header_line = next(lines, None)
    if header_line is None:
        raise TraceError(f"{path}: empty file (expected a header line with {', '.join(required)})")
    header = [h.strip() for h in split_csv(header_line.text.lstrip("\ufeff"), delimiter)]
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(f"{path}:1: missing column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)} (header: {', '.join(header)})")
    width = len(header)

    def rows():
        for line in lines:
            if not line.text.strip():
                continue
            fields = split_csv(line.text, delimiter)
            if len(fields) != width:
                reason = ("truncated last line" if reader.last_unterminated else "wrong number of columns")
                bad.add(reason, f"{path}:{line.number}", f"{len(fields)} fields, expected {width}")
                continue
            yield line.number, dict(zip(header, fields))

    return reader, rows()


def sample_keep(key: str, fraction: float, seed: int) -> bool:
    """Deterministic sampling by key: keep ``key`` when its hash falls below ``fraction``.

    A stable hash (CRC-32 of ``seed:key``), not Python's salted ``hash``, so the same key,
    fraction and seed keep the same jobs on every run and machine, and all rows of one job
    are kept or dropped together while streaming.
    """
    if fraction >= 1.0:
        return True
    return zlib.crc32(f"{seed}:{key}".encode()) / 2**32 < fraction


def durations_value(durations: list[float]) -> float | list[float]:
    """A task class's ``duration``: one number when all runs are equal, else the list (ms precision)."""
    rounded = [max(MIN_DURATION_S, round(d, 3)) for d in durations]
    first = rounded[0]
    return first if all(d == first for d in rounded) else rounded


def clean_name(text: str) -> str:
    """A queue or job name: no dots (they separate queue paths), no whitespace."""
    out = "".join(c if (c.isalnum() or c in "-_") else "_" for c in text.strip())
    return out or "_"


def write_scenario(data: dict[str, Any], path: Path) -> None:
    """Write the scenario as JSON (``.json``) or YAML (anything else), atomically.

    Written to a temporary file in the same directory and renamed over ``path``, so an
    interrupted or failed conversion never leaves a half-written scenario behind.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise TraceError(f"-o: {path} is a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise TraceError(f"-o: cannot write into {directory}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            if path.suffix.lower() == ".json":
                json.dump(data, out, separators=(",", ":"))
                out.write("\n")
            else:
                import yaml

                class _NoAliases(yaml.SafeDumper):
                    # shared dicts (one capacity for many nodes) are written out each time: a
                    # scenario file is read by people, and `&id001` anchors are no help there
                    def ignore_aliases(self, data: Any) -> bool:
                        return True

                yaml.dump(data, out, Dumper=_NoAliases, sort_keys=False, default_flow_style=None, width=120)
        mask = os.umask(0)  # mkstemp makes the file 0600; give it the mode a plain open() would
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def total_size(paths: list[Path]) -> int:
    size = 0
    for p in paths:
        try:
            size += p.stat().st_size
        except OSError:
            pass
    return size
