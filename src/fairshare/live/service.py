"""The live service: the pure ``Scheduler``, the SQLite store and an executor, driven by
one scheduling thread.

The scheduling thread is the only one that touches the ``Scheduler``. Each pass:

1. ``executor.poll()``: completions, failures, nodes lost or added, applied in the order
   the executor reports them (``engine.executor.apply``), then persisted;
2. the inbox: jobs accepted by the API (already committed to the store), cancellations,
   queue-tree changes;
3. ``engine.executor.dispatch``: the scheduler decides; the launches are committed to the
   store as ``running`` and only then started on the executor.

This is the simulator's instant (completions and node changes, then arrivals, then one
``schedule``), so the same events in the same grouping give the same decisions
(``tests/test_live_parity.py``). API threads validate and commit submissions, then wake
the loop; they read the scheduler's state only under ``_lock``.

Failures: a task whose command exits non-zero is re-queued until it has failed
``max_attempts`` times, then it is ``failed`` (the scheduler counts it as done, so its
job can finish). A task lost with its node, or failed by Ray itself (the node went away,
the pin could not be honoured) is re-queued without using an attempt.

Restart (``recover``): every task the store says is ``running`` is re-queued, not
adopted: its Ray task was owned by the previous service process, and Ray ends a task
when its owner dies (with a local cluster the whole cluster dies with the service).
Tasks that ``succeeded`` are never run again; jobs resume with their pending tasks.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from fairshare.engine.executor import ExecutorEvent, NodeAdded, NodeLost, TaskFinished, apply, dispatch
from fairshare.engine.scheduler import Launch, Scheduler
from fairshare.live.auth import Principal
from fairshare.live.config import LiveConfig, QueueEntries, SubmittedJob, parse_jobs, request_problems
from fairshare.live.store import IdempotencyConflict, PendingCapExceeded, Store, Submission, job_state
from fairshare.model.cluster import Cluster, Node
from fairshare.model.errors import FieldError, ScenarioError
from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.scenario import Scenario
from fairshare.policies import make_policy

log = logging.getLogger(__name__)

HISTORY_SAMPLES = 1200  # at one sample per 0.5 s: the last 10 minutes
HISTORY_EVERY_S = 0.5
FAIR_SHARE_EVERY_S = 0.5


class LiveError(Exception):
    """A refused request: HTTP ``status``, every problem with its field path, and any
    response ``headers`` (``Retry-After`` of a 429)."""

    def __init__(self, status: int, errors: list[FieldError] | FieldError, headers: dict[str, str] | None = None):
        self.status = status
        self.errors = [errors] if isinstance(errors, FieldError) else list(errors)
        self.headers = headers or {}
        super().__init__("; ".join(str(e) for e in self.errors))


#: Retry-After (seconds) of a submission refused for the tenant's pending-task cap: a
#: hint only, the cap frees up as the tenant's tasks start
PENDING_CAP_RETRY_AFTER_S = 10


@dataclass
class _TaskRun:
    row_id: int
    job_id: int
    class_index: int


@dataclass
class _JobInfo:
    job_id: int
    tenant: str
    submitted: SubmittedJob
    pending_rows: list[deque] = field(default_factory=list)  # per class: pending task row ids


class _Collect:
    """The service's side of ``dispatch``: collect the round's launches, so they are
    committed to the store before any of them starts on Ray."""

    def __init__(self) -> None:
        self.launches: list[Launch] = []

    def start(self, launch: Launch, now: float) -> None:
        self.launches.append(launch)


class LiveService:
    def __init__(self, config: LiveConfig, store: Store, executor: Any, *, policy: str = "hdrf",
                 placement: str = "first-fit", max_attempts: int = 3, record_rounds: bool = False,
                 idle_wait_s: float = 0.02, wall_clock: Callable[[], float] = time.time):
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
        self._t0 = time.monotonic()
        self._lock = threading.RLock()  # the scheduler's state, the maps below
        self._wake = threading.Condition()
        self._inbox: deque[tuple[str, Any]] = deque()
        self._deferred: list[ExecutorEvent] = []  # failures of starts, applied next pass
        self._entries: QueueEntries = _apply_changes(config.queues, store.queue_changes())
        self._nodes: tuple[Node, ...] = tuple(executor.nodes())
        self.scheduler = self._new_scheduler(self._nodes)  # raises PolicyModeError for offline policies
        self._jobs: dict[int, _JobInfo] = {}
        self._runs: dict[int, _TaskRun] = {}  # scheduler task id -> run
        self._sched_of_row: dict[int, int] = {}  # task row id -> scheduler task id
        self._failures: dict[int, int] = {}  # task row id -> command failures in this process
        self._decisions_before = 0  # decisions of schedulers replaced by a queue-tree change
        self._fair: dict[str, float] = {}
        self._fair_key: tuple | None = None
        self._fair_at = -math.inf
        self._history: deque[dict] = deque(maxlen=HISTORY_SAMPLES)
        self._history_at = -math.inf
        self.rounds: list[tuple[float, list[ExecutorEvent], list[Job]]] | None = [] if record_rounds else None
        self.launch_log: list[tuple[str, str]] = []  # (job id, node) of every decision, in order
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.loop_error: BaseException | None = None
        if hasattr(executor, "task_spec"):
            executor.task_spec = self._task_spec

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

    def now(self) -> float:
        """The scheduler's clock: seconds since this service started."""
        return time.monotonic() - self._t0

    def recover(self) -> None:
        """Reload accepted jobs and task states from the store (module docstring)."""
        wall = self.wall_clock()
        requeued = self.store.requeue_running(wall)
        if requeued:
            log.info("re-queued %d task(s) left running by the previous service", len(requeued))
        now = self.now()
        jobs = self.store.jobs(unfinished_only=True)
        for row in jobs:
            if row.cancelled:
                self.store.cancel_job(row.id, wall)  # its re-queued tasks become cancelled
                self.store.set_job_finished(row.id, wall)
                continue
            try:
                # against every node known (configured or discovered), up or not: a job
                # accepted before must resume even while the node it needs is down
                known = tuple({n.name: n for n in self.config.nodes + self._nodes}.values())
                (submitted,) = parse_jobs({"jobs": [row.spec]}, self.resources, known, self._entries,
                                          source=f"job {row.id}")
            except ScenarioError as exc:
                log.error("job %d cannot be resumed: %s", row.id, exc)
                pend = [t.id for t in self.store.tasks(row.id, state="pending")]
                self.store.finish_tasks([(t, "failed", None, f"cannot resume: {exc}") for t in pend], wall)
                self.store.set_job_finished(row.id, wall)
                continue
            with self._lock:
                self._admit(row.id, row.tenant, submitted, now)

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

        def arrived(ids: list[int]) -> None:  # in the writer thread, right after the commit
            with self._wake:
                for job_id, job in zip(ids, jobs):
                    self._inbox.append(("submit", (job_id, principal.name, job)))
                self._wake.notify_all()

        return self.store.submit(Submission(principal.name, rows, self.wall_clock(), idempotency_key, fingerprint,
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

    def list_jobs(self, tenant: str | None) -> list[dict]:
        rows = self.store.jobs(tenant)
        counts = self.store.task_counts(r.id for r in rows)
        return [_job_summary(r, counts.get(r.id, {})) for r in rows]

    def get_job(self, job_id: int, tenant: str | None) -> dict:
        row = self.store.job(job_id)
        if row is None or (tenant is not None and row.tenant != tenant):
            raise LiveError(404, FieldError("id", f"no job {job_id}"))
        tasks = self.store.tasks(job_id)
        counts: dict[str, int] = {}
        for t in tasks:
            counts[t.state] = counts.get(t.state, 0) + 1
        out = _job_summary(row, counts)
        out["weight"] = row.weight
        out["spec"] = row.spec
        out["tasks"] = [{"id": t.id, "class": t.class_name, "state": t.state, "node": t.node,
                         "attempts": t.attempts, "started_at": t.started_at, "finished_at": t.finished_at,
                         "exit_code": t.exit_code, "message": t.message} for t in tasks]
        return out

    def update_queues(self, principal: Principal, change: Any) -> dict:
        """Admin: ``{"weights": {path: w}, "add": [{"path", "weight", "order"}]}``."""
        if not principal.admin:
            raise LiveError(403, FieldError("Authorization", "only the admin token may change the queue tree"))
        with self._lock:
            entries = self._entries
        try:
            new_entries = _apply_changes(entries, [change], validate=True)
        except ScenarioError as exc:
            raise LiveError(422, exc.errors) from None
        self.store.add_queue_change(change, self.wall_clock())
        done = threading.Event()
        with self._wake:
            self._inbox.append(("queues", (new_entries, done)))
            self._wake.notify_all()
        done.wait(timeout=10)
        return self.queues()

    def queues(self) -> dict[str, dict]:
        return self.status()["queues"]

    def status(self) -> dict:
        with self._lock:
            sch = self.scheduler
            capacity = sch.pool.total_capacity
            used = [0.0] * len(self.resources)
            node_used: dict[int, list[float]] = {}
            per_job: dict[str, list[float]] = {}
            running_by_job: dict[str, int] = {}
            for task in sch.tasks.values():
                nu = node_used.setdefault(task.node_index, [0.0] * len(self.resources))
                ju = per_job.setdefault(task.job, [0.0] * len(self.resources))
                for r, d in enumerate(task.demand):
                    used[r] += d
                    nu[r] += d
                    ju[r] += d
                running_by_job[task.job] = running_by_job.get(task.job, 0) + 1
            pending_by_job = {name: int(sum(p for p in rt.pending if math.isfinite(p)))
                              for name, rt in sch.jobs.items() if not rt.cancelled and rt.finished_at is None}
            tree = sch.queues
            queues: dict[str, dict] = {}
            queue_alloc: dict[str, list[float]] = {path: [0.0] * len(self.resources) for path in tree.paths}
            queue_run = {path: 0 for path in tree.paths}
            queue_pend = {path: 0 for path in tree.paths}
            for name, rt in sch.jobs.items():
                for path in tree.ancestors(rt.job.queue):
                    if path == ROOT:
                        continue
                    for r, u in enumerate(per_job.get(name, ())):
                        queue_alloc[path][r] += u
                    queue_run[path] += running_by_job.get(name, 0)
                    queue_pend[path] += pending_by_job.get(name, 0)
            fair = dict(self._fair)
            for path in tree.paths:
                queues[path] = {"weight": tree[path].weight,
                                "current_dominant_share": _dominant(queue_alloc[path], capacity),
                                "fair_dominant_share": fair.get(path, 0.0),
                                "running_tasks": queue_run[path], "pending_tasks": queue_pend[path]}
            nodes = []
            for idx, st in enumerate(sch.pool.states):
                nodes.append({"name": st.node.name, "alive": st.alive,
                              "capacity": dict(zip(self.resources, st.node.capacity)),
                              "used": dict(zip(self.resources, node_used.get(idx, [0.0] * len(self.resources))))})
            return {
                "time": self.wall_clock(),
                "policy": self.policy_name,
                "resources": list(self.resources),
                "capacity": dict(zip(self.resources, capacity)),
                "utilization": {r: (u / c if c > 0 else 0.0) for r, u, c in zip(self.resources, used, capacity)},
                "queues": queues,
                "pending_tasks": sum(pending_by_job.values()),
                "running_tasks": len(sch.tasks),
                "decisions_total": self._decisions_before + sch.decisions,
                "nodes": nodes,
            }

    def history(self) -> list[dict]:
        with self._lock:
            return list(self._history)

    # --- the scheduling loop -----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                worked = self.step()
                if not worked:
                    with self._wake:
                        if not self._inbox and not self._stop.is_set():
                            self._wake.wait(self.idle_wait_s)
        except BaseException as exc:  # noqa: BLE001 - recorded for /healthz; the process stays up
            log.exception("the scheduling loop stopped")
            self.loop_error = exc

    def step(self) -> bool:
        """One pass (module docstring); returns whether anything happened."""
        events = self.executor.poll()
        if self._deferred:
            events, self._deferred = self._deferred + events, []
        with self._wake:
            inbox = list(self._inbox)
            self._inbox.clear()
        if not events and not inbox and not self._dirty_views():
            return False
        with self._lock:
            now = self.now()
            wall = self.wall_clock()
            applied = self._apply_events(events, now, wall)
            arrivals = self._apply_inbox(inbox, now)
            collect = _Collect()
            t = time.perf_counter()
            dispatch(self.scheduler, collect, now)
            elapsed = time.perf_counter() - t
            launches = collect.launches
            if self.rounds is not None and (applied or arrivals or launches):
                self.rounds.append((now, applied, arrivals))
            starts = []
            for launch in launches:
                info = self._jobs[int(launch.job)]
                row_id = info.pending_rows[launch.class_index].popleft()
                self._runs[launch.task_id] = _TaskRun(row_id, info.job_id, launch.class_index)
                self._sched_of_row[row_id] = launch.task_id
                starts.append((row_id, launch.node))
                self.launch_log.append((launch.job, launch.node))
            if starts:
                self.store.mark_running(starts, wall)  # committed before anything runs
            for launch, (row_id, _) in zip(launches, starts):
                try:
                    self.executor.start(_with_task_id(launch, row_id), now)
                except Exception as exc:  # noqa: BLE001 - the runtime refused: re-queue, keep scheduling
                    log.warning("task %d could not be started on %s: %r", row_id, launch.node, exc)
                    self._deferred.append(TaskFinished(row_id, ok=False, reason=f"ray: start failed: {exc!r}"))
            for _ in launches:
                self.metrics.observe_decision(elapsed / len(launches))
            self._refresh_views(now)
        return bool(events or inbox or launches)

    def _apply_events(self, events: list[ExecutorEvent], now: float, wall: float) -> list[ExecutorEvent]:
        """Executor events carry task *row* ids; the scheduler's are translated here."""
        applied: list[ExecutorEvent] = []
        outcomes: list[tuple[int, str, int | None, str]] = []
        finished_jobs: set[int] = set()
        for ev in events:
            if isinstance(ev, TaskFinished):
                sched_id = self._sched_of_row.pop(ev.task_id, None)
                if sched_id is None or sched_id not in self.scheduler.tasks:
                    continue  # lost with its node already, or reported twice
                run = self._runs.pop(sched_id)
                info = self._jobs[run.job_id]
                cancelled = self.scheduler.jobs[str(run.job_id)].cancelled
                infrastructure = ev.reason.startswith("ray:") or ev.reason.startswith("node ")
                if ev.ok:
                    mine = TaskFinished(sched_id, True)
                    outcomes.append((run.row_id, "succeeded", 0, ""))
                elif cancelled:
                    mine = TaskFinished(sched_id, False, ev.reason)
                    outcomes.append((run.row_id, "cancelled", None, ev.reason))
                elif infrastructure or self._failures.get(run.row_id, 0) + 1 < self.max_attempts:
                    if not infrastructure:
                        self._failures[run.row_id] = self._failures.get(run.row_id, 0) + 1
                    mine = TaskFinished(sched_id, False, ev.reason)
                    info.pending_rows[run.class_index].appendleft(run.row_id)
                    outcomes.append((run.row_id, "pending", _exit_code(ev.reason), ev.reason))
                else:
                    # attempts used up: the scheduler counts the task as done (so the job
                    # can finish); the store says failed
                    mine = TaskFinished(sched_id, True)
                    outcomes.append((run.row_id, "failed", _exit_code(ev.reason), ev.reason))
                apply(self.scheduler, mine, now)
                applied.append(mine)
                finished_jobs.add(run.job_id)
            elif isinstance(ev, NodeLost):
                lost = apply(self.scheduler, ev, now)
                applied.append(ev)
                for sched_id in lost:
                    run = self._runs.pop(sched_id)
                    self._sched_of_row.pop(run.row_id, None)
                    info = self._jobs[run.job_id]
                    if self.scheduler.jobs[str(run.job_id)].cancelled:
                        outcomes.append((run.row_id, "cancelled", None, f"node {ev.name} lost"))
                    else:
                        info.pending_rows[run.class_index].appendleft(run.row_id)
                        outcomes.append((run.row_id, "pending", None, f"node {ev.name} lost"))
                    finished_jobs.add(run.job_id)
                log.warning("node %s lost: %d task(s) re-queued", ev.name, len(lost))
            elif isinstance(ev, NodeAdded):
                if ev.node.name in self.scheduler.pool.index_of and \
                        self.scheduler.pool.alive(self.scheduler.pool.index_of[ev.node.name]):
                    continue
                apply(self.scheduler, ev, now)
                applied.append(ev)
        if outcomes:
            self.store.finish_tasks(outcomes, wall)
        for job_id in finished_jobs:
            self._check_finished(job_id, wall)
        return applied

    def _apply_inbox(self, inbox: list[tuple[str, Any]], now: float) -> list[Job]:
        arrivals: list[Job] = []
        wall = self.wall_clock()
        for kind, payload in inbox:
            if kind == "submit":
                job_id, tenant, submitted = payload
                arrivals.append(self._admit(job_id, tenant, submitted, now))
            elif kind == "cancel":
                name = str(payload)
                if name in self.scheduler.jobs:
                    info = self._jobs[payload]
                    for dq in info.pending_rows:
                        dq.clear()
                    for sched_id in self.scheduler.cancel(name, now):
                        self.executor.kill(self._runs[sched_id].row_id)
                    self._check_finished(payload, wall)
            elif kind == "queues":
                entries, done = payload
                self._rebuild(entries, now)
                done.set()
        return arrivals

    def _admit(self, job_id: int, tenant: str, submitted: SubmittedJob, now: float) -> Job:
        """Hand a stored job to the scheduler with the tasks still pending in the store."""
        pending = [deque() for _ in submitted.classes]
        for t in self.store.tasks(job_id, state="pending"):
            pending[t.class_index].append(t.id)
        classes = tuple(_with_count(c, len(pending[k])) for k, c in enumerate(submitted.classes))
        job = Job(str(job_id), submitted.queue, submitted.weight, now, classes)
        self._jobs[job_id] = _JobInfo(job_id, tenant, submitted, pending)
        self.scheduler.submit(job, now)
        self._check_finished(job_id, self.wall_clock())
        return job

    def _check_finished(self, job_id: int, wall: float) -> None:
        rt = self.scheduler.jobs.get(str(job_id))
        if rt is not None and rt.finished_at is not None:
            self.store.set_job_finished(job_id, wall)

    def _rebuild(self, entries: QueueEntries, now: float) -> None:
        """A new queue tree: a new scheduler holding the same jobs and running tasks."""
        old = self.scheduler
        self._entries = entries
        alive = tuple(st.node for st in old.pool.states)
        new = self._new_scheduler(alive)
        for st in old.pool.states:
            if not st.alive:
                new.lose_node(st.node.name, now)
        runs_by_job: dict[str, list[tuple[int, _TaskRun]]] = {}
        for sched_id, run in self._runs.items():
            runs_by_job.setdefault(str(run.job_id), []).append((sched_id, run))
        new_runs: dict[int, _TaskRun] = {}
        for name, rt in old.jobs.items():
            if rt.finished_at is not None or rt.cancelled and rt.running == 0:
                continue
            running = [0] * len(rt.job.classes)
            for _, run in runs_by_job.get(name, []):
                running[run.class_index] += 1
            pending = [0 if rt.cancelled else int(p) for p in rt.pending]
            classes = tuple(_with_count(c, pending[k] + running[k]) for k, c in enumerate(rt.job.classes))
            new.submit(Job(name, rt.job.queue, rt.job.weight, rt.job.submit_s, classes), now)
            for old_id, run in sorted(runs_by_job.get(name, [])):
                task = old.tasks[old_id]
                launch = new.adopt(name, run.class_index, old.pool.name(task.node_index), now)
                new_runs[launch.task_id] = run
                self._sched_of_row[run.row_id] = launch.task_id
            if rt.cancelled:
                new.cancel(name, now)
        self._decisions_before += old.decisions
        self._runs = new_runs
        self.scheduler = new
        self._fair_key = None

    def _new_scheduler(self, nodes: tuple[Node, ...]) -> Scheduler:
        return Scheduler(self.resources, nodes, QueueTree.build(self._entries), self.policy,
                         placement=self.placement)

    # --- derived views ---------------------------------------------------------------------------
    def _dirty_views(self) -> bool:
        t = self.now()
        return t - self._history_at >= HISTORY_EVERY_S and bool(self.scheduler.tasks or self._history_at < 0)

    def _refresh_views(self, now: float) -> None:
        sch = self.scheduler
        # the jobs in the system and what each still has to run (pending + running tasks)
        active = tuple(sorted((name, tuple(int(p) + _running_of(sch, name, k) for k, p in enumerate(rt.pending)))
                              for name, rt in sch.jobs.items() if rt.finished_at is None and not rt.cancelled))
        key = (active, sch.pool.total_capacity, self._entries)
        if key != self._fair_key and now - self._fair_at >= FAIR_SHARE_EVERY_S:
            self._fair = self._fair_shares(active)
            self._fair_key = key
            self._fair_at = now
        if now - self._history_at >= HISTORY_EVERY_S:
            self._history_at = now
            st = self.status()
            self._history.append({"time": st["time"], "utilization": st["utilization"],
                                  "queues": {p: q["current_dominant_share"] for p, q in st["queues"].items()}})

    def _fair_shares(self, active: tuple[tuple[str, tuple[int, ...]], ...]) -> dict[str, float]:
        """The policy's static (divisible) allocation of the jobs in the system, each
        capped at the tasks it still has to run: the share each queue is entitled to now,
        by the same policy code that schedules. Recomputed when a job arrives or leaves,
        a task finishes or the capacity or queue tree changes (at most every 0.5 s)."""
        sch = self.scheduler
        if not active:
            return {}
        capacity = sch.pool.total_capacity
        nodes = tuple(st.node for st in sch.pool.states if st.alive)
        jobs = []
        for name, remaining in active:
            job = sch.jobs[name].job
            jobs.append(Job(name, job.queue, job.weight, 0.0,
                            tuple(_with_count(c, n) for c, n in zip(job.classes, remaining))))
        scenario = Scenario(self.resources, Cluster(capacity, nodes, False, self.resources), sch.queues,
                            tuple(jobs), "live")
        try:
            alloc = self.policy.allocate(scenario, respect_counts=True)
        except Exception as exc:  # noqa: BLE001 - a view must not stop scheduling
            log.warning("fair shares not computed: %s", exc)
            return {}
        return {path: qa.dominant_share for path, qa in alloc.queues.items() if path != ROOT}

    def _task_spec(self, launch: Launch):
        from fairshare.live.ray_executor import TaskSpec

        run = self._runs[self._sched_of_row[launch.task_id]]
        info = self._jobs[run.job_id]
        cmd = info.submitted.commands[run.class_index]
        env = (("FAIRSHARE_TENANT", info.tenant), ("FAIRSHARE_JOB_ID", str(run.job_id)),
               ("FAIRSHARE_TASK_ID", str(run.row_id)), ("FAIRSHARE_NODE", launch.node))
        return TaskSpec(cmd.argv, cmd.shell, env, os.getcwd())


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


def _running_of(sch: Scheduler, name: str, class_index: int) -> int:
    rt = sch.jobs[name]
    return rt.started[class_index] - rt.done[class_index]


def _with_task_id(launch: Launch, task_id: int) -> Launch:
    return Launch(task_id, launch.job, launch.task_class, launch.class_index, launch.node, launch.demand)


def _with_count(cls, count: int):
    from dataclasses import replace

    return replace(cls, count=count)


def _exit_code(reason: str) -> int | None:
    if reason.startswith("exit status "):
        try:
            return int(reason.split()[2].rstrip(":"))
        except (IndexError, ValueError):
            return None
    return None


def _dominant(alloc, capacity) -> float:
    return max((a / c for a, c in zip(alloc, capacity) if c > 0), default=0.0)


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


def _apply_changes(entries: QueueEntries, changes: list[Any], *, validate: bool = False) -> QueueEntries:
    """The queue entries after admin changes (``update_queues``); with ``validate`` every
    problem raises ``ScenarioError`` with its field path."""
    errors: list[FieldError] = []
    out = [list(e) for e in entries]
    for change in changes:
        if not isinstance(change, dict):
            errors.append(FieldError("", "must be an object with `weights` and/or `add`"))
            continue
        for key in change:
            if key not in ("weights", "add"):
                errors.append(FieldError(str(key), "unknown key (allowed: add, weights)"))
        add = change.get("add", [])
        if not isinstance(add, list):
            errors.append(FieldError("add", "must be a list of {path, weight, order}"))
            add = []
        for i, q in enumerate(add):
            p = f"add[{i}]"
            if not isinstance(q, dict):
                errors.append(FieldError(p, "must be an object with path, weight, order"))
                continue
            for key in q:
                if key not in ("path", "weight", "order"):
                    errors.append(FieldError(f"{p}.{key}", "unknown key (allowed: order, path, weight)"))
            path = q.get("path")
            paths = {e[0] for e in out}
            if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
                errors.append(FieldError(f"{p}.path", f"must be a dotted queue path, got {path!r}"))
                continue
            if path in paths:
                errors.append(FieldError(f"{p}.path", f"queue {path!r} already exists"))
                continue
            parent = path.rsplit(".", 1)[0] if "." in path else ROOT
            if parent != ROOT and parent not in paths:
                errors.append(FieldError(f"{p}.path", f"parent queue {parent!r} does not exist"))
                continue
            weight = q.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
                    or weight <= 0:
                errors.append(FieldError(f"{p}.weight", f"must be a positive number, got {weight!r}"))
                continue
            order = q.get("order", "fair")
            if order not in ("fair", "fifo"):
                errors.append(FieldError(f"{p}.order", f"must be fair or fifo, got {order!r}"))
                continue
            # after its parent's subtree, so parents stay before children
            at = max((k for k, e in enumerate(out) if e[0] == parent or e[0].startswith(parent + ".")),
                     default=len(out) - 1) + 1 if parent != ROOT else len(out)
            out.insert(at, [path, float(weight), order])
        weights = change.get("weights", {})
        if not isinstance(weights, dict):
            errors.append(FieldError("weights", "must be an object {queue path: weight}"))
            weights = {}
        for path, weight in weights.items():
            p = f"weights.{path}"
            match = [e for e in out if e[0] == path]
            if not match:
                errors.append(FieldError(p, f"unknown queue {path!r}"))
                continue
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
                    or weight <= 0:
                errors.append(FieldError(p, f"must be a positive number, got {weight!r}"))
                continue
            match[0][1] = float(weight)
    if errors and validate:
        raise ScenarioError(errors, "request")
    return tuple((e[0], e[1], e[2]) for e in out)
