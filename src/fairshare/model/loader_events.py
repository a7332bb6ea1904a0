"""The scenario loader's ``events:`` section (an extension of the contract, for the
simulator): node failures and additions, and queue-tree changes, over time.

``events: [{time: 300, node_fail: NAME}, {time: 600, node_add: {name, capacity,
attributes}}, {time: 900, queue: {name: ads.prod, weight: 3, limit: {gpu: 8}}}]``.
:func:`parse_events` checks each entry's structure; :func:`check_events`, once the nodes
are built, replays the node events in the simulator's order and checks each against the
nodes up at its time; :func:`check_queue_events` replays the queue changes on the queue
tree (``QueueTree.changed``) and checks the jobs against the queues that exist when they
arrive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fairshare.model.cluster import Node
from fairshare.model.loader_fields import Collector, amounts, show
from fairshare.model.loader_queues import parse_queue_half_life
from fairshare.model.queues import ROOT, QueueChange, QueueTree, bound_claims_problems
from fairshare.model.scenario import ClusterEvent
from fairshare.model.schema import ADDED_NODE, EVENT, QUEUE_CHANGE, keys

#: also their order at equal times (the engine's ``INSTANT_ORDER``): failures, additions,
#: then queue changes (before the jobs arriving at that time)
EVENT_KINDS = EVENT.exactly_one_of
EVENT_KEYS = keys(EVENT)
ADDED_NODE_KEYS = keys(ADDED_NODE)
QUEUE_CHANGE_KEYS = keys(QUEUE_CHANGE)
#: a queue's order (the same enum as ``loader_queues.ORDERS``)
QUEUE_ORDERS = QUEUE_CHANGE.fields["order"].enum


class EventSpec:
    """One parsed `events` entry, before it is checked against the nodes."""

    __slots__ = ("time", "kind", "name", "capacity", "attributes", "path", "change")

    def __init__(self, time: float, kind: str, name: str, capacity: dict[str, float] | None,
                 attributes: dict[str, str] | None, path: str, change: QueueChange | None = None):
        self.time, self.kind, self.name = time, kind, name
        self.capacity, self.attributes, self.path = capacity, attributes, path
        self.change = change


def parse_events(col: Collector, raw: Any) -> list[EventSpec]:
    """``events: [{time: 300, node_fail: NAME}, {time: 600, node_add: {name, capacity, attributes}}]``."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        col.add("events", f"must be a list of events like {{time: 300, node_fail: NAME}}, got {show(raw)}")
        return []
    out: list[EventSpec] = []
    for i, ev in enumerate(raw):
        p = f"events[{i}]"
        if not isinstance(ev, Mapping):
            col.add(p, f"must be a mapping like {{time: 300, node_fail: NAME}}, got {show(ev)}")
            continue
        col.unknown_keys(ev, EVENT_KEYS, p)
        time = None
        if "time" not in ev:
            col.add(f"{p}.time", "is required (seconds from the start)")
        else:
            time = col.number(ev["time"], f"{p}.time", minimum=0.0)
        kinds = [k for k in EVENT_KINDS if k in ev]
        if len(kinds) != 1:
            col.add(p, f"needs exactly one of {', '.join(EVENT_KINDS)}"
                       + (f", got {len(kinds)}" if kinds else ""))
            continue
        kind = kinds[0]
        body = ev[kind]
        if kind == "queue":
            change = _queue_change(col, body, f"{p}.queue")
            if change is not None and time is not None:
                out.append(EventSpec(time, kind, change.path, None, None, p, change))
            continue
        if kind == "node_fail":
            if not isinstance(body, str) or not body:
                col.add(f"{p}.node_fail", f"must be a node name, got {show(body)}")
                continue
            if time is not None:
                out.append(EventSpec(time, kind, body, None, None, p))
            continue
        bp = f"{p}.node_add"
        if not isinstance(body, Mapping):
            col.add(bp, f"must be a mapping with name, capacity, attributes, got {show(body)}")
            continue
        col.unknown_keys(body, ADDED_NODE_KEYS, bp)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            col.add(f"{bp}.name", f"must be a non-empty string, got {show(name)}")
            continue
        caps = None
        if "capacity" in body:
            # resources are checked against the scenario's once they are known
            caps = amounts(col, body["capacity"], f"{bp}.capacity", lambda _res: None)
            if caps is None:
                continue
        attrs = body.get("attributes")
        if attrs is not None and not isinstance(attrs, Mapping):
            col.add(f"{bp}.attributes", f"must be a mapping of strings, got {show(attrs)}")
            continue
        if time is not None:
            out.append(EventSpec(time, kind, name, caps,
                                 None if attrs is None else {str(k): str(v) for k, v in attrs.items()}, p))
    return out


def check_events(col: Collector, specs: list[EventSpec], nodes: tuple[Node, ...],
                 resources: tuple[str, ...], devices: tuple[int, ...] = ()) -> tuple[ClusterEvent, ...]:
    """Replay the events in time order (failures before additions at equal times, then
    file order: the simulator's order) and check each against the nodes up at that time."""
    known: dict[str, Node] = {nd.name: nd for nd in nodes}
    up = set(known)
    out: list[ClusterEvent] = []
    order = sorted(range(len(specs)), key=lambda i: (specs[i].time, EVENT_KINDS.index(specs[i].kind), i))
    for i in order:
        ev = specs[i]
        if ev.kind == "queue":
            continue  # (check_queue_events)
        when = f"at time {ev.time:g}"
        if ev.kind == "node_fail":
            if ev.name not in up:
                what = "has already failed" if ev.name in known else "is not a node of the cluster"
                col.add(f"{ev.path}.node_fail", f"node {ev.name!r} {what} {when}")
                continue
            up.discard(ev.name)
            out.append(ClusterEvent(ev.time, ev.kind, ev.name))
            continue
        bp = f"{ev.path}.node_add"
        if ev.name in up:
            col.add(f"{bp}.name", f"node {ev.name!r} is already up {when} (fail it first to replace it)")
            continue
        old = known.get(ev.name)
        if ev.capacity is None:
            if old is None:
                col.add(f"{bp}.capacity", f"is required for a new node ({ev.name!r} is not a node of the "
                                          f"cluster; a failed node may come back without it)")
                continue
            capacity = old.capacity
        else:
            unknown = [res for res in ev.capacity if res not in resources]
            for res in unknown:
                col.add(f"{bp}.capacity.{res}", f"unknown resource {res!r} (an added node may have only "
                                                f"the scenario's resources: {', '.join(resources)})")
            if unknown:
                continue
            capacity = tuple(float(ev.capacity.get(r, 0.0)) for r in resources)
            fractional = [r for r in devices if capacity[r] != int(capacity[r])]
            for r in fractional:
                col.add(f"{bp}.capacity.{resources[r]}", f"{resources[r]} is a device resource (cluster.devices): "
                                                         f"a node has a whole number of devices, got {capacity[r]:g}")
            if fractional:
                continue
        if ev.attributes is not None:
            attributes = tuple(sorted(ev.attributes.items()))
        else:
            attributes = old.attributes if old is not None else ()
        node = Node(ev.name, capacity, old.group if old is not None else ev.name, attributes)
        known[ev.name] = node
        up.add(ev.name)
        out.append(ClusterEvent(ev.time, ev.kind, ev.name, node))
    return tuple(out)


def _queue_change(col: Collector, body: Any, bp: str) -> QueueChange | None:
    """``queue: {name, weight, order, guarantee, limit, fairness}`` or ``queue: {name, remove: true}``;
    None when it has problems (resource names are checked once the tree is known)."""
    if not isinstance(body, Mapping):
        col.add(bp, f"must be a mapping like {{name: ads.prod, weight: 3}}, got {show(body)}")
        return None
    col.unknown_keys(body, QUEUE_CHANGE_KEYS, bp)
    errors = len(col.errors)
    name = body.get("name")
    if not isinstance(name, str) or not name or any(not part for part in name.split(".")):
        col.add(f"{bp}.name", f"must be a dotted queue path like ads.prod, got {show(name)}")
    remove = body.get("remove", False)
    if not isinstance(remove, bool):
        col.add(f"{bp}.remove", f"must be true or false, got {show(remove)}")
    elif remove:
        others = sorted(k for k in body if k not in ("name", "remove"))
        if others:
            col.add(f"{bp}.remove", f"removes the queue: it cannot go with {', '.join(others)}")
    weight = None
    if "weight" in body:
        weight = col.number(body["weight"], f"{bp}.weight", positive=True)
    order = body.get("order")
    if order is not None and order not in QUEUE_ORDERS:
        col.add(f"{bp}.order", f"must be {' or '.join(QUEUE_ORDERS)}, got {show(order)}")
    bounds: dict[str, tuple[tuple[str, float], ...] | None] = {}
    for key in ("guarantee", "limit"):
        if key not in body:
            bounds[key] = None
        elif body[key] is None:
            bounds[key] = ()  # (null removes the queue's bound)
        else:
            got = amounts(col, body[key], f"{bp}.{key}", lambda _res: None)
            bounds[key] = None if got is None else tuple(sorted(got.items()))
    half_life = parse_queue_half_life(col, body.get("fairness"), f"{bp}.fairness")
    if len(col.errors) > errors:
        return None
    return QueueChange(name, weight, order, bounds["guarantee"], bounds["limit"], remove, half_life)


def check_queue_events(col: Collector, specs: list[EventSpec], tree: QueueTree, resources: tuple[str, ...],
                       capacity: tuple[float, ...], jobs) -> tuple[ClusterEvent, ...]:
    """Replay the queue changes in time order (file order at equal times) on ``tree``:
    each must apply (``QueueTree.changed``: an existing queue, or a new one under an
    existing parent), name only the scenario's resources, and leave guarantees that can
    be honoured (``bound_claims_problems``, against the cluster at the start). A job
    (``jobs``: name, queue, submit, path) must arrive at a queue that exists then: one a
    change adds at or before its submit time, and none a change removes at or before it.
    Whether jobs still run in a removed queue is the engine's to check at that time."""
    changes = sorted((ev for ev in specs if ev.kind == "queue"), key=lambda ev: ev.time)
    out: list[ClusterEvent] = []
    #: queue path -> (time it was added or removed, added?) by the last change to it
    history: dict[str, list[tuple[float, bool]]] = {}
    for ev in changes:
        change = ev.change
        bp = f"{ev.path}.queue"
        bad = [(key, res) for key, pairs in (("guarantee", change.guarantee), ("limit", change.limit))
               for res, _amount in pairs or () if res not in resources]
        for key, res in bad:
            col.add(f"{bp}.{key}.{res}", f"unknown resource {res!r} (resources: {', '.join(resources)})")
        if bad:
            continue
        existed = change.path in tree
        try:
            new = tree.changed(change)
        except ValueError as exc:
            col.add(f"{bp}.name", f"{exc} at time {ev.time:g}")
            continue
        problems = bound_claims_problems(new, resources, capacity)
        for queue, field, reason in problems:
            where = bp if queue in (ROOT, change.path) else f"{bp} (queue {queue!r})"
            col.add(f"{where}.{field}", f"{reason} at time {ev.time:g}")
        if problems:
            continue
        if change.remove:
            for gone in [p for p in tree.paths if p == change.path or p.startswith(change.path + ".")]:
                history.setdefault(gone, []).append((ev.time, False))
        elif not existed:
            history.setdefault(change.path, []).append((ev.time, True))
        tree = new
        out.append(ClusterEvent(ev.time, "queue", change.path, queue_change=change))
    for job in jobs:
        for when, added in history.get(job.queue, ()):
            if added and job.submit < when:
                col.add(f"{job.path}.submit", f"job {job.name!r} arrives at {job.submit:g}, before its queue "
                                              f"{job.queue!r} is added (events, at time {when:g})")
                break
            if not added and job.submit >= when:
                col.add(f"{job.path}.queue", f"job {job.name!r} arrives at {job.submit:g}, after its queue "
                                             f"{job.queue!r} is removed (events, at time {when:g})")
                break
    return tuple(out)
