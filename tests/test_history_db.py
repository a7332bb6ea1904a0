"""serve's store as a history (traces/fairshare_db.py, `fairshare export --db`): a real store
driven through its own API (live/store.py), read back read-only."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from fairshare.cli import main
from fairshare.live.store import Store
from fairshare.traces import TraceError, convert


def spec(name: str, queue: str, classes: list[tuple[str, dict, int]]) -> dict:
    return {"name": name, "queue": queue,
            "tasks": [{"class": c, "demand": d, "count": n, "command": "sleep 1"} for c, d, n in classes]}


@pytest.fixture
def store_path(tmp_path) -> Path:
    """A store with three jobs (times in wall-clock seconds; the arithmetic is in the tests):

    - ``train`` (ads.batch), submitted at 1000: two ``worker`` tasks; task 1 runs
      1010-1070; task 2 starts at 1010, is preempted at 1040, runs again 1050-1150.
    - ``etl`` (search), submitted at 1020: class ``a`` runs 1030-1090 and fails; class ``b``
      starts at 1100 and is still running.
    - ``late`` (search), submitted at 1200, cancelled before it started.
    - a ``queues set`` of weight 3 for ``ads``.
    """
    path = tmp_path / "serve.db"
    store = Store(path)
    (train,) = store.add_jobs([("train", "ads.batch", 1.0, "alice",
                                spec("train", "ads.batch", [("worker", {"cpu": 2, "memory": 4}, 2)]),
                                [("worker", 2)])], now=1000.0)
    (etl,) = store.add_jobs([("etl", "search", 1.0, "bob",
                              spec("etl", "search", [("a", {"cpu": 1}, 1), ("b", {"cpu": 1, "gpu": 1}, 1)]),
                              [("a", 1), ("b", 1)])], now=1020.0)
    (late,) = store.add_jobs([("late", "search", 1.0, "bob", spec("late", "search", [("t", {"cpu": 1}, 1)]),
                               [("t", 1)])], now=1200.0)
    worker1, worker2 = (t.id for t in store.tasks(train))
    a, b = (t.id for t in store.tasks(etl))
    store.mark_running([(worker1, "n1", 1), (worker2, "n1", 1)], now=1010.0)
    store.preempt_tasks([(worker2, "preempted for ads")], now=1040.0)
    store.mark_running([(worker2, "n2", 2)], now=1050.0)
    store.finish_tasks([(worker1, "succeeded", 0, "", 1)], now=1070.0)
    store.mark_running([(a, "n1", 1)], now=1030.0)
    store.finish_tasks([(a, "failed", 1, "exit 1", 1)], now=1090.0)
    store.mark_running([(b, "n2", 1)], now=1100.0)
    store.finish_tasks([(worker2, "succeeded", 0, "", 2)], now=1150.0)
    store.cancel_job(late, now=1210.0)
    store.add_queue_change({"weights": {"ads": 3}}, now=1100.0)
    store.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_jobs_that_ran_with_their_last_attempts(store_path):
    before = digest(store_path)
    result = convert("fairshare-db", [store_path])
    assert digest(store_path) == before  # opened read-only: not a byte changed
    jobs = {j["name"]: j for j in result.scenario["jobs"]}
    assert list(jobs) == ["train", "etl"]
    # time 0 = train's submit (1000); etl at 1020
    assert jobs["train"]["submit"] == 0 and jobs["etl"]["submit"] == 20
    assert jobs["train"]["queue"] == "ads.batch"
    # worker 1: 1070 - 1010 = 60 s; worker 2's last attempt: 1150 - 1050 = 100 s (its preempted
    # first attempt, 1010-1040, is not workload)
    assert jobs["train"]["tasks"] == [{"demand": {"cpu": 2, "memory": 4}, "count": 2, "duration": [60, 100]}]
    # a failed after 1090 - 1030 = 60 s; b still running since 1100: censored at the last time
    # of the history, 1150: 50 s
    assert jobs["etl"]["tasks"] == [
        {"class": "a", "demand": {"cpu": 1}, "count": 1, "duration": 60},
        {"class": "b", "demand": {"cpu": 1, "gpu": 1}, "count": 1, "duration": 50}]
    assert result.stats["tasks never started (skipped)"] == 1  # late
    assert result.stats["runs censored at the history's end"] == 1
    # the stored `queues set` weight
    assert result.scenario["queues"][0] == {"name": "ads", "weight": 3, "children": [{"name": "batch"}]}


def test_a_running_service_is_read_without_being_disturbed(tmp_path):
    path = tmp_path / "live.db"
    store = Store(path)
    (job,) = store.add_jobs([("j", "q", 1.0, "t", spec("j", "q", [("c", {"cpu": 1}, 1)]), [("c", 1)])], now=10.0)
    (task,) = store.tasks(job)
    store.mark_running([(task.id, "n", 1)], now=11.0)
    store.finish_tasks([(task.id, "succeeded", 0, "", 1)], now=16.0)
    try:
        result = convert("fairshare-db", [path])  # the store (WAL mode) still open, as under serve
        assert result.scenario["jobs"][0]["tasks"][0]["duration"] == 5
        store.add_jobs([("k", "q", 1.0, "t", spec("k", "q", [("c", {"cpu": 1}, 1)]), [("c", 1)])], now=20.0)
    finally:
        store.close()


def test_cancelled_tasks_count_only_when_they_were_running(tmp_path):
    path = tmp_path / "cancel.db"
    store = Store(path)
    (job,) = store.add_jobs([("j", "q", 1.0, "t", spec("j", "q", [("c", {"cpu": 1}, 2)]), [("c", 2)])], now=0.0)
    first, second = (t.id for t in store.tasks(job))
    store.mark_running([(first, "n", 1), (second, "n", 1)], now=10.0)
    store.preempt_tasks([(second, "preempted")], now=20.0)  # back to pending, keeps started_at 10
    store.finish_tasks([(first, "cancelled", None, "cancelled by the user", 1)], now=40.0)  # ran 10-40
    store.cancel_job(job, now=50.0)  # the pending second task: cancelled while pending
    store.close()
    result = convert("fairshare-db", [path])
    assert result.scenario["jobs"][0]["tasks"] == [{"demand": {"cpu": 1}, "count": 1, "duration": 30}]
    assert result.stats["tasks never started (skipped)"] == 1


def test_export_with_serve_config(store_path, tmp_path):
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump({
        "resources": ["cpu", "memory", "gpu"],
        "cluster": {"nodes": [{"name": "n", "count": 2, "capacity": {"cpu": 8, "memory": 32, "gpu": 1}}]},
        "queues": [{"name": "ads", "weight": 2, "children": [{"name": "batch"}]}, {"name": "search"}],
        "auth": {"tenants": []}}))
    out = tmp_path / "history.yaml"
    assert main(["export", "--db", str(store_path), "--config", str(config), "-o", str(out), "--quiet"]) == 0
    scenario = yaml.safe_load(out.read_text())
    # serve's cluster and queues as they are; the jobs from the store
    assert scenario["cluster"]["nodes"][0]["count"] == 2
    assert scenario["queues"][0]["weight"] == 2
    assert "auth" not in scenario
    assert [j["name"] for j in scenario["jobs"]] == ["train", "etl"]


def test_not_a_store_is_an_error(tmp_path):
    other = tmp_path / "other.db"
    other.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(TraceError, match="not a fairshare serve database"):
        convert("fairshare-db", [other])
    assert main(["export", "--db", str(other), "-o", str(tmp_path / "x.yaml")]) == 2


def test_the_reader_knows_the_stores_current_schema_version():
    """A new store version must be read (or refused on purpose): the reader's list follows
    live/store.py's SCHEMA_VERSION."""
    from fairshare.live.store import SCHEMA_VERSION
    from fairshare.traces.fairshare_db import READABLE_VERSIONS

    assert str(SCHEMA_VERSION) in READABLE_VERSIONS
