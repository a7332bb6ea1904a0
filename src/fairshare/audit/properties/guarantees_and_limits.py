"""``guarantees_and_limits`` (docs/policies.md, "Guarantees and limits").

fairshare's extension: no paper defines it.

Null without queue bounds. Every queue with a guarantee holds at least ``min(G_qr, D_qr)``
of each guaranteed resource r, ``D_qr`` being what its jobs can use (``sum cap_i d_ir``
over the jobs below; unbounded without ``respect_counts``), and no queue holds more than
its limit. Discrete: a guarantee is met when one more task of the queue's largest demand
of r would reach it (whole tasks cannot stop exactly at it).
"""

from __future__ import annotations

from fairshare.audit.properties.context import AuditContext, exceeds
from fairshare.audit.properties.wording import counted, number
from fairshare.audit.report import PropertyResult


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
                                 f"queue {path} holds {number(held[r])} {res}, less than min(guarantee "
                                 f"{number(g)}, what its jobs can use {number(can_use)})"))
        for res, lim in node.limit:
            r = resources.index(res)
            if exceeds(held[r], lim, cap[r]):
                witness = {"queue": path, "resource": res, "allocation": held[r], "limit": lim}
                problems.append(((held[r] - lim) / cap[r] if cap[r] > 0 else 1.0, witness,
                                 f"queue {path} holds {number(held[r])} {res}, more than its limit {number(lim)}"))
    if not problems:
        return PropertyResult(name, True, None, f"every guarantee met up to what the jobs can use and every limit "
                                                f"kept ({counted(checked, 'bounded queue')})")
    problems.sort(key=lambda p: -p[0])
    _, witness, detail = problems[0]
    witness["violations"] = len(problems)
    return PropertyResult(name, False, witness, detail)
