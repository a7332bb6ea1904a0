"""Queue guarantees and limits, online: what the scheduler checks before it starts a task.

The static semantics are ``policies/machinery/bounds.py``'s (docs/policies.md, "Guarantees and
limits"); online, for whole tasks that start and end over time, they become two rules
the engine applies for every policy, so the simulator and ``fairshare serve`` get them
from the same code:

* **Limits.** A task is never started if it would push its queue, or any queue above
  it, past a limit of a resource the task uses (within placement's fit tolerance). A
  job blocked this way is not runnable for the rest of the decision round (usage only
  grows within a round), like a job whose task fits on no node.
* **Guarantees.** While some queue is *owed* (a task of one of its jobs fits within its
  guarantee: for every guaranteed resource the task uses, usage + demand <= guarantee,
  and the task uses at least one of them), the round first asks the policy for a job
  among the owed ones, by the policy's own order; only when none of them can run does it
  ask among all jobs. The discrete static greedy's guarantee phases do the same.

Only queues with a guarantee or a limit are tracked: an unbounded scenario pays nothing.
"""

from __future__ import annotations

import math

from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.resources import Vector, fit_limit


class QueueBounds:
    """Usage of the bounded queues (of every queue with ``track_all``: preemption reads
    every queue's share), and the two tests."""

    def __init__(self, queues: QueueTree, resources: tuple[str, ...], *, track_all: bool = False):
        self.m = len(resources)
        self.tracks_all = track_all
        self.usage: dict[str, list[float]] = {}
        # Per bounded queue, (resource, fit_limit(bound)) of its limits and guarantees: the
        # tests below are ``model.resources.within(usage, demand, bound)``, inlined as
        # ``not usage + demand > fit_limit(bound)`` with the widened bound computed once
        # here instead of once per test (the scheduler asks for every task it considers;
        # tests/test_predicates.py checks the two agree).
        self.limit_fit: dict[str, tuple[tuple[int, float], ...]] = {}
        self.guarantee_fit: dict[str, tuple[tuple[int, float], ...]] = {}
        for node in queues:
            if node.path == ROOT or not (track_all or node.limit or node.guarantee):
                continue
            self.usage[node.path] = [0.0] * self.m
            self.limit_fit[node.path] = tuple((r, fit_limit(x)) for r, x in enumerate(node.limit_vector(resources))
                                          if x < math.inf)
            self.guarantee_fit[node.path] = tuple((r, fit_limit(x)) for r, x in
                                              enumerate(node.guarantee_vector(resources)) if x > 0)
        #: any queue has a guarantee (asked once per decision: computed once, the tree's
        #: bounds do not change under a ledger)
        self.has_guarantees = any(self.guarantee_fit.values())
        # queue path -> the bounded queues at or above it, nearest first
        self._chain: dict[str, tuple[str, ...]] = {
            path: tuple(p for p in queues.ancestors(path) if p in self.usage) for path in [ROOT, *queues.paths]}

    def chain(self, queue: str) -> tuple[str, ...]:
        return self._chain[queue]

    def take(self, queue: str, demand: Vector) -> None:
        for path in self._chain[queue]:
            u = self.usage[path]
            for r, d in enumerate(demand):
                u[r] += d

    def give_back(self, queue: str, demand: Vector) -> None:
        for path in self._chain[queue]:
            u = self.usage[path]
            for r, d in enumerate(demand):
                u[r] = max(0.0, u[r] - d)

    def over_limit(self, queue: str, demand: Vector) -> bool:
        """Whether one more task of ``demand`` would push a queue at or above ``queue``
        past a limit of a resource it uses."""
        for path in self._chain[queue]:
            u = self.usage[path]
            for r, limit in self.limit_fit[path]:
                d = demand[r]
                if d > 0 and u[r] + d > limit:  # not within(u[r], d, the limit)
                    return True
        return False

    def owed(self, queue: str, demand: Vector) -> bool:
        """Whether a queue at or above ``queue`` is owed a task of ``demand`` (module
        docstring)."""
        for path in self._chain[queue]:
            pairs = self.guarantee_fit[path]
            if not pairs:
                continue
            u = self.usage[path]
            uses = False
            within = True
            for r, g in pairs:
                d = demand[r]
                if d > 0:
                    uses = True
                    if u[r] + d > g:  # not within(u[r], d, the guarantee)
                        within = False
                        break
            if uses and within:
                return True
        return False
