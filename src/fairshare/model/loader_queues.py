"""The scenario loader's ``queues:`` section: the queue tree as nested entries.

Each entry has a ``name`` (no dots: a queue's path is its ancestors' names joined by
dots), a ``weight`` > 0, an ``order`` (``fair`` or ``fifo``) and optional ``children``.
The result is the flat ``(path, weight, order)`` list ``QueueTree.build`` takes, parents
before their children.
"""

from __future__ import annotations

from collections.abc import Mapping

from fairshare.model.loader_fields import Collector, show
from fairshare.model.queues import ROOT

QUEUE_KEYS = {"name", "weight", "children", "order"}
ORDERS = ("fair", "fifo")

#: one queue: (dotted path, weight, order)
QueueEntry = tuple[str, float, str]


def parse_queues(col: Collector, data: Mapping) -> list[QueueEntry]:
    """``queues:`` (optional; absent or null: jobs sit under the root)."""
    queue_entries: list[QueueEntry] = []
    if "queues" in data and data["queues"] is not None:
        qs = data["queues"]
        if not isinstance(qs, list):
            col.add("queues", f"must be a list of queues, got {show(qs)}")
        else:
            _queues(col, qs, "queues", ROOT, queue_entries)
    return queue_entries


def _queues(col: Collector, entries: list, path: str, parent: str, out: list[QueueEntry]) -> None:
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
        kids = q.get("children")
        if kids is not None:
            if not isinstance(kids, list):
                col.add(f"{p}.children", f"must be a list of queues, got {show(kids)}")
            else:
                _queues(col, kids, f"{p}.children", full, out)
