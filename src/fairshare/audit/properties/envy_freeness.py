"""``envy_freeness`` (DRF Sec. 3, Thm 11).

Ghodsi et al., "Dominant Resource Fairness", NSDI 2011 (DRF).

Job i envies job j when i could run more tasks with j's allocation scaled by their
weights, ``min_r (a_jr w_i/w_j) / d_ir > tasks_i``, and i is not capped. Flat policies:
every pair of jobs. Hierarchical policies: pairs of jobs in the same queue only (there
``w_i/w_j`` is also the ratio of their entitlements). Across queues a hierarchy
deliberately treats jobs differently (a job alone in its queue gets what ten jobs of
another queue share); what it promises there is the hierarchical share guarantee
(:mod:`~fairshare.audit.properties.hierarchical_share_guarantee`). (Scaling cross-queue
pairs by the entitlement ratio instead flags H-DRF whenever a queue's resources are
dovetailed, e.g. H-DRF Fig. 4, which no paper calls envy.) Discrete: whole tasks in the
pooled bundle.
"""

from __future__ import annotations

import numpy as np

from fairshare.audit.properties.context import RTOL, AuditContext
from fairshare.audit.properties.wording import counted, number, queue_note
from fairshare.audit.report import PropertyResult


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
                              f"({counted(n, 'job')}, compared among {among})")
    _, job, other, t, x, scale = worst
    witness = {"job": job.name, "envies": other.name, "tasks": t, "tasks_with_other_allocation": x,
               "scale": scale, "violations": violations}
    scaled = "" if abs(scale - 1.0) <= RTOL else f" scaled by {number(scale)}"
    detail = (f"job {job.name} runs {number(t)} tasks but could run {number(x)} with job {other.name}'s "
              f"allocation{scaled}{queue_note(ctx, job)}"
              + (f"; {violations} envious pairs in all" if violations > 1 else ""))
    return PropertyResult(name, False, witness, detail)
