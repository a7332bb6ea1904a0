"""The pure scheduling core: events in, task launches out.

Both runtimes drive the same object: the simulator's event loop and (later) the live
service call ``submit``, ``finish``, ``fail``, ``add_node``, ``lose_node`` as things happen,
then ``schedule(now)`` and start the returned launches on their executor. Nothing here
reads a clock, draws random numbers or does I/O; task ids are a counter.

A job's next task is from the class furthest behind the job's mix (counts, or equal for
unbounded classes; ties: first class). A job is *runnable* when it has a pending task
that fits on some eligible node now; ``schedule`` asks the policy's sorter for runnable
jobs until none is left. A task lost with its node, or failed, goes back to pending.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from fairshare.engine.placement import NodePool
from fairshare.model.cluster import Node
from fairshare.model.jobs import Job
from fairshare.model.queues import QueueTree
from fairshare.model.resources import Vector
from fairshare.policies.base import Policy


@dataclass(frozen=True)
class Launch:
    """A decision: start one task of ``job``'s class ``task_class`` on ``node``."""

    task_id: int
    job: str
    task_class: str
    class_index: int
    node: str
    demand: Vector


@dataclass
class RunningTask:
    task_id: int
    job: str
    class_index: int
    node_index: int
    demand: Vector
    started_at: float


@dataclass
class JobRuntime:
    job: Job
    submitted_at: float
    pending: list[float]  # tasks not started per class (inf = unbounded)
    started: list[int] = field(default_factory=list)
    done: list[int] = field(default_factory=list)
    running: int = 0
    first_start: float | None = None
    finished_at: float | None = None
    cancelled: bool = False

    @property
    def demanding(self) -> bool:
        return any(p > 0 for p in self.pending) and not self.cancelled

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
                 respect_counts: bool = True):
        self.resources = tuple(resources)
        self.m = len(resources)
        self.policy = policy
        slots = policy.params().get("slots")
        self.pool = NodePool(nodes, self.m, strategy=placement, slots_per_node=slots)
        self.use_headroom = headroom
        self.respect_counts = respect_counts
        slots_total = (slots or 1) * len(nodes)
        self.sorter = policy.online(self.resources, queues, self.pool.total_capacity, slots_total=slots_total,
                                    nodes=tuple(st.node for st in self.pool.states))
        self.queues = queues
        self.jobs: dict[str, JobRuntime] = {}
        self.tasks: dict[int, RunningTask] = {}
        self._next_id = 0
        # per resource: how many pending task classes need each amount (saturation test)
        self._pending_demands: list[Counter] = [Counter() for _ in range(self.m)]
        # pending (demand, constraints) shapes, and the minimal ones: if none of those fits
        # anywhere, no pending task does, and schedule() stops without asking the sorter
        self._pending_keys: Counter = Counter()
        self._minimal_keys: list[tuple] | None = []
        self.decisions = 0

    # --- events ---------------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> None:
        if job.name in self.jobs:
            raise ValueError(f"job {job.name!r} already submitted")
        pending = [float("inf") if (c.count is None or not self.respect_counts) else float(c.count)
                   for c in job.classes]
        rt = JobRuntime(job, now, pending, [0] * len(job.classes), [0] * len(job.classes))
        self.jobs[job.name] = rt
        for j in range(len(job.classes)):
            if pending[j] > 0:
                self._track(job, j, +1)
        if rt.complete:  # nothing to run at all
            rt.finished_at = now
            return
        self.sorter.add_job(job.name, job.queue, job.weight, job.composite_demand())
        if self.use_headroom:
            self._update_headroom()

    def finish(self, task_id: int, now: float) -> RunningTask:
        """A task completed: release its resources; the job may be complete."""
        task = self.tasks.pop(task_id)
        rt = self.jobs[task.job]
        self.pool.give_back(task.node_index, task.demand)
        rt.running -= 1
        rt.done[task.class_index] += 1
        self.sorter.released(task.job, task.demand, now)
        self._maybe_complete(rt, now)
        return task

    def fail(self, task_id: int, now: float) -> RunningTask:
        """A task failed (or its node died): release and run it again later."""
        task = self.tasks.pop(task_id)
        rt = self.jobs[task.job]
        self.pool.give_back(task.node_index, task.demand)
        rt.running -= 1
        self.sorter.released(task.job, task.demand, now)
        if not rt.cancelled:
            was = rt.demanding
            rt.pending[task.class_index] += 1
            rt.started[task.class_index] -= 1
            if rt.pending[task.class_index] == 1:
                self._track(rt.job, task.class_index, +1)
            if not was:
                self.sorter.set_demanding(task.job, True)
        self._maybe_complete(rt, now)
        return task

    def cancel(self, job_name: str, now: float) -> list[int]:
        """Stop a job: no new tasks; returns its running task ids for the caller to kill."""
        rt = self.jobs[job_name]
        if not rt.cancelled:
            for j, p in enumerate(rt.pending):
                if p > 0:
                    self._track(rt.job, j, -1)
            rt.cancelled = True
            if job_name in self.sorter.jobs:
                self.sorter.set_demanding(job_name, False)
        self._maybe_complete(rt, now)
        return [t.task_id for t in self.tasks.values() if t.job == job_name]

    def add_node(self, node: Node, now: float) -> None:
        self.pool.add_node(node)
        self.sorter.set_capacity(self.pool.total_capacity)

    def lose_node(self, name: str, now: float) -> list[int]:
        """A node died: its tasks go back to pending (returned so the runtime can cancel them)."""
        idx = self.pool.index_of[name]
        lost = sorted(t.task_id for t in self.tasks.values() if t.node_index == idx)
        for task_id in lost:
            self.fail(task_id, now)
        self.pool.remove_node(name)
        self.sorter.set_capacity(self.pool.total_capacity)
        return lost

    def adopt(self, job_name: str, class_index: int, node_name: str, now: float) -> Launch:
        """Record a task of ``job_name``'s class that is already running on ``node_name``
        (a runtime rebuilding its scheduler, e.g. after the queue tree changed): it takes
        one pending task of that class and the node's capacity like a launch, but it is
        not a decision (``decisions`` is unchanged)."""
        rt = self.jobs[job_name]
        if rt.pending[class_index] <= 0:
            raise ValueError(f"job {job_name!r} has no pending task of class {class_index} to adopt")
        launch = self._launch(job_name, class_index, self.pool.index_of[node_name], now)
        self.decisions -= 1
        return launch

    # --- decisions --------------------------------------------------------------------------
    def schedule(self, now: float) -> list[Launch]:
        """Start tasks until no job the policy would pick can run anywhere."""
        launches: list[Launch] = []
        # Where each distinct (demand, constraints) goes, for this call only. Within one
        # call free capacity only shrinks, so "fits nowhere" stays true, and a first-fit
        # node stays the first fit for as long as the task still fits on it.
        fit: dict[tuple, int | None] = {}
        first_fit = self.pool.strategy == "first-fit"
        while True:
            if not any(self._fits_now(key, fit, first_fit) for key in self._minimal()):
                return launches  # no pending task fits anywhere
            self.sorter.set_saturated(self._saturated())
            chosen: dict[str, tuple[int, int]] = {}

            def runnable(name: str) -> bool:
                rt = self.jobs[name]
                j = rt.next_class()
                if j is None:
                    return False
                cls = rt.job.classes[j]
                key = (cls.demand, cls.constraints)
                if key in fit:
                    node = fit[key]
                    if node is None:
                        return False
                    if not self.pool.fits_on(node, cls.demand):
                        node = self.pool.place_after(cls.demand, cls.constraints, node) if first_fit \
                            else self.pool.place(cls.demand, cls.constraints)
                        fit[key] = node
                        if node is None:
                            return False
                    elif not first_fit:
                        node = self.pool.place(cls.demand, cls.constraints)
                else:
                    node = fit[key] = self.pool.place(cls.demand, cls.constraints)
                    if node is None:
                        return False
                chosen[name] = (j, node)
                return True

            name = self.sorter.pick(runnable, now)
            if name is None:
                return launches
            if name not in chosen and not runnable(name):  # a sorter must only return runnable jobs
                raise AssertionError(f"sorter picked {name!r}, which cannot run")
            j, node = chosen[name]
            launches.append(self._launch(name, j, node, now))

    def _fits_now(self, key: tuple, fit: dict, first_fit: bool) -> bool:
        """Whether a task of this shape fits somewhere now, through the per-call cache."""
        demand, constraints = key
        if key in fit:
            node = fit[key]
            if node is None:
                return False
            if self.pool.fits_on(node, demand):
                return True
            node = self.pool.place_after(demand, constraints, node) if first_fit else self.pool.place(demand, constraints)
        else:
            node = self.pool.place(demand, constraints)
        fit[key] = node
        return node is not None

    def _launch(self, name: str, j: int, node: int, now: float) -> Launch:
        rt = self.jobs[name]
        cls = rt.job.classes[j]
        task_id = self._next_id
        self._next_id += 1
        self.pool.take(node, cls.demand)
        rt.pending[j] -= 1
        rt.started[j] += 1
        rt.running += 1
        if rt.first_start is None:
            rt.first_start = now
        if rt.pending[j] == 0:
            self._track(rt.job, j, -1)
        self.tasks[task_id] = RunningTask(task_id, name, j, node, cls.demand, now)
        self.sorter.allocated(name, cls.demand, now)
        if not rt.demanding:
            self.sorter.set_demanding(name, False)
        self.decisions += 1
        return Launch(task_id, name, cls.name, j, self.pool.name(node), cls.demand)

    # --- bookkeeping ---------------------------------------------------------------------------
    def _maybe_complete(self, rt: JobRuntime, now: float) -> None:
        if rt.complete and rt.finished_at is None:
            rt.finished_at = now
            if rt.job.name in self.sorter.jobs:
                self.sorter.remove_job(rt.job.name)
            if self.use_headroom:
                self._update_headroom()

    def _track(self, job: Job, j: int, delta: int) -> None:
        cls = job.classes[j]
        key = (cls.demand, cls.constraints)
        before = self._pending_keys[key]
        self._pending_keys[key] += delta
        if self._pending_keys[key] <= 0:
            del self._pending_keys[key]
        if (before > 0) != (self._pending_keys.get(key, 0) > 0):
            self._minimal_keys = None
        for r, d in enumerate(job.classes[j].demand):
            if d > 0:
                c = self._pending_demands[r]
                c[d] += delta
                if c[d] <= 0:
                    del c[d]

    def _saturated(self) -> frozenset[int]:
        """Resources counted as saturated (H-DRF Sec. 3.4: "a resource is saturated when it
        is fully utilized"; Alg. 2: "Y = set of nonzero resources in W"), for whole tasks.

        Reading: r is saturated while the cluster's total free amount of r is less than the
        smallest pending task's demand for it, i.e. no pending task could get any more of
        r. This is the paper's own test of when the online and static allocations should
        agree: "at times when there are no excess resources, except those which are not
        useful to any of the leaves" (Sec. 3.4). An earlier reading, "less than the
        largest pending task", counted r as saturated while smaller tasks still fitted in
        it, and the online schedule then drifted away from the static allocation in three
        paper examples (docs/policies.md, "Online decisions and the static allocation")."""
        free = self.pool.total_free
        out = []
        for r in range(self.m):
            c = self._pending_demands[r]
            if c and free[r] < min(c) - 1e-9:
                out.append(r)
        return frozenset(out)

    def _minimal(self) -> list[tuple]:
        """Pending task shapes not dominated by another with the same constraints."""
        if self._minimal_keys is None:
            keys = sorted(self._pending_keys, key=lambda k: (sum(k[0]), k))
            out: list[tuple] = []
            for key in keys:
                if not any(o[1] == key[1] and all(a <= b for a, b in zip(o[0], key[0])) for o in out):
                    out.append(key)
            self._minimal_keys = out
        return self._minimal_keys

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

    # --- views -------------------------------------------------------------------------------
    def usage(self, name: str) -> Vector:
        job = self.sorter.jobs.get(name)
        return tuple(job.usage) if job else (0.0,) * self.m
