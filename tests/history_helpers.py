"""What the job-history tests share: how much of a file a reader took before its first record."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


class _CountingFile:
    """A binary file that counts the bytes taken from it (``readinto``, as LineReader reads)."""

    def __init__(self, raw, counter: list[int]):
        self.raw, self.counter = raw, counter

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer) or 0
        self.counter[0] += n
        return n

    def close(self) -> None:
        self.raw.close()


def bytes_before_first(monkeypatch: pytest.MonkeyPatch, path: Path, records: Callable[[], Iterator[Any]]) -> int:
    """Bytes of ``path`` read when ``records()`` has yielded its first record.

    Every trace reader opens its files through ``fairshare.traces.common.open`` (LineReader);
    that name is replaced by one that counts what is read, so a reader that loads the
    whole file before its first record shows the file's size here."""
    from fairshare.traces import common

    counter = [0]

    def counting_open(name, mode="r", *args, **kwargs):
        f = builtins.open(name, mode, *args, **kwargs)
        return _CountingFile(f, counter) if Path(name) == path and "b" in mode else f

    monkeypatch.setattr(common, "open", counting_open, raising=False)
    iterator = records()
    next(iterator)
    taken = counter[0]
    for _ in iterator:  # the rest, so the file is closed
        pass
    return taken
