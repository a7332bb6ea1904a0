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
node's dominant resource changes, a DFF node crosses its override threshold, or a
waiting gang is reached ("Gangs" below).

Bounds (docs/policies.md, "Guarantees and limits"). ``groups`` are sets of leaves with a
cap per resource (a queue's limit, or its guarantee while guarantees are being filled):
a group whose usage of r reaches its cap blocks every leaf of the group that needs r,
exactly as a saturated resource blocks every leaf (an event like saturation, computed
the same way). ``start`` gives leaves tasks to start from and ``eligible`` the leaves that
may receive at all; :func:`fairshare.policies.machinery.bounds.bounded_fill` chains fills with them.

Gangs (``FillTree.gang``, a job with ``gang: true``). A gang is indivisible: it takes no
flow, and is admitted whole (its ``cap_tasks``, every task of it) at the event where it
is reached, if its whole demand still fits in what is left (and in its groups' caps),
else it is frozen at 0. The epsilon process with the whole gang as one sliver: the gang
waits at the level it would have with all of its demand, ``L_g``, so it is reached when
the level of its siblings being filled (its parent's receiving level) reaches ``L_g``
(one more event kind, computed like a waiting sibling's). When no job beside it is
being filled (its parent is blocked), the gang waits in its nearest blocked ancestor
``a`` instead, at ``a``'s level: reached when ``a``'s receiving siblings reach it, as a
waiting child is. In a FIFO node a gang is reached when it is the earliest of its
node's jobs still waiting (its turn). Gangs still waiting when nothing else grows are
taken in the order of the descent of Alg. 1 (lowest level at every node, then
``L_g``, then tree order), each admitted if it fits. Simultaneous admissions go in
order of their level, then tree order.

History (``FillTree.history``, docs/policies.md "Fairness with memory"). A node with
past usage ``p`` (an average allocation, ``model/usage.py``) has level
``max_r (U_r + p_r) / ref_r``: it enters the filling as if it already held ``p``,
which occupies no capacity (the usage kept per node starts at ``p``; the root, whose
usage is checked against the capacity, has none). Its level is then piecewise linear
in its flow with breakpoints where its dominant resource switches; a leaf's switches
are events too (without history a leaf's usage is proportional to its demand and
never switches).
A leaf whose level is held by a resource it does not demand absorbs the flow until
its demanded resources catch up (the epsilon process picks it every time meanwhile).

Costs: each phase is O(nodes x resources); the number of phases is bounded by the
number of leaves, resources and dominant-resource switches (see docs/performance.md).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from fairshare.model.resources import Vector, fits, within

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
    #: an indivisible leaf (a gang): it receives its ``cap_tasks`` at once or nothing
    #: (module docstring, "Gangs")
    gang: list[bool] = field(default_factory=list)
    #: node index -> its past usage as an average allocation, counted in its level and
    #: never in the capacity (module docstring, "History"); the root never has one
    history: dict[int, Vector] = field(default_factory=dict)

    def add(self, key: str, parent: int, *, ref: Vector, leaf: bool = False, fifo: bool = False,
            demand: Vector | None = None, cap_tasks: float | None = None, gang: bool = False) -> int:
        if gang and (not leaf or cap_tasks is None):
            raise ValueError(f"gang {key!r}: a gang is a leaf with a task count")
        idx = len(self.keys)
        self.keys.append(key)
        self.parent.append(parent)
        self.children.append([])
        self.is_leaf.append(leaf)
        self.fifo.append(fifo)
        self.ref.append(ref)
        self.demand.append(demand)
        self.cap_tasks.append(cap_tasks)
        self.gang.append(gang)
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
         max_phases: int | None = None, groups: Sequence[tuple[Sequence[int], Vector]] = (),
         start: Mapping[str, float] | None = None, eligible: Collection[int] | None = None) -> FillResult:
    """Run the exact progressive filling on ``tree`` and return each leaf's tasks.

    ``groups``: ``(leaf indices, cap per resource)`` (``inf``: no cap); ``start``: leaf key
    -> tasks it already holds (its usage counts from the beginning); ``eligible``: the
    leaves that may receive (None: all). See the module docstring, "Bounds".

    Incremental: a node's usage, level and response (how it splits and absorbs flow) are
    cached and recomputed in a phase only when the node received flow in the previous
    phase or a leaf below it became blocked; everything else is unchanged by definition.
    """
    return _Filling(tree, rule, groups, start, eligible).run(stop_at_first_saturation, max_phases)


class _Filling:
    """One run of :func:`fill`: the tree's constants, the filling's state, one method per step.

    A phase (:meth:`run`) routes the flow down the tree (:meth:`route_flow`), finds how far
    it can go before the next event (:meth:`next_event`), goes there (:meth:`advance`) and
    recomputes the nodes that changed (:meth:`refresh_changed`, :meth:`refresh`). Every
    per-node quantity is a list indexed by node (node 0 is the root).
    """

    def __init__(self, tree: FillTree, rule: LevelRule, groups: Sequence[tuple[Sequence[int], Vector]],
                 start: Mapping[str, float] | None, eligible: Collection[int] | None) -> None:
        self.tree = tree
        self.n = n = len(tree.keys)
        self.m = m = tree.resources
        self.cap = tree.capacity
        self.leaves = [i for i in range(n) if tree.is_leaf[i]]
        self.is_leaf = tree.is_leaf
        self.children = tree.children
        self.parent = tree.parent
        self.fifo = tree.fifo
        assert 0 not in tree.history, "the root's usage is the capacity's: it has no history"
        self.history = tree.history
        self.dominant = rule.kind == "dominant"
        self.override = rule.dff_override
        if self.override and not self.dominant:
            raise ValueError("the DFF override needs the dominant level rule")
        # resources counted in each node's level, with 1/ref_r
        self.inv_ref: list[list[tuple[int, float]]] = [
            [(r, 1.0 / x) for r, x in enumerate(tree.ref[v]) if x > 0] for v in range(n)]
        self._leaf_constants()
        self.order = self._post_order()

        self.s = [0.0] * n  # leaf dominant shares (flow units)
        # per node, what its level is taken of: its usage plus its history
        # (``FillTree.history``); the root has none, so its usage is the capacity's
        self.usage: list[list[float]] = [[0.0] * m for _ in range(n)]
        self.frozen = [False] * n
        self.live_count = [0] * n  # non-blocked children of internal nodes
        self.saturated: list[int] = []  # in the order they saturated
        self.sat = [False] * m
        if start:
            self._start_from(start)
        for v, past in self.history.items():  # (from here on a node's usage includes its history)
            self.usage[v] = [u + p for u, p in zip(self.usage[v], past)]
        self._set_groups(groups)
        # gangs waiting to be admitted (module docstring, "Gangs"), each with L_g
        self.pending_gangs: set[int] = set()
        self.gang_level: dict[int, float] = {}
        self._freeze_at_start(eligible)
        self.blocked = self._blocked_at_start()

        # each node's cached response, recomputed by refresh()
        self.raw = [0.0] * n  # level by the rule alone
        self.level = [0.0] * n  # level after the DFF override
        self.resp_rho: list[Vector] = [(0.0,) * m] * n  # usage rate per unit of flow into v
        self.kappa = [0.0] * n  # level growth per unit of flow into v
        self.raw_kappa = [0.0] * n
        self.split: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        self.vrate = [0.0] * n  # common level rate of v's receiving children per unit of flow
        self.receiving_level = [0.0] * n
        # the phase's flow into each node, nonzero only on the flowing nodes
        self.flow = [0.0] * n
        self.flowing: list[int] = []
        for v in self.order:
            self.refresh(v)

    # ---- setup ---------------------------------------------------------------------------
    def _leaf_constants(self) -> None:
        """Per leaf: ``rho`` (usage per unit of flow), ``delta`` (dominant share of one task),
        ``cap_s`` (its task count as a dominant share)."""
        tree, n, m, cap = self.tree, self.n, self.m, self.cap
        self.rho: list[Vector] = [()] * n
        self.delta = [0.0] * n
        self.cap_s = [math.inf] * n
        for i in self.leaves:
            d = tree.demand[i]
            assert d is not None and len(d) == m
            dl = max((d[r] / cap[r] for r in range(m) if cap[r] > 0), default=0.0)
            if dl <= 0:
                raise ValueError(f"leaf {tree.keys[i]!r} demands nothing")
            self.delta[i] = dl
            self.rho[i] = tuple(x / dl for x in d)
            if tree.cap_tasks[i] is not None:
                self.cap_s[i] = tree.cap_tasks[i] * dl

    def _post_order(self) -> list[int]:
        """Children before parents, for the bottom-up passes."""
        order: list[int] = []
        stack = [0]
        while stack:
            v = stack.pop()
            order.append(v)
            stack.extend(self.children[v])
        order.reverse()
        return order

    def _start_from(self, start: Mapping[str, float]) -> None:
        """The leaves' tasks at the start, their usage up the tree, the resources it saturates."""
        s, usage, rho, parent, cap = self.s, self.usage, self.rho, self.parent, self.cap
        index = {self.tree.keys[i]: i for i in self.leaves}
        for key, tasks in start.items():
            i = index[key]
            s[i] = tasks * self.delta[i]
        for v in self.order:  # children before parents: v's usage is complete when added up
            if self.is_leaf[v]:
                usage[v] = [s[v] * x for x in rho[v]]
            if v:
                pu = usage[parent[v]]
                for r, x in enumerate(usage[v]):
                    pu[r] += x
        root_use0 = usage[0]
        for r in range(self.m):
            if root_use0[r] >= cap[r] * (1 - SAT_RTOL) and any(rho[i][r] > 0 for i in self.leaves):
                self.sat[r] = True
                self.saturated.append(r)

    def _set_groups(self, groups: Sequence[tuple[Sequence[int], Vector]]) -> None:
        """Per group its leaves, finite caps and usage; per leaf its groups."""
        s, rho, m = self.s, self.rho, self.m
        self.group_leaves = [list(g) for g, _cap in groups]
        self.group_caps = [[(r, c) for r, c in enumerate(cap_vec) if c < math.inf] for _g, cap_vec in groups]
        self.group_use = [[sum(s[i] * rho[i][r] for i in g) for r in range(m)] for g in self.group_leaves]
        self.groups_of: dict[int, list[int]] = {}
        for k, g in enumerate(self.group_leaves):
            for i in g:
                self.groups_of.setdefault(i, []).append(k)

    def _freeze_at_start(self, eligible: Collection[int] | None) -> None:
        """Freeze the leaves that cannot receive from the start: count met, not eligible,
        or needing a saturated resource or one a group has used up."""
        frozen, s, cap_s, rho, sat = self.frozen, self.s, self.cap_s, self.rho, self.sat
        allowed = None if eligible is None else set(eligible)
        for i in self.leaves:
            if self.tree.gang[i]:  # indivisible: never takes flow (module docstring, "Gangs")
                frozen[i] = True
                if s[i] <= 0 and (allowed is None or i in allowed):
                    self.pending_gangs.add(i)
                    self.gang_level[i] = self._level_of([cap_s[i] * x for x in rho[i]], i)
                continue
            if cap_s[i] <= 0 or s[i] >= cap_s[i] * (1 - SAT_RTOL) or (allowed is not None and i not in allowed) or \
                    any(sat[r] and rho[i][r] > 0 for r in range(self.m)):
                frozen[i] = True
        for k, g in enumerate(self.group_leaves):
            for r, c in self.group_caps[k]:
                if self.group_use[k][r] >= c * (1 - SAT_RTOL):
                    for i in g:
                        if rho[i][r] > 0:
                            frozen[i] = True

    def _blocked_at_start(self) -> list[bool]:
        """A leaf is blocked when frozen, an internal node when none of its children is live."""
        blocked = [True] * self.n
        for v in self.order:
            if self.is_leaf[v]:
                blocked[v] = self.frozen[v]
            else:
                self.live_count[v] = sum(1 for c in self.children[v] if not blocked[c])
                blocked[v] = self.live_count[v] == 0
        return blocked

    def _level_of(self, usage: Sequence[float], v: int) -> float:
        """Node ``v``'s level (the rule alone) if its usage were ``usage`` (its history added)."""
        past = self.history.get(v) if self.history else None
        if past is not None:
            usage = [u + p for u, p in zip(usage, past)]
        if self.dominant:
            return max((usage[r] * k for r, k in self.inv_ref[v]), default=0.0)
        return sum(usage[r] * k for r, k in self.inv_ref[v])

    # ---- a node's response -----------------------------------------------------------------
    def refresh(self, v: int) -> None:
        """Recompute v's level and response from its (already fresh) children."""
        dominant, override, level, kappa = self.dominant, self.override, self.level, self.kappa
        u = self.usage[v]
        pairs = self.inv_ref[v]
        if dominant:
            lv = 0.0
            for r, k in pairs:
                x = u[r] * k
                if x > lv:
                    lv = x
        else:
            lv = sum(u[r] * k for r, k in pairs)
        self.raw[v] = lv
        level[v] = lv
        if self.blocked[v]:
            return
        if self.is_leaf[v]:
            rho = self.rho[v]
            self.resp_rho[v] = rho
            self.raw_kappa[v] = kappa[v] = _rate(rho, u, pairs, dominant, lv)
            return
        blocked = self.blocked
        live = [c for c in self.children[v] if not blocked[c]]
        if override and lv > 1.0 and not _close(lv, 1.0):
            low_child = min(level[c] for c in live)
            if low_child < lv:
                level[v] = low_child
        if self.fifo[v]:
            # FIFO queue: only the earliest non-blocked job competes; sub-queues as usual.
            is_leaf = self.is_leaf
            first_leaf = next((c for c in live if is_leaf[c]), None)
            live = [c for c in live if not is_leaf[c] or c == first_leaf]
        low = min(level[c] for c in live)
        tol = TIE_RTOL * max(1.0, abs(low))
        rec = [c for c in live if level[c] - low <= tol]
        self.receiving_level[v] = low
        absorbing = [c for c in rec if kappa[c] <= _TINY]
        if absorbing:
            frac = 1.0 / len(absorbing)
            sp = [(c, frac) for c in absorbing]
            self.vrate[v] = 0.0
        else:
            inv = [1.0 / kappa[c] for c in rec]
            tot = sum(inv)
            sp = [(c, w / tot) for c, w in zip(rec, inv)]
            self.vrate[v] = 1.0 / tot
        self.split[v] = sp
        m = self.m
        resp_rho = self.resp_rho
        acc = [0.0] * m
        for c, frac in sp:
            rc = resp_rho[c]
            for r in range(m):
                acc[r] += frac * rc[r]
        resp_rho[v] = tuple(acc)
        self.raw_kappa[v] = _rate(resp_rho[v], u, pairs, dominant, lv)
        kappa[v] = self.vrate[v] if (override and level[v] < lv) else self.raw_kappa[v]

    # ---- one phase ---------------------------------------------------------------------------
    def run(self, stop_at_first_saturation: bool, max_phases: int | None) -> FillResult:
        """Phases of constant rates until the root is blocked (or nothing grows any more)."""
        limit = max_phases if max_phases is not None else 50 * (self.n + 1) * (self.m + 1) + 1000
        phases = 0
        stopped = self._admit_gangs_stops(stop_at_first_saturation)
        while not stopped and not self.blocked[0]:
            phases += 1
            if phases > limit:
                raise RuntimeError(f"progressive filling did not converge in {limit} phases")
            self.route_flow()
            dtau = self.next_event()
            if dtau == math.inf:
                break  # nothing grows any more
            newly_frozen = self.advance(dtau)
            if stop_at_first_saturation and self.saturated:
                stopped = True
                break
            self.refresh_changed(newly_frozen)
            stopped = self._admit_gangs_stops(stop_at_first_saturation)
        if not stopped:
            self.admit_waiting_gangs(stop_at_first_saturation)
        tasks = {self.tree.keys[i]: self.s[i] / self.delta[i] for i in self.leaves}
        return FillResult(tasks, tuple(self.saturated), phases)

    def route_flow(self) -> None:
        """The root's unit flow split top-down along each node's ``split``."""
        flow, is_leaf, split = self.flow, self.is_leaf, self.split
        for v in self.flowing:
            flow[v] = 0.0
        flowing = self.flowing = [0]
        flow[0] = 1.0
        k = 0
        while k < len(flowing):
            v = flowing[k]
            k += 1
            if is_leaf[v]:
                continue
            fv = flow[v]
            for c, frac in split[v]:
                flow[c] = fv * frac
                flowing.append(c)

    def next_event(self) -> float:
        """The flow until the first event of the module docstring ("Events"); inf: none."""
        best = min(self._until_capacity(), self._until_node_event())
        return min(best, self._until_gang_reached()) if self.pending_gangs else best

    def _until_capacity(self) -> float:
        """The flow until a resource saturates or a group reaches its cap of one."""
        m, flow, rho = self.m, self.flow, self.rho
        best = math.inf
        root_rate = self.resp_rho[0]
        root_use = self.usage[0]
        for r in range(m):
            if not self.sat[r] and root_rate[r] > _TINY:
                best = min(best, max(0.0, (self.cap[r] - root_use[r]) / root_rate[r]))
        if self.group_leaves:
            rates = [[0.0] * m for _ in self.group_leaves]
            for v in self.flowing:
                for k in self.groups_of.get(v, ()):
                    rk, fv, rv = rates[k], flow[v], rho[v]
                    for r in range(m):
                        rk[r] += fv * rv[r]
            for k, caps in enumerate(self.group_caps):
                for r, c in caps:
                    if rates[k][r] > _TINY:
                        best = min(best, max(0.0, (c - self.group_use[k][r]) / rates[k][r]))
        return best

    def _until_node_event(self) -> float:
        """The flow until a leaf meets its count, a waiting child is caught up, a node's
        dominant resource switches or a DFF override begins or ends."""
        flow, is_leaf, cap_s, s = self.flow, self.is_leaf, self.cap_s, self.s
        split, vrate, receiving_level = self.split, self.vrate, self.receiving_level
        blocked, level, fifo, children = self.blocked, self.level, self.fifo, self.children
        dominant, override = self.dominant, self.override
        best = math.inf
        for v in self.flowing:
            fv = flow[v]
            leaf = is_leaf[v]
            if leaf:
                if cap_s[v] < math.inf:
                    best = min(best, max(0.0, (cap_s[v] - s[v]) / fv))
                if not (dominant and v in self.history):
                    continue  # (a leaf's dominant resource switches only with history)
            # waiting siblings reached by the receiving level
            lr = fv * vrate[v]
            if lr > _TINY:
                receivers = {c for c, _ in split[v]}
                rl = receiving_level[v]
                for c in children[v]:
                    if blocked[c] or c in receivers or (fifo[v] and is_leaf[c]):
                        continue  # (queued FIFO jobs are not reached by level)
                    gap = level[c] - rl
                    if gap > 0:
                        best = min(best, gap / lr)
            if not dominant:
                continue
            # dominant-resource switch (and, for DFF, the override thresholds)
            u = self.usage[v]
            cur = self.raw[v]
            rk = fv * self.raw_kappa[v]
            rr_vec = self.resp_rho[v]
            tol = TIE_RTOL * max(1.0, abs(cur))
            for r, kr in self.inv_ref[v]:
                rr = fv * rr_vec[r] * kr
                gap = cur - u[r] * kr
                if rr > rk + _TINY and gap > tol:
                    best = min(best, gap / (rr - rk))
            if override and not leaf:
                child_rate = fv * vrate[v]
                above_one = cur > 1.0 or _close(cur, 1.0)
                if not above_one and rk > _TINY:
                    best = min(best, (1.0 - cur) / rk)
                if above_one:
                    gap = cur - receiving_level[v]
                    if level[v] < cur and child_rate > rk + _TINY and gap > 0:
                        best = min(best, gap / (child_rate - rk))  # override ends
                    if level[v] >= cur and rk > child_rate + _TINY and -gap > 0:
                        best = min(best, -gap / (rk - child_rate))  # override begins
        return best

    def advance(self, dtau: float) -> list[int]:
        """Grow every flowing node by ``dtau`` of flow; freeze the leaves that met their
        count or need a resource (or a group's cap) now used up. Returns them."""
        m, flow, usage, resp_rho, s, cap_s = self.m, self.flow, self.usage, self.resp_rho, self.s, self.cap_s
        frozen, rho, group_use = self.frozen, self.rho, self.group_use
        newly_frozen: list[int] = []
        for v in self.flowing:
            step = dtau * flow[v]
            u = usage[v]
            rv = resp_rho[v]
            for r in range(m):
                u[r] += step * rv[r]
            if self.is_leaf[v]:
                s[v] += step
                for k in self.groups_of.get(v, ()):
                    gu = group_use[k]
                    for r in range(m):
                        gu[r] += step * rv[r]
                if s[v] >= cap_s[v] * (1 - SAT_RTOL):
                    s[v] = cap_s[v]
                    frozen[v] = True
                    newly_frozen.append(v)
        newly_frozen.extend(self._freeze_capped())
        newly_frozen.extend(self._freeze_saturated())
        return newly_frozen

    def _freeze_capped(self) -> list[int]:
        """Freeze every unfrozen leaf that needs a resource its group has used up. Returns them."""
        frozen, rho, newly_frozen = self.frozen, self.rho, []
        for k, caps in enumerate(self.group_caps):
            for r, c in caps:
                if self.group_use[k][r] >= c * (1 - SAT_RTOL):
                    for i in self.group_leaves[k]:
                        if not frozen[i] and rho[i][r] > 0:
                            frozen[i] = True
                            newly_frozen.append(i)
        return newly_frozen

    def _freeze_saturated(self) -> list[int]:
        """Mark the resources the root's usage now reaches as saturated and freeze every
        unfrozen leaf that needs one of them. Returns those leaves."""
        frozen, rho, root_use = self.frozen, self.rho, self.usage[0]
        newly = [r for r in range(self.m) if not self.sat[r] and root_use[r] >= self.cap[r] * (1 - SAT_RTOL)]
        newly_frozen: list[int] = []
        if newly:
            for r in newly:
                self.sat[r] = True
                self.saturated.append(r)
            for i in self.leaves:
                if not frozen[i] and any(rho[i][r] > 0 for r in newly):
                    frozen[i] = True
                    newly_frozen.append(i)
        return newly_frozen

    def refresh_changed(self, newly_frozen: list[int], changed: Collection[int] = ()) -> None:
        """Block the newly frozen leaves (and the ancestors left without a live child), then
        refresh what changed: the flowing nodes, ``changed`` (with their ancestors) and the
        ancestors of new blocks."""
        blocked, parent, live_count = self.blocked, self.parent, self.live_count
        dirty = set(self.flowing)
        for v in changed:
            while v >= 0:
                dirty.add(v)
                v = parent[v]
        for i in newly_frozen:
            blocked[i] = True
            v = i
            # each newly blocked node takes one live child from its parent
            while parent[v] >= 0:
                p = parent[v]
                live_count[p] -= 1
                if live_count[p] > 0:
                    break
                blocked[p] = True
                v = p
            while v >= 0:  # the blocked chain's ancestors all need a refresh
                dirty.add(v)
                v = parent[v]
            dirty.add(i)
        for v in self.order:
            if v in dirty:
                self.refresh(v)

    # ---- gangs (module docstring, "Gangs") ------------------------------------------------
    def _gang_anchor(self, g: int) -> tuple[int, int]:
        """``(q, a)``: the nearest ancestor ``q`` of gang ``g`` that is not blocked (-1: none)
        and its child ``a`` on the path to ``g`` (``g`` itself when ``q`` is its parent)."""
        a, q = g, self.parent[g]
        while q >= 0 and self.blocked[q]:
            a, q = q, self.parent[q]
        return q, a

    def _gang_wait_level(self, g: int, a: int) -> float:
        """The level at which gang ``g``, waiting in ``a``, is reached."""
        return self.gang_level[g] if a == g else self.level[a]

    def _gang_turn(self, g: int, q: int) -> bool:
        """In FIFO node ``q``: every job listed before gang ``g`` is done waiting."""
        for c in self.children[q]:
            if c == g:
                return True
            if self.is_leaf[c] and (not self.blocked[c] or c in self.pending_gangs):
                return False
        return True

    def _admit_gangs_stops(self, stop_at_first_saturation: bool) -> bool:
        """:meth:`admit_reached_gangs`; True when C.S-Current must stop because an
        admission saturated a resource."""
        before = len(self.saturated)
        self.admit_reached_gangs()
        return stop_at_first_saturation and len(self.saturated) > before

    def admit_reached_gangs(self) -> None:
        """Admit (or freeze at 0) every waiting gang whose level is reached, lowest level
        first, until none is: each admission moves the levels the others wait for."""
        while self.pending_gangs:
            reached = []
            for g in self.pending_gangs:
                q, a = self._gang_anchor(g)
                if q < 0:
                    continue  # nothing above it grows: admit_waiting_gangs
                wait = self._gang_wait_level(g, a)
                if self.fifo[q] and a == g:
                    if self._gang_turn(g, q):
                        reached.append((wait, g))
                elif self.receiving_level[q] >= wait - TIE_RTOL * max(1.0, abs(wait)):
                    reached.append((wait, g))
            if not reached:
                return
            self._admit_gang(min(reached)[1])

    def admit_waiting_gangs(self, stop_at_first_saturation: bool) -> None:
        """When nothing grows any more: the waiting gangs in the order of Alg. 1's descent
        (the levels on the path from the root, then ``L_g``, in a FIFO node arrival, then
        tree order), each admitted if it still fits (C.S-Current: until a resource saturates)."""
        def descent_key(g: int) -> tuple:
            path = []
            v = self.parent[g]
            while v > 0:
                path.append(self.level[v])
                v = self.parent[v]
            return (*reversed(path), 0.0 if self.fifo[self.parent[g]] else self.gang_level[g], g)

        while self.pending_gangs and not (stop_at_first_saturation and self.saturated):
            self._admit_gang(min(self.pending_gangs, key=descent_key))

    def _until_gang_reached(self) -> float:
        """The flow until a waiting gang's level is reached by the level growing at its
        anchor (the receiving level of a flowing node)."""
        best = math.inf
        for g in self.pending_gangs:
            q, a = self._gang_anchor(g)
            if q < 0 or self.flow[q] <= 0 or (self.fifo[q] and a == g):
                continue
            rate = self.flow[q] * self.vrate[q]
            if rate > _TINY:
                best = min(best, max(0.0, (self._gang_wait_level(g, a) - self.receiving_level[q]) / rate))
        return best

    def _admit_gang(self, g: int) -> None:
        """Give gang ``g`` all of its tasks if they fit in what is left (and in its groups'
        caps), else leave it frozen at 0; either way it waits no more."""
        self.pending_gangs.discard(g)
        whole = [self.cap_s[g] * x for x in self.rho[g]]
        root_use = self.usage[0]
        if not fits(whole, [c - u for c, u in zip(self.cap, root_use)]):
            return
        for k in self.groups_of.get(g, ()):
            if any(whole[r] > 0 and not within(self.group_use[k][r], whole[r], c) for r, c in self.group_caps[k]):
                return
        self.s[g] = self.cap_s[g]
        v = g
        while v >= 0:
            u = self.usage[v]
            for r, x in enumerate(whole):
                u[r] += x
            v = self.parent[v]
        for k in self.groups_of.get(g, ()):
            gu = self.group_use[k]
            for r, x in enumerate(whole):
                gu[r] += x
        self.refresh_changed(self._freeze_capped() + self._freeze_saturated(), changed=(g,))


def _rate(rho: Vector, usage, pairs: list[tuple[int, float]], dominant: bool, top: float) -> float:
    """Level growth per unit of flow for a node whose usage grows at ``rho``.

    For the dominant rule this is the right-derivative of ``max_r U_r/ref_r``: the largest
    growth rate among the resources currently tied for the maximum ``top``.
    """
    if not dominant:
        return sum(rho[r] * k for r, k in pairs)
    tol = TIE_RTOL * max(1.0, abs(top))
    best = 0.0
    for r, k in pairs:
        if top - usage[r] * k <= tol:
            x = rho[r] * k
            if x > best:
                best = x
    return best
