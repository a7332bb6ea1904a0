"""Run-time changes to the live queue tree (``PUT /v1/queues``), validated in one place.

``apply_queue_changes`` is the only code that reads a change document: the API calls it
with ``validate=True`` (every problem raises ``ScenarioError`` with its field path), and
the service replays the stored changes through it at start, so a restarted service has
the tree the previous one ended with.
"""

from __future__ import annotations

import math
from typing import Any

from fairshare.live.config import QueueEntries
from fairshare.model.errors import FieldError, ScenarioError
from fairshare.model.loader import ORDERS
from fairshare.model.queues import ROOT


def apply_queue_changes(entries: QueueEntries, changes: list[Any], *, validate: bool = False) -> QueueEntries:
    """The queue entries after admin changes (``LiveService.update_queues``); with ``validate`` every
    problem raises ``ScenarioError`` with its field path."""
    errors: list[FieldError] = []
    out = [list(e) for e in entries]
    for change in changes:
        if not isinstance(change, dict):
            errors.append(FieldError("", "must be an object with `weights` and/or `add`"))
            continue
        for key in change:
            if key not in ("weights", "add"):
                errors.append(FieldError(str(key), "unknown key (allowed: add, weights)"))
        add = change.get("add", [])
        if not isinstance(add, list):
            errors.append(FieldError("add", "must be a list of {path, weight, order}"))
            add = []
        for i, q in enumerate(add):
            p = f"add[{i}]"
            if not isinstance(q, dict):
                errors.append(FieldError(p, "must be an object with path, weight, order"))
                continue
            for key in q:
                if key not in ("path", "weight", "order"):
                    errors.append(FieldError(f"{p}.{key}", "unknown key (allowed: order, path, weight)"))
            path = q.get("path")
            paths = {e[0] for e in out}
            if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
                errors.append(FieldError(f"{p}.path", f"must be a dotted queue path, got {path!r}"))
                continue
            if path in paths:
                errors.append(FieldError(f"{p}.path", f"queue {path!r} already exists"))
                continue
            parent = path.rsplit(".", 1)[0] if "." in path else ROOT
            if parent != ROOT and parent not in paths:
                errors.append(FieldError(f"{p}.path", f"parent queue {parent!r} does not exist"))
                continue
            weight = q.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
                    or weight <= 0:
                errors.append(FieldError(f"{p}.weight", f"must be a positive number, got {weight!r}"))
                continue
            order = q.get("order", "fair")
            if order not in ORDERS:  # (the scenario loader's orders)
                errors.append(FieldError(f"{p}.order", f"must be {' or '.join(ORDERS)}, got {order!r}"))
                continue
            # after its parent's subtree, so parents stay before children
            at = max((k for k, e in enumerate(out) if e[0] == parent or e[0].startswith(parent + ".")),
                     default=len(out) - 1) + 1 if parent != ROOT else len(out)
            out.insert(at, [path, float(weight), order])
        weights = change.get("weights", {})
        if not isinstance(weights, dict):
            errors.append(FieldError("weights", "must be an object {queue path: weight}"))
            weights = {}
        for path, weight in weights.items():
            p = f"weights.{path}"
            match = [e for e in out if e[0] == path]
            if not match:
                errors.append(FieldError(p, f"unknown queue {path!r}"))
                continue
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
                    or weight <= 0:
                errors.append(FieldError(p, f"must be a positive number, got {weight!r}"))
                continue
            match[0][1] = float(weight)
    if errors and validate:
        raise ScenarioError(errors, "request")
    return tuple((e[0], e[1], e[2]) for e in out)
