"""The reference online sorter: every share recomputed from scratch for every decision.

:class:`ReferenceSorter` is the straightforward implementation of the online seam: every
``pick`` recomputes every node's share, exactly as the papers' pseudo-code does per
decision. It serves every online policy (``Policy.reference_sorter``; the default
``Policy.online``) and is the reference the incremental sorters are tested against (same
decisions: tests/test_online_parity.py) and benchmarked against (docs/performance.md).

It holds no policy's formula: the policy hands it a :class:`ShareRule`
(``Policy.share_rule``) saying how leaves and queues are measured (the tree shape, which
resources count, how a queue's usage combines its children's, the shares), and each rule
lives in its policy's module next to that policy's incremental sorter's formulas. Adding
a policy adds a rule, never a branch here.

In a queue with ``order: fifo`` only its earliest job that can run competes. Ties: the
written rule of ``machinery/ties.py`` (share rounded to ``DIGITS`` digits, then fewer
running tasks in the subtree, then listed first: queues in file order, jobs by arrival).
"""

from __future__ import annotations

from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.resources import Vector
from fairshare.policies.machinery.ties import tie_key
from fairshare.policies.online import OnlineJob, OnlineSorter, Runnable


class DecisionState:
    """One :class:`ReferenceSorter` decision's tree, filled bottom-up: per node key its
    usage vector, share, running tasks, demanding and blocked flags; ``kids`` maps a node
    to its ``(child key, is_job)`` list and ``counted`` lists the resources shares count."""

    def __init__(self, kids: dict[str, list[tuple[str, bool]]], counted: list[int]):
        self.kids = kids
        self.counted = counted
        self.usage: dict[str, list[float]] = {}
        self.share: dict[str, float] = {}
        self.running: dict[str, int] = {}
        self.demanding: dict[str, bool] = {}
        self.blocked: dict[str, bool] = {}


class ShareRule:
    """How a policy measures shares, told to :class:`ReferenceSorter` by the policy
    (:meth:`Policy.share_rule <fairshare.policies.base.Policy.share_rule>`): the reference
    holds the per-decision recomputation and the written tie rule, each policy's rule the
    formulas, so a new policy adds a rule, never a branch here.

    A rule gives the leaves' and queues' shares; a queue's usage is by default the plain
    sum of its children's (:meth:`combine`).
    """

    #: the queue tree is ignored: every job sits directly under the root
    flat: bool = False
    #: the root is a FIFO queue: the earliest demanding job that can run is picked
    fifo: bool = False
    #: shares count only the non-saturated resources (H-DRF Alg. 3's Y)
    ignores_saturated: bool = False
    #: nothing is picked while any resource is saturated (C.S-Current)
    stop_when_saturated: bool = False

    def jobs_changed(self) -> None:
        """A job arrived or left, or the capacity changed (drop what depends on them)."""

    def begin(self, sorter: ReferenceSorter) -> None:
        """A decision starts (compute what every share of it reads)."""

    def leaf_share(self, sorter: ReferenceSorter, job: OnlineJob, state: DecisionState) -> float:
        """A job's share (its usage is ``job.usage``)."""
        raise NotImplementedError

    def combine(self, sorter: ReferenceSorter, key: str, state: DecisionState) -> list[float]:
        """A queue's usage vector from its children's (already in ``state``)."""
        total = [0.0] * sorter.m
        usage = state.usage
        for c, _ in state.kids.get(key, []):
            for r in range(sorter.m):
                total[r] += usage[c][r]
        return total

    def node_share(self, sorter: ReferenceSorter, key: str, state: DecisionState) -> float:
        """A queue's share (its usage is ``state.usage[key]``; a flat rule has no queue)."""
        raise NotImplementedError


class ReferenceSorter(OnlineSorter):
    """Recomputes the whole tree for every decision (the papers' per-decision algorithm),
    measuring shares by the policy's :class:`ShareRule`."""

    def __init__(self, rule: ShareRule, resources: int, queues: QueueTree, capacity: Vector):
        super().__init__(resources, queues, capacity)
        self.rule = rule
        self._last_shares: dict[str, float] = {}

    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, demand)
        self.rule.jobs_changed()

    def remove_job(self, name):
        super().remove_job(name)
        self.rule.jobs_changed()

    def set_capacity(self, capacity):
        super().set_capacity(capacity)
        self.rule.jobs_changed()

    # --- tree -------------------------------------------------------------------------------
    def _children(self) -> dict[str, list[tuple[str, bool]]]:
        """key -> [(child key, is_job)], queues in file order then jobs by arrival."""
        kids: dict[str, list[tuple[str, bool]]] = {}
        if self.rule.flat:
            kids[ROOT] = [(j.name, True) for j in sorted(self.jobs.values(), key=lambda j: j.order)]
            return kids
        for node in self.queues:
            kids[node.path] = [(c, False) for c in node.children]
        for job in sorted(self.jobs.values(), key=lambda j: j.order):
            kids.setdefault(job.queue, []).append((job.name, True))
        return kids

    # --- shares ----------------------------------------------------------------------------
    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        rule = self.rule
        if rule.stop_when_saturated and self.saturated:
            return None  # C.S-Current stops once any resource is fully used
        m, cap, sat = self.m, self.capacity, self.saturated
        state = DecisionState(self._children(), [r for r in range(m) if cap[r] > 0
                                                 and (r not in sat or not rule.ignores_saturated)])
        kids = state.kids
        order_key: dict[str, int] = {}
        rule.begin(self)

        def visit(key: str, is_job: bool, pos: int) -> None:
            order_key[key] = pos
            if is_job:
                job = self.jobs[key]
                state.usage[key] = list(job.usage)
                state.running[key] = job.running
                state.demanding[key] = job.demanding
                state.blocked[key] = (not job.demanding) or any(job.demand[r] > 0 for r in sat)
                state.share[key] = rule.leaf_share(self, job, state)
                return
            children = kids.get(key, [])
            for i, (c, cj) in enumerate(children):
                visit(c, cj, i)
            state.running[key] = sum(state.running[c] for c, _ in children)
            state.demanding[key] = any(state.demanding[c] for c, _ in children)
            state.blocked[key] = all(state.blocked[c] for c, _ in children)
            state.usage[key] = rule.combine(self, key, state)
            if key != ROOT:
                state.share[key] = rule.node_share(self, key, state)

        visit(ROOT, False, 0)
        self._last_shares = state.share
        share, running, demanding = state.share, state.running, state.demanding

        def descend(key: str) -> str | None:
            if key in self.jobs:
                return key if demanding[key] and runnable(key) else None
            children = kids.get(key, [])
            fifo = rule.fifo if key == ROOT else (key in self.queues and self.queues[key].order == "fifo")
            if fifo:
                # FIFO queue: its jobs run one after another, in arrival order; only the
                # earliest that can run competes with the queue's sub-queues.
                jobs_here = [c for c, cj in children if cj and demanding[c] and runnable(c)]
                children = [(c, cj) for c, cj in children if not cj or c in jobs_here[:1]]
            cands = [(*tie_key(share[c], running[c], order_key[c]), c) for c, _ in children if demanding[c]]
            for *_k, c in sorted(cands):
                found = descend(c)
                if found is not None:
                    return found
            return None

        return descend(ROOT)

    def shares(self) -> dict[str, float]:
        return dict(self._last_shares)
