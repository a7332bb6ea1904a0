"""The live service's pass: one ``Engine.step``, as the simulator's instant.

A pass gathers what happened since the last one and hands it to ``Engine.step`` in
the one order of an instant (``engine.events.instant_rank``), exactly as the simulator
does with its heap:

1. the executor's reports, through the filter in front of the engine
   (``live.reports.ReportFilter``: fencing by attempt, tasks adopted at a restart,
   failures and their attempts), as ``TaskFinished``, ``NodeLost``, ``NodeAdded``;
2. the inbox (``live.admission``): jobs accepted by the API (already committed to the
   store) as ``JobArrived`` with their task ids (the store's rows) and attempts,
   cancellations as ``JobCancelled`` (the engine kills the running tasks through the
   executor), queue-tree changes as ``QueueChanged`` (applied in place by the
   scheduler);
3. a ``Wake`` when a starved queue's wait for preemption has ended.

A new half-life of decayed usage (``PUT /v1/queues``, an inbox entry ``("fairness",
(half_life, done))``) is applied to the scheduler at the start of the pass, before these
(``set_half_life``; how the history carries over: ``live.decay``).

``Engine.step`` applies them and decides once. Its ``commit`` hook writes the pass to
the store before anything starts: the ends' outcomes and the tasks lost nodes re-queued,
the preempted attempts (``Store.preempt_tasks``), then the launches as ``running`` with
their attempt numbers (``Launch.attempt``). The ends dealt with are then acknowledged to
the executor (``RayExecutor``'s node agents keep an end until then), and finished jobs
are marked in the store and forgotten by the engine.

There is no decision loop here: the rules live in the engine (``Scheduler``, queue
bounds, ``Preemptor``); a recorded pass (``rounds``) replays through ``run_rounds`` to
the same launches (``tests/test_live_parity.py``, ``tests/test_live_queue_events.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from fairshare.engine.events import (Event, ExecutorEvent, JobArrived, JobCancelled, NodeLost, QueueChanged,
                                     TaskFinished, Wake, instant_rank)
from fairshare.engine.executor import Executor
from fairshare.engine.forecast import RecentDurations
from fairshare.engine.preemption import Preemptor
from fairshare.engine.scheduler import Launch, Scheduler
from fairshare.engine.step import Engine
from fairshare.live.admission import Admission
from fairshare.live.commands import CommandBook
from fairshare.live.crashpoints import crash_point
from fairshare.live.decay import continued, seeded
from fairshare.live.reports import REQUEUE_REASONS, Admitted, ReportFilter
from fairshare.live.store import TERMINAL_TASK_STATES, Store, job_state
from fairshare.model.cluster import Node
from fairshare.model.queues import ROOT, QueueChange, QueueTree
from fairshare.model.scenario import GangsConfig, PreemptionConfig
from fairshare.policies import Policy

if TYPE_CHECKING:  # (prometheus_client is imported only where metrics are kept)
    from fairshare.live.metrics import Metrics

log = logging.getLogger(__name__)

__all__ = ["REQUEUE_REASONS", "START_REFUSED", "SchedulingLoop"]

#: the reason of a start the executor refused: it uses an attempt (a start refused again
#: and again, e.g. a demand the executor cannot represent, ends as failed after
#: ``max_attempts`` instead of spinning)
START_REFUSED = "start refused by the executor"


class _GuardedStarts:
    """The executor as the engine sees it: a start the runtime refuses becomes a failed
    ``TaskFinished`` for the next pass (``START_REFUSED``: it counts as an attempt)
    instead of an exception in the middle of the launches (the others still start)."""

    def __init__(self, executor: Executor, deferred: list[ExecutorEvent]):
        self.inner = executor
        self.deferred = deferred

    def nodes(self) -> tuple[Node, ...]:
        return self.inner.nodes()

    def start(self, launch: Launch, now: float) -> None:
        try:
            self.inner.start(launch, now)
        except Exception as exc:  # noqa: BLE001 - the runtime refused: re-queue, keep scheduling
            log.warning("task %d could not be started on %s: %r", launch.task_id, launch.node, exc)
            self.deferred.append(TaskFinished(launch.task_id, ok=False, reason=f"{START_REFUSED}: {exc!r}",
                                              attempt=launch.attempt))

    def kill(self, task_id: int) -> None:
        self.inner.kill(task_id)

    def poll(self) -> list[ExecutorEvent]:
        return self.inner.poll()


class SchedulingLoop:
    """The engine, the filter in front of it and the store writes of each pass. Only the
    scheduling thread calls it (the service holds its lock around every pass)."""

    def __init__(self, store: Store, executor: Executor, commands: CommandBook, *, resources: tuple[str, ...],
                 policy: Policy, placement: str, tree: QueueTree, nodes: tuple[Node, ...], max_attempts: int,
                 wall_clock: Callable[[], float], record_rounds: bool = False,
                 preemption: PreemptionConfig | None = None, metrics: Metrics | None = None,
                 gangs: GangsConfig | None = None, half_life: float = 0.0):
        """``metrics``: where each task's admission wait and each job's end are counted
        (the service's; None: nowhere). ``half_life``: of decayed usage (0: none)."""
        self.store = store
        self.metrics = metrics
        self.executor = executor
        self.wall_clock = wall_clock
        self.reports = ReportFilter(max_attempts)
        self.admission = Admission(store, commands, self.reports)
        #: reports handed in again at the next pass: starts the executor refused, ends of
        #: adopted tasks whose job had not arrived
        self.deferred: list[ExecutorEvent] = []
        #: the queue tree the service started with (a replay starts from it: the changes
        #: since are recorded events)
        self.initial_tree = tree
        #: with ``record_rounds``: every pass that did something, as ``(now, events fed to
        #: Engine.step)`` (``engine.step.run_rounds`` replays them)
        self.rounds: list[tuple[float, list[Event]]] | None = [] if record_rounds else None
        self.preempted_total = 0  # attempts stopped by preemption in this process
        self.attempts_total = 0  # task attempts started in this process (``/metrics``)
        self._woken_for: float | None = None  # the ``wake_at`` a Wake was fed for
        # raises PolicyModeError for offline policies (and, with preemption, for policies
        # without a static allocation: no fair shares to preempt for)
        preemptor = None if preemption is None else Preemptor(preemption, policy, resources)
        scheduler = Scheduler(resources, nodes, tree, policy, placement=placement, half_life=half_life)
        if gangs is not None and gangs.reserve_after is not None:
            # (serve knows no duration: reservations hold, and never backfill; engine/reserve.py)
            scheduler.reserve_gangs(gangs.reserve_after)
        self.engine = Engine(scheduler, _GuardedStarts(executor, self.deferred), preemptor)
        self._pass: Admitted | None = None  # the pass under way (its outcomes, for ``_commit``)
        #: the ``now`` of the last pass: the engine's state is the quiet point of that
        #: decision until the next pass (``GET /v1/jobs/{id}/explain`` explains it there)
        self.decided_at = 0.0
        #: per queue, the run times of its last finished tasks (``engine.forecast``: what
        #: a task whose job gives no duration is expected to run)
        self.recent = RecentDurations()

    @property
    def scheduler(self) -> Scheduler:
        return self.engine.scheduler

    @property
    def preemptor(self) -> Preemptor | None:
        return self.engine.preemptor

    @property
    def requeued(self) -> dict[str, int]:
        """Tasks re-queued in this process, by why (``live.reports.REQUEUE_REASONS``)."""
        return self.reports.requeued

    @property
    def failures(self) -> dict[int, int]:
        """Task id -> its command's failures in this process."""
        return self.reports.failures

    def expect_adoption(self, adopted: dict[int, tuple[int, int, str, int]]) -> None:
        """At a restart: task id -> (job id, class index, node, attempt) of the tasks the
        executor still runs (``ReportFilter.expect_adoption``)."""
        self.reports.expect_adoption(adopted)

    def run_pass(self, reports: list[ExecutorEvent], inbox: list, now: float) -> tuple[list[Launch], float]:
        """One pass (module docstring); returns its launches and the seconds the step took."""
        if self.deferred:
            reports = self.deferred + reports
            self.deferred.clear()
        wall = self.wall_clock()
        sch = self.scheduler
        admitted, later = self.reports.admit(reports, sch)
        self.deferred.extend(later)
        if admitted.outcomes:
            # adopted tasks whose node was lost before their job arrived: pending in the
            # store before the arrival reads the job's pending rows
            self.store.finish_tasks(admitted.outcomes, wall)
            admitted.outcomes.clear()
        events = admitted.events
        changed = [entry for entry in inbox if entry[0] == "fairness"]
        if changed:
            inbox = [entry for entry in inbox if entry[0] != "fairness"]
        for _kind, (half_life, _done) in changed:
            self.set_half_life(half_life, now, events)
        done = self.admission.events(inbox, now, events) + [signal for _kind, (_h, signal) in changed]
        if self.wake_due(now):
            self._woken_for = self.engine.wake_at()
            events.append(Wake())
        events.sort(key=instant_rank)  # (stable: reports in the order given, then the inbox's)
        # (the job of each running task, read before a lost node's tasks leave the scheduler)
        running = {t.task_id: t.job for t in sch.tasks.values()} \
            if any(isinstance(ev, NodeLost) for ev in events) else {}
        self._pass = admitted
        ran = [(sch.jobs[task.job].job.queue, now - task.started_at) for task in
               (sch.tasks.get(ev.task_id) for ev in events if isinstance(ev, TaskFinished) and ev.ok)
               if task is not None]
        t = time.perf_counter()
        instant = self.engine.step(now, events, lambda launches: self._commit(launches, running, wall))
        elapsed = time.perf_counter() - t
        self.decided_at = now
        for queue, seconds in ran:
            self.recent.add(queue, seconds)
        if self._pass is not None:  # (the step did not decide: nothing was committed)
            self._record_ends(running, wall)
        if admitted.acks:
            crash_point("recorded")
            self.executor.acknowledge(admitted.acks)
        for ev in done:
            ev.set()
        for name in sorted(admitted.jobs | _jobs_named(events)):
            self._check_finished(name, wall)
        if self.rounds is not None and (events or instant.launches):
            self.rounds.append((now, events))
        return instant.launches, elapsed

    def set_half_life(self, half_life: float, now: float, events: list[Event]) -> None:
        """A new half-life of decayed usage from ``now`` on (``live.decay``): the ledger
        ``continued`` with it (or ``seeded``, from half-life 0). To 0, the instantaneous
        sorter is built again as for a queue change (a ``QueueChanged`` that changes
        nothing, appended to ``events``): the history is dropped."""
        sch = self.scheduler
        if half_life == sch.half_life:
            return
        if not half_life:
            sch.half_life = 0.0
            first = next(node.path for node in sch.queues if node.path != ROOT)
            events.append(QueueChanged(QueueChange(first)))
            return
        ledger = getattr(sch.sorter, "decay", None)
        sch.half_life = half_life
        sch.sorter.set_half_life(half_life, seeded(sch, half_life, now) if ledger is None
                                 else continued(ledger, half_life, now))

    def next_wake(self) -> float | None:
        """When a starved queue's wait for preemption ends (``Engine.wake_at``), unless a
        round was already held for that deadline: a queue still starved after it, with
        nothing to preempt, waits for the next event (as in the simulator, one round per
        deadline). With ``preemption.round``, each round that plans moves ``wake_at`` on
        by ``round`` seconds: a round every ``round`` seconds while a queue stays
        starved."""
        wake = self.engine.wake_at()
        return None if wake is None or wake == self._woken_for else wake

    def wake_due(self, now: float) -> bool:
        """``next_wake`` has come."""
        wake = self.next_wake()
        return wake is not None and now >= wake

    # --- the store ----------------------------------------------------------------------------
    def _record_ends(self, running: dict[int, str], wall: float) -> None:
        """The pass's ends and the tasks lost nodes took, to the store (once a pass)."""
        admitted, self._pass = self._pass, None
        sch = self.scheduler
        for applied in self.engine.applied:
            if isinstance(applied.event, NodeLost):
                self.reports.node_lost(applied.event.name, applied.tasks, running, sch, admitted)
                log.warning("node %s lost: %d task(s) re-queued", applied.event.name, len(applied.tasks))
            elif isinstance(applied.event, TaskFinished) and applied.tasks:
                # a gang's task failed: the engine stopped the rest of its gang (killed
                # through the executor, whose reports of them are fenced off: they are
                # pending in the scheduler now); the store says so too
                why = f"stopped with its gang: task {applied.event.task_id} failed"
                admitted.outcomes.extend((task_id, "pending", None, why) for task_id in applied.tasks)
        if admitted.outcomes:
            self.store.finish_tasks(admitted.outcomes, wall)

    def _commit(self, launches: list[Launch], running: dict[int, str], wall: float) -> None:
        """Before anything starts: the ends, the preempted attempts, then the launches."""
        self._record_ends(running, wall)
        if launches:
            crash_point("decided")
        preempted = [(task.task_id, f"preempted for job {p.job} on {p.node}")
                     for p in self.engine.last_preempted for task in p.victims]
        if preempted:  # (before the launches: a victim may start again in this round)
            self.store.preempt_tasks(preempted, wall)
            self.preempted_total += len(preempted)
            log.info("preempted %d task(s) for %s", len(preempted),
                     ", ".join(sorted({f"job {p.job}" for p in self.engine.last_preempted})))
        if launches:  # committed before anything runs, with their attempt numbers
            self.store.mark_running([(la.task_id, la.node, la.attempt) for la in launches], wall)
            self.attempts_total += len(launches)
            if self.metrics is not None:
                self._observe_first_starts(launches, wall)

    def _observe_first_starts(self, launches: list[Launch], wall: float) -> None:
        """Each task's admission wait: its job's submission to its first start (attempt 1;
        a re-run after a failure, a lost node or a preemption is not a new admission), on
        the wall clock the store records both with."""
        submitted_at = self.admission.submitted_at
        for la in launches:
            if la.attempt == 1 and la.job in submitted_at:
                # (clamped: the wall clock may step back between the two)
                self.metrics.observe_admission_wait(max(0.0, wall - submitted_at[la.job]))

    def _check_finished(self, name: str, wall: float) -> None:
        rt = self.scheduler.jobs.get(name)
        if rt is not None and rt.finished_at is not None:
            self.store.set_job_finished(int(name), wall)
            if self.metrics is not None:
                self.metrics.job_finished(self._final_state(int(name)))
            self.admission.commands.forget(name)
            self.admission.submitted_at.pop(name, None)
            self.admission.estimates.pop(name, None)
            self.engine.forget(name)  # (the engine's record of it goes too)


    def _final_state(self, job_id: int) -> str:
        """The job's state as ``GET /v1/jobs`` will show it (``store.job_state``, from the
        store's row and task states: a failed task is known only there)."""
        row = self.store.job(job_id)
        state = job_state(row is not None and row.cancelled, self.store.task_counts([job_id]).get(job_id, {}))
        # (a job of no tasks: "pending" by its task states, but it is done, as the API says)
        return state if state in TERMINAL_TASK_STATES else "succeeded"


def _jobs_named(events: list[Event]) -> set[str]:
    """The jobs that arrived or were cancelled in a pass (either may end them at once)."""
    out = set()
    for ev in events:
        if isinstance(ev, JobArrived):
            out.add(ev.job.name)
        elif isinstance(ev, JobCancelled):
            out.add(ev.name)
    return out
