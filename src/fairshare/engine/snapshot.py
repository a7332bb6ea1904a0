"""Read-only views of a ``Scheduler``: what each job, queue, node and the cluster holds.

Runtimes do not keep their own copy of the scheduler's state: the simulator records its
timeline from ``UsageLedger.changes()`` and the live service answers ``/v1/status`` from
``UsageLedger.snapshot()``.

One table of queue usage. Every queue's and the cluster's (the root's) running tasks and
summed demands live in the scheduler's table, the one its limit tests and preemption
read (``engine/bounds.py``, ``Scheduler.queue_table``). The ledger settles it: each job
whose usage moved adds its difference to the queues above it and the cluster, in
job-name order, so the float sums never depend on set iteration order (string hashes
differ between processes) and a run's timeline is the same byte for byte. A job's usage
is recomputed from its running counts (``running_c * demand_c`` summed over its
classes, never accumulated), so it carries no float drift; queue and cluster sums do,
and are reported with the noise below 1e-9 of a unit snapped to whole numbers
(``clean``).

Reads do not consume. ``snapshot`` and ``totals`` read (after settling what is
pending). ``changes`` reports what moved since *its reader* last read: the scheduler
appends a job's name to its change log (``Scheduler.change_log``) at every change; the
ledger takes the log in (``catch_up``: it is the log's one reader and empties it),
settles the table, and adds the jobs, and the queues above those whose usage moved, to
what each of its readers (``ChangeReader``) has not read yet. Any number of readers each
see every change, whoever else reads or looks in between.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from fairshare.engine.bounds import QueueBounds
from fairshare.engine.scheduler import Scheduler
from fairshare.model.queues import ROOT
from fairshare.model.resources import Vector, dominant_share


# (named tuples, not frozen dataclasses: ``changes`` builds one per changed job and queue
# at every simulated instant, and a named tuple is several times cheaper to build)
class JobUsage(NamedTuple):
    name: str
    queue: str
    running: int  # running tasks
    usage: Vector  # what they hold (the real amounts, also for a constrained job)
    dominant_share: float  # of the capacity of the nodes that are up
    demanding: bool  # has a pending task and is neither cancelled nor finished
    finished: bool


class Usage(NamedTuple):
    """A queue's (the sum over the jobs below it) or the cluster's usage."""

    running: int
    usage: Vector
    dominant_share: float


@dataclass(frozen=True, slots=True)
class NodeUsage:
    name: str
    alive: bool
    capacity: Vector
    running: int
    used: Vector  # sum of the demands of its running tasks


class JobTimes(NamedTuple):
    submitted_at: float
    first_start: float | None  # its first task started
    finished_at: float | None  # its last task ended (None: not finished)
    tasks_done: int  # tasks completed


class Changes(NamedTuple):
    """What moved since the reader's previous ``changes`` call (its first call: every job,
    every queue and the cluster)."""

    capacity: Vector
    capacity_changed: bool  # a node was added or lost (every dominant share moved)
    jobs: list[JobUsage]  # the jobs that changed, by name (all submitted jobs if capacity_changed)
    queues: dict[str, Usage]  # the queues whose usage changed (all of them, in tree order, if capacity_changed)
    cluster: Usage | None  # None: unchanged


class Moved(NamedTuple):
    """``Changes`` before its dominant shares and clean sums are worked out
    (``UsageLedger.moved``; ``changes_of`` finishes it): plain tuples, cheap to pickle."""

    capacity: Vector
    capacity_changed: bool
    jobs: list[tuple[str, str, int, Vector, bool, bool]]  # (name, queue, running, usage, demanding, finished)
    queues: list[tuple[str, int, tuple[float, ...]]]  # (path, running, summed usage), the root's as ``ROOT``


@dataclass(frozen=True, slots=True)
class Snapshot:
    capacity: Vector
    jobs: dict[str, JobUsage]  # every job submitted, in submission order
    queues: dict[str, Usage]  # every queue but the root, in tree order
    cluster: Usage
    nodes: list[NodeUsage]  # in pool order
    # tasks not started (finite counts; none for a cancelled or finished job), per job, per
    # queue (the jobs below it) and in all; not in ``Changes``: they move with every decision
    pending_jobs: dict[str, int]
    pending_queues: dict[str, int]
    pending: int
    times: dict[str, JobTimes]  # per job submitted


class ChangeReader:
    """One reader's place in the changes (``UsageLedger.reader``): what moved since it last
    read, kept as names (the values are read when it reads)."""

    __slots__ = ("jobs", "queues", "capacity_changed", "everything")

    def __init__(self) -> None:
        self.jobs: list[list[str]] = []  # jobs that changed: one list by name per catch-up
        self.queues: set[str] = set()  # queues whose usage changed (the root: the cluster's)
        self.capacity_changed = False
        self.everything = True  # report every job, queue and the cluster (its first read)


class UsageLedger:
    """The views of one ``Scheduler``: ``snapshot`` and ``totals`` (reads), and the
    changes each ``ChangeReader`` has not read yet."""

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler
        self.m = scheduler.m
        scheduler.queue_table()
        # the scheduler's change log from here on, with every job it holds already in it
        # (a scheduler rebuilt with running tasks: the first catch-up settles them all)
        scheduler.change_log = list(scheduler.jobs)
        # per job: (running, usage) as last taken in (none: nothing yet)
        self._jobs: dict[str, tuple[int, Vector]] = {}
        self._node_changes = scheduler.node_changes
        self._readers: list[ChangeReader] = []
        self._default: ChangeReader | None = None  # ``changes()``'s, made at its first call

    def tree_changed(self) -> None:
        """The scheduler's queue tree changed (``Scheduler.change_queues``, which built a new
        usage table): the table is settled again from scratch (every job in the change log,
        none taken in yet, in job-name order at the next catch-up) and every reader's next
        report lists every job, queue and the cluster."""
        self._jobs.clear()
        self.scheduler.change_log.extend(self.scheduler.jobs)
        for reader in self._readers:
            reader.everything = True

    # --- changes ------------------------------------------------------------------------------
    def reader(self) -> ChangeReader:
        """A new reader of the changes; its first ``changes`` reports every job, queue
        and the cluster. ``drop`` it when done: until then the ledger keeps what it has
        not read."""
        self.catch_up()  # (what happened before it is in its first report)
        reader = ChangeReader()
        self._readers.append(reader)
        return reader

    def drop(self, reader: ChangeReader) -> None:
        self._readers.remove(reader)

    def catch_up(self) -> None:
        """Take in the scheduler's change log: settle the usage table (the jobs whose
        usage moved, in job-name order) and give each reader the jobs in it, and the
        queues and the cluster above those that moved. The engine calls this after every
        decision round, so the log stays short; the reads call it too."""
        sch = self.scheduler
        log = sch.change_log
        capacity_changed = sch.node_changes != self._node_changes
        if not log and not capacity_changed:
            return
        self._node_changes = sch.node_changes
        names = sorted(set(log))
        log.clear()
        jobs = sch.jobs
        table = sch.queue_table()
        moves = table.moves
        last = self._jobs
        m = self.m
        zero = (0, (0.0,) * m)
        settling = []  # (queue, running, usage) differences of the jobs whose usage moved
        for name in names:
            rt = jobs.get(name)
            if rt is None:  # (forgotten since: ``Scheduler.forget`` outside the engine)
                continue
            queue = rt.job.queue
            if moves:
                table.settled(queue)  # (its tasks' starts and ends are in what settles now)
            # its running tasks and what they hold, from its running counts per class
            per_class = rt.running_per_class
            if len(per_class) == 1:  # (one class, most jobs: the loop below's sums, in one pass)
                running = per_class[0]
                usage_t = tuple([0.0 + running * d for d in rt.job.classes[0].demand]) if running else zero[1]
            else:
                running = 0
                usage = [0.0] * m
                for n, cls in zip(per_class, rt.job.classes):
                    if n:
                        running += n
                        for r, d in enumerate(cls.demand):
                            usage[r] += n * d
                usage_t = tuple(usage)
            prev_running, prev_usage = last.get(name, zero)
            if running != prev_running or usage_t != prev_usage:
                last[name] = (running, usage_t)
                settling.append((queue, running - prev_running, [a - b for a, b in zip(usage_t, prev_usage)]))
        moved = table.settle(settling)  # (the queues above them, the root too)
        for reader in self._readers:
            pending = reader.jobs
            pending.append(names)
            if len(pending) > 32:  # (a reader that reads seldom: each name once)
                reader.jobs = [sorted({name for batch in pending for name in batch})]
            reader.queues.update(moved)
            if capacity_changed:
                reader.capacity_changed = True

    def changes(self, reader: ChangeReader | None = None) -> Changes:
        """What moved since ``reader`` last read (``Changes``); None: the ledger's own
        reader (``Engine.changes``), made at the first call. ``changes_of(moved(reader))``."""
        return changes_of(self.moved(reader))

    def moved(self, reader: ChangeReader | None = None) -> Moved:
        """What moved since ``reader`` last read, as the ledger holds it (``Moved``: no
        dominant share worked out, no sum cleaned); ``changes_of`` makes the ``Changes``
        of it, here or in another process (``sim.offload``: the same values, the same
        floats). Reading it is reading the changes: ``reader``'s place moves on."""
        if reader is None:
            reader = self._default
            if reader is None:
                reader = self._default = self.reader()
        self.catch_up()
        sch = self.scheduler
        table = sch.queue_table()
        everything = reader.everything or reader.capacity_changed
        jobs = sch.jobs
        last = self._jobs
        zero = (0, (0.0,) * self.m)
        if everything:
            names = sorted(jobs)
        elif len(reader.jobs) == 1:  # (one catch-up since it last read: the usual case)
            names = reader.jobs[0]
        else:
            names = sorted({name for batch in reader.jobs for name in batch})
        jobs_out = []
        for name in names:
            rt = jobs.get(name)
            if rt is None:  # (forgotten since it changed)
                continue
            running, usage = last.get(name, zero)
            finished = rt.finished_at is not None
            jobs_out.append((name, rt.job.queue, running, usage, rt.demanding and not finished, finished))
        tracked = table.usage
        running_of = table.running
        # (tuples: the table's lists move on; the root's among them, as ``ROOT``)
        queues = [(path, running_of[path], tuple(tracked[path]))
                  for path in (tracked if everything else reader.queues) if path in tracked]
        out = Moved(sch.pool.total_capacity, reader.capacity_changed, jobs_out, queues)
        reader.jobs = []
        reader.queues = set()
        reader.capacity_changed = reader.everything = False
        return out

    def forget(self, name: str) -> None:
        """Drop a finished job's last usage (``Engine.forget``). Every reader must have read
        its last change (the finish) already."""
        self.catch_up()
        if any(name in batch for reader in self._readers for batch in reader.jobs):
            raise ValueError(f"job {name!r} has changes not reported yet: call changes() before forgetting it")
        self._jobs.pop(name, None)

    # --- reads ---------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Every job, queue and node now (settles what is pending first: no reader's
        changes move)."""
        self.catch_up()
        sch = self.scheduler
        table = sch.queue_table()
        capacity = sch.pool.total_capacity
        m = self.m
        last = self._jobs
        zero = (0, (0.0,) * m)
        jobs = {}
        times = {}
        pending_jobs = {}
        paths = [path for path in table.usage if path != ROOT]
        pending_queues = dict.fromkeys(paths, 0)
        for name, rt in sch.jobs.items():
            jobs[name] = _job_view(name, rt, last.get(name, zero), capacity)
            times[name] = JobTimes(rt.submitted_at, rt.first_start, rt.finished_at, sum(rt.done))
            pending = pending_jobs[name] = _pending(rt)
            if pending:
                for path in table.chain(rt.job.queue):
                    if path != ROOT:
                        pending_queues[path] += pending
        queues = {path: self._usage(table, path, capacity) for path in paths}
        node_running: dict[int, int] = {}
        node_used: dict[int, list[float]] = {}
        for task in sch.tasks.values():
            node_running[task.node_index] = node_running.get(task.node_index, 0) + 1
            used = node_used.setdefault(task.node_index, [0.0] * m)
            for r, d in enumerate(task.demand):
                used[r] += d
        pool = sch.pool
        nodes = [NodeUsage(st.node.name, st.alive, st.node.capacity, node_running.get(i, 0),
                           tuple(node_used.get(i, (0.0,) * m))) for i, st in enumerate(pool.states)]
        return Snapshot(capacity, jobs, queues, self._usage(table, ROOT, capacity), nodes, pending_jobs,
                        pending_queues, sum(pending_jobs.values()), times)

    def totals(self) -> tuple[Vector, dict[str, Usage], Usage]:
        """The capacity, every queue's usage and the cluster's: ``snapshot`` without its
        per-job, per-node and pending parts, whose cost grows with the jobs in the system
        (what a periodic utilization sample needs; settles what is pending first, as
        ``snapshot`` does)."""
        self.catch_up()
        table = self.scheduler.queue_table()
        capacity = self.scheduler.pool.total_capacity
        return (capacity, {path: self._usage(table, path, capacity) for path in table.usage if path != ROOT},
                self._usage(table, ROOT, capacity))

    @staticmethod
    def _usage(table: QueueBounds, path: str, capacity: Vector) -> Usage:
        return queue_usage(table.running[path], table.usage[path], capacity)


def _job_view(name: str, rt, state: tuple[int, Vector], capacity: Vector) -> JobUsage:
    running, usage = state
    finished = rt.finished_at is not None
    return JobUsage(name, rt.job.queue, running, usage, dominant_share(usage, capacity),
                    rt.demanding and not finished, finished)


def _pending(rt) -> int:
    """A job's tasks not started (finite counts; 0 once cancelled or finished)."""
    if rt.cancelled or rt.finished_at is not None:
        return 0
    return int(sum(p for p in rt.pending if p != math.inf))


def clean(values: list[float]) -> Vector:
    """Accumulated sums with float noise below 1e-9 of a unit snapped to whole numbers,
    so an empty queue reads 0, not 4.4e-16."""
    out = []
    for x in values:
        rx = round(x)
        out.append(float(rx) if abs(x - rx) < 1e-9 else x)
    return tuple(out)


def queue_usage(running: int, sums: Sequence[float], capacity: Vector) -> Usage:
    """A queue's (or the cluster's) ``Usage`` from its running count and summed usage: the
    sums cleaned (``clean``) and their dominant share. ``clean`` and ``dominant_share``
    inlined: this runs for every changed queue at every simulated instant."""
    usage_t = tuple([float(rx) if abs(x - (rx := round(x))) < 1e-9 else x for x in sums])
    ds = 0.0
    for a, c in zip(usage_t, capacity):
        if c > 0 and a / c > ds:
            ds = a / c
    return Usage(running, usage_t, ds)


def changes_of(moved: Moved) -> Changes:
    """The ``Changes`` of ``moved``: each job's dominant share, each queue's and the
    cluster's usage cleaned with its dominant share (``queue_usage``, as ``UsageLedger`` does).
    A function of ``moved`` alone, so a process that got it pickled makes the same."""
    capacity = moved.capacity
    jobs = []
    # (``_job_view`` and ``dominant_share`` inlined: this runs for every changed job and
    # queue at every instant)
    for name, queue, running, usage, demanding, finished in moved.jobs:
        ds = 0.0
        for a, c in zip(usage, capacity):
            if c > 0 and a / c > ds:
                ds = a / c
        jobs.append(JobUsage(name, queue, running, usage, ds, demanding, finished))
    queues = {}
    cluster = None
    for path, running, sums in moved.queues:
        if path == ROOT:
            cluster = queue_usage(running, sums, capacity)
        else:
            queues[path] = queue_usage(running, sums, capacity)
    return Changes(capacity, moved.capacity_changed, jobs, queues, cluster)
