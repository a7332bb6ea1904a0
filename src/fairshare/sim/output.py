"""The contract's result files: ``summary.json`` and ``timeline.csv``.

Both are byte-for-byte deterministic for a given scenario, policy, options and seed: no
wall-clock value, no dictionary built from a set, floats printed the same way every time.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from fairshare.sim.result import SimResult

TIMELINE_HEAD = ("time", "kind", "entity", "running_tasks", "dominant_share")


def fmt_time(t: float) -> str:
    """Seconds: whole numbers without a fraction, others with 15 significant digits."""
    return str(int(t)) if t == int(t) and abs(t) < 1e15 else f"{t:.15g}"


def fmt_amount(x: float) -> str:
    """Allocations and shares: 12 significant digits (hides float noise such as
    0.30000000000000004), whole numbers without a fraction."""
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.12g}"


def timeline_csv(result: SimResult) -> str:
    """``time,kind,entity,running_tasks,dominant_share,<resource>...``: one row per change
    of an entity's state, in (time, kind, entity) order; a row holds until the next row
    of the same entity (a step function)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TIMELINE_HEAD + tuple(result.scenario.resources))
    for t, kind, entity, running, share, alloc in result.rows:
        w.writerow([fmt_time(t), kind, entity, running, fmt_amount(share), *(fmt_amount(a) for a in alloc)])
    return buf.getvalue()


def summary_json(summary: dict) -> str:
    # Insertion order is the contract's key order; NaN or infinity would not be JSON.
    return json.dumps(summary, indent=2, allow_nan=False) + "\n"


def write_outputs(out_dir: Path, result: SimResult, summary: dict) -> dict[str, Path]:
    """Write ``summary.json`` and ``timeline.csv`` into ``out_dir`` (created if needed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"summary": out_dir / "summary.json", "timeline": out_dir / "timeline.csv"}
    paths["summary"].write_text(summary_json(summary), encoding="utf-8")
    paths["timeline"].write_text(timeline_csv(result), encoding="utf-8")
    return paths
