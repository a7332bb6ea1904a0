"""Done-when of issue 20 (item 4), on a real Ray cluster: two tenants' Ray programs each
try to launch twice their admitted share of tasks and actors (tests/data/ray_program.py);
every task and actor runs in its job's placement group, no program holds more than its
bundles and the node never more than its CPUs; a ``kill -9`` of serve while both run
loses neither (the next serve adopts their placement groups); cancelling one sends its
driver SIGTERM and frees its share within the grace (its ``checkpoint``): the job that
waited for that room gets its placement group from Ray only then. Last, a function sent
with ``fairshare.ray.submit`` runs, its child task in its group, its result in its output.

One local node of 4 CPUs: alice's job A (2 bundles, holds until stopped) and bob's B
(2 bundles) fill it, bob's C waits; A is cancelled after the restart.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

import fairshare.ray
from live_helpers import ALICE, BOB, config_doc, wait_for
from test_live_logs_restart import start_serve

pytest.importorskip("ray", reason="the live extra (ray) is not installed")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

from fairshare.live.ray_local import load  # noqa: E402

PROGRAM = Path(__file__).parent / "data" / "ray_program.py"
GRACE_S = 3  # A's checkpoint: the grace between its SIGTERM and its placement group's removal


def call(port: int, path: str, token: str, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="GET" if body is None else "POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def ray_job(name: str, queue: str, log: Path, hold_s: float) -> dict:
    return {"name": name, "queue": queue,
            "ray": {"entrypoint": f"python {PROGRAM} {log} {hold_s}"},
            "tasks": [{"class": "worker", "demand": {"cpu": 1}, "count": 2, "checkpoint": GRACE_S}]}


def created_group(port: int, job_id: int, token: str):
    group = call(port, f"/v1/jobs/{job_id}", token)["placement_group"]
    return group if group is not None and group["state"] == "CREATED" else None


def test_programs_stay_in_their_placement_groups_survive_kill_9_and_cancel_frees_the_share(tmp_path):
    doc = config_doc()
    doc["cluster"]["nodes"] = [{"name": "node-a", "capacity": {"cpu": 4, "memory": 8}}]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(doc))
    log = tmp_path / "notes.txt"
    servers = []
    try:
        server, port = start_serve(tmp_path, "serve1.log")
        servers.append(server)
        (a,) = call(port, "/v1/jobs", ALICE, {"jobs": [ray_job("a", "ads.prod", log, 600)]})["ids"]
        # (B holds 20 s: still running when the restarted serve adopts its group, even on a
        # loaded machine, where the kill -9 and the restart took more than the 8 s it had)
        b, c = call(port, "/v1/jobs", BOB, {"jobs": [ray_job("b", "dev", log, 20), ray_job("c", "dev", log, 1)]})["ids"]
        group_a = wait_for(lambda: created_group(port, a, ALICE), 60, "A's placement group")
        group_b = wait_for(lambda: created_group(port, b, BOB), 60, "B's placement group")
        assert group_a["strategy"] == "PACK" and len(group_a["bundles"]) == 2
        assert group_a["bundles"][0] == {"fs_cpu": 1.0, "fs_node_node-a": 0.001}
        detail = call(port, f"/v1/jobs/{c}", BOB)
        assert (detail["state"], detail["gang"], detail["placement_group"]) == ("pending", True, None)
        wait_for(lambda: log.exists() and log.read_text().count("actor-start") == 4, 60, "both programs' holders")
        queues = call(port, "/v1/queues", ALICE)  # both tenants at their fair share: half the CPUs each
        assert [(queues[q]["current_dominant_share"], queues[q]["fair_dominant_share"]) for q in ("ads", "dev")] \
            == [(0.5, 0.5), (0.5, 0.5)]

        os.killpg(server.pid, signal.SIGKILL)  # serve dies while both programs run
        server.wait(timeout=30)
        server, port = start_serve(tmp_path, "serve2.log")
        servers.append(server)
        assert "recovered 4 running task(s)" in (tmp_path / "serve2.log").read_text()
        assert created_group(port, a, ALICE)["id"] == group_a["id"]  # adopted, not made again
        assert created_group(port, b, BOB)["id"] == group_b["id"]

        call(port, f"/v1/jobs/{a}/cancel", ALICE, {})
        cancelled_at = time.time()
        group_c = wait_for(lambda: created_group(port, c, BOB), GRACE_S + 15, "C's placement group")
        freed_after_s = time.time() - cancelled_at
        assert freed_after_s < GRACE_S + 10
        for job_id, token in ((b, BOB), (c, BOB)):
            wait_for(lambda: call(port, f"/v1/jobs/{job_id}", token)["state"] == "succeeded", 60, "B and C to end")
        assert call(port, f"/v1/jobs/{a}", ALICE)["state"] == "cancelled"

        notes = [line.split() for line in log.read_text().splitlines()]
        group_of = {str(a): group_a["id"], str(b): group_b["id"], str(c): group_c["id"]}
        # every task and actor of each program ran in its job's placement group
        assert {(job, pg) for job, _what, pg, _t in notes} == set(group_of.items())
        # each driver ran once: the restart did not run A or B again
        assert sorted(job for job, what, _pg, _t in notes if what == "driver-start") == sorted(group_of)
        assert [job for job, what, *_ in notes if what == "sigterm"] == [str(a)]
        # concurrency: a program at most its 2 bundles, the node at most its 4 CPUs (A's
        # holders were killed with its group, before C's group could be created)
        spans = defaultdict(list)
        for job, what, _pg, t in notes:
            kind, _, edge = what.partition("-")
            if kind in ("task", "actor"):
                spans[job].append((float(t), +1 if edge == "start" else -1))
        spans[str(a)].extend((cancelled_at + freed_after_s, -1) for _ in range(2))  # (no end noted: killed)
        for job, events in spans.items():
            assert max_concurrent(events) <= 2, job
        assert max_concurrent([e for events in spans.values() for e in events]) <= 4
        # the driver's output, as a command's
        first = call(port, f"/v1/jobs/{b}", BOB)["tasks"][0]["id"]
        out = call(port, f"/v1/jobs/{b}/tasks/{first}/logs", BOB)["data"]
        assert f"driver of job {b} in placement group {group_b['id']}" in out and f"driver of job {b} done" in out

        # a function, from Python: fairshare.ray.submit runs it as a program in its own group
        def where(tag):  # (nested: pickled by value, as a function of a user's __main__ is)
            import ray

            import fairshare.ray

            @ray.remote(**fairshare.ray.options(cpu=1))
            def child():
                return ray.get_runtime_context().get_placement_group_id()

            return tag, ray.get(child.remote()) == ray.get_runtime_context().get_placement_group_id()

        f = fairshare.ray.submit(where, "here", bundles=[{"cpu": 1}], queue="ads", server=f"http://127.0.0.1:{port}",
                                 token=ALICE)
        wait_for(lambda: call(port, f"/v1/jobs/{f}", ALICE)["state"] == "succeeded", 60, "the function's job")
        first = call(port, f"/v1/jobs/{f}", ALICE)["tasks"][0]["id"]
        assert call(port, f"/v1/jobs/{f}/tasks/{first}/logs", ALICE)["data"] == "('here', True)\n"
    finally:
        for proc in servers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except Exception:  # noqa: BLE001
                    proc.kill()
        state = tmp_path / "fs.db.ray.json"
        if state.exists():
            load(state).stop()


def max_concurrent(events: list[tuple[float, int]]) -> int:
    """The most spans open at once (an end before a start at the same time)."""
    level = peak = 0
    for _t, delta in sorted(events):
        level += delta
        peak = max(peak, level)
    return peak
