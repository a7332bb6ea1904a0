"""The fairness properties of the papers, checked on one policy's static allocation.

Sources: Ghodsi et al., "Dominant Resource Fairness", NSDI 2011 (DRF) Sec. 3 (the
properties), Sec. 6 / Table 2 (which policy has which), Theorems 1, 2, 4, 5 (the
counter-examples), Appendix A (DRF's proofs); Bhattacharya et al., "Hierarchical
Scheduling for Diverse Datacenter Workloads", SoCC 2013 (H-DRF) Sec. 2.1 and 4.1
(hierarchical share guarantee), Sec. 4.3 (population monotonicity, Fig. 6/7).

Common readings
---------------
* **Utility.** A job's utility is its number of tasks: ``JobAllocation.tasks``, i.e.
  composite tasks for a fixed-mix multiclass job (one composite task holds the class
  demands weighted by ``Job.class_mix``, so a job's composite demand ``d_i`` stands for
  it everywhere below). With ``respect_counts`` a job's tasks are capped at its total
  count ``cap_i``; a job whose count is met has no further demand ("capped") and is
  exempt from every "it should get more" check. Without it, ``cap_i = inf``.
* **Chosen mixes.** A policy that picks a multiclass job's class mix itself (``slowdown``,
  Tan et al. Sec. 4) reports tasks at its own mix; there (divisible mode) the job's
  ``d_i`` in every formula below is its per-task average at that mix, ``allocation /
  tasks``, so utility is still tasks, at the mix the policy chose. Lies are still told
  about the declared classes.
* **Entitlement** ``e_i`` (the job's "own partition"). Flat policies
  (``policy.hierarchical`` False): ``e_i = w_i / sum_j w_j`` over all jobs (weighted DRF,
  Sec. 4.3). Hierarchical policies: the product along the job's path of
  ``w_node / sum(w of its demanding siblings)``, a sibling being demanding when it has
  at least one job below it (H-DRF Sec. 2.1; the weights ``collapsed`` uses). A job
  capped by its count still counts as a demanding sibling (it had demand when the
  scenario started), which makes the guarantees conservative: redistributing a capped
  sibling's unused entitlement would need a multi-resource water-fill we do not attempt.
* **Tolerance.** Every comparison goes through :func:`exceeds`: ``a`` exceeds ``b`` when
  ``a > b + RTOL * max(|a|, |b|, unit)``, ``RTOL = 1e-7``. ``unit`` is the natural size
  of the quantity: for a job's tasks, the tasks it could run alone on the whole pooled
  cluster (so a starved job's float noise is not a violation); for shares, 1; for an
  amount of resource r, ``C_r``.
* **Discrete mode** (``discrete=True``): whole tasks on the nodes. DRF only promises to
  be within one task of the divisible allocation there (DRF Sec. 6.2, Thm 7), so the
  bounds are on whole tasks: a partition is ``e_i`` of every node and holds
  ``sum_nodes floor(min_r e_i C_nr / d_ir)`` tasks; a bundle is worth the whole tasks
  that fit in it; a share is met when one more task of the node would reach it.

The properties
--------------
``sharing_incentive`` (DRF Sec. 3): every uncapped job runs at least the tasks it could
    run on its own partition, ``e_i`` of every resource:
    ``tasks_i >= min(cap_i, min_r e_i C_r / d_ir)``. For hierarchical policies H-DRF
    Thm 2 says the hierarchical share guarantee implies it.
``envy_freeness`` (DRF Sec. 3, Thm 11): job i envies job j when i could run more tasks
    with j's allocation scaled by their weights, ``min_r (a_jr w_i/w_j) / d_ir >
    tasks_i``, and i is not capped. Flat policies: every pair of jobs. Hierarchical
    policies: pairs of jobs in the same queue only (there ``w_i/w_j`` is also the ratio
    of their entitlements). Across queues a hierarchy deliberately treats jobs
    differently (a job alone in its queue gets what ten jobs of another queue share);
    what it promises there is the hierarchical share guarantee, checked below. (Scaling
    cross-queue pairs by the entitlement ratio instead flags H-DRF whenever a queue's
    resources are dovetailed, e.g. H-DRF Fig. 4, which no paper calls envy.)
``pareto_efficiency`` (DRF Sec. 3, Thm 9): divisible: an LP (HiGHS) maximises the
    (scale-normalised) sum of tasks subject to capacity, every job keeping at least its
    current tasks, and caps; violated if some job can gain. Jobs grow along their
    demand vectors (resources a job does not use have no value to it). Discrete: no
    uncapped job's next task (any of its classes) fits in the leftover of a node where
    the class may run.
``bottleneck_fairness`` (DRF Sec. 3, Thm 10): applies (``holds`` not null) only when one
    resource k is "percent-wise demanded most" by every job (``d_ik/C_k`` maximal, ties
    allowed). Then the allocation of k must be weighted max-min fair: every uncapped job
    gets at least its water-fill share of k, each job's claim on k being
    ``cap_i d_ik``. Flat policies fill with job weights; hierarchical policies fill the
    queue tree level by level (the single-resource case of H-DRF is hierarchical
    max-min fairness), queue weights over demanding siblings.
``strategy_proofness`` (DRF Sec. 3, Thm 12; CEEI's failure Thm 4): a *search*, not a
    proof. For up to ``max_jobs_searched`` jobs (all if few, else the first by name) we
    try misreported demand vectors: each used resource scaled by 0.5, 0.8, 1.25, 2, 4,
    8; demand added for each resource the job does not use (1/4 and 1 times its
    dominant share per task); each non-dominant resource raised half-way and all the way
    to the dominant share; every resource at the dominant share. A single-class job lies
    about its one class; a multiclass job's classes are all scaled alike, so the
    composite demand is the lie (class counts are untouched). The liar's true utility is
    the tasks of its true demand that its allocation holds, ``min(cap, min_r a_r /
    d_r)`` (discrete: whole tasks per node). Violated if a lie gains.
``hierarchical_share_guarantee`` (H-DRF Sec. 2.1, Thm 2): null without queues. Every
    queue with jobs below it and every job that still demands (not capped, resp. some
    job below not capped) has dominant share (unweighted, of the pooled capacity) at
    least its guarantee, the product along its path of ``w / sum(w of demanding
    siblings)``. Checked for every policy: a flat policy may violate it, which is the
    point of H-DRF Sec. 3.2. A job in a ``fifo`` queue is checked like any other; a
    violation there is the queue's order at work, and the detail says so.
``population_monotonicity`` (DRF Sec. 3, Thm 5, Thm 14; H-DRF Sec. 4.3 Thm 5): remove
    each of up to ``max_jobs_searched`` jobs in turn (the same choice as above) and
    recompute; violated if a remaining job's tasks drop. H-DRF's definition also covers
    internal nodes; we compare jobs (a queue's loss shows in its jobs).

``guarantees_and_limits`` (docs/policies.md, "Guarantees and limits"): null without
    queue bounds. Every queue with a guarantee holds at least ``min(G_qr, D_qr)`` of each
    guaranteed resource r, ``D_qr`` being what its jobs can use (``sum cap_i d_ir`` over
    the jobs below; unbounded without ``respect_counts``), and no queue holds more than
    its limit. Discrete: a guarantee is met when one more task of the queue's largest
    demand of r would reach it (whole tasks cannot stop exactly at it).

A policy without a static allocation in the mode asked raises
:class:`~fairshare.policies.base.PolicyModeError`, which propagates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from fairshare.audit.report import PropertyResult
from fairshare.model.allocation import Allocation
from fairshare.model.cluster import satisfies
from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT, share_guarantees
from fairshare.model.resources import Vector, fits, to_mapping
from fairshare.model.scenario import Scenario
from fairshare.policies.base import Policy

#: the one relative tolerance of every audit comparison (see :func:`exceeds`)
RTOL = 1e-7
#: relative slack of the Pareto LP's bounds around the allocation under audit (its float
#: noise must not make the LP infeasible); far below RTOL. An LP bound, not a fit test.
_LP_SLACK = 1e-9

#: strategy-proofness search: factors applied to one used resource's demand
SCALE_FACTORS = (0.5, 0.8, 1.25, 2.0, 4.0, 8.0)
#: ... per-task share claimed on an unused resource, in units of the dominant share
UNUSED_SHARES = (0.25, 1.0)
#: ... how far a non-dominant resource is raised toward the dominant share
TOWARD_DOMINANT = (0.5, 1.0)


def exceeds(a: float, b: float, unit: float = 1.0) -> bool:
    """``a > b`` by more than the audit's tolerance: ``RTOL * max(|a|, |b|, unit)``."""
    return a > b + RTOL * max(abs(a), abs(b), unit)


# ---------------------------------------------------------------------------------------
# The audit context: the scenario, the policy and the allocation under audit.


@dataclass
class AuditContext:
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


def _n(x: float) -> str:
    """A number for the human detail strings."""
    if x is None or (isinstance(x, float) and math.isinf(x)):
        return "unbounded"
    return f"{x:.4g}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _queue_note(ctx: AuditContext, job: Job) -> str:
    if job.queue and ctx.scenario.queues[job.queue].order == "fifo":
        return f" (job {job.name} sits in fifo queue {job.queue}, which gives up fairness among its jobs)"
    return ""


# ---------------------------------------------------------------------------------------
# sharing incentive


def check_sharing_incentive(ctx: AuditContext) -> PropertyResult:
    name = "sharing_incentive"
    if not ctx.scenario.jobs:
        return PropertyResult(name, True, None, "no jobs")
    ent = ctx.entitlements()
    nodes = ctx.scenario.cluster.nodes
    worst = None
    violations = 0
    for job in ctx.scenario.jobs:
        d = ctx.demand(job.name)
        e = ent[job.name]
        if ctx.discrete:
            eligible = [nd for nd in nodes if _eligible_for_job(nd, job)]
            bound = sum(whole(tasks_in(tuple(e * c for c in nd.capacity), d)) for nd in eligible)
        else:
            bound = tasks_in(tuple(e * c for c in ctx.scenario.capacity), d)
        bound = min(bound, ctx.cap(job))
        t = ctx.tasks(job.name)
        unit = ctx.unit(job.name)
        if ctx.capped(job) or not exceeds(bound, t, unit):
            continue
        violations += 1
        gap = (bound - t) / unit
        if worst is None or gap > worst[0]:
            worst = (gap, job, t, bound, e)
    reading = "hierarchical" if ctx.policy.hierarchical else "weighted"
    if worst is None:
        return PropertyResult(name, True, None,
                              f"every job runs at least the tasks of its own partition ({reading} entitlement "
                              f"e_i of every resource), {_count(len(ctx.scenario.jobs), 'job')}")
    _, job, t, bound, e = worst
    witness = {"job": job.name, "queue": job.queue, "tasks": t, "partition_tasks": bound,
               "entitlement": e, "violations": violations}
    detail = (f"job {job.name} runs {_n(t)} tasks, fewer than the {_n(bound)} it could run on its own "
              f"partition ({_n(e)} of every resource){_queue_note(ctx, job)}"
              + (f"; {violations} jobs short in all" if violations > 1 else ""))
    return PropertyResult(name, False, witness, detail)


def _eligible_for_job(node, job: Job) -> bool:
    attrs = dict(node.attributes)
    mix = job.class_mix()
    return all(satisfies(attrs, c.constraints) for c, f in zip(job.classes, mix) if f > 0)


# ---------------------------------------------------------------------------------------
# envy-freeness


def check_envy_freeness(ctx: AuditContext) -> PropertyResult:
    name = "envy_freeness"
    jobs = list(ctx.scenario.jobs)
    n = len(jobs)
    if n < 2:
        return PropertyResult(name, True, None, "fewer than two jobs")
    A = np.array([ctx.allocation.jobs[j.name].allocation for j in jobs], dtype=float)  # n x m
    D = np.array([ctx.demand(j.name) for j in jobs], dtype=float)
    W = np.array([j.weight for j in jobs], dtype=float)
    # who may envy whom: every pair (flat), or pairs in the same queue (hierarchical)
    queue_of = np.array([j.queue for j in jobs], dtype=object)
    worst = None
    violations = 0
    for i, job in enumerate(jobs):
        t = ctx.tasks(job.name)
        if ctx.capped(job):
            continue
        used = D[i] > 0
        scale = W[i] / W  # n: w_i / w_j
        comparable = (queue_of == job.queue) if ctx.policy.hierarchical else np.ones(n, dtype=bool)
        comparable = np.array(comparable, dtype=bool)
        comparable[i] = False
        # tasks of i's demand in every j's allocation scaled by w_i/w_j: min over used r
        # (discrete: whole tasks in the pooled bundle)
        per_r = (np.maximum(A[:, used], 0.0) * scale[:, None]) / D[i, used][None, :]
        could = np.minimum(per_r.min(axis=1), ctx.cap(job))
        if ctx.discrete:
            could = np.floor(could + RTOL * np.maximum(1.0, could))
        unit = ctx.unit(job.name)
        # exceeds(could_j, t, unit), vectorised
        envious = comparable & (could > t + RTOL * np.maximum(np.maximum(np.abs(could), abs(t)), unit))
        for j in np.flatnonzero(envious):
            violations += 1
            x = float(could[j])
            gap = (x - t) / unit
            if worst is None or gap > worst[0]:
                worst = (gap, job, jobs[j], t, x, float(scale[j]))
    if worst is None:
        among = "jobs of the same queue" if ctx.policy.hierarchical else "jobs"
        return PropertyResult(name, True, None,
                              f"no job could run more tasks with another's allocation scaled by their weights "
                              f"({_count(n, 'job')}, compared among {among})")
    _, job, other, t, x, scale = worst
    witness = {"job": job.name, "envies": other.name, "tasks": t, "tasks_with_other_allocation": x,
               "scale": scale, "violations": violations}
    scaled = "" if abs(scale - 1.0) <= RTOL else f" scaled by {_n(scale)}"
    detail = (f"job {job.name} runs {_n(t)} tasks but could run {_n(x)} with job {other.name}'s "
              f"allocation{scaled}{_queue_note(ctx, job)}"
              + (f"; {violations} envious pairs in all" if violations > 1 else ""))
    return PropertyResult(name, False, witness, detail)


# ---------------------------------------------------------------------------------------
# Pareto efficiency


def check_pareto_efficiency(ctx: AuditContext) -> PropertyResult:
    if ctx.discrete:
        return _pareto_discrete(ctx)
    return _pareto_divisible(ctx)


def _pareto_divisible(ctx: AuditContext) -> PropertyResult:
    from scipy.optimize import linprog

    name = "pareto_efficiency"
    jobs = list(ctx.scenario.jobs)
    if not jobs:
        return PropertyResult(name, True, None, "no jobs")
    cap_vec = ctx.scenario.capacity
    rows = [r for r, c in enumerate(cap_vec) if c > 0]
    # Variables y_i = x_i / unit_i (tasks in units of the whole cluster), so every
    # coefficient of the normalised capacity rows sum_i y_i unit_i d_ir / C_r <= 1 is <= 1.
    units = [ctx.unit(j.name) for j in jobs]
    current = [ctx.tasks(j.name) for j in jobs]
    A = np.array([[units[i] * ctx.demand(j.name)[r] / cap_vec[r] for i, j in enumerate(jobs)] for r in rows])
    # The allocation under audit may overshoot capacity by float noise; relaxing the
    # lower bounds by _LP_SLACK keeps the LP feasible, far below RTOL.
    lo = [max(0.0, t / u * (1 - _LP_SLACK)) for t, u in zip(current, units)]
    hi = [None if math.isinf(ctx.cap(j)) else max(ctx.cap(j) / u, l_) for j, u, l_ in zip(jobs, units, lo)]
    b = [1.0] * len(rows)
    # queue limits are constraints like capacity (a gain past a limit is no gain)
    queues = ctx.scenario.queues
    for path in queues.paths:
        for res, lim in queues[path].limit:
            r = ctx.scenario.resources.index(res)
            if cap_vec[r] <= 0:
                continue
            inside = [j.queue == path or j.queue.startswith(path + ".") for j in jobs]
            A = np.vstack([A, [units[i] * ctx.demand(j.name)[r] / cap_vec[r] if inside[i] else 0.0
                               for i, j in enumerate(jobs)]])
            b.append(lim / cap_vec[r] * (1 + _LP_SLACK))  # an allocation at its limit, with noise
    res = linprog(c=-np.ones(len(jobs)), A_ub=A, b_ub=np.array(b), bounds=list(zip(lo, hi)),
                  method="highs", options={"primal_feasibility_tolerance": 1e-10,
                                           "dual_feasibility_tolerance": 1e-10})
    if res.status == 2:  # infeasible: the allocation itself does not fit the capacity
        used = [sum(ctx.allocation.jobs[j.name].allocation[r] for j in jobs) for r in range(len(cap_vec))]
        over = [f"{ctx.resource(r)} {_n(used[r])} > {_n(cap_vec[r])}" for r in range(len(cap_vec))
                if exceeds(used[r], cap_vec[r], cap_vec[r])]
        return PropertyResult(name, None, None, "not checked: the allocation exceeds the capacity"
                              + (f" ({', '.join(over)})" if over else ""))
    if res.status != 0:
        raise RuntimeError(f"Pareto LP failed: {res.message}")
    gains = [(res.x[i] * units[i] - current[i], i) for i in range(len(jobs))]
    improvable = [(g / units[i], i) for g, i in gains if exceeds(current[i] + g, current[i], units[i])]
    if not improvable:
        return PropertyResult(name, True, None, f"no job can run more tasks without another running fewer "
                                                f"(LP over {_count(len(jobs), 'job')})")
    _, i = max(improvable)
    gain = gains[i][0]
    witness = {"job": jobs[i].name, "tasks": current[i], "could_run": current[i] + gain, "gain": gain,
               "jobs_that_can_gain": len(improvable)}
    detail = (f"job {jobs[i].name} could run {_n(gain)} more tasks ({_n(current[i])} -> {_n(current[i] + gain)}) "
              f"without any job running fewer")
    return PropertyResult(name, False, witness, detail)


def _pareto_discrete(ctx: AuditContext) -> PropertyResult:
    name = "pareto_efficiency"
    alloc = ctx.allocation
    if alloc.placement is None:
        return PropertyResult(name, None, None, "the policy reported no placement of whole tasks")
    m = ctx.scenario.m
    nodes = ctx.scenario.cluster.nodes
    free = {nd.name: list(nd.capacity) for nd in nodes}
    for node_name, per_job in alloc.placement.items():
        for job_name, per_class in per_job.items():
            job = ctx.job(job_name)
            demand_of = {c.name: c.demand for c in job.classes}
            for cname, count in per_class.items():
                for r in range(m):
                    free[node_name][r] -= count * demand_of[cname][r]
    for job in ctx.scenario.jobs:
        if ctx.capped(job):
            continue
        placed = alloc.jobs[job.name].tasks_by_class
        for cls in job.classes:
            if ctx.respect_counts and cls.count is not None and placed.get(cls.name, 0.0) >= cls.count:
                continue
            for nd in nodes:
                if satisfies(nd.attributes, cls.constraints) and fits(cls.demand, free[nd.name]):
                    witness = {"job": job.name, "class": cls.name, "node": nd.name,
                               "tasks": alloc.jobs[job.name].tasks,
                               "demand": ctx.mapping(cls.demand), "free": ctx.mapping(tuple(free[nd.name]))}
                    detail = (f"a {cls.name} task of job {job.name} ({_fmt_vec(ctx, cls.demand)}) still fits on "
                              f"node {nd.name} (free {_fmt_vec(ctx, tuple(free[nd.name]))})")
                    return PropertyResult(name, False, witness, detail)
    return PropertyResult(name, True, None, "no uncapped job's next task fits in any node's leftover")


def _fmt_vec(ctx: AuditContext, v: Vector) -> str:
    return "<" + ", ".join(f"{_n(x)} {res}" for x, res in zip(v, ctx.scenario.resources)) + ">"


# ---------------------------------------------------------------------------------------
# bottleneck fairness


def common_bottleneck(ctx: AuditContext) -> int | None:
    """The resource every job demands most of relative to capacity (ties allowed), or None."""
    scenario = ctx.scenario
    cap = scenario.capacity
    common: set[int] | None = None
    for job in scenario.jobs:
        d = ctx.demand(job.name)
        shares = [(d[r] / cap[r]) if cap[r] > 0 else 0.0 for r in range(scenario.m)]
        top = max(shares)
        if top <= 0:
            return None
        mine = {r for r, s in enumerate(shares) if not exceeds(top, s, 0.0)}
        common = mine if common is None else common & mine
        if not common:
            return None
    return min(common) if common else None


def waterfill(amount: float, claims: list[tuple[str, float, float]]) -> dict[str, float]:
    """Weighted max-min split of ``amount``: each ``(key, weight, claim)`` gets ``min(w*level, claim)``.

    Claims in increasing ``claim / weight``: while the smallest is met at the current
    level it is granted and leaves (which only raises the level); the rest share what
    remains in proportion to their weights. ``claim`` may be ``inf``.
    """
    order = sorted(claims, key=lambda c: c[2] / c[1])
    out: dict[str, float] = {}
    remaining = amount
    total_w = sum(w for _, w, _ in claims)
    idx = 0
    while idx < len(order):
        key, w, claim = order[idx]
        if claim > w * remaining / total_w:
            break
        out[key] = claim
        remaining -= claim
        total_w -= w
        idx += 1
    level = remaining / total_w if total_w > 0 else 0.0
    for key, w, _claim in order[idx:]:
        out[key] = w * level
    return out


def bottleneck_shares(ctx: AuditContext, k: int) -> dict[str, float]:
    """Each job's weighted (flat) or hierarchical max-min share of resource ``k``."""
    scenario = ctx.scenario
    claim = {job.name: ctx.cap(job) * ctx.demand(job.name)[k] for job in scenario.jobs}
    if not ctx.policy.hierarchical:
        return waterfill(scenario.capacity[k], [(j.name, j.weight, claim[j.name]) for j in scenario.jobs])
    queues = scenario.queues
    jobs_in: dict[str, list[Job]] = {}
    below: dict[str, float] = {}
    for job in scenario.jobs:
        jobs_in.setdefault(job.queue, []).append(job)
        for path in queues.ancestors(job.queue):
            below[path] = below.get(path, 0.0) + claim[job.name]
    shares: dict[str, float] = {}

    def split(path: str, amount: float) -> None:
        kids = [("q:" + c, queues[c].weight, below[c]) for c in queues[path].children if c in below]
        kids += [("j:" + j.name, j.weight, claim[j.name]) for j in jobs_in.get(path, [])]
        for key, part in waterfill(amount, kids).items():
            if key.startswith("q:"):
                split(key[2:], part)
            else:
                shares[key[2:]] = part

    split(ROOT, scenario.capacity[k])
    return shares


def check_bottleneck_fairness(ctx: AuditContext) -> PropertyResult:
    name = "bottleneck_fairness"
    if not ctx.scenario.jobs:
        return PropertyResult(name, None, None, "no jobs")
    k = common_bottleneck(ctx)
    if k is None:
        return PropertyResult(name, None, None, "not applicable: the jobs' dominant resources differ")
    res = ctx.resource(k)
    ck = ctx.scenario.capacity[k]
    shares = bottleneck_shares(ctx, k)
    worst = None
    violations = 0
    for job in ctx.scenario.jobs:
        if ctx.capped(job):
            continue
        got = ctx.allocation.jobs[job.name].allocation[k]
        fair = shares[job.name]
        need = fair - ctx.demand(job.name)[k] if ctx.discrete else fair  # discrete: within one task
        if exceeds(need, got, ck):
            violations += 1
            gap = (fair - got) / ck
            if worst is None or gap > worst[0]:
                worst = (gap, job, got, fair)
    how = "hierarchical" if ctx.policy.hierarchical else "weighted"
    if worst is None:
        return PropertyResult(name, True, None,
                              f"{res} is every job's dominant resource and every job gets its {how} "
                              f"max-min share of it")
    _, job, got, fair = worst
    witness = {"resource": res, "job": job.name, "amount": got, "fair_share": fair,
               "share_of_capacity": got / ck, "fair_share_of_capacity": fair / ck, "violations": violations}
    detail = (f"{res} is every job's dominant resource, but job {job.name} gets {_n(got)} {res} "
              f"({_n(got / ck)} of it), less than its {how} max-min share {_n(fair)} ({_n(fair / ck)})")
    return PropertyResult(name, False, witness, detail)


# ---------------------------------------------------------------------------------------
# strategy-proofness


def misreports(demand: Vector, capacity: Vector, resources: tuple[str, ...]) -> list[tuple[str, Vector]]:
    """The lies the search tries for one (composite) demand vector, labelled, deduplicated."""
    m = len(demand)
    shares = [(demand[r] / capacity[r]) if capacity[r] > 0 else 0.0 for r in range(m)]
    dom = max(shares)
    out: list[tuple[str, Vector]] = []

    def put(label: str, v: list[float]) -> None:
        out.append((label, tuple(v)))

    for r in range(m):
        if demand[r] > 0 and capacity[r] > 0:
            for f in SCALE_FACTORS:
                v = list(demand)
                v[r] = demand[r] * f
                put(f"{resources[r]} x{f:g}", v)
    for r in range(m):
        if demand[r] == 0 and capacity[r] > 0:
            for f in UNUSED_SHARES:
                v = list(demand)
                v[r] = f * dom * capacity[r]
                put(f"{resources[r]} {v[r]:.4g} (unused)", v)
    lower = [r for r in range(m) if capacity[r] > 0 and exceeds(dom, shares[r], 0.0)]
    for r in lower:
        if demand[r] == 0:
            continue  # covered by the unused-resource lies
        for t in TOWARD_DOMINANT:
            v = list(demand)
            v[r] = (shares[r] + t * (dom - shares[r])) * capacity[r]
            put(f"{resources[r]} {'half-way' if t < 1 else 'up'} to the dominant share", v)
    if len(lower) > 1:
        put("every resource at the dominant share", [dom * c if c > 0 else d for d, c in zip(demand, capacity)])
    seen = {_key(demand)}
    unique = []
    for label, v in out:
        if _key(v) not in seen:
            seen.add(_key(v))
            unique.append((label, v))
    return unique


def _key(v: Vector) -> tuple[float, ...]:
    return tuple(round(x, 12) for x in v)


def lie(job: Job, reported: Vector) -> Job:
    """``job`` reporting composite demand ``reported``: every class scaled alike per resource."""
    d = job.composite_demand()
    classes = []
    for c in job.classes:
        new = tuple(c.demand[r] * (reported[r] / d[r]) if d[r] > 0 else reported[r] for r in range(len(d)))
        classes.append(replace(c, demand=new))
    return replace(job, classes=tuple(classes))


def check_strategy_proofness(ctx: AuditContext) -> PropertyResult:
    name = "strategy_proofness"
    searched = ctx.searched_jobs()
    tried = 0
    worst = None
    for job_name in searched:
        job = ctx.job(job_name)
        d = ctx.demand(job_name)  # the true demand the liar's bundle is valued in
        truthful = ctx.utility(ctx.allocation, job_name, d, job)
        unit = ctx.unit(job_name)
        declared = job.composite_demand()  # lies are told about the declared classes
        for label, reported in misreports(declared, ctx.scenario.capacity, ctx.scenario.resources):
            liar = lie(job, reported)
            alloc = ctx.reallocate(ctx.scenario.with_job(liar))
            tried += 1
            lying = ctx.utility(alloc, job_name, d, liar)
            if exceeds(lying, truthful, unit):
                gain = (lying - truthful) / unit
                if worst is None or gain > worst[0]:
                    worst = (gain, job, label, reported, truthful, lying, alloc.jobs[job_name].tasks)
    scope = (f"searched {tried} misreports of {len(searched)} of {len(ctx.scenario.jobs)} jobs "
             f"(a search, not a proof)")
    if worst is None:
        return PropertyResult(name, True, None, f"no misreported demand gained; {scope}")
    _, job, label, reported, truthful, lying, reported_tasks = worst
    d = job.composite_demand()
    witness = {"job": job.name, "lie": label, "true_demand": ctx.mapping(d),
               "reported_demand": ctx.mapping(reported), "truthful_tasks": truthful, "lying_tasks": lying,
               "reported_tasks": reported_tasks, "misreports_searched": tried, "jobs_searched": len(searched)}
    detail = (f"job {job.name} reporting {_fmt_vec(ctx, reported)} instead of {_fmt_vec(ctx, d)} ({label}) "
              f"runs {_n(lying)} true tasks instead of {_n(truthful)}; {scope}")
    return PropertyResult(name, False, witness, detail)


# ---------------------------------------------------------------------------------------
# hierarchical share guarantee


def check_hierarchical_share_guarantee(ctx: AuditContext) -> PropertyResult:
    name = "hierarchical_share_guarantee"
    scenario = ctx.scenario
    if not scenario.queues.paths:
        return PropertyResult(name, None, None, "not applicable: the scenario has no queues")
    if not scenario.jobs:
        return PropertyResult(name, True, None, "no jobs")
    queue_g, job_g = hierarchical_guarantees(scenario)
    alloc = ctx.allocation
    cap = scenario.capacity

    def task_share(job: Job) -> float:  # dominant share of one (largest) task: the discrete slack
        return max(max((c.demand[r] / cap[r]) for r in range(scenario.m) if cap[r] > 0) for c in job.classes)

    # (kind, key, dominant share, guarantee, still demanding, discrete slack)
    nodes: list[tuple[str, str, float, float, bool, float]] = []
    for path, g in queue_g.items():
        below = [j for j in scenario.jobs if j.queue == path or j.queue.startswith(path + ".")]
        demanding = any(not ctx.capped(j) for j in below)
        slack = max(task_share(j) for j in below) if ctx.discrete else 0.0
        nodes.append(("queue", path, alloc.queues[path].dominant_share, g, demanding, slack))
    for job in scenario.jobs:
        slack = task_share(job) if ctx.discrete else 0.0
        nodes.append(("job", job.name, alloc.jobs[job.name].dominant_share, job_g[job.name],
                      not ctx.capped(job), slack))
    worst = None
    violations = 0
    for kind, key, share, g, demanding, slack in nodes:
        if demanding and exceeds(g, share + slack, 1.0):
            violations += 1
            if worst is None or g - share > worst[0]:
                worst = (g - share, kind, key, share, g)
    if worst is None:
        return PropertyResult(name, True, None,
                              f"every demanding queue and job has at least its guaranteed dominant share "
                              f"({_count(len(queue_g), 'queue')}, {_count(len(job_g), 'job')})")
    _, kind, key, share, g = worst
    path = _guarantee_path(scenario, kind, key, queue_g, job_g)
    witness = {"node": key, "kind": kind, "dominant_share": share, "guarantee": g, "path": path,
               "violations": violations}
    chain = " x ".join(f"{_n(step['fraction'])} ({step['node']})" for step in path)
    note = _queue_note(ctx, scenario.job(key)) if kind == "job" else ""
    detail = (f"{kind} {key} has dominant share {_n(share)}, less than its guarantee {_n(g)} = {chain}{note}")
    return PropertyResult(name, False, witness, detail)


def _guarantee_path(scenario: Scenario, kind: str, key: str, queue_g, job_g) -> list[dict]:
    """The factors of a guarantee, root first: each node and its fraction of its parent."""
    steps = []
    if kind == "job":
        job = scenario.job(key)
        parent_g = queue_g.get(job.queue, 1.0)
        steps.append({"node": key, "fraction": job_g[key] / parent_g})
        path = job.queue
    else:
        path = key
    while path != ROOT:
        parent = scenario.queues[path].parent
        steps.append({"node": path, "fraction": queue_g[path] / queue_g.get(parent, 1.0)})
        path = parent
    return list(reversed(steps))


# ---------------------------------------------------------------------------------------
# population monotonicity


def check_population_monotonicity(ctx: AuditContext) -> PropertyResult:
    name = "population_monotonicity"
    searched = ctx.searched_jobs() if len(ctx.scenario.jobs) > 1 else []
    worst = None
    violations = 0
    for removed in searched:
        after = ctx.reallocate(ctx.scenario.without_job(removed))
        for job in ctx.scenario.jobs:
            if job.name == removed:
                continue
            t0 = ctx.tasks(job.name)
            t1 = after.jobs[job.name].tasks
            unit = ctx.unit(job.name)
            if exceeds(t0, t1, unit):
                violations += 1
                drop = (t0 - t1) / unit
                if worst is None or drop > worst[0]:
                    worst = (drop, removed, job.name, t0, t1)
    scope = f"removed each of {len(searched)} of {len(ctx.scenario.jobs)} jobs in turn"
    if worst is None:
        return PropertyResult(name, True, None, f"no remaining job ran fewer tasks; {scope}")
    _, removed, hurt, t0, t1 = worst
    witness = {"removed": removed, "hurt": hurt, "before": t0, "after": t1, "violations": violations,
               "jobs_searched": len(searched)}
    detail = f"removing job {removed} drops job {hurt} from {_n(t0)} to {_n(t1)} tasks; {scope}"
    return PropertyResult(name, False, witness, detail)


#: property name -> its check, in the contract's order
# ---------------------------------------------------------------------------------------
# guarantees and limits


def check_guarantees_and_limits(ctx: AuditContext) -> PropertyResult:
    name = "guarantees_and_limits"
    scenario = ctx.scenario
    queues = scenario.queues
    if not queues.bounded:
        return PropertyResult(name, None, None, "not applicable: no queue has a guarantee or a limit")
    resources = scenario.resources
    cap = scenario.capacity
    problems: list[tuple[float, dict, str]] = []  # (how far off, relative to C_r; witness; detail)
    checked = 0
    for path in queues.paths:
        node = queues[path]
        if not (node.guarantee or node.limit):
            continue
        checked += 1
        below = [j for j in scenario.jobs if j.queue == path or j.queue.startswith(path + ".")]
        held = ctx.allocation.queues[path].allocation
        for res, g in node.guarantee:
            r = resources.index(res)
            can_use = sum(ctx.cap(j) * ctx.demand(j.name)[r] for j in below if ctx.demand(j.name)[r] > 0)
            owed = min(g, can_use)
            slack = max((c.demand[r] for j in below for c in j.classes), default=0.0) if ctx.discrete else 0.0
            if exceeds(owed, held[r] + slack, cap[r]):
                witness = {"queue": path, "resource": res, "allocation": held[r], "guarantee": g,
                           "demand_can_use": can_use}
                problems.append(((owed - held[r]) / cap[r] if cap[r] > 0 else 1.0, witness,
                                 f"queue {path} holds {_n(held[r])} {res}, less than min(guarantee "
                                 f"{_n(g)}, what its jobs can use {_n(can_use)})"))
        for res, lim in node.limit:
            r = resources.index(res)
            if exceeds(held[r], lim, cap[r]):
                witness = {"queue": path, "resource": res, "allocation": held[r], "limit": lim}
                problems.append(((held[r] - lim) / cap[r] if cap[r] > 0 else 1.0, witness,
                                 f"queue {path} holds {_n(held[r])} {res}, more than its limit {_n(lim)}"))
    if not problems:
        return PropertyResult(name, True, None, f"every guarantee met up to what the jobs can use and every limit "
                                                f"kept ({_count(checked, 'bounded queue')})")
    problems.sort(key=lambda p: -p[0])
    _, witness, detail = problems[0]
    witness["violations"] = len(problems)
    return PropertyResult(name, False, witness, detail)


CHECKS: dict[str, Callable[[AuditContext], PropertyResult]] = {
    "sharing_incentive": check_sharing_incentive,
    "envy_freeness": check_envy_freeness,
    "pareto_efficiency": check_pareto_efficiency,
    "bottleneck_fairness": check_bottleneck_fairness,
    "strategy_proofness": check_strategy_proofness,
    "hierarchical_share_guarantee": check_hierarchical_share_guarantee,
    "population_monotonicity": check_population_monotonicity,
    "guarantees_and_limits": check_guarantees_and_limits,
}
