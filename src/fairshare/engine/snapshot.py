"""Read-only views of a ``Scheduler``: what each job, queue, node and the cluster holds.

Runtimes do not keep their own copy of the scheduler's state: the simulator records its
timeline from ``UsageLedger.changes()`` and the live service answers ``/v1/status`` from
``UsageLedger.snapshot()``. Queue usage is rolled up the queue tree here, once.

Incremental: the scheduler marks the jobs whose running tasks changed
(``Scheduler.changed``); ``changes()`` recomputes only those jobs' usage and adds each
job's difference to its ancestor queues and the cluster. The additions go in job-name
order, so the float sums never depend on set iteration order (string hashes differ
between processes) and a run's timeline is the same byte for byte. A job's usage is
recomputed from its running counts (``running_c * demand_c`` summed over its classes,
never accumulated), so it carries no float drift; queue and cluster sums do, and are
reported with the noise below 1e-9 of a unit snapped to whole numbers (``clean``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

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
    """What moved since the previous ``changes()`` call (the first call: every queue and
    the cluster)."""

    capacity: Vector
    capacity_changed: bool  # a node was added or lost (every dominant share moved)
    jobs: list[JobUsage]  # the jobs that changed, by name (all submitted jobs if capacity_changed)
    queues: dict[str, Usage]  # the queues whose usage changed (all of them if capacity_changed)
    cluster: Usage | None  # None: unchanged


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


class UsageLedger:
    """The running totals behind ``changes`` and ``snapshot`` for one ``Scheduler``."""

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler
        self.m = scheduler.m
        tree = scheduler.queues
        self._paths = tuple(tree.paths)
        # queue paths above each queue, nearest first, without the root
        self._ancestors: dict[str, tuple[str, ...]] = {}
        self._tree = tree
        # per job: (running, usage) as last rolled up
        self._jobs: dict[str, tuple[int, Vector]] = {}
        # per queue and for the cluster: [running, usage sums]
        self._queues: dict[str, list] = {p: [0, [0.0] * self.m] for p in self._paths}
        self._cluster: list = [0, [0.0] * self.m]
        self._node_changes = scheduler.node_changes
        self._first = True
        # what ``snapshot`` rolled up and ``changes`` has not reported yet
        self._unreported: Changes | None = None

    def tree_changed(self) -> None:
        """The scheduler's queue tree changed (``Scheduler.change_queues``): the queue
        sums are those of the new tree, from every job's usage as last rolled up (in
        job-name order), and the next ``changes`` reports every queue."""
        tree = self.scheduler.queues
        self._tree = tree
        self._paths = tuple(tree.paths)
        self._ancestors = {}
        self._queues = {p: [0, [0.0] * self.m] for p in self._paths}
        sch = self.scheduler
        for name in sorted(self._jobs):
            running, usage = self._jobs[name]
            rt = sch.jobs.get(name)
            if rt is None or not running:
                continue
            for path in self._ancestors_of(rt.job.queue):
                q = self._queues[path]
                q[0] += running
                for r in range(self.m):
                    q[1][r] += usage[r]
        self._first = True

    def _ancestors_of(self, queue: str) -> tuple[str, ...]:
        got = self._ancestors.get(queue)
        if got is None:
            got = self._ancestors[queue] = tuple(p for p in self._tree.ancestors(queue) if p != ROOT)
        return got

    def changes(self) -> Changes:
        """What moved since the previous call (``Changes``)."""
        got = self._roll_up()
        if self._unreported is not None:
            got = _merge(self._unreported, got)
            self._unreported = None
        return got

    def _roll_up(self) -> Changes:
        sch = self.scheduler
        m = self.m
        capacity = sch.pool.total_capacity
        capacity_changed = sch.node_changes != self._node_changes
        self._node_changes = sch.node_changes
        names = sch.changed
        if capacity_changed:  # dominant shares move with the capacity: revisit all
            names = names | sch.jobs.keys()
        first, self._first = self._first, False
        dirty: set[str] = set(self._queues) if (first or capacity_changed) else set()
        cluster_dirty = first or capacity_changed
        jobs_out: list[JobUsage] = []
        zero = (0.0,) * m
        ancestors = self._ancestors
        last = self._jobs
        for name in sorted(names):
            rt = sch.jobs[name]
            job = rt.job
            running = 0
            usage = [0.0] * m
            for n, cls in zip(rt.running_per_class, job.classes):
                if n:
                    running += n
                    for r, d in enumerate(cls.demand):
                        usage[r] += n * d
            usage_t = tuple(usage)
            finished = rt.finished_at is not None
            prev = last.get(name)
            prev_running, prev_usage = prev if prev is not None else (0, zero)
            if running != prev_running or usage_t != prev_usage:
                last[name] = (running, usage_t)
                d_run = running - prev_running
                delta = [a - b for a, b in zip(usage_t, prev_usage)]
                path_up = ancestors.get(job.queue) or self._ancestors_of(job.queue)
                for path in path_up:
                    q = self._queues[path]
                    q[0] += d_run
                    q_usage = q[1]
                    for r in range(m):
                        q_usage[r] += delta[r]
                    dirty.add(path)
                c = self._cluster
                c[0] += d_run
                c_usage = c[1]
                for r in range(m):
                    c_usage[r] += delta[r]
                cluster_dirty = True
            jobs_out.append(JobUsage(name, job.queue, running, usage_t, dominant_share(usage_t, capacity),
                                     rt.demanding and not finished, finished))
        sch.changed = set()
        usage_of = self._usage
        queues = {path: usage_of(self._queues[path], capacity) for path in dirty}
        cluster = usage_of(self._cluster, capacity) if cluster_dirty else None
        return Changes(capacity, capacity_changed, jobs_out, queues, cluster)

    def snapshot(self, *, for_changes: bool = True) -> Snapshot:
        """Every job, queue and node now (rolls up what changed first; ``changes`` still
        reports it, unless ``for_changes`` is False: a runtime that never calls ``changes``
        (the live service) need not keep what it would report, which grows with every job
        that ever ran)."""
        self._keep(self._roll_up(), for_changes)
        sch = self.scheduler
        capacity = sch.pool.total_capacity
        jobs = {}
        times = {}
        pending_jobs = {}
        pending_queues = dict.fromkeys(self._paths, 0)
        for name, rt in sch.jobs.items():
            running, usage = self._jobs.get(name, (0, (0.0,) * self.m))
            finished = rt.finished_at is not None
            jobs[name] = JobUsage(name, rt.job.queue, running, usage, dominant_share(usage, capacity),
                                  rt.demanding and not finished, finished)
            times[name] = JobTimes(rt.submitted_at, rt.first_start, rt.finished_at, sum(rt.done))
            pending = pending_jobs[name] = _pending(rt)
            if pending:
                for path in self._ancestors_of(rt.job.queue):
                    pending_queues[path] += pending
        queues = {path: self._usage(self._queues[path], capacity) for path in self._paths}
        node_running: dict[int, int] = {}
        node_used: dict[int, list[float]] = {}
        for task in sch.tasks.values():
            node_running[task.node_index] = node_running.get(task.node_index, 0) + 1
            used = node_used.setdefault(task.node_index, [0.0] * self.m)
            for r, d in enumerate(task.demand):
                used[r] += d
        pool = sch.pool
        nodes = [NodeUsage(st.node.name, st.alive, st.node.capacity, node_running.get(i, 0),
                           tuple(node_used.get(i, (0.0,) * self.m))) for i, st in enumerate(pool.states)]
        return Snapshot(capacity, jobs, queues, self._usage(self._cluster, capacity), nodes, pending_jobs,
                        pending_queues, sum(pending_jobs.values()), times)

    def totals(self, *, for_changes: bool = True) -> tuple[Vector, dict[str, Usage], Usage]:
        """The capacity, every queue's usage and the cluster's: ``snapshot`` without its
        per-job, per-node and pending parts, whose cost grows with the jobs in the system
        (what a periodic utilization sample needs; rolls up what changed first, as
        ``snapshot`` does, ``for_changes`` included)."""
        self._keep(self._roll_up(), for_changes)
        capacity = self.scheduler.pool.total_capacity
        return (capacity, {path: self._usage(self._queues[path], capacity) for path in self._paths},
                self._usage(self._cluster, capacity))

    def _keep(self, got: Changes, for_changes: bool) -> None:
        """What a roll-up outside ``changes`` found, kept for the next ``changes``."""
        if for_changes:
            self._unreported = got if self._unreported is None else _merge(self._unreported, got)

    def roll_up(self, *, for_changes: bool = True) -> None:
        """Bring the sums up to date with what changed (``snapshot`` and ``totals`` do it
        too): a runtime that never calls ``changes`` calls this, with ``for_changes``
        False, before it forgets a finished job."""
        self._keep(self._roll_up(), for_changes)

    def forget(self, name: str) -> None:
        """Drop a finished job's last rolled-up usage (``Engine.forget``). Its last
        change (the finish) must have been reported already: the queue and cluster sums
        hold its final usage, zero."""
        if name in self.scheduler.changed or (self._unreported is not None and
                                               any(job.name == name for job in self._unreported.jobs)):
            raise ValueError(f"job {name!r} has changes not reported yet: call changes() before forgetting it")
        self._jobs.pop(name, None)

    @staticmethod
    def _usage(state: list, capacity: Vector) -> Usage:
        # ``clean`` inlined: this runs for every changed queue at every simulated instant
        usage = []
        for x in state[1]:
            rx = round(x)
            usage.append(float(rx) if abs(x - rx) < 1e-9 else x)
        usage_t = tuple(usage)
        return Usage(state[0], usage_t, dominant_share(usage_t, capacity))


def _merge(old: Changes, new: Changes) -> Changes:
    """Two consecutive ``Changes`` as one (the later state of each entity wins)."""
    jobs = {job.name: job for job in old.jobs}
    jobs.update((job.name, job) for job in new.jobs)
    return Changes(new.capacity, old.capacity_changed or new.capacity_changed, [jobs[n] for n in sorted(jobs)],
                   {**old.queues, **new.queues}, new.cluster if new.cluster is not None else old.cluster)


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
