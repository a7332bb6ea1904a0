"""``population_monotonicity`` (DRF Sec. 3, Thm 5, Thm 14; H-DRF Sec. 4.3, Thm 5, Fig. 6/7).

Ghodsi et al., "Dominant Resource Fairness", NSDI 2011 (DRF); Bhattacharya et al.,
"Hierarchical Scheduling for Diverse Datacenter Workloads", SoCC 2013 (H-DRF).

Remove each of up to ``max_jobs_searched`` jobs in turn (the same choice as the
strategy-proofness search) and recompute; violated if a remaining job's tasks drop.
H-DRF's definition also covers internal nodes; we compare jobs (a queue's loss shows in
its jobs).
"""

from __future__ import annotations

from fairshare.audit.properties.context import AuditContext, exceeds
from fairshare.audit.properties.wording import number
from fairshare.audit.report import PropertyResult


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
    detail = f"removing job {removed} drops job {hurt} from {number(t0)} to {number(t1)} tasks; {scope}"
    return PropertyResult(name, False, witness, detail)
