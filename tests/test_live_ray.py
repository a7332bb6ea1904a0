"""The live service on a real local Ray cluster: three heterogeneous virtual nodes
(plain CPUs; CPUs + a MIC; CPUs + a GPU), one cluster for the whole module (one Ray
connection per process). Requests go through the HTTP API (FastAPI's test client).

- several tenants' jobs complete, with running shares that follow the policy, MIC and
  GPU tasks on the nodes that have them;
- parity: the decisions the service made on Ray equal a fresh ``Scheduler`` replaying
  the same arrivals and completions in the order Ray delivered them;
- a node whose raylet hangs (SIGSTOP) is taken out after the node timeout, its tasks run
  once more elsewhere without the old attempts' results being counted, and it comes back
  after SIGCONT;
- a node that dies mid-run has its tasks re-queued and completed elsewhere (last: it
  changes the cluster).

The kill -9 restart test runs ``fairshare serve`` as a subprocess: test_live_restart.py.
"""

from __future__ import annotations

import time
import warnings

import pytest

from live_helpers import ADMIN, ALICE, BOB, RecordingExecutor, job, make_config, replay, wait_for

ray = pytest.importorskip("ray", reason="the live extra (ray) is not installed")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from fairshare.live.api import create_app  # noqa: E402
from fairshare.live.commands import CommandBook  # noqa: E402
from fairshare.live.ray_executor import RayExecutor  # noqa: E402
from fairshare.live.service import LiveService  # noqa: E402
from fairshare.live.store import Store  # noqa: E402

POLICY = "hdrf"


def H(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def cluster():
    config = make_config()  # cpu-node 4 CPUs, mic-node 2 CPUs + 1 MIC, gpu-node 2 CPUs + 1 GPU
    commands = CommandBook()
    executor = RayExecutor(config.resources, config.nodes, commands=commands)
    yield config, executor, commands
    executor.shutdown(stop_commands=True)  # (a test may leave a command running: none outlives the module)


@pytest.fixture
def live(cluster, tmp_path):
    config, executor, commands = cluster
    svc = LiveService(config, Store(tmp_path / "fs.db"), RecordingExecutor(executor), policy=POLICY,
                      record_rounds=True, commands=commands)
    svc.start()
    client = TestClient(create_app(svc), raise_server_exceptions=False)
    yield svc, client, executor
    svc.stop()



def all_done(client) -> bool:
    jobs = client.get("/v1/jobs", headers=H(ADMIN)).json()
    return bool(jobs) and all(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs)


def test_tenants_share_the_cluster_by_policy_and_everything_completes(live):
    svc, client, _ = live
    # each tenant: 16 one-CPU tasks of 1 s; 8 CPUs, queues ads and dev of weight 1
    r = client.post("/v1/jobs", json={"jobs": [job("a", "ads.prod", 16, {"cpu": 1}, command=["sleep", "1"])]},
                    headers=H(ALICE))
    assert r.status_code == 201, r.text
    r = client.post("/v1/jobs", json={"jobs": [job("b", "dev", 16, {"cpu": 1}, command=["sleep", "1"])]},
                    headers=H(BOB))
    assert r.status_code == 201, r.text
    samples = []

    def sample_and_check():
        q = svc.queues()
        samples.append((q["ads"]["running_tasks"], q["ads"]["pending_tasks"],
                        q["dev"]["running_tasks"], q["dev"]["pending_tasks"]))
        return all_done(client)

    wait_for(sample_and_check, 120, "both tenants' jobs to finish", every_s=0.02)
    jobs = client.get("/v1/jobs", headers=H(ADMIN)).json()
    assert [(j["tenant"], j["state"], j["tasks_done"]) for j in jobs] == [("alice", "succeeded", 16),
                                                                        ("bob", "succeeded", 16)]
    # Tasks are not preempted: alice, first in, holds all 8 CPUs until her tasks end. As
    # they end, each freed CPU goes to the queue with the lower dominant share (bob's),
    # until the two are level (8 CPUs / 2 queues = 4 each). From then on, while both have
    # tasks waiting, they stay within one task of each other, plus one task that has just
    # finished and whose CPU the next pass has not handed out yet: |ads - dev| <= 2.
    contended = [(ar, dr) for ar, ap, dr, dp in samples if ap > 0 and dp > 0]
    level = [k for k, (ar, dr) in enumerate(contended) if ar + dr >= 7 and abs(ar - dr) <= 1]
    assert level, f"the queues never levelled while both waited: {contended}"
    after = contended[level[0]:]
    assert all(abs(ar - dr) <= 2 for ar, dr in after), after
    # the service decided exactly what the policy decides for these arrivals and completions
    assert replayed(svc) == launched(svc)


def replayed(svc) -> list[tuple[str, str]]:
    """The decisions of a fresh Scheduler fed the rounds the service recorded."""
    return [(la.job, la.node) for la in replay(svc, POLICY)]


def launched(svc) -> list[tuple[str, str]]:
    """The service's decisions, as its executor received them."""
    return [(la.job, la.node) for la in svc.executor.started]


def test_mic_and_gpu_tasks_run_where_those_resources_are(live):
    svc, client, _ = live
    r = client.post("/v1/jobs", json={"jobs": [
        job("m", "ads.prod", 3, {"cpu": 1, "mic": 1}, command="sh -c 'test \"$FAIRSHARE_NODE\" = mic-node'"),
    ]}, headers=H(ALICE))
    assert r.status_code == 201, r.text
    r = client.post("/v1/jobs", json={"jobs": [
        job("g", "dev", 3, {"cpu": 1, "gpu": 1}, command="test \"$FAIRSHARE_NODE\" = gpu-node", shell=True),
    ]}, headers=H(BOB))
    assert r.status_code == 201, r.text
    wait_for(lambda: all_done(client), 120, "the MIC and GPU jobs")
    for token in (ALICE, BOB):
        (j,) = client.get("/v1/jobs", headers=H(token)).json()
        detail = client.get(f"/v1/jobs/{j['id']}", headers=H(token)).json()
        # the command itself checks the node it runs on: a task elsewhere would fail
        assert detail["state"] == "succeeded", detail
        assert {t["node"] for t in detail["tasks"]} == {"mic-node" if token == ALICE else "gpu-node"}
    assert replayed(svc) == launched(svc)


def test_a_failing_command_is_retried_then_failed(live):
    svc, client, _ = live
    r = client.post("/v1/jobs", json={"jobs": [job("f", "ads", 1, {"cpu": 1}, command=["false"])]},
                    headers=H(ALICE))
    (job_id,) = r.json()["ids"]
    wait_for(lambda: all_done(client), 60, "the failing job")
    detail = client.get(f"/v1/jobs/{job_id}", headers=H(ALICE)).json()
    assert detail["state"] == "failed"
    assert [(t["attempts"], t["exit_code"]) for t in detail["tasks"]] == [(3, 1)]


def test_cancel_interrupts_a_running_command(live):
    svc, client, _ = live
    r = client.post("/v1/jobs", json={"jobs": [job("c", "dev", 2, {"cpu": 1}, command=["sleep", "60"])]},
                    headers=H(BOB))
    (job_id,) = r.json()["ids"]
    wait_for(lambda: client.get(f"/v1/jobs/{job_id}", headers=H(BOB)).json()["tasks_running"] == 2, 60,
             "both tasks running")
    t0 = time.monotonic()
    assert client.post(f"/v1/jobs/{job_id}/cancel", headers=H(BOB)).status_code == 200
    wait_for(lambda: svc.status()["running_tasks"] == 0, 30, "the running tasks to stop")
    assert time.monotonic() - t0 < 30  # interrupted, not left to run their 60 s
    detail = client.get(f"/v1/jobs/{job_id}", headers=H(BOB)).json()
    assert detail["state"] == "cancelled"
    assert {t["state"] for t in detail["tasks"]} == {"cancelled"}

def test_serve_attaches_to_an_existing_cluster_and_discovers_its_nodes(cluster, tmp_path):
    """``fairshare serve --ray-address``: a second driver on this module's cluster."""
    import json
    import signal
    import urllib.request

    import yaml

    from live_helpers import config_doc, serve_env, start_serve_on_a_free_port, stop_serve

    import ray

    _, executor, _ = cluster

    def agents() -> set[str]:
        return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == "fairshare"}

    before = agents()  # (this module's own executor's)
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(config_doc()))
    proc, port = start_serve_on_a_free_port(tmp_path, "serve.log", serve_env(), timeout_s=90,
                                            extra=("--ray-address", executor.cluster.address))

    def call(method, path, token, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def up():
        try:
            return call("GET", "/v1/status", ADMIN)
        except OSError:
            return None

    try:
        status = wait_for(up, 90, "serve to attach")
        # the nodes are discovered by their fs_node_ marks, with their fs_ capacities
        assert [(n["name"], n["capacity"]["cpu"], n["capacity"]["mic"], n["capacity"]["gpu"])
                for n in status["nodes"]] == [("cpu-node", 4, 0, 0), ("mic-node", 2, 1, 0), ("gpu-node", 2, 0, 1)]
        (job_id,) = call("POST", "/v1/jobs", BOB, {"jobs": [job("x", "dev", 3, {"cpu": 1, "gpu": 1}, ["true"])]})["ids"]
        detail = wait_for(lambda: (d := call("GET", f"/v1/jobs/{job_id}", BOB))["state"] == "succeeded" and d,
                          60, "the attached serve's job")
        assert {t["node"] for t in detail["tasks"]} == {"gpu-node"}
        assert agents() > before  # serve's agents, one per node it used
        # a clean stop with nothing running: its agents, idle, go with it (docs/live.md)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)  # (uvicorn ends a process it stopped on a signal with that signal's number)
        assert agents() == before
    finally:
        stop_serve(proc)

def test_a_hung_node_is_taken_out_its_tasks_rerun_once_and_it_comes_back(live, tmp_path):
    """A raylet stopped with SIGSTOP: Ray still lists the node alive and its running
    commands go on (a worker answers its owner without the raylet), but the node answers
    no probe, so after the node timeout it leaves scheduling and its tasks run elsewhere;
    the old attempts' results are never counted. After SIGCONT it answers and is back."""
    import os
    import signal

    from test_live_metrics import samples

    svc, client, executor = live
    timeout_s = 4.0
    RUN_S = 12  # long enough to be still running when the node is found out
    executor.prober.timeout_s = timeout_s  # (the module's cluster keeps serve's default otherwise)
    log_file = tmp_path / "runs.log"

    def answering():
        # every node has answered its probes lately: the probes' workers are up (between
        # tests nothing polls the executor, and Ray stops idle workers)
        return all(n["state"] == "alive" and n["last_answer_s"] is not None and n["last_answer_s"] < 2
                   for n in svc.health()[1]["ray"]["node_states"])

    wait_for(answering, 60, "every node to answer its probes")
    # each command logs its start and its end with the node and the wall time
    stamp = 'echo "$1 $FAIRSHARE_TASK_ID $FAIRSHARE_NODE $(date +%s.%N)" >> ' + str(log_file)
    command = f"sh -c '{stamp}' - start; sleep {RUN_S}; sh -c '{stamp}' - end"
    r = client.post("/v1/jobs", json={"jobs": [job("h", "ads", 8, {"cpu": 1}, command=command, shell=True)]},
                    headers=H(ALICE))
    assert r.status_code == 201, r.text
    (job_id,) = r.json()["ids"]

    def on_mic():
        tasks = client.get(f"/v1/jobs/{job_id}", headers=H(ALICE)).json()["tasks"]
        return [t["id"] for t in tasks if t["state"] == "running" and t["node"] == "mic-node"]

    victims = wait_for(on_mic, 60, "tasks running on mic-node")

    def settled():
        # all 8 commands started (their Ray workers are up: a probe that waits for a worker
        # to start on a loaded machine is slow, not unanswered) and every node answering
        started = log_file.read_text().count("start") if log_file.exists() else 0
        nodes = svc.health()[1]["ray"]["node_states"]
        return started == 8 and all(n["state"] == "alive" and n["last_answer_s"] is not None
                                    and n["waiting_s"] is None for n in nodes)

    wait_for(settled, 60, "the tasks to run and every node to answer its probes")
    assert svc.health()[1]["status"] == "ok"
    assert on_mic() == victims
    raylet = executor.raylet_pid("mic-node")
    os.kill(raylet, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        def mic_out():
            return [n["alive"] for n in svc.status()["nodes"] if n["name"] == "mic-node"] == [False]

        # the timeout, plus up to one node poll (1 s) and one probe interval (1 s) before
        # the late probe is sent and seen, plus slack for a loaded machine
        wait_for(mic_out, timeout_s + 10, "mic-node to be taken out")
        detected_s = time.monotonic() - stopped_at
        assert detected_s >= timeout_s  # not before its probe was overdue
        # Ray itself has not noticed
        assert [n["Alive"] for n in ray.nodes() if "fs_node_mic-node" in n.get("Resources", {})] == [True]
        health = client.get("/healthz")
        assert health.status_code == 200
        doc = health.json()
        assert doc["status"] == "degraded" and "mic-node" in doc["detail"], doc
        assert {n["name"]: n["state"] for n in doc["ray"]["node_states"]}["mic-node"] == "unhealthy"
        assert doc["ray"]["reachable"] and doc["ray"]["nodes"]["unhealthy"] == 1
        page = samples(client.get("/metrics", headers=H(ADMIN)).text)
        assert page[("fairshare_node_health", (("node", "mic-node"), ("state", "unhealthy")))] == 1
        assert page[("fairshare_node_health", (("node", "mic-node"), ("state", "alive")))] == 0
        assert page[("fairshare_tasks_requeued_total", (("reason", "node_lost"),))] >= len(victims)
        # the node stays frozen while its tasks run again elsewhere and the job finishes
        wait_for(lambda: all_done(client), 120, "the job to finish without mic-node")
    finally:
        os.kill(raylet, signal.SIGCONT)
        executor.prober.timeout_s = 10.0
    detail = client.get(f"/v1/jobs/{job_id}", headers=H(ALICE)).json()
    assert detail["state"] == "succeeded" and detail["tasks_succeeded"] == 8, detail
    by_id = {t["id"]: t for t in detail["tasks"]}
    for task_id in victims:
        assert by_id[task_id]["node"] in ("cpu-node", "gpu-node")  # re-run elsewhere
        assert by_id[task_id]["attempts"] >= 2
    # a success is the end of the attempt it is recorded for: each took its RUN_S (an old
    # attempt's late result taken for the new attempt would end it at once)
    for t in detail["tasks"]:
        assert t["finished_at"] - t["started_at"] >= RUN_S - 0.5, t
    # never more commands at once on a node than its CPUs: nothing ended early in the
    # scheduler's books while its command still ran
    runs: dict[tuple[str, str], list[float]] = {}
    for line in log_file.read_text().splitlines():
        what, task_id, node, at = line.split()
        runs.setdefault((task_id, node), []).append(float(at))
    cpus = {"cpu-node": 4, "mic-node": 2, "gpu-node": 2}
    for node, limit in cpus.items():
        edges = sorted(e for (_, n), (start, *end) in runs.items() if n == node
                       for e in [(start, 1)] + [(x, -1) for x in end[:1]])
        level = peak = 0
        for _, step in edges:
            level += step
            peak = max(peak, level)
        assert peak <= limit, (node, peak)
    # every task succeeded off mic-node exactly once in the log too
    assert sorted(task_id for (task_id, node), times in runs.items() if node != "mic-node" and len(times) == 2
                  and int(task_id) in victims) == sorted(str(v) for v in victims)

    # SIGCONT: the node answers again and comes back, empty, and takes new work
    def mic_back():
        return [n["alive"] for n in svc.status()["nodes"] if n["name"] == "mic-node"] == [True]

    wait_for(mic_back, 30, "mic-node to come back")
    assert client.get("/healthz").json()["status"] == "ok"
    r = client.post("/v1/jobs", json={"jobs": [job("m2", "ads", 1, {"cpu": 1, "mic": 1},
                                                   command="test \"$FAIRSHARE_NODE\" = mic-node", shell=True)]},
                    headers=H(ALICE))
    (mic_job,) = r.json()["ids"]
    wait_for(lambda: client.get(f"/v1/jobs/{mic_job}", headers=H(ALICE)).json()["state"] == "succeeded", 60,
             "a MIC task on the returned node")
    assert replayed(svc) == launched(svc)


def test_recover_adopts_the_attempts_the_store_names_and_kills_the_others(cluster, tmp_path):
    """``RayExecutor.recover`` as a restarted serve calls it, on the module's cluster: the
    node agents (detached actors) still hold two running commands of a "previous serve";
    the "database" names only one of them as running: that one is adopted and keeps
    running, the other is killed; a start of the previous incarnation is refused."""
    import os

    from fairshare.engine.scheduler import Launch
    from fairshare.live.config import TaskCommand
    from fairshare.live.node_agent import FENCED

    _, executor, commands = cluster
    service_id = f"recover-test-{os.getpid()}"
    pids = tmp_path / "pids"
    commands.register("900", "alice", (TaskCommand(("sh", "-c", f'echo "$FAIRSHARE_TASK_ID $$" >> {pids}; '
                                                                 f'exec sleep 60')),))
    executor.recover(service_id, 1, {})
    for task_id in (1, 2):  # (first attempts: Launch.attempt defaults to 1)
        executor.start(Launch(task_id, "900", "main", 0, "cpu-node", (1.0, 0.0, 0.0, 0.0)), 0.0)
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 4, 60, "both commands to start")
    pid_of = dict(map(int, line.split()) for line in pids.read_text().splitlines())

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    try:
        # the restart: a new incarnation; the store says only task 1 (attempt 1) runs
        assert executor.recover(service_id, 2, {1: (1, "cpu-node"), 3: (1, "cpu-node")}) == {1}
        wait_for(lambda: not alive(pid_of[2]), 30, "the unknown attempt to be killed")
        assert alive(pid_of[1])  # adopted: still running, not started again
        assert len(pids.read_text().splitlines()) == 2
        # a start sent by the previous incarnation (in flight at its death) is refused
        agent = executor._agents["cpu-node"]
        assert ray.get(agent.run.remote(4, 1, 1, ["true"], False, {}, None))[0] == FENCED
        executor.kill(1)  # (cancel: the adopted command is the one killed)
        wait_for(lambda: not alive(pid_of[1]), 30, "the adopted command to be killed")
        events = wait_for(executor.poll, 10, "the cancelled end")
        assert [(e.task_id, e.ok, e.attempt) for e in events] == [(1, False, 1)]
    finally:
        for pid in pid_of.values():
            if alive(pid):
                os.kill(pid, 9)
        for agent in executor._agents.values():
            ray.kill(agent)
        executor._agents.clear()


def test_dead_node_tasks_are_requeued_and_completed_elsewhere(live):
    svc, client, executor = live
    # 8 tasks of 1 CPU fill the 8 CPUs; each runs 3 s and then records where it ran
    r = client.post("/v1/jobs", json={"jobs": [job("d", "ads", 8, {"cpu": 1}, command=["sleep", "3"])]},
                    headers=H(ALICE))
    (job_id,) = r.json()["ids"]

    def on_mic():
        tasks = client.get(f"/v1/jobs/{job_id}", headers=H(ALICE)).json()["tasks"]
        return [t["id"] for t in tasks if t["state"] == "running" and t["node"] == "mic-node"]

    victims = wait_for(on_mic, 60, "tasks running on mic-node")
    time.sleep(0.5)
    executor.remove_node("mic-node")
    wait_for(lambda: all_done(client), 120, "the job to finish without mic-node")
    detail = client.get(f"/v1/jobs/{job_id}", headers=H(ALICE)).json()
    assert detail["state"] == "succeeded"
    by_id = {t["id"]: t for t in detail["tasks"]}
    for task_id in victims:
        assert by_id[task_id]["node"] in ("cpu-node", "gpu-node")  # re-run elsewhere
        assert by_id[task_id]["attempts"] >= 2
    # Ray declares the node dead after its health checks fail (seconds); its agent's
    # death, seen at once, already re-queued the tasks
    status = wait_for(lambda: (st := svc.status()) and not any(n["alive"] for n in st["nodes"]
                                                               if n["name"] == "mic-node") and st,
                      60, "Ray to declare mic-node dead")
    assert [n["alive"] for n in status["nodes"] if n["name"] == "mic-node"] == [False]
    assert status["capacity"]["cpu"] == 6  # 4 + 2: mic-node's 2 CPUs are gone
    assert replayed(svc) == launched(svc)


