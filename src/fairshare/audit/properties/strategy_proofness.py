"""``strategy_proofness`` (DRF Sec. 3, Thm 12; CEEI's failure Thm 4).

Ghodsi et al., "Dominant Resource Fairness", NSDI 2011 (DRF).

A *search*, not a proof. For up to ``max_jobs_searched`` jobs (all if few, else the first
by name) we try misreported demand vectors: each used resource scaled by 0.5, 0.8, 1.25,
2, 4, 8; demand added for each resource the job does not use (1/4 and 1 times its
dominant share per task); each non-dominant resource raised half-way and all the way to
the dominant share; every resource at the dominant share. A single-class job lies about
its one class; a multiclass job's classes are all scaled alike, so the composite demand
is the lie (class counts are untouched). The liar's true utility is the tasks of its true
demand that its allocation holds, ``min(cap, min_r a_r / d_r)`` (discrete: whole tasks
per node). Violated if a lie gains.
"""

from __future__ import annotations

from dataclasses import replace

from fairshare.audit.properties.context import AuditContext, exceeds
from fairshare.audit.properties.wording import number, vector
from fairshare.audit.report import PropertyResult
from fairshare.model.jobs import Job
from fairshare.model.resources import Vector


#: strategy-proofness search: factors applied to one used resource's demand
SCALE_FACTORS = (0.5, 0.8, 1.25, 2.0, 4.0, 8.0)
#: ... per-task share claimed on an unused resource, in units of the dominant share
UNUSED_SHARES = (0.25, 1.0)
#: ... how far a non-dominant resource is raised toward the dominant share
TOWARD_DOMINANT = (0.5, 1.0)


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
    detail = (f"job {job.name} reporting {vector(ctx, reported)} instead of {vector(ctx, d)} ({label}) "
              f"runs {number(lying)} true tasks instead of {number(truthful)}; {scope}")
    return PropertyResult(name, False, witness, detail)
