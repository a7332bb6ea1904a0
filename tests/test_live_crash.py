"""Crash-point test: ``fairshare serve`` killed with a real SIGKILL at each step of a
task's life, restarted on the same database, must lose no accepted job, run no task
twice, run no finished task again and leave nothing running that it does not know about.

The kill points (``live.crashpoints``; ``FAIRSHARE_CRASH_AT=<point>:<n>`` kills serve
at the ``n``-th pass through the point):

=============  ===================================================================
accepting      a submission validated, not yet committed (the request in flight)
stored         committed, the client not yet answered
decided        launches decided, not yet marked running in the database
handed         marked running and handed to Ray (the node agent's ``run`` call sent)
running        the agent said the command started
finished       the agent reported the command's end, serve has not recorded it
recorded       the end recorded, the agent not yet told
=============  ===================================================================

Each point runs the same script: three requests of four one-CPU tasks each (every
request with its own ``Idempotency-Key``) on two local Ray nodes of four CPUs; serve dies
at the point; a new serve starts on the same database (re-attaching to the local Ray
cluster, which outlived the first: ``live.ray_local``) and every request is sent again
with its key (the retry a client makes after a lost answer). Each command appends
``<task id> <attempt> <pid>`` to a file when it starts and then sleeps, so the file says
how many times each task ran and which processes to look for afterwards.

One local Ray cluster serves every point (each point has its own database, so its own
node agents): starting a cluster takes ~10-20 s on two busy cores, re-attaching ~2 s.
The last point ends with a clean stop (SIGTERM) and checks that serve stopped every
process of its cluster.
"""

from __future__ import annotations

import http.client
import json
import signal
import sqlite3
import subprocess
import urllib.error
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml

from live_helpers import ADMIN, ALICE, config_doc, job, serve_env, start_serve_on_a_free_port, wait_for

pytest.importorskip("ray", reason="the live extra (ray) is not installed")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

from fairshare.live.crashpoints import POINTS  # noqa: E402
from fairshare.live.ray_local import alive, load  # noqa: E402

REQUESTS, TASKS_PER_REQUEST = 3, 4
#: which pass through each point kills serve: late enough that some work is done and
#: some is in flight
KILL_AT = {"accepting": 2, "stored": 2, "decided": 2, "handed": 3, "running": 3, "finished": 3, "recorded": 3}
assert tuple(KILL_AT) == POINTS


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A directory with the config; the local Ray cluster that the points share (its
    state file, ``fs.db.ray.json``) is stopped at the end whatever happened."""
    root = tmp_path_factory.mktemp("crash")
    doc = config_doc()
    doc["cluster"]["nodes"] = [{"name": "node-a", "capacity": {"cpu": 4, "memory": 8}},
                               {"name": "node-b", "capacity": {"cpu": 4, "memory": 8}}]
    (root / "cluster.yaml").write_text(yaml.safe_dump(doc))
    yield root
    state = root / "fs.db.ray.json"
    if state.exists():  # (a clean stop removes it; not there when the last point ran)
        load(state).stop()


def start_serve(root: Path, log_name: str, crash_at: str | None = None) -> tuple[subprocess.Popen, int]:
    env = serve_env(FAIRSHARE_CRASH_AT=crash_at) if crash_at else serve_env()
    return start_serve_on_a_free_port(root, log_name, env, timeout_s=180)


def call(port: int, method: str, path: str, token: str, body=None, key: str | None = None):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())



@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_each_point_loses_nothing_and_runs_nothing_twice(workdir, point):
    root = workdir
    for name in ("fs.db", "fs.db-wal", "fs.db-shm"):  # a fresh database (the Ray cluster stays)
        (root / name).unlink(missing_ok=True)
    ran = root / f"ran-{point}.txt"
    command = ["sh", "-c", f'echo "$FAIRSHARE_TASK_ID $FAIRSHARE_ATTEMPT $$" >> {ran}; exec sleep 1.5']
    requests = [({"jobs": [job(f"{point}-{i}", "ads.prod", TASKS_PER_REQUEST, {"cpu": 1}, command)]},
                 str(uuid.uuid4())) for i in range(REQUESTS)]

    server, port = start_serve(root, f"{point}-1.log", f"{point}:{KILL_AT[point]}")
    acknowledged: dict[str, list[int]] = {}
    for body, key in requests:
        try:
            acknowledged[key] = call(port, "POST", "/v1/jobs", ALICE, body, key)["ids"]
        except (urllib.error.URLError, ConnectionError, OSError, http.client.HTTPException):
            # serve died with the request in flight (or while its answer was being read:
            # IncompleteRead): the client retries later
            break
    try:
        server.wait(timeout=120)
    except subprocess.TimeoutExpired:
        server.kill()
        raise AssertionError(f"serve did not reach {point}:{KILL_AT[point]}") from None
    assert server.returncode == -signal.SIGKILL, (root / f"{point}-1.log").read_text()[-3000:]

    server, port = start_serve(root, f"{point}-2.log")
    last = point == POINTS[-1]
    try:
        ids: list[int] = []
        for body, key in requests:  # every request again, with its key
            got = call(port, "POST", "/v1/jobs", ALICE, body, key)["ids"]
            if key in acknowledged:
                assert got == acknowledged[key]  # an acknowledged request is not created twice
            ids += got

        def all_succeeded():
            jobs = call(port, "GET", "/v1/jobs", ADMIN)
            return jobs if jobs and all(j["state"] == "succeeded" for j in jobs) else None

        jobs = wait_for(all_succeeded, 120, "every job to succeed after the restart")
        assert sorted(j["id"] for j in jobs) == sorted(ids)  # no accepted job lost, none created twice
        assert sum(j["tasks_succeeded"] for j in jobs) == REQUESTS * TASKS_PER_REQUEST
    finally:
        if last:  # a clean stop: serve stops its local Ray cluster
            state = json.loads((root / "fs.db.ray.json").read_text())
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=90)
        else:  # the cluster stays for the next point
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=30)

    lines = [line.split() for line in ran.read_text().splitlines()]
    runs = Counter(int(task) for task, _attempt, _pid in lines)
    db = sqlite3.connect(root / "fs.db")
    task_ids = [r[0] for r in db.execute("SELECT id FROM tasks ORDER BY id")]
    db.close()
    assert len(task_ids) == REQUESTS * TASKS_PER_REQUEST
    assert runs == Counter(task_ids), f"a task ran twice or never: {runs}"  # each exactly once
    # no command left running (each ran ~1.5 s, all are done): nothing serve does not know about
    leftover = [int(pid) for *_ids, pid in lines if _process_alive(int(pid))]
    assert leftover == []
    if last:
        assert not (root / "fs.db.ray.json").exists()
        assert [pid for pid in state["nodes"].values() if alive(pid)] == []


def _process_alive(pid: int) -> bool:
    """A command's process (its ``sleep``) still there (and not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().startswith(b"sleep")
    except OSError:
        return False
