"""kill -9 of ``fairshare serve`` mid-run, then a restart on the same database: no accepted
job is lost, no task runs twice: the tasks that were running are adopted (their
commands, under the node agents of the local Ray cluster that outlived serve, ran on)
and every task ran exactly once. ``serve`` runs as a subprocess; every task's command
appends its task id to a file, so the file tells how often each task ran. Requests go
through the ``fairshare submit`` / ``jobs`` clients and plain HTTP. (Every step of a
task's life as a kill point: test_live_crash.py.)
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from live_helpers import (ADMIN, ALICE, BOB, config_doc, job, serve_env, start_serve_on_a_free_port, stop_serve,
                          wait_for)

pytest.importorskip("ray", reason="the live extra (ray) is not installed")
pytestmark = [pytest.mark.ray, pytest.mark.slow]


def start_serve(tmp_path, log_name: str) -> tuple[subprocess.Popen, int]:
    return start_serve_on_a_free_port(tmp_path, log_name, serve_env(), timeout_s=120, extra=("--policy", "hdrf"))


def get(port: int, path: str, token: str):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fairshare", *args], capture_output=True, text=True, timeout=60)


def test_kill_9_and_restart_loses_nothing_and_reruns_no_succeeded_task(tmp_path):
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(config_doc()))
    out = tmp_path / "ran.txt"
    # each command logs its start and its end: a command started twice shows two starts
    # even if the first was killed before its end
    command = ["sh", "-c", f'echo "start $FAIRSHARE_TASK_ID" >> {out}; sleep 1; echo "end $FAIRSHARE_TASK_ID" >> {out}']
    (tmp_path / "alice.yaml").write_text(yaml.safe_dump({"jobs": [job("a", "ads.prod", 16, {"cpu": 1}, command)]}))
    (tmp_path / "bob.yaml").write_text(yaml.safe_dump({"jobs": [job("b", "dev", 6, {"cpu": 1}, command)]}))

    server, port = start_serve(tmp_path, "serve1.log")
    try:
        url = f"http://127.0.0.1:{port}"
        r1 = cli("submit", str(tmp_path / "alice.yaml"), "--server", url, "--token", ALICE)
        r2 = cli("submit", str(tmp_path / "bob.yaml"), "--server", url, "--token", BOB)
        assert (r1.returncode, r2.returncode) == (0, 0), r1.stderr + r2.stderr
        accepted = sorted(int(x) for x in (r1.stdout + r2.stdout).split())

        def some_done_some_running():
            jobs = get(port, "/v1/jobs", ADMIN)
            done = sum(j["tasks_succeeded"] for j in jobs)
            running = sum(j["tasks_running"] for j in jobs)
            return done >= 3 and running >= 2

        wait_for(some_done_some_running, 120, "some tasks done and some running")
        server.send_signal(signal.SIGKILL)  # kill -9 the server only
        server.wait(timeout=30)
        time.sleep(2)
    finally:
        stop_serve(server)
    db = sqlite3.connect(tmp_path / "fs.db")
    succeeded_before = {r[0] for r in db.execute("SELECT id FROM tasks WHERE state='succeeded'")}
    running_before = {r[0] for r in db.execute("SELECT id FROM tasks WHERE state='running'")}
    db.close()
    assert len(succeeded_before) >= 3 and running_before

    server2, port2 = start_serve(tmp_path, "serve2.log")
    try:
        url2 = f"http://127.0.0.1:{port2}"

        def finished():
            jobs = get(port2, "/v1/jobs", ADMIN)
            return jobs if all(j["state"] == "succeeded" for j in jobs) else None

        jobs = wait_for(finished, 180, "every job to finish after the restart")
        assert sorted(j["id"] for j in jobs) == accepted  # no accepted job lost
        assert sum(j["tasks_succeeded"] for j in jobs) == 16 + 6
        listed = cli("jobs", "--server", url2, "--token", ALICE, "--format", "json")
        assert listed.returncode == 0, listed.stderr
        assert [(j["name"], j["state"], j["tasks_done"], j["tasks_total"]) for j in json.loads(listed.stdout)] == \
            [("a", "succeeded", 16, 16)]
    finally:
        stop_serve(server2)

    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    for line in out.read_text().splitlines():
        what, task_id = line.split()
        counts = starts if what == "start" else ends
        counts[int(task_id)] = counts.get(int(task_id), 0) + 1
    # every task's command started once and ended once: those that had succeeded were not
    # run again, and those running at the kill were adopted, not started a second time
    every = {t: 1 for t in range(1, 16 + 6 + 1)}
    assert starts == every and ends == every
    db = sqlite3.connect(tmp_path / "fs.db")
    requeued = {r[0] for r in db.execute(
        "SELECT task_id FROM events WHERE kind='requeued' AND detail LIKE 'running when the previous%'")}
    # a task may be re-queued at the restart only if it was running in the store at the
    # kill and its start never reached its node agent (committed, then the kill before the
    # call went out: docs/live.md, the "handed" window); such a task's command started
    # once, after the restart (checked above)
    assert requeued <= running_before
    assert not (tmp_path / "fs.db.ray.json").exists()  # the clean stop stopped the local cluster
