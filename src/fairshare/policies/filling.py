"""Exact hierarchical progressive filling: the static allocation of the filling policies.

DRF's progressive filling (Ghodsi et al., Appendix A.1) and static H-DRF (Bhattacharya
et al., Sec. 3.1, Alg. 1) both grow allocations by thin slivers epsilon: descend from the
root, at each node take the demanding child with the lowest share, give the leaf a
sliver that raises its dominant share by epsilon, stop a leaf when a resource it needs is
saturated. DFF (Wang et al., Alg. 1-3) and Asset Fairness (Ghodsi et al., Sec. 5.1) are
the same process with another share function. This module computes the limit
epsilon -> 0 *exactly*: between events every allocation grows linearly, so we compute
the rates, jump to the next event and repeat. No small steps are taken.

Parametrisation. The "flow" tau counts leaf dominant-share increments, the unit of one
epsilon step of Alg. 1: a leaf receiving flow f grows its unweighted dominant share
``s = max_r U_r / R_r`` at rate f and its usage at ``f * rho`` with
``rho = d / max_r(d_r / R_r)``. The root receives flow 1.

Levels. Every node has a *level*: the quantity the policy equalises between siblings.
``dominant`` rule: ``max_r U_r / ref_r`` (H-DRF/DRF: ``ref = weight * R``; DFF:
``ref = FR``, the node's Fair Resource vector; resources with ``ref_r == 0`` are not
counted). ``sum`` rule: ``sum_r U_r / ref_r`` (Asset Fairness). DFF additionally applies
Alg. 2 line 9: a node whose fairness exceeds 1 takes the lowest fairness among its
schedulable children when that is lower.

Splitting the flow at a node (the continuous limit of "pick the lowest child"):

* the *receiving* children are the non-blocked children whose level is the lowest
  (ties within ``TIE_RTOL``); in a ``fifo`` node only its earliest non-blocked job
  competes, queued jobs behind it wait;
* receiving children keep equal levels, so each gets flow inversely proportional to
  ``kappa_c`` (level growth per unit of flow);
* a child whose level does not grow with flow (``kappa_c == 0``, e.g. its share is held
  by a resource only its blocked jobs use) *absorbs*: it stays the lowest, so in the
  epsilon process it is picked every time until its level starts to grow. It takes all
  the flow; several absorbing siblings split it equally (the expectation of the paper's
  random tie-break, one epsilon step each).

Events (each ends a phase of constant rates): a resource saturates (every unfrozen leaf
that needs it becomes blocked, H-DRF Sec. 3.4 "blocked"), a leaf reaches its task count
(``respect_counts``), a waiting child's level is reached by its receiving siblings, a
node's dominant resource changes, or a DFF node crosses its override threshold.

Costs: each phase is O(nodes x resources); the number of phases is bounded by the
number of leaves, resources and dominant-resource switches (see docs/performance.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fairshare.model.resources import Vector

#: two levels closer than this (relative) are equal: the tie-break of the limit process
TIE_RTOL = 1e-10
#: a usage this close (relative) to capacity saturates the resource
SAT_RTOL = 1e-11
_TINY = 1e-300


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TIE_RTOL * max(1.0, abs(a), abs(b))


@dataclass
class FillTree:
    """The hierarchy handed to :func:`fill`: node 0 is the root.

    Leaves carry a composite per-task ``demand``; every node carries its reference
    vector ``ref`` for the level rule. ``children`` lists are in the order used for
    FIFO queues and for reports.
    """

    resources: int
    capacity: Vector
    keys: list[str] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    children: list[list[int]] = field(default_factory=list)
    is_leaf: list[bool] = field(default_factory=list)
    fifo: list[bool] = field(default_factory=list)
    ref: list[Vector] = field(default_factory=list)
    demand: list[Vector | None] = field(default_factory=list)
    cap_tasks: list[float | None] = field(default_factory=list)

    def add(self, key: str, parent: int, *, ref: Vector, leaf: bool = False, fifo: bool = False,
            demand: Vector | None = None, cap_tasks: float | None = None) -> int:
        idx = len(self.keys)
        self.keys.append(key)
        self.parent.append(parent)
        self.children.append([])
        self.is_leaf.append(leaf)
        self.fifo.append(fifo)
        self.ref.append(ref)
        self.demand.append(demand)
        self.cap_tasks.append(cap_tasks)
        if parent >= 0:
            self.children[parent].append(idx)
        return idx


@dataclass(frozen=True)
class FillResult:
    tasks: dict[str, float]  # leaf key -> composite tasks
    saturated: tuple[int, ...]  # resources saturated at the end, in the order they saturated
    phases: int


@dataclass(frozen=True)
class LevelRule:
    kind: str = "dominant"  # "dominant" or "sum"
    dff_override: bool = False  # DFF Alg. 2 line 9


def fill(tree: FillTree, rule: LevelRule = LevelRule(), *, stop_at_first_saturation: bool = False,
         max_phases: int | None = None) -> FillResult:
    """Run the exact progressive filling on ``tree`` and return each leaf's tasks."""
    n = len(tree.keys)
    m = tree.resources
    cap = tree.capacity
    leaves = [i for i in range(n) if tree.is_leaf[i]]

    # Per-leaf constants: rho (usage per unit of flow), delta (dominant share of one task).
    rho: list[Vector] = [()] * n
    delta = [0.0] * n
    cap_s = [math.inf] * n
    for i in leaves:
        d = tree.demand[i]
        assert d is not None and len(d) == m
        dl = max((d[r] / cap[r] for r in range(m) if cap[r] > 0), default=0.0)
        if dl <= 0:
            raise ValueError(f"leaf {tree.keys[i]!r} demands nothing")
        delta[i] = dl
        rho[i] = tuple(x / dl for x in d)
        if tree.cap_tasks[i] is not None:
            cap_s[i] = tree.cap_tasks[i] * dl

    # Post-order (children before parents) for bottom-up passes.
    order: list[int] = []
    stack = [0]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(tree.children[v])
    order.reverse()

    s = [0.0] * n  # leaf dominant shares (flow units)
    frozen = [False] * n
    saturated: list[int] = []
    sat = [False] * m
    for i in leaves:
        if cap_s[i] <= 0:
            frozen[i] = True

    def level_of(u: Vector, ref: Vector) -> float:
        if rule.kind == "sum":
            return sum(u[r] / ref[r] for r in range(m) if ref[r] > 0)
        return max((u[r] / ref[r] for r in range(m) if ref[r] > 0), default=0.0)

    limit = max_phases if max_phases is not None else 50 * (n + 1) * (m + 1) + 1000
    phases = 0
    while True:
        phases += 1
        if phases > limit:
            raise RuntimeError(f"progressive filling did not converge in {limit} phases")

        # ---- state: usage, blocked flags and levels, bottom-up -------------------
        usage: list[list[float]] = [[0.0] * m for _ in range(n)]
        blocked = [True] * n
        raw = [0.0] * n  # level by the rule alone
        level = [0.0] * n  # level after the DFF override
        for v in order:
            if tree.is_leaf[v]:
                sv = s[v]
                usage[v] = [sv * x for x in rho[v]]
                blocked[v] = frozen[v]
            else:
                acc = usage[v]
                for c in tree.children[v]:
                    uc = usage[c]
                    for r in range(m):
                        acc[r] += uc[r]
                    if not blocked[c]:
                        blocked[v] = False
            raw[v] = level_of(usage[v], tree.ref[v])
            level[v] = raw[v]
            if rule.dff_override and not tree.is_leaf[v] and raw[v] > 1.0 and not _close(raw[v], 1.0):
                live = [level[c] for c in tree.children[v] if not blocked[c]]
                if live and min(live) < raw[v]:
                    level[v] = min(live)
        if blocked[0]:
            break

        # ---- receiving sets and responses, bottom-up ---------------------------------
        # resp_rho[v]: usage rate per unit of flow into v; kappa[v]: level rate per flow;
        # split[v]: list of (child, fraction of v's flow); vrate[v]: common level rate of
        # v's receiving children per unit of flow into v.
        resp_rho: list[Vector] = [()] * n
        kappa = [0.0] * n
        raw_kappa = [0.0] * n
        split: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        vrate = [0.0] * n
        receiving_level = [0.0] * n
        for v in order:
            if blocked[v]:
                continue
            if tree.is_leaf[v]:
                resp_rho[v] = rho[v]
                raw_kappa[v] = kappa[v] = _rate(rho[v], usage[v], tree.ref[v], rule, m)
                continue
            live = [c for c in tree.children[v] if not blocked[c]]
            if tree.fifo[v]:
                # FIFO queue: only the earliest non-blocked job competes; sub-queues compete as usual.
                first_leaf = next((c for c in live if tree.is_leaf[c]), None)
                live = [c for c in live if not tree.is_leaf[c] or c == first_leaf]
            low = min(level[c] for c in live)
            rec = [c for c in live if _close(level[c], low)]
            receiving_level[v] = low
            absorbing = [c for c in rec if kappa[c] <= _TINY]
            if absorbing:
                frac = 1.0 / len(absorbing)
                split[v] = [(c, frac) for c in absorbing]
                vrate[v] = 0.0
            else:
                inv = [1.0 / kappa[c] for c in rec]
                tot = sum(inv)
                split[v] = [(c, w / tot) for c, w in zip(rec, inv)]
                vrate[v] = 1.0 / tot
            acc = [0.0] * m
            for c, frac in split[v]:
                rc = resp_rho[c]
                for r in range(m):
                    acc[r] += frac * rc[r]
            resp_rho[v] = tuple(acc)
            raw_kappa[v] = _rate(resp_rho[v], usage[v], tree.ref[v], rule, m)
            kappa[v] = vrate[v] if (rule.dff_override and level[v] < raw[v]) else raw_kappa[v]

        # ---- flows, top-down -----------------------------------------------------------
        flow = [0.0] * n
        flow[0] = 1.0
        for v in reversed(order):  # pre-order: parents before children
            fv = flow[v]
            if fv <= 0 or tree.is_leaf[v]:
                continue
            for c, frac in split[v]:
                flow[c] = fv * frac

        # ---- next event ------------------------------------------------------------------
        best = math.inf
        total_rate = [flow[0] * x for x in resp_rho[0]]
        for r in range(m):
            if not sat[r] and total_rate[r] > _TINY:
                best = min(best, max(0.0, (cap[r] - usage[0][r]) / total_rate[r]))
        for i in leaves:
            if flow[i] > 0 and cap_s[i] < math.inf:
                best = min(best, max(0.0, (cap_s[i] - s[i]) / flow[i]))
        for v in order:
            fv = flow[v]
            if fv <= 0 or tree.is_leaf[v]:
                continue
            # waiting siblings reached by the receiving level
            lr = fv * vrate[v]
            if lr > _TINY:
                for c in tree.children[v]:
                    if blocked[c] or any(c == x for x, _ in split[v]):
                        continue
                    if tree.fifo[v] and tree.is_leaf[c]:
                        continue  # queued FIFO jobs are not reached by level
                    gap = level[c] - receiving_level[v]
                    if gap > 0:
                        best = min(best, gap / lr)
            # dominant-resource switch (and, for DFF, the override thresholds)
            if rule.kind == "dominant":
                ref = tree.ref[v]
                u = usage[v]
                cur = raw[v]
                rk = fv * raw_kappa[v]
                for r in range(m):
                    if ref[r] <= 0:
                        continue
                    rr = fv * resp_rho[v][r] / ref[r]
                    gap = cur - u[r] / ref[r]
                    if rr > rk + _TINY and gap > 0 and not _close(cur, u[r] / ref[r]):
                        best = min(best, gap / (rr - rk))
                if rule.dff_override:
                    child_rate = fv * vrate[v]
                    if raw[v] < 1.0 and not _close(raw[v], 1.0) and rk > _TINY:
                        best = min(best, (1.0 - raw[v]) / rk)
                    if raw[v] > 1.0 or _close(raw[v], 1.0):
                        gap = raw[v] - receiving_level[v]
                        if level[v] < raw[v] and child_rate > rk + _TINY and gap > 0:
                            best = min(best, gap / (child_rate - rk))  # override ends
                        if level[v] >= raw[v] and rk > child_rate + _TINY and -gap > 0:
                            best = min(best, -gap / (rk - child_rate))  # override begins
            elif rule.dff_override:
                raise ValueError("the DFF override needs the dominant level rule")
        if best == math.inf:
            # Nothing grows any more: every receiving leaf is at a count cap or saturated.
            break

        # ---- advance ---------------------------------------------------------------------
        for i in leaves:
            if flow[i] > 0:
                s[i] += best * flow[i]
                if s[i] >= cap_s[i] * (1 - SAT_RTOL):
                    s[i] = cap_s[i]
                    frozen[i] = True
        totals = [0.0] * m
        for i in leaves:
            for r in range(m):
                totals[r] += s[i] * rho[i][r]
        newly = [r for r in range(m) if not sat[r] and totals[r] >= cap[r] * (1 - SAT_RTOL)]
        if newly:
            for r in newly:
                sat[r] = True
                saturated.append(r)
            for i in leaves:
                if not frozen[i] and any(rho[i][r] > 0 for r in newly):
                    frozen[i] = True
            if stop_at_first_saturation:
                break

    tasks = {tree.keys[i]: s[i] / delta[i] for i in leaves}
    return FillResult(tasks, tuple(saturated), phases)


def _rate(rho: Vector, usage, ref: Vector, rule: LevelRule, m: int) -> float:
    """Level growth per unit of flow for a node whose usage grows at ``rho``.

    For the dominant rule this is the right-derivative of ``max_r U_r/ref_r``: the largest
    growth rate among the resources currently tied for the maximum.
    """
    if rule.kind == "sum":
        return sum(rho[r] / ref[r] for r in range(m) if ref[r] > 0)
    shares = [(usage[r] / ref[r]) if ref[r] > 0 else -math.inf for r in range(m)]
    top = max(shares)
    if top == -math.inf:
        return 0.0
    return max(rho[r] / ref[r] for r in range(m) if ref[r] > 0 and _close(shares[r], top))
