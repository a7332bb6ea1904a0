"""The discrete-event simulator: a simulated clock around the pure ``engine.Scheduler``.

The simulator holds no policy logic. It turns a scenario into events, feeds them to the
``Scheduler`` (``submit``, ``finish``, ``lose_node``, ``add_node``), asks it
``schedule(now)`` once per instant, starts the returned launches on a simulated executor
(a completion event ``duration`` later) and records what every job, queue and the cluster
hold after each instant.

One instant ``t``:

1. pop every event at ``t`` in ``(priority, sequence)`` order (``sim.events``): task
   completions, then node failures, then node additions, then job arrivals;
2. call ``scheduler.schedule(t)`` once;
3. for each launch, sample the task's duration (``sim.durations``; under slot scheduling
   stretched by the node's over-subscription, below) and push its completion;
4. record a timeline row for every entity whose state changed.

Slot scheduling (policy ``slots``) places tasks by slot count, ignoring their resources,
so a node can hold more than it has (DRF Sec. 7.2, H-DRF Sec. 5.3). We model the cost of
that as thrashing: a task launched on a node whose over-subscription factor
``max_r used_r / capacity_r`` (after the instant's launches) is ``f > 1`` runs ``f`` times
longer. The factor is fixed at launch: tasks already running are not slowed further, and
a task does not speed up when its neighbours leave. Resources the node does not have at
all are left out of the factor (the model cannot say how slow "no GPU" is).

Stopping: when every job has finished; at ``until`` (events after it are not processed;
unfinished jobs keep ``finish = None``); or when no event is left (a job whose tasks fit
on no node that is up then stays unfinished, and ``notes`` says so). A job whose counts
are unbounded never finishes, so ``until`` is required when there is one.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from fairshare.engine.executor import NodeAdded, NodeLost, TaskFinished, apply, dispatch
from fairshare.engine.scheduler import Launch, Scheduler
from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT
from fairshare.model.resources import Vector
from fairshare.model.scenario import ClusterEvent, Scenario
from fairshare.policies.base import Policy
from fairshare.sim.durations import DurationSampler
from fairshare.sim.events import JOB_ARRIVAL, NODE_ADD, NODE_FAIL, TASK_END, EventQueue

#: the ``entity`` of the cluster's timeline rows
CLUSTER = "cluster"
#: call the progress callback every this many instants (it throttles itself further)
PROGRESS_EVERY = 256


class SimulationError(ValueError):
    """The simulation cannot run as asked (e.g. unbounded jobs without ``until``)."""


@dataclass(frozen=True)
class SimOptions:
    seed: int = 0
    until: float | None = None  # stop time in seconds; None: run until every job finished
    placement: str = "first-fit"  # engine.placement.STRATEGIES
    headroom: bool = False  # H-DRF Sec. 5: keep room for the largest task on every node


@dataclass(frozen=True)
class JobOutcome:
    name: str
    queue: str
    submit: float
    submitted: bool  # False when the run stopped before its submit time
    start: float | None  # first task started
    finish: float | None  # last task done; None when unfinished at the end
    tasks_completed: int
    tasks_total: int | None  # None: unbounded


#: a timeline row: (time, kind, entity, running_tasks, dominant_share, allocation)
Row = tuple[float, str, str, int, float, Vector]


@dataclass
class SimResult:
    """Everything a run produced; ``sim.metrics`` and ``sim.output`` derive the files from it."""

    scenario: Scenario
    policy: str
    params: dict
    options: SimOptions
    end_time: float  # the makespan: last job finish, or the stop time (``until``, last event)
    all_finished: bool
    rows: list[Row]  # in (time, kind, entity) order
    demand_changes: list[tuple[float, str, bool]]  # (time, job, demanding) when it changes
    capacity_changes: list[tuple[float, Vector]]  # (time, capacity of the nodes up); first at 0
    jobs: dict[str, JobOutcome]  # scenario order
    decisions: int = 0
    tasks_launched: int = 0
    tasks_completed: int = 0
    tasks_lost: int = 0  # running when their node failed (re-queued)
    tasks_stretched: int = 0  # launched on an over-subscribed node (slots only)
    notes: list[str] = field(default_factory=list)


ProgressFn = Callable[[float, int], None]  # (simulated now, tasks completed so far)


class Simulator:
    def __init__(self, scenario: Scenario, policy: Policy, options: SimOptions = SimOptions(),
                 progress: ProgressFn | None = None):
        unbounded = [j.name for j in scenario.jobs if j.total_count is None]
        if unbounded and options.until is None:
            shown = ", ".join(unbounded[:5]) + (f" and {len(unbounded) - 5} more" if len(unbounded) > 5 else "")
            raise SimulationError(f"job(s) {shown} have unbounded task counts and would never finish: "
                                  f"give a stop time (--until SECONDS)")
        if options.until is not None and not (options.until >= 0 and math.isfinite(options.until)):
            raise SimulationError(f"until must be a finite number >= 0, got {options.until}")
        self.scenario = scenario
        self.policy = policy
        self.options = options
        self.progress = progress
        # Raises PolicyModeError for a policy with no online meaning (before any work).
        self.scheduler = Scheduler(scenario.resources, scenario.cluster.nodes, scenario.queues, policy,
                                   placement=options.placement, headroom=options.headroom,
                                   respect_counts=True, devices=scenario.cluster.devices)
        self.rng = random.Random(options.seed)  # the only source of randomness of a run
        self.durations = DurationSampler(scenario.jobs, self.rng)
        self.events = EventQueue()
        self.m = scenario.m
        self._slots = self.scheduler.pool.slots_per_node is not None
        self._jobs_by_name: dict[str, Job] = {j.name: j for j in scenario.jobs}
        # queue paths above each job, nearest first, without the root
        self._ancestors: dict[str, tuple[str, ...]] = {
            j.name: tuple(p for p in scenario.queues.ancestors(j.queue) if p != ROOT) for j in scenario.jobs}
        # running tasks per job and class: job allocation = sum_c running_c * demand_c,
        # recomputed from counts (not accumulated), so it carries no float drift
        self._running: dict[str, list[int]] = {}
        self._tasks: dict[int, tuple[str, int]] = {}  # running task id -> (job, class index)
        # last recorded state: entity key -> (running, allocation, dominant share)
        self._last: dict[tuple[str, str], tuple[int, Vector, float]] = {}
        self._queue_state: dict[str, tuple[int, list[float]]] = {
            p: (0, [0.0] * self.m) for p in scenario.queues.paths}
        self._cluster_running = 0
        self._cluster_alloc = [0.0] * self.m
        self._demanding: dict[str, bool] = {}
        self._capacity: Vector = self.scheduler.pool.total_capacity
        self._done: set[str] = set()
        self._submitted: list[str] = []
        # per instant
        self._touched: set[str] = set()
        self._capacity_changed = False
        self._result: SimResult | None = None
        self._stats = {"launched": 0, "completed": 0, "lost": 0, "stretched": 0}
        self.executor = SimulatedExecutor(self)

    # --- the loop ---------------------------------------------------------------------------
    def run(self) -> SimResult:
        if self._result is not None:
            return self._result
        sc, until = self.scenario, self.options.until
        for job in sc.jobs:
            self.events.push(job.submit_s, JOB_ARRIVAL, job)
        for ev in sc.events:
            self.events.push(ev.time_s, NODE_FAIL if ev.kind == "node_fail" else NODE_ADD, ev)
        rows: list[Row] = []
        demand_changes: list[tuple[float, str, bool]] = []
        capacity_changes: list[tuple[float, Vector]] = [(0.0, self._capacity)]
        # every queue and the cluster get a row at 0 (jobs get theirs at submit): here when
        # nothing happens at 0, else by the first instant's record
        if self.events.peek_time() != 0.0:
            self._record(0.0, rows, demand_changes)
        now = 0.0
        instants = 0
        while self.events:
            t = self.events.peek_time()
            if until is not None and t > until:
                break
            live = False  # a completion of a task lost with its node is void
            while self.events and self.events.peek_time() == t:
                _, priority, payload = self.events.pop()
                if priority == TASK_END:
                    live |= self._task_end(payload, t)
                    continue
                live = True
                if priority == NODE_FAIL:
                    self._node_fail(payload, t)
                elif priority == NODE_ADD:
                    self._node_add(payload, t)
                else:
                    self._arrival(payload, t)
            if not live:
                continue  # nothing happened at t: no scheduling round, no rows
            now = t
            self.executor.begin_instant()
            dispatch(self.scheduler, self.executor, t)
            if self._capacity_changed:
                capacity_changes.append((t, self._capacity))
            self._record(t, rows, demand_changes)
            instants += 1
            if self.progress is not None and instants % PROGRESS_EVERY == 0:
                self.progress(t, self._stats["completed"])
            if len(self._done) == len(sc.jobs):
                break
        all_finished = len(self._done) == len(sc.jobs)
        if all_finished:
            end = max((rt.finished_at for rt in self.scheduler.jobs.values()), default=0.0)
        elif until is not None:
            end = until
        else:
            end = now
        if self.progress is not None:
            self.progress(end, self._stats["completed"])
        notes = []
        if not all_finished and until is None:
            stuck = [j.name for j in sc.jobs if j.name not in self._done]
            notes.append(f"{len(stuck)} job(s) could not finish ({', '.join(stuck[:5])}"
                         f"{' ...' if len(stuck) > 5 else ''}): their remaining tasks fit on no node that is up")
        self._result = SimResult(
            scenario=sc, policy=self.policy.name, params=dict(self.policy.params()), options=self.options,
            end_time=end, all_finished=all_finished, rows=rows, demand_changes=demand_changes,
            capacity_changes=capacity_changes, jobs=self._outcomes(),
            decisions=self.scheduler.decisions, tasks_launched=self._stats["launched"],
            tasks_completed=self._stats["completed"], tasks_lost=self._stats["lost"],
            tasks_stretched=self._stats["stretched"], notes=notes)
        return self._result

    # --- events -------------------------------------------------------------------------------
    def _arrival(self, job: Job, t: float) -> None:
        self.scheduler.submit(job, t)
        self._running[job.name] = [0] * len(job.classes)
        self._submitted.append(job.name)
        self._touched.add(job.name)
        self._check_done(job.name)

    def _task_end(self, task_id: int, t: float) -> bool:
        entry = self._tasks.pop(task_id, None)
        if entry is None:  # the task was lost with its node; its completion is void
            return False
        name, j = entry
        apply(self.scheduler, TaskFinished(task_id), t)
        self._running[name][j] -= 1
        self._stats["completed"] += 1
        self._touched.add(name)
        self._check_done(name)
        return True

    def _node_fail(self, ev: ClusterEvent, t: float) -> None:
        if not self.scheduler.pool.alive(self.scheduler.pool.index_of[ev.node_name]):
            return  # the loader rejects this; a no-op keeps a hand-built scenario safe
        for task_id in apply(self.scheduler, NodeLost(ev.node_name), t):  # re-queued by the scheduler
            name, j = self._tasks.pop(task_id)
            self._running[name][j] -= 1
            self._stats["lost"] += 1
            self._touched.add(name)
        self._capacity = self.scheduler.pool.total_capacity
        self._capacity_changed = True

    def _node_add(self, ev: ClusterEvent, t: float) -> None:
        apply(self.scheduler, NodeAdded(ev.node), t)
        self._capacity = self.scheduler.pool.total_capacity
        self._capacity_changed = True

    def _oversubscription(self, idx: int) -> float:
        pool = self.scheduler.pool
        factor = pool.oversubscription(idx)
        if math.isfinite(factor):
            return factor
        # a task uses a resource this node does not have (slots ignore resources): leave
        # that resource out of the factor
        st = pool.states[idx]
        return max((((cap - free) / cap) for cap, free in zip(st.node.capacity, st.free) if cap > 0),
                   default=1.0)

    def _check_done(self, name: str) -> None:
        if self.scheduler.jobs[name].finished_at is not None:
            self._done.add(name)

    # --- recording -------------------------------------------------------------------------------
    def _dominant_share(self, alloc) -> float:
        best = 0.0
        for a, c in zip(alloc, self._capacity):
            if c > 0 and a / c > best:
                best = a / c
        return best

    def _row_if_changed(self, kind: str, entity: str, t: float, running: int, alloc: Vector) -> Row | None:
        """A row when the entity's state differs from its last row (always its first row)."""
        ds = self._dominant_share(alloc)
        key = (kind, entity)
        state = (running, alloc, ds)
        if self._last.get(key) == state:
            return None
        self._last[key] = state
        return (t, kind, entity, running, ds, alloc)

    def _record(self, t: float, rows: list[Row], demand_changes: list) -> None:
        """Rows for the entities whose state changed at ``t`` (sorted by kind, entity)."""
        m = self.m
        touched = self._touched
        if self._capacity_changed:  # dominant shares move with the capacity: revisit all
            touched = touched | set(self._submitted)
        out: list[Row] = []
        first = not self._last  # the first record writes every queue and the cluster
        dirty_queues: set[str] = set(self._queue_state) if first else set()
        cluster_dirty = self._capacity_changed or first
        # sorted: the order of the float additions into queue totals must not depend on
        # set iteration order (string hashes differ between processes)
        for name in sorted(touched):
            job = self._jobs_by_name[name]
            counts = self._running[name]
            running = sum(counts)
            alloc = [0.0] * m
            for n, cls in zip(counts, job.classes):
                if n:
                    for r, d in enumerate(cls.demand):
                        alloc[r] += n * d
            alloc_t = tuple(alloc)
            prev = self._last.get(("job", name))
            prev_running, prev_alloc = (prev[0], prev[1]) if prev else (0, (0.0,) * m)
            row = self._row_if_changed("job", name, t, running, alloc_t)
            if row is not None:
                out.append(row)
            if running != prev_running or alloc_t != prev_alloc:
                d_run = running - prev_running
                delta = [a - b for a, b in zip(alloc_t, prev_alloc)]
                for path in self._ancestors[name]:
                    q_run, q_alloc = self._queue_state[path]
                    for r in range(m):
                        q_alloc[r] += delta[r]
                    self._queue_state[path] = (q_run + d_run, q_alloc)
                    dirty_queues.add(path)
                self._cluster_running += d_run
                for r in range(m):
                    self._cluster_alloc[r] += delta[r]
                cluster_dirty = True
            rt = self.scheduler.jobs[name]
            demanding = rt.demanding and rt.finished_at is None
            if self._demanding.get(name, False) != demanding:
                self._demanding[name] = demanding
                demand_changes.append((t, name, demanding))
        if self._capacity_changed:
            dirty_queues.update(self._queue_state)
        for path in dirty_queues:
            q_run, q_alloc = self._queue_state[path]
            row = self._row_if_changed("queue", path, t, q_run, _clean(q_alloc))
            if row is not None:
                out.append(row)
        if cluster_dirty:
            row = self._row_if_changed("cluster", CLUSTER, t, self._cluster_running, _clean(self._cluster_alloc))
            if row is not None:
                out.append(row)
        out.sort(key=lambda r: (r[1], r[2]))
        rows.extend(out)
        self._touched = set()
        self._capacity_changed = False

    def _outcomes(self) -> dict[str, JobOutcome]:
        out = {}
        for job in self.scenario.jobs:
            rt = self.scheduler.jobs.get(job.name)
            if rt is None:  # never submitted (its submit time is after the stop)
                out[job.name] = JobOutcome(job.name, job.queue, job.submit_s, False, None, None, 0, job.total_count)
                continue
            out[job.name] = JobOutcome(job.name, job.queue, rt.submitted_at, True, rt.first_start, rt.finished_at,
                                       sum(rt.done), job.total_count)
        return out


class SimulatedExecutor:
    """The simulator's side of the executor seam (``engine.executor``): starting a task
    samples its duration and pushes its completion onto the simulator's event heap.
    Completions come back through that heap, not ``poll``."""

    def __init__(self, sim: Simulator):
        self.sim = sim
        # the over-subscription factor per node, fixed for one instant (slots only): every
        # launch of the instant is already taken from the pool when the first one starts
        self._stretch: dict[str, float] = {}

    def nodes(self):
        return tuple(st.node for st in self.sim.scheduler.pool.states)

    def poll(self) -> list:
        return []

    def begin_instant(self) -> None:
        self._stretch = {}

    def start(self, launch: Launch, t: float) -> None:
        sim = self.sim
        job = sim._jobs_by_name[launch.job]
        duration = sim.durations.sample(job, launch.class_index)
        if sim._slots:
            # thrashing model: the node's over-subscription after this instant's launches
            if launch.node not in self._stretch:
                self._stretch[launch.node] = sim._oversubscription(sim.scheduler.pool.index_of[launch.node])
            factor = self._stretch[launch.node]
            if factor > 1.0:
                duration *= factor
                sim._stats["stretched"] += 1
        sim._tasks[launch.task_id] = (launch.job, launch.class_index)
        sim._running[launch.job][launch.class_index] += 1
        sim._stats["launched"] += 1
        sim._touched.add(launch.job)
        sim.events.push(t + duration, TASK_END, launch.task_id)


def _clean(values: list[float]) -> Vector:
    """Accumulated sums with float noise below 1e-9 of a unit snapped to whole numbers,
    so an empty queue reads 0, not 4.4e-16."""
    out = []
    for x in values:
        rx = round(x)
        out.append(float(rx) if abs(x - rx) < 1e-9 else x)
    return tuple(out)


def simulate(scenario: Scenario, policy: Policy | str, options: SimOptions | None = None, *,
             progress: ProgressFn | None = None, **policy_options) -> SimResult:
    """Run one simulation (library entry point of ``fairshare simulate``)."""
    from fairshare.policies import make_policy

    pol = make_policy(policy, **policy_options) if isinstance(policy, str) else policy
    return Simulator(scenario, pol, options or SimOptions(), progress).run()
