"""The scenario loader's field helpers: the error collector and the value checks every
section uses (numbers, names, resource amounts), so each section reports its problems
with the same wording and field paths.

Validation collects *every* problem before anything is built (``model/loader.py``); the
section parsers (``loader_cluster``, ``loader_queues``, ``loader_jobs``,
``loader_events``) add to one :class:`Collector`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from fairshare.model.errors import FieldError

#: called with each valid resource name met in an amounts mapping, in file order (the
#: resource order when the scenario does not declare ``resources:``)
NoteResource = Callable[[str], None]


class Collector:
    """Every problem found so far, each a :class:`FieldError` with its path."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        #: entry path (``jobs[3]``) -> its name, shown after the index in the errors below it
        self.entry_names: dict[str, str] = {}

    def add(self, path: str, reason: str) -> None:
        self.errors.append(FieldError(path, reason, self._named(path)))

    def name_entry(self, path: str, name: Any) -> None:
        """Show ``name`` after ``path`` (an entry such as ``jobs[3]``) in every problem
        reported under it, so a reader of a long file finds it by name too. A name that
        is not printable text is not shown (its own field reports it)."""
        if isinstance(name, str) and name.strip() and name.isprintable():
            self.entry_names[path] = name

    def _named(self, path: str) -> str:
        """``jobs[3].tasks[0].demand`` -> ``jobs[3] (big).tasks[0].demand``; '' when
        no entry on the path has a name."""
        if not self.entry_names:
            return ""
        shown, start = [], 0
        # (an entry ends where a key or an index follows it, or at the end of the path)
        for end in [m.start() for m in _PATH_STEP.finditer(path)] + [len(path)]:
            name = self.entry_names.get(path[:end])
            if name is not None:
                shown.append(f"{path[start:end]} ({name})")
                start = end
        return "".join(shown) + path[start:] if shown else ""

    def unknown_keys(self, obj: Mapping, allowed: set[str], path: str) -> None:
        for key in obj:
            if key not in allowed:
                self.add(join(path, str(key)), f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def number(self, value: Any, path: str, *, minimum: float | None = 0.0, positive: bool = False,
               integer: bool = False) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.add(path, f"must be a number, got {show(value)}")
            return None
        if not math.isfinite(value):
            self.add(path, f"must be finite, got {value}")
            return None
        if integer and value != int(value):
            self.add(path, f"must be a whole number, got {value}")
            return None
        if positive and value <= 0:
            self.add(path, f"must be > 0, got {show(value)}")
            return None
        if minimum is not None and value < minimum:
            self.add(path, f"must be >= {minimum:g}, got {show(value)}")
            return None
        return float(value)

    def name(self, value: Any, path: str) -> str | None:
        if not isinstance(value, str) or not value.strip():
            self.add(path, f"must be a non-empty string, got {show(value)}")
            return None
        if "." in value:
            self.add(path, f"must not contain '.', which separates queue paths (got {value!r})")
            return None
        return value


_PATH_STEP = re.compile(r"[.\[]")


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def show(value: Any) -> str:
    """A value as an error message quotes it: strings quoted, containers by their kind."""
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "a list" if value else "an empty list"
    if isinstance(value, Mapping):
        return "a mapping"
    return str(value)


def amounts(col: Collector, raw: Any, path: str, note: NoteResource) -> dict[str, float] | None:
    """``{cpu: 4, memory: 16}``: resource name -> amount >= 0; None when any entry is bad."""
    if not isinstance(raw, Mapping):
        col.add(path, f"must be a mapping of resource amounts like {{cpu: 4, memory: 16}}, got {show(raw)}")
        return None
    out: dict[str, float] = {}
    ok = True
    for key, value in raw.items():
        if not isinstance(key, str) or not key:
            col.add(path, f"resource names must be non-empty strings, got {show(key)}")
            ok = False
            continue
        v = col.number(value, f"{path}.{key}", minimum=0.0)
        if v is None:
            ok = False
            continue
        out[key] = v
        note(key)
    return out if ok else None
