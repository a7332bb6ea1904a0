"""The online seam: which job's next task runs, decided whenever resources free up.

The engine tells an :class:`OnlineSorter` about every change (job added or removed, task
started or finished, demand status, capacity, saturated resources) and asks
:meth:`OnlineSorter.pick` for the next job among those whose next task can run now. The
sorter never reads a clock or draws random numbers: ``now`` is passed in.

A policy's sorter comes from ``Policy.online``: its incremental sorter (``hdrf_online``,
``dff_online``, ``machinery/flat.py``, ``collapsed``, ``slots``, ``timefair``; every
registered online policy has one), else the per-decision
``machinery.reference.ReferenceSorter`` with the policy's own share rule (the default
for a new policy, and what every incremental sorter is tested against).
The shared machinery of the sorters (descent, tie rule, saturated-set views) is in
``policies/machinery/``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fairshare.model.queues import QueueTree
from fairshare.model.resources import Vector

Runnable = Callable[[str], bool]


@dataclass
class OnlineJob:
    name: str
    queue: str
    weight: float
    demand: Vector  # composite per-task demand: what the job needs (DFF's "needs", blocking)
    order: int  # arrival order, for ties and FIFO
    usage: list[float] = field(default_factory=list)
    running: int = 0
    demanding: bool = True


class OnlineSorter:
    """Interface + shared bookkeeping; subclasses implement :meth:`pick`."""

    #: When the engine knows the few jobs that can run (``Scheduler.schedule``'s candidate
    #: list), it asks :meth:`pick_among` instead of :meth:`pick` if the c candidates are
    #: at most ``among_max`` and ``c * c * among_cost <= demanding jobs``: ``among_cost``
    #: is what comparing one candidate costs relative to passing one job that cannot run
    #: in :meth:`pick` (which passes about demanding / c of them). The defaults are a
    #: conservative guess for a sorter that sets none; the tree sorters
    #: (``machinery.descent.TREE_AMONG_MAX``) and the flat sorters set their own, measured.
    #: Either way the pick is the same.
    among_max: int = 48
    among_cost: float = 0.5

    def __init__(self, resources: int, queues: QueueTree, capacity: Vector):
        self.m = resources
        self.queues = queues
        self.capacity: Vector = tuple(capacity)
        self.saturated: frozenset[int] = frozenset()
        self.jobs: dict[str, OnlineJob] = {}
        self._arrivals = 0

    # --- events -------------------------------------------------------------------------
    def add_job(self, name: str, queue: str, weight: float, demand: Vector) -> None:
        self.jobs[name] = OnlineJob(name, queue, weight, tuple(demand), self._arrivals, [0.0] * self.m)
        self._arrivals += 1

    def remove_job(self, name: str) -> None:
        del self.jobs[name]

    def allocated(self, name: str, demand: Vector, now: float = 0.0) -> None:
        job = self.jobs[name]
        for r, d in enumerate(demand):
            job.usage[r] += d
        job.running += 1

    def released(self, name: str, demand: Vector, now: float = 0.0) -> None:
        job = self.jobs[name]
        usage = job.usage
        for r, d in enumerate(demand):
            # (``max(0.0, left)`` written out, no builtin call per resource: ``max`` keeps
            # its first argument unless ``left > 0.0``, so -0.0 and NaN give 0.0 here too)
            left = usage[r] - d
            usage[r] = left if left > 0.0 else 0.0
        job.running -= 1

    def set_demanding(self, name: str, demanding: bool) -> None:
        self.jobs[name].demanding = demanding

    def set_capacity(self, capacity: Vector) -> None:
        self.capacity = tuple(capacity)

    def set_saturated(self, resources: frozenset[int]) -> None:
        self.saturated = frozenset(resources)

    def set_half_life(self, half_life: float, ledger=None) -> None:
        """Order by decayed usage with this half-life (docs/policies.md, "Fairness with
        memory"; ``machinery/decay.py``). Only the sorters that implement it accept it."""
        raise ValueError("fairness.half_life: this policy has no decayed usage yet (docs/policies.md, "
                         "\"Fairness with memory\"); use half_life 0 with it, at the top level and in every queue")

    def shares(self) -> dict[str, float]:
        """Each job's and queue's current share as this policy measures it (for reports)."""
        return {}

    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        raise NotImplementedError

    def exclude(self, name: str) -> None:
        """The scheduler found ``name`` not runnable, and it stays so until
        :meth:`reset_excluded` (the next ``schedule`` call: within one, free capacity
        only shrinks). A sorter may pass it over without asking; the default ignores it."""

    def reset_excluded(self) -> None:
        """Forget :meth:`exclude` (a new ``schedule`` call)."""

    def file_shape(self, name: str, shape: int | None) -> None:
        """``name``'s next task has shape number ``shape`` (the engine numbers the distinct
        demand vectors and constraints of the jobs' next tasks; None: no next task). Told
        at arrival and whenever it changes; a sorter may index its jobs by it
        (``machinery.descent.ShapeIndex``); the default ignores it."""

    def only_shapes(self, shapes) -> None:
        """Until :meth:`reset_excluded`, only jobs whose next task has one of ``shapes``
        (numbers, as filed) can be runnable. A sorter may pass over the others without
        asking; the default ignores it."""

    def exclude_shape(self, shape: int, names) -> None:
        """Until :meth:`reset_excluded`, no job whose next task has shape ``shape`` can run
        (it fits nowhere, and within a ``schedule`` call free capacity only shrinks);
        ``names`` are those jobs. The default excludes each (:meth:`exclude`)."""
        for name in names:
            self.exclude(name)

    def pick_among(self, names, runnable: Runnable, now: float = 0.0) -> str | None:
        """:meth:`pick`, told that only the jobs in ``names`` can be runnable (the
        scheduler knows when few jobs' next tasks fit anywhere). Must return what ``pick``
        would; sorters that can use the list to skip the rest override this."""
        allowed = set(names)
        return self.pick(lambda name: name in allowed and runnable(name), now)
