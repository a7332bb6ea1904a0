"""Done-when of issue 19 (item 5): submit, follow a task's output over the API while it
runs, stop serve cleanly (SIGTERM) while the commands run, start serve again on the same
database: every command ran exactly once (each appends its task id to a marker file when
it starts), and each task's whole output is retrievable after the restart.

A clean stop leaves the running commands to the next serve, as a crash does (their node
agents and the local Ray cluster stay up); the restarted serve re-attaches to the
cluster and adopts them. One local node keeps the Ray start-up short.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import yaml

from live_helpers import ALICE, config_doc, job, serve_env, start_serve_on_a_free_port, wait_for

pytest.importorskip("ray", reason="the live extra (ray) is not installed")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

from fairshare.live.ray_local import load  # noqa: E402

#: 20 lines, one each half second: the commands run on across the restart
TASKS, LINES = 3, 20


def start_serve(root: Path, log_name: str) -> tuple[subprocess.Popen, int]:
    return start_serve_on_a_free_port(root, log_name, serve_env(), timeout_s=150)


def call(port: int, path: str, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="GET" if body is None else "POST",
                                 headers={"Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_sigterm_keeps_running_commands_for_the_next_serve_and_their_output(tmp_path):
    doc = config_doc()
    doc["cluster"]["nodes"] = [{"name": "node-a", "capacity": {"cpu": 4, "memory": 8}}]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(doc))
    marker = tmp_path / "ran.txt"
    script = (f'echo "$FAIRSHARE_TASK_ID" >> {marker}; i=1; while [ $i -le {LINES} ]; do '
              f'echo "task $FAIRSHARE_TASK_ID line $i"; i=$((i+1)); sleep 0.5; done')
    expected = "".join(f"task {{task}} line {i}\n" for i in range(1, LINES + 1))
    servers = []
    try:
        server, port = start_serve(tmp_path, "serve1.log")
        servers.append(server)
        (job_id,) = call(port, "/v1/jobs", {"jobs": [job("a", "ads.prod", TASKS, {"cpu": 1}, ["sh", "-c", script])]})["ids"]
        tasks = wait_for(lambda: (j := call(port, f"/v1/jobs/{job_id}"))["tasks_running"] == TASKS and j["tasks"],
                         30, "the tasks to run")
        task = tasks[0]["id"]

        # follow the first task's output while it runs: offsets move on, lines come in order
        followed, offset = "", 0

        def two_lines_more():
            nonlocal followed, offset
            got = call(port, f"/v1/jobs/{job_id}/tasks/{task}/logs?offset={offset}")
            assert got["offset"] == offset and not got["ended"]
            followed += got["data"]
            offset = got["next_offset"]
            return followed.count("\n") >= 2

        wait_for(two_lines_more, 20, "two lines of the running task's output", every_s=0.3)
        assert expected.format(task=task).startswith(followed)

        server.send_signal(signal.SIGTERM)  # a clean stop while the commands run
        server.wait(timeout=60)
        assert "left running" in (tmp_path / "serve1.log").read_text()

        server, port = start_serve(tmp_path, "serve2.log")
        servers.append(server)
        assert "recovered 3 running task(s)" in (tmp_path / "serve2.log").read_text()
        # follow the first task with the client until its attempt ends (it runs on meanwhile)
        cli = subprocess.run([sys.executable, "-m", "fairshare", "logs", str(job_id), str(task), "--follow",
                              "--server", f"http://127.0.0.1:{port}", "--token", ALICE],
                             capture_output=True, text=True, timeout=60, env=serve_env())
        assert (cli.returncode, cli.stdout) == (0, expected.format(task=task)), cli.stderr
        wait_for(lambda: call(port, f"/v1/jobs/{job_id}")["state"] == "succeeded", 60, "the job to succeed")

        ran = Counter(int(line) for line in marker.read_text().split())
        assert ran == Counter({t["id"]: 1 for t in tasks})  # every command ran exactly once
        listing = call(port, f"/v1/jobs/{job_id}/logs")["logs"]
        assert [(e["task"], e["attempt"], e["ended"], e["dropped"]) for e in listing] == \
            [(t["id"], 1, True, 0) for t in tasks]
        for t in tasks:  # each task's whole output, after the restart
            got = call(port, f"/v1/jobs/{job_id}/tasks/{t['id']}/logs")
            assert (got["data"], got["ended"]) == (expected.format(task=t["id"]), True)
        # the rest of the followed task from where the follower was before the stop
        rest = call(port, f"/v1/jobs/{job_id}/tasks/{task}/logs?offset={offset}")
        assert followed + rest["data"] == expected.format(task=task)
    finally:
        for proc in servers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # nothing runs any more: serve stops its cluster
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        state = tmp_path / "fs.db.ray.json"
        if state.exists():
            load(state).stop()
