"""Durable state of the live service: jobs, tasks, events and queue changes in SQLite.

Why SQLite in WAL mode: one file, no server, readers never block the one writer (the
scheduling loop), and a committed transaction survives ``kill -9`` of the process
(``synchronous=NORMAL`` in WAL mode loses nothing on a process crash; only a power cut
can lose the last transactions, which ``--db`` on a journaled disk accepts).

The rules that make a restart safe (``LiveService.recover``):

- a job is *accepted* only once its row and all its task rows are committed, in one
  transaction, before the API answers 201: an accepted job is never lost;
- a task's row is marked ``running`` (with its node and attempt count) and committed
  *before* the task is handed to Ray, and ``succeeded`` is committed as soon as its
  completion is seen: a task whose row says ``succeeded`` never runs again;
- a task whose row says ``running`` when the service starts was started by a previous
  process; the service adopts it when a node agent still holds that attempt, else
  re-queues it (docs/live.md);
- an end is recorded for one attempt (``finish_tasks`` with the attempt): the row must
  still be ``running`` that attempt, so a late report of an older attempt never
  overwrites a newer one; each start of the service takes a new *incarnation*
  (``begin_incarnation``), the fencing token the node agents check.

Task states: ``pending`` -> ``running`` -> ``succeeded`` | ``failed`` (attempts used up) |
``pending`` again (its node died, it failed with attempts left, or it was preempted);
``pending`` or ``running`` -> ``cancelled``. A preempted attempt is never finished: the
task goes back to ``pending`` with its ``preemptions`` count up by one and a
``preempted`` event (``preempt_tasks``); its ``attempts`` counts every start, preempted
ones included. The schema is versioned in ``meta.schema_version``; older databases are
upgraded in place (version 2 adds ``idempotency_keys``, version 3 ``tasks.preemptions``,
version 4 ``events.attempt`` and the ``service_id`` and ``incarnation`` meta keys, version
5 ``decayed_usage``), any other version is refused rather than guessed at.

Decayed usage (``fairness: {half_life}``, ``live.decay``) is kept in ``decayed_usage``:
one row per entry of the sorter's ``DecayLedger`` exactly as the ledger holds it (usage
settled at a time, the allocation held since), times on the wall clock, and the ledger's
origin, half-life, resources and the time of the save in ``meta`` (``decay_*`` keys),
all written in one transaction (``save_decay``), so a restart reads one consistent save.

Submissions go through one writer thread (``submit``): it takes every submission
waiting, commits them all in one transaction and only then answers each one, so many
concurrent submissions cost one commit, not one each, and nothing is acknowledged before
it is durable. In the same transaction it checks the tenant's cap on pending tasks (the
store counts pending tasks per tenant as they change) and records the request's
``Idempotency-Key`` with the job ids it created: a retry of a request whose answer was
lost gets the same ids instead of new jobs.
"""

from __future__ import annotations

import json
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SCHEMA_VERSION = 5
#: a batch of the writer stops growing at this many task rows (one transaction's size)
MAX_BATCH_TASKS = 100_000
TASK_STATES = ("pending", "running", "succeeded", "failed", "cancelled")
TERMINAL_TASK_STATES = frozenset({"succeeded", "failed", "cancelled"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    queue TEXT NOT NULL,
    weight REAL NOT NULL,
    tenant TEXT NOT NULL,
    spec TEXT NOT NULL,              -- the submitted job document (JSON), commands included
    submitted_at REAL NOT NULL,      -- wall clock, seconds since the epoch
    cancelled INTEGER NOT NULL DEFAULT 0,
    finished_at REAL
);
CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL REFERENCES jobs(id),
    class_index INTEGER NOT NULL,
    class_name TEXT NOT NULL,
    ordinal INTEGER NOT NULL,        -- 0.. within its class
    state TEXT NOT NULL,
    node TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    started_at REAL,
    finished_at REAL,
    exit_code INTEGER,
    message TEXT
);
CREATE INDEX IF NOT EXISTS tasks_by_job ON tasks(job_id, class_index, state);
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks(state);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    kind TEXT NOT NULL,
    job_id INTEGER,
    task_id INTEGER,
    node TEXT,
    detail TEXT
);
CREATE TABLE IF NOT EXISTS queue_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    change TEXT NOT NULL             -- JSON: {"weights": {...}, "add": [...]}
);
""" + """
CREATE TABLE IF NOT EXISTS idempotency_keys (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,               -- the request's Idempotency-Key header
    fingerprint TEXT NOT NULL,       -- sha256 of the request body (canonical JSON)
    job_ids TEXT NOT NULL,           -- JSON list: the ids the request created
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
"""
#: what upgrades a database of version 1 (every table of 1 is unchanged in 2)
_V1_TO_V2 = _SCHEMA[_SCHEMA.index("CREATE TABLE IF NOT EXISTS idempotency_keys"):]
#: what upgrades a database of version 2 (the tasks' preemption count; old rows: 0)
_V2_TO_V3 = "ALTER TABLE tasks ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;"
#: what upgrades a database of version 3: the attempt an event is about (older events:
#: NULL), and the database's service id and serve incarnation counter (meta keys; a
#: service id is made at the first start, ``begin_incarnation``)
_V3_TO_V4 = ("ALTER TABLE events ADD COLUMN attempt INTEGER; "
             "INSERT OR IGNORE INTO meta(key, value) VALUES('incarnation', '0');")
#: what upgrades a database of version 4: the decayed usage of ``fairness: {half_life}``
#: (``save_decay``; an older database has none: every queue starts with no history)
_V4_TO_V5 = """
CREATE TABLE IF NOT EXISTS decayed_usage (
    name TEXT PRIMARY KEY,           -- the ledger's entry: a job id, or a queue's history
    usage TEXT NOT NULL,             -- JSON list: decayed usage at settled_at (resource-seconds)
    allocation TEXT NOT NULL,        -- JSON list: what it held from settled_at on
    settled_at REAL NOT NULL         -- wall clock, seconds since the epoch
) WITHOUT ROWID;
"""
_UPGRADES = {"1": _V1_TO_V2 + _V2_TO_V3 + _V3_TO_V4 + _V4_TO_V5, "2": _V2_TO_V3 + _V3_TO_V4 + _V4_TO_V5,
             "3": _V3_TO_V4 + _V4_TO_V5, "4": _V4_TO_V5}
#: a new database: the tables of version 2, upgraded (one way to every version's tables)
_SCHEMA_CURRENT = _SCHEMA + _V2_TO_V3 + _V3_TO_V4 + _V4_TO_V5


class StoreError(RuntimeError):
    """The database cannot be used (another schema version, not a database, ...)."""


class PendingCapExceeded(Exception):
    """A submission would take its tenant over ``max_pending`` pending tasks."""

    def __init__(self, tenant: str, pending: int, adding: int, cap: int):
        self.tenant, self.pending, self.adding, self.cap = tenant, pending, adding, cap
        super().__init__(f"tenant {tenant!r} has {pending} pending task(s); {adding} more would exceed its cap "
                         f"of {cap}")


class IdempotencyConflict(Exception):
    """An ``Idempotency-Key`` used before by the same tenant with another request body."""

    def __init__(self, key: str, job_ids: list[int]):
        self.key, self.job_ids = key, job_ids
        super().__init__(f"key {key!r} was used before for another request (job ids {job_ids})")


@dataclass
class Submission:
    """One request's jobs for the writer: ``jobs`` are ``(name, queue, weight, spec,
    [(class name, count), ...])`` of ``tenant``. ``on_commit(ids)`` runs in the writer
    right after the commit, before ``future`` is resolved with ``(ids, replayed)``
    (``replayed``: the key was seen before, nothing was created and ``on_commit`` is not
    called)."""

    tenant: str
    jobs: Sequence[tuple[str, str, float, dict, Sequence[tuple[str, int]]]]
    now: float
    key: str | None = None
    fingerprint: str | None = None
    max_pending: int | None = None
    on_commit: Callable[[list[int]], None] | None = None
    future: Future = field(default_factory=Future)

    @property
    def tasks(self) -> int:
        return sum(count for *_head, classes in self.jobs for _name, count in classes)


@dataclass(frozen=True)
class JobRow:
    id: int
    name: str
    queue: str
    weight: float
    tenant: str
    spec: dict
    submitted_at: float
    cancelled: bool
    finished_at: float | None


@dataclass(frozen=True)
class TaskRow:
    id: int
    job_id: int
    class_index: int
    class_name: str
    ordinal: int
    state: str
    node: str | None
    attempts: int
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    message: str | None
    preemptions: int = 0


class Store:
    """One SQLite connection shared by the service's threads behind a lock (the loop
    writes; API threads read). Every public method is one transaction."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=5000")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot open as an SQLite database: {exc}") from None
        if str(mode).lower() != "wal" and self.path != ":memory:":
            raise StoreError(f"{self.path}: cannot switch the database to WAL mode (got {mode!r})")
        self.journal_mode = str(mode).lower()
        self._lock = threading.RLock()
        self._migrate()
        # pending tasks per tenant, and the tenant of every unfinished job (to update the
        # counts when tasks start, come back or are cancelled); changed only under _lock,
        # after the transaction that made the change committed
        self._pending: dict[str, int] = {}
        self._tenant_of: dict[int, str] = {}
        self._recount()
        # reads go through a connection of the reading thread's own: in WAL mode it reads
        # the last commit without waiting for a write transaction (the writer's batch, the
        # loop's updates) to end; every public method is one transaction, so a read always
        # sees every commit made before it. (":memory:" is one database per connection:
        # there, reads share the writing connection and its lock.)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._queue: queue.SimpleQueue[Submission | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._writer_start = threading.Lock()

    def _migrate(self) -> None:
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
                if row is not None:
                    got = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                    if got is not None and got[0] in _UPGRADES:
                        self._db.executescript(f"BEGIN IMMEDIATE; {_UPGRADES[got[0]]} UPDATE meta SET value="
                                               f"'{SCHEMA_VERSION}' WHERE key='schema_version'; COMMIT;")
                        return
                    if got is None or int(got[0]) != SCHEMA_VERSION:
                        raise StoreError(f"{self.path}: schema version {got[0] if got else 'unknown'}, this "
                                         f"fairshare reads version {SCHEMA_VERSION}")
                    return
                others = self._db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
                if others:
                    raise StoreError(f"{self.path}: not a fairshare database (it has other tables)")
                # one script, one transaction: a crash half-way leaves no half-made schema
                self._db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA_CURRENT} INSERT INTO meta(key, value) "
                                       f"VALUES('schema_version', '{SCHEMA_VERSION}'); COMMIT;")
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.path}: {exc}") from None

    def close(self) -> None:
        """Commit what the writer holds, stop it, close the database."""
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join(timeout=30)
        with self._lock:
            self._db.close()
            for reader in self._readers:
                reader.close()
            self._readers.clear()

    @contextmanager
    def _reading(self):
        """A connection to read from (see ``__init__``)."""
        if self.path == ":memory:":
            with self._lock:
                yield self._db
            return
        reader = getattr(self._local, "db", None)
        if reader is None:
            reader = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            reader.row_factory = sqlite3.Row
            reader.execute("PRAGMA busy_timeout=5000")
            self._local.db = reader
            with self._lock:
                self._readers.append(reader)
        yield reader

    def _recount(self) -> None:
        with self._lock:
            self._tenant_of = dict(self._db.execute("SELECT id, tenant FROM jobs WHERE finished_at IS NULL"))
            self._pending = dict(self._db.execute(
                "SELECT j.tenant, count(*) FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE t.state='pending' "
                "GROUP BY j.tenant"))

    def pending_tasks(self, tenant: str) -> int:
        """Tasks of ``tenant``'s jobs now pending (committed)."""
        with self._lock:
            return self._pending.get(tenant, 0)

    def _committed(self, deltas: dict[str, int], jobs: dict[int, str] | None = None) -> None:
        """A transaction changed these tenants' pending counts (and created ``jobs``)."""
        with self._lock:
            for tenant, n in deltas.items():
                self._pending[tenant] = self._pending.get(tenant, 0) + n
            if jobs:
                self._tenant_of.update(jobs)

    def _tenant(self, db: sqlite3.Connection, job_id: int) -> str:
        tenant = self._tenant_of.get(job_id)
        if tenant is None:  # a finished job's task (not expected): ask the database
            row = db.execute("SELECT tenant FROM jobs WHERE id=?", (job_id,)).fetchone()
            tenant = row[0] if row else ""
        return tenant

    # --- transactions -----------------------------------------------------------------------
    def _tx(self):
        return _Transaction(self._db, self._lock)

    # --- jobs -----------------------------------------------------------------------------------
    def add_jobs(self, jobs: Sequence[tuple[str, str, float, str, dict, Sequence[tuple[str, int]]]],
                 now: float) -> list[int]:
        """Insert jobs ``(name, queue, weight, tenant, spec, [(class name, count), ...])`` and
        every task row, all in one transaction; returns the job ids."""
        deltas: dict[str, int] = {}
        with self._tx() as db:
            ids = [self._insert_job(db, name, queue, weight, tenant, spec, classes, now, deltas)
                   for name, queue, weight, tenant, spec, classes in jobs]
        self._committed(deltas, dict(zip(ids, (j[3] for j in jobs))))
        return ids

    @staticmethod
    def _insert_job(db: sqlite3.Connection, name: str, queue: str, weight: float, tenant: str, spec: dict,
                    classes: Sequence[tuple[str, int]], now: float, deltas: dict[str, int]) -> int:
        cur = db.execute(
            "INSERT INTO jobs(name, queue, weight, tenant, spec, submitted_at) VALUES(?,?,?,?,?,?)",
            (name, queue, weight, tenant, json.dumps(spec, sort_keys=True), now))
        job_id = int(cur.lastrowid)
        rows = [(job_id, k, cname, ordinal, "pending")
                for k, (cname, count) in enumerate(classes) for ordinal in range(count)]
        db.executemany(
            "INSERT INTO tasks(job_id, class_index, class_name, ordinal, state) VALUES(?,?,?,?,?)", rows)
        db.execute("INSERT INTO events(time, kind, job_id, detail) VALUES(?, 'submitted', ?, ?)",
                   (now, job_id, tenant))
        deltas[tenant] = deltas.get(tenant, 0) + len(rows)
        return job_id

    # --- the submission writer ------------------------------------------------------------------
    def submit(self, submission: Submission) -> Future:
        """Hand ``submission`` to the writer thread (module docstring); its ``future``
        gives ``(ids, replayed)`` once committed, or raises ``PendingCapExceeded`` /
        ``IdempotencyConflict`` (nothing of the submission stored)."""
        if self._writer is None:
            with self._writer_start:
                if self._writer is None:
                    self._writer = threading.Thread(target=self._write_loop, name="fairshare-store-writer",
                                                    daemon=True)
                    self._writer.start()
        self._queue.put(submission)
        return submission.future

    def idempotent_result(self, tenant: str, key: str) -> tuple[str, list[int]] | None:
        """``(fingerprint, job ids)`` of the committed request ``tenant`` sent with ``key``."""
        with self._reading() as db:
            row = db.execute("SELECT fingerprint, job_ids FROM idempotency_keys WHERE tenant=? AND key=?",
                             (tenant, key)).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def _write_loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch, tasks, stop = [first], first.tasks, False
            while tasks < MAX_BATCH_TASKS:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
                tasks += item.tasks
            # a submission whose waiter gave up before the writer took it (its future
            # was cancelled) is dropped, not stored: nobody was told it was accepted.
            # From here on its future cannot be cancelled, so it will be answered.
            batch = [item for item in batch if item.future.set_running_or_notify_cancel()]
            try:
                if batch:
                    self._write_batch(batch)
            except BaseException as exc:  # noqa: BLE001 - the writer must outlive any one batch
                log.exception("the submission writer failed on a batch")
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(exc)
            if stop:
                return

    def _write_batch(self, batch: list[Submission]) -> None:
        """One transaction for every submission of ``batch``; each in a savepoint, so a
        refused one leaves the others."""
        results: list[tuple[list[int], bool] | BaseException] = []
        deltas: dict[str, int] = {}
        created: dict[int, str] = {}
        try:
            with self._tx() as db:
                for item in batch:
                    db.execute("SAVEPOINT submission")
                    try:
                        results.append(self._write_one(db, item, deltas, created))
                        db.execute("RELEASE submission")
                    except Exception as exc:  # noqa: BLE001 - this submission's answer, not the batch's
                        db.execute("ROLLBACK TO submission")
                        db.execute("RELEASE submission")
                        results.append(exc)
        except BaseException as exc:  # noqa: BLE001 - the commit failed: nothing of the batch is stored
            log.exception("a batch of %d submission(s) could not be committed", len(batch))
            for item in batch:
                item.future.set_exception(exc)
            return
        self._committed(deltas, created)
        for item, result in zip(batch, results):
            if isinstance(result, BaseException):
                item.future.set_exception(result)
                continue
            ids, replayed = result
            if not replayed and item.on_commit is not None:
                try:
                    item.on_commit(ids)
                except Exception:  # noqa: BLE001 - the jobs are committed; a restart resumes them
                    log.exception("submission of job(s) %s: the commit callback failed", ids)
            item.future.set_result(result)

    def _write_one(self, db: sqlite3.Connection, item: Submission, deltas: dict[str, int],
                   created: dict[int, str]) -> tuple[list[int], bool]:
        if item.key is not None:
            row = db.execute("SELECT fingerprint, job_ids FROM idempotency_keys WHERE tenant=? AND key=?",
                             (item.tenant, item.key)).fetchone()
            if row is not None:
                ids = json.loads(row[1])
                if row[0] != item.fingerprint:
                    raise IdempotencyConflict(item.key, ids)
                return ids, True
        if item.max_pending is not None:
            pending = self._pending.get(item.tenant, 0) + deltas.get(item.tenant, 0)
            if pending + item.tasks > item.max_pending:
                raise PendingCapExceeded(item.tenant, pending, item.tasks, item.max_pending)
        mine: dict[str, int] = {}
        ids = [self._insert_job(db, name, queue, weight, item.tenant, spec, classes, item.now, mine)
               for name, queue, weight, spec, classes in item.jobs]
        if item.key is not None:
            db.execute("INSERT INTO idempotency_keys(tenant, key, fingerprint, job_ids, created_at) "
                       "VALUES(?,?,?,?,?)", (item.tenant, item.key, item.fingerprint, json.dumps(ids), item.now))
        for tenant, n in mine.items():  # only once the submission's savepoint holds
            deltas[tenant] = deltas.get(tenant, 0) + n
        created.update((job_id, item.tenant) for job_id in ids)
        return ids, False

    def job(self, job_id: int) -> JobRow | None:
        with self._reading() as db:
            row = db.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
        return _job(row) if row else None

    def jobs(self, tenant: str | None = None, *, unfinished_only: bool = False, after: int | None = None,
             limit: int | None = None, newest: bool = False) -> list[JobRow]:
        """Jobs by id; ``after``/``limit``: the page of at most ``limit`` jobs with ids above
        ``after`` (a cursor: the last id of the previous page). ``newest``: by id from the
        highest down, ``after`` then the id the page continues below."""
        filters = [("tenant=?", tenant)] if tenant is not None else []
        if unfinished_only:
            filters.append(("finished_at IS NULL", None))
        return [_job(r) for r in self._page("jobs", filters, after, limit, newest=newest)]

    def task_counts(self, job_ids: Iterable[int] | None = None) -> dict[int, dict[str, int]]:
        """job id -> task state -> number of tasks."""
        sql = "SELECT job_id, state, count(*) FROM tasks"
        args: list[Any] = []
        if job_ids is not None:
            ids = list(job_ids)
            if not ids:
                return {}
            sql += f" WHERE job_id IN ({','.join('?' * len(ids))})"
            args = ids
        out: dict[int, dict[str, int]] = {}
        with self._reading() as db:
            for job_id, state, n in db.execute(sql + " GROUP BY job_id, state", args):
                out.setdefault(job_id, {})[state] = n
        return out

    def tasks(self, job_id: int | None = None, *, state: str | None = None, after: int | None = None,
              limit: int | None = None) -> list[TaskRow]:
        """Tasks by id; ``after``/``limit`` page them like :meth:`jobs`."""
        # with a job, its index (tasks_by_job) is the one to use: a job has few tasks, a
        # state may have every task of the system. SQLite's planner, without statistics,
        # would take tasks_by_state for ``state=?`` (one look-up per admitted job scanning
        # every pending task); ``+state`` keeps it from using that index here.
        state_cond = "+state=?" if job_id is not None else "state=?"
        filters = [(cond, value) for cond, value in (("job_id=?", job_id), (state_cond, state)) if value is not None]
        return [TaskRow(**dict(r)) for r in self._page("tasks", filters, after, limit)]

    def _page(self, table: str, filters: list[tuple[str, Any]], after: int | None, limit: int | None, *,
              newest: bool = False) -> list:
        """``SELECT * FROM table`` under ``filters`` (condition, its ``?`` value or None for
        a condition without one), ordered by id (``newest``: descending), from after
        ``after`` in that order, at most ``limit``."""
        where = [cond for cond, _value in filters]
        args: list[Any] = [value for cond, value in filters if "?" in cond]
        if after is not None:
            where.append("id<?" if newest else "id>?")
            args.append(after)
        sql = f"SELECT * FROM {table}" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id" \
            + (" DESC" if newest else "")
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        with self._reading() as db:
            return db.execute(sql, args).fetchall()

    # --- transitions (the scheduling loop) ---------------------------------------------------
    def mark_running(self, starts: Sequence[tuple[int, str, int]], now: float) -> dict[int, int]:
        """``(task row id, node, attempt)``: pending -> running as that attempt (the
        launch's number: ``Launch.attempt``), one transaction. Returns task id -> its
        attempt for each row started."""
        deltas: dict[str, int] = {}
        attempts: dict[int, int] = {}
        with self._tx() as db:
            for task_id, node, attempt in starts:
                started = db.execute("UPDATE tasks SET state='running', node=?, attempts=?, started_at=?, "
                                     "finished_at=NULL WHERE id=? AND state='pending' RETURNING job_id, attempts",
                                     (node, attempt, now, task_id)).fetchone()
                if started is not None:
                    tenant = self._tenant(db, started[0])
                    deltas[tenant] = deltas.get(tenant, 0) - 1
                    attempts[task_id] = int(started[1])
                db.execute("INSERT INTO events(time, kind, task_id, node, attempt) VALUES(?, 'started', ?, ?, ?)",
                           (now, task_id, node, attempts.get(task_id)))
        self._committed(deltas)
        return attempts

    def finish_tasks(self, outcomes: Sequence[tuple], now: float) -> list[int]:
        """``(task row id, new state, exit code, message[, attempt])`` for running tasks, one
        transaction. ``pending`` puts a task back in the queue (keeping its attempt count),
        unless its job is cancelled: then the task is ``cancelled``. With ``attempt``, the
        outcome is recorded only if the row is still ``running`` that attempt (fencing: a
        late end of an older attempt changes nothing; a ``stale`` event records it).
        Returns the task ids whose outcome was recorded."""
        deltas: dict[str, int] = {}
        recorded: list[int] = []
        with self._tx() as db:
            for task_id, state, exit_code, message, *rest in outcomes:
                attempt = rest[0] if rest else None
                if state not in TASK_STATES:
                    raise ValueError(f"unknown task state {state!r}")
                before = db.execute("SELECT t.state, t.job_id, j.cancelled, t.attempts FROM tasks t JOIN jobs j ON "
                                    "j.id = t.job_id WHERE t.id=?", (task_id,)).fetchone()
                if attempt is not None and (before is None or before[0] != "running" or before[3] != attempt):
                    db.execute("INSERT INTO events(time, kind, task_id, detail, attempt) VALUES(?, 'stale', ?, ?, ?)",
                               (now, task_id, f"{state}: {message}"[:500], attempt))
                    continue
                recorded.append(task_id)
                if state == "pending" and before is not None and before[2]:
                    # the job was cancelled (cancel_job ended its pending tasks) before the
                    # loop saw the cancel: a task coming back must not be pending again
                    state = "cancelled"
                if before is not None and (before[0] == "pending") != (state == "pending"):
                    tenant = self._tenant(db, before[1])
                    deltas[tenant] = deltas.get(tenant, 0) + (1 if state == "pending" else -1)
                finished = None if state == "pending" else now
                db.execute("UPDATE tasks SET state=?, exit_code=?, message=?, finished_at=? WHERE id=?",
                           (state, exit_code, message, finished, task_id))
                db.execute("INSERT INTO events(time, kind, task_id, detail, attempt) VALUES(?, ?, ?, ?, ?)",
                           (now, "requeued" if state == "pending" else state, task_id, message, attempt))
        self._committed(deltas)
        return recorded

    def preempt_tasks(self, preempted: Sequence[tuple[int, str]], now: float) -> None:
        """``(task row id, message)``: running tasks stopped by fair-share preemption go
        back to ``pending``, one transaction. The attempt is not finished (no exit code,
        no end time); ``preemptions`` + 1 and a ``preempted`` event record it."""
        deltas: dict[str, int] = {}
        with self._tx() as db:
            for task_id, message in preempted:
                back = db.execute("UPDATE tasks SET state='pending', preemptions=preemptions+1, message=?, "
                                  "exit_code=NULL, finished_at=NULL WHERE id=? AND state='running' "
                                  "RETURNING job_id", (message, task_id)).fetchone()
                if back is not None:
                    tenant = self._tenant(db, back[0])
                    deltas[tenant] = deltas.get(tenant, 0) + 1
                db.execute("INSERT INTO events(time, kind, task_id, detail) VALUES(?, 'preempted', ?, ?)",
                           (now, task_id, message))
        self._committed(deltas)

    def begin_incarnation(self) -> tuple[str, int]:
        """A service starts: ``(service id, incarnation)``. The service id is made once per
        database (it names the node agents); the incarnation is one more than the last
        start's, committed before anything runs (the fencing token, module docstring)."""
        import uuid

        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('service_id', ?)", (uuid.uuid4().hex[:16],))
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('incarnation', '0')")
            db.execute("UPDATE meta SET value=CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key='incarnation'")
            meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('service_id', 'incarnation')"))
        return meta["service_id"], int(meta["incarnation"])

    def requeue_running(self, now: float, keep: Iterable[int] = ()) -> list[int]:
        """Every task left ``running`` by a previous process goes back to ``pending``, but
        those in ``keep`` (adopted: still running on a node agent)."""
        keep = set(keep)
        with self._tx() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM tasks WHERE state='running' ORDER BY id")
                   if r[0] not in keep]
            db.executemany("UPDATE tasks SET state='pending', message='re-queued at restart' WHERE id=?",
                           [(task_id,) for task_id in ids])
            for task_id in ids:
                db.execute("INSERT INTO events(time, kind, task_id, detail) VALUES(?, 'requeued', ?, "
                           "'running when the previous service stopped')", (now, task_id))
        if ids:
            self._recount()
        return ids

    def cancel_job(self, job_id: int, now: float) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET cancelled=1 WHERE id=?", (job_id,))
            dropped = db.execute("UPDATE tasks SET state='cancelled', finished_at=? WHERE job_id=? AND "
                                 "state='pending'", (now, job_id)).rowcount
            db.execute("INSERT INTO events(time, kind, job_id) VALUES(?, 'cancel', ?)", (now, job_id))
            tenant = self._tenant(db, job_id)
        self._committed({tenant: -dropped})

    def set_job_finished(self, job_id: int, now: float) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET finished_at=? WHERE id=? AND finished_at IS NULL", (now, job_id))
        with self._lock:
            self._tenant_of.pop(job_id, None)

    # --- queue tree changes (admin) -------------------------------------------------------------
    def add_queue_change(self, change: dict, now: float) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO queue_changes(time, change) VALUES(?, ?)", (now, json.dumps(change, sort_keys=True)))

    def queue_changes(self) -> list[dict]:
        with self._reading() as db:
            return [json.loads(r[0]) for r in db.execute("SELECT change FROM queue_changes ORDER BY id")]

    # --- decayed usage (``live.decay``) ---------------------------------------------------------
    def save_decay(self, head: dict, upsert: Sequence[tuple[str, Sequence[float], Sequence[float], float]],
                   drop: Iterable[str]) -> None:
        """One save of the decay ledger, one transaction: ``head`` (JSON: half-life, origin,
        resources, saved_at) and the entries ``(name, usage, allocation, settled_at)`` that
        changed since the last save; the ``drop`` entries are gone from the ledger."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('decay', ?)", (json.dumps(head, sort_keys=True),))
            db.executemany("DELETE FROM decayed_usage WHERE name=?", [(name,) for name in drop])
            db.executemany("INSERT OR REPLACE INTO decayed_usage(name, usage, allocation, settled_at) VALUES(?,?,?,?)",
                           [(name, json.dumps(list(u)), json.dumps(list(a)), t) for name, u, a, t in upsert])

    def load_decay(self) -> tuple[dict, dict[str, tuple[list[float], list[float], float]]] | None:
        """The last ``save_decay``: (head, name -> (usage, allocation, settled_at)); None
        when nothing was saved (or it was cleared)."""
        with self._reading() as db:
            head = db.execute("SELECT value FROM meta WHERE key='decay'").fetchone()
            if head is None:
                return None
            rows = db.execute("SELECT name, usage, allocation, settled_at FROM decayed_usage").fetchall()
        return json.loads(head[0]), {r[0]: (json.loads(r[1]), json.loads(r[2]), r[3]) for r in rows}

    def clear_decay(self) -> None:
        """Forget the decayed usage (the service runs with half-life 0: no memory)."""
        with self._tx() as db:
            db.execute("DELETE FROM meta WHERE key='decay'")
            db.execute("DELETE FROM decayed_usage")

    def events(self, limit: int = 1000) -> list[dict]:
        with self._reading() as db:
            rows = db.execute("SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [dict(r) for r in reversed(rows)]


class _Transaction:
    def __init__(self, db: sqlite3.Connection, lock: threading.RLock):
        self.db, self.lock = db, lock

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.lock.release()


def _job(row: sqlite3.Row) -> JobRow:
    return JobRow(id=row["id"], name=row["name"], queue=row["queue"], weight=row["weight"], tenant=row["tenant"],
                  spec=json.loads(row["spec"]), submitted_at=row["submitted_at"], cancelled=bool(row["cancelled"]),
                  finished_at=row["finished_at"])


def job_state(cancelled: bool, counts: dict[str, int]) -> str:
    """A job's state from its tasks' states (contract: ``jobs --format json``).

    cancelled (asked) wins; then every task in a final state: ``failed`` when one failed,
    else ``succeeded``; then ``running`` once any task started or finished; else ``pending``."""
    if cancelled:
        return "cancelled"
    total = sum(counts.values())
    final = sum(counts.get(s, 0) for s in TERMINAL_TASK_STATES)
    if total and final == total:
        return "failed" if counts.get("failed", 0) else "succeeded"
    if counts.get("running", 0) or final:
        return "running"
    return "pending"
