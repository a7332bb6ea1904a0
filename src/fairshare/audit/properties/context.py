"""What every property check reads: the tolerance, the audit context and the task counts.

:func:`exceeds` is the one comparison of the audit (``RTOL``; the package docstring,
"Tolerance"). :class:`AuditContext` holds the scenario, the policy and the allocation under
audit and answers, cached, what the checks ask of a job: its demand ``d_i`` (its own or the
policy's chosen mix, "Chosen mixes"), its cap, its tolerance unit, whether it is capped,
its entitlement ``e_i`` ("Entitlement"; H-DRF Sec. 2.1 through
:func:`hierarchical_guarantees` for hierarchical policies), and its utility in another
allocation. :func:`tasks_in`, :func:`whole` and :func:`node_bundles` turn resources into
tasks, divisible and whole ("Utility", "Discrete mode").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fairshare.model.allocation import Allocation
from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT, share_guarantees
from fairshare.model.resources import Vector, to_mapping
from fairshare.model.scenario import Scenario
from fairshare.policies.base import Policy


#: the one relative tolerance of every audit comparison (see :func:`exceeds`)
RTOL = 1e-7


def exceeds(a: float, b: float, unit: float = 1.0) -> bool:
    """``a > b`` by more than the audit's tolerance: ``RTOL * max(|a|, |b|, unit)``."""
    return a > b + RTOL * max(abs(a), abs(b), unit)


@dataclass
class AuditContext:
    """The scenario, the policy and the allocation under audit, and the per-job numbers every
    check asks of them (cached: a context audits one allocation and is not changed)."""

    scenario: Scenario
    policy: Policy
    respect_counts: bool
    discrete: bool
    max_jobs_searched: int
    allocation: Allocation
    _cache: dict = field(default_factory=dict, repr=False)

    # --- recomputation --------------------------------------------------------------
    def reallocate(self, scenario: Scenario) -> Allocation:
        if self.discrete:
            return self.policy.allocate_discrete(scenario, respect_counts=self.respect_counts)
        return self.policy.allocate(scenario, respect_counts=self.respect_counts)

    # --- per-job numbers --------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [job.name for job in self.scenario.jobs]

    def job(self, name: str) -> Job:
        if "jobs" not in self._cache:
            self._cache["jobs"] = {job.name: job for job in self.scenario.jobs}
        return self._cache["jobs"][name]

    def demand(self, name: str) -> Vector:
        """The job's per-task demand ``d_i`` in every formula: its composite demand, or,
        when the policy chose another class mix (divisible mode), its per-task average
        at that mix, ``allocation / tasks``."""
        key = ("demand", name)
        if key not in self._cache:
            job = self.job(name)
            d = job.composite_demand()
            ja = self.allocation.jobs[name]
            if len(job.classes) > 1 and not self.discrete and ja.tasks > 0:
                own_mix = all(not exceeds(abs(ja.tasks_by_class.get(c.name, 0.0) - f * ja.tasks), 0.0, ja.tasks)
                              for c, f in zip(job.classes, job.class_mix()))
                if not own_mix:
                    d = tuple(a / ja.tasks for a in ja.allocation)
            self._cache[key] = d
        return self._cache[key]

    def cap(self, job: Job) -> float:
        if self.respect_counts and job.total_count is not None:
            return float(job.total_count)
        return math.inf

    def unit(self, name: str) -> float:
        """Tasks the job could run alone on the whole pooled cluster: its tolerance unit."""
        key = ("unit", name)
        if key not in self._cache:
            self._cache[key] = tasks_in(self.scenario.capacity, self.demand(name))
        return self._cache[key]

    def tasks(self, name: str) -> float:
        return self.allocation.jobs[name].tasks

    def capped(self, job: Job, tasks: float | None = None) -> bool:
        """No further demand: the job's count is met, or (for the allocation under audit)
        a queue above it is at its limit of a resource the job needs."""
        cap = self.cap(job)
        t = self.tasks(job.name) if tasks is None else tasks
        return (cap < math.inf and not exceeds(cap, t, 1.0)) or (tasks is None and self.at_limit(job))

    def at_limit(self, job: Job) -> bool:
        """A queue above ``job`` holds its limit of a resource the job needs (discrete: one
        more task of some class would cross it)."""
        queues = self.scenario.queues
        if not queues.bounded:
            return False
        key = ("at_limit", job.name)
        if key not in self._cache:
            hit = False
            resources = self.scenario.resources
            for path in queues.ancestors(job.queue):
                if path == ROOT or not queues[path].limit:
                    continue
                held = self.allocation.queues[path].allocation
                for res, lim in queues[path].limit:
                    r = resources.index(res)
                    need = min((c.demand[r] for c in job.classes if c.demand[r] > 0), default=0.0)
                    if need > 0 and not exceeds(lim, held[r] + (need if self.discrete else 0.0),
                                                self.scenario.capacity[r]):
                        hit = True
            self._cache[key] = hit
        return self._cache[key]

    def searched_jobs(self) -> list[str]:
        """Deterministic choice for the searches: all jobs if few, else the first by name."""
        return sorted(self.names)[: max(0, self.max_jobs_searched)]

    def entitlements(self) -> dict[str, float]:
        key = ("entitlements",)
        if key not in self._cache:
            if self.policy.hierarchical:
                self._cache[key] = hierarchical_guarantees(self.scenario)[1]
            else:
                total = sum(job.weight for job in self.scenario.jobs)
                self._cache[key] = {job.name: job.weight / total for job in self.scenario.jobs}
        return self._cache[key]

    def utility(self, alloc: Allocation, name: str, true_demand: Vector, job_in_alloc: Job) -> float:
        """Tasks of ``true_demand`` that ``name``'s allocation in ``alloc`` holds, capped.

        ``job_in_alloc`` is the job as ``alloc`` was computed for (a liar's reported
        classes), needed to turn a discrete placement back into resources.
        """
        cap = self.cap(job_in_alloc)
        if alloc.mode == "discrete" and alloc.placement is not None:
            total = 0.0
            for bundle in node_bundles(alloc, job_in_alloc, self.scenario.m):
                total += whole(tasks_in(bundle, true_demand))
            return min(cap, total)
        return min(cap, tasks_in(alloc.jobs[name].allocation, true_demand))

    def resource(self, r: int) -> str:
        return self.scenario.resources[r]

    def mapping(self, v: Vector) -> dict[str, float]:
        return to_mapping(v, self.scenario.resources)


def tasks_in(bundle: Vector, demand: Vector) -> float:
    """How many tasks of ``demand`` fit in ``bundle``: ``min_r bundle_r / d_r`` over used r."""
    best = math.inf
    for b, d in zip(bundle, demand, strict=True):
        if d > 0:
            best = min(best, max(0.0, b) / d)
    return best


def whole(x: float) -> float:
    """Whole tasks in ``x`` tasks, forgiving float noise just below an integer."""
    if math.isinf(x):
        return x
    return float(math.floor(x + RTOL * max(1.0, abs(x))))


def node_bundles(alloc: Allocation, job: Job, m: int) -> list[Vector]:
    """The job's resources on each node of a discrete placement."""
    demand_of = {c.name: c.demand for c in job.classes}
    out = []
    for per_job in (alloc.placement or {}).values():
        per_class = per_job.get(job.name)
        if not per_class:
            continue
        v = [0.0] * m
        for cname, count in per_class.items():
            for r, d in enumerate(demand_of[cname]):
                v[r] += count * d
        out.append(tuple(v))
    return out


def hierarchical_guarantees(scenario: Scenario) -> tuple[dict[str, float], dict[str, float]]:
    """H-DRF Sec. 2.1 guarantees of the scenario's queues and jobs (every job demands)."""
    return share_guarantees(scenario.queues, scenario.jobs)
