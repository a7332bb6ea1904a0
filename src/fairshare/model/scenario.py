"""A validated scenario: resources, cluster, queue tree, jobs and cluster events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fairshare.model.cluster import Cluster, Node
from fairshare.model.jobs import Job
from fairshare.model.queues import QueueChange, QueueTree
from fairshare.model.usage import PastUsage


@dataclass(frozen=True)
class ClusterEvent:
    """A change to the cluster at ``time_s`` (an extension of the contract's scenario file,
    used by the simulator): ``kind`` is ``node_fail`` (the node named ``node_name`` dies and
    its running tasks go back to pending), ``node_add`` (``node`` joins, or a failed node
    comes back) or ``queue`` (the queue tree changes: ``queue_change``; ``node_name`` is
    then the queue's path)."""

    time_s: float
    kind: str  # "node_fail", "node_add" or "queue"
    node_name: str
    node: Node | None = None  # the node that joins (node_add only)
    queue_change: QueueChange | None = None  # (queue only)


#: the preemption rules (``engine/preemption.py``): the loop-free one, and the naive one
#: kept for comparisons
PREEMPTION_RULES = ("loop-free", "naive")


@dataclass(frozen=True)
class PreemptionConfig:
    """A scenario's (or the live config's) ``preemption:`` section: fair-share preemption
    is on when there is one (docs/policies.md, "Fair-share preemption")."""

    #: seconds a queue must stay starved before it may preempt
    after: float = 30.0
    #: a queue is starved when its dominant share is below its fair share's by more
    #: than this (in dominant-share points: 0.05 is 5% of the cluster)
    tolerance: float = 0.05
    #: most victims per decision round
    max_per_round: int = 4
    #: ``loop-free``; ``naive`` (any task of a job above its fair share may go, whatever
    #: it leaves): for comparisons only, it can preempt in a loop
    rule: str = "loop-free"
    #: a job may also preempt lower-priority jobs of its own queue (priorities within a
    #: queue, docs/policies.md "Priority preemption within a queue"); off by default
    within_queue: bool = False
    #: seconds between preemption rounds: the budget becomes a rate (``max_per_round``
    #: victims per ``round`` seconds), and while a queue stays starved past ``after`` a
    #: round is held every ``round`` seconds, events or not; None: a round at every
    #: decision (the first at the deadline), so a starved queue gains only as often as
    #: tasks end (docs/policies.md, "Preemption paced in time")
    round: float | None = None

    def __post_init__(self) -> None:
        if self.rule not in PREEMPTION_RULES:
            raise ValueError(f"preemption rule must be one of {', '.join(PREEMPTION_RULES)}, got {self.rule!r}")
        if self.round is not None and not self.round > 0:
            raise ValueError(f"preemption round must be > 0 seconds, got {self.round}")


@dataclass(frozen=True)
class GangsConfig:
    """A scenario's ``gangs:`` section (docs/policies.md, "Reservations: no gang starves")."""

    #: seconds a gang waits, demanding and unable to start, before the cluster reserves
    #: nodes for it as they free up; None: never (the section without the key)
    reserve_after: float | None = None

    def __post_init__(self) -> None:
        if self.reserve_after is not None and not self.reserve_after >= 0:
            raise ValueError(f"gangs.reserve_after must be >= 0, got {self.reserve_after}")


@dataclass(frozen=True)
class FairnessConfig:
    """A scenario's ``fairness:`` section (docs/policies.md, "Fairness with memory")."""

    #: seconds for past usage to lose half its weight; 0: no memory (the instantaneous
    #: policy, exactly); ``math.inf``: cumulative usage
    half_life: float = 0.0

    def __post_init__(self) -> None:
        if not self.half_life >= 0:
            raise ValueError(f"fairness.half_life must be >= 0 seconds, got {self.half_life}")


@dataclass(frozen=True)
class Scenario:
    resources: tuple[str, ...]
    cluster: Cluster
    queues: QueueTree
    jobs: tuple[Job, ...]
    source: str = "<scenario>"
    #: node failures and additions over time, in time order (ties: file order); the
    #: static allocations ignore them
    events: tuple[ClusterEvent, ...] = ()
    #: fair-share preemption (the ``preemption:`` section); None: off
    preemption: PreemptionConfig | None = None
    #: gang reservations (the ``gangs:`` section); None: none
    gangs: GangsConfig | None = None
    #: decayed usage (the ``fairness:`` section); None: none, as ``half_life: 0``
    fairness: FairnessConfig | None = None
    #: the ``peers:`` section: per peer baseline policy, its own settings, as written (each
    #: baseline policy checks its own keys); empty: none
    peers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: past usage for the static allocations (the ``usage:`` section, or ``allocate
    #: --usage``); None: none. The simulator and serve keep their own history and do not
    #: read it (docs/usage.md, "usage: past usage for allocate")
    usage: PastUsage | None = None

    @property
    def m(self) -> int:
        return len(self.resources)

    @property
    def capacity(self):
        return self.cluster.capacity

    def job(self, name: str) -> Job:
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)

    def without_job(self, name: str) -> "Scenario":
        return replace(self, jobs=tuple(j for j in self.jobs if j.name != name))

    def with_job(self, job: Job) -> "Scenario":
        """A copy with ``job`` replacing the job of the same name."""
        return replace(self, jobs=tuple(job if j.name == job.name else j for j in self.jobs))
