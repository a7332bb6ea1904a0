"""``pareto_efficiency`` (DRF Sec. 3, Thm 9).

Ghodsi et al., "Dominant Resource Fairness", NSDI 2011 (DRF).

Divisible: an LP (HiGHS) maximises the (scale-normalised) sum of tasks subject to
capacity (and queue limits), every job keeping at least its current tasks, and caps;
violated if some job can gain. Jobs grow along their demand vectors (resources a job
does not use have no value to it). Discrete: no uncapped job's next task (any of its
classes) fits in the leftover of a node where the class may run.
"""

from __future__ import annotations

import math

import numpy as np

from fairshare.audit.properties.context import AuditContext, exceeds
from fairshare.audit.properties.wording import counted, number, vector
from fairshare.audit.report import PropertyResult
from fairshare.model.cluster import satisfies
from fairshare.model.resources import fits

#: relative slack of the Pareto LP's bounds around the allocation under audit (its float
#: noise must not make the LP infeasible); far below RTOL. An LP bound, not a fit test.
_LP_SLACK = 1e-9


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
        over = [f"{ctx.resource(r)} {number(used[r])} > {number(cap_vec[r])}" for r in range(len(cap_vec))
                if exceeds(used[r], cap_vec[r], cap_vec[r])]
        return PropertyResult(name, None, None, "not checked: the allocation exceeds the capacity"
                              + (f" ({', '.join(over)})" if over else ""))
    if res.status != 0:
        raise RuntimeError(f"Pareto LP failed: {res.message}")
    gains = [(res.x[i] * units[i] - current[i], i) for i in range(len(jobs))]
    improvable = [(g / units[i], i) for g, i in gains if exceeds(current[i] + g, current[i], units[i])]
    if not improvable:
        return PropertyResult(name, True, None, f"no job can run more tasks without another running fewer "
                                                f"(LP over {counted(len(jobs), 'job')})")
    _, i = max(improvable)
    gain = gains[i][0]
    witness = {"job": jobs[i].name, "tasks": current[i], "could_run": current[i] + gain, "gain": gain,
               "jobs_that_can_gain": len(improvable)}
    detail = (f"job {jobs[i].name} could run {number(gain)} more tasks "
              f"({number(current[i])} -> {number(current[i] + gain)}) "
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
                    detail = (f"a {cls.name} task of job {job.name} ({vector(ctx, cls.demand)}) still fits on "
                              f"node {nd.name} (free {vector(ctx, tuple(free[nd.name]))})")
                    return PropertyResult(name, False, witness, detail)
    return PropertyResult(name, True, None, "no uncapped job's next task fits in any node's leftover")
