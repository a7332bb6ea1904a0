"""The pure scheduling core: events in, task launches out.

Both runtimes drive it through ``engine.step.Engine``, which applies every event
(``submit``, ``cancel``, ``finish``, ``fail``, ``add_node``, ``lose_node``) and then asks
``schedule(now)`` once per instant. Nothing here reads a clock, draws random numbers or
does I/O. Task ids come from the caller (``task_ids``: the live service uses its store's
row ids) or, by default, from a counter.

A job's next task is from the class furthest behind the job's mix (counts, or equal for
unbounded classes; ties: first class). A job is *runnable* when it has a pending task
that fits on some eligible node now; ``schedule`` asks the policy's sorter for runnable
jobs until none is left. A task lost with its node, or failed, goes back to pending.
A class with ``max_per_node`` N is placed only on nodes where the job has fewer than N
running tasks of that class.

Constrained fairness (``engine.constrained``): a job whose classes are all constrained
is reported to the sorter with its usage normalized by its eligible capacity.
``Scheduler.usage``, the snapshot and every launch carry the real amounts.

Gangs (``engine.gangs``): a gang job's pending tasks start in one decision, all of them
or none; the sorter is told the gang's summed demand, so it sees one unit. When a task
of a running gang fails or is lost with its node, the rest of the gang is stopped and
goes back to pending with it (``gang_stopped``: the engine kills them), so a gang never
runs while one of its tasks waits. Its tasks always count (``respect_counts`` aside).

Priorities: within a queue, the demanding jobs of the highest ``priority`` are the
only ones the sorter sees demanding; the others are *held* (``JobRuntime.held``) until
no job of a higher priority in their queue demands. The policy's order among the jobs it
sees is unchanged (the queue's order, fair or FIFO, is the tie rule within a priority),
and so is fairness between queues: a queue's share is what its jobs hold, and a policy
that weighs a queue by its demanding children (H-DRF's rescaling) sees only those that
may run. Strict: a job of higher priority that cannot run holds its queue's lower ones
back (their room goes to other queues); letting them backfill is left with
``reserve_after`` (issue 20, item 2). Only demand changes pay for it, never a decision.

Gang reservations (``engine.reserve``, on with :meth:`Scheduler.reserve_gangs`): a gang
waiting ``reserve_after`` seconds gets nodes held for it as they free up; ``schedule``
then starts it first and backfills last. Off (no ``GangReserve``), or on with no gang
waiting, ``schedule`` is the decision loop alone.

The rest is split by concern: ``engine.shapes`` (the pending task shapes, their minimal
ones, saturation), ``engine.fitmemo`` (where a shape fits, remembered between decisions;
the freed-node scan), ``engine.placement`` (the nodes). This module keeps the jobs'
lifecycle and the decision loop.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import gt

from fairshare.engine.bounds import QueueBounds
from fairshare.engine.constrained import EligibleCapacity
from fairshare.engine.fitmemo import FitMemo, NodeFits
from fairshare.engine.gangs import gang_members, place_gang
from fairshare.engine import placement as nodes_module
from fairshare.engine.placement import DeviceAssignment, NodePool
from fairshare.engine.reserve import GangReserve, NextDuration, TaskEnds
from fairshare.engine.shapes import PendingShapes
from fairshare.model.cluster import Node
from fairshare.model.jobs import Job
from fairshare.model.queues import QueueChange, QueueTree
from fairshare.model.resources import Vector
from fairshare.policies.base import Policy, PolicyModeError

#: after a quiet point, the freed nodes are scanned for fitting shapes only if at most
#: this many were freed; beyond, ``schedule`` asks the sorter as usual
_FREED_SCAN_MAX = 16


@dataclass(frozen=True, slots=True)  # (slots: built once per decision, half the cost)
class Launch:
    """A decision: start one task of ``job``'s class ``task_class`` on ``node``."""

    task_id: int
    job: str
    task_class: str
    class_index: int
    node: str
    demand: Vector
    #: device resources: (resource name, device numbers on the node), e.g. (("gpu", (2,)),)
    devices: tuple[tuple[str, tuple[int, ...]], ...] = ()
    #: which start of the task this is: 1, or (task ids named at arrival) one more than the
    #: starts the task had (``submit(attempts=)``); it travels to the executor and back
    #: with the task's end, which is how a late end of an older start is told apart
    attempt: int = 1


@dataclass(slots=True)
class RunningTask:
    task_id: int
    job: str
    class_index: int
    node_index: int
    demand: Vector
    started_at: float
    devices: DeviceAssignment = ()
    attempt: int = 1  # (``Launch.attempt``)


@dataclass
class JobRuntime:
    job: Job
    submitted_at: float
    pending: list[float]  # tasks not started per class (inf = unbounded)
    started: list[int] = field(default_factory=list)
    done: list[int] = field(default_factory=list)
    running: int = 0
    #: running tasks per class (what ``engine.snapshot`` rolls up into usage)
    running_per_class: list[int] = field(default_factory=list)
    first_start: float | None = None
    finished_at: float | None = None
    cancelled: bool = False
    preempted: int = 0  # tasks of this job stopped by fair-share preemption
    #: why its tasks are back in the queue: the last preemption that stopped some
    #: (``explain``'s ``preempted`` reason, ``Scheduler._note_preempted``), kept while
    #: ``preempted_waiting`` of its tasks have not started again; None: none waits
    preempted_by: dict | None = None
    preempted_waiting: int = 0
    #: constrained fairness: per class, the demand as reported to the sorter (the real
    #: demand itself for an unconstrained job); ``factor`` is C_r / C^elig_r, None for 1
    reported: list[Vector] = field(default_factory=list)
    factor: Vector | None = None
    #: the class ``next_class()`` gives and its shape key (demand, constraints), None
    #: when the job wants nothing; kept by ``Scheduler._refile`` after every change
    shape_class: int | None = None
    shape_key: tuple | None = None
    #: per class, the ids of its pending tasks, when the runtime named them at arrival
    #: (``submit(task_ids=)``: the live service's store rows); None: ids come from the
    #: scheduler's source. A task that fails or is preempted goes back to the front.
    pending_ids: list[deque] | None = None
    #: with ``pending_ids``: task id -> its starts so far (``Launch.attempt``)
    attempts: dict[int, int] | None = None
    #: the job is in ``Scheduler._ranks`` (demanding, priorities tracked)
    ranked: bool = False
    #: demanding, but a job of higher priority in its queue demands too: not demanding
    #: for the sorter, no next task (``Scheduler._rank``)
    held: bool = False

    @property
    def demanding(self) -> bool:
        # (a loop, not ``any`` over a generator: read for every completion and changed job)
        if self.cancelled:
            return False
        for p in self.pending:
            if p > 0:
                return True
        return False

    @property
    def complete(self) -> bool:
        return not self.demanding and self.running == 0

    def next_class(self) -> int | None:
        if len(self.pending) == 1:
            return 0 if self.pending[0] > 0 else None
        mix = self.job.class_mix()
        best, key = None, float("inf")
        for j, p in enumerate(self.pending):
            if p <= 0 or mix[j] <= 0:
                continue
            k = self.started[j] / mix[j]
            if k < key - 1e-12:
                best, key = j, k
        return best


class Scheduler:
    def __init__(self, resources: tuple[str, ...], nodes: tuple[Node, ...], queues: QueueTree,
                 policy: Policy, *, placement: str = "first-fit", headroom: bool = False,
                 respect_counts: bool = True, devices: Sequence[int] = (), sorter=None,
                 task_ids: Callable[[str, int], int] | None = None, half_life: float = 0.0):
        self.resources = tuple(resources)
        # decayed usage (docs/policies.md, "Fairness with memory"); 0: none, and then the
        # sorter is the instantaneous policy's, untouched
        self.half_life = half_life
        self.m = len(resources)
        self.policy = policy
        slots = policy.slots_per_node()
        self.pool = NodePool(nodes, self.m, strategy=placement, slots_per_node=slots, devices=devices)
        self.eligible = EligibleCapacity(self.pool, self.m, policy.share_is_usage_over_capacity)
        # max_per_node: (job, class index) -> running tasks per node index
        self._per_node: dict[tuple[str, int], Counter] = {}
        self.use_headroom = headroom
        self.respect_counts = respect_counts
        # (the slots of the nodes at the start: what the sorter is built with, also when a
        # queue-tree change builds it again)
        self._slots_total = (slots or 1) * len(nodes)
        # ``sorter``: one built by the caller (tests compare sorters on one scheduler);
        # it must be fresh and built for this cluster and queue tree
        self.sorter = sorter if sorter is not None else self._new_sorter(queues)
        if queues.remembers(half_life):  # (the scenario's half-life, or a queue's own)
            try:
                self.sorter.set_half_life(half_life)
            except ValueError as exc:  # (a sorter without memory)
                raise PolicyModeError(f"policy {policy.name!r}: {exc}") from None
        self.queues = queues
        # guarantees and limits (engine/bounds.py); None when no queue has any
        self.bounds = QueueBounds(queues, self.resources) if queues.bounded else None
        #: bumped whenever a job arrives, completes or starts or stops demanding: what
        #: depends on the set of demanding jobs (preemption's fair shares) keys on it
        self.demand_version = 0
        self.jobs: dict[str, JobRuntime] = {}
        self.tasks: dict[int, RunningTask] = {}
        # ``task_ids(job, class index)`` names each launch; unique among running tasks
        self._task_ids = task_ids
        self._next_id = 0
        # the change log: a job's name appended whenever its running tasks, usage or
        # demand change (a job appears as often as it changes). Its one reader, the
        # engine's ``UsageLedger``, makes it a list when it attaches, empties it as it
        # reads and hands each change to every reader of its own; until then it keeps
        # nothing (a deque of length 0: appending costs what a set's add did). And a
        # count of node changes (capacity moved), which readers compare with their own
        self.change_log: list[str] | deque[str] = deque(maxlen=0)
        self.node_changes = 0
        # demanding jobs by the shape key of their next task (Scheduler._refile)
        self._shape_jobs: dict[tuple, dict[str, None]] = {}
        # each of those shape keys' number, as filed with the sorter (``file_shape``): the
        # lowest free number is reused when a key's last job leaves, so the sorter's bit
        # masks stay as wide as the shapes present at once; ``_numbering`` counts the
        # numbers given and taken back (what the freed-node scan read stays true until then)
        self._shape_ids: dict[tuple, int] = {}
        # by number, the shape's group in ``_shape_jobs`` (a free number: none): the
        # candidates of a freed node's shapes read by the numbers the scan kept, with no
        # key hashed (a key is a tuple of tuples: hashed anew at every lookup)
        self._groups_by_number: dict[int, dict[str, None]] = {}
        self._free_shape_ids: list[int] = []
        self._numbering = 0
        # the pending task shapes (minimal ones, saturation) and where they fit
        self.shapes = PendingShapes(self.m)
        self.fits = FitMemo(self.pool, self.shapes, self._shape_ids)
        # quiet point: the freed-nodes mark when a schedule() call ended because no
        # pending task fitted anywhere (None: unknown); ``shapes.new``: shapes since
        self._quiet_mark: int | None = None
        self._filed = 0  # jobs in _shape_jobs
        self._refiled = 0  # moves in _shape_jobs (a job filed, unfiled or moved): its version
        # the candidate path's limits (-1 turns it off: the plain path, for comparisons)
        self.pick_among_max = self.sorter.among_max
        self._among_cost = self.sorter.among_cost
        self.freed_scan_max = _FREED_SCAN_MAX
        self.decisions = 0
        #: the running tasks of gangs stopped because one of their tasks failed, was lost
        #: or preempted; the engine kills them and empties the list
        self.gang_stopped: list[RunningTask] = []
        # priorities: queue -> priority -> its demanding jobs (arrival order)
        self._ranks: dict[str, dict[int, dict[str, None]]] = {}
        #: gang reservations (``engine.reserve``; :meth:`reserve_gangs`); None: off
        self.reserve: GangReserve | None = None

    def reserve_gangs(self, reserve_after: float, *, task_ends: TaskEnds | None = None,
                      next_duration: NextDuration | None = None) -> GangReserve:
        """Turn on gang reservations (``gangs: {reserve_after:}``; ``engine.reserve``):
        ``task_ends``/``next_duration`` are what the runtime knows of durations (the
        simulator: both, so it backfills; serve: neither). Gangs already waiting count
        from their submit."""
        self.reserve = GangReserve(self, reserve_after, task_ends=task_ends, next_duration=next_duration)
        for name, rt in self.jobs.items():
            if rt.job.gang and rt.demanding and not rt.running:
                self.reserve.gang_waits(name, rt.submitted_at)
        return self.reserve

    @property
    def normalize_constrained(self) -> bool:
        """Constrained jobs are reported normalized by their eligible capacity (the
        policy's share is usage over capacity; a test may turn it off to compare)."""
        return self.eligible.enabled

    @normalize_constrained.setter
    def normalize_constrained(self, on: bool) -> None:
        self.eligible.enabled = on
        self.eligible.clear()

    # --- events ---------------------------------------------------------------------------
    def submit(self, job: Job, now: float, *, task_ids: Sequence[Sequence[int]] | None = None,
               running: Sequence[tuple[int, int, str, int]] = (),
               attempts: Sequence[tuple[int, int]] = ()) -> None:
        """A job arrives. ``task_ids``: per class, the ids of its pending tasks in the
        order they are to start; without it ids come from the scheduler's source.
        ``running``: ``(task id, class index, node, attempt)`` of tasks of the job already
        running (a runtime restarted: they are adopted, not decided). The class counts are
        the two together. ``attempts``: ``(task id, starts so far)`` of pending tasks that
        ran before (their next launch is attempt starts + 1)."""
        if job.name in self.jobs:
            raise ValueError(f"job {job.name!r} already submitted")
        if task_ids is not None:
            if len(task_ids) != len(job.classes):
                raise ValueError(f"job {job.name!r}: task ids for {len(task_ids)} classes, it has "
                                 f"{len(job.classes)}")
            adopted = Counter(k for _t, k, _n, _a in running)
            for k, (ids, cls) in enumerate(zip(task_ids, job.classes)):
                if cls.count is None or len(ids) + adopted[k] != cls.count:
                    raise ValueError(f"job {job.name!r}: class {k} has {cls.count} tasks, "
                                     f"{len(ids)} ids and {adopted[k]} running")
        pending = [float("inf") if (c.count is None or not (self.respect_counts or job.gang)) else float(c.count)
                   for c in job.classes]
        rt = JobRuntime(job, now, pending, [0] * len(job.classes), [0] * len(job.classes),
                        running_per_class=[0] * len(job.classes),
                        pending_ids=None if task_ids is None else [deque(ids) for ids in task_ids],
                        attempts=None if task_ids is None else dict(attempts))
        self._set_factor(rt)
        self.jobs[job.name] = rt
        self.change_log.append(job.name)
        for j in range(len(job.classes)):
            if pending[j] > 0:
                self._track(job, j, +1)
        if rt.complete:  # nothing to run at all
            rt.finished_at = now
            return
        self.sorter.add_job(job.name, job.queue, job.weight, job.gang_demand() if job.gang else job.composite_demand())
        self.demand_version += 1
        self._rank(rt, True)
        self._refile(rt)
        if self.use_headroom:
            self._update_headroom()
        if job.gang and self.reserve is not None and not running:
            self.reserve.gang_waits(job.name, now)
        for task_id, class_index, node, attempt in running:
            self._adopt(job.name, class_index, node, now, task_id, attempt)

    def finish(self, task_id: int, now: float) -> RunningTask:
        """A task completed: release its resources; the job may be complete."""
        task = self.tasks.pop(task_id)
        rt = self.jobs[task.job]
        self._release(rt, task, now)
        rt.done[task.class_index] += 1
        if rt.running == 0:  # (a job with tasks running is not complete: no call per task)
            self._maybe_complete(rt, now)
        return task

    def fail(self, task_id: int, now: float) -> RunningTask:
        """A task failed (or its node died): release and run it again later. A gang's
        other running tasks stop with it (``gang_stopped``; module docstring)."""
        task = self._fail_one(task_id, now)
        rt = self.jobs[task.job]
        if rt.job.gang and rt.running and not rt.cancelled:
            siblings = sorted(t.task_id for t in self.tasks.values() if t.job == task.job)
            self.gang_stopped.extend(self._fail_one(sibling, now) for sibling in siblings)
        return task

    def _fail_one(self, task_id: int, now: float) -> RunningTask:
        task = self.tasks.pop(task_id)
        rt = self.jobs[task.job]
        self._release(rt, task, now)
        if not rt.cancelled:
            was = rt.demanding
            if rt.pending_ids is not None:
                rt.pending_ids[task.class_index].appendleft(task.task_id)
            rt.pending[task.class_index] += 1
            rt.started[task.class_index] -= 1
            if rt.pending[task.class_index] == 1:
                self._track(rt.job, task.class_index, +1)
            if not was:
                self.sorter.set_demanding(task.job, True)
                self.demand_version += 1
                self._rank(rt, True)
            if rt.job.gang and self.reserve is not None and not rt.running:
                self.reserve.gang_waits(task.job, now)  # (back to pending, whole: it waits again)
            self._refile(rt)
        self._maybe_complete(rt, now)
        return task

    def cancel(self, job_name: str, now: float) -> list[int]:
        """Stop a job: no new tasks; returns its running task ids for the caller to kill."""
        rt = self.jobs[job_name]
        self.change_log.append(job_name)
        if not rt.cancelled:
            for j, p in enumerate(rt.pending):
                if p > 0:
                    self._track(rt.job, j, -1)
            rt.cancelled = True
            if rt.pending_ids is not None:
                for ids in rt.pending_ids:
                    ids.clear()
            self._refile(rt)
            if job_name in self.sorter.jobs:
                self.sorter.set_demanding(job_name, False)
                self.demand_version += 1
            self._rank(rt, False)
        self._maybe_complete(rt, now)
        return [t.task_id for t in self.tasks.values() if t.job == job_name]

    def add_node(self, node: Node, now: float) -> None:
        self.pool.add_node(node)
        self.node_changes += 1
        self.fits.nodes_changed()
        self._quiet_mark = None
        self.sorter.set_capacity(self.pool.total_capacity)
        self._refresh_factors(now)

    def lose_node(self, name: str, now: float) -> list[int]:
        """A node died: its tasks go back to pending (returned so the runtime can cancel them)."""
        idx = self.pool.index_of[name]
        lost = sorted(t.task_id for t in self.tasks.values() if t.node_index == idx)
        for task_id in lost:
            if task_id in self.tasks:  # (else stopped already with a gang member lost before it)
                self.fail(task_id, now)
        if self.gang_stopped:  # (the node's own tasks are lost, not stopped)
            self.gang_stopped = [t for t in self.gang_stopped if t.node_index != idx]
        self.pool.remove_node(name)
        self.node_changes += 1
        self.sorter.set_capacity(self.pool.total_capacity)
        self._refresh_factors(now)
        return lost

    def forget(self, job_name: str) -> JobRuntime:
        """Drop a finished job's record (a streaming runtime keeps only the jobs in the
        system); returns it. The sorter already let it go when it completed. Raises
        ``ValueError`` for a job that is unknown or not finished (its tasks still hold
        resources, or it may still run)."""
        rt = self.jobs.get(job_name)
        if rt is None:
            raise ValueError(f"job {job_name!r} is not known to the scheduler")
        if rt.finished_at is None:
            raise ValueError(f"job {job_name!r} has not finished: only a finished job can be forgotten")
        del self.jobs[job_name]  # (its name may stay in the change log: readers skip it)
        for j in range(len(rt.job.classes)):
            self._per_node.pop((job_name, j), None)
        return rt

    def queue_table(self) -> QueueBounds:
        """The table of every queue's usage (``engine/bounds.py``; made on the first ask
        when no queue is bounded): the engine's usage ledger settles it, its views and the
        limit tests read it."""
        if self.bounds is None:
            self.bounds = QueueBounds(self.queues, self.resources)
        return self.bounds

    def track_queue_usage(self) -> QueueBounds:
        """Keep every queue's current usage up to date from now on (preemption reads it
        each round); returns the table (``bounds``, whose every queue then moves)."""
        if self.bounds is None or not self.bounds.tracks_all:
            tracked = QueueBounds(self.queues, self.resources, track_all=True)
            if self.bounds is not None:  # (what the usage ledger settled stays)
                tracked.usage, tracked.running = self.bounds.usage, self.bounds.running
            tracked.moving_from((self.jobs[task.job].job.queue, task.demand) for task in self.tasks.values())
            self.bounds = tracked
        return self.bounds

    def preempt(self, victims, job_name: str, class_index: int, node_name: str,
                now: float, legality=None) -> tuple[list[RunningTask], Launch | None]:
        """Fair-share preemption (``engine/preemption.py``): stop ``victims`` (task ids;
        they go back to pending, their work lost, counted in ``JobRuntime.preempted``)
        and start a task of ``job_name``'s class ``class_index`` on ``node_name`` in the
        room they leave. The launch is None if it no longer fits there (device
        fragmentation can defeat the planner's summed amounts; the freed capacity then
        goes to the next decision round like any other). ``legality``: the planner's
        ``Legality``, kept on each victim job (``_note_preempted``)."""
        stopped = self._stop_victims(victims, now, job_name, legality)
        rt = self.jobs[job_name]
        node = self.pool.index_of[node_name]
        cls = rt.job.classes[class_index]
        if rt.cancelled or rt.pending[class_index] <= 0 or not self.pool.alive(node) or \
                not self.pool.fits_on(node, cls.demand) or \
                (self.bounds is not None and self.bounds.over_limit(rt.job.queue, cls.demand)):
            return stopped, None
        if cls.max_per_node is not None and not self._under_limit(job_name, class_index, cls.max_per_node)(node):
            return stopped, None
        return stopped, self._launch(job_name, class_index, node, now)

    def preempt_for_gang(self, victims, job_name: str, now: float,
                         legality=None) -> tuple[list[RunningTask], list[Launch]]:
        """Fair-share preemption for a gang (``engine/preemption.py``): stop ``victims`` as
        :meth:`preempt` does and start every pending task of gang ``job_name`` in the
        room they leave, placed as a gang is (``engine.gangs``), or none of them when it
        no longer fits whole (the freed capacity goes to the next decision round)."""
        stopped = self._stop_victims(victims, now, job_name, legality)
        rt = self.jobs[job_name]
        chosen: dict = {}
        if rt.cancelled or rt.held or not any(rt.pending) or \
                not self._gang_runnable(rt, chosen, lambda name: None):
            return stopped, []
        return stopped, [self._launch(job_name, j, node, now) for j, node in chosen[job_name][1]]

    def _stop_victims(self, victims, now: float, by: str, legality=None) -> list[RunningTask]:
        """Stop ``victims`` (back to pending, counted in ``JobRuntime.preempted``) for job
        ``by``; a victim gang loses all of its tasks."""
        stopped = []
        for task_id in victims:
            if task_id not in self.tasks:
                continue  # (stopped already with an earlier victim of its gang)
            task = self.fail(task_id, now)
            stopped.append(task)
            stopped.extend(self.gang_stopped)  # (a victim gang loses all its tasks)
            self.gang_stopped = []
        for task in stopped:
            self.jobs[task.job].preempted += 1
        if legality is not None:
            self._note_preempted(stopped, by, legality, now)
        return stopped

    def _note_preempted(self, stopped: list[RunningTask], by: str, legality, now: float) -> None:
        """Keep on each victim job the ``preempted`` reason of ``engine/explain.py``: who
        (``by``), when, under which rule, and the two ratios the rule compared
        (``engine.preemption.Legality``; None for an infinite ratio, a fair share of 0).
        Only when a preemption is made: nothing on the decision path."""
        requeued = Counter(task.job for task in stopped)
        compared = {job: (before, after, rank) for job, before, after, rank in legality.victims}
        claimant = self.jobs.get(by)
        for job, tasks in requeued.items():
            before, after, rank = compared.get(job, (None, None, None))
            reason = {"kind": "preempted", "by": by, "at": now, "rule": legality.rule, "tasks": tasks,
                      "victim_ratio_before": _finite(before), "victim_ratio": _finite(after),
                      "claimant_ratio_before": _finite(legality.claimant_ratio_before),
                      "claimant_ratio": _finite(legality.claimant_ratio)}
            if legality.rule == "within_queue":
                reason["priority"] = rank
                reason["claimant_priority"] = None if claimant is None else claimant.job.priority
            rt = self.jobs[job]
            rt.preempted_by = reason
            rt.preempted_waiting += tasks

    def _adopt(self, job_name: str, class_index: int, node_name: str, now: float, task_id: int,
               attempt: int) -> Launch:
        """Record task ``task_id`` of ``job_name``'s class, already running on ``node_name``
        (``submit(running=)``: a runtime restarted while it ran): it takes one pending task
        of that class and the node's capacity like a launch, but it is not a decision
        (``decisions`` is unchanged)."""
        rt = self.jobs[job_name]
        if rt.pending[class_index] <= 0:
            raise ValueError(f"job {job_name!r} has no pending task of class {class_index} to adopt")
        if task_id in self.tasks:
            raise ValueError(f"task id {task_id} is already running")
        if node_name not in self.pool.index_of:
            raise ValueError(f"task id {task_id} runs on unknown node {node_name!r}")
        if rt.attempts is not None:
            rt.attempts[task_id] = attempt - 1  # (``_launch`` counts this start)
        launch = self._launch(job_name, class_index, self.pool.index_of[node_name], now, task_id)
        self.decisions -= 1
        return launch

    def change_queues(self, change: QueueChange, now: float) -> None:
        """Apply a queue-tree change in place (``engine.events.QueueChanged``): the jobs,
        their running tasks, the nodes and every count stay; the policy's sorter and the
        queue bounds are built again for the new tree and told what each job holds, in
        arrival order, so the next decision follows the new weights, guarantees and
        limits. (State a sorter keeps beyond what jobs hold, Tan's time window, starts
        again.) Raises ``ValueError`` with the reason when the change cannot apply: an
        invalid change (``QueueTree.changed``) or removing a queue a job still uses."""
        tree = self.queues.changed(change)
        if change.remove:
            used = sorted(name for name, rt in self.jobs.items()
                          if rt.finished_at is None and rt.job.queue not in tree)
            if used:
                raise ValueError(f"cannot remove queue {change.path!r}: job(s) {', '.join(map(repr, used[:5]))} "
                                 f"still use it")
        old = self.sorter
        self.queues = tree
        self.sorter = self._new_sorter(tree)
        self.pick_among_max = self.sorter.among_max
        self._among_cost = self.sorter.among_cost
        for name, rt in self.jobs.items():  # (arrival order)
            if name not in old.jobs:
                continue  # finished or never demanding: the old sorter had let it go
            self.sorter.add_job(name, rt.job.queue, rt.job.weight,
                                rt.job.gang_demand() if rt.job.gang else rt.job.composite_demand())
            if not rt.demanding or rt.held:
                self.sorter.set_demanding(name, False)
            if rt.shape_key is not None:
                self.sorter.file_shape(name, self._shape_ids[rt.shape_key])
        for task in self.tasks.values():  # (launch order: each task as it was allocated)
            self.sorter.allocated(task.job, self.jobs[task.job].reported[task.class_index], now)
        # a new usage table for the new tree: nothing settled yet (the usage ledger settles
        # every job again, ``UsageLedger.tree_changed``), every running task in its moving
        # part meanwhile, so the limit tests of this instant read the full usage
        self.bounds = QueueBounds(tree, self.resources,
                                  track_all=self.bounds is not None and self.bounds.tracks_all)
        self.bounds.moving_from((self.jobs[task.job].job.queue, task.demand) for task in self.tasks.values())
        self.demand_version += 1  # (what depends on the tree, preemption's fair shares, is computed again)
        self._quiet_mark = None

    def _new_sorter(self, queues: QueueTree):
        sorter = self.policy.online(self.resources, queues, self.pool.total_capacity, slots_total=self._slots_total,
                                    nodes=tuple(st.node for st in self.pool.states))
        old = getattr(self, "sorter", None)
        if queues.remembers(self.half_life) and old is not None:  # a new queue tree keeps the history
            sorter.set_half_life(self.half_life, getattr(old, "decay", None))
        return sorter

    # --- decisions --------------------------------------------------------------------------
    def schedule(self, now: float) -> list[Launch]:
        """Start tasks until no job the policy would pick can run anywhere; with gang
        reservations on and a gang waiting, the reserved gang first and backfill last
        (``engine.reserve``). The decisions: :meth:`_decide`."""
        reserve = self.reserve
        if reserve is None or not reserve.active:
            return self._decide(now, [])
        launches = self._decide(now, reserve.before(now))
        reserve.after(now, launches)
        return launches

    def _decide(self, now: float, launches: list[Launch]) -> list[Launch]:
        """Start tasks (appended to ``launches``) until no job the policy would pick can
        run anywhere.

        Candidates. After a *quiet point* (a call that ended because no pending task fitted
        anywhere), only the nodes freed since can hold anything, and only the shapes that
        fit on them, plus shapes that appeared since, can run: a short list, found by one
        vectorized scan per freed node (``FitMemo.scan_freed``). Within the call a launch
        changes only its own node, so after it only the shapes found on that node are
        tested again, by the same vectorized test on their kept needs
        (``FitMemo.still_fitting``). With one freed node (a steady state's usual call) its
        list is the candidate list, and ``runnable`` puts a candidate's task there after
        testing the node itself (see the comment there for why that is the list's answer).
        When the jobs whose
        next task has one of those shapes are few (the sorter's ``among_max``, and few enough
        that comparing them beats the descent), the sorter chooses among just them
        (``pick_among``: the job its ``pick`` would return, as every other job is not
        runnable), instead of descending past the many jobs that fit nowhere. On a full
        cluster that is most decisions.

        Exclusion. Within a call free capacity only shrinks and per-node counts only grow,
        so a job found unable to run stays so, and so does every job whose next task has a
        shape that fits nowhere: the sorter is told (``exclude``; for a shape, once:
        ``exclude_shape``) and may skip them. Once the jobs left are few, the call switches
        to the candidate list. When the candidates are too many for ``pick_among``, the
        sorter is told their shapes instead (``only_shapes``): a shape-indexed sorter
        (``machinery.descent.ShapeIndex``) then descends only into subtrees holding one.
        Every job's shape is filed with the sorter by number (``file_shape``, :meth:`_refile`).

        Neither changes a decision (``tests/test_candidates.py``)."""
        # best-fit / packing: which shapes fit nowhere, for this call only (within one call
        # free capacity only shrinks, so "fits nowhere" stays true); first-fit keeps its
        # memo across calls (_locate)
        fit: dict[tuple, int | None] = {}
        # first-fit: the keys of ``fit`` found on each node; a launch there drops them (the
        # other answers stand: their nodes did not change, the nodes before them only shrank)
        fits = self.fits
        fits.fit_keys_on = {}
        pending_keys = self.shapes.keys
        first_fit = self.pool.strategy == "first-fit"
        pool = self.pool
        # local: shape -> the freed nodes it fits on (nowhere else, by the quiet point), in
        # cluster order; fitting_on: the same by node; searched: shapes new since the quiet
        # point (searched for as usual); shapes: both (None: no candidate list yet).
        # One freed node (``only_node``; a steady state's usual call): no ``local`` (None);
        # its shapes are ``fitting_on[only_node]``'s and ``runnable`` tests the node itself
        local: dict[tuple, list[int]] | None = {}
        fitting_on: dict[int, NodeFits] = {}
        only_node, new_keys, only_eligible = -1, set(), fits.eligible_set
        scan = fits.scan_freed(self._quiet_mark, self.freed_scan_max)
        if scan is None:
            searched = shapes = None
        else:
            fitting_on, searched = scan
            if len(fitting_on) == 1:
                only_node, = fitting_on
                local = None
                new_keys = set(searched)
            for node in sorted(fitting_on) if len(fitting_on) > 1 else ():
                for key in fitting_on[node][0]:
                    nodes = local.get(key)
                    if nodes is None:
                        local[key] = [node]
                    else:
                        nodes.append(node)
            shapes = searched  # (the loop's first pass lists both)
        numbered = self._numbering
        self._quiet_mark = None
        self.shapes.new.clear()
        jobs, locate, chosen = self.jobs, fits.locate, {}
        restrict, rows, fit_row = fits.restrict, pool._rows, pool._fit_row
        eligible_sets = fits._eligible_sets
        exclude, exclude_shape = self.sorter.exclude, self.sorter.exclude_shape
        self.sorter.reset_excluded()
        last_node, last_key = -1, None
        # the candidates last listed: (shapes, ``_refiled`` then, the jobs or None)
        among_of: tuple = (None, -1, None)
        # without a quiet point: shapes found to fit nowhere in this call, and how many
        # jobs wanted them; once the others are few, switch to the candidate list
        dead: set[tuple] = set()
        dead_jobs = 0

        bounds = self.bounds
        # (a sorter whose order has no saturated set, the flat ones, is not told it)
        reads_saturated = getattr(self.sorter, "reads_saturated", True)

        def runnable(name: str) -> bool:
            rt = jobs[name]
            j = rt.shape_class
            if j is None:
                return False
            if rt.job.gang:
                return self._gang_runnable(rt, chosen, exclude)
            cls = rt.job.classes[j]
            if bounds is not None and bounds.over_limit(rt.job.queue, cls.demand):
                exclude(name)  # (usage only grows within a call: it stays over)
                return False
            allowed = None
            key = rt.shape_key
            if cls.max_per_node is not None:
                # a per-node limit makes the node depend on the job: its own cache entry
                # (still monotone within a call: counts only grow, free only shrinks)
                key = (cls.demand, cls.constraints, name, j)
                allowed = self._under_limit(name, j, cls.max_per_node)
            if not (first_fit and allowed is None):
                node = locate(key, cls.demand, cls.constraints, allowed, fit)
            elif local is None:
                # the one freed node's shapes are the pending ones, not new, that fit on it
                # (eligible): this one is one of them now exactly when it is not new and fits
                # there now (it was pending at the scan, as pending shapes only go within a
                # call, and a fit now is one then and after every launch since)
                # (``fits.eligible_set`` and ``pool.fits_on`` read without their calls, as
                # they read: the kept set, the row's limits, the need as ``_effective``'s)
                demand = cls.demand
                if (not new_keys or key not in new_keys) and \
                        only_node in (eligible_sets.get(cls.constraints) or only_eligible(cls.constraints)) and \
                        not any(map(gt, demand if pool.headroom is None and not pool.devices else pool._effective(demand),
                                    (rows[only_node] or fit_row(only_node))[1])):
                    node = only_node
                else:
                    node = locate(key, cls.demand, cls.constraints, allowed, fit)
            else:
                nodes = local.get(key)
                if nodes:  # fits on these freed nodes only: the first fit is the first of them
                    node = nodes[0]
                else:
                    node = locate(key, cls.demand, cls.constraints, allowed, fit)
            if node is None:
                # not runnable for the rest of this call (free capacity only shrinks, per-node
                # counts only grow): nor is any job whose next task has this shape
                if allowed is None and key not in dead:
                    nonlocal dead_jobs
                    dead.add(key)
                    group = self._shape_jobs.get(key)
                    if group:  # (one shape for the sorter, not each of its jobs: ``exclude_shape``)
                        dead_jobs += len(group)
                        exclude_shape(self._shape_ids[key], group)
                else:
                    exclude(name)
                return False
            chosen[name] = (j, node)
            return True

        def shrunk(node: int) -> None:
            """A launch on ``node``: drop it from the shapes of ``local`` that no longer
            fit there (only the shapes found on it can change: no other node moved)."""
            found = fitting_on.get(node)
            if found is None:
                return
            # (``fits.still_fitting(node, found)`` read without its two calls: its test on
            # the node's limits as ``pool.fit_limits`` reads them; one per launch)
            still = restrict(found[0], found[1], found[2], (rows[node] or fit_row(node))[1], found)
            if still is found:
                return
            fitting_on[node] = still
            if local is None:
                return
            kept = set(still[0])
            for key in found[0]:
                if key not in kept:
                    nodes = local[key]
                    nodes.remove(node)
                    if not nodes:
                        del local[key]

        def launched_on(node: int) -> None:
            """A gang's task launched on ``node``, not its last (for the last, the loop
            does this as for any launch): what this call found there may not hold."""
            if first_fit:
                for key in fits.fit_keys_on.pop(node, ()):
                    if fit.get(key) == node:
                        del fit[key]
            if shapes is not None:
                shrunk(node)

        while True:
            if shapes is not None:
                # within a call free capacity only shrinks: the lists only get shorter
                if last_node >= 0:
                    shrunk(last_node)
                if searched:
                    # (first-fit: a shape found in this call, its node untouched since, is
                    # ``fits_now``'s answer read without its two calls, as ``locate`` reads it)
                    searched = [key for key in searched if key in pending_keys and
                                (fit[key] is not None if first_fit and key in fit else fits.fits_now(key, fit))]
                # (a shape no longer pending has no jobs: the sorter never meets it)
                if local is None:
                    shapes = fitting_on[only_node][0]
                else:
                    shapes = list(local)
                if searched:
                    shapes = searched + shapes
                if pending_keys.keys().isdisjoint(shapes):  # (``not any(key in pending_keys ...)``, in C)
                    self._quiet_mark = pool.freed_mark()
                    return launches
            elif not (last_key in pending_keys and pool.fits_on(last_node, last_key[0])) and \
                    not any(fits.fits_now(key, fit) for key in self.shapes.minimal(self.use_headroom)):
                # (the shape just launched, if it still fits where it went, is a witness
                # that something fits: no search)
                self._quiet_mark = self.pool.freed_mark()
                return launches  # no pending task fits anywhere
            elif dead and self._filed - dead_jobs <= self.pick_among_max:
                searched = [key for key in pending_keys if key not in dead]
                shapes = searched  # (the dead ones stay dead: free space only shrinks)
                continue
            if reads_saturated:
                self.sorter.set_saturated(self.shapes.saturated(pool.total_free))
            chosen.clear()
            among = None
            if shapes is not None:
                # comparing n candidates costs about n x the sorter's among_cost; the
                # descent passes about (demanding jobs / n) that cannot run before it
                # meets one that can (OnlineSorter.among_cost; infinite: never cheaper,
                # n not counted)
                if self._among_cost < math.inf and self.pick_among_max >= 0:
                    # the candidates: the jobs of these shapes, shape by shape, unless they
                    # are too many (with among_cost >= 0 the test holds for every longer list
                    # once it holds for one, so testing the whole count once is testing it
                    # after each shape, as the loop this replaces did). They depend on the
                    # shapes and on ``_shape_jobs`` alone: the same shapes list (a launch left
                    # every shape fitting, ``shrunk``) and no job refiled since give the same
                    # list, kept (a copy to the sorter: it may keep or change what it gets)
                    if shapes is among_of[0] and self._refiled == among_of[1]:
                        among = None if among_of[2] is None else list(among_of[2])
                    else:
                        if local is None and not searched and numbered == self._numbering:
                            # the one freed node's shapes (``shapes``, in column order) by the
                            # numbers the scan read (none given or taken back since: each
                            # number >= 0 is its key's, whose group is not empty; -1: no job);
                            # the same list as below, in one call (``fitmemo.candidate_jobs_reference``)
                            among = fits.candidate_jobs(fitting_on[only_node][2], self._groups_by_number,
                                                        self.pick_among_max, self._among_cost, self._filed)
                        else:
                            groups = list(filter(None, map(self._shape_jobs.get, shapes)))
                            n = sum(map(len, groups))
                            if n > self.pick_among_max or n * n * self._among_cost > self._filed:
                                among = None
                            else:
                                among = list(chain.from_iterable(groups))
                        among_of = (shapes, self._refiled, None if among is None else tuple(among))
                if among is None:  # the descent: only jobs of these shapes can run (``only_shapes``)
                    if local is None and not searched and numbered == self._numbering:
                        # the one freed node's shapes: their numbers as the scan read them
                        # (none given or taken back since; -1: not filed, no job)
                        numbers = fitting_on[only_node][2].tolist()
                        if -1 in numbers:
                            numbers = [i for i in numbers if i >= 0]
                        self.sorter.only_shapes(numbers)
                    else:
                        ids = self._shape_ids
                        self.sorter.only_shapes([i for key in shapes if (i := ids.get(key)) is not None])
            name = None
            if bounds is not None and bounds.has_guarantees:
                # a queue owed its guarantee goes first, by the policy's own order
                def owed_and_runnable(job_name: str) -> bool:
                    rt = jobs[job_name]
                    return rt.shape_class is not None and \
                        bounds.owed(rt.job.queue, rt.job.classes[rt.shape_class].demand) and runnable(job_name)

                if among is None:
                    name = self.sorter.pick(owed_and_runnable, now)
                else:
                    name = self.sorter.pick_among(among, owed_and_runnable, now)
            if name is None:
                if among is None:
                    name = self.sorter.pick(runnable, now)
                else:
                    name = self.sorter.pick_among(among, runnable, now)
            if name is None:
                return launches
            if name not in chosen and not runnable(name):  # a sorter must only return runnable jobs
                raise AssertionError(f"sorter picked {name!r}, which cannot run")
            j, node = chosen[name]
            if j is None:  # a gang: every pending task, one decision
                members = node
                for j, node in members:
                    launches.append(self._launch(name, j, node, now))
                for _j, other in members[:-1]:
                    launched_on(other)
            else:
                launches.append(self._launch(name, j, node, now))
            last_node = node
            cls = jobs[name].job.classes[j]
            last_key = (cls.demand, cls.constraints)
            if first_fit:
                for key in fits.fit_keys_on.pop(node, ()):
                    if fit.get(key) == node:
                        del fit[key]

    def _gang_runnable(self, rt: JobRuntime, chosen: dict, exclude: Callable[[str], None]) -> bool:
        """Whether every pending task of gang ``rt`` can start now (``engine.gangs``);
        if so ``chosen`` gets ``(None, [(class index, node), ...])``. A gang that cannot
        is excluded for the rest of the call (free capacity only shrinks within it)."""
        job = rt.job
        members = gang_members(job.classes, rt.pending)
        demand = tuple(sum(job.classes[j].demand[r] for j in members) for r in range(self.m))
        nodes = None
        if self.bounds is None or not self.bounds.over_limit(job.queue, demand):
            per_node = self._per_node
            nodes = place_gang(self.pool, job.classes, members, demand, job.pack,
                               lambda j, node: per_node.get((job.name, j), {}).get(node, 0))
        if nodes is None:
            exclude(job.name)
            return False
        chosen[job.name] = (None, list(zip(members, nodes)))
        return True

    def _rank(self, rt: JobRuntime, demanding: bool) -> None:
        """File a job that starts (stops) demanding under its queue and priority (after
        the sorter was told); when that moves the queue's highest demanding priority, or
        files a job below it, hold or release the jobs concerned (module docstring,
        "Priorities"). Jobs of the levels not named stay as they were: held below the
        top before and after."""
        if rt.ranked == demanding:
            return
        rt.ranked = demanding
        queue, priority, name = rt.job.queue, rt.job.priority, rt.job.name
        ranks = self._ranks.setdefault(queue, {})
        was_top = max(ranks, default=None)
        if demanding:
            ranks.setdefault(priority, {})[name] = None
        else:
            rt.held = False
            del ranks[priority][name]
            if not ranks[priority]:
                del ranks[priority]
        top = max(ranks, default=None)
        if top == was_top and (not demanding or priority == top):
            return  # (every queue whose jobs share one priority)
        for level in {was_top, top, priority}:
            hold = level != top
            for other in ranks.get(level, ()):
                held = self.jobs[other]
                if held.held != hold:
                    held.held = hold
                    self.sorter.set_demanding(other, not hold)
                    self._refile(held)

    def _refile(self, rt: JobRuntime) -> None:
        """Keep ``rt.shape_class``/``shape_key`` (its next task) and ``_shape_jobs`` current."""
        j = None if rt.cancelled or rt.held else rt.next_class()
        key = None
        if j is not None:
            cls = rt.job.classes[j]
            key = (cls.demand, cls.constraints)
        rt.shape_class = j
        if key == rt.shape_key:
            return
        name = rt.job.name
        self._refiled += 1
        if rt.shape_key is not None:
            group = self._shape_jobs[rt.shape_key]
            del group[name]
            self._filed -= 1
            if not group:
                del self._shape_jobs[rt.shape_key]
                number = self._shape_ids.pop(rt.shape_key)
                heapq.heappush(self._free_shape_ids, number)
                del self._groups_by_number[number]
                self._numbering += 1
                self.fits.shape_filed(rt.shape_key, None)
        rt.shape_key = key
        shape = None
        if key is not None:
            group = self._shape_jobs.get(key)
            if group is None:
                group = self._shape_jobs[key] = {}
                ids = self._free_shape_ids
                number = self._shape_ids[key] = heapq.heappop(ids) if ids else len(self._shape_ids)
                self._groups_by_number[number] = group
                self._numbering += 1
                self.fits.shape_filed(key, number)
            group[name] = None
            self._filed += 1
            shape = self._shape_ids[key]
        self.sorter.file_shape(name, shape)

    def _launch(self, name: str, j: int, node: int, now: float, task_id: int | None = None) -> Launch:
        rt = self.jobs[name]
        cls = rt.job.classes[j]
        attempt = 1
        if rt.attempts is not None:  # (task ids named at arrival)
            if task_id is None:
                task_id = rt.pending_ids[j].popleft()
            attempt = rt.attempts[task_id] = rt.attempts.get(task_id, 0) + 1
        elif task_id is None:
            if self._task_ids is None:
                task_id = self._next_id
                self._next_id += 1
            else:
                task_id = self._task_ids(name, j)
        demand = cls.demand
        pool = self.pool
        # (a plain pool: ``pool.take``'s one call, without its own)
        held = nodes_module.take_plain(pool, node, demand) if pool.plain else pool.take(node, demand)
        if cls.max_per_node is not None:
            self._per_node.setdefault((name, j), Counter())[node] += 1
        pending = rt.pending
        pending[j] -= 1
        rt.started[j] += 1
        if rt.preempted_by is not None:  # (a re-queued task starts again)
            rt.preempted_waiting -= 1
            if rt.preempted_waiting <= 0:
                rt.preempted_by = None
                rt.preempted_waiting = 0
        rt.running += 1
        rt.running_per_class[j] += 1
        self.change_log.append(name)
        if rt.first_start is None:
            rt.first_start = now
        ran_out = pending[j] == 0
        if ran_out:
            self._track(rt.job, j, -1)
        if ran_out or len(pending) > 1:
            self._refile(rt)  # (one class with tasks left: the next task is the same shape)
        self.tasks[task_id] = RunningTask(task_id, name, j, node, demand, now, held, attempt)
        if self.bounds is not None:
            self.bounds.take(rt.job.queue, demand)
        self.sorter.allocated(name, rt.reported[j], now)
        if ran_out and not rt.demanding:  # (only the class just launched can have run out)
            self.sorter.set_demanding(name, False)
            self.demand_version += 1
            self._rank(rt, False)
        self.decisions += 1
        return Launch(task_id, name, cls.name, j, pool.states[node].node.name, demand,
                      tuple((self.resources[r], devs) for r, devs in held) if held else (), attempt)

    def _release(self, rt: JobRuntime, task: RunningTask, now: float) -> None:
        """Give a task's resources back to its node, its per-node slot, and the sorter."""
        pool = self.pool
        if pool.plain:  # (``pool.give_back``'s one call, without its own)
            nodes_module.give_back_plain(pool, task.node_index, task.demand)
        else:
            pool.give_back(task.node_index, task.demand, task.devices)
        if self.bounds is not None:
            self.bounds.give_back(rt.job.queue, task.demand)
        rt.running -= 1
        rt.running_per_class[task.class_index] -= 1
        self.change_log.append(task.job)
        if rt.job.classes[task.class_index].max_per_node is not None:
            self._per_node[(task.job, task.class_index)][task.node_index] -= 1
        self.sorter.released(task.job, rt.reported[task.class_index], now)

    def _under_limit(self, name: str, j: int, limit: int):
        counts = self._per_node.get((name, j))
        if counts is None:
            return lambda node: True
        return lambda node: counts[node] < limit

    # --- constrained fairness ---------------------------------------------------------------
    def _set_factor(self, rt: JobRuntime) -> None:
        """The job's factor and per-class reported demands (the real ones when factor 1)."""
        rt.factor, rt.reported = self.eligible.factor_and_reported(rt.job.classes)

    def _refresh_factors(self, now: float) -> None:
        """Nodes changed: eligible capacities too. Re-report every constrained job whose
        factor moved: release its whole reported usage, then allocate the real usage
        times the new factor (running counts net unchanged)."""
        self.eligible.clear()
        if not self.normalize_constrained:
            return
        for name, rt in self.jobs.items():
            if rt.finished_at is not None or all(not c.constraints for c in rt.job.classes):
                continue
            old = rt.factor
            self._set_factor(rt)
            if rt.factor == old:
                continue
            job = self.sorter.jobs.get(name)
            if job is None or rt.running == 0:
                continue
            self.sorter.released(name, tuple(job.usage), now)
            new = [0.0] * self.m
            for j, cls_demand in enumerate(rt.reported):
                n = rt.started[j] - rt.done[j]
                if n:
                    for r, d in enumerate(cls_demand):
                        new[r] += n * d
            self.sorter.allocated(name, tuple(new), now)

    # --- bookkeeping ---------------------------------------------------------------------------
    def _maybe_complete(self, rt: JobRuntime, now: float) -> None:
        if rt.complete and rt.finished_at is None:
            rt.finished_at = now
            if rt.job.name in self.sorter.jobs:
                self.sorter.remove_job(rt.job.name)
                self.demand_version += 1
            self._rank(rt, False)
            if self.use_headroom:
                self._update_headroom()

    def _track(self, job: Job, j: int, delta: int) -> None:
        self.shapes.track(job.classes[j], delta)

    def _update_headroom(self) -> None:
        """H-DRF Sec. 5: the largest task of the jobs still active, per resource."""
        big = [0.0] * self.m
        for rt in self.jobs.values():
            if rt.finished_at is not None:
                continue
            for cls in rt.job.classes:
                for r, d in enumerate(cls.demand):
                    big[r] = max(big[r], d)
        self.pool.headroom = tuple(big)
        self.fits.headroom_changed()  # the headroom changes what fits
        self.shapes.clear_matrices()
        self._quiet_mark = None

    # --- views -------------------------------------------------------------------------------
    def usage(self, name: str) -> Vector:
        """The job's real allocation: running tasks per class times their demand (what the
        sorter holds may be normalized for a constrained job; see the module docstring)."""
        rt = self.jobs.get(name)
        out = [0.0] * self.m
        if rt is None or rt.finished_at is not None:
            return tuple(out)
        for j, cls in enumerate(rt.job.classes):
            n = rt.started[j] - rt.done[j]
            if n:
                for r, d in enumerate(cls.demand):
                    out[r] += n * d
        return tuple(out)



def _finite(x: float | None) -> float | None:
    """A number for a JSON document: None for an infinite (or missing) one."""
    return x if x is not None and math.isfinite(x) else None
