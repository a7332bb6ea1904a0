"""``bottleneck_fairness`` (DRF Sec. 3, Thm 10).

Ghodsi et al., "Dominant Resource Fairness", NSDI 2011 (DRF).

Applies (``holds`` not null) only when one resource k is "percent-wise demanded most" by
every job (``d_ik/C_k`` maximal, ties allowed). Then the allocation of k must be weighted
max-min fair: every uncapped job gets at least its water-fill share of k, each job's claim
on k being ``cap_i d_ik``. Flat policies fill with job weights; hierarchical policies fill
the queue tree level by level (the single-resource case of H-DRF, Bhattacharya et al.,
SoCC 2013, is hierarchical max-min fairness), queue weights over demanding siblings.
Discrete: within one task of the share.
"""

from __future__ import annotations

from fairshare.audit.properties.context import AuditContext, exceeds
from fairshare.audit.properties.wording import number
from fairshare.audit.report import PropertyResult
from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT


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
    detail = (f"{res} is every job's dominant resource, but job {job.name} gets {number(got)} {res} "
              f"({number(got / ck)} of it), less than its {how} max-min share {number(fair)} ({number(fair / ck)})")
    return PropertyResult(name, False, witness, detail)
