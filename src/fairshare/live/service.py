"""The live service: the facade the API calls, and the scheduling thread that drives the
engine.

``LiveService`` owns the SQLite store, the inbox and the views; the scheduling thread
runs ``SchedulingLoop.run_pass`` (``live.loop``: executor events, then the inbox, then one
engine decision, launches committed to the store before they start) and refreshes the
views (``live.views``). The scheduling thread is the only one that touches the engine;
API threads validate and commit submissions, put them in the inbox and wake the loop;
they read the engine's state only under ``_lock``.

Restart (``recover``): every task the store says is ``running`` is re-queued, not
adopted: its Ray task was owned by the previous service process, and Ray ends a task
when its owner dies (with a local cluster the whole cluster dies with the service).
Tasks that ``succeeded`` are never run again; the unfinished jobs go through the inbox
again, with their pending tasks, and arrive at the first pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from fairshare.engine.executor import Executor
from fairshare.engine.scheduler import Scheduler
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.config import LiveConfig, QueueEntries, parse_jobs
from fairshare.live.loop import SchedulingLoop
from fairshare.live.queues import apply_queue_changes
from fairshare.live.store import Store, job_state
from fairshare.live.views import HISTORY_EVERY_S, FairShares, History, status_doc
from fairshare.model.cluster import Node
from fairshare.model.errors import FieldError, ScenarioError
from fairshare.policies import make_policy

log = logging.getLogger(__name__)


class LiveError(Exception):
    """A refused request: HTTP ``status`` and every problem with its field path."""

    def __init__(self, status: int, errors: list[FieldError] | FieldError):
        self.status = status
        self.errors = [errors] if isinstance(errors, FieldError) else list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))


class LiveService:
    def __init__(self, config: LiveConfig, store: Store, executor: Executor, *, policy: str = "hdrf",
                 placement: str = "first-fit", max_attempts: int = 3, record_rounds: bool = False,
                 idle_wait_s: float = 0.02, wall_clock: Callable[[], float] = time.time,
                 commands: CommandBook | None = None):
        """``commands``: where the executor looks up what each task runs (the same book
        must be given to the executor; ``fairshare serve`` builds it)."""
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
        self._lock = threading.RLock()  # the engine's state
        self._wake = threading.Condition()
        self._inbox: deque[tuple[str, Any]] = deque()
        self._nodes: tuple[Node, ...] = tuple(executor.nodes())
        # raises PolicyModeError for offline policies
        self.loop = SchedulingLoop(store, executor, commands if commands is not None else CommandBook(),
                                   resources=self.resources, policy=self.policy, placement=placement,
                                   entries=apply_queue_changes(config.queues, store.queue_changes()),
                                   nodes=self._nodes, max_attempts=max_attempts, wall_clock=wall_clock,
                                   record_rounds=record_rounds)
        self.fair = FairShares(self.policy)
        self.history_samples = History()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.loop_error: BaseException | None = None

    @property
    def scheduler(self) -> Scheduler:
        return self.loop.scheduler

    @property
    def _entries(self) -> QueueEntries:
        return self.loop.entries

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

    def now(self) -> float:
        """The scheduler's clock: seconds since this service started."""
        return time.monotonic() - self._t0

    def recover(self) -> None:
        """Reload accepted jobs and task states from the store (module docstring)."""
        wall = self.wall_clock()
        requeued = self.store.requeue_running(wall)
        if requeued:
            log.info("re-queued %d task(s) left running by the previous service", len(requeued))
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
            with self._wake:
                self._inbox.append(("submit", (row.id, row.tenant, submitted)))

    # --- API (any thread) ------------------------------------------------------------------------
    def submit(self, principal: Principal, body: Any) -> list[int]:
        """Validate, check grants, commit; the scheduling loop picks the jobs up."""
        with self._lock:
            nodes = tuple(st.node for st in self.scheduler.pool.states if st.alive)
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
        rows = [(job.name, job.queue, job.weight, principal.name, job.spec,
                 [(c.name, int(c.count or 0)) for c in job.classes]) for job in jobs]
        ids = self.store.add_jobs(rows, self.wall_clock())
        with self._wake:
            for job_id, job in zip(ids, jobs):
                self._inbox.append(("submit", (job_id, principal.name, job)))
            self._wake.notify_all()
        return ids

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
            new_entries = apply_queue_changes(entries, [change], validate=True)
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
            engine = self.loop.engine
            return status_doc(engine.snapshot(), engine.scheduler, self.fair.shares, policy=self.policy_name,
                              wall=self.wall_clock(),
                              decisions_total=self.loop.decisions_before + engine.scheduler.decisions)

    def history(self) -> list[dict]:
        with self._lock:
            return list(self.history_samples.samples)

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
        """One pass (``live.loop``); returns whether anything happened."""
        events = self.executor.poll()
        with self._wake:
            inbox = list(self._inbox)
            self._inbox.clear()
        if not events and not inbox and not self.loop.deferred and not self._views_due():
            return False
        with self._lock:
            now = self.now()
            launches, elapsed = self.loop.run_pass(events, inbox, now)
            for _ in launches:
                self.metrics.observe_decision(elapsed / len(launches))
            self._refresh_views(now)
        return bool(events or inbox or launches)

    # --- derived views ---------------------------------------------------------------------------
    def _views_due(self) -> bool:
        return self.history_samples.due(self.now(), bool(self.scheduler.tasks))

    def _refresh_views(self, now: float) -> None:
        self.fair.refresh(self.scheduler, self._entries, now)
        if now - self.history_samples.at >= HISTORY_EVERY_S:
            self.history_samples.record(self.status(), now)


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
