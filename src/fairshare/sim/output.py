"""The contract's result files: ``summary.json`` and ``timeline.csv``; with decayed usage,
``decayed_usage.csv`` too (docs/simulation.md).

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
#: the kind of a reason change's row, and the column it names the reason in (``--reasons``)
REASON = "reason"


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
    changes = result.reason_changes
    if changes is None:
        w.writerow(TIMELINE_HEAD + tuple(result.scenario.resources))
        for t, kind, entity, running, share, alloc in result.rows:
            w.writerow([fmt_time(t), kind, entity, running, fmt_amount(share), *(fmt_amount(a) for a in alloc)])
        return buf.getvalue()
    # with reasons (``sim.reasons``): a last column, ``reason``, set on the rows of kind
    # ``reason`` (after an instant's other rows: "reason" sorts after every other kind)
    w.writerow(TIMELINE_HEAD + tuple(result.scenario.resources) + (REASON,))
    blanks = [""] * len(result.scenario.resources)
    k = 0
    for t, kind, entity, running, share, alloc in result.rows:
        while k < len(changes) and changes[k][0] < t:
            w.writerow([fmt_time(changes[k][0]), REASON, changes[k][1], "", "", *blanks, changes[k][2]])
            k += 1
        w.writerow([fmt_time(t), kind, entity, running, fmt_amount(share), *(fmt_amount(a) for a in alloc), ""])
    for t, job, reason in changes[k:]:
        w.writerow([fmt_time(t), REASON, job, "", "", *blanks, reason])
    return buf.getvalue()


#: decayed_usage.csv's columns before one per resource (the decayed usage, resource-seconds)
DECAYED_USAGE_HEAD = ("time", "queue", "decayed_share", "effective_share")


def decayed_usage_csv(result: SimResult) -> str:
    """``time,queue,decayed_share,effective_share,<resource>...``: each queue's decayed
    usage sampled at every instant of the run and at its end (``sim.recorder``), in (time,
    queue tree) order. A sample holds at its time only: usage decays between samples."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(DECAYED_USAGE_HEAD + tuple(result.scenario.resources))
    for t, queue, decayed, effective, usage in result.decayed_usage or ():
        w.writerow([fmt_time(t), queue, fmt_amount(decayed), fmt_amount(effective), *(fmt_amount(u) for u in usage)])
    return buf.getvalue()


def summary_json(summary: dict) -> str:
    # Insertion order is the contract's key order; NaN or infinity would not be JSON.
    return json.dumps(summary, indent=2, allow_nan=False) + "\n"


def write_outputs(out_dir: Path, result: SimResult, summary: dict) -> dict[str, Path]:
    """Write ``summary.json`` and ``timeline.csv`` into ``out_dir`` (created if needed), and
    ``decayed_usage.csv`` when the run had decayed usage."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"summary": out_dir / "summary.json", "timeline": out_dir / "timeline.csv"}
    paths["summary"].write_text(summary_json(summary), encoding="utf-8")
    paths["timeline"].write_text(timeline_csv(result), encoding="utf-8")
    if result.decayed_usage is not None:
        paths["decayed_usage"] = out_dir / "decayed_usage.csv"
        paths["decayed_usage"].write_text(decayed_usage_csv(result), encoding="utf-8")
    return paths
