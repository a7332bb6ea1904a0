"""The live service's scheduling loop: one pass of the scheduling thread.

A pass is one engine step (``engine.step.Engine``):

1. the executor's events (completions, failures, nodes lost or added), in the order the
   executor reports them, each translated to the scheduler's terms (below) and applied;
   their outcomes are then persisted;
2. the inbox, in arrival order: jobs accepted by the API (already committed to the
   store) become ``JobArrived``, cancellations ``JobCancelled`` (the engine kills the
   job's running tasks through the executor), queue-tree changes rebuild the scheduler;
3. ``Engine.decide``: the scheduler decides once; the launches are committed to the store
   as ``running`` and only then started on the executor.

This is the simulator's instant (completions and node changes, then arrivals, then one
decision), so the same events in the same grouping give the same decisions
(``tests/test_live_parity.py``). Events are applied one at a time (``Engine.apply``)
rather than handed over as a list because each one's translation depends on the state
the previous ones left (a task already re-queued with its lost node is not finished).

Task ids are the store's task row ids: the scheduler asks ``_next_row`` for the id of
each launch, which takes the job's next pending row of that class. An executor event
therefore names its row directly, and the store, the scheduler and the executor agree
on every task's id.

Guarantees and limits: the scheduler's queue tree carries the config's (and the admin's)
bounds, and the scheduler enforces them itself (``engine.bounds``).

Fair-share preemption (the config's ``preemption:`` section): the engine's ``Preemptor``
runs after each decision round. A victim's row goes back to its job's pending rows the
moment it is planned (``_LivePreemptor``: the same round may start it again, and its
task id is its row), the store records the attempt as preempted before the round's
launches are committed as running (``Store.preempt_tasks``: back to pending, never
finished, ``--max-attempts`` untouched), and the engine then kills it through the
executor. The executor still reports the killed attempt's end; that report is fenced
so it cannot end the row's next attempt: by its attempt number when the executor names
it (``TaskFinished.attempt``; ``RayExecutor`` does), else by ``_fenced`` (the next
report of the row is the killed attempt's, as executors report each start exactly once
and in start order).

Attempts: ``Store.mark_running`` numbers each start (the row's ``attempts``); the number
goes to the executor with the start (``CommandBook.attempts``), and an end that names
another attempt than the row's current one is dropped (a late or repeated report). The
ends the pass dealt with are then acknowledged to the executor (``acknowledge``, after
the store's commit): ``RayExecutor``'s node agents keep an end until then.

Adoption at a restart (``expect_adoption``): the tasks the executor still runs are
adopted when their job arrives through the inbox (``Scheduler.adopt``, with their ids
and attempts: not decisions); an end reported before that waits one pass.
Rounds happen at events; a starved queue's wait ending is one too: ``wake_due`` tells
the service when ``Engine.wake_at`` has passed, and the pass then applies a ``Wake``.

Failures: a task whose command exits non-zero, or whose start the executor refuses, is
re-queued until it has failed ``max_attempts`` times, then it is ``failed`` with the
last reason (the scheduler counts it as done, so its job can finish). A task lost with
its node, or failed by Ray itself once running (the node or its agent went away) is
re-queued without using an attempt.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from fairshare.engine.events import (Event, ExecutorEvent, JobArrived, JobCancelled, NodeAdded, NodeLost,
                                     TaskFinished, Wake)
from fairshare.engine.executor import Executor
from fairshare.engine.preemption import Preemption, Preemptor
from fairshare.engine.scheduler import Launch, RunningTask, Scheduler
from fairshare.engine.step import Engine
from fairshare.live.commands import CommandBook
from fairshare.live.config import QueueBounds, QueueEntries, SubmittedJob, build_tree
from fairshare.live.crashpoints import crash_point
from fairshare.live.store import Store
from fairshare.model.cluster import Node
from fairshare.model.jobs import Job
from fairshare.model.scenario import PreemptionConfig
from fairshare.policies import Policy

log = logging.getLogger(__name__)


@dataclass
class _JobInfo:
    job_id: int
    tenant: str
    submitted: SubmittedJob
    pending_rows: list[deque] = field(default_factory=list)  # per class: pending task row ids


#: the reason of a start the executor refused: it uses an attempt (a start refused again
#: and again, e.g. a demand the executor cannot represent, ends as failed after
#: ``max_attempts`` instead of spinning)
START_REFUSED = "start refused by the executor"

#: why a task went back to pending (``SchedulingLoop.requeued``): its node was lost (dead,
#: or not answering: ``live.ray_health``); the runtime lost it (a Ray error, not an
#: attempt); its command failed, or its start was refused, with attempts left. (Preempted
#: attempts are counted apart, ``preempted_total``.)
REQUEUE_REASONS = ("node_lost", "infrastructure", "failed")


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
            self.deferred.append(TaskFinished(launch.task_id, ok=False, reason=f"{START_REFUSED}: {exc!r}"))

    def kill(self, task_id: int) -> None:
        self.inner.kill(task_id)

    def poll(self) -> list[ExecutorEvent]:
        return self.inner.poll()

    def acknowledge(self, ends: list[tuple[int, int]]) -> None:
        acknowledge = getattr(self.inner, "acknowledge", None)
        if acknowledge is not None and ends:
            acknowledge(ends)


class _LivePreemptor(Preemptor):
    """The engine's ``Preemptor``, telling the loop about each victim as soon as it is
    planned: ``Engine.dispatch`` stops every planned victim (``Scheduler.preempt``) and
    may start its job's tasks again in the same round, taking their ids from the loop's
    pending rows, so the victim's row must be back among them by then."""

    def __init__(self, config: PreemptionConfig, policy: Policy, resources: tuple[str, ...],
                 on_victim: Callable[[RunningTask], None]):
        super().__init__(config, policy, resources)
        self.on_victim = on_victim

    def round(self, sch, now: float, *, plan_now: bool = True) -> list[Preemption]:
        planned = super().round(sch, now, plan_now=plan_now)
        for p in planned:
            for task_id in p.victims:
                self.on_victim(sch.tasks[task_id])
        return planned

    def tree_changed(self) -> None:
        """A new scheduler with another queue tree: the fair shares are recomputed at the
        next round (the cache key, ``Scheduler.demand_version``, is the new scheduler's)."""
        self._key = None


class SchedulingLoop:
    """The engine, the jobs it admitted and the store writes of each pass. Only the
    scheduling thread calls it (the service holds its lock around every pass)."""

    def __init__(self, store: Store, executor: Executor, commands: CommandBook, *, resources: tuple[str, ...],
                 policy: Policy, placement: str, entries: QueueEntries, nodes: tuple[Node, ...],
                 max_attempts: int, wall_clock: Callable[[], float], record_rounds: bool = False,
                 bounds: QueueBounds = (), preemption: PreemptionConfig | None = None):
        self.store = store
        self.commands = commands
        self.resources = resources
        self.policy = policy
        self.placement = placement
        self.max_attempts = max_attempts
        self.wall_clock = wall_clock
        self.entries = entries
        self.bounds = bounds
        self.deferred: list[ExecutorEvent] = []  # failures of starts, applied next pass
        self.executor = _GuardedStarts(executor, self.deferred)
        self.jobs: dict[int, _JobInfo] = {}
        self.failures: dict[int, int] = {}  # task row id -> command failures in this process
        self.decisions_before = 0  # decisions of schedulers replaced by a queue-tree change
        #: with ``record_rounds``: every pass that did something, as ``(now, events applied)``
        #: (``engine.step.run_rounds`` replays them)
        self.rounds: list[tuple[float, list[Event]]] | None = [] if record_rounds else None
        #: task row id -> reports still to come from attempts killed by preemption
        self._fenced: dict[int, int] = {}
        self.preempted_total = 0  # attempts stopped by preemption in this process
        self.attempts_total = 0  # task attempts started in this process (``/metrics``)
        #: tasks put back to pending in this process, by why (``REQUEUE_REASONS``; ``/metrics``)
        self.requeued: dict[str, int] = dict.fromkeys(REQUEUE_REASONS, 0)
        self._woken_for: float | None = None  # the ``wake_at`` a Wake was applied for
        #: job id -> task id -> (class index, node, attempt) of running tasks adopted at a
        #: restart, waiting for their job's arrival (``expect_adoption``), and their ids
        self._adopting: dict[int, dict[int, tuple[int, str, int]]] = {}
        self._adopting_ids: set[int] = set()
        # raises PolicyModeError for offline policies (and, with preemption, for policies
        # without a static allocation: no fair shares to preempt for)
        self.preemptor = None if preemption is None else \
            _LivePreemptor(preemption, policy, resources, self._victim_planned)
        self.engine = Engine(self._new_scheduler(nodes), self.executor, self.preemptor)

    @property
    def scheduler(self) -> Scheduler:
        return self.engine.scheduler

    def run_pass(self, events: list[ExecutorEvent], inbox: list, now: float) -> tuple[list[Launch], float]:
        """One pass (module docstring); returns its launches and the seconds the decision took."""
        if self.deferred:
            events = self.deferred + events
            self.deferred.clear()
        wall = self.wall_clock()
        applied = self._apply_events(events, now, wall)
        applied += self._apply_inbox(inbox, now, wall)
        if self.wake_due(now):
            self._woken_for = self.engine.wake_at()
            wake = Wake()
            self.engine.apply(wake, now)
            applied.append(wake)
        t = time.perf_counter()
        launches = self.engine.decide(now, lambda ls: self._commit(ls, wall))
        elapsed = time.perf_counter() - t
        if self.rounds is not None and (applied or launches):
            self.rounds.append((now, applied))
        return launches, elapsed

    def next_wake(self) -> float | None:
        """When a starved queue's wait for preemption ends (``Engine.wake_at``), unless a
        round was already held for that deadline: a queue still starved after it, with
        nothing to preempt, waits for the next event (as in the simulator, one round per
        deadline)."""
        wake = self.engine.wake_at()
        return None if wake is None or wake == self._woken_for else wake

    def wake_due(self, now: float) -> bool:
        """``next_wake`` has come."""
        wake = self.next_wake()
        return wake is not None and now >= wake

    def _victim_planned(self, task: RunningTask) -> None:
        """A task chosen for preemption: its row is pending again (first of its class),
        and the report of the attempt about to be killed is fenced."""
        self.jobs[int(task.job)].pending_rows[task.class_index].appendleft(task.task_id)
        self._fenced[task.task_id] = self._fenced.get(task.task_id, 0) + 1
        self.commands.attempts.pop(task.task_id, None)  # (its end, by attempt, is not the row's)

    def _commit(self, launches: list[Launch], wall: float) -> None:
        if launches:
            crash_point("decided")
        preempted = [(task.task_id, f"preempted for job {p.job} on {p.node}")
                     for p in self.engine.last_preempted for task in p.victims]
        if preempted:  # (before the launches: a victim may start again in this round)
            self.store.preempt_tasks(preempted, wall)
            self.preempted_total += len(preempted)
            log.info("preempted %d task(s) for %s", len(preempted),
                     ", ".join(sorted({f"job {p.job}" for p in self.engine.last_preempted})))
        if launches:  # committed before anything runs; the attempt numbers go with the starts
            self.commands.attempts.update(self.store.mark_running([(la.task_id, la.node) for la in launches], wall))
            self.attempts_total += len(launches)

    def expect_adoption(self, adopted: dict[int, tuple[int, int, str, int]]) -> None:
        """At a restart, before the jobs come through the inbox: task id -> (job id, class
        index, node, attempt) of tasks still running on the executor (adopted, not
        re-queued). Each is adopted when its job arrives; an end reported before that
        waits for it (``_apply_events``)."""
        for task_id, (job_id, class_index, node, attempt) in adopted.items():
            self._adopting.setdefault(job_id, {})[task_id] = (class_index, node, attempt)
            self._adopting_ids.add(task_id)

    def _next_row(self, job: str, class_index: int) -> int:
        """The scheduler's task id source: the job's next pending task row of the class."""
        return self.jobs[int(job)].pending_rows[class_index].popleft()

    # --- events -----------------------------------------------------------------------------------
    def _apply_events(self, events: list[ExecutorEvent], now: float, wall: float) -> list[Event]:
        applied: list[Event] = []
        outcomes: list[tuple[int, str, int | None, str]] = []
        touched: set[int] = set()
        engine = self.engine
        acks: list[tuple[int, int]] = []  # (task id, attempt) of ends dealt with: the executor may forget them
        for ev in events:
            if isinstance(ev, TaskFinished) and ev.task_id in self._adopting_ids:
                self.deferred.append(ev)  # its job has not arrived yet (a restart's first pass)
                continue
            if isinstance(ev, TaskFinished) and ev.attempt is not None:
                acks.append((ev.task_id, ev.attempt))
                if self.commands.attempts.get(ev.task_id) != ev.attempt:
                    # the end of an attempt that is not the row's current one: killed by
                    # preemption (the report its fence waits for) or superseded
                    if self._fenced.get(ev.task_id):
                        self._fenced[ev.task_id] -= 1
                        if not self._fenced[ev.task_id]:
                            del self._fenced[ev.task_id]
                    continue
            elif isinstance(ev, TaskFinished) and self._fenced.get(ev.task_id):
                # the end of an attempt killed by preemption (module docstring), not of
                # the row's current attempt
                self._fenced[ev.task_id] -= 1
                if not self._fenced[ev.task_id]:
                    del self._fenced[ev.task_id]
                continue
            if isinstance(ev, TaskFinished):
                task = self.scheduler.tasks.get(ev.task_id)
                if task is None:
                    continue  # lost with its node already, or reported twice
                row_id, job_id = ev.task_id, int(task.job)
                self.commands.attempts.pop(row_id, None)
                info = self.jobs[job_id]
                cancelled = self.scheduler.jobs[task.job].cancelled
                infrastructure = ev.reason.startswith("ray:") or ev.reason.startswith("node ")
                if ev.ok:
                    mine = TaskFinished(row_id, True)
                    outcomes.append((row_id, "succeeded", 0, ""))
                elif cancelled:
                    mine = TaskFinished(row_id, False, ev.reason)
                    outcomes.append((row_id, "cancelled", None, ev.reason))
                elif infrastructure or self.failures.get(row_id, 0) + 1 < self.max_attempts:
                    if not infrastructure:
                        self.failures[row_id] = self.failures.get(row_id, 0) + 1
                    mine = TaskFinished(row_id, False, ev.reason)
                    info.pending_rows[task.class_index].appendleft(row_id)
                    outcomes.append((row_id, "pending", _exit_code(ev.reason), ev.reason))
                    self.requeued["infrastructure" if infrastructure else "failed"] += 1
                else:
                    # attempts used up: the scheduler counts the task as done (so the job
                    # can finish); the store says failed
                    mine = TaskFinished(row_id, True)
                    outcomes.append((row_id, "failed", _exit_code(ev.reason), ev.reason))
                if ev.attempt is not None:  # (recorded only if the row still runs that attempt)
                    outcomes[-1] = (*outcomes[-1], ev.attempt)
                engine.apply(mine, now)
                applied.append(mine)
                touched.add(job_id)
            elif isinstance(ev, NodeLost):
                # adopted tasks on the node whose job has not arrived yet: pending again in
                # the store now, so the job's arrival (``_admit``) reads them as pending
                for tasks in self._adopting.values():
                    for row_id in [t for t, (_k, node, _a) in tasks.items() if node == ev.name]:
                        del tasks[row_id]
                        self._adopting_ids.discard(row_id)
                        outcomes.append((row_id, "pending", None, f"node {ev.name} lost"))
                # (the tasks' classes, read before the scheduler forgets them)
                running = {t.task_id: (int(t.job), t.class_index) for t in self.scheduler.tasks.values()}
                done = engine.apply(ev, now)
                if done is None:
                    continue
                applied.append(ev)
                for row_id in done.tasks:
                    job_id, class_index = running[row_id]
                    self.commands.attempts.pop(row_id, None)
                    if self.scheduler.jobs[str(job_id)].cancelled:
                        outcomes.append((row_id, "cancelled", None, f"node {ev.name} lost"))
                    else:
                        self.jobs[job_id].pending_rows[class_index].appendleft(row_id)
                        outcomes.append((row_id, "pending", None, f"node {ev.name} lost"))
                        self.requeued["node_lost"] += 1
                    touched.add(job_id)
                log.warning("node %s lost: %d task(s) re-queued", ev.name, len(done.tasks))
            elif isinstance(ev, NodeAdded):
                if engine.apply(ev, now) is not None:
                    applied.append(ev)
        if outcomes:
            self.store.finish_tasks(outcomes, wall)
        if acks:
            crash_point("recorded")
            self.executor.acknowledge(acks)
        for job_id in touched:
            self._check_finished(job_id, wall)
        return applied

    def _apply_inbox(self, inbox: list, now: float, wall: float) -> list[Event]:
        applied: list[Event] = []
        for kind, payload in inbox:
            if kind == "submit":
                job_id, tenant, submitted = payload
                arrival = self._admit(job_id, tenant, submitted, now)
                self.engine.apply(arrival, now)
                applied.append(arrival)
                self._adopt(job_id, now)
                self._check_finished(job_id, wall)
            elif kind == "cancel":
                name = str(payload)
                if name in self.scheduler.jobs:
                    info = self.jobs.get(payload)  # (None: it finished meanwhile)
                    for dq in info.pending_rows if info is not None else ():
                        dq.clear()
                    cancel = JobCancelled(name)
                    self.engine.apply(cancel, now)  # kills the running tasks
                    applied.append(cancel)
                    self._check_finished(payload, wall)
            elif kind == "queues":
                # (entries, done) or (entries, done, bounds): a tree without new bounds
                # keeps the current ones
                entries, done, *bounds = payload
                self._rebuild(entries, now, bounds[0] if bounds else self.bounds)
                done.set()
        return applied

    def _admit(self, job_id: int, tenant: str, submitted: SubmittedJob, now: float) -> JobArrived:
        """A stored job as the scheduler sees it, with the tasks still pending in the store."""
        pending = [deque() for _ in submitted.classes]
        for t in self.store.tasks(job_id, state="pending"):
            pending[t.class_index].append(t.id)
        # tasks adopted at a restart count as the class's tasks too (``_adopt`` starts them)
        adopted = [0] * len(submitted.classes)
        for class_index, _node, _attempt in self._adopting.get(job_id, {}).values():
            adopted[class_index] += 1
        classes = tuple(replace(c, count=len(pending[k]) + adopted[k]) for k, c in enumerate(submitted.classes))
        self.jobs[job_id] = _JobInfo(job_id, tenant, submitted, pending)
        self.commands.register(str(job_id), tenant, submitted.commands)
        return JobArrived(Job(str(job_id), submitted.queue, submitted.weight, now, classes))

    def _adopt(self, job_id: int, now: float) -> None:
        """The job's tasks adopted at a restart (``expect_adoption``) run again in the
        scheduler, on their nodes, with their ids and attempts (not decisions)."""
        for task_id, (class_index, node, attempt) in sorted(self._adopting.pop(job_id, {}).items()):
            self._adopting_ids.discard(task_id)
            self.scheduler.adopt(str(job_id), class_index, node, now, task_id)
            self.commands.attempts[task_id] = attempt

    def _check_finished(self, job_id: int, wall: float) -> None:
        rt = self.scheduler.jobs.get(str(job_id))
        if rt is not None and rt.finished_at is not None:
            self.store.set_job_finished(job_id, wall)
            self.commands.forget(str(job_id))
            self.jobs.pop(job_id, None)  # (a finished job lives on in the store only)
            self.engine.forget(str(job_id))  # (and the engine's record of it goes too)

    # --- queue-tree changes ---------------------------------------------------------------------
    def _rebuild(self, entries: QueueEntries, now: float, bounds: QueueBounds = ()) -> None:
        """A new queue tree: a new scheduler holding the same jobs and running tasks (each
        adopted with its own id, in launch order). The preemptor is kept (its starvation
        timers and time below fair share go on)."""
        old = self.scheduler
        self.entries = entries
        self.bounds = bounds
        new = self._new_scheduler(tuple(st.node for st in old.pool.states))
        for st in old.pool.states:
            if not st.alive:
                new.lose_node(st.node.name, now)
        tasks_by_job: dict[str, list] = {}
        for task in old.tasks.values():  # (in launch order)
            tasks_by_job.setdefault(task.job, []).append(task)
        for name, rt in old.jobs.items():
            if rt.finished_at is not None or rt.cancelled and rt.running == 0:
                continue
            pending = [0 if rt.cancelled else int(p) for p in rt.pending]
            classes = tuple(replace(c, count=pending[k] + rt.running_per_class[k])
                            for k, c in enumerate(rt.job.classes))
            new.submit(Job(name, rt.job.queue, rt.job.weight, rt.job.submit_s, classes), now)
            for task in tasks_by_job.get(name, ()):
                new.adopt(name, task.class_index, old.pool.name(task.node_index), now, task.task_id)
            if rt.cancelled:
                new.cancel(name, now)
        self.decisions_before += old.decisions
        if self.preemptor is not None:
            self.preemptor.tree_changed()
        self.engine = Engine(new, self.executor, self.preemptor)
        self.engine.mark_undecided()

    def _new_scheduler(self, nodes: tuple[Node, ...]) -> Scheduler:
        return Scheduler(self.resources, nodes, build_tree(self.entries, self.bounds), self.policy,
                         placement=self.placement, task_ids=self._next_row)


def _exit_code(reason: str) -> int | None:
    if reason.startswith("exit status "):
        try:
            return int(reason.split()[2].rstrip(":"))
        except (IndexError, ValueError):
            return None
    return None
