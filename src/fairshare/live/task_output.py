"""Each task attempt's output (stdout and stderr merged), kept in files, bounded and rotated.

The node agent that runs an attempt writes its output here (``OutputWriter``); serve
reads it back by byte offset (``OutputFiles.read``) for ``GET
/v1/jobs/{id}/tasks/{task}/logs``. No Ray import: the agent and serve (local mode) use
the same files, the unit tests drive them directly.

Layout: ``DIR/<task id>/<attempt>.<start>.out``, one file per *segment*, ``start`` being
the offset of the segment's first byte in the attempt's whole output. The writer appends
to the newest segment; once it holds ``max_bytes // 2`` bytes a new segment starts and
the oldest beyond the two newest is deleted (logrotate's scheme, two generations). So an
attempt keeps between ``max_bytes // 2`` and ``max_bytes`` bytes, always its tail, and
the bytes lost to rotation are the first kept segment's ``start``: the names say it, no
index file to keep consistent with them. A reader that loses a race with a rotation (a
segment deleted under it) reads again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: bytes of output kept per attempt unless serve is told otherwise (``--output-max-bytes``)
DEFAULT_MAX_BYTES = 8 * 2 ** 20
#: the smallest cap accepted (two segments of at least 1 KiB)
MIN_MAX_BYTES = 2048
#: bytes one read returns unless asked (``limit``), and the most it may ask for
READ_DEFAULT, READ_MAX = 65536, 2 ** 20


@dataclass(frozen=True)
class OutputChunk:
    """Bytes ``[offset, offset + len(data))`` of an attempt's output. ``offset`` is at
    least ``dropped``, the bytes rotation removed (all before the first kept byte);
    ``size`` is the attempt's whole output so far (``dropped`` + bytes kept)."""
    offset: int
    data: bytes
    dropped: int
    size: int


def _segment_name(attempt: int, start: int) -> str:
    return f"{attempt}.{start}.out"


def _segments(task_dir: Path, attempt: int | None = None) -> dict[int, list[tuple[int, Path]]]:
    """attempt -> its segments ``(start, path)`` by start; an absent directory: none."""
    out: dict[int, list[tuple[int, Path]]] = {}
    try:
        names = os.listdir(task_dir)
    except OSError:
        return out
    for name in names:
        parts = name.split(".")
        if len(parts) != 3 or parts[2] != "out" or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        if attempt is None or int(parts[0]) == attempt:
            out.setdefault(int(parts[0]), []).append((int(parts[1]), task_dir / name))
    for segs in out.values():
        segs.sort()
    return out


def _open_private(path: Path):
    """``path`` opened to append, unbuffered, created readable by its owner only."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab", buffering=0)


class OutputWriter:
    """Appends one attempt's output to its segments (module docstring). Not thread-safe:
    the one thread that reads the command's pipe writes."""

    def __init__(self, directory: str | os.PathLike, task_id: int, attempt: int, max_bytes: int = DEFAULT_MAX_BYTES):
        if max_bytes < MIN_MAX_BYTES:
            raise ValueError(f"max_bytes: must be >= {MIN_MAX_BYTES}, got {max_bytes}")
        self.task_dir = Path(directory) / str(task_id)
        # private to serve's user: with run_as, tenants share this machine (docs/live.md,
        # Trust model), and one tenant must not read another's output
        self.task_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.attempt = attempt
        self.segment_bytes = max_bytes // 2
        # (a repeated start of the same attempt: ``NodeAgent.run`` answers it without a
        # second writer; a leftover of a dead agent is replaced)
        for _start, path in _segments(self.task_dir, attempt).get(attempt, []):
            path.unlink(missing_ok=True)
        self.size = 0  # bytes written in all
        self._start = 0
        self._file = _open_private(self.task_dir / _segment_name(attempt, 0))

    def write(self, data: bytes) -> None:
        while data:
            room = self.segment_bytes - (self.size - self._start)
            if room <= 0:
                self._rotate()
                continue
            piece, data = data[:room], data[room:]
            self._file.write(piece)
            self.size += len(piece)

    def close(self) -> None:
        self._file.close()

    def _rotate(self) -> None:
        self._file.close()
        self._start = self.size
        self._file = _open_private(self.task_dir / _segment_name(self.attempt, self._start))
        for _start, path in _segments(self.task_dir, self.attempt).get(self.attempt, [])[:-2]:
            path.unlink(missing_ok=True)


class OutputFiles:
    """The attempts' output under one directory, read (``list``, ``read``)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)

    def list(self, task_ids: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
        """``(task id, attempt) -> (bytes kept, bytes dropped)`` of the attempts with output
        kept, among ``task_ids``'."""
        out = {}
        for task_id in task_ids:
            for attempt, segs in _segments(self.directory / str(int(task_id))).items():
                kept = 0
                for _start, path in segs:
                    try:
                        kept += path.stat().st_size
                    except OSError:  # (rotated away meanwhile)
                        pass
                out[(int(task_id), attempt)] = (kept, segs[0][0])
        return out

    def read(self, task_id: int, attempt: int, offset: int, limit: int) -> OutputChunk | None:
        """At most ``limit`` bytes from ``offset`` (moved up to the first byte kept); None
        when that attempt has no output here."""
        for _try in range(5):
            segs = _segments(self.directory / str(int(task_id)), attempt).get(attempt)
            if not segs:
                return None
            try:
                return _read(segs, offset, limit)
            except FileNotFoundError:  # a segment rotated away under the reader: again
                continue
        return None


def _read(segs: list[tuple[int, Path]], offset: int, limit: int) -> OutputChunk:
    """The segments are contiguous (each starts where the one before ends)."""
    dropped = segs[0][0]
    begin = max(offset, dropped)
    parts: list[bytes] = []
    pos, got, size = begin, 0, dropped
    for i, (start, path) in enumerate(segs):
        with open(path, "rb") as f:
            end = start + os.fstat(f.fileno()).st_size
            if i + 1 < len(segs):  # (complete once the next exists: never past its start)
                end = min(end, segs[i + 1][0])
            size = end
            if start <= pos < end and got < limit:
                f.seek(pos - start)
                piece = f.read(min(limit - got, end - pos))
                parts.append(piece)
                pos += len(piece)
                got += len(piece)
    return OutputChunk(offset=begin, data=b"".join(parts), dropped=dropped, size=size)
