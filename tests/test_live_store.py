"""The live service's SQLite store: WAL, schema version, atomic acceptance, restart."""

from __future__ import annotations

import sqlite3

import pytest

from fairshare.live.store import SCHEMA_VERSION, Store, StoreError, job_state

SPEC = {"name": "a", "tasks": [{"demand": {"cpu": 1}, "count": 2, "command": "true"}]}


def test_new_database_is_wal_with_schema_version(tmp_path):
    store = Store(tmp_path / "fs.db")
    assert store.journal_mode == "wal"
    raw = sqlite3.connect(tmp_path / "fs.db")
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_accepted_job_and_its_tasks_survive_reopening(tmp_path):
    store = Store(tmp_path / "fs.db")
    # two classes: 2 + 3 task rows, all pending, in one transaction with the job
    (job_id,) = store.add_jobs([("a", "ads", 1.0, "alice", SPEC, [("map", 2), ("reduce", 3)])], now=10.0)
    store.close()  # no explicit checkpoint: a reader sees the committed WAL
    again = Store(tmp_path / "fs.db")
    row = again.job(job_id)
    assert (row.name, row.queue, row.tenant, row.spec) == ("a", "ads", "alice", SPEC)
    tasks = again.tasks(job_id)
    assert [(t.class_name, t.ordinal, t.state) for t in tasks] == [
        ("map", 0, "pending"), ("map", 1, "pending"),
        ("reduce", 0, "pending"), ("reduce", 1, "pending"), ("reduce", 2, "pending")]


def test_task_transitions_and_restart_requeue(tmp_path):
    store = Store(tmp_path / "fs.db")
    (job_id,) = store.add_jobs([("a", "ads", 1.0, "alice", SPEC, [("main", 3)])], now=0.0)
    t1, t2, t3 = (t.id for t in store.tasks(job_id))
    store.mark_running([(t1, "n1", 1), (t2, "n2", 1)], now=1.0)
    store.finish_tasks([(t1, "succeeded", 0, "")], now=2.0)
    assert store.task_counts([job_id]) == {job_id: {"succeeded": 1, "running": 1, "pending": 1}}
    # a restart: the task left running goes back to pending, the succeeded one stays
    assert Store(tmp_path / "fs.db").requeue_running(now=3.0) == [t2]
    states = {t.id: (t.state, t.attempts) for t in Store(tmp_path / "fs.db").tasks(job_id)}
    assert states == {t1: ("succeeded", 1), t2: ("pending", 1), t3: ("pending", 0)}


def test_cancel_marks_pending_tasks_cancelled(tmp_path):
    store = Store(tmp_path / "fs.db")
    (job_id,) = store.add_jobs([("a", "ads", 1.0, "alice", SPEC, [("main", 3)])], now=0.0)
    t1 = store.tasks(job_id)[0].id
    store.mark_running([(t1, "n1", 1)], now=1.0)
    store.cancel_job(job_id, now=2.0)
    # the running task is left to the service (it interrupts it); the 2 pending ones end now
    assert store.task_counts([job_id]) == {job_id: {"running": 1, "cancelled": 2}}
    assert store.job(job_id).cancelled


def test_failed_transaction_leaves_nothing(tmp_path):
    store = Store(tmp_path / "fs.db")
    (job_id,) = store.add_jobs([("a", "ads", 1.0, "alice", SPEC, [("main", 2)])], now=0.0)
    t1, t2 = (t.id for t in store.tasks(job_id))
    store.mark_running([(t1, "n1", 1), (t2, "n1", 1)], now=1.0)
    with pytest.raises(ValueError):
        store.finish_tasks([(t1, "succeeded", 0, ""), (t2, "bogus", None, "")], now=2.0)
    assert store.task_counts([job_id]) == {job_id: {"running": 2}}  # t1's update rolled back too


@pytest.mark.parametrize("setup, reason", [
    ("CREATE TABLE other(x)", "not a fairshare database"),
    ("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES('schema_version', '99')",
     "schema version 99"),
])
def test_foreign_or_newer_database_is_refused(tmp_path, setup, reason):
    raw = sqlite3.connect(tmp_path / "x.db")
    raw.executescript(setup)
    raw.close()
    with pytest.raises(StoreError, match=reason):
        Store(tmp_path / "x.db")


def test_not_a_database_is_refused(tmp_path):
    (tmp_path / "x.db").write_text("hello, not sqlite" * 100)
    with pytest.raises(StoreError):
        Store(tmp_path / "x.db")


@pytest.mark.parametrize("cancelled, counts, state", [
    (False, {"pending": 3}, "pending"),
    (False, {"pending": 2, "running": 1}, "running"),
    (False, {"pending": 2, "succeeded": 1}, "running"),  # started, not finished
    (False, {"succeeded": 3}, "succeeded"),
    (False, {"succeeded": 2, "failed": 1}, "failed"),  # all final, one failed
    (True, {"pending": 3}, "cancelled"),  # asked to cancel wins
    (True, {"succeeded": 3}, "cancelled"),
    (False, {}, "pending"),  # a job of 0 tasks never started
])
def test_job_state_from_task_states(cancelled, counts, state):
    assert job_state(cancelled, counts) == state


# --- schema 1 -> 2, pending counts, the submission writer ----------------------------------------------


def test_a_version_1_database_is_upgraded_in_place(tmp_path):
    from fairshare.live import store as store_module

    # a version-1 database: the tables of version 2 without idempotency_keys, version '1'
    v1 = store_module._SCHEMA[:store_module._SCHEMA.index("CREATE TABLE IF NOT EXISTS idempotency_keys")]
    raw = sqlite3.connect(tmp_path / "v1.db")
    raw.executescript(v1 + "INSERT INTO meta(key, value) VALUES('schema_version', '1');"
                           "INSERT INTO jobs(name, queue, weight, tenant, spec, submitted_at) "
                           "VALUES('old', 'ads', 1.0, 'alice', '{}', 0.0);"
                           "INSERT INTO tasks(job_id, class_index, class_name, ordinal, state) "
                           "VALUES(1, 0, 'main', 0, 'pending');")
    raw.close()
    store = Store(tmp_path / "v1.db")
    assert store.job(1).name == "old"  # kept
    assert store.pending_tasks("alice") == 1  # counted from the rows
    raw = sqlite3.connect(tmp_path / "v1.db")
    # upgraded to the current version (2: idempotency_keys, 3: the tasks' preemption count)
    assert raw.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert raw.execute("SELECT count(*) FROM idempotency_keys").fetchone()[0] == 0
    assert store.tasks(1)[0].preemptions == 0


def test_pending_counts_follow_every_transition(tmp_path):
    store = Store(tmp_path / "fs.db")
    (a,) = store.add_jobs([("a", "ads", 1.0, "alice", SPEC, [("main", 4)])], now=0.0)
    (b,) = store.add_jobs([("b", "dev", 1.0, "bob", SPEC, [("main", 2)])], now=0.0)
    assert (store.pending_tasks("alice"), store.pending_tasks("bob")) == (4, 2)
    t1, t2, t3, _t4 = (t.id for t in store.tasks(a))
    store.mark_running([(t1, "n1", 1), (t2, "n1", 1), (t3, "n1", 1)], now=1.0)  # 4 - 3 = 1
    assert store.pending_tasks("alice") == 1
    store.finish_tasks([(t1, "succeeded", 0, ""), (t2, "pending", 1, "exit status 1")], now=2.0)  # t2 back: 2
    assert store.pending_tasks("alice") == 2
    store.cancel_job(a, now=3.0)  # the 2 pending ones end; t3 is still running
    assert store.pending_tasks("alice") == 0
    store.close()
    # the counts are the rows': a new store counts the same
    again = Store(tmp_path / "fs.db")
    assert (again.pending_tasks("alice"), again.pending_tasks("bob")) == (0, 2)
    assert again.requeue_running(now=4.0) == [t3]  # a restart: running -> pending
    assert again.pending_tasks("alice") == 1
    assert b


def test_the_writer_commits_concurrent_submissions_and_keeps_the_cap(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from fairshare.live.store import PendingCapExceeded, Submission

    store = Store(tmp_path / "fs.db")
    committed: list[list[int]] = []

    def submit(k):
        # 2 tasks each, cap 10: 5 of the 8 fit, whatever the batches
        future = store.submit(Submission("alice", [(f"j{k}", "ads", 1.0, SPEC, [("main", 2)])], now=0.0,
                                         max_pending=10, on_commit=committed.append))
        try:
            return future.result(timeout=10)
        except PendingCapExceeded as exc:
            return exc

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(submit, range(8)))
    accepted = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, PendingCapExceeded)]
    assert (len(accepted), len(refused)) == (5, 3)
    assert all(not replayed for _ids, replayed in accepted)
    assert sorted(i for ids, _ in accepted for i in ids) == sorted(i for ids in committed for i in ids)
    assert store.pending_tasks("alice") == 10 and len(store.jobs()) == 5
    assert all((r.pending, r.adding, r.cap) == (10, 2, 10) for r in refused)
    store.close()


def test_the_writer_answers_a_repeated_key_with_the_first_ids(tmp_path):
    from fairshare.live.store import IdempotencyConflict, Submission

    store = Store(tmp_path / "fs.db")
    first = store.submit(Submission("alice", [("a", "ads", 1.0, SPEC, [("main", 1)])], 0.0, "k", "fp1")).result()
    again = store.submit(Submission("alice", [("a", "ads", 1.0, SPEC, [("main", 1)])], 0.0, "k", "fp1")).result()
    assert (first[1], again) == (False, (first[0], True))
    with pytest.raises(IdempotencyConflict):
        store.submit(Submission("alice", [("b", "ads", 1.0, SPEC, [("main", 1)])], 0.0, "k", "fp2")).result()
    # another tenant's key of the same name is another key
    other = store.submit(Submission("bob", [("c", "dev", 1.0, SPEC, [("main", 1)])], 0.0, "k", "fp1")).result()
    assert other[1] is False and other[0] != first[0]
    assert store.idempotent_result("alice", "k") == ("fp1", first[0])
    assert len(store.jobs()) == 2
    store.close()


def test_a_task_of_a_cancelled_job_never_goes_back_to_pending(tmp_path):
    store = Store(tmp_path / "fs.db")
    (job_id,) = store.add_jobs([("a", "ads", 1.0, "alice", SPEC, [("main", 2)])], now=0.0)
    t1, _t2 = (t.id for t in store.tasks(job_id))
    store.mark_running([(t1, "n1", 1)], now=1.0)
    store.cancel_job(job_id, now=2.0)
    # the running task fails before the scheduling loop has seen the cancel: the loop
    # asks for it to be re-queued, the store ends it (its job is cancelled)
    store.finish_tasks([(t1, "pending", 1, "exit status 1")], now=3.0)
    assert store.task_counts([job_id]) == {job_id: {"cancelled": 2}}
    assert store.pending_tasks("alice") == 0


def test_a_submission_given_up_before_the_writer_takes_it_is_not_stored(tmp_path):
    from concurrent.futures import Future

    from fairshare.live.store import Submission

    store = Store(tmp_path / "fs.db")
    abandoned: Future = Future()
    abandoned.cancel()  # what asyncio does to the future when the request's task is cancelled
    store.submit(Submission("alice", [("gone", "ads", 1.0, SPEC, [("main", 1)])], 0.0, future=abandoned))
    kept = store.submit(Submission("alice", [("kept", "ads", 1.0, SPEC, [("main", 1)])], 0.0)).result(timeout=10)
    assert [j.name for j in store.jobs()] == ["kept"] and kept[0] == [store.jobs()[0].id]
    assert store.pending_tasks("alice") == 1


# --- schema 4: attempts, fencing, incarnations ---------------------------------------------------------


def test_a_version_3_database_is_upgraded_to_the_current_keeping_its_rows(tmp_path):
    from fairshare.live import store as store_module

    raw = sqlite3.connect(tmp_path / "v3.db")
    raw.executescript(store_module._SCHEMA + store_module._V2_TO_V3 +
                      "INSERT INTO meta(key, value) VALUES('schema_version', '3');"
                      "INSERT INTO jobs(name, queue, weight, tenant, spec, submitted_at) "
                      "VALUES('old', 'ads', 1.0, 'alice', '{}', 0.0);"
                      "INSERT INTO tasks(job_id, class_index, class_name, ordinal, state, attempts) "
                      "VALUES(1, 0, 'main', 0, 'running', 2);"
                      "INSERT INTO events(time, kind, task_id) VALUES(1.0, 'started', 1);")
    raw.close()
    store = Store(tmp_path / "v3.db")
    assert [(t.state, t.attempts) for t in store.tasks(1)] == [("running", 2)]
    assert [(e["kind"], e["attempt"]) for e in store.events()] == [("started", None)]  # old events: no attempt
    assert store.begin_incarnation()[1] == 1
    raw = sqlite3.connect(tmp_path / "v3.db")
    assert raw.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "5" == str(SCHEMA_VERSION)
    assert store.load_decay() is None  # (version 5: the decayed usage table, empty)


def test_incarnations_count_up_per_start_and_the_service_id_stays(tmp_path):
    store = Store(tmp_path / "fs.db")
    sid, first = store.begin_incarnation()
    assert store.begin_incarnation() == (sid, first + 1)
    store.close()
    assert Store(tmp_path / "fs.db").begin_incarnation() == (sid, first + 2)  # durable


def test_an_end_is_recorded_for_its_attempt_only(tmp_path):
    store = Store(tmp_path / "fs.db")
    (a,) = store.add_jobs([("a", "ads", 1.0, "alice", SPEC, [("main", 1)])], now=0.0)
    (t,) = (t.id for t in store.tasks(a))
    assert store.mark_running([(t, "n1", 1)], now=1.0) == {t: 1}
    assert store.finish_tasks([(t, "pending", 1, "exit status 1", 1)], now=2.0) == [t]  # attempt 1 failed
    assert store.mark_running([(t, "n2", 2)], now=3.0) == {t: 2}
    # attempt 1's end reported again (late, or twice): the running attempt 2 is untouched
    assert store.finish_tasks([(t, "succeeded", 0, "", 1)], now=4.0) == []
    assert [(r.state, r.node, r.attempts) for r in store.tasks(a)] == [("running", "n2", 2)]
    assert store.finish_tasks([(t, "succeeded", 0, "", 2)], now=5.0) == [t]
    # recorded once: a repeat of attempt 2's end changes nothing either
    assert store.finish_tasks([(t, "failed", 1, "late", 2)], now=6.0) == []
    assert [(r.state, r.finished_at) for r in store.tasks(a)] == [("succeeded", 5.0)]
    kinds = [(e["kind"], e["attempt"]) for e in store.events() if e["task_id"] == t]
    assert kinds == [("started", 1), ("requeued", 1), ("started", 2), ("stale", 1), ("succeeded", 2), ("stale", 2)]


def test_requeue_running_keeps_the_adopted_tasks(tmp_path):
    store = Store(tmp_path / "fs.db")
    (a,) = store.add_jobs([("a", "ads", 1.0, "alice", SPEC, [("main", 3)])], now=0.0)
    t1, t2, t3 = (t.id for t in store.tasks(a))
    store.mark_running([(t1, "n1", 1), (t2, "n1", 1), (t3, "n2", 1)], now=1.0)
    assert store.requeue_running(2.0, keep={t2}) == [t1, t3]
    assert [r.state for r in store.tasks(a)] == ["pending", "running", "pending"]
    assert store.pending_tasks("alice") == 2
