"""One instant: the engine applies what happened, decides once, starts the launches.

``Engine.step(now, events)`` is the only scheduling loop of the project. The simulator
calls it once per simulated instant with the events its heap holds at that time; the
live service once per pass with what its executor and its API reported (``live.loop``);
the conformance checks with their workloads; ``run_rounds`` replays a recorded list of
``(now, events)``. Within a step the events are applied in the order given; every
runtime gives them in the one order of an instant (``engine.events.INSTANT_ORDER``:
completions and failures, nodes lost, nodes added, queue changes, arrivals,
cancellations, a wake), then ``Scheduler.schedule`` decides once and every launch is
handed to ``Executor.start`` in decision order. Decisions therefore differ between
runtimes only through the grouping of the events they feed in
(``tests/test_live_parity.py``, ``tests/test_live_queue_events.py``).

A step where no event took effect (every completion void, every node change a no-op)
and nothing was applied since the last decision does not decide: nothing could have
become runnable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from fairshare.engine.events import (Event, JobArrived, JobCancelled, NodeAdded, NodeLost, QueueChanged, TaskFinished,
                                     Wake)
from fairshare.engine.preemption import Preemptor
from fairshare.engine.executor import Executor
from fairshare.engine.scheduler import Launch, RunningTask, Scheduler
from fairshare.engine.snapshot import Changes, Snapshot, Usage, UsageLedger
from fairshare.model.resources import Vector

# (named tuples: one of each is built per event and per step, in the simulator's hot loop)


class Applied(NamedTuple):
    """An event that took effect, with the running tasks it ended: re-queued (node lost)
    or killed (job cancelled; the rest of a gang whose task failed or was lost, re-queued)."""

    event: Event
    tasks: tuple[int, ...] = ()


class Preempted(NamedTuple):
    """One preemption of a decision round: ``victims`` stopped (back to pending, killed
    through the executor) for a task of ``job`` on ``node``; ``launch`` that task (None
    when it no longer fitted: ``Scheduler.preempt``). For a gang's claim, ``launches``
    holds all of the gang's tasks (``launch`` the first), or nothing when it no longer
    fitted whole (``Scheduler.preempt_for_gang``). Why it was legal (the planner's
    ``Legality``) is kept on each victim job (``JobRuntime.preempted_by``)."""

    job: str
    node: str
    victims: tuple[RunningTask, ...]
    launch: Launch | None
    launches: tuple[Launch, ...] = ()


class Instant(NamedTuple):
    now: float
    applied: list[Applied]  # the events that took effect, in order
    launches: list[Launch]  # in decision order; [] when the step did not decide
    preempted: tuple[Preempted, ...] = ()  # the round's preemptions (fair-share preemption on)


class Engine:
    """A ``Scheduler`` and the ``Executor`` that runs its launches."""

    def __init__(self, scheduler: Scheduler, executor: Executor, preemptor: Preemptor | None = None):
        self.scheduler = scheduler
        self.executor = executor
        #: fair-share preemption (``engine/preemption.py``), consulted after every
        #: decision round; None: off
        self.preemptor = preemptor
        #: the preemptions of the last decision round
        self.last_preempted: tuple[Preempted, ...] = ()
        self.ledger = UsageLedger(scheduler)
        #: the events of the current (or last) ``step`` that took effect so far, in order:
        #: what a ``commit`` hook records with the launches (the tasks a lost node re-queued)
        self.applied: list[Applied] = []
        # something was applied since the last decision (``apply`` called outside a step)
        self._undecided = False

    def apply(self, event: Event, now: float) -> Applied | None:
        """Tell the scheduler about one event; None when it changes nothing. A completion
        for a task the scheduler no longer runs (lost with its node, or already reported),
        a node lost that is not up or added while up, a cancellation of an unknown job,
        are ignored: events from a runtime can arrive late or twice."""
        sch = self.scheduler
        if isinstance(event, TaskFinished):
            if event.task_id not in sch.tasks:
                return None
            if event.ok:
                sch.finish(event.task_id, now)
            else:
                sch.fail(event.task_id, now)
            out = Applied(event)
        elif isinstance(event, JobArrived):
            sch.submit(event.job, now, task_ids=event.task_ids, running=event.running, attempts=event.attempts)
            out = Applied(event)
        elif isinstance(event, NodeLost):
            index = sch.pool.index_of.get(event.name)
            if index is None or not sch.pool.alive(index):
                return None
            out = Applied(event, tuple(sch.lose_node(event.name, now)))
        elif isinstance(event, NodeAdded):
            index = sch.pool.index_of.get(event.node.name)
            if index is not None and sch.pool.alive(index):
                return None
            sch.add_node(event.node, now)
            out = Applied(event)
        elif isinstance(event, JobCancelled):
            if event.name not in sch.jobs:
                return None
            killed = tuple(sch.cancel(event.name, now))
            for task_id in killed:
                self.executor.kill(task_id)
            out = Applied(event, killed)
        elif isinstance(event, QueueChanged):
            sch.change_queues(event.change, now)  # (raises ValueError when it cannot apply)
            self.ledger.tree_changed()
            out = Applied(event)
        elif isinstance(event, Wake):
            out = Applied(event)
        else:
            raise TypeError(f"not an engine event: {event!r}")
        if sch.gang_stopped:
            # a gang's task failed or was lost: the rest of its gang was stopped with it
            # (``Scheduler.fail``); they end here, like a cancelled job's
            stopped = tuple(task.task_id for task in sch.gang_stopped)
            sch.gang_stopped = []
            for task_id in stopped:
                self.executor.kill(task_id)
            out = Applied(out.event, out.tasks + stopped)
        self._undecided = True
        return out

    def step(self, now: float, events: Iterable[Event],
             commit: Callable[[list[Launch]], None] | None = None) -> Instant:
        """Apply ``events`` in order, then decide once and start the launches (module
        docstring). ``commit`` sees the launches before any starts (the live service
        stores them first, with what ``applied`` holds, so a crash never leaves a task
        running that it forgot); it is not called when the step does not decide."""
        applied = self.applied = []
        for event in events:
            got = self.apply(event, now)
            if got is not None:
                applied.append(got)
        launches = self._decide(now, commit)
        return Instant(now, applied, launches, self.last_preempted)

    def _decide(self, now: float, commit: Callable[[list[Launch]], None] | None = None) -> list[Launch]:
        """``dispatch`` if anything was applied since the last decision, else ``[]``."""
        if not self._undecided:
            self.last_preempted = ()
            return []
        return self.dispatch(now, commit)

    def dispatch(self, now: float, commit: Callable[[list[Launch]], None] | None = None) -> list[Launch]:
        """One decision round: ``schedule(now)``; with preemption on, the round's
        preemptions (``Preemptor.round``: the victims go back to pending at once and each
        preemptor's task starts in the room they leave) and one more ``schedule(now)`` for
        what they freed beyond it; then ``commit`` (the launches; the preemptions are in
        ``last_preempted``), the victims killed and every launch started, in order."""
        self._undecided = False
        sch = self.scheduler
        launches = sch.schedule(now)
        preempted: list[Preempted] = []
        if self.preemptor is not None:
            planned = self.preemptor.round(sch, now)
            for p in planned:
                if p.gang:  # (the whole gang starts in the room, or none of it)
                    stopped, started = sch.preempt_for_gang(p.victims, p.job, now, p.legality)
                    preempted.append(Preempted(p.job, p.node, tuple(stopped), started[0] if started else None,
                                               tuple(started)))
                    launches.extend(started)
                    continue
                stopped, launch = sch.preempt(p.victims, p.job, p.class_index, p.node, now, p.legality)
                preempted.append(Preempted(p.job, p.node, tuple(stopped), launch))
                if launch is not None:
                    launches.append(launch)
            if planned:
                launches.extend(sch.schedule(now))
                self.preemptor.round(sch, now, plan_now=False)  # (timers: wake_at)
        self.last_preempted = tuple(preempted)
        if commit is not None:
            commit(launches)
        for p in preempted:
            for task in p.victims:
                self.executor.kill(task.task_id)
        start = self.executor.start
        for launch in launches:
            start(launch, now)
        self.ledger.catch_up()  # (the round's changes to the ledger's readers: the log stays short)
        return launches

    def forget(self, name: str) -> None:
        """Drop a finished job from the scheduler and the usage ledger, once every reader
        of the changes (``changes()``'s, if it was ever called) has read its finish: a
        streaming runtime keeps only the jobs in the system.
        The job's record is gone afterwards (``snapshot`` no longer lists it)."""
        rt = self.scheduler.jobs.get(name)
        if rt is None or rt.finished_at is None:
            self.scheduler.forget(name)  # (raises: unknown, or not finished)
        self.ledger.forget(name)
        self.scheduler.forget(name)

    def wake_at(self) -> float | None:
        """When a starved queue's wait for preemption ends, if one is waiting: a runtime
        whose rounds happen only at events (the simulator) steps with a ``Wake`` then."""
        return None if self.preemptor is None else self.preemptor.wake_at()

    def changes(self) -> Changes:
        """What moved since the last call (``UsageLedger.changes``, with the ledger's own
        reader; ``ledger.reader()`` makes another that sees every change too)."""
        return self.ledger.changes()

    def snapshot(self) -> Snapshot:
        """Every job, queue and node now (``UsageLedger.snapshot``: a read)."""
        return self.ledger.snapshot()

    def totals(self) -> tuple[Vector, dict[str, Usage], Usage]:
        """Capacity, queue and cluster usage (``UsageLedger.totals``: a read)."""
        return self.ledger.totals()


def run_rounds(engine: Engine, rounds: Iterable[tuple[float, list[Event]]]) -> list[Launch]:
    """Replay: one ``step`` per recorded ``(now, events)``; every launch in order. The
    parity tests feed it the rounds a live run recorded (``LiveService.rounds``)."""
    out: list[Launch] = []
    for now, events in rounds:
        out.extend(engine.step(now, events).launches)
    return out
