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

The table (``QueueBounds``) is also the one record of every queue's and the cluster's
usage, which the engine's views (``engine/snapshot.py``) and preemption read. Its sums
move in two ways. *Settled*: the engine's usage ledger adds each job's change at the end
of an instant, in job-name order (``settle``); these are the numbers the views report,
so a run's timeline is the same byte for byte in every process. *Moving*: each task
started (+) or ended (-) since, added task by task (``take``, ``give_back``), only for
the queues a test needs (those with a guarantee or a limit; every queue with
``track_all``, preemption). A test reads settled + moving, so it sees every launch of a
round at once. Without a ledger (a bare ``Scheduler``) nothing settles and the moving
part holds everything; an unbounded scenario's tasks move nothing.
"""

from __future__ import annotations

import math

from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.resources import Vector, fit_limit


class QueueBounds:
    """Every queue's and the root's (the cluster's) usage (module docstring), and the two
    tests."""

    def __init__(self, queues: QueueTree, resources: tuple[str, ...], *, track_all: bool = False):
        m = self.m = len(resources)
        self.tracks_all = track_all
        #: queue path (the root: the cluster) -> summed demands of the tasks running below
        #: it, and their number, as settled (``settle``)
        self.usage: dict[str, list[float]] = {}
        self.running: dict[str, int] = {}
        # the queues a test reads now -> demands started minus ended since they settled
        self._moving: dict[str, list[float]] = {}
        self.limit_fit: dict[str, tuple[tuple[int, float], ...]] = {}
        self.guarantee_fit: dict[str, tuple[tuple[int, float], ...]] = {}
        for node in queues:
            path = node.path
            self.usage[path] = [0.0] * m
            self.running[path] = 0
            if path == ROOT:  # (no bounds: the cluster)
                continue
            # (resource, fit_limit(bound)) of its limits and guarantees: the tests below are
            # ``model.resources.within(usage, demand, bound)``, inlined as ``not usage +
            # demand > fit_limit(bound)`` with the widened bound computed once here instead
            # of once per test (the scheduler asks for every task it considers;
            # tests/test_predicates.py checks the two agree)
            self.limit_fit[path] = tuple((r, fit_limit(x)) for r, x in enumerate(node.limit_vector(resources))
                                         if x < math.inf)
            self.guarantee_fit[path] = tuple((r, fit_limit(x)) for r, x in enumerate(node.guarantee_vector(resources))
                                             if x > 0)
            if track_all or node.limit or node.guarantee:
                self._moving[path] = [0.0] * m
        #: some queue has a moving part (a test reads it; else settling skips that part)
        self.moves = bool(self._moving)
        #: any queue has a guarantee (asked once per decision: computed once, the tree's
        #: bounds do not change under a ledger)
        self.has_guarantees = any(self.guarantee_fit.values())
        # queue path -> every queue at or above it, nearest first, the root last (what a
        # job's change settles into); the ones of them that move (what a task moves);
        # those with a limit, with a guarantee (what the tests visit)
        self._chain: dict[str, tuple[str, ...]] = {path: tuple(queues.ancestors(path)) for path in self.usage}
        self._moves = {path: tuple(p for p in chain if p in self._moving) for path, chain in self._chain.items()}
        self._limited = {path: tuple(p for p in chain if self.limit_fit.get(p)) for path, chain in self._chain.items()}
        self._guaranteed = {path: tuple(p for p in chain if self.guarantee_fit.get(p))
                            for path, chain in self._chain.items()}

    def chain(self, queue: str) -> tuple[str, ...]:
        """``queue`` and the queues above it, nearest first, the root (the cluster) last."""
        return self._chain[queue]

    def take(self, queue: str, demand: Vector) -> None:
        for path in self._moves[queue]:
            u = self._moving[path]
            for r, d in enumerate(demand):
                u[r] += d

    def give_back(self, queue: str, demand: Vector) -> None:
        for path in self._moves[queue]:
            u = self._moving[path]
            for r, d in enumerate(demand):
                u[r] -= d

    def settle(self, changes: list[tuple[str, int, list[float]]]) -> set[str]:
        """Jobs changed since they last settled: ``(queue, running tasks, usage)`` each, the
        differences, added in the order given (the usage ledger's: job-name order);
        returns the queues whose sums moved, the root among them."""
        moved: set[str] = set()
        m = self.m
        for queue, running, delta in changes:
            chain = self._chain[queue]
            moved.update(chain)
            for path in chain:
                self.running[path] += running
                u = self.usage[path]
                for r in range(m):
                    u[r] += delta[r]
        return moved

    def settled(self, queue: str) -> None:
        """The tasks started and ended below ``queue`` since the last settling are in the
        settled sums now: its moving part starts again from zero."""
        m = self.m
        for path in self._moves[queue]:
            self._moving[path] = [0.0] * m

    def moving_from(self, tasks) -> None:
        """The moving part of ``tasks`` (``(queue, demand)``, every task running) on top of
        the settled sums: for a table built while tasks run (``Scheduler.track_queue_usage``)."""
        for queue, demand in tasks:
            self.take(queue, demand)
        for path, u in self._moving.items():
            settled = self.usage[path]
            for r in range(self.m):
                u[r] -= settled[r]

    def current(self, path: str) -> list[float]:
        """A tracked queue's usage now: settled + moving (preemption's reading)."""
        moving = self._moving.get(path)
        if moving is None:
            return list(self.usage[path])
        return [a + b for a, b in zip(self.usage[path], moving)]

    def over_limit(self, queue: str, demand: Vector) -> bool:
        """Whether one more task of ``demand`` would push a queue at or above ``queue``
        past a limit of a resource it uses."""
        for path in self._limited[queue]:
            u = self.usage[path]
            moving = self._moving[path]
            for r, widened in self.limit_fit[path]:
                d = demand[r]
                if d > 0 and u[r] + moving[r] + d > widened:
                    return True
        return False

    def owed(self, queue: str, demand: Vector) -> bool:
        """Whether a queue at or above ``queue`` is owed a task of ``demand`` (module
        docstring)."""
        for path in self._guaranteed[queue]:
            pairs = self.guarantee_fit[path]
            u = self.usage[path]
            moving = self._moving[path]
            uses = False
            within = True
            for r, widened in pairs:
                d = demand[r]
                if d > 0:
                    uses = True
                    if u[r] + moving[r] + d > widened:
                        within = False
                        break
            if uses and within:
                return True
        return False
