"""Read and validate scenario files (contract: "Scenario file").

Validation happens here, at the edge, and collects *every* problem with its field path
(``jobs[3].tasks[0].demand.gpu: must be >= 0, got -1``) before anything is computed.
The core below assumes a valid :class:`Scenario` and only asserts invariants.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairshare.model.cluster import Cluster, Node
from fairshare.model.errors import FieldError, ScenarioError
from fairshare.model.jobs import Duration, Job, TaskClass
from fairshare.model.queues import ROOT, QueueTree, bound_claims_problems
from fairshare.model.scenario import ClusterEvent, Scenario

TOP_KEYS = {"resources", "cluster", "queues", "jobs", "events"}
CLUSTER_KEYS = {"capacity", "nodes", "devices"}
NODE_KEYS = {"name", "count", "capacity", "attributes"}
QUEUE_KEYS = {"name", "weight", "children", "order", "guarantee", "limit"}
JOB_KEYS = {"name", "queue", "weight", "submit", "tasks"}
TASK_KEYS = {"class", "demand", "count", "duration", "constraints", "max_per_node", "command", "shell"}
DURATION_KINDS = {
    "fixed": {"value"},
    "exponential": {"mean"},
    "uniform": {"low", "high"},
    "lognormal": {"mu", "sigma"},
}
ORDERS = ("fair", "fifo")
# `events:` (an extension of the contract, for the simulator): node failures and additions
EVENT_KINDS = ("node_fail", "node_add")  # also their order at equal times: failures first
EVENT_KEYS = {"time", *EVENT_KINDS}
ADDED_NODE_KEYS = {"name", "capacity", "attributes"}


def load_scenario(path: str | Path) -> Scenario:
    """Parse a YAML or JSON scenario file; raise :class:`ScenarioError` on any problem."""
    doc = read_document(path, what="scenario file",
                        empty="the file is empty (a scenario needs at least cluster and jobs)")
    return parse_scenario(doc, str(path))


def read_document(path: str | Path, *, what: str, empty: str | None = None) -> Any:
    """Read and parse a YAML or JSON file (JSON first for ``.json``), every failure a
    :class:`ScenarioError` naming the file. ``empty``, if given, is the reason a blank
    file is refused with; otherwise a blank file parses as ``None``."""
    p = Path(path)
    source = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(FieldError("", "file not found"), source) from None
    except IsADirectoryError:
        raise ScenarioError(FieldError("", f"is a directory, not a {what}"), source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(FieldError("", f"cannot read: {exc}"), source) from None
    if empty is not None and not text.strip():
        raise ScenarioError(FieldError("", empty), source)
    return parse_text(text, source, json_first=p.suffix.lower() == ".json")


def parse_text(text: str, source: str, *, json_first: bool = False) -> Any:
    """Parse YAML (a superset of JSON) with a message that names the line on failure.

    A key given twice in one mapping is an error in both formats: the parsers would
    silently keep the last value, hiding the first from the user.
    """
    if json_first:
        try:
            return json.loads(text, object_pairs_hook=_no_duplicate_pairs)
        except json.JSONDecodeError as exc:
            raise ScenarioError(FieldError("", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"),
                                source) from None
        except _DuplicateKey as exc:
            raise ScenarioError(FieldError("", f"invalid JSON: {exc}"), source) from None
    import yaml

    try:
        return yaml.load(text, Loader=_strict_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(FieldError("", f"invalid YAML{where}: {problem}"), source) from None


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"duplicate key {key!r} in one object")
        out[key] = value
    return out


_STRICT_LOADER: type | None = None


def _strict_yaml_loader() -> type:
    """``yaml.SafeLoader`` that rejects a key repeated within one mapping (with its line)."""
    global _STRICT_LOADER
    if _STRICT_LOADER is not None:
        return _STRICT_LOADER
    import yaml

    class StrictSafeLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: set = set()
                for key_node, _value_node in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                        seen.add(key)
                    except TypeError:  # an unhashable key: the base class reports it
                        continue
                    if duplicate:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark,
                            f"duplicate key {key!r}", key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

    _STRICT_LOADER = StrictSafeLoader
    return StrictSafeLoader


class _Collector:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def add(self, path: str, reason: str) -> None:
        self.errors.append(FieldError(path, reason))

    def unknown_keys(self, obj: Mapping, allowed: set[str], path: str) -> None:
        for key in obj:
            if key not in allowed:
                self.add(_join(path, str(key)), f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def number(self, value: Any, path: str, *, minimum: float | None = 0.0, positive: bool = False,
               integer: bool = False) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.add(path, f"must be a number, got {_show(value)}")
            return None
        if not math.isfinite(value):
            self.add(path, f"must be finite, got {value}")
            return None
        if integer and value != int(value):
            self.add(path, f"must be a whole number, got {value}")
            return None
        if positive and value <= 0:
            self.add(path, f"must be > 0, got {_show(value)}")
            return None
        if minimum is not None and value < minimum:
            self.add(path, f"must be >= {minimum:g}, got {_show(value)}")
            return None
        return float(value)

    def name(self, value: Any, path: str) -> str | None:
        if not isinstance(value, str) or not value.strip():
            self.add(path, f"must be a non-empty string, got {_show(value)}")
            return None
        if "." in value:
            self.add(path, f"must not contain '.', which separates queue paths (got {value!r})")
            return None
        return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "a list" if value else "an empty list"
    if isinstance(value, Mapping):
        return "a mapping"
    return str(value)


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate a parsed scenario document and build the :class:`Scenario`."""
    col = _Collector()
    if data is None:  # only comments, or `---`
        raise ScenarioError(FieldError("", "the file is empty (a scenario needs at least cluster and jobs)"),
                            source)
    if not isinstance(data, Mapping):
        raise ScenarioError(FieldError("", f"a scenario must be a mapping with keys cluster, jobs, ...; "
                                           f"got {_show(data)}"), source)
    col.unknown_keys(data, TOP_KEYS, "")
    # `cluster:` or `jobs:` with nothing after it parses as null: as good as missing
    if data.get("cluster") is None:
        col.add("cluster", "is required")
    if data.get("jobs") is None:
        col.add("jobs", "is required (a list of jobs; [] for none)")

    # --- resources: explicit order, else order of first appearance ------------------
    declared: list[str] | None = None
    if "resources" in data:
        raw = data["resources"]
        if not isinstance(raw, list) or not raw:
            col.add("resources", f"must be a non-empty list of resource names, got {_show(raw)}")
        else:
            declared = []
            for i, r in enumerate(raw):
                if not isinstance(r, str) or not r:
                    col.add(f"resources[{i}]", f"must be a resource name, got {_show(r)}")
                elif r in declared:
                    col.add(f"resources[{i}]", f"duplicate resource {r!r}")
                else:
                    declared.append(r)
    seen_order: list[str] = list(declared or [])

    def note(res: str) -> None:
        if res not in seen_order and declared is None:
            seen_order.append(res)

    # --- cluster --------------------------------------------------------------------------
    errors_before_cluster = len(col.errors)
    cluster_raw = data.get("cluster")
    pooled_raw: Mapping | None = None
    node_entries: list[tuple[str, int, dict[str, float], dict[str, str], str]] = []
    device_names: list[tuple[str, str]] = []  # (resource, field path) of cluster.devices
    if cluster_raw is not None:
        if not isinstance(cluster_raw, Mapping):
            col.add("cluster", f"must be a mapping with 'capacity' or 'nodes', got {_show(cluster_raw)}")
        else:
            col.unknown_keys(cluster_raw, CLUSTER_KEYS, "cluster")
            has_cap, has_nodes = "capacity" in cluster_raw, "nodes" in cluster_raw
            if has_cap and has_nodes:
                col.add("cluster", "give either 'capacity' (one pooled machine) or 'nodes', not both")
            elif not has_cap and not has_nodes:
                col.add("cluster", "needs 'capacity' (one pooled machine) or 'nodes'")
            device_names = _devices(col, cluster_raw.get("devices"))
            if has_cap and not has_nodes:
                pooled_raw = _amounts(col, cluster_raw["capacity"], "cluster.capacity", note)
                if pooled_raw is not None and not any(v > 0 for v in pooled_raw.values()):
                    col.add("cluster.capacity", "the cluster is empty: every capacity is 0")
            if has_nodes and not has_cap:
                nodes_raw = cluster_raw["nodes"]
                if not isinstance(nodes_raw, list) or not nodes_raw:
                    col.add("cluster.nodes", f"must be a non-empty list of nodes, got {_show(nodes_raw)}")
                else:
                    names: set[str] = set()
                    for i, nd in enumerate(nodes_raw):
                        p = f"cluster.nodes[{i}]"
                        if not isinstance(nd, Mapping):
                            col.add(p, f"must be a mapping, got {_show(nd)}")
                            continue
                        col.unknown_keys(nd, NODE_KEYS, p)
                        name = nd.get("name", f"node{i}")
                        if not isinstance(name, str) or not name:
                            col.add(f"{p}.name", f"must be a non-empty string, got {_show(name)}")
                            name = f"node{i}"
                        elif name in names:
                            col.add(f"{p}.name", f"duplicate node name {name!r}")
                        names.add(name)
                        count = nd.get("count", 1)
                        cnt = col.number(count, f"{p}.count", positive=True, integer=True)
                        if "capacity" not in nd:
                            col.add(f"{p}.capacity", "is required")
                            continue
                        caps = _amounts(col, nd["capacity"], f"{p}.capacity", note)
                        attrs = nd.get("attributes", {}) or {}
                        if not isinstance(attrs, Mapping):
                            col.add(f"{p}.attributes", f"must be a mapping of strings, got {_show(attrs)}")
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

    # The cross-field checks below (demand on a missing resource, demand no node can hold)
    # need a valid cluster, and only that: with one they run even when other fields have
    # problems, so a file's problems are all reported in one go.
    cluster_ok = len(col.errors) == errors_before_cluster and (pooled_raw is not None or bool(node_entries))

    # --- queues -----------------------------------------------------------------------------
    queue_entries: list[tuple[str, float, str]] = []
    # queue path -> (guarantee, limit, field path of the queue)
    queue_bounds: dict[str, tuple[dict[str, float], dict[str, float], str]] = {}
    root_order = "fair"
    if "queues" in data and data["queues"] is not None:
        qs = data["queues"]
        if not isinstance(qs, list):
            col.add("queues", f"must be a list of queues, got {_show(qs)}")
        else:
            _queues(col, qs, "queues", ROOT, queue_entries, queue_bounds)
    queue_paths = {p for p, _, _ in queue_entries}

    # --- jobs --------------------------------------------------------------------------------
    jobs_raw = data.get("jobs")
    job_specs: list[tuple[str, str, float, float, list[tuple[str, dict[str, float], int | None, Duration, tuple]], str]] = []
    if jobs_raw is not None:
        if not isinstance(jobs_raw, list):
            col.add("jobs", f"must be a list of jobs, got {_show(jobs_raw)}")
        else:
            job_names: set[str] = set()
            for i, jb in enumerate(jobs_raw):
                p = f"jobs[{i}]"
                if not isinstance(jb, Mapping):
                    col.add(p, f"must be a mapping, got {_show(jb)}")
                    continue
                col.unknown_keys(jb, JOB_KEYS, p)
                name = col.name(jb.get("name", f"job{i}"), f"{p}.name")
                if name is not None:
                    if name in job_names:
                        col.add(f"{p}.name", f"duplicate job name {name!r}")
                    job_names.add(name)
                queue = jb.get("queue", ROOT)
                if queue is None:
                    queue = ROOT
                if not isinstance(queue, str):
                    col.add(f"{p}.queue", f"must be a dotted queue path, got {_show(queue)}")
                    queue = ROOT
                elif queue != ROOT and queue not in queue_paths:
                    known = ", ".join(sorted(queue_paths)) or "none defined"
                    col.add(f"{p}.queue", f"unknown queue {queue!r} (queues: {known})")
                weight = col.number(jb.get("weight", 1), f"{p}.weight", positive=True)
                submit = col.number(jb.get("submit", 0), f"{p}.submit", minimum=0.0)
                tasks = jb.get("tasks")
                classes = []
                if tasks is None:
                    col.add(f"{p}.tasks", "is required (one entry per task class)")
                elif not isinstance(tasks, list) or not tasks:
                    col.add(f"{p}.tasks", f"must be a non-empty list of task classes, got {_show(tasks)}")
                else:
                    class_names: set[str] = set()
                    for k, tc in enumerate(tasks):
                        tp = f"{p}.tasks[{k}]"
                        if not isinstance(tc, Mapping):
                            col.add(tp, f"must be a mapping, got {_show(tc)}")
                            continue
                        col.unknown_keys(tc, TASK_KEYS, tp)
                        cname = tc.get("class", "main" if len(tasks) == 1 else f"class{k}")
                        if not isinstance(cname, str) or not cname:
                            col.add(f"{tp}.class", f"must be a non-empty string, got {_show(cname)}")
                            cname = f"class{k}"
                        elif cname in class_names:
                            col.add(f"{tp}.class", f"duplicate task class {cname!r} in job {name!r}")
                        class_names.add(cname)
                        if "demand" not in tc:
                            col.add(f"{tp}.demand", "is required")
                            continue
                        demand = _amounts(col, tc["demand"], f"{tp}.demand", note)
                        if demand is not None and not any(v > 0 for v in demand.values()):
                            col.add(f"{tp}.demand", "a task must demand a positive amount of some resource")
                        count = tc.get("count")
                        cnt = None
                        if count is not None:
                            c = col.number(count, f"{tp}.count", minimum=0.0, integer=True)
                            cnt = int(c) if c is not None else None
                        duration = _duration(col, tc.get("duration", 1), f"{tp}.duration")
                        constraints = _constraints(col, tc.get("constraints"), f"{tp}.constraints")
                        max_per_node = None
                        if tc.get("max_per_node") is not None:
                            mpn = col.number(tc["max_per_node"], f"{tp}.max_per_node", positive=True, integer=True)
                            max_per_node = int(mpn) if mpn is not None else None
                        if demand is not None:
                            classes.append((cname, demand, cnt, duration, constraints, max_per_node, tp))
                # Kept even when name, weight or submit is bad, so its demands still get the
                # cross-field checks; the placeholders never reach a Scenario (errors raise).
                job_specs.append((name if name is not None else f"job{i}", queue,
                                  weight if weight is not None else 1.0, submit if submit is not None else 0.0,
                                  classes, p))

    # --- events (extension): structure now, against the nodes once they are built -----------
    event_specs = _events(col, data.get("events"))

    # --- cross-field checks: resources known, demands reachable -------------------------------
    resources = tuple(seen_order)
    if declared is not None:
        for where, amounts in _all_amounts(pooled_raw, node_entries, job_specs):
            for res in amounts:
                if res not in declared:
                    if where.startswith("cluster"):
                        cluster_ok = False
                    col.add(f"{where}.{res}", f"unknown resource {res!r} (resources: {', '.join(declared)})")
    devices = _check_devices(col, device_names, resources, pooled_raw, node_entries)
    if col.errors and not cluster_ok:
        raise ScenarioError(col.errors, source)

    m = len(resources)

    def vec(amounts: Mapping[str, float]) -> tuple[float, ...]:
        return tuple(float(amounts.get(r, 0.0)) for r in resources)

    if pooled_raw is not None:
        capacity = vec(pooled_raw)
        nodes = (Node("pool", capacity, "pool"),)
        pooled = True
    else:
        expanded = []
        for name, cnt, caps, attrs, _p in node_entries:
            for k in range(cnt):
                nm = name if cnt == 1 else f"{name}-{k}"
                expanded.append(Node(nm, vec(caps), name, tuple(sorted(attrs.items()))))
        nodes = tuple(expanded)
        capacity = tuple(sum(nd.capacity[r] for nd in nodes) for r in range(m))
        pooled = False

    # Which task shapes some node can hold: checked once per distinct (demand,
    # constraints) against each distinct node shape, not per task class and node (a
    # converted trace has thousands of each).
    node_shapes = list({(nd.capacity, nd.attributes): None for nd in nodes})
    holds: dict[tuple, tuple[bool, bool]] = {}  # -> (some node eligible, one of those holds it)

    def placeable(d: tuple, constraints) -> tuple[bool, bool]:
        key = (d, constraints)
        if key not in holds:
            eligible = [cap for cap, attrs in node_shapes if _eligible_attributes(attrs, constraints)]
            holds[key] = (bool(eligible), any(all(d[r] <= cap[r] for r in range(m)) for cap in eligible))
        return holds[key]

    jobs = []
    for name, queue, weight, submit, classes, p in job_specs:
        tcs = []
        for cname, demand, cnt, duration, constraints, max_per_node, tp in classes:
            d = vec(demand)
            for r in devices:
                if not _device_amount_ok(d[r]):
                    col.add(f"{tp}.demand.{resources[r]}",
                            f"{d[r]:g} is neither a fraction of one device (< 1) nor a whole number of devices")
            missing = [res for r, res in enumerate(resources) if d[r] > 0 and capacity[r] <= 0]
            for res in missing:
                col.add(f"{tp}.demand.{res}", f"the cluster has no {res}")
            any_eligible, fits_one = placeable(d, constraints)
            if not any_eligible:
                col.add(f"{tp}.constraints", "no node satisfies these constraints")
            elif not missing and not fits_one:
                # (skipped when a resource is missing altogether: that error says it all)
                biggest = ", ".join(f"{res}={d[r]:g}" for r, res in enumerate(resources) if d[r] > 0)
                where = "the pooled capacity" if pooled else "any single node"
                col.add(f"{tp}.demand", f"no node can ever hold this task ({biggest} exceeds {where})")
            tcs.append(TaskClass(cname, d, cnt, duration, constraints, max_per_node))
        jobs.append(Job(name, queue, weight, submit, tuple(tcs)))
    events = _check_events(col, event_specs, nodes, resources, devices)
    tree = None
    if queue_bounds:
        tree = QueueTree.build(queue_entries, root_order, {q: (g, lim) for q, (g, lim, _p) in queue_bounds.items()})
        for queue, field, reason in bound_claims_problems(tree, resources, capacity):
            col.add("queues" if queue == ROOT else f"{queue_bounds[queue][2]}.{field}", reason)
    if col.errors:
        raise ScenarioError(col.errors, source)

    if tree is None:
        tree = QueueTree.build(queue_entries, root_order)
    cluster = Cluster(capacity, nodes, pooled, resources, devices)
    return Scenario(resources, cluster, tree, tuple(jobs), source, events)


class _EventSpec:
    """One parsed `events` entry, before it is checked against the nodes."""

    __slots__ = ("time", "kind", "name", "capacity", "attributes", "path")

    def __init__(self, time: float, kind: str, name: str, capacity: dict[str, float] | None,
                 attributes: dict[str, str] | None, path: str):
        self.time, self.kind, self.name = time, kind, name
        self.capacity, self.attributes, self.path = capacity, attributes, path


def _events(col: _Collector, raw: Any) -> list[_EventSpec]:
    """``events: [{time: 300, node_fail: NAME}, {time: 600, node_add: {name, capacity, attributes}}]``."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        col.add("events", f"must be a list of events like {{time: 300, node_fail: NAME}}, got {_show(raw)}")
        return []
    out: list[_EventSpec] = []
    for i, ev in enumerate(raw):
        p = f"events[{i}]"
        if not isinstance(ev, Mapping):
            col.add(p, f"must be a mapping like {{time: 300, node_fail: NAME}}, got {_show(ev)}")
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
                col.add(f"{p}.node_fail", f"must be a node name, got {_show(body)}")
                continue
            if time is not None:
                out.append(_EventSpec(time, kind, body, None, None, p))
            continue
        bp = f"{p}.node_add"
        if not isinstance(body, Mapping):
            col.add(bp, f"must be a mapping with name, capacity, attributes, got {_show(body)}")
            continue
        col.unknown_keys(body, ADDED_NODE_KEYS, bp)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            col.add(f"{bp}.name", f"must be a non-empty string, got {_show(name)}")
            continue
        caps = None
        if "capacity" in body:
            # resources are checked against the scenario's once they are known
            caps = _amounts(col, body["capacity"], f"{bp}.capacity", lambda _res: None)
            if caps is None:
                continue
        attrs = body.get("attributes")
        if attrs is not None and not isinstance(attrs, Mapping):
            col.add(f"{bp}.attributes", f"must be a mapping of strings, got {_show(attrs)}")
            continue
        if time is not None:
            out.append(_EventSpec(time, kind, name, caps,
                                  None if attrs is None else {str(k): str(v) for k, v in attrs.items()}, p))
    return out


def _check_events(col: _Collector, specs: list[_EventSpec], nodes: tuple[Node, ...],
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


def _devices(col: _Collector, raw: Any) -> list[tuple[str, str]]:
    """``cluster.devices: [gpu]``: the resources counted in physical devices."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        col.add("cluster.devices", f"must be a list of resource names, got {_show(raw)}")
        return []
    out: list[tuple[str, str]] = []
    for i, name in enumerate(raw):
        p = f"cluster.devices[{i}]"
        if not isinstance(name, str) or not name:
            col.add(p, f"must be a resource name, got {_show(name)}")
        elif any(name == n for n, _ in out):
            col.add(p, f"duplicate device resource {name!r}")
        else:
            out.append((name, p))
    return out


def _check_devices(col: _Collector, device_names: list[tuple[str, str]], resources: tuple[str, ...],
                   pooled: Mapping | None, node_entries: list) -> tuple[int, ...]:
    """Resolve ``cluster.devices`` to resource indices; every node holds whole devices."""
    out: list[int] = []
    for name, p in device_names:
        if name not in resources:
            col.add(p, f"unknown resource {name!r} (resources: {', '.join(resources)})")
            continue
        out.append(resources.index(name))
        where = [("cluster.capacity", pooled)] if pooled is not None else \
            [(f"{np}.capacity", caps) for _n, _c, caps, _a, np in node_entries]
        for path, caps in where:
            amount = caps.get(name, 0.0)
            if amount != int(amount):
                col.add(f"{path}.{name}", f"{name} is a device resource (cluster.devices): a node has a whole "
                                          f"number of devices, got {amount:g}")
    return tuple(sorted(out))


def _device_amount_ok(amount: float) -> bool:
    """A device demand is a fraction of one device (< 1) or a whole number of devices."""
    return amount < 1.0 or amount == int(amount)


def _eligible_attributes(attributes: tuple, constraints) -> bool:
    attrs = dict(attributes)
    return all(attrs.get(key) in allowed for key, allowed in constraints)


def _all_amounts(pooled, node_entries, job_specs):
    if pooled is not None:
        yield "cluster.capacity", pooled
    for _name, _cnt, caps, _attrs, p in node_entries:
        yield f"{p}.capacity", caps
    for *_head, classes, _p in job_specs:
        for _cname, demand, _cnt, _dur, _cons, _mpn, tp in classes:
            yield f"{tp}.demand", demand


def _amounts(col: _Collector, raw: Any, path: str, note) -> dict[str, float] | None:
    if not isinstance(raw, Mapping):
        col.add(path, f"must be a mapping of resource amounts like {{cpu: 4, memory: 16}}, got {_show(raw)}")
        return None
    out: dict[str, float] = {}
    ok = True
    for key, value in raw.items():
        if not isinstance(key, str) or not key:
            col.add(path, f"resource names must be non-empty strings, got {_show(key)}")
            ok = False
            continue
        v = col.number(value, f"{path}.{key}", minimum=0.0)
        if v is None:
            ok = False
            continue
        out[key] = v
        note(key)
    return out if ok else None


def _queues(col: _Collector, entries: list, path: str, parent: str, out: list[tuple[str, float, str]],
            bounds: dict[str, tuple[dict[str, float], dict[str, float], str]]) -> None:
    names: set[str] = set()
    for i, q in enumerate(entries):
        p = f"{path}[{i}]"
        if not isinstance(q, Mapping):
            col.add(p, f"must be a mapping with a name, got {_show(q)}")
            continue
        col.unknown_keys(q, QUEUE_KEYS, p)
        name = col.name(q.get("name"), f"{p}.name")
        weight = col.number(q.get("weight", 1), f"{p}.weight", positive=True)
        order = q.get("order", "fair")
        if order not in ORDERS:
            col.add(f"{p}.order", f"must be one of {', '.join(ORDERS)}, got {_show(order)}")
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
        kids = q.get("children")
        if kids is not None:
            if not isinstance(kids, list):
                col.add(f"{p}.children", f"must be a list of queues, got {_show(kids)}")
            else:
                _queues(col, kids, f"{p}.children", full, out, bounds)


def _queue_bound(col: _Collector, raw: Any, path: str) -> dict[str, float]:
    """A queue's ``guarantee:`` or ``limit:`` (resource -> amount >= 0); the names are
    checked against the scenario's resources once those are known (they never add a
    resource: a bound on a resource nothing has is a typo)."""
    if raw is None:
        return {}
    return _amounts(col, raw, path, lambda _name: None) or {}


def _duration(col: _Collector, raw: Any, path: str) -> Duration:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        v = col.number(raw, path, positive=True)
        return Duration("fixed", (("value", v if v is not None else 1.0),))
    if isinstance(raw, list):
        if not raw:
            col.add(path, "a list of durations must not be empty")
            return Duration()
        values = [col.number(x, f"{path}[{i}]", positive=True) for i, x in enumerate(raw)]
        return Duration("list", (("values", tuple(v or 1.0 for v in values)),))
    if isinstance(raw, Mapping):
        kind = raw.get("dist")
        if kind not in DURATION_KINDS:
            col.add(f"{path}.dist", f"must be one of {', '.join(DURATION_KINDS)}, got {_show(kind)}")
            return Duration()
        needed = DURATION_KINDS[kind]
        col.unknown_keys(raw, needed | {"dist"}, path)
        params = []
        for key in sorted(needed):
            if key not in raw:
                col.add(f"{path}.{key}", f"is required for dist {kind}")
                continue
            positive = key not in ("mu", "low")
            v = col.number(raw[key], f"{path}.{key}", minimum=None if key == "mu" else 0.0, positive=positive)
            if v is not None:
                params.append((key, v))
        d = dict(params)
        if kind == "uniform" and "low" in d and "high" in d and d["high"] < d["low"]:
            col.add(f"{path}.high", f"must be >= low ({d['low']:g}), got {d['high']:g}")
        return Duration(kind, tuple(params))
    col.add(path, f"must be a number of seconds, a list, or {{dist: ...}}, got {_show(raw)}")
    return Duration()


def _constraints(col: _Collector, raw: Any, path: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``constraints: {gpu_model: [V100, A100]}``: the task runs only on nodes whose
    attribute has one of the listed values."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        col.add(path, f"must be a mapping of node attribute to allowed values, got {_show(raw)}")
        return ()
    out = []
    for key, allowed in raw.items():
        vals = allowed if isinstance(allowed, list) else [allowed]
        if not vals or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in vals):
            col.add(f"{path}.{key}", f"must be a value or a non-empty list of values, got {_show(allowed)}")
            continue
        out.append((str(key), tuple(str(v) for v in vals)))
    return tuple(sorted(out))
