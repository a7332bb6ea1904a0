"""The scenario loader's ``resources:`` and ``cluster:`` sections.

``resources:`` fixes the order of the resource vectors (else: order of first
appearance in the file). ``cluster:`` is one pooled ``capacity`` (the papers' divisible
setting) or a list of ``nodes`` (an entry with ``count: N`` expands to NAME-0 ..
NAME-(N-1)), plus ``devices:``, the resources counted in physical devices. Parsing
collects every problem (``loader_fields.Collector``); :func:`build_nodes` makes the
``Node`` objects once the whole file has been checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fairshare.model.cluster import Node
from fairshare.model.loader_fields import Collector, NoteResource, amounts, show
from fairshare.model.resources import Vector
from fairshare.model.schema import CLUSTER, NODE, keys

CLUSTER_KEYS = keys(CLUSTER)
NODE_KEYS = keys(NODE)

#: one ``cluster.nodes`` entry: (name, count, capacity, attributes, field path)
NodeEntry = tuple[str, int, dict[str, float], dict[str, str], str]


# --- resources -----------------------------------------------------------------------------------

class ResourceOrder:
    """The scenario's resource order: ``resources:`` as declared, else the order in which
    the file first names each resource (``note`` is called for every amount read)."""

    def __init__(self, declared: list[str] | None):
        self.declared = declared
        self.seen: list[str] = list(declared or [])

    def note(self, res: str) -> None:
        if res not in self.seen and self.declared is None:
            self.seen.append(res)

    @property
    def resources(self) -> tuple[str, ...]:
        return tuple(self.seen)


def parse_resources(col: Collector, data: Mapping) -> ResourceOrder:
    """``resources: [cpu, mem, gpu]`` (optional): names, no duplicates."""
    declared: list[str] | None = None
    if "resources" in data:
        raw = data["resources"]
        if not isinstance(raw, list) or not raw:
            col.add("resources", f"must be a non-empty list of resource names, got {show(raw)}")
        else:
            declared = []
            for i, r in enumerate(raw):
                if not isinstance(r, str) or not r:
                    col.add(f"resources[{i}]", f"must be a resource name, got {show(r)}")
                elif r in declared:
                    col.add(f"resources[{i}]", f"duplicate resource {r!r}")
                else:
                    declared.append(r)
    return ResourceOrder(declared)


# --- cluster -------------------------------------------------------------------------------------

@dataclass
class ClusterSpec:
    """The checked ``cluster:`` section, amounts still by resource name."""

    pooled: dict[str, float] | None = None  # ``capacity:`` of a pooled cluster
    node_entries: list[NodeEntry] = field(default_factory=list)
    device_names: list[tuple[str, str]] = field(default_factory=list)  # (resource, field path)

    @property
    def given(self) -> bool:
        """A capacity or at least one valid node entry was read."""
        return self.pooled is not None or bool(self.node_entries)


def parse_cluster(col: Collector, raw: Any, note: NoteResource) -> ClusterSpec:
    spec = ClusterSpec()
    if raw is None:
        return spec
    if not isinstance(raw, Mapping):
        col.add("cluster", f"must be a mapping with 'capacity' or 'nodes', got {show(raw)}")
        return spec
    col.unknown_keys(raw, CLUSTER_KEYS, "cluster")
    has_cap, has_nodes = "capacity" in raw, "nodes" in raw
    if has_cap and has_nodes:
        col.add("cluster", "give either 'capacity' (one pooled machine) or 'nodes', not both")
    elif not has_cap and not has_nodes:
        col.add("cluster", "needs 'capacity' (one pooled machine) or 'nodes'")
    spec.device_names = _devices(col, raw.get("devices"))
    if has_cap and not has_nodes:
        spec.pooled = amounts(col, raw["capacity"], "cluster.capacity", note)
        if spec.pooled is not None and not any(v > 0 for v in spec.pooled.values()):
            col.add("cluster.capacity", "the cluster is empty: every capacity is 0")
    if has_nodes and not has_cap:
        spec.node_entries = _nodes(col, raw["nodes"], note)
    return spec


def _nodes(col: Collector, nodes_raw: Any, note: NoteResource) -> list[NodeEntry]:
    """``cluster.nodes``: every entry checked; the valid ones returned."""
    if not isinstance(nodes_raw, list) or not nodes_raw:
        col.add("cluster.nodes", f"must be a non-empty list of nodes, got {show(nodes_raw)}")
        return []
    node_entries: list[NodeEntry] = []
    names: set[str] = set()
    for i, nd in enumerate(nodes_raw):
        p = f"cluster.nodes[{i}]"
        if not isinstance(nd, Mapping):
            col.add(p, f"must be a mapping, got {show(nd)}")
            continue
        col.unknown_keys(nd, NODE_KEYS, p)
        name = nd.get("name", f"node{i}")
        if not isinstance(name, str) or not name:
            col.add(f"{p}.name", f"must be a non-empty string, got {show(name)}")
            name = f"node{i}"
        elif name in names:
            col.add(f"{p}.name", f"duplicate node name {name!r}")
        names.add(name)
        count = nd.get("count", 1)
        cnt = col.number(count, f"{p}.count", positive=True, integer=True)
        if "capacity" not in nd:
            col.add(f"{p}.capacity", "is required")
            continue
        caps = amounts(col, nd["capacity"], f"{p}.capacity", note)
        attrs = nd.get("attributes")
        if attrs is None:  # (absent or null; an empty list or string is refused, as the schema does)
            attrs = {}
        if not isinstance(attrs, Mapping):
            col.add(f"{p}.attributes", f"must be a mapping of strings, got {show(attrs)}")
            attrs = {}
        if caps is not None and cnt is not None:
            node_entries.append((name, int(cnt), caps, {str(k): str(v) for k, v in attrs.items()}, p))
    # An entry with count > 1 expands to NAME-0 .. NAME-(count-1): those names
    # must not clash with another entry's (placements are keyed by node name).
    expanded_from: dict[str, str] = {}
    for name, cnt, _caps, _attrs, p in node_entries:
        for nm in ([name] if cnt == 1 else [f"{name}-{k}" for k in range(cnt)]):
            if nm in expanded_from and expanded_from[nm] != p:
                col.add(f"{p}.name", f"node {nm!r} clashes with a node of {expanded_from[nm]} "
                                     f"(count N names nodes NAME-0 .. NAME-(N-1))")
                break
            expanded_from.setdefault(nm, p)
    if node_entries and not any(any(v > 0 for v in caps.values()) for _, _, caps, _, _ in node_entries):
        col.add("cluster.nodes", "the cluster is empty: every node has capacity 0")
    return node_entries


def vector(amounts_by_name: Mapping[str, float], resources: tuple[str, ...]) -> Vector:
    """Amounts by resource name -> a vector in the scenario's resource order (absent: 0)."""
    return tuple(float(amounts_by_name.get(r, 0.0)) for r in resources)


def build_nodes(spec: ClusterSpec, resources: tuple[str, ...]) -> tuple[tuple[Node, ...], Vector, bool]:
    """The nodes (a pooled cluster is one node named ``pool``), the total capacity, and
    whether the cluster is pooled."""
    if spec.pooled is not None:
        capacity = vector(spec.pooled, resources)
        return (Node("pool", capacity, "pool"),), capacity, True
    expanded = []
    for name, cnt, caps, attrs, _p in spec.node_entries:
        for k in range(cnt):
            nm = name if cnt == 1 else f"{name}-{k}"
            expanded.append(Node(nm, vector(caps, resources), name, tuple(sorted(attrs.items()))))
    nodes = tuple(expanded)
    capacity = tuple(sum(nd.capacity[r] for nd in nodes) for r in range(len(resources)))
    return nodes, capacity, False


# --- devices -------------------------------------------------------------------------------------

def _devices(col: Collector, raw: Any) -> list[tuple[str, str]]:
    """``cluster.devices: [gpu]``: the resources counted in physical devices."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        col.add("cluster.devices", f"must be a list of resource names, got {show(raw)}")
        return []
    out: list[tuple[str, str]] = []
    for i, name in enumerate(raw):
        p = f"cluster.devices[{i}]"
        if not isinstance(name, str) or not name:
            col.add(p, f"must be a resource name, got {show(name)}")
        elif any(name == n for n, _ in out):
            col.add(p, f"duplicate device resource {name!r}")
        else:
            out.append((name, p))
    return out


def check_devices(col: Collector, spec: ClusterSpec, resources: tuple[str, ...]) -> tuple[int, ...]:
    """Resolve ``cluster.devices`` to resource indices; every node holds whole devices."""
    out: list[int] = []
    for name, p in spec.device_names:
        if name not in resources:
            col.add(p, f"unknown resource {name!r} (resources: {', '.join(resources)})")
            continue
        out.append(resources.index(name))
        where = [("cluster.capacity", spec.pooled)] if spec.pooled is not None else \
            [(f"{np}.capacity", caps) for _n, _c, caps, _a, np in spec.node_entries]
        for path, caps in where:
            amount = caps.get(name, 0.0)
            if amount != int(amount):
                col.add(f"{path}.{name}", f"{name} is a device resource (cluster.devices): a node has a whole "
                                          f"number of devices, got {amount:g}")
    return tuple(sorted(out))


def device_amount_ok(amount: float) -> bool:
    """A device demand is a fraction of one device (< 1) or a whole number of devices."""
    return amount < 1.0 or amount == int(amount)
