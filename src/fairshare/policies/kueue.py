"""``kueue``: Kueue's admission with cohorts, borrowing, lending and fair sharing, as a
baseline.

The peer (kubernetes-sigs/kueue): a ClusterQueue admits a workload when, for every
resource, its request fits what is *available* to it: its own unused guaranteed quota
plus what its cohort can give, capped by its ``borrowingLimit``
(``pkg/cache/resource_node.go``: ``available``, ``guaranteedQuota``,
``accumulateFromChild``). A node's *subtree quota* is its own nominal quota plus what its
children lend (their subtree quota minus the part ``lendingLimit`` keeps back, the
*guaranteed quota*); a cohort's usage is what its children use past their guaranteed
quota. With fair sharing (``fairSharing.enable``; docs
``site/content/en/docs/concepts/fair_sharing.md``) the scheduler admits, at every cohort,
the candidate of the child with the lowest *dominant resource share* after admission
(``pkg/cache/fair_sharing.go``, ``dominantResourceShare``):

    DRS(node, request) = max_r (usage_r + request_r - subtreeQuota_r)^+ / lendable_r(parent)
                         / fairSharing.weight

over the resources with a positive lendable amount in the parent (0 when nothing is
borrowed; a weight of 0 is infinite), hierarchical cohorts included (the tournament
descends the cohort tree). Within a ClusterQueue, workloads go by priority then creation
time (``BestEffortFIFO``: the first that fits; ``StrictFIFO``: only the head).
Without fair sharing (``fair_sharing: false``), the heads of all ClusterQueues go by
"not borrowing first", then creation time (``pkg/scheduler/scheduler.go``,
``entryOrdering``).

Mapping (docs/policies.md, "Peer baselines"): queue ``guarantee`` = ``nominalQuota``,
``limit`` = nominal + ``borrowingLimit`` (the engine enforces it too), ``weight`` =
``fairSharing.weight``; leaves are ClusterQueues, inner queues cohorts, the root the
top cohort. Capacity of the cluster that no ClusterQueue's nominal quota claims is the
root cohort's own quota (a Cohort's own ``resourceGroups``), so a scenario without
guarantees still admits up to the cluster. A task is the unit of admission (a workload
is admitted whole in Kueue; a gang job is one unit here too). Settings
(``peers.kueue``, the contract's keys; left out: Kueue's default): ``cluster_queues``
(checked: leaves), ``lending_limit`` and ``borrowing_limit`` (per queue path,
``{resource: amount}``; absent: none), ``queueing_strategy`` (``BestEffortFIFO``),
``fair_sharing`` (true), ``preemption`` (checked; Kueue's names).

Preemption: Kueue's strategies are approximated by the engine's fair-share preemption
(``preemption: {after:}``), whose fair shares are this policy's static allocation, the
H-DRF bounded fill (each queue's nominal quota first when it demands it, then weighted
dominant shares up to its limit): a ClusterQueue below its nominal quota takes back from
one that borrows, as ``reclaimWithinCohort: Any`` does, and the engine's
``within_queue`` is ``withinClusterQueue: LowerPriority``. Not reproduced: the per
ClusterQueue choice of strategy (``Never`` cannot be set per queue),
``borrowWithinCohort``, preemption by DRS (``fairSharing.preemptionStrategies``),
workload priorities across ClusterQueues, resource flavors (node constraints carry
them), admission checks and ``waitForPodsReady``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.resources import Vector
from fairshare.model.scenario import Scenario
from fairshare.policies.machinery.peers import PeerBaseline, PeerSettings, RankedTreeSorter, with_fifo
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.tree import hierarchical_tree
from fairshare.policies.online import OnlineJob, Runnable

KEYS = ("cluster_queues", "lending_limit", "borrowing_limit", "preemption", "queueing_strategy", "fair_sharing")
STRATEGIES = ("StrictFIFO", "BestEffortFIFO")
PREEMPTION = {"within_cluster_queue": ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
              "reclaim_within_cohort": ("Never", "LowerPriority", "Any")}
BORROW_POLICIES = ("Never", "LowerPriority")


@dataclass(frozen=True)
class KueueSettings:
    """``peers.kueue`` as read (module docstring); limits as vectors per queue path."""

    lending_limit: dict[str, tuple[float, ...]] = field(default_factory=dict)
    borrowing_limit: dict[str, tuple[float, ...]] = field(default_factory=dict)
    strict_fifo: frozenset[str] = frozenset()
    fair_sharing: bool = True


def read_settings(scenario: Scenario) -> KueueSettings:
    """``peers.kueue``, checked: every problem raised at once with its path."""
    s = PeerSettings("kueue", scenario.peers.get("kueue"), KEYS)
    queues, resources = scenario.queues, scenario.resources
    listed = s.raw.get("cluster_queues", [])
    if not isinstance(listed, list):
        s.error("cluster_queues", f"must be a list of queue paths, got {listed!r}")
        listed = []
    for i, path in enumerate(listed):
        if not isinstance(path, str) or path not in queues or queues[path].children:
            s.error(f"cluster_queues[{i}]", f"{path!r} is not a leaf queue of the scenario (a ClusterQueue)")

    def vector(where, value):
        amounts = s.amounts(where, value, resources)
        return None if amounts is None else tuple(amounts.get(r, math.inf) for r in resources)

    lending = s.queue_map("lending_limit", queues, vector)
    borrowing = s.queue_map("borrowing_limit", queues, vector)

    def strategy(where, value):
        if value not in STRATEGIES:
            s.error(where, f"must be one of {', '.join(STRATEGIES)}, got {value!r}")
            return None
        return value

    strict = frozenset(q for q, v in s.queue_map("queueing_strategy", queues, strategy).items() if v == "StrictFIFO")

    def preemption(where, value):
        if not isinstance(value, dict):
            s.error(where, f"must be a mapping of Kueue's preemption settings, got {value!r}")
            return None
        for key, got in value.items():
            if key in PREEMPTION:
                if got not in PREEMPTION[key]:
                    s.error(f"{where}.{key}", f"must be one of {', '.join(PREEMPTION[key])}, got {got!r}")
            elif key == "borrow_within_cohort":
                policy = got.get("policy", "Never") if isinstance(got, dict) else None
                if policy not in BORROW_POLICIES:
                    s.error(f"{where}.{key}.policy", f"must be one of {', '.join(BORROW_POLICIES)}, got {policy!r}")
            else:
                s.error(f"{where}.{key}", f"unknown; known: {', '.join([*PREEMPTION, 'borrow_within_cohort'])}")
        return value

    s.queue_map("preemption", queues, preemption)
    fair = s.flag("fair_sharing", True)
    s.done()
    return KueueSettings(lending, borrowing, strict, fair)


# --- quota tree (pkg/cache/resource_node.go) ----------------------------------------------------

class QuotaTree:
    """One decision's quotas and usages over the queue tree (module docstring): per node
    its nominal quota, guaranteed quota, subtree quota and usage, per resource."""

    def __init__(self, queues: QueueTree, resources: tuple[str, ...], capacity: Vector, settings: KueueSettings):
        self.queues = queues
        self.settings = settings
        self.m = m = len(capacity)
        leaves = [node.path for node in queues if not node.children and node.path != ROOT]
        self.nominal = {node.path: [0.0] * m for node in queues}
        for path in leaves:
            self.nominal[path] = list(queues[path].guarantee_vector(resources))
        claimed = [sum(self.nominal[p][r] for p in leaves) for r in range(m)]
        # the cluster's unclaimed capacity is the root cohort's own quota
        self.nominal[ROOT] = [max(0.0, capacity[r] - claimed[r]) for r in range(m)]
        self.subtree: dict[str, list[float]] = {}
        self.guaranteed: dict[str, list[float]] = {}
        self._quotas(ROOT)

    def _quotas(self, path: str) -> None:
        sub = list(self.nominal[path])
        for child in self.queues[path].children:
            self._quotas(child)
            for r in range(self.m):
                sub[r] += self.subtree[child][r] - self.guaranteed[child][r]
        self.subtree[path] = sub
        lend = self.settings.lending_limit.get(path)
        self.guaranteed[path] = [max(0.0, sub[r] - lend[r]) if lend else 0.0 for r in range(self.m)]

    def usages(self, own: dict[str, list[float]]) -> dict[str, list[float]]:
        """Each node's usage against its subtree quota: its own jobs' (``own``) plus its
        children's past their guaranteed quota (``accumulateFromChild``)."""
        out: dict[str, list[float]] = {}

        def visit(path: str) -> list[float]:
            total = list(own.get(path, [0.0] * self.m))
            for child in self.queues[path].children:
                used = visit(child)
                for r in range(self.m):
                    total[r] += max(0.0, used[r] - self.guaranteed[child][r])
            out[path] = total
            return total

        visit(ROOT)
        return out

    def available(self, path: str, usage: dict[str, list[float]], r: int) -> float:
        """Kueue's ``available``: local unused guaranteed quota plus the parent's
        available, the latter capped by the borrowing limit."""
        parent = self.queues[path].parent
        if parent is None:
            return self.subtree[path][r] - usage[path][r]
        from_parent = self.available(parent, usage, r)
        borrow = self.settings.borrowing_limit.get(path)
        guaranteed = self.guaranteed[path][r]
        if borrow is not None and not math.isinf(borrow[r]):
            stored = self.subtree[path][r] - guaranteed
            used_in_parent = max(0.0, usage[path][r] - guaranteed)
            from_parent = min(stored - used_in_parent + borrow[r], from_parent)
        return max(0.0, guaranteed - usage[path][r]) + from_parent


def dominant_resource_share(usage: Vector, request: Vector, subtree_quota: Vector, lendable: Vector,
                            weight: float) -> float:
    """Kueue's ``dominantResourceShare`` (module docstring), as a fraction: the largest
    ``borrowed_r / lendable_r`` over the resources borrowed with lendable > 0, divided by
    the weight; 0 when nothing is borrowed, ``inf`` for a weight of 0. (Kueue keeps it in
    thousandths, integer-divided: ``(7-5)*1000/10 = 200`` is 0.2 here.)"""
    best = None
    for r in range(len(usage)):
        borrowed = usage[r] + request[r] - subtree_quota[r]
        if borrowed > 0 and lendable[r] > 0:
            ratio = borrowed / lendable[r]
            best = ratio if best is None or ratio > best else best
    if best is None:
        return 0.0
    if weight <= 0:
        return math.inf
    return best / weight


class KueueSorter(RankedTreeSorter):
    """Kueue's admission per decision: each ClusterQueue's candidate (its first job by
    creation that fits its quota and can run; ``StrictFIFO``: its head only), then the
    cohort tournament by DRS after admission (or, without fair sharing, "not borrowing"
    then creation time)."""

    def __init__(self, resources: tuple[str, ...], queues: QueueTree, capacity: Vector, settings: KueueSettings):
        super().__init__(len(resources), queues, capacity)
        self.resources = tuple(resources)
        self.settings = settings
        self.quota = QuotaTree(queues, self.resources, self.capacity, settings)
        self._drs: dict[str, float] = {}

    def set_capacity(self, capacity):
        super().set_capacity(capacity)
        self.quota = QuotaTree(self.queues, self.resources, self.capacity, self.settings)

    def own_usage(self) -> dict[str, list[float]]:
        """Each queue's own jobs' usage (its subtree's less its children's)."""
        usage, own = self.usage, {}
        for node in self.queues:
            row = list(usage[node.path])
            for child in node.children:
                for r in range(self.m):
                    row[r] -= usage[child][r]
            own[node.path] = [max(0.0, x) for x in row]
        return own

    def fits_quota(self, job: OnlineJob, usage: dict[str, list[float]]) -> bool:
        return all(job.demand[r] <= self.quota.available(job.queue, usage, r) + 1e-9
                   for r in range(self.m) if job.demand[r] > 0)

    def borrows(self, job: OnlineJob, usage: dict[str, list[float]]) -> bool:
        nominal = self.quota.subtree[job.queue]
        return any(usage[job.queue][r] + job.demand[r] > nominal[r] + 1e-9 for r in range(self.m) if job.demand[r] > 0)

    def drs(self, path: str, request: Vector, usage: dict[str, list[float]]) -> float:
        parent = self.queues[path].parent
        if parent is None:
            return 0.0
        return dominant_resource_share(usage[path], request, self.quota.subtree[path], self.quota.subtree[parent],
                                       self.queues[path].weight)

    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        usage = self.quota.usages(self.own_usage())
        heads: dict[str, OnlineJob] = {}  # queue -> its candidate
        for queue, waiting in self.waiting.items():
            for job in waiting.values():  # (creation order)
                if self.fits_quota(job, usage) and runnable(job.name):
                    heads[queue] = job
                    break
                if queue in self.settings.strict_fifo:
                    break  # the head blocks its ClusterQueue
        if not heads:
            return None
        if not self.settings.fair_sharing:
            best = min(heads.values(), key=lambda job: (self.borrows(job, usage), job.order))
            return best.name
        self._drs = {}
        # the tournament: every cohort's winner, bottom-up; a node's key is its DRS with
        # the candidate's request, then the candidate's creation, then its path

        def visit(path: str) -> OnlineJob | None:
            entries = []
            for child in self.queues[path].children:
                job = visit(child)
                if job is not None:
                    entries.append((self.drs(child, job.demand, usage), job.order, child, job))
            if path in heads:  # jobs waiting in an inner queue itself compete as its own
                job = heads[path]
                entries.append((0.0 if path == ROOT else self.drs(path, job.demand, usage), job.order, path, job))
            if not entries:
                return None
            entries.sort(key=lambda e: e[:3])
            for drs, _order, child, _job in entries:
                self._drs[child] = drs
            return entries[0][3]

        best = visit(ROOT)
        return None if best is None else best.name

    def shares(self) -> dict[str, float]:
        return dict(self._drs)


class Kueue(PeerBaseline, FillingPolicy):
    name = "kueue"
    hierarchical = True
    # share_is_usage_over_capacity stays False: usage is compared with absolute amounts (min
    # shares, quotas), so a constrained job's is reported as it is, not normalised
    citation = ("Kueue v1beta1 (kubernetes-sigs/kueue): pkg/cache resource_node.go (quota, borrowing, lending), "
                "fair_sharing.go (DRS); docs concepts/fair_sharing.md (docs/policies.md, Peer baselines)")
    conformance_exemptions = {
        "job weights": "Kueue orders the workloads of a ClusterQueue by priority, then creation time "
                       "(BestEffortFIFO / StrictFIFO, pkg/cache/queue/cluster_queue.go): a job's weight has no "
                       "meaning there",
        "allocation weights": "one ClusterQueue admits in creation order (BestEffortFIFO): two jobs of one "
                              "queue are not shared by weight, the first takes what it can",
        "static limit": "the cohort tournament compares a ClusterQueue's DRS over all its usage, without H-DRF's "
                        "rescaling: the naive descent of H-DRF Sec. 3.3 (Fig. 4: n1,1 takes every CPU, 1.0 "
                        "against 0.5, as a ClusterQueue holding the GPUs has DRS 1.0)"}

    settings_type = KueueSettings
    read_settings = staticmethod(read_settings)

    def build_tree(self, scenario, respect_counts):
        """The static form (and the preemption's fair shares): the bounded fill with every
        queue that holds jobs in submission order (a ClusterQueue's FIFO) and weighted
        dominant shares between queues, which is the DRS order when no queue has a
        nominal quota (every amount is then borrowed from the root's quota, the
        cluster); with quotas, nominal first, then weighted dominant shares of the
        cluster rather than of the lendable quota (module docstring)."""
        read_settings(scenario)  # (``allocate`` is given the scenario, not ``configured``)
        holding = {job.queue for job in scenario.jobs}
        return hierarchical_tree(with_fifo(scenario, holding), respect_counts)[0]

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        return KueueSorter(tuple(resources), queues, capacity, self.settings)
