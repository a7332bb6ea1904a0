"""The scenario loader's ``events:`` section (an extension of the contract, for the
simulator): node failures and additions over time.

``events: [{time: 300, node_fail: NAME}, {time: 600, node_add: {name, capacity,
attributes}}]``. :func:`parse_events` checks each entry's structure;
:func:`check_events`, once the nodes are built, replays them in the simulator's order
and checks each against the nodes up at its time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fairshare.model.cluster import Node
from fairshare.model.loader_fields import Collector, amounts, show
from fairshare.model.scenario import ClusterEvent

EVENT_KINDS = ("node_fail", "node_add")  # also their order at equal times: failures first
EVENT_KEYS = {"time", *EVENT_KINDS}
ADDED_NODE_KEYS = {"name", "capacity", "attributes"}


class EventSpec:
    """One parsed `events` entry, before it is checked against the nodes."""

    __slots__ = ("time", "kind", "name", "capacity", "attributes", "path")

    def __init__(self, time: float, kind: str, name: str, capacity: dict[str, float] | None,
                 attributes: dict[str, str] | None, path: str):
        self.time, self.kind, self.name = time, kind, name
        self.capacity, self.attributes, self.path = capacity, attributes, path


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
