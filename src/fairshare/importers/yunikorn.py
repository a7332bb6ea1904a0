"""YuniKorn's queues.yaml (or the ``yunikorn-configs`` ConfigMap holding it) -> a scenario's queues.

YuniKorn (apache/yunikorn-core; docs ``yunikorn-site/docs/user_guide/queue_config.md`` and
``sorting_policies.md``) nests queues under ``partitions[].queues``; each queue may set
``resources.guaranteed`` and ``resources.max``. A parent queue "will always use the fair
policy to sort the child queues": by usage relative to the guaranteed resources, the
largest ratio over the resources deciding (a dominant share); preemption (on by default)
takes a queue back up to its guaranteed resources after ``preemption.delay`` (30 s).

The mapping (docs/whatif.md, "yunikorn"):

- the partition ``default`` (else the first) is imported; a defined ``root`` queue is the
  scenario's implicit root, its children the top-level queues;
- ``resources.guaranteed`` -> guarantee, ``resources.max`` -> limit; a resource not listed
  is neither guaranteed nor limited (the docs' rule);
- ``properties.application.sort.policy`` on a leaf: ``fifo`` (YuniKorn's default) ->
  ``order: fifo``, ``fair`` -> ``order: fair``, ``stateaware`` (deprecated, an alias of
  fifo since 1.6) -> ``order: fifo``;
- every queue has weight 1 (YuniKorn has no weights), and the baseline is ``hdrf``:
  hierarchical DRF with the guarantees as floors. YuniKorn's sort by usage/guaranteed
  grows queues above their guarantees in proportion to them; hdrf shares what the
  guarantees leave equally by dominant share (docs/whatif.md says where they differ);
- ``partitions[].preemption.enabled`` (default true) with some guarantee -> the scenario's
  ``preemption: {after: D}``, D the leaves' ``preemption.delay`` (the smallest when they
  differ, with a warning).

Units (docs, "Resources", YuniKorn >= 1.0): ``vcore`` in cores (``500m`` is half a core)
-> ``cpu``; ``memory`` in bytes, with SI suffixes (``1G`` = 10**9, ``1Gi`` = 2**30) ->
GiB; other names by ``importers.quantities`` (``nvidia.com/gpu`` -> ``gpu``).
Placement rules, ACLs, ``limits`` (per user and group), ``maxapplications``, child
templates and the other properties are named in warnings by their path
(``root.sandbox.submitacl``, ``partitions[0].placementrules``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from fairshare.importers.base import ClusterSize, ImportedConfig, ImportError_
from fairshare.importers.quantities import (
    check_guarantees_fit,
    cluster_amounts,
    list_at,
    mapping_at,
    parse_quantity,
    queue_name,
    scenario_amount,
    scenario_resource,
    yaml_documents,
)

NAME = "yunikorn"
SUMMARY = "YuniKorn queues.yaml (or the yunikorn-configs ConfigMap that holds it)"
#: hierarchical DRF with guarantees as floors: YuniKorn's fair queue sorting by dominant
#: share of usage over guaranteed resources, as near as an existing policy comes
POLICY = "hdrf"

_ORDERS = {"fifo": "fifo", "fair": "fair", "stateaware": "fifo"}
_DEFAULT_DELAY_S = 30.0  # preemption.delay's default (queue_config.md, "preemption.delay")
_UNREAD = {
    "maxapplications": "a cap on running applications is not modelled; ignored",
    "adminacl": "access control is not modelled; ignored",
    "submitacl": "access control is not modelled; ignored",
    "limits": "per-user and per-group limits are not modelled (queue limits are); ignored",
    "childtemplate": "dynamic queues are not modelled (only the queues the file lists exist); ignored",
    "placementrules": "placement rules are not modelled: a job history names its queue; ignored",
    "nodesortpolicy": "node sorting is not modelled (the policy places tasks its own way); ignored",
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|h|m|s))+$")
_DURATION_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def read(paths: list[str], cluster: ClusterSize) -> ImportedConfig:
    """The queue tree of one queues.yaml (module docstring for the mapping)."""
    if len(paths) != 1:
        raise ImportError_(f"{', '.join(paths) or '(no file)'}: yunikorn reads one queues.yaml, got {len(paths)} files")
    path = paths[0]
    config = _queues_document(path)
    imported = ImportedConfig(kind=NAME, queues=[], policy=POLICY)
    if "partitions" not in config:
        raise ImportError_(f"{path}: partitions: is required (a queues.yaml is partitions: [{{name: default, "
                           f"queues: [...]}}])")
    partitions = list_at(config.get("partitions"), f"{path}: partitions", "[{name: default, queues: [...]}]")
    if not partitions:
        raise ImportError_(f"{path}: partitions: must list at least one partition")
    names = [p.get("name") if isinstance(p, Mapping) else None for p in partitions]
    chosen = names.index("default") if "default" in names else 0
    for i, name in enumerate(names):
        if i != chosen:
            imported.warn(f"partitions[{i}] ({name})", f"only one partition is imported ({names[chosen]}); ignored")
    partition = mapping_at(partitions[chosen], f"{path}: partitions[{chosen}]", "{name: default, queues: [...]}")
    where = f"partitions[{chosen}]"
    for key in partition:
        if key not in ("name", "queues", "preemption"):
            imported.warn(f"{where}.{key}", _UNREAD.get(key, "a partition setting fairshare does not model; ignored"))
    top = list_at(partition.get("queues"), f"{path}: {where}.queues", "[{name: root, queues: [...]}]")
    if len(top) == 1 and isinstance(top[0], Mapping) and top[0].get("name") == "root":
        root = top[0]
        for key in root:
            if key in ("resources", "parent"):
                raise ImportError_(f"{path}: root.{key}: the root queue cannot set {key} (YuniKorn rejects it)")
            if key not in ("name", "queues"):
                imported.warn(f"root.{key}", _UNREAD.get(key, "a queue setting fairshare does not model; ignored"))
        top = list_at(root.get("queues"), f"{path}: root.queues", "[{name: a}]")
    if not top:
        imported.warn(f"{where}.queues", "no queue below root: the scenario's jobs all sit under the root")
    delays: dict[str, float] = {}
    imported.queues = _queues(top, "root", "", path, cluster, imported, delays)
    check_guarantees_fit(imported, cluster, path, "guaranteed resources")
    _preemption(partition, where, path, delays, imported)
    return imported


def _queues_document(path: str) -> Mapping:
    """The queues.yaml mapping: the file itself, or a ConfigMap's ``data["queues.yaml"]``."""
    docs = yaml_documents(path)
    if len(docs) != 1:
        raise ImportError_(f"{path}: must be one YAML mapping with partitions (a queues.yaml), "
                           f"got {len(docs)} documents")
    if not isinstance(docs[0], Mapping):
        raise ImportError_(f"{path}: must be a mapping with partitions (a queues.yaml), got {docs[0]!r}")
    doc = docs[0]
    if doc.get("kind") == "ConfigMap":
        text = mapping_at(doc.get("data"), f"{path}: data", "{queues.yaml: ...}").get("queues.yaml")
        if not isinstance(text, str):
            raise ImportError_(f"{path}: data.queues.yaml: the ConfigMap has no queues.yaml text")
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ImportError_(f"{path}: data.queues.yaml: not valid YAML: {exc}") from None
        if not isinstance(doc, Mapping):
            raise ImportError_(f"{path}: data.queues.yaml: must be a mapping with partitions, got {doc!r}")
    return doc


def _queues(entries: list, parent: str, parent_path: str, file: str, cluster: ClusterSize,
            imported: ImportedConfig, delays: dict[str, float]) -> list[dict[str, Any]]:
    """The scenario entries of one level; ``parent`` is the YuniKorn name (``root.a``)."""
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(entries):
        queue = mapping_at(raw, f"{file}: {parent}.queues[{i}]", "{name: a, resources: {...}}")
        yk_name = f"{parent}.{queue.get('name')}"
        name = queue_name(queue.get("name"), f"{parent}.queues[{i}].name", imported)
        path = f"{parent_path}.{name}" if parent_path else name
        imported.queue_paths[yk_name] = path
        entry: dict[str, Any] = {"name": name}
        for key in queue:
            if key not in ("name", "parent", "queues", "properties", "resources"):
                imported.warn(f"{yk_name}.{key}", _UNREAD.get(key, "a queue setting fairshare does not model; ignored"))
        resources = mapping_at(queue.get("resources"), f"{file}: {yk_name}.resources", "{guaranteed: {vcore: 10}}")
        for key in resources:
            if key not in ("guaranteed", "max"):
                imported.warn(f"{yk_name}.resources.{key}", "not a YuniKorn resources key (guaranteed, max); ignored")
        for key, ours in (("guaranteed", "guarantee"), ("max", "limit")):
            amounts = _amounts(resources.get(key), f"{yk_name}.resources.{key}", file)
            kept = cluster_amounts(amounts, f"{yk_name}.resources.{key}", cluster, imported)
            if kept:
                entry[ours] = kept
        children = list_at(queue.get("queues"), f"{file}: {yk_name}.queues", "[{name: a}]")
        if children:
            entry["children"] = _queues(children, yk_name, path, file, cluster, imported, delays)
        elif queue.get("parent") is True:
            imported.warn(f"{yk_name}.parent", "a parent queue with no children in the file (its leaves are made "
                                               "by placement rules at run time): a leaf here")
        _properties(queue, yk_name, file, entry, bool(children), imported, delays)
        out.append(entry)
    return out


def _amounts(raw: Any, where: str, file: str) -> dict[str, float]:
    """``{vcore: 10, memory: 1G}`` in the scenario's names and units."""
    amounts: dict[str, float] = {}
    for res, value in mapping_at(raw, f"{file}: {where}", "{vcore: 10, memory: 1G}").items():
        name = scenario_resource(str(res))
        amounts[name] = scenario_amount(name, parse_quantity(value, f"{file}: {where}.{res}"))
    return amounts


def _properties(queue: Mapping, yk_name: str, file: str, entry: dict[str, Any], is_parent: bool,
                imported: ImportedConfig, delays: dict[str, float]) -> None:
    properties = mapping_at(queue.get("properties"), f"{file}: {yk_name}.properties",
                            "{application.sort.policy: fair}")
    for key, value in properties.items():
        where = f"{yk_name}.properties.{key}"
        if key == "application.sort.policy":
            if value not in _ORDERS:
                raise ImportError_(f"{file}: {where}: must be one of {', '.join(_ORDERS)}, got {value!r}")
            if value == "stateaware":
                imported.warn(where, "stateaware (deprecated; one starting application at a time) is read as fifo")
        elif key == "preemption.delay" and not is_parent:
            delays[yk_name] = _duration(value, f"{file}: {where}")
        else:
            imported.warn(where, "a queue property fairshare does not model; ignored")
    if not is_parent:
        entry["order"] = _ORDERS[properties.get("application.sort.policy", "fifo")]


def _duration(raw: Any, where: str) -> float:
    """A Go duration such as ``30s``, ``1m30s`` or ``500ms``, in seconds."""
    text = str(raw).strip()
    if not _DURATION.match(text):
        raise ImportError_(f"{where}: must be a duration like 30s or 1m30s, got {raw!r}")
    return sum(float(number) * _DURATION_S[unit] for number, unit in _DURATION_PART.findall(text))


def _preemption(partition: Mapping, where: str, file: str, delays: dict[str, float],
                imported: ImportedConfig) -> None:
    """``preemption: {after: D}`` when the partition preempts (its default) and some queue
    has a guarantee to restore."""
    settings = mapping_at(partition.get("preemption"), f"{file}: {where}.preemption", "{enabled: false}")
    enabled = settings.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ImportError_(f"{file}: {where}.preemption.enabled: must be true or false, got {enabled!r}")
    if not enabled or not any("guarantee" in q for q in _all_queues(imported.queues)):
        return
    leaves = [q for q in imported.queue_paths if not any(o.startswith(q + ".") for o in imported.queue_paths)]
    all_delays = {delays.get(q, _DEFAULT_DELAY_S) for q in leaves}
    after = min(all_delays)
    if len(all_delays) > 1:
        imported.warn(f"{where} (preemption.delay)", f"leaves differ in preemption.delay; one delay for every queue: "
                                                     f"the smallest, {after:g} s")
    imported.preemption = {"after": after}


def _all_queues(entries: list[dict[str, Any]]):
    for entry in entries:
        yield entry
        yield from _all_queues(entry.get("children", []))
