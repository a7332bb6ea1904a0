"""The discrete-event simulator: a simulated clock around the pure ``engine.Scheduler``.

The simulator holds no policy logic and no copy of the scheduler's state: it is a clock
(the event heap) and an executor. It turns a scenario into engine events (``JobArrived``,
``NodeLost``, ``NodeAdded``; its executor adds ``TaskFinished``), feeds each instant's
events to ``engine.Engine.step`` and records what every job, queue and the cluster hold
after each instant.

One instant ``t``: every event at ``t`` is popped from the heap in ``(priority,
sequence)`` order (``sim.events``: task completions, then node failures, then node
additions, then job arrivals) and handed to ``Engine.step(t, events)``, which applies
them, decides once and starts the launches on the ``SimulatedExecutor``
(``sim.executor``: samples each duration, stretched under slot scheduling, and pushes
the completion). The simulator then records a timeline row for every entity whose state
changed, read from the engine's ``changes()`` (``engine.snapshot``).

Fair-share preemption (``SimOptions.preemption`` or the scenario's ``preemption:``
section): the engine preempts after its decision rounds (``engine/preemption.py``); the
simulator adds a ``Wake`` event when a starved queue's wait ends (rounds happen only at
events), charges each victim the work it loses (the time since it started, less what its
last checkpoint kept, ``checkpoint`` on its task class), credits the kept work to the
next task of that job and class to start (it runs that much shorter), and records a
``preempt`` timeline row per victim job and instant.

Streaming (``arrivals=``, with a ``RunSink``): the jobs come from an iterator in submit
order instead of ``Scenario.jobs``, so a run's memory is bounded by the jobs in the
system, not the workload's size. One arrival is pending at a time, merged with the heap
by the same rule (an arrival at ``t`` comes after the completions and node events at
``t`` and before a ``Wake``); each job's duration streams are seeded at its arrival
(``sim.durations``: the same durations as an up-front run whenever the jobs come in
scenario order); the timeline rows and demand changes of every instant go to the sink
as they are produced, and so does each job's outcome when it finishes, after which the
engine, the executor and the simulator forget the job. ``SimResult.rows``,
``demand_changes`` and ``jobs`` stay empty: the sink has them (``sim.stream``).

Stopping: when every job has finished (streaming: the arrivals are exhausted and no job
is left in the system); at ``until`` (events after it are not processed;
unfinished jobs keep ``finish = None``); or when no event is left (a job whose tasks fit
on no node that is up then stays unfinished, and ``notes`` says so). A job whose counts
are unbounded never finishes, so ``until`` is required when there is one.
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from fairshare.engine.events import JobArrived, NodeAdded, NodeLost, QueueChanged, TaskFinished, Wake
from fairshare.engine.preemption import Preemptor
from fairshare.engine.scheduler import Scheduler
from fairshare.engine.snapshot import JobTimes
from fairshare.engine.step import Engine, Instant
from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT
from fairshare.model.resources import Vector
from fairshare.model.scenario import PreemptionConfig, Scenario
from fairshare.policies import Policy, PolicyModeError
from fairshare.sim.durations import DurationSampler
from fairshare.sim.events import JOB_ARRIVAL, NODE_ADD, NODE_FAIL, QUEUE_CHANGE, WAKE, EventQueue
from fairshare.sim.executor import SimulatedExecutor

#: the ``entity`` of the cluster's timeline rows
CLUSTER = "cluster"
#: the ``kind`` of a preemption's timeline row: an event (tasks of the ``entity`` job
#: stopped at that time, and what they held), not a state that holds until a next row
PREEMPT = "preempt"
#: call the progress callback every this many instants (it throttles itself further)
PROGRESS_EVERY = 256


#: the cyclic garbage collector's thresholds while a simulation runs (Python's: 700, 10, 10)
SIM_GC_THRESHOLDS = (100_000, 50, 50)


@contextlib.contextmanager
def _collector_tuned():
    """Run a simulation with the objects alive before it frozen (the scenario, a trace's
    templates: never garbage, so a full collection need not walk them) and the young
    generation collected after 100,000 net allocations instead of 700. The loop makes
    millions of short-lived tuples and records and almost no cycles, so the default
    thresholds bought only repeated walks of everything alive. Measured on the full-size
    Google 2011 generator (``bench_google_full.py --fraction 0.01 --policy drf``,
    alternating, load average 2.1-2.7): 33.0 / 34.7 s of CPU with the defaults, 29.1 /
    29.4 s with this (docs/simulation.md, "Performance"). Both are restored after the run;
    a process that froze objects itself (serve, ``live.cli``) keeps its own freeze."""
    before = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0  # (unfreeze would thaw someone else's freeze too)
    if freeze:
        gc.freeze()  # (garbage among them too: it is collectable again after ``unfreeze``)
    gc.set_threshold(*SIM_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if freeze:
            gc.unfreeze()


class SimulationError(ValueError):
    """The simulation cannot run as asked (e.g. unbounded jobs without ``until``)."""


@dataclass(frozen=True)
class SimOptions:
    seed: int = 0
    until: float | None = None  # stop time in seconds; None: run until every job finished
    placement: str = "first-fit"  # engine.placement.STRATEGIES
    headroom: bool = False  # H-DRF Sec. 5: keep room for the largest task on every node
    #: fair-share preemption (``--preempt``): None uses the scenario's ``preemption:``
    #: section (off without one)
    preemption: PreemptionConfig | None = None
    #: measure each queue's time below its fair share also without preemption
    track_fair_share: bool = False


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
    #: fair-share preemption: None when it was off; else tasks preempted in all
    preemptions: int | None = None
    tasks_preempted: dict[str, int] = field(default_factory=dict)  # per job
    work_lost: dict[str, float] = field(default_factory=dict)  # per job, task-seconds
    #: per queue, seconds below its fair share by more than the tolerance while demanding
    #: (with preemption on, or ``track_fair_share``; None otherwise)
    time_below_fair_share: dict[str, float] | None = None
    #: a streaming run: ``rows``, ``demand_changes`` and ``jobs`` went to its sink
    streamed: bool = False


ProgressFn = Callable[[float, int], None]  # (simulated now, tasks completed so far)


class RunSink(Protocol):
    """Where a streaming run puts what an up-front run keeps in its ``SimResult``
    (``sim.stream.StreamingOutput`` writes the result files from it)."""

    def record(self, t: float, rows: list[Row], demand_changes: list[tuple[float, str, bool]],
               capacity: Vector | None) -> None:
        """One instant's timeline rows (in (kind, entity) order), demand changes, and the
        capacity when it changed."""

    def end(self, end_time: float) -> None:
        """The run's end time, known before the outcomes of the jobs left unfinished."""

    def job(self, index: int, job: Job, outcome: JobOutcome, tasks_preempted: int | None,
            work_lost: float | None) -> None:
        """A job's outcome (``index``: its arrival order, from 0), once: when it finishes,
        else at the end (unfinished, or never submitted: ``end`` came first). The
        preemption figures are None when preemption was off."""


def check_bounded(jobs: Iterable[Job], until: float | None) -> None:
    """Raise ``SimulationError`` naming the jobs with unbounded task counts when there is
    no stop time (they would never finish)."""
    unbounded = [j.name for j in jobs if j.total_count is None]
    if unbounded and until is None:
        shown = ", ".join(unbounded[:5]) + (f" and {len(unbounded) - 5} more" if len(unbounded) > 5 else "")
        raise SimulationError(f"job(s) {shown} have unbounded task counts and would never finish: "
                              f"give a stop time (--until SECONDS)")


class Simulator:
    def __init__(self, scenario: Scenario, policy: Policy, options: SimOptions = SimOptions(),
                 progress: ProgressFn | None = None, *, arrivals: Iterable[Job] | None = None,
                 sink: RunSink | None = None):
        """``arrivals`` (with ``sink``): stream the jobs from this iterable, in submit
        order, instead of ``scenario.jobs``, which must then be empty (module docstring).
        The jobs must fit the scenario (their queues exist, their resources are its own),
        as a loaded scenario's jobs do; each name must be unique among the jobs in the
        system (a finished job's name is forgotten with it)."""
        if (arrivals is None) != (sink is None):
            raise SimulationError("a streaming run needs both arrivals and a sink")
        if arrivals is not None and scenario.jobs:
            raise SimulationError(f"a streaming run takes its jobs from the arrivals; the scenario lists "
                                  f"{len(scenario.jobs)} job(s) too")
        check_bounded(scenario.jobs, options.until)
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
        self.events = EventQueue()
        self.now = 0.0  # the simulated clock: the instant being processed
        pool = self.scheduler.pool
        stretch: Callable[[str], float] | None = None
        if pool.slots_per_node is not None:  # slot scheduling over-subscribes nodes
            def node_oversubscription(node: str) -> float:
                return pool.oversubscription(pool.index_of[node])

            stretch = node_oversubscription
        self._streaming = arrivals is not None
        self.sink = sink
        if arrivals is None:
            # arrivals in submit order, ties in scenario order (the order the heap popped them
            # in when every arrival was pushed up front)
            self._arrivals: Iterator[Job] = iter(sorted(scenario.jobs, key=lambda j: j.submit_s))
        else:
            self._arrivals = iter(arrivals)
        self._jobs = {j.name: j for j in scenario.jobs}  # streaming: the jobs in the system
        # streaming: per job in the system, its arrival index
        self._index: dict[str, int] = {}
        self._arrived = 0
        self._last_submit = -math.inf
        self.durations = DurationSampler(scenario.jobs, self.rng)
        # work kept by checkpoints of preempted tasks, per (job, class), for the next start
        self.credits: dict[tuple[str, int], list[float]] = {}
        self.executor = SimulatedExecutor(scenario.cluster.nodes, self.events, self.durations,
                                          self._jobs, lambda: self.now, stretch,
                                          credits=self.credits)
        config = options.preemption or scenario.preemption
        preemptor = None
        if config is not None:  # raises PolicyModeError for a policy without fair shares
            preemptor = Preemptor(config, policy, scenario.resources)
        elif options.track_fair_share:
            try:
                preemptor = Preemptor(PreemptionConfig(), policy, scenario.resources, observe_only=True)
            except PolicyModeError:
                preemptor = None  # (no fair shares to measure against: summary says nothing)
        self.preemptor = preemptor
        self.engine = Engine(self.scheduler, self.executor, preemptor)
        self._preempting = config is not None
        self._tasks_preempted: dict[str, int] = {}
        self._work_lost: dict[str, float] = {}
        self._preemptions_total = 0
        self._wakes: set[float] = set()
        # last recorded state: entity key -> (running, allocation, dominant share)
        self._last: dict[tuple[str, str], tuple[int, Vector, float]] = {}
        self._demanding: dict[str, bool] = {}
        self._finished: set[str] = set()  # (streaming: the jobs that finished at this instant)
        self._n_finished = 0
        self._max_finish = 0.0  # streaming: the last finish so far
        self._result: SimResult | None = None
        self._completed = 0
        self._lost = 0

    # --- the loop ---------------------------------------------------------------------------
    def _arrival(self) -> Job | None:
        """The next arrival (None when there is none); streaming: checked against the
        scenario and the submit order."""
        job = next(self._arrivals, None)
        if job is None or not self._streaming:
            return job
        if not job.submit_s >= self._last_submit:
            raise SimulationError(f"arrivals must come in submit order: job {job.name!r} submits at "
                                  f"{job.submit_s} s, after a job submitted at {self._last_submit} s")
        if job.total_count is None and self.options.until is None:
            raise SimulationError(f"job {job.name!r} has an unbounded task count and would never finish: "
                                  f"give a stop time (until)")
        if job.name in self._jobs:
            raise SimulationError(f"job {job.name!r} arrives while a job of that name is in the system")
        # (what the loader checks for a scenario's own jobs and the engine relies on)
        if job.queue != ROOT and job.queue not in self.scenario.queues:
            raise SimulationError(f"job {job.name!r}: unknown queue {job.queue!r}")
        m = self.scenario.m
        for cls in job.classes:
            if len(cls.demand) != m:
                raise SimulationError(f"job {job.name!r}: task class {cls.name!r} has {len(cls.demand)} "
                                      f"demand amounts, the scenario has {m} resources")
        self._last_submit = job.submit_s
        return job

    def _admit(self, job: Job) -> JobArrived:
        """Streaming: a job enters the system (its arrival index, its duration seeds)."""
        self._jobs[job.name] = job
        self._index[job.name] = self._arrived
        self._arrived += 1
        self.durations.add(job)
        return JobArrived(job)

    def run(self) -> SimResult:
        if self._result is not None:
            return self._result
        with _collector_tuned():
            return self._run()

    def _run(self) -> SimResult:
        sc, until = self.scenario, self.options.until
        events = self.events
        streaming = self._streaming
        sink = self.sink
        for ev in sc.events:
            if ev.kind == "node_fail":
                events.push(ev.time_s, NODE_FAIL, NodeLost(ev.node_name))
            elif ev.kind == "queue":
                events.push(ev.time_s, QUEUE_CHANGE, QueueChanged(ev.queue_change))
            else:
                events.push(ev.time_s, NODE_ADD, NodeAdded(ev.node))
        arrival = self._arrival()  # the one pending arrival
        rows: list[Row] = []
        demand_changes: list[tuple[float, str, bool]] = []
        capacity_changes: list[tuple[float, Vector]] = [(0.0, self.scheduler.pool.total_capacity)]
        # every queue and the cluster get a row at 0 (jobs get theirs at submit): here when
        # nothing happens at 0, else by the first instant's record
        first = events.peek_time()
        if arrival is not None and (first is None or arrival.submit_s < first):
            first = arrival.submit_s
        if first != 0.0:
            self._record(0.0, rows, demand_changes)
            if streaming:
                sink.record(0.0, rows, demand_changes, None)
                rows, demand_changes = [], []
        end_of_run = 0.0
        instants = 0
        step = self.engine.step
        while True:
            top = events.peek()
            if arrival is not None and (top is None or arrival.submit_s <= top[0]):
                t = arrival.submit_s
            elif top is not None:
                t = top[0]
            else:
                break
            if until is not None and t > until:
                break
            # the heap's events at t up to the node additions, then the arrivals at t, then
            # the rest (a Wake): the heap's order when the arrivals were on it too
            batch = []
            while top is not None and top[0] == t and top[1] < JOB_ARRIVAL:
                batch.append(events.pop()[2])
                top = events.peek()
            while arrival is not None and arrival.submit_s == t:
                batch.append(self._admit(arrival) if streaming else JobArrived(arrival))
                arrival = self._arrival()
            while top is not None and top[0] == t:
                batch.append(events.pop()[2])
                top = events.peek()
            self.now = t
            instant = step(t, batch)
            if not instant.applied:
                continue  # every event void (completions of tasks lost with their node): no rows
            for applied in instant.applied:
                event = applied.event
                if isinstance(event, TaskFinished):
                    self._completed += 1
                elif isinstance(event, NodeLost):
                    self._lost += len(applied.tasks)
            end_of_run = t
            extra = self._preempted(t, instant) if instant.preempted else ()
            if self.preemptor is not None:
                wake = self.engine.wake_at()
                if wake is not None and wake > t and wake not in self._wakes:
                    self._wakes.add(wake)
                    events.push(wake, WAKE, Wake())
            changes = self._record(t, rows, demand_changes, extra)
            if changes.capacity_changed:
                capacity_changes.append((t, changes.capacity))
            if streaming:
                sink.record(t, rows, demand_changes, changes.capacity if changes.capacity_changed else None)
                rows, demand_changes = [], []
                if self._finished:
                    self._retire(t)
            instants += 1
            if self.progress is not None and instants % PROGRESS_EVERY == 0:
                self.progress(t, self._completed)
            if arrival is None and self._n_finished == self._arrived_total():
                break
        all_finished = arrival is None and self._n_finished == self._arrived_total()
        if streaming:
            times = None
            if all_finished:
                end = self._max_finish
        else:
            times = self.engine.snapshot().times
            if all_finished:
                end = max((t.finished_at for t in times.values()), default=0.0)
        if not all_finished:
            end = until if until is not None else end_of_run
        if self.progress is not None:
            self.progress(end, self._completed)
        time_below = None
        if self.preemptor is not None:
            self.preemptor.close(end)
            time_below = {path: self.preemptor.time_below.get(path, 0.0) for path in sc.queues.paths}
        if streaming:
            stuck = self._close_stream(end, arrival)
        else:
            stuck = [j.name for j in sc.jobs if j.name not in self._finished]
        notes = []
        if not all_finished and until is None:
            notes.append(f"{len(stuck)} job(s) could not finish ({', '.join(stuck[:5])}"
                         f"{' ...' if len(stuck) > 5 else ''}): their remaining tasks fit on no node that is up")
        self._result = SimResult(
            scenario=sc, policy=self.policy.name, params=dict(self.policy.params()), options=self.options,
            end_time=end, all_finished=all_finished, rows=rows, demand_changes=demand_changes,
            capacity_changes=capacity_changes, jobs={} if streaming else self._outcomes(times),
            decisions=self.scheduler.decisions, tasks_launched=self.executor.launched,
            tasks_completed=self._completed, tasks_lost=self._lost,
            tasks_stretched=self.executor.stretched, notes=notes,
            preemptions=self._preemptions_total if self._preempting else None,
            tasks_preempted=dict(self._tasks_preempted), work_lost=dict(self._work_lost),
            time_below_fair_share=time_below, streamed=streaming)
        return self._result

    def _arrived_total(self) -> int:
        return self._arrived if self._streaming else len(self.scenario.jobs)

    # --- streaming: jobs leave the system ------------------------------------------------------
    def _outcome_of(self, job: Job) -> JobOutcome:
        rt = self.scheduler.jobs[job.name]
        return JobOutcome(job.name, job.queue, rt.submitted_at, True, rt.first_start, rt.finished_at,
                          sum(rt.done), job.total_count)

    def _emit(self, job: Job, outcome: JobOutcome) -> None:
        name = job.name
        preempted = lost = None
        if self._preempting:
            preempted = self._tasks_preempted.pop(name, 0)
            lost = self._work_lost.pop(name, 0.0)
        self.sink.job(self._index.pop(name), job, outcome, preempted, lost)

    def _retire(self, t: float) -> None:
        """Streaming: the jobs that finished at ``t`` go to the sink, then every part of the
        run forgets them."""
        for name in sorted(self._finished):
            job = self._jobs[name]
            outcome = self._outcome_of(job)
            self._emit(job, outcome)
            self._max_finish = max(self._max_finish, outcome.finish)
            self.engine.forget(name)
            del self._jobs[name]
            self.durations.forget(job)
            for j in range(len(job.classes)):
                self.credits.pop((name, j), None)
            self._last.pop(("job", name), None)
            self._demanding.pop(name, None)
        self._finished.clear()

    def _close_stream(self, end: float, arrival: Job | None) -> list[str]:
        """Streaming, at the end: the outcomes of the jobs still in the system (arrival
        order), then of the arrivals never reached (not submitted). Returns the names of
        the jobs left in the system."""
        self.sink.end(end)
        left = sorted(self._jobs, key=self._index.__getitem__)
        for name in left:
            job = self._jobs[name]
            self._emit(job, self._outcome_of(job))
        while arrival is not None:
            self._jobs[arrival.name] = arrival
            self._index[arrival.name] = self._arrived
            self._arrived += 1
            self._emit(arrival, JobOutcome(arrival.name, arrival.queue, arrival.submit_s, False, None, None, 0,
                                           arrival.total_count))
            del self._jobs[arrival.name]
            arrival = self._arrival()
        return left

    def _preempted(self, t: float, instant: Instant) -> list[Row]:
        """Account the instant's preemptions: per victim, the work lost (elapsed time less
        what its last checkpoint kept) and the kept work credited to the next task of its
        job and class; one ``preempt`` row per victim job (tasks stopped, what they held)."""
        stopped: dict[str, list] = {}
        m = self.scenario.m
        for p in instant.preempted:
            for task in p.victims:
                job = self._jobs[task.job]  # (the scenario's job: no engine internals read)
                elapsed = max(0.0, t - task.started_at)
                every = job.classes[task.class_index].checkpoint
                kept = math.floor(elapsed / every) * every if every else 0.0
                if kept > 0:
                    self.credits.setdefault((task.job, task.class_index), []).append(kept)
                self._work_lost[task.job] = self._work_lost.get(task.job, 0.0) + (elapsed - kept)
                self._tasks_preempted[task.job] = self._tasks_preempted.get(task.job, 0) + 1
                self._preemptions_total += 1
                stopped.setdefault(task.job, []).append(task.demand)
        out: list[Row] = []
        for name, demands in stopped.items():
            freed = tuple(sum(d[r] for d in demands) for r in range(m))
            out.append((t, PREEMPT, name, len(demands), 0.0, freed))
        return out

    # --- recording -------------------------------------------------------------------------------
    def _row_if_changed(self, kind: str, entity: str, t: float, running: int, alloc: Vector,
                        ds: float) -> Row | None:
        """A row when the entity's state differs from its last row (always its first row)."""
        key = (kind, entity)
        state = (running, alloc, ds)
        if self._last.get(key) == state:
            return None
        self._last[key] = state
        return (t, kind, entity, running, ds, alloc)

    def _record(self, t: float, rows: list[Row], demand_changes: list, extra=()):
        """Rows for the entities whose state changed at ``t`` (sorted by kind, entity),
        with ``extra`` rows (preemptions) among them."""
        changes = self.engine.changes()
        out: list[Row] = list(extra)
        row_if_changed = self._row_if_changed
        demanding_was = self._demanding
        for name, _queue, running, usage, ds, demanding, finished in changes.jobs:
            row = row_if_changed("job", name, t, running, usage, ds)
            if row is not None:
                out.append(row)
            if demanding_was.get(name, False) != demanding:
                demanding_was[name] = demanding
                demand_changes.append((t, name, demanding))
            if finished and name not in self._finished:
                self._finished.add(name)
                self._n_finished += 1
        for path, (running, usage, ds) in changes.queues.items():
            row = row_if_changed("queue", path, t, running, usage, ds)
            if row is not None:
                out.append(row)
        if changes.cluster is not None:
            running, usage, ds = changes.cluster
            row = row_if_changed("cluster", CLUSTER, t, running, usage, ds)
            if row is not None:
                out.append(row)
        out.sort(key=lambda r: (r[1], r[2]))
        rows.extend(out)
        return changes

    def _outcomes(self, times: dict[str, JobTimes]) -> dict[str, JobOutcome]:
        out = {}
        for job in self.scenario.jobs:
            t = times.get(job.name)
            if t is None:  # never submitted (its submit time is after the stop)
                out[job.name] = JobOutcome(job.name, job.queue, job.submit_s, False, None, None, 0, job.total_count)
                continue
            out[job.name] = JobOutcome(job.name, job.queue, t.submitted_at, True, t.first_start, t.finished_at,
                                       t.tasks_done, job.total_count)
        return out


def simulate(scenario: Scenario, policy: Policy | str, options: SimOptions | None = None, *,
             progress: ProgressFn | None = None, **policy_options) -> SimResult:
    """Run one simulation (library entry point of ``fairshare simulate``)."""
    from fairshare.policies import make_policy

    pol = make_policy(policy, **policy_options) if isinstance(policy, str) else policy
    return Simulator(scenario, pol, options or SimOptions(), progress).run()
