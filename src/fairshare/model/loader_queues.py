"""The scenario loader's ``queues:`` section: the queue tree as nested entries.

Each entry has a ``name`` (no dots: a queue's path is its ancestors' names joined by
dots), a ``weight`` > 0, an ``order`` (``fair`` or ``fifo``), optional ``children`` and
optional ``guarantee`` and ``limit`` (resource -> amount) and ``fairness: {half_life: S}``
(its own half-life). The result is the flat ``(path, weight, order)`` list
``QueueTree.build`` takes, parents before their children, the bounds and the half-lives
by queue path; :func:`build_tree` checks the bounds against the resources and the
cluster once those are known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fairshare.model.loader_fields import Collector, amounts, show
from fairshare.model.queues import ROOT, QueueTree, bound_claims_problems
from fairshare.model.resources import Vector
from fairshare.model.schema import QUEUE, keys

QUEUE_KEYS = keys(QUEUE)
ORDERS = QUEUE.fields["order"].enum

#: one queue: (dotted path, weight, order)
QueueEntry = tuple[str, float, str]
#: a queue's bounds: (guarantee, limit, field path of the queue)
BoundsSpec = tuple[dict[str, float], dict[str, float], str]


def parse_half_life(col: Collector, value: Any, path: str) -> float | None:
    """A ``half_life``: seconds >= 0, or infinite (YAML ``.inf``, or the string ``"inf"``
    where the format has no infinity, as JSON); None (reported) when invalid."""
    if value == "inf" or (isinstance(value, float) and value == math.inf):
        return math.inf
    return col.number(value, path, minimum=0.0)


def parse_queues(col: Collector, data: Mapping) -> tuple[list[QueueEntry], dict[str, BoundsSpec], dict[str, float]]:
    """``queues:`` (optional; absent or null: jobs sit under the root): the entries, the
    guarantees and limits of the queues that have any, and the half-lives of the queues
    that set one."""
    queue_entries: list[QueueEntry] = []
    bounds: dict[str, BoundsSpec] = {}
    half_lives: dict[str, float] = {}
    if "queues" in data and data["queues"] is not None:
        qs = data["queues"]
        if not isinstance(qs, list):
            col.add("queues", f"must be a list of queues, got {show(qs)}")
        else:
            _queues(col, qs, "queues", ROOT, queue_entries, bounds, half_lives)
    return queue_entries, bounds, half_lives


def build_tree(col: Collector, entries: list[QueueEntry], bounds: dict[str, BoundsSpec],
               resources: tuple[str, ...], capacity: Vector, half_lives: dict[str, float] | None = None) -> QueueTree:
    """The queue tree; the bounds' problems (unknown resources, guarantees that cannot
    all be honoured: ``queues.bound_claims_problems``) go to ``col`` with their field
    paths."""
    tree = QueueTree.build(entries, "fair", {q: (g, lim) for q, (g, lim, _p) in bounds.items()}, half_lives)
    for queue, field, reason in bound_claims_problems(tree, resources, capacity) if bounds else ():
        col.add("queues" if queue == ROOT else f"{bounds[queue][2]}.{field}", reason)
    return tree


def _queue_bound(col: Collector, raw, path: str) -> dict[str, float]:
    """A queue's ``guarantee:`` or ``limit:`` (resource -> amount >= 0); the names are
    checked against the scenario's resources once those are known (a bound never adds a
    resource: a bound on a resource nothing has is a typo)."""
    if raw is None:
        return {}
    return amounts(col, raw, path, lambda _name: None) or {}


def parse_queue_half_life(col: Collector, raw, path: str) -> float | None:
    """A queue's ``fairness:`` (``{half_life: S}``): its own half-life, None if it sets none."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        col.add(path, f"must be a mapping like {{half_life: 86400}}, got {show(raw)}")
        return None
    col.unknown_keys(raw, keys(QUEUE.fields["fairness"]), path)
    value = raw.get("half_life")
    return None if value is None else parse_half_life(col, value, f"{path}.half_life")


def _queues(col: Collector, entries: list, path: str, parent: str, out: list[QueueEntry],
            bounds: dict[str, BoundsSpec], half_lives: dict[str, float]) -> None:
    names: set[str] = set()
    for i, q in enumerate(entries):
        p = f"{path}[{i}]"
        if not isinstance(q, Mapping):
            col.add(p, f"must be a mapping with a name, got {show(q)}")
            continue
        col.unknown_keys(q, QUEUE_KEYS, p)
        name = col.name(q.get("name"), f"{p}.name")
        weight = col.number(q.get("weight", 1), f"{p}.weight", positive=True)
        order = q.get("order", "fair")
        if order not in ORDERS:
            col.add(f"{p}.order", f"must be one of {', '.join(ORDERS)}, got {show(order)}")
            order = "fair"
        if name is None:
            continue
        if name in names:
            col.add(f"{p}.name", f"duplicate queue name {name!r} under {'the root' if parent == ROOT else repr(parent)}")
            continue
        names.add(name)
        full = name if parent == ROOT else f"{parent}.{name}"
        out.append((full, weight if weight is not None else 1.0, order))
        guarantee = _queue_bound(col, q.get("guarantee"), f"{p}.guarantee")
        limit = _queue_bound(col, q.get("limit"), f"{p}.limit")
        if guarantee or limit:
            bounds[full] = (guarantee, limit, p)
        half_life = parse_queue_half_life(col, q.get("fairness"), f"{p}.fairness")
        if half_life is not None:
            half_lives[full] = half_life
        kids = q.get("children")
        if kids is not None:
            if not isinstance(kids, list):
                col.add(f"{p}.children", f"must be a list of queues, got {show(kids)}")
            else:
                _queues(col, kids, f"{p}.children", full, out, bounds, half_lives)
