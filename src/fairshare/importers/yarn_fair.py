"""Hadoop YARN FairScheduler allocation file (fair-scheduler.xml) -> scenario queues.

The format is Hadoop's "Allocation file format" (hadoop-yarn-site FairScheduler.md):
nested ``<queue>`` elements (or ``<pool>``, the old name), each with ``weight``,
``minResources``, ``maxResources``, ``schedulingPolicy`` and the preemption settings, and
top-level defaults. The mapping (docs/whatif.md, "Importing your queue configuration"):

- the queue tree under ``root`` -> ``queues:`` (``root.a.b`` becomes ``a.b``); a top-level
  ``<queue name="root">`` is the root itself;
- ``weight`` -> ``weight``; ``minResources`` -> ``guarantee``; ``maxResources`` (else
  ``queueMaxResourcesDefault``, for every queue but the root) -> ``limit``, in every
  format the docs list: ``X mb, Y vcores``, ``X% cpu, Y% memory``, ``X%``,
  ``vcores=X, memory-mb=Y``, ``vcores=X%, memory-mb=Y%`` and custom resources; a
  percentage is of the cluster (FairSchedulerConfiguration); a resource
  ``maxResources`` does not name is unlimited, one ``minResources`` does not name is 0;
- ``schedulingPolicy`` / ``defaultQueueSchedulingPolicy`` -> ``peers.yarn-fair``
  (``default_policy``: the root's policy; ``queue_policies``: each queue whose policy
  differs from it); a leaf with ``fifo`` also gets ``order: fifo`` (its apps run in
  submit order). A queue's policy is not inherited from its parent (YARN applies
  ``defaultQueueSchedulingPolicy`` to every queue without its own);
- ``fairSharePreemptionTimeout`` (else ``defaultFairSharePreemptionTimeout``; inherited
  from the parent) -> ``preemption.after``, the root's (or the smallest a queue sets);
  ``fairSharePreemptionThreshold`` and ``minSharePreemptionTimeout`` (inherited the
  same way) -> ``peers.yarn-fair.preemption_threshold`` / ``min_share_preemption_timeout``;
- everything else (``maxRunningApps``, ``maxAMShare``, ACLs, ``reservation``,
  ``maxChildResources``, ``maxContainerAllocation``, ``allowPreemptionFrom``, user
  elements, ``queuePlacementPolicy`` ...) is reported as :class:`Unsupported` by path.

Units, as every importer and trace converter writes them: ``vcores`` is ``cpu`` in cores;
``memory-mb`` (``X mb``) is ``memory`` in GiB. YARN's MB are mebibytes, so 1 GiB = 1024 MB
and ``8192 mb`` is 8 GiB, as the SLS converter counts a container (traces/sls.py). Give the
cluster's memory in GiB too.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fairshare.importers.base import ClusterSize, ImportedConfig, ImportError_
from fairshare.importers.yarn_common import (in_scenario_units, number, one_file, parse_xml, percent_of,
                                             resource_name, tidy)

NAME = "yarn-fair"
SUMMARY = "Hadoop YARN FairScheduler allocation file (fair-scheduler.xml)"
POLICY = "yarn-fair"

POLICIES = ("fair", "drf", "fifo")
#: YARN's fairSharePreemptionThreshold when none is set (FairScheduler.md)
DEFAULT_THRESHOLD = 0.5
#: a weight of 0 ("resources after all non-zero weight queues", FairScheduler.md) as the
#: smallest positive weight fairshare takes without the shares losing precision
ZERO_WEIGHT = 1e-6
QUEUE_TAGS = ("queue", "pool")

#: settings fairshare cannot express, and what each one does in YARN
UNSUPPORTED = {
    "maxRunningApps": "a cap on running apps: fairshare has no admission limit per queue",
    "maxAMShare": "the share of the queue for application masters: fairshare has no AM containers",
    "maxContainerAllocation": "the largest single container: fairshare does not cap a task's size",
    "maxChildResources": "a limit for queues created at submission: fairshare creates no queues",
    "aclSubmitApps": "an ACL: fairshare's access control is serve's auth section",
    "aclAdministerApps": "an ACL: fairshare's access control is serve's auth section",
    "aclAdministerReservations": "an ACL of the ReservationSystem, which fairshare does not have",
    "aclListReservations": "an ACL of the ReservationSystem, which fairshare does not have",
    "aclSubmitReservations": "an ACL of the ReservationSystem, which fairshare does not have",
    "allowPreemptionFrom": "fairshare may preempt from every queue",
    "reservation": "the ReservationSystem, which fairshare does not have",
    "user": "a per-user app limit: fairshare has no users",
    "userMaxAppsDefault": "a per-user app limit: fairshare has no users",
    "queueMaxAppsDefault": "a cap on running apps: fairshare has no admission limit per queue",
    "queueMaxAMShareDefault": "the share of a queue for application masters: fairshare has no AM containers",
    "queuePlacementPolicy": "placement rules: a scenario's jobs name their queue",
    "reservation-agent": "the ReservationSystem, which fairshare does not have",
    "reservation-policy": "the ReservationSystem, which fairshare does not have",
    "reservation-planner": "the ReservationSystem, which fairshare does not have",
}


@dataclass(frozen=True)
class _Preemption:
    """The preemption settings a queue inherits from its parent (FairScheduler.md: "If not
    set, the queue will inherit the value from its parent queue"); None: never."""

    fair_share_timeout_s: float | None = None
    min_share_timeout_s: float | None = None
    threshold: float = DEFAULT_THRESHOLD


def read(paths: list[str], cluster: ClusterSize) -> ImportedConfig:
    path = one_file(paths, NAME)
    return _Reader(path, cluster).read(parse_xml(path, "allocations"))


class _Reader:
    def __init__(self, path: Path, cluster: ClusterSize):
        self.path = path
        self.cluster = cluster
        self.out = ImportedConfig(kind=NAME, queues=[], policy=POLICY)
        self.default_policy = "fair"
        self.max_default: dict[str, float] | None = None
        self.policies: dict[str, str] = {}  # scenario path -> its effective policy
        #: scenario path ("" the root) -> where its policy was set, and its parent's path
        self.policy_source: dict[str, str] = {}
        self.parent_of: dict[str, str] = {}
        self.timeouts: dict[str, float] = {}  # YARN path -> the fair-share timeout a queue sets itself
        self.thresholds: dict[str, float] = {}
        self.min_timeouts: dict[str, float] = {}
        self.resources: list[str] = []

    def error(self, where: str, reason: str) -> ImportError_:
        return ImportError_(f"{self.path}: {where}: {reason}")

    # -- the document ------------------------------------------------------------------------

    def read(self, doc: ET.Element) -> ImportedConfig:
        top_queues: list[ET.Element] = []
        inherited = _Preemption()
        for elem in doc:
            if not isinstance(elem.tag, str):  # a comment or processing instruction
                continue
            tag = elem.tag
            if tag in QUEUE_TAGS:
                top_queues.append(elem)
            elif tag == "defaultQueueSchedulingPolicy":
                self.default_policy = self.policy(elem, tag)
                self.policy_source.setdefault("", tag)
            elif tag == "queueMaxResourcesDefault":
                self.max_default = self.amounts(elem.text, tag, unnamed_is_zero=False)
            elif tag == "defaultFairSharePreemptionTimeout":
                inherited = replace(inherited, fair_share_timeout_s=self.seconds(elem, tag))
            elif tag == "defaultMinSharePreemptionTimeout":
                inherited = replace(inherited, min_share_timeout_s=self.seconds(elem, tag))
            elif tag == "defaultFairSharePreemptionThreshold":
                inherited = replace(inherited, threshold=self.threshold(elem, tag))
            else:
                where = f"{tag}.{elem.get('name')}" if tag == "user" and elem.get("name") else tag
                self.out.warn(where, UNSUPPORTED.get(tag, "not a FairScheduler setting fairshare knows: ignored"))
        # a top-level <queue name="root"> is the root; other top-level queues are its children
        children: list[ET.Element] = []
        root_policy = self.default_policy
        for elem in top_queues:
            if elem.get("name") == "root":
                root_policy, inherited = self.root_settings(elem, inherited)
                children += [c for c in elem if c.tag in QUEUE_TAGS]
            else:
                children.append(elem)
        self.out.queues = self.siblings(children, "root", "", inherited)
        self.check_policies(root_policy)
        self.finish(root_policy, inherited)
        return self.out

    def root_settings(self, root: ET.Element, inherited: _Preemption) -> tuple[str, _Preemption]:
        policy = self.default_policy
        for elem in root:
            if not isinstance(elem.tag, str) or elem.tag in QUEUE_TAGS:
                continue
            where = f"root.{elem.tag}"
            if elem.tag == "schedulingPolicy":
                policy = self.policy(elem, where)
                self.policy_source[""] = where
            elif elem.tag in ("fairSharePreemptionTimeout", "minSharePreemptionTimeout",
                              "fairSharePreemptionThreshold"):
                inherited = self.preemption_setting(elem, where, inherited)
            elif elem.tag == "weight":
                pass  # (the root has no siblings: its weight means nothing in YARN either)
            elif elem.tag in ("minResources", "maxResources"):
                self.out.warn(where, "the root's own bounds: fairshare's root always has the whole cluster")
            else:
                self.out.warn(where, UNSUPPORTED.get(elem.tag, "not a queue setting fairshare knows: ignored"))
        return policy, inherited

    def siblings(self, elems: list[ET.Element], parent: str, parent_path: str,
                 inherited: _Preemption) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for elem in elems:
            name = (elem.get("name") or "").strip()
            if not name:
                raise self.error(f"{parent}.<{elem.tag}>", "a queue needs a name attribute")
            if "." in name:
                raise self.error(f"{parent}.{name}", "a queue name has no dots (nest the <queue> elements instead)")
            if name in seen:
                raise self.error(f"{parent}.{name}", "declared twice under the same parent")
            seen.add(name)
            out.append(self.queue(elem, f"{parent}.{name}", f"{parent_path}{name}", inherited))
        return out

    def queue(self, elem: ET.Element, where: str, path: str, inherited: _Preemption) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": path.rpartition(".")[2]}
        self.out.queue_paths[where] = path
        policy = self.default_policy
        limit = None
        children: list[ET.Element] = []
        for child in elem:
            if not isinstance(child.tag, str):
                continue
            at = f"{where}.{child.tag}"
            if child.tag in QUEUE_TAGS:
                children.append(child)
            elif child.tag == "weight":
                weight = number(child.text, f"{self.path}: {at}")
                if weight == 0:
                    self.out.warn(at, f"weight 0 (served after every other queue): imported as {ZERO_WEIGHT:g}")
                entry["weight"] = weight or ZERO_WEIGHT
            elif child.tag == "minResources":
                entry["guarantee"] = self.amounts(child.text, at, unnamed_is_zero=True)
            elif child.tag == "maxResources":
                limit = self.amounts(child.text, at, unnamed_is_zero=False)
            elif child.tag == "schedulingPolicy":
                policy = self.policy(child, at)
                self.policy_source[path] = at
            elif child.tag in ("fairSharePreemptionTimeout", "minSharePreemptionTimeout",
                               "fairSharePreemptionThreshold"):
                inherited = self.preemption_setting(child, at, inherited)
                if child.tag == "fairSharePreemptionTimeout" and inherited.fair_share_timeout_s is not None:
                    self.timeouts[where] = inherited.fair_share_timeout_s
            else:
                self.out.warn(at, UNSUPPORTED.get(child.tag, "not a queue setting fairshare knows: ignored"))
        if limit is None:
            limit = self.max_default
        if limit:
            entry["limit"] = dict(limit)
            for res, amount in limit.items():
                if amount == 0:
                    self.out.notes.append(f"{where}: its limit on {res} is 0: it can run no task that needs {res} "
                                          "(YARN enforces every resource of maxResources)")
        self.policies[path] = policy
        self.policy_source.setdefault(path, "defaultQueueSchedulingPolicy")
        self.parent_of[path] = path.rpartition(".")[0]
        self.record_preemption(path, inherited)
        if elem.get("type") == "parent" and not children:
            self.out.warn(f"{where}[type=parent]", "a parent for queues created at submission: imported as a "
                                                   "queue without children, whose jobs share it as one queue")
        if children:
            entry["children"] = self.siblings(children, where, f"{path}.", inherited)
        elif policy == "fifo":
            entry["order"] = "fifo"
        return entry

    # -- settings ----------------------------------------------------------------------------

    def policy(self, elem: ET.Element, where: str) -> str:
        value = (elem.text or "").strip().lower()
        if value not in POLICIES:
            raise self.error(where, f"must be one of {', '.join(POLICIES)}, got {elem.text!r} "
                                    "(a custom SchedulingPolicy class has no fairshare equivalent)")
        return value

    def seconds(self, elem: ET.Element, where: str) -> float | None:
        value = number(elem.text, f"{self.path}: {where}")
        # (YARN's default Long.MAX_VALUE means never; any value that large means it too)
        return None if value >= 2 ** 62 else value

    def threshold(self, elem: ET.Element, where: str) -> float:
        value = number(elem.text, f"{self.path}: {where}")
        if value > 1:
            raise self.error(where, f"a fraction of the fair share, between 0 and 1, got {elem.text!r}")
        return value

    def preemption_setting(self, elem: ET.Element, where: str, inherited: _Preemption) -> _Preemption:
        if elem.tag == "fairSharePreemptionTimeout":
            return replace(inherited, fair_share_timeout_s=self.seconds(elem, where))
        if elem.tag == "minSharePreemptionTimeout":
            return replace(inherited, min_share_timeout_s=self.seconds(elem, where))
        return replace(inherited, threshold=self.threshold(elem, where))

    def record_preemption(self, path: str, settings: _Preemption) -> None:
        if settings.min_share_timeout_s is not None:
            self.min_timeouts[path] = settings.min_share_timeout_s
        if settings.threshold != DEFAULT_THRESHOLD:
            self.thresholds[path] = settings.threshold

    def amounts(self, text: str | None, where: str, *, unnamed_is_zero: bool) -> dict[str, float]:
        """A resource value in one of the docs' formats, as absolute amounts in the scenario's
        units (memory in GiB; a percentage is of the cluster, already in them).

        ``unnamed_is_zero``: minResources (a resource it does not name is 0) rather than
        maxResources (unlimited: left out)."""
        value = (text or "").strip().lower()
        if not value:
            raise self.error(where, "empty: give e.g. \"vcores=4, memory-mb=8192\" or \"8192 mb, 4 vcores\"")
        total = self.cluster.total
        where_full = f"{self.path}: {where}"
        if "=" in value:
            amounts = self.new_format(value, where)
        elif re.fullmatch(r"[\d.]+\s*%", value):  # "X%": that percentage of every resource
            percent = number(value.rstrip("%"), where_full)
            amounts = {res: percent_of(total, percent, res, where_full) for res in total}
        else:
            amounts = self.old_format(value, where)
        for res in amounts:
            if res not in self.resources:
                self.resources.append(res)
        return tidy(amounts)

    def new_format(self, value: str, where: str) -> dict[str, float]:
        """``vcores=X, memory-mb=Y`` or with percentages, and custom resources."""
        amounts: dict[str, float] = {}
        for part in value.split(","):
            name, sep, amount = part.partition("=")
            if not sep or not name.strip():
                raise self.error(where, f"{part.strip()!r} is not NAME=AMOUNT")
            res = resource_name(name)
            at = f"{self.path}: {where}.{name.strip()}"
            amount = amount.strip()
            if amount.endswith("%"):
                amounts[res] = percent_of(self.cluster.total, number(amount[:-1], at), res, at)
            else:
                amounts[res] = in_scenario_units(res, number(amount, at))
        return amounts

    def old_format(self, value: str, where: str) -> dict[str, float]:
        """``X mb, Y vcores`` or ``X% cpu, Y% memory`` (both resources required)."""
        found: dict[str, float] = {}
        patterns = {"memory": (r"([\d.]+)\s*mb", r"([\d.]+)\s*%\s*memory"),
                    "cpu": (r"([\d.]+)\s*vcores?", r"([\d.]+)\s*%\s*cpu")}
        for res, (absolute, percent) in patterns.items():
            got = re.search(absolute, value)
            if got:
                found[res] = in_scenario_units(res, number(got.group(1), f"{self.path}: {where}"))
                continue
            got = re.search(percent, value)
            if got:
                at = f"{self.path}: {where}"
                found[res] = percent_of(self.cluster.total, number(got.group(1), at), res, at)
                continue
            raise self.error(where, f"{value!r} names no {res}: the old format needs both, e.g. "
                                    "\"8192 mb, 4 vcores\" or \"50% memory, 50% cpu\"")
        return found

    # -- the peers and preemption sections ---------------------------------------------------

    def check_policies(self, root_policy: str) -> None:
        """FairScheduler's own refusals: ``fifo`` only for a leaf (FifoPolicy.isApplicableTo)
        and no ``drf`` queue under a ``fair`` parent (FairSharePolicy.isChildPolicyAllowed)."""
        policies = {"": root_policy, **self.policies}
        parents = set(self.parent_of.values())
        for path, policy in policies.items():
            where = self.policy_source.get(path, "defaultQueueSchedulingPolicy")
            shown = f"root.{path}" if path else "root"
            if policy == "fifo" and path in parents:
                raise self.error(where, f"fifo is for leaf queues only, and {shown} has child queues")
            parent = self.parent_of.get(path)
            if policy == "drf" and parent is not None and policies[parent] == "fair":
                raise self.error(where, f"{shown} is drf under a fair parent, which FairScheduler refuses")

    def finish(self, root_policy: str, root: _Preemption) -> None:
        peer: dict[str, Any] = {"default_policy": root_policy}
        differing = {p: pol for p, pol in self.policies.items() if pol != root_policy}
        if differing:
            peer["queue_policies"] = differing
        if self.thresholds:
            peer["preemption_threshold"] = dict(self.thresholds)
        if self.min_timeouts:
            peer["min_share_preemption_timeout"] = dict(self.min_timeouts)
        self.out.peers = {NAME: peer}
        after = root.fair_share_timeout_s
        if after is None and self.timeouts:
            after = min(self.timeouts.values())
        if after is not None:
            self.out.preemption = {"after": after}
            for where, timeout in self.timeouts.items():
                if timeout != after:
                    self.out.warn(f"{where}.fairSharePreemptionTimeout",
                                  f"{timeout:g} s differs from the scenario's one preemption.after ({after:g} s): "
                                  "the queue (and the queues that inherit it) preempt after that")
        self.out.resources = list(self.resources)
