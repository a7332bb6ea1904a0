"""Trace converters: real cluster traces -> scenario documents (contract: "Traces").

One module per kind, each with the same surface: ``NAME``, ``SUMMARY``, an ``Options``
dataclass (its defaults are the documented defaults), ``add_arguments(parser)``,
``options_from_args(namespace)``, ``default_inputs(directory)`` and
``convert(inputs, common, options, bad, progress) -> Conversion``. :data:`KINDS` is the
explicit registry. Layering: this package imports ``model`` (to know what the loader
accepts) and ``sim.progress`` (the bar); ``cli`` imports it.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TextIO

from fairshare.traces import (alibaba_dlrm2025, alibaba_gpu2023, csv_history, fairshare_db, google2011, kueue_workloads,
                              sacct, sls, swim)
from fairshare.traces.base import CommonOptions, Conversion
from fairshare.traces.common import BadData, Progress, TraceError, total_size, write_scenario

KINDS: dict[str, ModuleType] = {m.NAME: m for m in (google2011, alibaba_gpu2023, alibaba_dlrm2025, swim, sls,
                                                    # job histories (traces/history.py)
                                                    sacct, kueue_workloads, csv_history, fairshare_db)}

__all__ = ["KINDS", "BadData", "CommonOptions", "Conversion", "TraceError", "convert", "resolve_inputs",
           "write_scenario"]


def resolve_inputs(kind: str, paths: list[str | Path]) -> list[Path]:
    """The input files: each path as given, a directory replaced by the kind's default files in it."""
    module = KINDS[kind]
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = module.default_inputs(p)
            found = [f for f in found if f.exists()]
            if not found:
                raise TraceError(f"{p}: a directory without the {kind} files it should hold")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise TraceError(f"{p}: no such file or directory")
    return out


def convert(kind: str, paths: list[str | Path], common: CommonOptions | None = None, options=None, *,
            strict: bool = False, progress_stream: TextIO | None = None) -> Conversion:
    """Convert a trace with the given (or default) options; raises :class:`TraceError`."""
    if kind not in KINDS:
        raise TraceError(f"unknown trace kind {kind!r}; known kinds: {', '.join(KINDS)}")
    module = KINDS[kind]
    inputs = resolve_inputs(kind, paths)
    bad = BadData(strict=strict)
    progress = Progress(progress_stream, total_size(inputs), label=f"{kind} ")
    try:
        return module.convert(inputs, common or CommonOptions(), options or module.Options(), bad, progress)
    finally:
        progress.close()
