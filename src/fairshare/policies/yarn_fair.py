"""``yarn-fair``: Hadoop YARN's FairScheduler between queues, as a baseline.

The peer (Apache Hadoop, ``hadoop-yarn-server-resourcemanager``, package
``org.apache.hadoop.yarn.server.resourcemanager.scheduler.fair``): ``FSParentQueue``
offers a container to its children sorted by its own scheduling policy's comparator and
descends into the first that takes it; ``FSLeafQueue`` sorts its applications with its
policy's comparator the same way. The policies (``fair/policies/``):

* ``fair`` (``FairSharePolicy.FairShareComparator``, YARN's default): memory only. A
  schedulable whose usage is below ``min(minShare, demand)`` is *needy*; needy ones go
  first, among them the lowest ``usage / minShare``; the others by ``usage / weight``;
  ties by start time, then name.
* ``drf`` (``DominantResourceFairnessPolicy.DominantResourceFairnessComparator``): the
  shares of the cluster ``usage_r / (capacity_r x weight)``, each schedulable's resources
  ordered by them (its dominant resource first). Needy when its usage of its dominant
  resource is below its min share of it; needy ones first, compared by their shares of
  the min share in that order; the others by their cluster shares in that order
  (lexicographically); ties by start time, then name.
* ``fifo`` (``FifoPolicy``): leaf queues only; applications by priority, then start time.

FairScheduler refuses a ``drf`` child under a ``fair`` parent and ``fifo`` on a parent
queue (``SchedulingPolicy.isChildPolicyAllowed``, ``FifoPolicy.isApplicableTo``); so do
these settings. Docs: hadoop-yarn-site ``FairScheduler.md`` (queue properties
``minResources``, ``maxResources``, ``weight``, ``schedulingPolicy``,
``defaultQueueSchedulingPolicy``).

Mapping (docs/policies.md, "Peer baselines"): a queue's ``guarantee`` is its
``minResources`` (min share), its ``limit`` its ``maxResources`` (the engine never starts
a task past it), its ``weight`` its weight; a job is an application (weight: the job's).
Settings (``peers.yarn-fair``, the contract's keys; a key left out takes YARN's
default): ``default_policy`` (``fair``; a queue with ``order: fifo`` is ``fifo``),
``queue_policies`` (queue path -> policy), ``memory_resource`` (the resource ``fair``
compares: ``memory``; when the scenario has none of that name, its first resource whose
name starts with ``mem``, else its first), ``preemption_threshold`` and
``min_share_preemption_timeout`` (checked, not used: see below).

Not reproduced: a queue's demand is not known to the sorter, so ``min(minShare,
demand)`` is the min share itself (a queue that demands less than its min share is needy
while it has pending work, as in YARN); reservations, locality delay,
``maxRunningApps`` and ``maxAMShare``. Preemption: FairScheduler's own
(``FSPreemptionThread``: starved for ``fairSharePreemptionTimeout`` below
``fairSharePreemptionThreshold`` x fair share, or ``minSharePreemptionTimeout`` below min
share) is approximated by the engine's fair-share preemption (the scenario's
``preemption: {after:}``; docs/policies.md "Fair-share preemption"), whose fair shares
are this policy's static allocation: the H-DRF bounded fill (min shares first, then
weighted dominant shares up to each limit), an approximation of YARN's
``ComputeFairShares`` (per resource, weighted, between min and max share). The per-queue
thresholds and timeouts are not reproduced (one ``after`` for every queue).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fairshare.model.queues import QueueTree
from fairshare.model.resources import Vector
from fairshare.model.scenario import Scenario
from fairshare.policies.machinery.peers import PeerBaseline, PeerSettings, RankedTreeSorter, with_fifo
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.tree import hierarchical_tree
from fairshare.policies.online import OnlineJob

POLICIES = ("fair", "drf", "fifo")
KEYS = ("default_policy", "queue_policies", "memory_resource", "preemption_threshold", "min_share_preemption_timeout")


@dataclass(frozen=True)
class YarnSettings:
    """``peers.yarn-fair`` as read (module docstring): per queue its policy, and the
    index of the resource ``fair`` compares."""

    default_policy: str = "fair"
    queue_policies: dict[str, str] = field(default_factory=dict)
    memory: int | None = None  # None: not configured (``memory_index`` of the resources)

    def policy_of(self, queues: QueueTree, path: str) -> str:
        if path in self.queue_policies:
            return self.queue_policies[path]
        if path in queues and queues[path].order == "fifo":
            return "fifo"
        return self.default_policy


def memory_index(resources: tuple[str, ...], named: str | None) -> int | None:
    """The resource YARN's ``fair`` policy compares (module docstring): ``named`` if
    given (None when the scenario has no such resource), else ``memory``, else the first
    ``mem...``, else the first."""
    if named is not None:
        return resources.index(named) if named in resources else None
    if "memory" in resources:
        return resources.index("memory")
    return next((i for i, r in enumerate(resources) if r.startswith("mem")), 0)


def read_settings(scenario: Scenario) -> YarnSettings:
    """``peers.yarn-fair``, checked: every problem raised at once with its path."""
    s = PeerSettings("yarn-fair", scenario.peers.get("yarn-fair"), KEYS)
    default = s.choice("default_policy", POLICIES, "fair")

    def policy(where, value):
        if value not in POLICIES:
            s.error(where, f"must be one of {', '.join(POLICIES)}, got {value!r}")
            return None
        return value

    per_queue = s.queue_map("queue_policies", scenario.queues, policy)
    named = s.raw.get("memory_resource")
    memory = memory_index(scenario.resources, named)
    if memory is None:
        s.error("memory_resource", f"{named!r} is not a resource of the scenario ({', '.join(scenario.resources)})")
        memory = 0

    def fraction(where, value):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
            s.error(where, f"must be a number in [0, 1], got {value!r}")
        return value

    def seconds(where, value):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
            s.error(where, f"must be a number of seconds >= 0, got {value!r}")
        return value

    s.queue_map("preemption_threshold", scenario.queues, fraction)
    s.queue_map("min_share_preemption_timeout", scenario.queues, seconds)
    settings = YarnSettings(default, per_queue, memory)
    for node in scenario.queues:  # FairScheduler's own refusals (module docstring)
        mine = settings.policy_of(scenario.queues, node.path)
        where = f"queue_policies.{node.path}" if node.path in per_queue else "default_policy"
        if mine == "fifo" and node.children:
            s.error(where, f"fifo is for leaf queues only (FifoPolicy.isApplicableTo); "
                           f"{node.path or 'the root'} has child queues")
        if mine == "drf" and node.parent is not None and settings.policy_of(scenario.queues, node.parent) == "fair":
            s.error(where, f"a drf queue ({node.path}) under a fair parent is refused by FairScheduler "
                           f"(FairSharePolicy.isChildPolicyAllowed)")
    s.done()
    return settings


# --- the comparators, as sort keys (lowest first) -------------------------------------------------

def fair_key(usage: float, min_share: float, weight: float) -> tuple:
    """``FairShareComparator`` on the memory usage: needy (below its min share) first by
    ``usage / minShare``, then ``usage / weight`` (start time and name come after, from
    the caller). YARN divides by ``max(minShare, 1)`` (one MB); here the min share is
    positive whenever the schedulable is needy."""
    if usage < min_share:
        return (0, usage / min_share)
    return (1, usage / weight)


def drf_key(usage: Vector, min_share: Vector, capacity: Vector, weight: float) -> tuple:
    """``DominantResourceFairnessComparator``: the resources ordered by the cluster share
    ``usage_r / (capacity_r x weight)``, largest first (ties: listed first); needy (usage
    of that dominant resource below its min share) first, by the shares of the min share
    in that order, else by the cluster shares in that order."""
    m = len(capacity)
    cluster = [usage[r] / (capacity[r] * weight) if capacity[r] > 0 else 0.0 for r in range(m)]
    order = sorted(range(m), key=lambda r: -cluster[r])
    dominant = order[0] if order else 0
    if m and usage[dominant] < min_share[dominant]:
        of_min = [usage[r] / min_share[r] if min_share[r] > 0 else (0.0 if usage[r] == 0 else float("inf"))
                  for r in range(m)]
        return (0, *(of_min[r] for r in order))
    return (1, *(cluster[r] for r in order))


class YarnFairSorter(RankedTreeSorter):
    """FairScheduler's descent: each queue's demanding children (child queues and its
    applications) sorted by the queue's own policy's comparator."""

    def __init__(self, resources: int, queues: QueueTree, capacity: Vector, settings: YarnSettings,
                 resource_names: tuple[str, ...], memory: int):
        super().__init__(resources, queues, capacity)
        self.settings = settings
        self.memory = memory  # the resource ``fair`` compares
        self.min_share = {node.path: node.guarantee_vector(resource_names) for node in queues}
        self.no_min = (0.0,) * resources

    def key_of(self, policy: str, usage, min_share, weight: float) -> tuple:
        if policy == "drf":
            return drf_key(usage, min_share, self.capacity, weight)
        k = self.memory
        return fair_key(usage[k], min_share[k], weight)

    def order(self, parent, queues, jobs):
        policy = self.settings.policy_of(self.queues, parent)
        if policy == "fifo":  # (a leaf: FifoPolicy, by start time)
            return [job.name for job in jobs]
        # a queue: its min share, weight, start time 0, name (its full path, as YARN's
        # "root.a.b" compares); an application: no min share, its weight, arrival, name
        keyed = [(self.key_of(policy, self.usage[q], self.min_share[q], self.queues[q].weight), 0, -1, q)
                 for q in queues]
        keyed += [(self.key_of(policy, job.usage, self.no_min, job.weight), 1, job.order, job.name)
                  for job in jobs]
        keyed.sort()
        return [key for *_, key in keyed]


class YarnFair(PeerBaseline, FillingPolicy):
    name = "yarn-fair"
    hierarchical = True
    # share_is_usage_over_capacity stays False: usage is compared with absolute amounts (min
    # shares, quotas), so a constrained job's is reported as it is, not normalised
    citation = ("Apache Hadoop 3 YARN FairScheduler: FSParentQueue/FSLeafQueue, FairSharePolicy, "
                "DominantResourceFairnessPolicy, FifoPolicy (docs/policies.md, Peer baselines)")
    conformance_exemptions = {
        "allocation weights": "YARN's default policy, fair, compares memory alone (FairSharePolicy): two jobs "
                              "using CPU and no memory are not told apart by their weights"}

    settings_type = YarnSettings
    read_settings = staticmethod(read_settings)

    def build_tree(self, scenario, respect_counts):
        """The static form (and the preemption's fair shares): the bounded fill where each
        node is measured as its parent's policy measures it, ``fair`` on memory alone
        (its reference is ``weight x`` the memory capacity), ``drf`` on every resource,
        ``fifo`` in submission order (module docstring)."""
        settings = read_settings(scenario)  # (``allocate`` is given the scenario, not ``configured``)
        memory = settings.memory if settings.memory is not None else memory_index(scenario.resources, None)
        queue_of = {job.name: job.queue for job in scenario.jobs}
        parent_of = {node.path: node.parent for node in scenario.queues}
        fifo = [node.path for node in scenario.queues if settings.policy_of(scenario.queues, node.path) == "fifo"]

        def ref_of(key: str, weight: float) -> Vector:
            parent = queue_of[key] if key in queue_of else parent_of[key]
            if settings.policy_of(scenario.queues, parent) == "drf":
                return tuple(weight * c for c in scenario.capacity)
            return tuple(weight * c if r == memory else 0.0 for r, c in enumerate(scenario.capacity))

        return hierarchical_tree(with_fifo(scenario, fifo), respect_counts, ref_of=ref_of)[0]

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        memory = self.settings.memory
        if memory is None:
            memory = memory_index(tuple(resources), None)
        return YarnFairSorter(len(resources), queues, capacity, self.settings, tuple(resources), memory)
