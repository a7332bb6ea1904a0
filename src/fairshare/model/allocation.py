"""Allocation results, the static answer of every policy (contract: allocate JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fairshare.model.resources import Vector, dominant_share, to_mapping, vsum
from fairshare.model.usage import PastUsage


@dataclass(frozen=True)
class JobAllocation:
    tasks: float
    tasks_by_class: dict[str, float]
    allocation: Vector
    dominant_share: float  # unweighted: max_r allocation_r / capacity_r


@dataclass(frozen=True)
class QueueAllocation:
    allocation: Vector
    dominant_share: float
    #: what the policy entitles the queue to under the current demands: the exact
    #: divisible allocation (in discrete mode too, where ``allocation`` is whole tasks);
    #: None when the policy has no divisible allocation
    fair_share: Vector | None = None
    guarantee: tuple[tuple[str, float], ...] = ()  # as the scenario lists it
    limit: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Allocation:
    policy: str
    mode: str  # "divisible" or "discrete"
    resources: tuple[str, ...]
    capacity: Vector
    jobs: dict[str, JobAllocation]
    queues: dict[str, QueueAllocation]
    utilization: Vector
    # discrete mode: node name -> job name -> class name -> whole tasks placed there
    placement: dict[str, dict[str, dict[str, int]]] | None = None
    notes: tuple[str, ...] = field(default=())
    #: the past usage the entitlement was computed with (every job and queue, as average
    #: allocations; ``PastUsage.for_report``); None: none given
    past_usage: PastUsage | None = None

    def to_json(self) -> dict:
        names = self.resources
        out = {
            "policy": self.policy,
            "mode": self.mode,
            "resources": list(names),
            "capacity": to_mapping(self.capacity, names),
            "jobs": {
                name: {
                    "tasks": ja.tasks,
                    "tasks_by_class": dict(ja.tasks_by_class),
                    "allocation": to_mapping(ja.allocation, names),
                    "dominant_share": ja.dominant_share,
                }
                for name, ja in self.jobs.items()
            },
            "queues": {path: _queue_json(qa, names) for path, qa in self.queues.items()},
            "utilization": to_mapping(self.utilization, names),
        }
        if self.past_usage is not None:  # (extension keys; the contract's keys are as they were)
            past = self.past_usage
            out["usage"] = past.basis()
            for name, entry in out["jobs"].items():
                entry["past_usage"] = to_mapping(past.jobs[name], names)
            for path, entry in out["queues"].items():
                entry["past_usage"] = to_mapping(past.queues[path], names)
        if self.placement is not None:
            out["placement"] = self.placement
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def _queue_json(qa: QueueAllocation, names) -> dict:
    out = {"allocation": to_mapping(qa.allocation, names), "dominant_share": qa.dominant_share,
           "guarantee": dict(qa.guarantee), "limit": dict(qa.limit)}
    if qa.fair_share is not None:
        out["fair_share"] = to_mapping(qa.fair_share, names)
    return out


def build_allocation(scenario, policy: str, mode: str, tasks_by_class: dict[str, tuple[float, ...]],
                     placement=None, notes=(), fair_shares: dict[str, Vector] | None = None) -> Allocation:
    """Assemble an :class:`Allocation` from per-job, per-class task amounts.

    Every policy reports through here, so job and queue totals, dominant shares and
    utilization are computed one way for all of them. ``fair_shares`` (queue path ->
    allocation) is the divisible entitlement; in divisible mode it is the allocation
    itself and may be omitted.
    """
    capacity = scenario.capacity
    m = scenario.m
    jobs: dict[str, JobAllocation] = {}
    for job in scenario.jobs:
        per_class = tasks_by_class.get(job.name, (0.0,) * len(job.classes))
        alloc = vsum((tuple(n * d for d in c.demand) for n, c in zip(per_class, job.classes)), m)
        jobs[job.name] = JobAllocation(
            tasks=float(sum(per_class)),
            tasks_by_class={c.name: float(n) for n, c in zip(per_class, job.classes)},
            allocation=alloc,
            dominant_share=dominant_share(alloc, capacity),
        )
    queues: dict[str, QueueAllocation] = {}
    for path in scenario.queues.paths:
        prefix = path + "."
        members = [jobs[j.name].allocation for j in scenario.jobs if j.queue == path or j.queue.startswith(prefix)]
        alloc = vsum(members, m)
        node = scenario.queues[path]
        fair = alloc if mode == "divisible" else (fair_shares or {}).get(path)
        queues[path] = QueueAllocation(alloc, dominant_share(alloc, capacity), fair, node.guarantee, node.limit)
    used = vsum((ja.allocation for ja in jobs.values()), m)
    utilization = tuple((u / c) if c > 0 else 0.0 for u, c in zip(used, capacity))
    return Allocation(policy, mode, scenario.resources, capacity, jobs, queues, utilization, placement, tuple(notes))
