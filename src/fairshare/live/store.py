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
  process; the service decides whether it is adopted or re-queued (docs/live.md).

Task states: ``pending`` -> ``running`` -> ``succeeded`` | ``failed`` (attempts used up) |
``pending`` again (its node died, or it failed with attempts left); ``pending`` or
``running`` -> ``cancelled``. The schema is versioned in ``meta.schema_version``; a
database of another version is refused rather than guessed at.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
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
"""


class StoreError(RuntimeError):
    """The database cannot be used (another schema version, not a database, ...)."""


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

    def _migrate(self) -> None:
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
                if row is not None:
                    got = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                    if got is None or int(got[0]) != SCHEMA_VERSION:
                        raise StoreError(f"{self.path}: schema version {got[0] if got else 'unknown'}, this "
                                         f"fairshare reads version {SCHEMA_VERSION}")
                    return
                others = self._db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
                if others:
                    raise StoreError(f"{self.path}: not a fairshare database (it has other tables)")
                # one script, one transaction: a crash half-way leaves no half-made schema
                self._db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} INSERT INTO meta(key, value) "
                                       f"VALUES('schema_version', '{SCHEMA_VERSION}'); COMMIT;")
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.path}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- transactions -----------------------------------------------------------------------
    def _tx(self):
        return _Transaction(self._db, self._lock)

    # --- jobs -----------------------------------------------------------------------------------
    def add_jobs(self, jobs: Sequence[tuple[str, str, float, str, dict, Sequence[tuple[str, int]]]],
                 now: float) -> list[int]:
        """Insert jobs ``(name, queue, weight, tenant, spec, [(class name, count), ...])`` and
        every task row, all in one transaction; returns the job ids."""
        ids = []
        with self._tx() as db:
            for name, queue, weight, tenant, spec, classes in jobs:
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
                ids.append(job_id)
        return ids

    def job(self, job_id: int) -> JobRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
        return _job(row) if row else None

    def jobs(self, tenant: str | None = None, *, unfinished_only: bool = False) -> list[JobRow]:
        sql, args = "SELECT * FROM jobs", []
        where = []
        if tenant is not None:
            where.append("tenant=?")
            args.append(tenant)
        if unfinished_only:
            where.append("finished_at IS NULL")
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY id", args).fetchall()
        return [_job(r) for r in rows]

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
        with self._lock:
            for job_id, state, n in self._db.execute(sql + " GROUP BY job_id, state", args):
                out.setdefault(job_id, {})[state] = n
        return out

    def tasks(self, job_id: int | None = None, *, state: str | None = None) -> list[TaskRow]:
        sql, args, where = "SELECT * FROM tasks", [], []
        if job_id is not None:
            where.append("job_id=?")
            args.append(job_id)
        if state is not None:
            where.append("state=?")
            args.append(state)
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY id", args).fetchall()
        return [TaskRow(**dict(r)) for r in rows]

    # --- transitions (the scheduling loop) ---------------------------------------------------
    def mark_running(self, starts: Sequence[tuple[int, str]], now: float) -> None:
        """``(task row id, node)``: pending -> running, attempts + 1, one transaction."""
        with self._tx() as db:
            for task_id, node in starts:
                db.execute("UPDATE tasks SET state='running', node=?, attempts=attempts+1, started_at=?, "
                           "finished_at=NULL WHERE id=? AND state='pending'", (node, now, task_id))
                db.execute("INSERT INTO events(time, kind, task_id, node) VALUES(?, 'started', ?, ?)",
                           (now, task_id, node))

    def finish_tasks(self, outcomes: Sequence[tuple[int, str, int | None, str]], now: float) -> None:
        """``(task row id, new state, exit code, message)`` for running tasks, one transaction.
        ``pending`` puts a task back in the queue (keeping its attempt count)."""
        with self._tx() as db:
            for task_id, state, exit_code, message in outcomes:
                if state not in TASK_STATES:
                    raise ValueError(f"unknown task state {state!r}")
                finished = None if state == "pending" else now
                db.execute("UPDATE tasks SET state=?, exit_code=?, message=?, finished_at=? WHERE id=?",
                           (state, exit_code, message, finished, task_id))
                db.execute("INSERT INTO events(time, kind, task_id, detail) VALUES(?, ?, ?, ?)",
                           (now, "requeued" if state == "pending" else state, task_id, message))

    def requeue_running(self, now: float) -> list[int]:
        """Every task left ``running`` by a previous process goes back to ``pending``."""
        with self._tx() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM tasks WHERE state='running' ORDER BY id")]
            db.execute("UPDATE tasks SET state='pending', message='re-queued at restart' WHERE state='running'")
            for task_id in ids:
                db.execute("INSERT INTO events(time, kind, task_id, detail) VALUES(?, 'requeued', ?, "
                           "'running when the previous service stopped')", (now, task_id))
        return ids

    def cancel_job(self, job_id: int, now: float) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET cancelled=1 WHERE id=?", (job_id,))
            db.execute("UPDATE tasks SET state='cancelled', finished_at=? WHERE job_id=? AND state='pending'",
                       (now, job_id))
            db.execute("INSERT INTO events(time, kind, job_id) VALUES(?, 'cancel', ?)", (now, job_id))

    def set_job_finished(self, job_id: int, now: float) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET finished_at=? WHERE id=? AND finished_at IS NULL", (now, job_id))

    # --- queue tree changes (admin) -------------------------------------------------------------
    def add_queue_change(self, change: dict, now: float) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO queue_changes(time, change) VALUES(?, ?)", (now, json.dumps(change, sort_keys=True)))

    def queue_changes(self) -> list[dict]:
        with self._lock:
            return [json.loads(r[0]) for r in self._db.execute("SELECT change FROM queue_changes ORDER BY id")]

    def events(self, limit: int = 1000) -> list[dict]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
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
