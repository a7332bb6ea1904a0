"""Read and validate scenario files (contract: "Scenario file").

Validation happens here, at the edge, and collects *every* problem with its field path
(``jobs[3].tasks[0].demand.gpu: must be >= 0, got -1``) before anything is computed.
The core below assumes a valid :class:`Scenario` and only asserts invariants.

This module reads the file (YAML or JSON, duplicate keys refused) and runs the sections
in order, each in its own module: ``loader_cluster`` (``resources:``, ``cluster:``,
devices), ``loader_queues``, ``loader_jobs`` (jobs, task classes, durations,
constraints), ``loader_events``, ``loader_preemption``, ``loader_usage``; ``loader_fields`` holds the error collector and value
checks they share. The cross-field checks that need several sections (a resource not in
``resources:``, a demand no node can hold) run here once every section has been read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from fairshare.model.cluster import Cluster, Node
from fairshare.model.errors import FieldError, ScenarioError
from fairshare.model.loader_cluster import (CLUSTER_KEYS, NODE_KEYS, ClusterSpec, ResourceOrder, build_nodes,
                                            check_devices, parse_cluster, parse_resources)
from fairshare.model.loader_events import (ADDED_NODE_KEYS, EVENT_KEYS, EVENT_KINDS, check_events, check_queue_events,
                                          parse_events)
from fairshare.model.jobs import Job
from fairshare.model.loader_fields import Collector, show
from fairshare.model.loader_jobs import DURATION_KINDS, JOB_KEYS, TASK_KEYS, JobSpec, build_jobs, parse_jobs
from fairshare.model.loader_queues import ORDERS, QUEUE_KEYS, build_tree, parse_half_life, parse_queues
from fairshare.model.loader_preemption import PREEMPTION_KEYS, parse_preemption
from fairshare.model.loader_usage import parse_usage, usage_of_summary
from fairshare.model.scenario import FairnessConfig, GangsConfig, Scenario
from fairshare.model.schema import FAIRNESS, GANGS, PEERS, SCENARIO, keys

TOP_KEYS = keys(SCENARIO)
# (each section's keys live with its parser; re-exported here, where the converters
# look them up: ``traces.base.loader_accepts``)
__all__ = ["ADDED_NODE_KEYS", "CLUSTER_KEYS", "DURATION_KINDS", "EVENT_KEYS", "EVENT_KINDS", "JOB_KEYS",
           "NODE_KEYS", "ORDERS", "PREEMPTION_KEYS", "QUEUE_KEYS", "TASK_KEYS", "TOP_KEYS", "load_scenario",
           "parse_scenario", "parse_text", "read_document", "with_usage_file"]


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


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate a parsed scenario document and build the :class:`Scenario`."""
    col = Collector()
    if data is None:  # only comments, or `---`
        raise ScenarioError(FieldError("", "the file is empty (a scenario needs at least cluster and jobs)"),
                            source)
    if not isinstance(data, Mapping):
        raise ScenarioError(FieldError("", f"a scenario must be a mapping with keys cluster, jobs, ...; "
                                           f"got {show(data)}"), source)
    col.unknown_keys(data, TOP_KEYS, "")
    # `cluster:` or `jobs:` with nothing after it parses as null: as good as missing
    if data.get("cluster") is None:
        col.add("cluster", "is required")
    if data.get("jobs") is None:
        col.add("jobs", "is required (a list of jobs; [] for none)")

    # Each section checks its own fields, in file order of the contract; the resource
    # order is fixed by `resources:` or else by first appearance (``order.note``).
    order = parse_resources(col, data)
    errors_before_cluster = len(col.errors)
    cluster = parse_cluster(col, data.get("cluster"), order.note)
    # The cross-field checks below (demand on a missing resource, demand no node can hold)
    # need a valid cluster, and only that: with one they run even when other fields have
    # problems, so a file's problems are all reported in one go.
    cluster_ok = len(col.errors) == errors_before_cluster and cluster.given
    queue_entries, queue_bounds, queue_half_lives = parse_queues(col, data)
    # (events: structure now, against the nodes and the queue tree once they are built;
    # parsed before the jobs, since a job may name a queue an event adds (check_queue_events
    # checks when), but reported after them, in section order)
    event_col = Collector()
    event_specs = parse_events(event_col, data.get("events"))
    added_queues = {ev.name for ev in event_specs if ev.kind == "queue" and not ev.change.remove}
    job_specs = parse_jobs(col, data.get("jobs"), {p for p, _, _ in queue_entries} | added_queues, order.note)
    col.errors.extend(event_col.errors)
    preemption = parse_preemption(col, data.get("preemption"))
    gangs = parse_gangs(col, data.get("gangs"))
    fairness = parse_fairness(col, data.get("fairness"))
    peers = parse_peers(col, data.get("peers"))

    # --- cross-field checks: resources known, demands reachable -------------------------------
    resources = order.resources
    if order.declared is not None and not _known_resources(col, order.declared, _all_amounts(cluster, job_specs)):
        cluster_ok = False
    devices = check_devices(col, cluster, resources)
    if col.errors and not cluster_ok:
        raise ScenarioError(col.errors, source)

    nodes, capacity, pooled = build_nodes(cluster, resources)
    jobs = build_jobs(col, job_specs, resources, nodes, capacity, pooled, devices)
    events = check_events(col, event_specs, nodes, resources, devices)
    tree = build_tree(col, queue_entries, queue_bounds, resources, capacity, queue_half_lives)
    queue_events = check_queue_events(col, event_specs, tree, resources, capacity, job_specs)
    usage = parse_usage(col, data.get("usage"), resources, jobs, tree, fairness)
    if queue_events:  # (node and queue events in the simulator's order: time, then kind)
        events = tuple(sorted(events + queue_events,
                              key=lambda ev: (ev.time_s, EVENT_KINDS.index(ev.kind))))
    if col.errors:
        raise ScenarioError(col.errors, source)

    return Scenario(resources, Cluster(capacity, nodes, pooled, resources, devices), tree, tuple(jobs), source,
                    events, preemption, gangs, fairness, peers, usage)


def _small_section(col: Collector, raw: Any, name: str, doc, example: str) -> Mapping | None:
    """A top-level section's mapping with its keys checked against ``doc``; None when it
    is absent or not a mapping (then reported, with ``example``)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        col.add(name, f"must be a mapping like {example}, got {show(raw)}")
        return None
    col.unknown_keys(raw, keys(doc), name)
    return raw


def parse_fairness(col: Collector, raw: Any) -> FairnessConfig | None:
    """``fairness:`` (optional): ``half_life`` seconds >= 0, or infinite (YAML ``.inf``,
    or the string ``"inf"`` where the format has no infinity, as JSON)."""
    raw = _small_section(col, raw, "fairness", FAIRNESS, "{half_life: 86400}")
    if raw is None:
        return None
    value = raw.get("half_life")
    if value is None:
        return FairnessConfig()
    half_life = parse_half_life(col, value, "fairness.half_life")
    return None if half_life is None else FairnessConfig(half_life)


def with_usage_file(scenario: Scenario, path: str | Path) -> Scenario:
    """``scenario`` with the past usage of ``path``: a ``simulate`` summary.json (converted
    by :func:`usage_of_summary`), a document with a ``usage:`` section (a scenario file),
    or the section alone. Replaces the scenario's own ``usage:``. Problems raise
    :class:`ScenarioError` naming ``path`` and the field."""
    source = str(path)
    doc = read_document(path, what="usage file", empty="the file is empty (expected a usage: section or a "
                                                       "simulate summary.json)")
    if not isinstance(doc, Mapping):
        raise ScenarioError(FieldError("", f"must be a mapping (a usage: section or a summary.json), got {show(doc)}"),
                            source)
    if "makespan" in doc and isinstance(doc.get("jobs"), Mapping):
        raw = usage_of_summary(doc, scenario, source)
    elif "usage" in doc:
        raw = doc["usage"]
    else:
        raw = doc
    col = Collector()
    usage = parse_usage(col, raw, scenario.resources, scenario.jobs, scenario.queues, scenario.fairness,
                        source=source)
    if col.errors:
        raise ScenarioError(col.errors, source)
    return replace(scenario, usage=usage)


def parse_peers(col: Collector, raw: Any) -> dict[str, dict[str, Any]]:
    """``peers:`` (optional): per peer baseline policy (``PEER_NAMES``), a mapping of its
    own settings, kept as written: the baseline policy checks its keys when it runs."""
    raw = _small_section(col, raw, "peers", PEERS, "{yarn-fair: {default_policy: drf}}")
    if raw is None:
        return {}
    peers = {}
    for name, section in raw.items():
        if section is None:
            continue
        if not isinstance(section, Mapping):
            col.add(f"peers.{name}", f"must be a mapping of the {name} baseline's settings, got {show(section)}")
            continue
        peers[name] = dict(section)
    return peers


def parse_gangs(col: Collector, raw: Any) -> GangsConfig | None:
    """``gangs:`` (optional): ``reserve_after`` seconds >= 0 (absent: no reservations)."""
    raw = _small_section(col, raw, "gangs", GANGS, "{reserve_after: 600}")
    if raw is None:
        return None
    if raw.get("reserve_after") is None:
        return GangsConfig()
    after = col.number(raw["reserve_after"], "gangs.reserve_after", minimum=0.0)
    return None if after is None else GangsConfig(after)



def parse_jobs_on(jobs_raw: Any, resources: tuple[str, ...], nodes: tuple[Node, ...], queue_paths: set[str],
                  source: str = "<jobs>") -> tuple[Job, ...]:
    """The jobs ``parse_scenario`` builds from a document of ``resources:`` declared as
    ``resources``, a valid discrete cluster of ``nodes`` (no devices), valid queues of
    ``queue_paths`` and this ``jobs:`` list, with the same problems, without parsing and
    checking that cluster and those queues again: the live service checks every
    submission against its own nodes and queues, and parsing them took two thirds of
    the time of a one-job request. ``jobs_raw`` must be a list (the caller checks)."""
    col = Collector()
    order = ResourceOrder(list(resources))
    job_specs = parse_jobs(col, jobs_raw, queue_paths, order.note)
    _known_resources(col, order.resources, _all_amounts(ClusterSpec(), job_specs))
    capacity = tuple(sum(nd.capacity[r] for nd in nodes) for r in range(len(resources)))  # (as build_nodes)
    jobs = build_jobs(col, job_specs, resources, nodes, capacity, False, ())
    if col.errors:
        raise ScenarioError(col.errors, source)
    return tuple(jobs)


def _known_resources(col: Collector, declared: list[str] | tuple[str, ...],
                     amounts: Iterator[tuple[str, Mapping[str, float]]]) -> bool:
    """Every resource named in ``amounts`` is declared; else each problem goes to ``col``
    and the answer is whether the cluster's amounts were all right."""
    cluster_ok = True
    for where, named in amounts:
        for res in named:
            if res not in declared:
                if where.startswith("cluster"):
                    cluster_ok = False
                col.add(f"{where}.{res}", f"unknown resource {res!r} (resources: {', '.join(declared)})")
    return cluster_ok


def _all_amounts(cluster: ClusterSpec, job_specs: list[JobSpec]) -> Iterator[tuple[str, Mapping[str, float]]]:
    """Every resource-amounts mapping of the file with its field path, cluster first."""
    if cluster.pooled is not None:
        yield "cluster.capacity", cluster.pooled
    for _name, _cnt, caps, _attrs, p in cluster.node_entries:
        yield f"{p}.capacity", caps
    for spec in job_specs:
        for cs in spec.classes:
            yield f"{cs.path}.demand", cs.demand
