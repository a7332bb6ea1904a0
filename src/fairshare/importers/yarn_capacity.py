"""Hadoop YARN CapacityScheduler configuration (capacity-scheduler.xml) -> scenario queues.

A Hadoop configuration file: ``<property><name>yarn.scheduler.capacity.<queue-path>.<key>
</name><value>..</value></property>`` (hadoop-yarn-site CapacityScheduler.md, "Setting up
queues", "Queue Properties"). The mapping (docs/whatif.md, "Importing your queue
configuration"):

- ``<queue-path>.queues`` (from ``root``) -> the queue tree (``root.a.b`` becomes ``a.b``);
- ``<queue-path>.capacity``, in each of the docs' three modes (the siblings of one parent
  use one mode): a percentage of the parent (``12.5``), a weight (``2.0w``: its part of
  the sum of the siblings' weights), or absolute resources (``[memory=10240,vcores=12]``)
  -> ``guarantee``, the product of the capacities down the path times the cluster (or the
  absolute amounts), and ``weight``, the queue's capacity share among its siblings (the
  percentage, the weight, or an absolute guarantee's dominant share of its parent's);
- ``<queue-path>.maximum-capacity`` (a percentage of the parent's maximum, ``-1`` or
  absent 100; or absolute) -> ``limit``, the product down the path (left out at 100%);
- ``<queue-path>.ordering-policy``: ``fifo`` (YARN's default for a leaf) -> ``order:
  fifo``, ``fair`` -> ``order: fair``;
- ``<queue-path>.state``: ``RUNNING``; ``STOPPED`` is reported (imported as running);
- ``<queue-path>.user-limit-factor`` and every other setting (ACLs, AM limits, node labels,
  auto-created queues, lifetimes, ...) are reported as :class:`Unsupported` by their
  property name without the ``yarn.scheduler.capacity.`` prefix.

The baseline policy is ``capacity`` (policies/naive.py), not ``hdrf-naive``: both descend
the tree giving the next container to the child furthest below its share, without H-DRF's
rescaling, as CapacityScheduler's ``ParentQueue`` does; but CapacityScheduler, with the
DominantResourceCalculator, refuses a container once the used resources plus the request
exceed the root's capacity in dominant-share terms, so a saturated resource stops every
queue. Bhattacharya et al. (SoCC'13, Sec. 5.2) measured exactly that as "C.S-Current", and
``capacity`` is that behaviour; ``hdrf-naive`` is the paper's Pareto-efficient variant,
which CapacityScheduler does not run. (Every YARN container asks for memory and vcores, so
the two differ only once some resource is full.)

Units, as every importer and trace converter writes them: ``vcores`` is ``cpu`` in cores;
the ``memory`` of an absolute resource (MB) is ``memory`` in GiB. YARN's MB are
mebibytes, so 1 GiB = 1024 MB and ``[memory=10240,vcores=12]`` is 10 GiB and 12 cores, as
the SLS converter counts a container (traces/sls.py). Give the cluster's memory in GiB too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fairshare.importers.base import ClusterSize, ImportedConfig, ImportError_
from fairshare.importers.yarn_common import in_scenario_units, number, one_file, parse_xml, resource_name, tidy

NAME = "yarn-capacity"
SUMMARY = "Hadoop YARN CapacityScheduler configuration (capacity-scheduler.xml)"
POLICY = "capacity"

PREFIX = "yarn.scheduler.capacity."
#: the per-queue keys this importer reads (the others are reported)
QUEUE_KEYS = ("queues", "capacity", "maximum-capacity", "user-limit-factor", "ordering-policy", "state")
#: a capacity of 0 as the smallest positive weight (fairshare weights are positive)
ZERO_WEIGHT = 1e-6
#: how far the percentages of one parent's children may sum from 100 before it is noted
PERCENT_SLACK = 1e-6
LEAF_ORDERS = {"fifo": "fifo", "fair": "fair"}
PARENT_ORDERS = ("utilization",)

#: settings fairshare cannot express, and what each one does in YARN
UNSUPPORTED = {
    "user-limit-factor": "the most one user may take, as a multiple of the queue's capacity: fairshare has no users",
    "minimum-user-limit-percent": "the least one user is given: fairshare has no users",
    "maximum-applications": "a cap on apps: fairshare has no admission limit",
    "maximum-am-resource-percent": "the share for application masters: fairshare has no AM containers",
    "resource-calculator": "DefaultResourceCalculator compares memory only; the baseline compares dominant "
                           "shares, as the DominantResourceCalculator does",
    "node-locality-delay": "delay scheduling for locality: fairshare has no data locality",
    "rack-locality-additional-delay": "delay scheduling for locality: fairshare has no data locality",
    "queue-mappings": "placement rules: a scenario's jobs name their queue",
}


def read(paths: list[str], cluster: ClusterSize) -> ImportedConfig:
    path = one_file(paths, NAME)
    return _Reader(path, cluster, _properties(path)).read()


def _properties(path: Path) -> dict[str, str]:
    """name -> value of a Hadoop configuration file (a later property overrides an earlier)."""
    props: dict[str, str] = {}
    for i, prop in enumerate(parse_xml(path, "configuration").iter("property")):
        name = prop.find("name")
        if name is None or not (name.text or "").strip():
            raise ImportError_(f"{path}: property[{i}]: has no <name>")
        value = prop.find("value")
        props[name.text.strip()] = ((value.text if value is not None else None) or "").strip()
    return props


class _Reader:
    def __init__(self, path: Path, cluster: ClusterSize, props: dict[str, str]):
        self.path = path
        self.cluster = cluster
        self.props = props
        self.out = ImportedConfig(kind=NAME, queues=[], policy=POLICY)
        self.children: dict[str, list[str]] = {}  # queue path -> its children's names
        self.resources: list[str] = []

    def error(self, where: str, reason: str) -> ImportError_:
        return ImportError_(f"{self.path}: {where}: {reason}")

    def get(self, queue: str, key: str) -> str | None:
        value = self.props.get(f"{PREFIX}{queue}.{key}")
        return value if value else None

    def read(self) -> ImportedConfig:
        self.tree("root")
        if not self.children["root"]:
            raise self.error("root.queues", f"no queue: {PREFIX}root.queues lists the top-level queues "
                                            "(e.g. default)")
        self.report_others()
        total = dict(self.cluster.total)
        self.out.queues = self.siblings("root", "", total, total)
        self.out.resources = list(self.resources)
        return self.out

    # -- the tree ----------------------------------------------------------------------------

    def tree(self, queue: str) -> None:
        names = [n.strip() for n in (self.get(queue, "queues") or "").split(",") if n.strip()]
        if len(set(names)) != len(names):
            raise self.error(f"{queue}.queues", f"a queue is listed twice: {self.get(queue, 'queues')!r}")
        self.children[queue] = names
        for name in names:
            self.tree(f"{queue}.{name}")

    def report_others(self) -> None:
        """Every property this importer does not read, reported by its name without the
        prefix (a queue's own key, a global setting, or a queue that is not in the tree)."""
        known = sorted(self.children, key=len, reverse=True)
        for name, value in self.props.items():
            if not name.startswith(PREFIX):
                self.out.warn(name, "not a CapacityScheduler setting: ignored")
                continue
            key = name[len(PREFIX):]
            queue = next((q for q in known if key.startswith(q + ".")), None)
            if queue is None:
                if value and not (key == "resource-calculator" and value.endswith("DominantResourceCalculator")):
                    self.out.warn(key, UNSUPPORTED.get(key, "a CapacityScheduler setting fairshare cannot "
                                                            "express: ignored"))
                continue
            sub = key[len(queue) + 1:]
            if sub in QUEUE_KEYS:
                if sub == "user-limit-factor" and value != "-1":
                    self.out.warn(key, UNSUPPORTED[sub])
                elif queue == "root" and sub in ("capacity", "maximum-capacity") and value not in ("", "-1") \
                        and number(value, f"{self.path}: {key}") != 100:
                    self.out.warn(key, "the root always has the whole cluster: ignored")
                continue
            if sub.partition(".")[2] in QUEUE_KEYS:
                self.out.warn(key, f"ignored: a setting fairshare cannot express, or a queue that "
                                   f"{PREFIX}{queue}.queues does not list")
                continue
            reason = "an ACL: fairshare's access control is serve's auth section" if sub.startswith("acl_") else \
                "a queue setting fairshare cannot express: ignored"
            self.out.warn(key, UNSUPPORTED.get(sub, reason))

    def siblings(self, parent: str, parent_path: str, parent_guarantee: dict[str, float],
                 parent_limit: dict[str, float]) -> list[dict[str, Any]]:
        names = self.children[parent]
        if not names:
            return []
        capacities = {n: self.get(f"{parent}.{n}", "capacity") for n in names}
        modes = {n: _mode(v) for n, v in capacities.items()}
        if len(set(modes.values())) > 1:
            listed = ", ".join(f"{n}={capacities[n]}" for n in names)
            raise self.error(f"{parent}.*.capacity", f"the children of one parent use one mode (percentages, "
                                                     f"weights Nw, or absolute [..]), got {listed}")
        mode = modes[names[0]]
        shares = {n: self.share(f"{parent}.{n}", capacities[n], mode) for n in names}
        summed = sum(shares.values())
        if mode == "percent" and summed > 100 + PERCENT_SLACK:
            # (YARN refuses it too: the guarantees of the children would exceed the parent's)
            raise self.error(f"{parent}.*.capacity", f"the capacities of {parent}'s children add up to {summed:g}%, "
                                                     "more than 100%")
        if mode == "percent" and summed < 100 - PERCENT_SLACK:
            self.out.notes.append(f"{parent}: its children's capacities add up to {summed:g}%, less than 100%")
        out = []
        for n in names:
            where = f"{parent}.{n}"
            path = f"{parent_path}{n}"
            self.out.queue_paths[where] = path
            if mode == "absolute":
                guarantee = self.absolute(capacities[n], f"{where}.capacity", default=0.0)
                weight = 100 * max((guarantee.get(r, 0.0) / parent_guarantee[r] for r in parent_guarantee
                                    if parent_guarantee[r] > 0), default=0.0)
            else:
                fraction = shares[n] / (100 if mode == "percent" else (sum(shares.values()) or 1))
                guarantee = {r: a * fraction for r, a in parent_guarantee.items()}
                weight = shares[n]
            limit = self.maximum(where, parent_limit)
            entry: dict[str, Any] = {"name": n, "weight": weight or ZERO_WEIGHT}
            if weight == 0:
                self.out.warn(f"{where}.capacity", f"capacity 0 (it runs only on what the others leave): "
                                                   f"imported with weight {ZERO_WEIGHT:g}")
            if any(a > 0 for a in guarantee.values()):
                entry["guarantee"] = tidy(guarantee)
            if any(limit.get(r, a) < a * (1 - 1e-12) for r, a in self.cluster.total.items()):
                entry["limit"] = tidy(limit)
            self.state(where)
            if self.children[where]:
                entry["children"] = self.siblings(where, f"{path}.", guarantee, limit)
                order = self.get(where, "ordering-policy")
                if order is not None and order.lower() not in PARENT_ORDERS:
                    self.out.warn(f"{where}.ordering-policy", f"{order!r} among child queues: fairshare orders "
                                                               "them by their shares (YARN's utilization)")
            else:
                entry["order"] = self.leaf_order(where)
            out.append(entry)
        return out

    # -- values ------------------------------------------------------------------------------

    def share(self, queue: str, value: str | None, mode: str) -> float:
        """A percentage or weight (absolute guarantees are read by :meth:`absolute`)."""
        if mode == "absolute":
            return 0.0
        if value is None:
            return 0.0  # (CapacityScheduler's default capacity of a queue)
        at = f"{self.path}: {queue}.capacity"
        return number(value[:-1] if mode == "weight" else value, at)

    def maximum(self, queue: str, parent_limit: dict[str, float]) -> dict[str, float]:
        value = self.get(queue, "maximum-capacity")
        if value is None or value.strip() == "-1":
            return dict(parent_limit)
        if value.startswith("["):
            given = self.absolute(value, f"{queue}.maximum-capacity", default=None)
            return {r: min(given.get(r, a), a) for r, a in parent_limit.items()}
        percent = number(value, f"{self.path}: {queue}.maximum-capacity")
        if percent > 100:
            raise self.error(f"{queue}.maximum-capacity", f"a percentage of the parent, at most 100, got {value!r}")
        return {r: a * percent / 100 for r, a in parent_limit.items()}

    def absolute(self, value: str, where: str, *, default: float | None) -> dict[str, float]:
        """``[memory=10240,vcores=12]`` (10 GiB, 12 cores); a resource it does not name is
        ``default`` (None: left out, so the parent's bound applies)."""
        text = value.strip()
        if not (text.startswith("[") and text.endswith("]")):
            raise self.error(where, f"an absolute resource is written [memory=..,vcores=..], got {value!r}")
        amounts: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text[1:-1].split(","))):
            name, sep, amount = part.partition("=")
            if not sep:
                raise self.error(where, f"{part!r} is not NAME=AMOUNT")
            res = resource_name(name)
            if res not in self.cluster.total:
                raise self.error(f"{where}.{name.strip()}", f"the cluster has no {res} (resources: "
                                                            f"{', '.join(self.cluster.total)})")
            amounts[res] = in_scenario_units(res, number(amount, f"{self.path}: {where}.{name.strip()}"))
            if res not in self.resources:
                self.resources.append(res)
        if default is not None:
            for res in self.cluster.total:
                amounts.setdefault(res, default)
        return amounts

    def state(self, queue: str) -> None:
        value = self.get(queue, "state")
        if value is None or value.upper() == "RUNNING":
            return
        if value.upper() != "STOPPED":
            raise self.error(f"{queue}.state", f"RUNNING or STOPPED, got {value!r}")
        self.out.warn(f"{queue}.state", "STOPPED (takes no new apps): imported as a running queue")

    def leaf_order(self, queue: str) -> str:
        value = self.get(queue, "ordering-policy")
        if value is None:
            return "fifo"  # (CapacityScheduler's default ordering policy of a leaf queue)
        order = LEAF_ORDERS.get(value.lower())
        if order is None:
            self.out.warn(f"{queue}.ordering-policy", f"{value!r}: imported as fifo")
            return "fifo"
        return order


def _mode(value: str | None) -> str:
    if value is not None and value.strip().startswith("["):
        return "absolute"
    if value is not None and value.strip().lower().endswith("w"):
        return "weight"
    return "percent"
