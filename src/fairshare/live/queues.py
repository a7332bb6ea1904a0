"""Run-time changes to the live queue tree (``PUT /v1/queues``), validated in one place.

``apply_queue_changes`` is the only code that reads a change document: the API calls it
with ``validate=True`` (every problem raises ``ScenarioError`` with its field path), and
the service replays the stored changes through it at start, so a restarted service has
the tree the previous one ended with.

A change document (JSON, stored as sent)::

    {"weights": {path: weight},
     "add": [{"path": ..., "weight": 1, "order": "fair", "guarantee": {...}, "limit": {...}}],
     "bounds": {path: {"guarantee": {...} | null, "limit": {...} | null}},
     "fairness": {"half_life": seconds | "inf"}}

``guarantee`` and ``limit`` are checked as in a config or scenario file (amounts: the
loader's ``amounts``; resources known and every guarantee honourable:
``queues.bound_claims_problems`` against the service's capacity). Under ``bounds`` a
listed ``guarantee`` or ``limit`` replaces the queue's (null or {} removes it), an omitted
one is kept. ``fairness.half_life`` changes the half-life of decayed usage (checked as the
config's ``fairness:``; how the history carries over: ``live.decay``); the last change that
sets one wins over the config's at a restart (``changed_half_life``). Documents of older versions (``weights`` and ``add`` of path, weight, order)
mean what they meant.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from collections.abc import Sequence

from fairshare.live.config import MAX_NAME_CHARS, MAX_WEIGHT, BoundPairs, QueueBounds, QueueEntries, build_tree
from fairshare.model import schema
from fairshare.model.errors import FieldError, ScenarioError
from fairshare.model.loader import ORDERS, parse_fairness
from fairshare.model.loader_fields import Collector, amounts
from fairshare.model.queues import ROOT, QueueChange, QueueTree, bound_claims_problems
from fairshare.model.schema import ListOf, MapOf, Number, Obj, Text, keys

# --- the change document, described once (``model.schema``): the reader below takes its
# keys from here; the OpenAPI document of PUT /v1/queues renders it
_WEIGHT = Number("the queue's weight among its siblings", exclusive_minimum=0, maximum=MAX_WEIGHT)
_AMOUNTS = replace(schema.AMOUNTS, key_max_length=MAX_NAME_CHARS)
BOUNDS_CHANGE = Obj("QueueBoundsIn", {
    "guarantee": replace(_AMOUNTS, description="replaces the queue's guarantee; null or {} removes it",
                         nullable=True),
    "limit": replace(_AMOUNTS, description="replaces the queue's limit; null or {} removes it", nullable=True),
}, "a queue's new guarantee and/or limit (an omitted one is kept)")
QUEUE_CHANGES = Obj("QueueChangeIn", {
    "weights": MapOf(_WEIGHT, "queue path -> its new weight", key_max_length=MAX_NAME_CHARS),
    "add": ListOf(Obj("QueueAdd", {
        "path": Text("the new queue's dotted path (its parent exists)", pattern=schema.PATH_PATTERN,
                     max_length=MAX_NAME_CHARS),
        "weight": replace(_WEIGHT, default=1),
        "order": schema.ORDER,
        "guarantee": replace(_AMOUNTS, description="at least this much while it has demand", nullable=True),
        "limit": replace(_AMOUNTS, description="never more than this", nullable=True),
    }, "a new queue", required=("path",)), "queues to add"),
    "bounds": MapOf(BOUNDS_CHANGE, "queue path -> its new guarantee and/or limit", key_max_length=MAX_NAME_CHARS),
    "fairness": replace(schema.FAIRNESS, description="a new half-life of decayed usage (the history carries over: "
                                                     "each queue's decayed average allocation is kept at the switch; "
                                                     "docs/live.md)"),
}, "a change to the queue tree (PUT /v1/queues; admin only)")
CHANGE_KEYS = tuple(sorted(keys(QUEUE_CHANGES)))
ADD_KEYS = tuple(sorted(keys(QUEUE_CHANGES.fields["add"].items)))
BOUND_KEYS = tuple(sorted(keys(BOUNDS_CHANGE)))


def apply_queue_changes(entries: QueueEntries, changes: list[Any], *, validate: bool = False) -> QueueEntries:
    """The queue entries after admin changes, bounds aside (``apply_queue_tree_changes``)."""
    return apply_queue_tree_changes(entries, (), changes, validate=validate)[0]


def apply_queue_tree_changes(entries: QueueEntries, bounds: QueueBounds, changes: list[Any], *,
                             validate: bool = False, resources: Sequence[str] | None = None,
                             capacity: Sequence[float] | None = None) -> tuple[QueueEntries, QueueBounds]:
    """The queue entries and bounds after admin changes (``LiveService.update_queues``);
    with ``validate`` every problem raises ``ScenarioError`` with its field path. Given
    ``resources`` and ``capacity``, the resulting bounds are checked against them
    (``bound_claims_problems``); a stored change replayed at start is not (it was checked
    when it was made, and nodes come and go)."""
    errors: list[FieldError] = []
    out = [list(e) for e in entries]
    bound_of: dict[str, list[BoundPairs]] = {path: [g, lim] for path, g, lim in bounds}
    #: queue path -> where this change set its bounds (for the claims' field paths)
    where: dict[str, str] = {}
    for change in changes:
        if not isinstance(change, dict):
            errors.append(FieldError("", "must be an object with `weights`, `add` and/or `bounds`"))
            continue
        for key in change:
            if key not in CHANGE_KEYS:
                errors.append(FieldError(str(key), f"unknown key (allowed: {', '.join(CHANGE_KEYS)})"))
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
                if key not in ADD_KEYS:
                    errors.append(FieldError(f"{p}.{key}", f"unknown key (allowed: {', '.join(ADD_KEYS)})"))
            path = q.get("path")
            paths = {e[0] for e in out}
            if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
                errors.append(FieldError(f"{p}.path", f"must be a dotted queue path, got {path!r}"))
                continue
            if len(path) > MAX_NAME_CHARS:
                errors.append(FieldError(f"{p}.path", f"must be at most {MAX_NAME_CHARS} characters, got {len(path)}"))
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
            if weight > MAX_WEIGHT:
                errors.append(FieldError(f"{p}.weight", f"must be at most {MAX_WEIGHT:g}, got {weight!r}"))
                continue
            order = q.get("order", "fair")
            if order not in ORDERS:  # (the scenario loader's orders)
                errors.append(FieldError(f"{p}.order", f"must be {' or '.join(ORDERS)}, got {order!r}"))
                continue
            guarantee, limit = _bound(q.get("guarantee"), f"{p}.guarantee", errors), \
                _bound(q.get("limit"), f"{p}.limit", errors)
            if guarantee is None or limit is None:
                continue
            if guarantee or limit:
                bound_of[path] = [guarantee, limit]
                where[path] = p
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
            if weight > MAX_WEIGHT:
                errors.append(FieldError(p, f"must be at most {MAX_WEIGHT:g}, got {weight!r}"))
                continue
            match[0][1] = float(weight)
        if "fairness" in change:
            col, raw = Collector(), change["fairness"]
            if isinstance(raw, dict) and "half_life" not in raw:
                col.add("fairness.half_life", 'required: the new half-life in seconds (0: no memory, "inf": '
                                              'cumulative usage)')
            elif parse_fairness(col, raw) is None and not col.errors:
                col.add("fairness", "must be a mapping like {half_life: 86400}, got null")
            errors.extend(col.errors)
        changed = change.get("bounds", {})
        if not isinstance(changed, dict):
            errors.append(FieldError("bounds", "must be an object {queue path: {guarantee, limit}}"))
            changed = {}
        paths = {e[0] for e in out}
        for path, spec in changed.items():
            p = f"bounds.{path}"
            if path not in paths:
                errors.append(FieldError(p, f"unknown queue {path!r}"))
                continue
            if not isinstance(spec, dict):
                errors.append(FieldError(p, "must be an object with guarantee and/or limit"))
                continue
            bad = [key for key in spec if key not in BOUND_KEYS]
            for key in bad:
                errors.append(FieldError(f"{p}.{key}", f"unknown key (allowed: {', '.join(BOUND_KEYS)})"))
            current = bound_of.get(path, [(), ()])
            new = list(current)
            for k, key in enumerate(BOUND_KEYS):
                if key in spec:
                    got = _bound(spec[key], f"{p}.{key}", errors)
                    if got is not None:
                        new[k] = got
            if bad or new == current:
                continue
            if new[0] or new[1]:
                bound_of[path] = new
            else:
                bound_of.pop(path, None)
            where[path] = p
    new_entries = tuple((e[0], e[1], e[2]) for e in out)
    new_bounds: QueueBounds = tuple(sorted((path, g, lim) for path, (g, lim) in bound_of.items()
                                           if path in {e[0] for e in out}))
    if resources is not None and capacity is not None and new_bounds and not errors:
        tree = build_tree(new_entries, new_bounds)
        for queue, field, reason in bound_claims_problems(tree, resources, capacity):
            if queue != ROOT:
                errors.append(FieldError(f"{where.get(queue, f'bounds.{queue}')}.{field}", reason))
                continue
            # the top-level guarantees exceed the cluster: name the guarantees of that
            # resource this change set
            resource = field.split(".", 1)[1]
            named = [f"{at}.{field}" for q, at in where.items() if resource in dict(bound_of.get(q, [()])[0])]
            errors.extend(FieldError(name, reason) for name in named or ["bounds"])
    if errors and validate:
        raise ScenarioError(errors, "request")
    return new_entries, new_bounds


def _bound(raw: Any, path: str, errors: list[FieldError]) -> BoundPairs | None:
    """A ``guarantee`` or ``limit`` (resource -> amount >= 0; null: none), checked by the
    scenario loader's ``amounts`` (same messages); None when it has problems."""
    if raw is None:
        return ()
    col = Collector()
    got = amounts(col, raw, path, lambda _name: None)
    errors.extend(col.errors)
    return None if got is None else tuple(sorted(got.items()))


def changed_half_life(changes: list[Any], half_life: float) -> float:
    """The half-life after these (stored, valid) change documents: the last one's
    ``fairness.half_life``, else ``half_life`` (the config's)."""
    for change in changes:
        if isinstance(change, dict) and "fairness" in change:
            got = parse_fairness(Collector(), change["fairness"])
            if got is not None:
                half_life = got.half_life
    return half_life


def queue_changes(change: dict) -> list[QueueChange]:
    """A validated change document (``apply_queue_tree_changes``) as the engine's queue
    changes, in the order the document applies them: additions, weights, then bounds
    (``QueueTree.changed`` then builds the tree ``apply_queue_tree_changes`` gives)."""
    out = [QueueChange(q["path"], float(q.get("weight", 1)), q.get("order", "fair"),
                       _pairs(q.get("guarantee")), _pairs(q.get("limit")))
           for q in change.get("add", [])]
    out += [QueueChange(path, weight=float(weight)) for path, weight in change.get("weights", {}).items()]
    out += [QueueChange(path, guarantee=_pairs(spec["guarantee"]) if "guarantee" in spec else None,
                        limit=_pairs(spec["limit"]) if "limit" in spec else None)
            for path, spec in change.get("bounds", {}).items()]
    return out


def _pairs(raw: Any) -> BoundPairs:
    """A validated document's guarantee or limit as ``_bound`` reads it (it had no problems)."""
    unexpected: list[FieldError] = []
    got = _bound(raw, "", unexpected)
    assert got is not None and not unexpected, unexpected
    return got


def tree_entries(tree: QueueTree) -> tuple[QueueEntries, QueueBounds]:
    """The entries and bounds of a queue tree (``build_tree``'s inverse): the form the
    config, the change documents and the job loader use."""
    entries = tuple((node.path, node.weight, node.order) for node in tree if node.path != ROOT)
    bounds = tuple(sorted((node.path, node.guarantee, node.limit) for node in tree
                          if node.path != ROOT and (node.guarantee or node.limit)))
    return entries, bounds
