"""``sharing_incentive`` (DRF Sec. 3).

Ghodsi et al., "Dominant Resource Fairness", NSDI 2011 (DRF).

Every uncapped job runs at least the tasks it could run on its own partition, ``e_i`` of
every resource: ``tasks_i >= min(cap_i, min_r e_i C_r / d_ir)``. For hierarchical
policies H-DRF (Bhattacharya et al., SoCC 2013) Thm 2 says the hierarchical share
guarantee implies it. Discrete: the partition is ``e_i`` of every node the job may run on
and holds ``sum_nodes floor(min_r e_i C_nr / d_ir)`` tasks.
"""

from __future__ import annotations

from fairshare.audit.properties.context import AuditContext, exceeds, tasks_in, whole
from fairshare.audit.properties.wording import counted, number, queue_note
from fairshare.audit.report import PropertyResult
from fairshare.model.cluster import satisfies
from fairshare.model.jobs import Job


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
                              f"e_i of every resource), {counted(len(ctx.scenario.jobs), 'job')}")
    _, job, t, bound, e = worst
    witness = {"job": job.name, "queue": job.queue, "tasks": t, "partition_tasks": bound,
               "entitlement": e, "violations": violations}
    detail = (f"job {job.name} runs {number(t)} tasks, fewer than the {number(bound)} it could run on its own "
              f"partition ({number(e)} of every resource){queue_note(ctx, job)}"
              + (f"; {violations} jobs short in all" if violations > 1 else ""))
    return PropertyResult(name, False, witness, detail)


def _eligible_for_job(node, job: Job) -> bool:
    attrs = dict(node.attributes)
    mix = job.class_mix()
    return all(satisfies(attrs, c.constraints) for c, f in zip(job.classes, mix) if f > 0)
