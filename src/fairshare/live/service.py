"""The live service: the facade the API calls, and the scheduling thread that drives the
engine.

``LiveService`` owns the SQLite store, the inbox and the views; the scheduling thread
runs ``SchedulingLoop.run_pass`` (``live.loop``: executor events, then the inbox, then one
engine decision, launches committed to the store before they start) and samples the
history (``live.views``). The scheduling thread is the only one that changes the engine;
API threads validate and commit submissions, put them in the inbox and wake the loop;
they read the engine's state (and refresh the fair-share view) only under ``_lock``.

Restart (``recover``): the service takes a new incarnation from the store (the fencing
token), then asks the executor to adopt the tasks the store says are ``running``: with
``RayExecutor`` the commands run under node agents that outlived the previous process,
so a task whose attempt an agent still holds keeps running (or has its end, reached
while no service was up, reported now) and is not run again; the agents drop any
attempt the store does not name. The running tasks no agent holds (their node died, or
the start never reached it) are re-queued. Tasks that ``succeeded`` are never run
again; the unfinished jobs go through the inbox again, with their pending tasks and
their adopted running ones, and arrive at the first pass. With decayed usage
(``fairness: {half_life}``) the sorter's ledger is read back from the store and continues
on this process's clock (``live.decay``); it is saved after passes, at most every
``live.decay.SAVE_EVERY_S``, and at ``stop``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from fairshare.engine.executor import Executor
from fairshare.engine.explain import Explanation, blocking_kinds, explain
from fairshare.engine.forecast import forecast_start
from fairshare.engine.scheduler import Scheduler
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.config import LiveConfig, QueueEntries, SubmittedJob, build_tree, parse_jobs, request_problems
from fairshare.live.crashpoints import crash_point
from fairshare.live.decay import DecayKeeper, has_memory, half_life_json, queue_usage
from fairshare.live.loop import SchedulingLoop
from fairshare.live.queues import apply_queue_tree_changes, changed_half_life, queue_changes, tree_entries
from fairshare.live.store import IdempotencyConflict, PendingCapExceeded, Store, Submission, TaskRow, job_state
from fairshare.live.task_output import READ_DEFAULT
from fairshare.live.views import HISTORY_EVERY_S, FairShares, History, status_doc
from fairshare.model.cluster import Node
from fairshare.model.errors import FieldError, ScenarioError
from fairshare.policies import make_policy

log = logging.getLogger(__name__)


class LiveError(Exception):
    """A refused request: HTTP ``status``, every problem with its field path, and any
    response ``headers`` (``Retry-After`` of a 429)."""

    def __init__(self, status: int, errors: list[FieldError] | FieldError, headers: dict[str, str] | None = None):
        self.status = status
        self.errors = [errors] if isinstance(errors, FieldError) else list(errors)
        self.headers = headers or {}
        super().__init__("; ".join(str(e) for e in self.errors))


#: tasks per page of ``GET /v1/jobs/{id}`` unless the request asks for another size (a
#: job of 100,000 tasks is not one 14 MB response)
TASKS_PAGE = 1000
#: the largest page a request may ask for (jobs or tasks)
MAX_PAGE = 10_000

#: Retry-After (seconds) of a submission refused for the tenant's pending-task cap: a
#: hint only, the cap frees up as the tenant's tasks start
PENDING_CAP_RETRY_AFTER_S = 10


class LiveService:
    def __init__(self, config: LiveConfig, store: Store, executor: Executor, *, policy: str = "hdrf",
                 placement: str = "first-fit", max_attempts: int = 3, record_rounds: bool = False,
                 idle_wait_s: float = 0.02, wall_clock: Callable[[], float] = time.time,
                 commands: CommandBook | None = None, clock: Callable[[], float] = time.monotonic):
        """``commands``: where the executor looks up what each task runs (the same book
        must be given to the executor; ``fairshare serve`` builds it). ``clock``: the
        monotonic clock of ``now`` (tests move it by hand)."""
        from fairshare.live.metrics import Metrics

        self.config = config
        self.store = store
        self.executor = executor
        self.policy_name = policy
        self.policy = make_policy(policy)
        self.placement = placement
        self.max_attempts = max_attempts
        self.idle_wait_s = idle_wait_s
        self.wall_clock = wall_clock
        self.metrics = Metrics()
        self.resources = config.resources
        self.auth = config.auth
        self.clock = clock
        self._t0 = clock()
        self._wall_at_zero = wall_clock()  # (the wall clock at ``now()`` 0: ``live.decay``'s time base)
        self._lock = threading.RLock()  # the engine's state
        self._wake = threading.Condition()
        self._inbox: deque[tuple[str, Any]] = deque()
        self._nodes: tuple[Node, ...] = tuple(executor.nodes())
        # the config's tree with the admin's changes since (kept in the store)
        stored_changes = store.queue_changes()
        entries, bounds = apply_queue_tree_changes(config.queues, config.bounds, stored_changes)
        # raises PolicyModeError for offline policies (and with preemption, for policies
        # without fair shares)
        self.loop = SchedulingLoop(store, executor, commands if commands is not None else CommandBook(),
                                   resources=self.resources, policy=self.policy, placement=placement,
                                   tree=build_tree(entries, bounds), nodes=self._nodes, max_attempts=max_attempts,
                                   wall_clock=wall_clock, record_rounds=record_rounds,
                                   preemption=config.preemption, metrics=self.metrics, gangs=config.gangs,
                                   half_life=changed_half_life(stored_changes, config.half_life))
        self.decay = DecayKeeper(store, self.resources, self._wall_at_zero)
        self.fair = FairShares(self.policy)
        self.history_samples = History()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.loop_error: BaseException | None = None
        # this start's incarnation, from the store (``recover``): the fencing token, and
        # also how many services have started on this database (``/metrics``)
        self.incarnation = 0
        #: what ``recover`` found: (tasks adopted from the executor, tasks re-queued)
        self.recovered = (0, 0)

    @property
    def scheduler(self) -> Scheduler:
        return self.loop.scheduler

    @property
    def _entries(self) -> QueueEntries:
        """The queue entries of the scheduler's tree now (read without the lock: the loop
        replaces the tree whole, never edits it)."""
        return tree_entries(self.scheduler.queues)[0]

    @property
    def rounds(self):
        """With ``record_rounds``: ``(now, events)`` of every pass that did something."""
        return self.loop.rounds

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self._run, name="fairshare-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:  # (the decayed usage up to the stop)
            self.decay.save(self._ledger(), self.now())

    def _ledger(self):
        """The sorter's decay ledger (None: half-life 0)."""
        return getattr(self.scheduler.sorter, "decay", None)

    def now(self) -> float:
        """The scheduler's clock: seconds since this service started."""
        return self.clock() - self._t0

    def recover(self) -> None:
        """Reload accepted jobs and task states from the store; adopt the tasks still
        running on the executor (module docstring)."""
        wall = self.wall_clock()
        service_id, self.incarnation = self.store.begin_incarnation()
        running = {t.id: t for t in self.store.tasks(state="running")}
        resumable: list[tuple[Any, SubmittedJob]] = []
        ended: list[Any] = []
        for row in self.store.jobs(unfinished_only=True):
            if row.cancelled:
                ended.append((row, None))
                continue
            try:
                # against every node known (configured or discovered), up or not: a job
                # accepted before must resume even while the node it needs is down
                known = tuple({n.name: n for n in self.config.nodes + self._nodes}.values())
                (submitted,) = parse_jobs({"jobs": [row.spec]}, self.resources, known, self._entries,
                                          source=f"job {row.id}")
            except ScenarioError as exc:
                ended.append((row, exc))
                continue
            resumable.append((row, submitted))
        # only the running tasks of jobs that resume may be adopted; the executor drops
        # (kills) every other attempt its agents hold
        resuming = {row.id for row, _ in resumable}
        candidates = {t.id: (t.attempts, t.node) for t in running.values() if t.job_id in resuming}
        adopted = self.executor.recover(service_id, self.incarnation, candidates)
        # a gang runs whole or not at all: one that lost some of its tasks meanwhile (their
        # node died, their agent with them) gives up the others too, and starts again whole
        partial = set()
        for row, submitted in resumable:
            if submitted.gang:
                mine = {t.id for t in running.values() if t.job_id == row.id}
                if mine & adopted and not mine <= adopted:
                    partial |= mine & adopted
        for task_id in sorted(partial):
            self.executor.kill(task_id)
        adopted = adopted - partial
        requeued = self.store.requeue_running(wall, keep=adopted)
        if requeued:
            log.info("re-queued %d task(s) left running by the previous service", len(requeued))
        self.recovered = (len(adopted), len(requeued))
        for row, exc in ended:
            if exc is None:
                self.store.cancel_job(row.id, wall)  # its re-queued tasks become cancelled
            else:
                log.error("job %d cannot be resumed: %s", row.id, exc)
                pend = [t.id for t in self.store.tasks(row.id, state="pending")]
                self.store.finish_tasks([(t, "failed", None, f"cannot resume: {exc}") for t in pend], wall)
            self.store.set_job_finished(row.id, wall)
            self.metrics.job_finished("cancelled" if exc is None else "failed")
        self._restore_decay({str(row.id): row.queue for row, _ in resumable})
        self.loop.expect_adoption({t: (running[t].job_id, running[t].class_index, running[t].node, running[t].attempts)
                                   for t in adopted})
        with self._wake:
            for row, submitted in resumable:
                self._inbox.append(("submit", (row.id, row.tenant, submitted, row.submitted_at)))

    def _restore_decay(self, resumed: dict[str, str]) -> None:
        """The decayed usage the store holds, handed to the sorter (``live.decay``); the
        entries of jobs that do not resume leave it (to their queue's history, with a
        tree policy)."""
        sch, now = self.scheduler, self.now()
        ledger = self.decay.restore(sch.half_life, now)
        if ledger is None:
            return

        def queue_of(name: str) -> str | None:
            row = self.store.job(int(name)) if name.isdigit() else None
            return None if row is None else row.queue

        self.decay.forget_unresumed(sch, ledger, resumed, queue_of, now)
        sch.sorter.set_half_life(sch.half_life, ledger)

    # --- API (any thread) ------------------------------------------------------------------------
    def submit(self, principal: Principal, body: Any, *, idempotency_key: str | None = None) -> list[int]:
        """Validate, check grants and limits, commit; the scheduling loop picks the jobs up.
        Returns the job ids once they are committed (``submit_future``)."""
        future = self.submit_future(principal, body, idempotency_key=idempotency_key)
        try:
            ids, _replayed = future.result()
        except Exception as exc:  # noqa: BLE001 - the store's refusals become HTTP refusals
            raise submission_refusal(exc) from None
        return ids

    def submit_future(self, principal: Principal, body: Any, *, idempotency_key: str | None = None) -> Future:
        """``submit`` without waiting: validation happens now (a refusal raises
        ``LiveError``), the commit in the store's writer thread, which batches concurrent
        submissions into one transaction. The future gives ``(ids, replayed)``; a store
        refusal (``submission_refusal`` turns it into a ``LiveError``) is its exception.

        With ``idempotency_key``, a request this tenant sent before with the same key and
        the same body gets that request's ids again (``replayed``) and creates nothing; the
        same key with another body is refused (422, field ``Idempotency-Key``)."""
        fingerprint = None if idempotency_key is None else body_fingerprint(body)
        try:
            jobs = self._validate(principal, body)
        except LiveError:
            # the writer answers a retry of a committed request (same key, same body) in
            # its transaction; only a retry that no longer validates (a node went down, a
            # queue changed since) needs the look-up here, so the common path has none
            if idempotency_key is not None:
                seen = self.store.idempotent_result(principal.name, idempotency_key)
                if seen is not None:
                    if seen[0] != fingerprint:
                        raise submission_refusal(IdempotencyConflict(idempotency_key, seen[1])) from None
                    done: Future = Future()
                    done.set_result((seen[1], True))
                    return done
            raise
        limits = None if principal.admin else self.auth.limits_of(principal.name)
        rows = [(job.name, job.queue, job.weight, job.spec, [(c.name, int(c.count or 0)) for c in job.classes])
                for job in jobs]
        tasks = sum(count for *_head, classes in rows for _name, count in classes)
        if limits is not None and tasks > limits.max_pending_tasks:
            raise LiveError(422, FieldError("jobs", f"{tasks} tasks in one request, more than tenant "
                                                    f"{principal.name!r} may have pending "
                                                    f"(max_pending_tasks {limits.max_pending_tasks})"))

        crash_point("accepting")
        submitted_at = self.wall_clock()  # (the jobs' submitted_at in the store)

        def arrived(ids: list[int]) -> None:  # in the writer thread, right after the commit
            crash_point("stored")
            with self._wake:
                for job_id, job in zip(ids, jobs):
                    self._inbox.append(("submit", (job_id, principal.name, job, submitted_at)))
                self._wake.notify_all()

        return self.store.submit(Submission(principal.name, rows, submitted_at, idempotency_key, fingerprint,
                                            None if limits is None else limits.max_pending_tasks, arrived))

    def _validate(self, principal: Principal, body: Any) -> list[SubmittedJob]:
        """The request's jobs, or ``LiveError`` 422 (limits, loader) / 403 (grants)."""
        problems = request_problems(body)
        if problems:
            raise LiveError(422, problems)
        # read without the lock: the loop may hold it for a whole pass, and a snapshot of
        # the nodes and queues is as good one pass old (they can change before admission
        # anyway; the loop admits what was accepted)
        nodes = tuple(st.node for st in tuple(self.scheduler.pool.states) if st.alive)
        entries = self._entries
        try:
            jobs = parse_jobs(body, self.resources, nodes, entries)
        except ScenarioError as exc:
            raise LiveError(422, exc.errors) from None
        refused = [FieldError(f"jobs[{i}].queue", f"tenant {principal.name!r} may not submit to queue "
                                                   f"{job.queue or '(root)'!r} (granted: "
                                                   f"{', '.join(principal.queues) or 'none'})")
                   for i, job in enumerate(jobs) if not principal.may_use_queue(job.queue)]
        if principal.name in self.auth.run_as:
            # (a Ray program runs as the Ray workers' user: it would escape the tenant's run_as)
            refused += [FieldError(f"jobs[{i}].ray", f"tenant {principal.name!r} runs its commands as "
                                                     f"{self.auth.run_as[principal.name]!r} (run_as): a Ray "
                                                     f"program would run as the Ray workers' user instead")
                        for i, job in enumerate(jobs) if job.program is not None]
        if refused:
            raise LiveError(403, refused)
        return jobs

    def cancel(self, principal: Principal, job_id: int) -> dict:
        row = self.store.job(job_id)
        if row is None or not principal.sees_tenant(row.tenant):
            raise LiveError(404, FieldError("id", f"no job {job_id}"))
        if row.finished_at is None and not row.cancelled:
            self.store.cancel_job(job_id, self.wall_clock())
            with self._wake:
                self._inbox.append(("cancel", job_id))
                self._wake.notify_all()
        return self.get_job(job_id, None if principal.admin else principal.name)

    def list_jobs(self, tenant: str | None, *, after: int | None = None, limit: int | None = None,
                  newest: bool = False) -> list[dict]:
        """The jobs by id (``newest``: from the highest down); a page of at most ``limit``,
        after the id ``after`` in that order, when given."""
        rows = self.store.jobs(tenant, after=after, limit=limit, newest=newest)
        counts = self.store.task_counts(r.id for r in rows)
        return [_job_summary(r, counts.get(r.id, {})) for r in rows]

    def get_job(self, job_id: int, tenant: str | None, *, tasks_after: int | None = None,
                tasks_limit: int = TASKS_PAGE) -> dict:
        """The job with one page of its tasks (at most ``tasks_limit``, ids above
        ``tasks_after``) and ``tasks_next``, the cursor of the next page (None: last page).
        The counts cover every task, whatever the page (one grouped query, not a scan)."""
        row = self.store.job(job_id)
        if row is None or (tenant is not None and row.tenant != tenant):
            raise LiveError(404, FieldError("id", f"no job {job_id}"))
        counts = self.store.task_counts([job_id]).get(job_id, {})
        page = self.store.tasks(job_id, after=tasks_after, limit=tasks_limit + 1)
        more = len(page) > tasks_limit
        page = page[:tasks_limit]
        out = _job_summary(row, counts)
        out["weight"] = row.weight
        out["spec"] = row.spec
        out["tasks"] = [{"id": t.id, "class": t.class_name, "state": t.state, "node": t.node,
                         "attempts": t.attempts, "started_at": t.started_at, "finished_at": t.finished_at,
                         "exit_code": t.exit_code, "message": t.message, "preemptions": t.preemptions}
                        for t in page]
        out["tasks_next"] = page[-1].id if more else None
        out["gang"] = bool(row.spec.get("gang", False)) or "ray" in row.spec
        out["pack"] = row.spec.get("pack")
        out["priority"] = int(row.spec.get("priority", 0))
        placement_group = getattr(self.executor, "placement_group", None)
        out["placement_group"] = placement_group(str(job_id)) if placement_group is not None else None
        return out

    # --- task output (``GET /v1/jobs/{id}/logs``, ``.../tasks/{task}/logs``) ------------------
    def _visible_job(self, principal: Principal, job_id: int):
        row = self.store.job(job_id)
        if row is None or not principal.sees_tenant(row.tenant):
            raise LiveError(404, FieldError("job_id", f"no job {job_id}"))
        return row

    def job_logs(self, principal: Principal, job_id: int) -> dict:
        """The attempts of the job's tasks whose output is kept (``live.task_output``), by
        task id then attempt, with their size, the bytes rotation dropped, and whether the
        attempt has ended."""
        self._visible_job(principal, job_id)
        tasks = {t.id: t for t in self.store.tasks(job_id)}
        kept = self.executor.task_outputs(sorted(tasks))
        return {"job": job_id, "logs": [{"task": task_id, "attempt": attempt, "bytes": size, "dropped": dropped,
                                         "ended": attempt_ended(tasks[task_id], attempt)}
                                        for (task_id, attempt), (size, dropped) in sorted(kept.items())
                                        if task_id in tasks]}

    def task_log(self, principal: Principal, job_id: int, task_id: int, *, attempt: int | None = None,
                 offset: int = 0, limit: int = READ_DEFAULT) -> dict:
        """At most ``limit`` bytes of one attempt's output (default: the task's latest)
        from byte ``offset`` of its whole output, moved up to the first byte kept (the
        bytes before were dropped by rotation). ``ended``: the attempt has ended, so once
        ``next_offset`` reaches its size there is no more."""
        self._visible_job(principal, job_id)
        page = self.store.tasks(job_id, after=task_id - 1, limit=1)
        if not page or page[0].id != task_id:
            raise LiveError(404, FieldError("task_id", f"no task {task_id} in job {job_id}"))
        task = page[0]
        if attempt is None:
            if task.attempts == 0:
                raise LiveError(404, FieldError("attempt", f"task {task_id} has not started yet"))
            attempt = task.attempts
        elif attempt > task.attempts:
            raise LiveError(404, FieldError("attempt", f"task {task_id} has run {task.attempts} attempt(s), "
                                                       f"not {attempt}"))
        ended = attempt_ended(task, attempt)
        chunk = self.executor.read_task_output(task_id, attempt, offset, limit)
        if chunk is None:
            if ended:  # (its node's agent is gone, or output is not kept: nothing to show)
                raise LiveError(404, FieldError("attempt", f"no output kept for attempt {attempt} of task "
                                                           f"{task_id}"))
            # started, its output not there yet (the agent is being called): none so far
            return {"job": job_id, "task": task_id, "attempt": attempt, "offset": offset, "next_offset": offset,
                    "dropped": 0, "data": "", "ended": False}
        return {"job": job_id, "task": task_id, "attempt": attempt, "offset": chunk.offset,
                "next_offset": chunk.offset + len(chunk.data), "dropped": chunk.dropped,
                "data": chunk.data.decode("utf-8", "replace"), "ended": ended}

    # --- why a job waits (``GET /v1/jobs/{id}/explain``) -----------------------------------
    def explain(self, principal: Principal, job_id: int) -> dict:
        """The ``fairshare explain --format json`` document of one of the caller's jobs
        (``engine.explain``), at the quiet point of the last pass: the scheduler is copied
        under the lock and explained off it (the counterfactuals decide again on copies),
        so the loop waits only for the copy. ``estimated_start`` (wall clock) comes from a
        forward simulation of that state (``engine.forecast``), each task lasting its
        job's ``duration`` when the job gives one, else the median of its queue's recent
        finished tasks that ran longer than it has so far. A job the engine does not hold (not yet admitted, or done) has
        its state from the store and no reasons."""
        row = self._visible_job(principal, job_id)
        name = str(job_id)
        with self._lock:
            known = name in self.scheduler.jobs
            if known:
                sch = copy.deepcopy(self.scheduler)
                decided_at = self.loop.decided_at
                estimates = dict(self.loop.admission.estimates)
                recent = copy.deepcopy(self.loop.recent)
            offset = self.wall_clock() - self.now()  # service seconds -> wall clock
        if not known:
            state = _job_summary(row, self.store.task_counts([job_id]).get(job_id, {}))["state"]
            return Explanation(name, state).to_json()

        def expected(job: str, class_index: int, ran: float) -> float | None:
            given = estimates.get(job, ())
            if class_index < len(given) and given[class_index] is not None:
                return given[class_index]
            return recent.expected(sch.jobs[job].job.queue, ran)

        doc = explain(sch, name, decided_at).to_json()
        if doc["state"] not in ("pending", "running"):  # (cancelled, or finished in the last pass)
            doc["state"] = _job_summary(row, self.store.task_counts([job_id]).get(job_id, {}))["state"]
        start = forecast_start(sch, name, decided_at, expected) if doc["reasons"] else None
        doc["estimated_start"] = None if start is None else start + offset
        for reason in doc["reasons"]:  # (the engine's clock is this service's; the API's is the wall's)
            for key in ("submitted", "ahead_submitted"):
                if key in reason:
                    reason[key] += offset
        return doc

    def pending_reasons(self) -> dict[str, int]:
        """How many jobs with tasks waiting each blocker holds (``engine.explain.
        blocking_kind``: an explanation's first reason), read under the lock at the call:
        one fit test per waiting job, no copy, no counterfactual."""
        with self._lock:
            kinds = blocking_kinds(self.scheduler)
        counts: dict[str, int] = {}
        for kind in kinds.values():
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def update_queues(self, principal: Principal, change: Any) -> dict:
        """Admin: ``{"weights": {path: w}, "add": [{"path", "weight", "order", "guarantee",
        "limit"}], "bounds": {path: {"guarantee", "limit"}}}`` (``live.queues``). The
        guarantees must fit in the capacity of the nodes up now."""
        if not principal.admin:
            raise LiveError(403, FieldError("Authorization", "only the admin token may change the queue tree"))
        with self._lock:
            entries, bounds = tree_entries(self.scheduler.queues)
            capacity = self.scheduler.pool.total_capacity
            remembers = has_memory(self.scheduler.sorter)
        try:
            apply_queue_tree_changes(entries, bounds, [change], validate=True, resources=self.resources,
                                     capacity=capacity)
        except ScenarioError as exc:
            raise LiveError(422, exc.errors) from None
        half_life = changed_half_life([change], math.nan)
        if half_life > 0 and not remembers:
            raise LiveError(422, FieldError("fairness.half_life", f"policy {self.policy_name!r} has no decayed "
                                                                  f"usage (docs/policies.md, \"Fairness with "
                                                                  f"memory\"); only 0 applies"))
        if half_life == 0 and not entries:
            raise LiveError(422, FieldError("fairness.half_life", "0 needs a queue to rebuild the sorter on; "
                                                                  "set 0 in the config's fairness: and restart"))
        self.store.add_queue_change(change, self.wall_clock())
        done = threading.Event()
        with self._wake:  # (the scheduler applies them as QueueChanged events at its next pass)
            if not math.isnan(half_life):  # (the pass applies it first: ``SchedulingLoop.set_half_life``)
                self._inbox.append(("fairness", (half_life, done)))
            self._inbox.append(("queues", (queue_changes(change), done)))
            self._wake.notify_all()
        done.wait(timeout=10)
        return self.queues()

    def queues(self) -> dict[str, dict]:
        return self.status()["queues"]

    def status(self) -> dict:
        with self._lock:
            engine = self.loop.engine
            preemptor = self.loop.preemptor
            time_below = None
            if preemptor is not None:
                preemptor.close(self.now())  # (the time since the last round counts too)
                time_below = dict(preemptor.time_below)
            # computed for a reader, not by every pass: the policy's allocation of every
            # job in the system holds the interpreter lock for a while (a quarter of a
            # second at 6,400 jobs), and a service that nobody watches need not pay it
            now = self.now()
            self.fair.refresh(engine.scheduler, now)
            return status_doc(engine.snapshot(), engine.scheduler, self.fair.shares, policy=self.policy_name,
                              wall=self.wall_clock(), decayed=queue_usage(engine.scheduler, now, self.decay.resumed),
                              decisions_total=engine.scheduler.decisions,
                              fair_allocations=self.fair.allocations, time_below=time_below,
                              preemptions_total=None if preemptor is None else self.loop.preempted_total)

    def health(self) -> tuple[int, dict]:
        """``GET /healthz``: (HTTP status, document). ``status`` is ``ok``; ``degraded``
        (200) when a node stopped answering or died; ``unavailable`` (503) when the
        scheduling loop stopped or Ray cannot be reached (its nodes not listed within the
        node timeout). ``ray``: the executor's view of Ray (``NodeProber.health``), when
        the executor has one (None otherwise)."""
        ray_state = self.executor.health()
        if self.loop_error is not None:
            status, detail = "unavailable", f"scheduling loop stopped: {self.loop_error!r}"
        elif ray_state is not None and not ray_state["reachable"]:
            contact = ray_state["last_contact_s"]
            status = "unavailable"
            detail = (f"Ray unreachable: its nodes were last listed "
                      f"{'never' if contact is None else f'{contact:.1f} s ago'}"
                      f"{'' if not ray_state['error'] else ' (' + ray_state['error'] + ')'}")
        elif ray_state is not None and (ray_state["nodes"]["unhealthy"] or ray_state["nodes"]["dead"]):
            status = "degraded"
            detail = "; ".join(f"{state} node(s): " + ", ".join(n["name"] for n in ray_state["node_states"]
                                                               if n["state"] == state)
                               for state in ("unhealthy", "dead") if ray_state["nodes"][state])
        else:
            status, detail = "ok", f"policy {self.policy_name}"
        return (503 if status == "unavailable" else 200), {"status": status, "detail": detail, "ray": ray_state}

    def counters(self) -> dict:
        """Counters of ``/metrics`` beyond the decisions: task attempts started and tasks
        re-queued (by reason) by this process, and starts of a service on this database."""
        with self._lock:
            return {"task_attempts_total": self.loop.attempts_total, "tasks_requeued_total": dict(self.loop.requeued),
                    "service_starts_total": self.incarnation}

    def history(self) -> list[dict]:
        with self._lock:
            return list(self.history_samples.samples)

    # --- the scheduling loop -----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                worked = self.step()
                if not worked:
                    wait_s = self._idle_wait()  # (takes the engine's lock: not inside _wake)
                    with self._wake:
                        if not self._inbox and not self._stop.is_set():
                            self._wake.wait(wait_s)
        except BaseException as exc:  # noqa: BLE001 - recorded for /healthz; the process stays up
            log.exception("the scheduling loop stopped")
            self.loop_error = exc

    def _idle_wait(self) -> float:
        """Seconds to wait for work when a pass found none: ``idle_wait_s`` (the executor
        is polled that often), and no later than a starved queue's preemption deadline
        (``Engine.wake_at``, on this service's clock), which no event announces."""
        with self._lock:
            wake = self.loop.next_wake()
        if wake is None:
            return self.idle_wait_s
        return max(0.0, min(self.idle_wait_s, wake - self.now()))

    def step(self) -> bool:
        """One pass (``live.loop``); returns whether anything happened."""
        events = self.executor.poll()
        with self._wake:
            inbox = list(self._inbox)
            self._inbox.clear()
        with self._lock:
            wake_due = self.loop.wake_due(self.now())
        changes = bool(events or inbox or self.loop.deferred)
        if not changes and not wake_due and not self._views_due():
            return False
        with self._lock:
            now = self.now()
            launches, elapsed = self.loop.run_pass(events, inbox, now)
            for _ in launches:
                self.metrics.observe_decision(elapsed / len(launches))
            if changes:  # (what the fair shares depend on can only change through these)
                self.fair.invalidate()
            self._refresh_views(now)
            if self.decay.due(now):
                self.decay.save(self._ledger(), now)
        return bool(events or inbox or launches)

    # --- derived views ---------------------------------------------------------------------------
    def _views_due(self) -> bool:
        return self.history_samples.due(self.now(), bool(self.scheduler.tasks))

    def _refresh_views(self, now: float) -> None:
        if now - self.history_samples.at >= HISTORY_EVERY_S:
            self.history_samples.record(self.loop.engine, self.wall_clock(), now)


def attempt_ended(task: TaskRow, attempt: int) -> bool:
    """Whether ``attempt`` of ``task`` has ended, by the database: the task's row runs
    another attempt, or none. (The agent writes an attempt's last byte before it reports
    the end, so an attempt recorded as ended has all its output written.)"""
    return not (task.state == "running" and task.attempts == attempt)


def body_fingerprint(body: Any) -> str:
    """What identifies a request body for ``Idempotency-Key``: sha256 of its canonical JSON."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=repr)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def submission_refusal(exc: BaseException) -> BaseException:
    """The ``LiveError`` for a store's refusal of a submission (other errors unchanged)."""
    if isinstance(exc, PendingCapExceeded):
        return LiveError(429, FieldError("jobs", f"tenant {exc.tenant!r} has {exc.pending} pending task(s); "
                                                 f"{exc.adding} more would exceed its cap of {exc.cap} "
                                                 f"(max_pending_tasks); retry when some have started"),
                         headers={"Retry-After": str(PENDING_CAP_RETRY_AFTER_S)})
    if isinstance(exc, IdempotencyConflict):
        return LiveError(422, FieldError("Idempotency-Key", f"was used before with another request body (it "
                                                            f"created job(s) {', '.join(map(str, exc.job_ids))}"
                                                            f"); use a new key for a new request"))
    return exc


def _job_summary(row, counts: dict[str, int]) -> dict:
    total = sum(counts.values())
    done = sum(counts.get(s, 0) for s in ("succeeded", "failed", "cancelled"))
    state = job_state(row.cancelled, counts)
    if total == 0 and row.finished_at is not None and not row.cancelled:
        state = "succeeded"  # a job of zero tasks has nothing left to do
    return {"id": row.id, "name": row.name, "queue": row.queue, "tenant": row.tenant,
            "state": state, "tasks_total": total, "tasks_done": done,
            "tasks_succeeded": counts.get("succeeded", 0), "tasks_running": counts.get("running", 0),
            "tasks_failed": counts.get("failed", 0), "submitted_at": row.submitted_at,
            "finished_at": row.finished_at}
