"""``hierarchical_share_guarantee`` (H-DRF Sec. 2.1 and 4.1, Thm 2).

Bhattacharya et al., "Hierarchical Scheduling for Diverse Datacenter Workloads", SoCC 2013
(H-DRF).

Null without queues. Every queue with jobs below it and every job that still demands (not
capped, resp. some job below not capped) has dominant share (unweighted, of the pooled
capacity) at least its guarantee, the product along its path of ``w / sum(w of demanding
siblings)``. Checked for every policy: a flat policy may violate it, which is the point
of H-DRF Sec. 3.2. A job in a ``fifo`` queue is checked like any other; a violation there
is the queue's order at work, and the detail says so. Discrete: met when one more of
its (or its jobs') largest tasks would reach it.
"""

from __future__ import annotations

from fairshare.audit.properties.context import AuditContext, exceeds, hierarchical_guarantees
from fairshare.audit.properties.wording import counted, number, queue_note
from fairshare.audit.report import PropertyResult
from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT
from fairshare.model.scenario import Scenario


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
                              f"({counted(len(queue_g), 'queue')}, {counted(len(job_g), 'job')})")
    _, kind, key, share, g = worst
    path = _guarantee_path(scenario, kind, key, queue_g, job_g)
    witness = {"node": key, "kind": kind, "dominant_share": share, "guarantee": g, "path": path,
               "violations": violations}
    chain = " x ".join(f"{number(step['fraction'])} ({step['node']})" for step in path)
    note = queue_note(ctx, scenario.job(key)) if kind == "job" else ""
    detail = (f"{kind} {key} has dominant share {number(share)}, less than its guarantee {number(g)} = {chain}{note}")
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
