"""The discrete-event simulator: a simulated clock around the pure ``engine.Scheduler``.

The simulator holds no policy logic and no copy of the scheduler's state: it is a clock
(the event heap) and an executor. It turns a scenario into engine events (``JobArrived``,
and ``sim.events.engine_event`` for its ``events:``; its executor adds ``TaskFinished``),
feeds each instant's events to ``engine.Engine.step`` and hands what every job, queue and
the cluster hold after each instant to its sink.

One instant ``t``: every event at ``t`` is taken in ``(priority, sequence)`` order
(``sim.events``, from ``engine.events.INSTANT_ORDER``; the pending arrival is a
``JOB_ARRIVAL`` event kept off the heap) and handed to ``Engine.step(t, events)``, which
applies them, decides once and starts the launches on the ``SimulatedExecutor``
(``sim.executor``: samples each duration, stretched under slot scheduling, and pushes
the completion). Then the instant's output: the preemption books (``sim.preemption``),
the timeline rows of the entities whose state changed (``sim.recorder``, from the
engine's ``changes()``), and the outcome of each job that finished, all to the sink.

The rooms around the clock:

- ``sim.arrivals``: where the jobs come from (the scenario's, or a stream in submit
  order: ``arrivals=``) and whether a finished job is forgotten (a stream's is, by every
  part of the run, so memory is bounded by the jobs in the system).
- ``sim.sink``: where the output goes, one interface (``RunSink``) for both modes: the
  ``ResultCollector`` keeps it for the ``SimResult`` (the default), ``sim.stream``'s
  ``StreamingOutput`` writes the files as the run goes (its ``SimResult`` holds no rows).
- ``sim.preemption``: fair-share preemption (``SimOptions.preemption`` or the scenario's
  ``preemption:`` section) is the engine's (``engine/preemption.py``); the books charge
  each victim the work it loses and credit what its checkpoint kept. The clock adds a
  ``Wake`` event when a starved queue's wait ends (rounds happen only at events).

Stopping: when every job has finished (the arrivals are exhausted and no job is left in
the system); at ``until`` (events after it are not processed; unfinished jobs keep
``finish = None``); or when no event is left (a job whose tasks fit on no node that is up
then stays unfinished, and ``notes`` says so). A job whose counts are unbounded never
finishes, so ``until`` is required when there is one.
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
from collections.abc import Callable, Iterable
from dataclasses import replace

from fairshare.engine.events import Event, JobArrived, NodeLost, QueueChanged, TaskFinished, Wake
from fairshare.engine.preemption import Preemptor
from fairshare.engine.scheduler import Scheduler
from fairshare.engine.step import Engine, Instant
from fairshare.model.jobs import Job
from fairshare.model.scenario import PreemptionConfig, Scenario
from fairshare.policies import Policy, PolicyModeError
from fairshare.sim.arrivals import ScenarioArrivals, StreamedArrivals, check_bounded
from fairshare.sim.durations import DurationSampler
from fairshare.sim.events import JOB_ARRIVAL, WAKE, EventQueue, engine_event
from fairshare.sim.executor import SimulatedExecutor
from fairshare.sim.preemption import PreemptionBooks
from fairshare.sim.reasons import ReasonBook
from fairshare.sim.recorder import DecayedUsageRecorder, TimelineRecorder
# (CLUSTER, PREEMPT and Row too: other modules import the run's types from here)
from fairshare.sim.result import CLUSTER, PREEMPT, JobOutcome, Row, SimOptions, SimResult, SimulationError  # noqa: F401
from fairshare.sim.sink import ResultCollector, RunSink

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


ProgressFn = Callable[[float, int], None]  # (simulated now, tasks completed so far)


class Simulator:
    def __init__(self, scenario: Scenario, policy: Policy, options: SimOptions = SimOptions(),
                 progress: ProgressFn | None = None, *, arrivals: Iterable[Job] | None = None,
                 sink: RunSink | None = None):
        """``arrivals`` (with ``sink``): stream the jobs from this iterable, in submit
        order, instead of ``scenario.jobs``, which must then be empty (``sim.arrivals``).
        The jobs must fit the scenario (their queues exist, their resources are its own),
        as a loaded scenario's jobs do; each name must be unique among the jobs in the
        system (a finished job's name is forgotten with it)."""
        if (arrivals is None) != (sink is None):
            raise SimulationError("a streaming run needs both arrivals and a sink")
        if scenario.usage is not None:  # (the static allocations' history: the run keeps its own, from its start)
            scenario = replace(scenario, usage=None)
        if arrivals is not None and scenario.jobs:
            raise SimulationError(f"a streaming run takes its jobs from the arrivals; the scenario lists "
                                  f"{len(scenario.jobs)} job(s) too")
        check_bounded(scenario.jobs, options.until)
        if options.until is not None and not (options.until >= 0 and math.isfinite(options.until)):
            raise SimulationError(f"until must be a finite number >= 0, got {options.until}")
        self.scenario = scenario
        # the policy with the scenario's own settings for it (``peers:``, Policy.configured)
        policy = policy.configured(scenario)
        self.policy = policy
        self.options = options
        self.progress = progress
        # Raises PolicyModeError for a policy with no online meaning (before any work).
        self.scheduler = Scheduler(scenario.resources, scenario.cluster.nodes, scenario.queues, policy,
                                   placement=options.placement, headroom=options.headroom,
                                   respect_counts=True, devices=scenario.cluster.devices,
                                   half_life=scenario.fairness.half_life if scenario.fairness else 0.0)
        self.rng = random.Random(options.seed)  # the only source of randomness of a run
        self.events = EventQueue()
        self.now = 0.0  # the simulated clock: the instant being processed
        pool = self.scheduler.pool
        stretch: Callable[[str], float] | None = None
        if pool.slots_per_node is not None:  # slot scheduling over-subscribes nodes
            def node_oversubscription(node: str) -> float:
                return pool.oversubscription(pool.index_of[node])

            stretch = node_oversubscription
        self.durations = DurationSampler(scenario.jobs, self.rng)
        self.arrivals: ScenarioArrivals | StreamedArrivals
        if arrivals is None:
            self.arrivals = ScenarioArrivals(scenario)
            self.sink: RunSink = ResultCollector()
        else:
            self.arrivals = StreamedArrivals(arrivals, scenario, options.until, self.durations)
            self.sink = sink
        config = options.preemption or scenario.preemption
        self.books = PreemptionBooks(scenario.m, on=config is not None)
        self.executor = SimulatedExecutor(scenario.cluster.nodes, self.events, self.durations,
                                          self.arrivals.jobs, lambda: self.now, stretch,
                                          credits=self.books.credits)
        preemptor = None
        if config is not None:  # raises PolicyModeError for a policy without fair shares
            preemptor = Preemptor(config, policy, scenario.resources)
        elif options.track_fair_share:
            try:
                preemptor = Preemptor(PreemptionConfig(), policy, scenario.resources, observe_only=True)
            except PolicyModeError:
                preemptor = None  # (no fair shares to measure against: summary says nothing)
        self.preemptor = preemptor
        if scenario.gangs is not None and scenario.gangs.reserve_after is not None:
            # (the simulator knows every duration: reservations backfill; engine/reserve.py)
            self.scheduler.reserve_gangs(scenario.gangs.reserve_after, task_ends=self.executor.task_ends,
                                         next_duration=self.executor.next_duration)
        self.engine = Engine(self.scheduler, self.executor, preemptor)
        self.recorder = TimelineRecorder()
        #: the sink makes the timeline rows (``_record``)
        self._sink_records = bool(getattr(self.sink, "records_changes", False))
        # per queue decayed usage, when the sorter keeps a ledger (a half-life above 0)
        self.decayed = None
        if getattr(self.scheduler.sorter, "decay", None) is not None:
            self.decayed = DecayedUsageRecorder(lambda: self.scheduler.sorter, keep_rows=arrivals is None)
        if options.reasons and arrivals is not None:
            raise SimulationError("reasons are not kept by a streaming run (its timeline is written as it goes)")
        self.reasons = ReasonBook() if options.reasons else None
        self._wakes: set[float] = set()
        #: the jobs admitted and not finished: name -> index (``sim.arrivals``)
        self._in_system: dict[str, int] = {}
        self._max_finish = 0.0  # the last finish so far
        self._capacity_changes: list[tuple[float, tuple[float, ...]]] = []
        self._result: SimResult | None = None
        self._completed = 0
        self._lost = 0

    def run(self) -> SimResult:
        if self._result is not None:
            return self._result
        with _collector_tuned():
            return self._run()

    # --- the clock -------------------------------------------------------------------------------
    def _run(self) -> SimResult:
        until = self.options.until
        events = self.events
        for cluster_event in self.scenario.events:
            priority, event = engine_event(cluster_event)
            events.push(cluster_event.time_s, priority, event)
        arrival = self.arrivals.next()  # the one pending arrival
        self._capacity_changes.append((0.0, self.scheduler.pool.total_capacity))
        # every queue and the cluster get a row at 0 (jobs get theirs at submit): here when
        # nothing happens at 0, else by the first instant's
        first = events.peek_time()
        if arrival is not None and (first is None or arrival.submit_s < first):
            first = arrival.submit_s
        if first != 0.0:  # (no node has changed yet: no capacity change with these)
            self._record(0.0, ())
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
            batch, arrival = self._take_instant(t, arrival)
            self.now = t
            try:
                instant = step(t, batch)
            except ValueError as exc:
                if not any(isinstance(event, QueueChanged) for event in batch):
                    raise
                # a queue change the loader could not rule out (a removed queue whose jobs
                # had not all finished by then): the scenario's problem, said as such
                raise SimulationError(f"at {t:g} s: {exc}") from None
            if not instant.applied:
                continue  # every event void (completions of tasks lost with their node): no output
            end_of_run = t
            if self.preemptor is not None:
                self._wake_when_due(t)
            if self.reasons is not None:
                self.reasons.observe(self.scheduler, t)
            self._output(t, instant)
            instants += 1
            if self.progress is not None and instants % PROGRESS_EVERY == 0:
                self.progress(t, self._completed)
            if arrival is None and not self._in_system:
                break
        return self._close(end_of_run, arrival)

    def _take_instant(self, t: float, arrival: Job | None) -> tuple[list[Event], Job | None]:
        """Every event at ``t`` in ``(priority, sequence)`` order, and the next pending
        arrival. The pending arrival is a ``JOB_ARRIVAL`` event not on the heap (one at a
        time, in submit order): it goes before the heap's next event at ``t`` exactly when
        that event's priority is not below ``JOB_ARRIVAL``."""
        events = self.events
        batch: list[Event] = []
        while True:
            arriving = arrival is not None and arrival.submit_s == t
            events.pop_at(t, batch, JOB_ARRIVAL if arriving else None)
            if not arriving:
                return batch, arrival
            self._in_system[arrival.name] = self.arrivals.admit(arrival)
            batch.append(JobArrived(arrival))
            arrival = self.arrivals.next()

    def _wake_when_due(self, t: float) -> None:
        """A ``Wake`` when a starved queue's wait for preemption ends after ``t``, or (with
        ``preemption.round``) its next paced round comes (the engine's rounds happen only
        at events)."""
        wake = self.engine.wake_at()
        if wake is not None and wake > t and wake not in self._wakes:
            self._wakes.add(wake)
            self.events.push(wake, WAKE, Wake())

    # --- an instant's output ---------------------------------------------------------------------
    def _output(self, t: float, instant: Instant) -> None:
        """Count the instant's completions and lost tasks, account its preemptions, and
        hand its rows, demand changes and finished jobs to the sink."""
        for applied in instant.applied:
            event = applied.event
            if isinstance(event, TaskFinished):
                self._completed += 1
            elif isinstance(event, NodeLost):
                self._lost += len(applied.tasks)
        preempt_rows = self.books.account(t, instant, self.arrivals.jobs) if instant.preempted else ()
        finished = self._record(t, preempt_rows)
        if self.decayed is not None:
            self.decayed.sample(t)
        if finished:  # (most instants finish no job: no sort, no generator)
            in_system = self._in_system
            for name in sorted(name for name in finished if name in in_system):
                self._leave(name)

    def _record(self, t: float, extra: list[Row] | tuple) -> list[str]:
        """The instant's rows (with ``extra``: preemptions) and demand changes to the sink,
        the capacity with them when it changed; the jobs the changes report finished. A
        sink that ``records_changes`` (``sim.offload``, in its own process) gets what
        moved and makes the rows itself, with the recorder this one would use."""
        if self._sink_records:
            moved = self.engine.ledger.moved()
            capacity = moved.capacity if moved.capacity_changed else None
            finished = [job[0] for job in moved.jobs if job[5]]  # (``Moved``'s finished flag)
            self.sink.record_moved(t, moved, extra, capacity)
        else:
            changes = self.engine.changes()
            rows, demand_changes, finished = self.recorder.record(t, changes, extra)
            capacity = changes.capacity if changes.capacity_changed else None
            self.sink.record(t, rows, demand_changes, capacity)
        if capacity is not None:
            self._capacity_changes.append((t, capacity))
        return finished

    def _leave(self, name: str) -> None:
        """A job finished: its outcome to the sink; a streaming run then forgets it."""
        job = self.arrivals.jobs[name]
        outcome = self._outcome_of(job)
        self.sink.job(self._in_system.pop(name), job, outcome, *self.books.settle(job))
        self._max_finish = max(self._max_finish, outcome.finish)
        if self.arrivals.forgets_finished:
            self.engine.forget(name)
            self.arrivals.forget(job)
            self.durations.forget(job)
            if self._sink_records:
                self.sink.forget_job(name)
            else:
                self.recorder.forget(name)

    def _outcome_of(self, job: Job) -> JobOutcome:
        rt = self.scheduler.jobs[job.name]
        return JobOutcome(job.name, job.queue, rt.submitted_at, True, rt.first_start, rt.finished_at,
                          sum(rt.done), job.total_count)

    # --- the end ---------------------------------------------------------------------------------
    def _close(self, end_of_run: float, arrival: Job | None) -> SimResult:
        """The end time; the outcomes of the jobs still in the system (index order), then of
        the arrivals never reached (not submitted); the run's ``SimResult``, completed by
        the sink."""
        sc, until = self.scenario, self.options.until
        all_finished = arrival is None and not self._in_system
        if all_finished:
            end = self._max_finish
        else:
            end = until if until is not None else end_of_run
        if self.progress is not None:
            self.progress(end, self._completed)
        time_below = None
        if self.preemptor is not None:
            self.preemptor.close(end)
            time_below = {path: self.preemptor.time_below.get(path, 0.0) for path in sc.queues.paths}
        if self.decayed is not None and end > end_of_run:
            self.decayed.sample(end)  # (the summary's decayed usage is at the end time)
        sink = self.sink
        sink.end(end)
        left = sorted(self._in_system, key=self._in_system.__getitem__)
        for name in left:
            job = self.arrivals.jobs[name]
            sink.job(self._in_system.pop(name), job, self._outcome_of(job), *self.books.settle(job))
        while arrival is not None:
            sink.job(self.arrivals.unreached(arrival), arrival,
                     JobOutcome(arrival.name, arrival.queue, arrival.submit_s, False, None, None, 0,
                                arrival.total_count), *self.books.settle(arrival))
            arrival = self.arrivals.next()
        notes = []
        if not all_finished and until is None:
            notes.append(f"{len(left)} job(s) could not finish ({', '.join(left[:5])}"
                         f"{' ...' if len(left) > 5 else ''}): their remaining tasks fit on no node that is up")
        result = SimResult(
            scenario=sc, policy=self.policy.name, params=dict(self.policy.params()), options=self.options,
            end_time=end, all_finished=all_finished, rows=[], demand_changes=[],
            capacity_changes=self._capacity_changes, jobs={}, decisions=self.scheduler.decisions,
            tasks_launched=self.executor.launched, tasks_completed=self._completed, tasks_lost=self._lost,
            tasks_stretched=self.executor.stretched, notes=notes,
            preemptions=self.books.total if self.books.on else None, time_below_fair_share=time_below,
            reserved_idle=None if self.scheduler.reserve is None else self.scheduler.reserve.reserved_idle(end))
        if self.decayed is not None:
            result.decayed_usage = self.decayed.rows
            result.decayed_usage_end = dict(self.decayed.last)
        if self.reasons is not None:
            self.reasons.end(end)
            result.pending_by_reason = self.reasons.seconds
            result.reason_changes = self.reasons.changes
        sink.complete(result)
        self._result = result
        return result


def simulate(scenario: Scenario, policy: Policy | str, options: SimOptions | None = None, *,
             progress: ProgressFn | None = None, **policy_options) -> SimResult:
    """Run one simulation (library entry point of ``fairshare simulate``)."""
    from fairshare.policies import make_policy

    pol = make_policy(policy, **policy_options) if isinstance(policy, str) else policy
    return Simulator(scenario, pol, options or SimOptions(), progress).run()
