"""Kueue's queue objects (ClusterQueue, Cohort, ResourceFlavor, LocalQueue YAML) -> a scenario's queues.

Kueue (kubernetes-sigs/kueue, docs ``site/content/en/docs/concepts/cluster_queue.md`` and
``cohort.md``; API ``apis/kueue/v1beta1``) admits workloads against *quotas*:

- a **ClusterQueue** has, per resource group and flavor, a ``nominalQuota`` it owns, a
  ``borrowingLimit`` (how much more it may borrow from its cohort; absent: all the cohort
  has) and a ``lendingLimit`` (how much of its nominal quota others may borrow);
- **Cohorts** group ClusterQueues that lend each other unused quota; since v0.11 a
  Cohort object may have a ``parent`` cohort (hierarchical cohorts) and quotas of its own,
  "additional resources on top of those defined by ClusterQueues within the Cohort";
- a **ResourceFlavor** names a kind of node (``nodeLabels``); a **LocalQueue**
  (``namespace/name``) is where users submit, pointing to one ClusterQueue.

The mapping (docs/whatif.md, "kueue"):

- cohorts become inner queues, ClusterQueues leaves (a ClusterQueue without a cohort a
  top-level leaf), each with ``order: fifo`` (Kueue orders a ClusterQueue's workloads by
  priority then creation time, under both queueing strategies);
- **guarantee** = nominal quota, summed over the flavors of a resource; a cohort's
  guarantee is its subtree's quota (its own plus its children's), which is what the
  cohort keeps for itself;
- **limit** = nominal + borrowingLimit (when every flavor of the resource has one); a
  ClusterQueue without a cohort cannot borrow (limit = nominal), and a top-level cohort
  can use no more than its subtree's quota (limit = that quota) even when the cluster is
  larger: in Kueue, quota, not the nodes, bounds admission. A resource a ClusterQueue
  does not cover has limit 0 (Kueue cannot admit a workload that requests it);
- ``fairSharing.weight`` -> weight; ``lendingLimit``, ``borrowingLimit``, ``preemption``,
  ``queueingStrategy`` and the Configuration's ``fairSharing.enable`` -> ``peers.kueue``
  (the contract in ``importers.base``), read by the ``kueue`` baseline policy;
- ResourceFlavors: quotas are pooled over flavors (a warning names each flavor with node
  labels and the cluster's nodes whose attributes match them);
- LocalQueues -> ``queue_paths`` (``namespace/name`` -> the ClusterQueue's path), for a
  workload history.

Units and resource names: ``importers.quantities`` (cpu in cores, memory in GiB,
``nvidia.com/gpu`` -> ``gpu``). Everything else a ClusterQueue or Cohort has
(``namespaceSelector``, ``flavorFungibility``, ``admissionChecks``, ``stopPolicy``...)
is named in a warning by its path, ``ClusterQueue/NAME.spec.FIELD``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from fairshare.importers.base import ClusterSize, ImportedConfig, ImportError_
from fairshare.importers.quantities import (
    check_guarantees_fit,
    cluster_amounts,
    list_at,
    mapping_at,
    parse_quantity,
    positive_weight,
    queue_name,
    scenario_amount,
    scenario_resource,
    yaml_documents,
)

NAME = "kueue"
SUMMARY = "Kueue ClusterQueue, Cohort, ResourceFlavor and LocalQueue YAML (kubectl get ... -o yaml)"
POLICY = "kueue"

_QUEUE_KINDS = ("ClusterQueue", "Cohort", "ResourceFlavor", "LocalQueue")
_WITHIN_CLUSTER_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_RECLAIM_WITHIN_COHORT = ("Never", "LowerPriority", "Any")
_BORROW_WITHIN_COHORT = ("Never", "LowerPriority")
_QUEUEING_STRATEGIES = ("StrictFIFO", "BestEffortFIFO")
#: spec fields the mapping reads; any other is reported
_CLUSTER_QUEUE_READ = {"cohort", "cohortName", "resourceGroups", "fairSharing", "preemption", "queueingStrategy"}
_COHORT_READ = {"parent", "parentName", "resourceGroups", "fairSharing"}

#: per scenario resource, summed over flavors: (nominal, borrowing or None when some
#: flavor has none, lending or None likewise)
Quota = dict[str, tuple[Fraction, Fraction | None, Fraction | None]]


@dataclass
class _Node:
    """A cohort or ClusterQueue, as read."""

    kind: str  # "Cohort" or "ClusterQueue"
    name: str  # the scenario's queue name
    base: str  # its path in the input: ``ClusterQueue/team-a``
    where: str  # ``FILE: ClusterQueue/team-a`` for errors
    parent: str | None  # the cohort's name in Kueue
    weight: float = 1.0
    quota: Quota = field(default_factory=dict)
    spec: Mapping = field(default_factory=dict)
    children: list[_Node] = field(default_factory=list)


def read(paths: list[str], cluster: ClusterSize) -> ImportedConfig:
    """The queue tree of Kueue's objects in ``paths`` (multi-document YAML files, or
    ``kind: List`` as ``kubectl get -o yaml`` writes; module docstring for the mapping)."""
    imported = ImportedConfig(kind=NAME, queues=[], policy=POLICY)
    objects, config = _collect(paths, imported)
    if not objects["ClusterQueue"]:
        raise ImportError_(f"{', '.join(paths)}: no ClusterQueue (kind: ClusterQueue, apiVersion kueue.x-k8s.io/...)")
    flavors_used: dict[str, str] = {}  # flavor -> first path that names it
    cohorts = {name: _cohort(obj, where, imported, flavors_used) for name, (where, obj) in objects["Cohort"].items()}
    queues = [_cluster_queue(obj, where, imported, flavors_used)
              for where, obj in objects["ClusterQueue"].values()]
    for node in list(cohorts.values()) + queues:  # a cohort that is only named: Kueue creates it
        if node.parent is not None and node.parent not in cohorts:
            named_at = f"{node.base}.spec.{'cohort' if node.kind == 'ClusterQueue' else 'parent'}"
            cohorts[node.parent] = _Node("Cohort", queue_name(node.parent, named_at, imported),
                                         f"Cohort/{node.parent}", f"{node.where.split(': ')[0]}: {named_at}", None)
    tops = _link(cohorts, queues)
    _flavors(objects["ResourceFlavor"], flavors_used, cluster, imported)

    kueue_peer: dict[str, Any] = {}
    for top in tops:
        entry, _quota = _entry(top, "", None, cluster, imported, kueue_peer)
        imported.queues.append(entry)
    check_guarantees_fit(imported, cluster, ", ".join(map(str, paths)), "nominal quotas")
    _local_queues(objects["LocalQueue"], {q.base.split("/", 1)[1]: q for q in queues}, imported)
    _preemption_section(queues, kueue_peer, imported)
    if config is not None:
        kueue_peer["fair_sharing"] = config
    imported.peers[NAME] = kueue_peer
    return imported


# --- reading the objects --------------------------------------------------------------------------

#: kind -> name -> (``FILE: Kind/name``, the object)
Objects = dict[str, dict[str, tuple[str, Mapping]]]


def _collect(paths: list[str], imported: ImportedConfig) -> tuple[Objects, bool | None]:
    """Kueue's objects by kind and name (``where`` for errors, the object), and the
    Configuration's ``fairSharing.enable`` when a Configuration document is given."""
    objects: Objects = {kind: {} for kind in _QUEUE_KINDS}
    fair_sharing: bool | None = None
    for path in paths:
        for i, doc in enumerate(yaml_documents(path)):
            items = [doc]
            if isinstance(doc, Mapping) and doc.get("kind") == "List":
                items = list_at(doc.get("items"), f"{path}: document {i + 1}.items", "[{kind: ClusterQueue, ...}]")
            for j, obj in enumerate(items):
                at = f"document {i + 1}" + (f".items[{j}]" if len(items) > 1 or items[0] is not doc else "")
                if not isinstance(obj, Mapping) or not isinstance(obj.get("kind"), str):
                    raise ImportError_(f"{path}: {at}: must be a Kubernetes object with a kind, got {obj!r}")
                kind, api = obj["kind"], str(obj.get("apiVersion", ""))
                if kind == "Configuration" and api.startswith("config.kueue.x-k8s.io/"):
                    fair_sharing = _configuration(obj, f"{path}: {at}", imported)
                    continue
                name = mapping_at(obj.get("metadata"), f"{path}: {at}.metadata", "{name: team-a}").get("name")
                if kind not in _QUEUE_KINDS or not api.startswith("kueue.x-k8s.io/"):
                    imported.warn(f"{path}: {at} ({kind}/{name})", "not a Kueue queue object (ClusterQueue, "
                                                                    "Cohort, ResourceFlavor, LocalQueue); ignored")
                    continue
                if not isinstance(name, str) or not name:
                    raise ImportError_(f"{path}: {at} ({kind}).metadata.name: must be a non-empty name, got {name!r}")
                key = name if kind != "LocalQueue" else f"{obj['metadata'].get('namespace') or 'default'}/{name}"
                if key in objects[kind]:
                    raise ImportError_(f"{path}: {kind}/{key}: defined twice (also in {objects[kind][key][0]})")
                objects[kind][key] = (f"{path}: {kind}/{key}", obj)
    return objects, fair_sharing


def _configuration(obj: Mapping, where: str, imported: ImportedConfig) -> bool:
    """Kueue's Configuration: ``fairSharing.enable`` (default false in the Configuration,
    though the contract's default is true: an explicit value is always written)."""
    for key in obj:
        if key not in ("apiVersion", "kind", "fairSharing", "metadata"):
            imported.warn(f"{where}.{key}", "a Kueue Configuration setting fairshare does not model; ignored")
    fair = mapping_at(obj.get("fairSharing"), f"{where}.fairSharing", "{enable: true}")
    for key in fair:
        if key != "enable":
            imported.warn(f"{where}.fairSharing.{key}",
                          "not modelled (the kueue baseline uses Kueue's default); ignored")
    enable = fair.get("enable", False)
    if not isinstance(enable, bool):
        raise ImportError_(f"{where}.fairSharing.enable: must be true or false, got {enable!r}")
    return enable


def _spec(obj: Mapping, where: str) -> Mapping:
    return mapping_at(obj.get("spec"), f"{where}.spec", "{resourceGroups: [...]}")


def _cohort(obj: Mapping, where: str, imported: ImportedConfig, flavors_used: dict[str, str]) -> _Node:
    name = obj["metadata"]["name"]
    spec = _spec(obj, where)
    parent = spec.get("parentName", spec.get("parent"))
    if parent is not None and (not isinstance(parent, str) or not parent):
        raise ImportError_(f"{where}.spec.parent: must be a cohort's name, got {parent!r}")
    node = _Node("Cohort", queue_name(name, f"Cohort/{name}", imported), f"Cohort/{name}", where, parent or None,
                 spec=spec)
    _read_common(node, spec, _COHORT_READ, imported, flavors_used)
    return node


def _cluster_queue(obj: Mapping, where: str, imported: ImportedConfig, flavors_used: dict[str, str]) -> _Node:
    name = obj["metadata"]["name"]
    spec = _spec(obj, where)
    cohort = spec.get("cohortName", spec.get("cohort"))
    if cohort is not None and (not isinstance(cohort, str)):
        raise ImportError_(f"{where}.spec.cohort: must be a cohort's name, got {cohort!r}")
    node = _Node("ClusterQueue", queue_name(name, f"ClusterQueue/{name}", imported), f"ClusterQueue/{name}", where,
                 cohort or None, spec=spec)
    _read_common(node, spec, _CLUSTER_QUEUE_READ, imported, flavors_used)
    return node


def _read_common(node: _Node, spec: Mapping, read_keys: set[str], imported: ImportedConfig,
                 flavors_used: dict[str, str]) -> None:
    """What Cohorts and ClusterQueues share: quotas, the fair-sharing weight, and a warning
    for each spec field the mapping does not read."""
    for key, value in spec.items():
        if key not in read_keys and not (key == "namespaceSelector" and value == {}):
            imported.warn(f"{node.base}.spec.{key}", _UNREAD.get(key, "a setting fairshare does not model; ignored"))
    fair = mapping_at(spec.get("fairSharing"), f"{node.where}.spec.fairSharing", "{weight: 2}")
    if "weight" in fair:
        weight = float(parse_quantity(fair["weight"], f"{node.where}.spec.fairSharing.weight"))
        node.weight = positive_weight(weight, f"{node.base}.spec.fairSharing.weight", imported)
    node.quota = _quota(spec, node, imported, flavors_used)


_UNREAD = {
    "namespaceSelector": "which namespaces may use the ClusterQueue: not modelled (the LocalQueues map "
                         "namespace/name to the queue); ignored",
    "flavorFungibility": "flavors are pooled per resource, so there is no flavor choice to make; ignored",
    "admissionChecks": "admission checks (provisioning, MultiKueue) are not modelled: workloads are admitted "
                       "on quota alone; ignored",
    "admissionChecksStrategy": "admission checks are not modelled; ignored",
    "stopPolicy": "a held or drained queue is not modelled (the queue admits as usual); ignored",
}


def _quota(spec: Mapping, node: _Node, imported: ImportedConfig, flavors_used: dict[str, str]) -> Quota:
    """The quotas of all resource groups, per scenario resource, summed over flavors (a
    warning where more than one flavor holds one resource: Kueue puts each workload's pod
    set on one flavor, fairshare pools them)."""
    quota: Quota = {}
    flavors_of: dict[str, list[str]] = {}
    for g, group in enumerate(list_at(spec.get("resourceGroups"), f"{node.where}.spec.resourceGroups",
                                      "[{coveredResources: [cpu], flavors: [...]}]")):
        gp = f"spec.resourceGroups[{g}]"
        group = mapping_at(group, f"{node.where}.{gp}", "{coveredResources: [cpu], flavors: [...]}")
        covered = list_at(group.get("coveredResources"), f"{node.where}.{gp}.coveredResources", "[cpu, memory]")
        for f, flavor in enumerate(list_at(group.get("flavors"), f"{node.where}.{gp}.flavors",
                                           "[{name: default-flavor, resources: [...]}]")):
            fp = f"{gp}.flavors[{f}]"
            flavor = mapping_at(flavor, f"{node.where}.{fp}", "{name: default-flavor, resources: [...]}")
            flavor_name = flavor.get("name")
            if not isinstance(flavor_name, str) or not flavor_name:
                raise ImportError_(f"{node.where}.{fp}.name: must be a ResourceFlavor's name, got {flavor_name!r}")
            flavors_used.setdefault(flavor_name, f"{node.base}.{fp}")
            for r, res in enumerate(list_at(flavor.get("resources"), f"{node.where}.{fp}.resources",
                                            "[{name: cpu, nominalQuota: 9}]")):
                rp = f"{node.where}.{fp}.resources[{r}]"
                res = mapping_at(res, rp, "{name: cpu, nominalQuota: 9}")
                if res.get("name") not in covered:
                    raise ImportError_(f"{rp}.name: must be one of the group's coveredResources {covered}, "
                                       f"got {res.get('name')!r}")
                if "nominalQuota" not in res:
                    raise ImportError_(f"{rp}.nominalQuota: is required")
                name = scenario_resource(res["name"])
                nominal = parse_quantity(res["nominalQuota"], f"{rp}.nominalQuota")
                limits = [parse_quantity(res[k], f"{rp}.{k}") if res.get(k) is not None else None
                          for k in ("borrowingLimit", "lendingLimit")]
                if name in quota:
                    before = quota[name]
                    limits = [None if a is None or b is None else a + b for a, b in zip(before[1:], limits)]
                    nominal += before[0]
                quota[name] = (nominal, limits[0], limits[1])
                flavors_of.setdefault(name, []).append(flavor_name)
    for name, flavors in flavors_of.items():
        if len(flavors) > 1:
            imported.warn(f"{node.base}.spec.resourceGroups ({name})",
                          f"{len(flavors)} flavors ({', '.join(flavors)}) hold {name}; their quotas are pooled "
                          f"(Kueue places each pod set on one flavor)")
    return quota


def _link(cohorts: dict[str, _Node], queues: list[_Node]) -> list[_Node]:
    """Children under their cohorts; the top level (cohorts without a parent and
    ClusterQueues without a cohort), in file order. A cohort cycle is an error."""
    for name, node in cohorts.items():
        seen = [name]
        up = node.parent
        while up is not None:
            if up in seen:
                raise ImportError_(f"{node.where}.spec.parent: cohorts form a cycle: {' -> '.join(seen + [up])}")
            seen.append(up)
            up = cohorts[up].parent
    tops: list[_Node] = []
    for node in list(cohorts.values()) + queues:
        if node.parent is None:
            tops.append(node)
        else:
            cohorts[node.parent].children.append(node)
    return tops


def _flavors(flavors: dict[str, tuple[str, Mapping]], used: dict[str, str], cluster: ClusterSize,
             imported: ImportedConfig) -> None:
    """Each flavor with node labels (or taints) in a warning that says what pooling the
    quotas loses and which of the cluster's nodes carry those labels as attributes."""
    for name, first_use in used.items():
        if name not in flavors:
            imported.warn(first_use, f"ResourceFlavor {name!r} is not defined in the files (Kueue admits nothing "
                                     f"against it until it is); its quota is counted")
    for name, (where, obj) in flavors.items():
        spec = _spec(obj, where)
        labels = mapping_at(spec.get("nodeLabels"), f"{where}.spec.nodeLabels", "{cloud.google.com/gke-spot: 'true'}")
        for key in spec:
            if key != "nodeLabels":
                imported.warn(f"ResourceFlavor/{name}.spec.{key}", "not modelled (taints, tolerations and topology "
                                                                   "do not restrict placement here); ignored")
        if not labels:
            continue
        wanted = {str(k): str(v) for k, v in labels.items()}
        matching = [node.get("name", f"nodes[{i}]") for i, node in enumerate(cluster.nodes or [])
                    if all(str((node.get("attributes") or {}).get(k)) == v for k, v in wanted.items())]
        shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
        where_nodes = (f"the cluster's nodes with these attributes: {', '.join(matching)}" if matching
                       else "no node of the cluster has these attributes")
        imported.warn(f"ResourceFlavor/{name}.spec.nodeLabels",
                      f"{shown}: quotas are pooled over flavors, so a workload is not tied to this flavor's nodes "
                      f"({where_nodes}; a job's constraints can pin it)")


# --- building the queue entries ---------------------------------------------------------------------

def _entry(node: _Node, parent_path: str, parent_cohort: _Node | None, cluster: ClusterSize,
           imported: ImportedConfig, peer: dict[str, Any]) -> tuple[dict[str, Any], Quota]:
    """The scenario entry of ``node`` (with its children) and its subtree's quota."""
    path = f"{parent_path}.{node.name}" if parent_path else node.name
    imported.queue_paths[node.base] = path
    entry: dict[str, Any] = {"name": node.name}
    if node.weight != 1.0:
        entry["weight"] = node.weight
    subtree: Quota = dict(node.quota)
    if node.kind == "Cohort":
        names: set[str] = set()
        kids = []
        for child in node.children:
            if child.name in names:
                raise ImportError_(f"{child.where}: a Cohort and a ClusterQueue under cohort {node.base} are both "
                                   f"named {child.name!r}; rename one")
            names.add(child.name)
            kid, kid_quota = _entry(child, path, node, cluster, imported, peer)
            kids.append(kid)
            for res, (nominal, _b, _l) in kid_quota.items():
                own = subtree.get(res, (Fraction(0), None, None))
                subtree[res] = (own[0] + nominal, own[1], own[2])
        if kids:
            entry["children"] = kids
        else:
            imported.warn(node.base, "a cohort with no ClusterQueue below it: an empty queue")
    else:
        entry["order"] = "fifo"
        peer.setdefault("cluster_queues", []).append(path)
        _queue_peer(node, path, cluster, peer)
    guarantee = {res: scenario_amount(res, q[0]) for res, q in subtree.items() if q[0] > 0}
    limit = _limit(node, subtree, parent_cohort, cluster)
    for key, amounts in (("guarantee", guarantee), ("limit", limit)):
        kept = cluster_amounts(amounts, f"{node.base}.spec.resourceGroups", cluster, imported) if amounts else {}
        if kept:
            entry[key] = kept
    if node.kind == "Cohort":
        for res, (_n, _b, lending) in node.quota.items():
            if lending is not None:
                imported.warn(f"{node.base}.spec.resourceGroups ({res}).lendingLimit",
                              "a cohort's lending limit is not modelled (its subtree's quota is its "
                              "guarantee); ignored")
    return entry, subtree


def _limit(node: _Node, subtree: Quota, cohort: _Node | None, cluster: ClusterSize) -> dict[str, float]:
    """nominal + borrowingLimit where every flavor has one; a ClusterQueue without a cohort,
    or a top-level cohort, can use only its own (subtree's) quota; an uncovered resource
    of the cluster: 0."""
    limit: dict[str, float] = {}
    may_borrow = node.parent is not None
    for res, (nominal, borrowing, _lending) in subtree.items():
        if not may_borrow:
            limit[res] = scenario_amount(res, nominal)
        elif borrowing is not None and res in node.quota:
            limit[res] = scenario_amount(res, nominal + borrowing)
    if node.kind == "ClusterQueue" or not may_borrow:
        for res in cluster.total:
            if res not in subtree:
                limit[res] = 0.0
    return limit


def _queue_peer(node: _Node, path: str, cluster: ClusterSize, peer: dict[str, Any]) -> None:
    """``peers.kueue`` entries of one ClusterQueue: limits as given, preemption, queueing."""
    for key, index in (("borrowing_limit", 1), ("lending_limit", 2)):
        amounts = {res: scenario_amount(res, q[index]) for res, q in node.quota.items()
                   if q[index] is not None and res in cluster.total}
        if amounts:
            peer.setdefault(key, {})[path] = amounts
    where = f"{node.where}.spec"
    preemption = mapping_at(node.spec.get("preemption"), f"{where}.preemption", "{reclaimWithinCohort: Any}")
    settings: dict[str, Any] = {}
    for key, ours, allowed in (("withinClusterQueue", "within_cluster_queue", _WITHIN_CLUSTER_QUEUE),
                               ("reclaimWithinCohort", "reclaim_within_cohort", _RECLAIM_WITHIN_COHORT)):
        if key in preemption:
            settings[ours] = _one_of(preemption[key], allowed, f"{where}.preemption.{key}")
    if "borrowWithinCohort" in preemption:
        borrow = mapping_at(preemption["borrowWithinCohort"], f"{where}.preemption.borrowWithinCohort",
                            "{policy: LowerPriority, maxPriorityThreshold: 100}")
        value: dict[str, Any] = {"policy": _one_of(borrow.get("policy", "Never"), _BORROW_WITHIN_COHORT,
                                                   f"{where}.preemption.borrowWithinCohort.policy")}
        if "maxPriorityThreshold" in borrow:
            threshold = borrow["maxPriorityThreshold"]
            if isinstance(threshold, bool) or not isinstance(threshold, int):
                raise ImportError_(f"{where}.preemption.borrowWithinCohort.maxPriorityThreshold: must be an "
                                   f"integer priority, got {threshold!r}")
            value["max_priority_threshold"] = threshold
        settings["borrow_within_cohort"] = value
    if settings:
        peer.setdefault("preemption", {})[path] = settings
    if "queueingStrategy" in node.spec:
        peer.setdefault("queueing_strategy", {})[path] = _one_of(
            node.spec["queueingStrategy"], _QUEUEING_STRATEGIES, f"{where}.queueingStrategy")


def _one_of(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if value not in allowed:
        raise ImportError_(f"{where}: must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _local_queues(local_queues: dict[str, tuple[str, Mapping]], by_name: dict[str, _Node],
                  imported: ImportedConfig) -> None:
    """``namespace/name`` -> the scenario path of the ClusterQueue it submits to."""
    for key, (where, obj) in local_queues.items():
        target = _spec(obj, where).get("clusterQueue")
        if not isinstance(target, str) or target not in by_name:
            imported.warn(f"LocalQueue/{key}.spec.clusterQueue",
                          f"names no ClusterQueue of the files ({target!r}); its workloads cannot be mapped")
            continue
        imported.queue_paths[key] = imported.queue_paths[by_name[target].base]


def _preemption_section(queues: list[_Node], peer: dict[str, Any], imported: ImportedConfig) -> None:
    """The scenario's ``preemption:``: on (immediately, as Kueue preempts at admission) when
    any ClusterQueue may reclaim or preempt; ``within_queue`` when any preempts within
    itself. One setting for all queues: a warning for each queue that preempts less in
    Kueue (``peers.kueue`` keeps each)."""
    settings = peer.get("preemption", {})
    per_queue = [settings.get(imported.queue_paths[q.base], {}) for q in queues]
    reclaims = [s.get("reclaim_within_cohort", "Never") != "Never"
                or s.get("borrow_within_cohort", {}).get("policy", "Never") != "Never" for s in per_queue]
    within = [s.get("within_cluster_queue", "Never") != "Never" for s in per_queue]
    if not any(reclaims) and not any(within):
        return
    imported.preemption = {"after": 0}
    if any(within):
        imported.preemption["within_queue"] = True
    for q, reclaim, own_within in zip(queues, reclaims, within):
        if (reclaim, own_within) != (any(reclaims), any(within)):
            imported.warn(f"{q.base}.spec.preemption",
                          "preempts less than other ClusterQueues, but the scenario's preemption section applies to "
                          "every queue (peers.kueue.preemption keeps each queue's setting for the kueue baseline)")
