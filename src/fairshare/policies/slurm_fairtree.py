"""``slurm-fairtree``: Slurm's Fair Tree fair-share ranking, as a baseline.

The peer (SchedMD/slurm): ``doc/html/fair_tree.shtml`` and
``src/plugins/priority/multifactor/fair_tree.c`` (``_calc_assoc_fs``, ``_calc_tree_fs``,
``_cmp_level_fs``). Every association gets a *Level Fairshare*

    LF = S / U,   S = Shares_self / Shares_self+siblings,   U = Usage_self / Usage_self+siblings

(U = 0 when the siblings have no usage: LF is infinite, "Level FS values are infinity if
the association has no usage"; S = 0 gives LF 0). The tree is sorted by LF, highest
first, at every level and walked depth-first; users are ranked in that order, rank
counting down from the number of user associations, and a user's fair-share factor is
``rank / users`` (the highest 1.0). Ties (the doc's "Ties"): sibling users with the same
LF get the same rank; a user with the same LF as a sibling account gets the rank of the
account's highest ranked user (users sort before accounts at equal LF); sibling accounts
with the same LF have their children merged before descending. Usage is the billing of
the running jobs, ``sum_r billing_weight_r x TRES_r`` (``TRESBillingWeights``), charged as
it accrues and decayed with ``PriorityDecayHalfLife`` (``machinery/decay.py``
``DecayLedger``, one scalar per association).

Jobs are ordered by their association's fair-share factor, highest first, then by
submission (the age factor): the multifactor priority with only these two factors, and
the first job that can run starts (Slurm's backfill without reservations).

Mapping (docs/policies.md, "Peer baselines"): accounts are the inner queues, user
associations the leaf queues (``Fairshare`` -> ``weight`` = Shares); jobs waiting in an
inner queue count as one user association of that account with ``Fairshare=1``
(Slurm's default), so a scenario without queues has one association and runs in
submission order. Settings (``peers.slurm-fairtree``; left out: Slurm's default):
``billing_weights`` (resource -> weight; default ``cpu`` 1.0, the others 0: Slurm bills
CPUs when ``TRESBillingWeights`` is unset; a scenario without ``cpu`` bills its first
resource), ``half_life`` (seconds, default 604800 = 7 days; 0: no decay, as Slurm's
``PriorityDecayHalfLife=0``), ``users`` (leaf -> account: checked against the tree).

Not reproduced: ``PriorityCalcPeriod`` (the ranking is recomputed at every instant, not
every 5 minutes), ``PriorityUsageResetPeriod``, the other multifactor factors (QOS,
partition, job size, nice), ``Fairshare=parent``, reservations of the backfill
scheduler. Fair Tree is a ranking of past usage, with no static allocation: ``allocate``
refuses, and so does the engine's fair-share preemption (Slurm preempts by partition or
QOS, not by fair share).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.resources import Vector
from fairshare.model.scenario import Scenario
from fairshare.policies.base import Policy, PolicyModeError
from fairshare.policies.machinery.decay import DecayLedger
from fairshare.policies.machinery.peers import PeerBaseline, PeerSettings
from fairshare.policies.machinery.ties import share_key
from fairshare.policies.online import OnlineSorter, Runnable

KEYS = ("billing_weights", "half_life", "users")
DEFAULT_HALF_LIFE_S = 604800.0  # PriorityDecayHalfLife default: 7-0 (7 days)
#: the association of jobs waiting in an inner queue: ``<queue>`` + this
OWN_JOBS = "/jobs"


@dataclass(frozen=True)
class FairTreeSettings:
    billing_weights: Mapping[str, float] | None = None  # None: Slurm's default (module docstring)
    half_life_s: float = DEFAULT_HALF_LIFE_S
    users: dict[str, str] = field(default_factory=dict)


def billing_vector(resources: Sequence[str], weights: Mapping[str, float] | None) -> tuple[float, ...]:
    """Per resource its billing weight (module docstring's default when None)."""
    if weights is None:
        first = "cpu" if "cpu" in resources else (resources[0] if resources else None)
        return tuple(1.0 if r == first else 0.0 for r in resources)
    return tuple(weights.get(r, 0.0) for r in resources)


def read_settings(scenario: Scenario) -> FairTreeSettings:
    """``peers.slurm-fairtree``, checked: every problem raised at once with its path."""
    s = PeerSettings("slurm-fairtree", scenario.peers.get("slurm-fairtree"), KEYS)
    weights = None
    if "billing_weights" in s.raw:
        weights = s.amounts("billing_weights", s.raw["billing_weights"], scenario.resources)
    half_life = s.number("half_life", DEFAULT_HALF_LIFE_S)

    def account(where, value):
        leaf = where.split(".", 1)[1]
        parent = scenario.queues[leaf].parent
        if scenario.queues[leaf].children:
            s.error(where, f"{leaf!r} has child queues: a user association is a leaf")
            return None
        if value != parent and not (parent == ROOT and value in ("root", "")):
            s.error(where, f"{leaf!r} is under {parent or 'root'!r} in the queue tree, not {value!r}")
            return None
        return value

    users = s.queue_map("users", scenario.queues, account)
    s.done()
    return FairTreeSettings(weights, half_life, users)


# --- the ranking (fair_tree.c) ----------------------------------------------------------------------

@dataclass(frozen=True)
class Association:
    """One node of the association tree: a user (``children`` empty, ``user`` True) or
    an account, its raw shares and its decayed billing usage (its own, or the sum of its
    children's)."""

    name: str
    shares: float
    usage: float
    user: bool
    children: tuple[Association, ...] = ()


def level_fairshare(assoc: Association, siblings: Sequence[Association]) -> float:
    """``LF = S / U`` among ``siblings`` (``assoc`` included), ``_calc_assoc_fs``: S = 0
    gives 0, U = 0 (no usage among the siblings, or none of its own) infinity."""
    total_shares = sum(a.shares for a in siblings)
    s = assoc.shares / total_shares if total_shares > 0 else 0.0
    if s == 0:
        return 0.0
    total_usage = sum(a.usage for a in siblings)
    u = assoc.usage / total_usage if total_usage > 0 else 0.0
    return math.inf if u == 0 else s / u


def fair_tree_ranks(root: Association) -> tuple[dict[str, float], dict[str, float]]:
    """Every user's fair-share factor (rank / users) and every association's LF, by the
    depth-first walk of ``_calc_tree_fs`` with its three tie rules (module docstring)."""
    level: dict[str, float] = {}
    users: list[Association] = []

    def prepare(parent: Association) -> None:
        for child in parent.children:
            level[child.name] = level_fairshare(child, parent.children)
            if child.user:
                users.append(child)
            else:
                prepare(child)

    prepare(root)
    n = len(users)
    factor: dict[str, float] = {}
    rank = rnt = n  # rank given; rank with no ties

    def walk(siblings: list[Association], account_tied: bool) -> None:
        nonlocal rank, rnt
        # highest LF first; at equal LF users before accounts; otherwise as listed
        ordered = sorted(siblings, key=lambda a: (-share_key(level[a.name]), not a.user))
        prev = None
        i = 0
        while i < len(ordered):
            assoc = ordered[i]
            lf = share_key(level[assoc.name])
            tied = account_tied if i == 0 else prev == lf
            if assoc.user:
                if not tied:
                    rank = rnt
                factor[assoc.name] = rank / n
                rnt -= 1
            else:
                # sibling accounts of equal LF: their children merged before descending
                j = i
                while j + 1 < len(ordered) and not ordered[j + 1].user and share_key(level[ordered[j + 1].name]) == lf:
                    j += 1
                walk([c for a in ordered[i:j + 1] for c in a.children], tied)
                i = j
            prev = lf
            i += 1

    walk(list(root.children), False)
    return factor, level


class FairTreeSorter(OnlineSorter):
    """Jobs by their association's fair-share factor (recomputed once per instant from
    the decayed billing usage), then by submission; the first that can run."""

    def __init__(self, resources: tuple[str, ...], queues: QueueTree, capacity: Vector, settings: FairTreeSettings):
        super().__init__(len(resources), queues, capacity)
        self.billing = billing_vector(resources, settings.billing_weights)
        half_life = settings.half_life_s if settings.half_life_s > 0 else math.inf
        self.ledger = DecayLedger(half_life, 1)
        self.billed: dict[str, float] = {}  # association -> billing of what it runs now
        self.factor: dict[str, float] = {}
        self.level: dict[str, float] = {}
        self._ranked_at: float | None = None
        self._queue: list[str] | None = None  # demanding jobs, best first (``pick``)

    def association_of(self, queue: str) -> str:
        return queue if not self.queues[queue].children and queue != ROOT else queue + OWN_JOBS

    def set_half_life(self, half_life, ledger=None):
        raise ValueError("fairness.half_life: slurm-fairtree decays its usage with peers.slurm-fairtree.half_life "
                         "(Slurm's PriorityDecayHalfLife); leave fairness.half_life out")

    def _charge(self, name: str, demand: Vector, sign: float, now: float) -> None:
        assoc = self.association_of(self.jobs[name].queue)
        billed = self.billed.get(assoc, 0.0) + sign * sum(w * d for w, d in zip(self.billing, demand))
        self.billed[assoc] = max(0.0, billed)
        self.ledger.charge(assoc, now, [self.billed[assoc]])

    def allocated(self, name, demand, now=0.0):
        super().allocated(name, demand, now)
        self._charge(name, demand, 1.0, now)

    def released(self, name, demand, now=0.0):
        super().released(name, demand, now)
        self._charge(name, demand, -1.0, now)

    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, demand)
        self._ranked_at = None  # (a job in an inner queue may add its association)

    def set_demanding(self, name, demanding):
        super().set_demanding(name, demanding)
        self._queue = None

    def tree(self, now: float) -> Association:
        """The association tree with every usage decayed to ``now``."""
        with_jobs = {job.queue for job in self.jobs.values() if self.queues[job.queue].children or job.queue == ROOT}
        with_jobs |= {a[:-len(OWN_JOBS)] for a in self.billed if a.endswith(OWN_JOBS)}

        def build(path: str) -> Association:
            node = self.queues[path]
            if not node.children and path != ROOT:
                return Association(path, node.weight, self.ledger.usage(path, now)[0], True)
            kids = [build(c) for c in node.children]
            if path in with_jobs:
                own = path + OWN_JOBS
                kids.append(Association(own, 1.0, self.ledger.usage(own, now)[0], True))
            return Association(path, node.weight, sum(k.usage for k in kids), False, tuple(kids))

        return build(ROOT)

    def rank(self, now: float) -> None:
        if self._ranked_at != now:
            self._ranked_at = now
            self.factor, self.level = fair_tree_ranks(self.tree(now))
            self._queue = None

    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        self.rank(now)
        if self._queue is None:
            # the priority queue, sorted once per ranking or change of the demanding set
            factor = self.factor
            self._queue = [name for *_key, name in sorted(
                (-factor.get(self.association_of(job.queue), 0.0), job.order, job.name)
                for job in self.jobs.values() if job.demanding)]
        jobs = self.jobs
        for name in self._queue:
            job = jobs.get(name)
            if job is not None and job.demanding and runnable(name):
                return name
        return None

    def shares(self) -> dict[str, float]:
        return dict(self.factor)


class SlurmFairTree(PeerBaseline, Policy):
    name = "slurm-fairtree"
    hierarchical = True
    citation = ("Slurm 14.11+ Fair Tree: doc/html/fair_tree.shtml; src/plugins/priority/multifactor/fair_tree.c "
                "(docs/policies.md, Peer baselines)")
    conformance_exemptions = {
        "job weights": "Fair Tree ranks associations, not jobs (fair_tree.c): the jobs of one association go by "
                       "submission (the age factor), whatever their weight",
        "queue weights": "Fair Tree orders by LF = S / U of decayed past usage (fair_tree.shtml, Level Fairshare): "
                         "the first-ranked association takes every free slot until its usage lowers its LF, so "
                         "the split at an instant swings around the shares instead of holding 3 : 1",
        "static limit": "Fair Tree has no static allocation to converge to: it ranks past usage "
                        "(fair_tree.shtml); allocate refuses"}

    settings_type = FairTreeSettings
    read_settings = staticmethod(read_settings)

    def allocate(self, scenario, *, respect_counts=False):
        raise PolicyModeError(f"policy {self.name!r} has no static allocation: Fair Tree ranks associations by "
                              f"their decayed past usage (doc/html/fair_tree.shtml); use simulate or compare")

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        return FairTreeSorter(tuple(resources), queues, capacity, self.settings)
