"""``fairshare serve`` refusals (before Ray starts) and the clients ``submit``, ``jobs``,
``cancel``, ``queues`` against a real HTTP server (uvicorn in a thread, the service on
``ManualExecutor``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from live_helpers import ADMIN, ALICE, BOB, ManualExecutor, config_doc, free_port, job, make_config
from fairshare.cli import main


def write(path, doc) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


# --- serve: every refusal exits 2 with the field, before any Ray process starts -----------------
def bad_capacity():
    doc = config_doc()
    doc["cluster"]["nodes"][0]["capacity"]["cpu"] = -4
    return doc


def bad_grant():
    doc = config_doc()
    doc["auth"]["tenants"][1]["queues"] = ["nope"]
    return doc


def pooled():
    doc = config_doc()
    doc["cluster"] = {"capacity": {"cpu": 8}}
    return doc


@pytest.mark.parametrize("doc, extra, message", [
    (bad_capacity(), [], "cluster.nodes[0].capacity.cpu: must be >= 0"),
    (bad_grant(), [], "auth.tenants[1].queues[0]: unknown queue 'nope'"),
    (pooled(), [], "cluster: the live service needs discrete `nodes`"),
    (config_doc(), ["--policy", "nope"], "--policy: unknown policy 'nope'"),
    (config_doc(), ["--policy", "ceei"], "--policy: "),
    (config_doc(), ["--port", "70000"], "--port: must be 0..65535"),
    (config_doc(), ["--node-timeout", "0"], "--node-timeout: must be a positive number of seconds, got 0.0"),
    (config_doc(), ["--node-timeout", "nan"], "--node-timeout: must be a positive number of seconds, got nan"),
    (None, [], "file not found"),
])
def test_serve_refuses_bad_input_with_status_2(tmp_path, capsys, doc, extra, message):
    config = write(tmp_path / "c.yaml", doc) if doc is not None else str(tmp_path / "missing.yaml")
    assert main(["serve", "--config", config, "--db", str(tmp_path / "fs.db"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_serve_reports_config_problems_as_allocate_reports_a_scenario(tmp_path, capsys):
    from fairshare.live.config import CONFIG_KEYS

    # one FILE: FIELD.PATH: REASON line per problem, then the count (allocate's layout)
    doc = bad_capacity()
    doc["colour"] = "red"
    config = write(tmp_path / "c.yaml", doc)
    assert main(["serve", "--config", config, "--db", str(tmp_path / "fs.db")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{config}: colour: unknown key (allowed: {', '.join(sorted(CONFIG_KEYS))})",
        f"{config}: cluster.nodes[0].capacity.cpu: must be >= 0, got -4",
        f"fairshare: error: 2 problems in {config}; nothing was started"]


def test_submit_reports_an_unparsable_jobfile_as_allocate_reports_a_scenario(tmp_path, capsys):
    jobfile = tmp_path / "jobs.yaml"
    jobfile.write_text("jobs: [\n")
    assert main(["submit", str(jobfile), "--server", "http://127.0.0.1:9", "--token", ALICE]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{jobfile}: invalid YAML at line 2")
    assert err[1:] == [f"fairshare: error: 1 problem in {jobfile}; nothing was sent"]


def test_serve_refuses_a_database_of_another_program(tmp_path, capsys):
    import sqlite3

    sqlite3.connect(tmp_path / "other.db").executescript("CREATE TABLE t(x)")
    config = write(tmp_path / "c.yaml", config_doc())
    assert main(["serve", "--config", config, "--db", str(tmp_path / "other.db")]) == 2
    assert "--db: " in capsys.readouterr().err


def test_serve_refuses_a_database_another_serve_holds(tmp_path, capsys):
    from fairshare.live.cli import _lock_database

    held = _lock_database(str(tmp_path / "fs.db"))  # as a running serve holds it
    try:
        config = write(tmp_path / "c.yaml", config_doc())
        assert main(["serve", "--config", config, "--db", str(tmp_path / "fs.db")]) == 2
        assert "is in use by another fairshare serve" in capsys.readouterr().err
    finally:
        held.close()


# --- the clients against a running API -----------------------------------------------------------
@pytest.fixture
def server(tmp_path):
    from live_helpers import api_in_thread

    with api_in_thread(tmp_path / "fs.db") as running:
        yield running


def test_submit_jobs_cancel_queues(server, tmp_path, capsys):
    url, svc = server
    jobfile = write(tmp_path / "jobs.yaml", {"jobs": [job("etl", "ads.prod", 20, {"cpu": 1}),
                                                      job("mic", "ads.test", 1, {"cpu": 1, "mic": 1})]})
    assert main(["submit", jobfile, "--server", url, "--token", ALICE]) == 0
    assert capsys.readouterr().out.split() == ["1", "2"]
    assert main(["jobs", "--server", url, "--token", ALICE, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(j["id"], j["name"], j["queue"], j["tenant"], j["tasks_total"]) for j in listed] == [
        (1, "etl", "ads.prod", "alice", 20), (2, "mic", "ads.test", "alice", 1)]
    assert all(j["state"] in ("pending", "running") and j["tasks_done"] == 0 for j in listed)
    # bob sees none of alice's jobs, and cannot cancel them
    assert main(["jobs", "--server", url, "--token", BOB, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["cancel", "1", "--server", url, "--token", BOB]) == 2
    assert "id: no job 1" in capsys.readouterr().err
    assert main(["cancel", "1", "--server", url, "--token", ALICE]) == 0
    assert capsys.readouterr().out.split() == ["1", "cancelled"]
    assert main(["queues", "--server", url, "--token", BOB, "--format", "json"]) == 0
    queues = json.loads(capsys.readouterr().out)
    assert set(queues) == {"ads", "ads.prod", "ads.test", "dev"}
    assert main(["queues", "--server", url, "--token", ADMIN]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["QUEUE", "WEIGHT", "CURRENT", "FAIR", "RUNNING", "PENDING", "GUARANTEE", "LIMIT",
                                "BELOW_FAIR_S"]
    assert [line.split()[0] for line in table[1:]] == ["ads", "ads.prod", "ads.test", "dev"]
    # no bounds in this config, no preemption: "-" for the guarantee, the limit and the time below
    assert [line.split()[-3:] for line in table[1:]] == [["-", "-", "-"]] * 4


@pytest.mark.parametrize("jobfile_doc, args, status, message", [
    ({"jobs": [job("x", "dev", 1, {"cpu": 1})]}, [], 2, "jobs[0].queue: tenant 'alice' may not submit"),
    ({"jobs": [job("x", "ads", 1, {"cpu": -1})]}, [], 2, "jobs[0].tasks[0].demand.cpu: must be >= 0"),
    ({"jobs": [job("x", "ads", 1, {"cpu": 1})]}, ["--token", "wrong-token"], 2, "Authorization: unknown token"),
    ({"jobs": [job("x", "ads", 1, {"cpu": 1})], "queues": []}, [], 2, "queues: unknown key"),
    ({"tasks": []}, [], 2, "needs a top-level `jobs:` list"),
])
def test_submit_refusals_exit_2_with_the_field(server, tmp_path, capsys, jobfile_doc, args, status, message):
    url, _ = server
    jobfile = write(tmp_path / "jobs.yaml", jobfile_doc)
    argv = ["submit", jobfile, "--server", url, "--token", ALICE, *args]
    assert main(argv) == status
    assert message in capsys.readouterr().err


def test_client_errors_without_a_server(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FAIRSHARE_SERVER", raising=False)
    monkeypatch.delenv("FAIRSHARE_TOKEN", raising=False)
    assert main(["jobs", "--token", ALICE]) == 2
    assert "--server: is required" in capsys.readouterr().err
    port = free_port()  # nothing listens there
    assert main(["jobs", "--server", f"http://127.0.0.1:{port}", "--token", ALICE]) == 1
    assert "cannot reach" in capsys.readouterr().err
    assert main(["submit", str(tmp_path / "missing.yaml"), "--server", "http://x", "--token", ALICE]) == 2
    assert "cannot read" in capsys.readouterr().err


# --- submit: one Idempotency-Key per invocation, retried after a lost answer -------------------------
def test_submit_retries_a_lost_answer_with_the_same_key(server, tmp_path, capsys, monkeypatch):
    import urllib.error
    import urllib.request

    from fairshare.live import cli

    url, svc = server
    real_urlopen = urllib.request.urlopen
    sent: list[tuple[str | None, int]] = []
    failures = {"left": 2}

    def flaky(req, timeout):
        # the server gets the request and commits it, but the answer is lost: what a
        # crash or a cut connection after the commit looks like to the client
        try:
            answer = real_urlopen(req, timeout=timeout)
            sent.append((req.get_header("Idempotency-key"), answer.status))
        except urllib.error.HTTPError as exc:
            sent.append((req.get_header("Idempotency-key"), exc.code))
            raise
        if failures["left"]:
            failures["left"] -= 1
            answer.close()
            raise urllib.error.URLError(ConnectionResetError("connection reset by peer"))
        return answer

    waits: list[float] = []
    monkeypatch.setattr(urllib.request, "urlopen", flaky)
    monkeypatch.setattr(cli, "_sleep", waits.append)
    jobfile = write(tmp_path / "jobs.yaml", {"jobs": [job("etl", "ads.prod", 3, {"cpu": 1})]})
    assert main(["submit", jobfile, "--server", url, "--token", ALICE]) == 0
    out = capsys.readouterr()
    assert out.out.split() == ["1"]
    assert "retrying in 0.5 s" in out.err and "retrying in 1 s" in out.err
    assert waits == [0.5, 1.0]  # RETRY_FIRST_S, doubled
    # three requests, one key, all answered 201 with the same job: one job stored
    assert len(sent) == 3 and len({key for key, _ in sent}) == 1 and sent[0][0]
    assert {status for _, status in sent} == {201}
    assert [j.id for j in svc.store.jobs()] == [1]
    # a new invocation is a new key: a new job
    assert main(["submit", jobfile, "--server", url, "--token", ALICE]) == 0
    assert capsys.readouterr().out.split() == ["2"]


def test_submit_gives_up_after_its_retries(tmp_path, capsys, monkeypatch):
    from fairshare.live import cli

    waits: list[float] = []
    monkeypatch.setattr(cli, "_sleep", waits.append)
    jobfile = write(tmp_path / "jobs.yaml", {"jobs": [job("etl", "ads.prod", 1, {"cpu": 1})]})
    port = free_port()  # nothing listens there
    assert main(["submit", jobfile, "--server", f"http://127.0.0.1:{port}", "--token", ALICE,
                 "--retries", "3"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach" in err and "after 3 retries" in err
    assert waits == [0.5, 1.0, 2.0]


def test_the_listening_socket_gives_connections_tcp_nodelay():
    """asyncio sets TCP_NODELAY on an accepted connection only if the listening socket
    says it is TCP (proto IPPROTO_TCP); ``socket.create_server`` leaves proto 0."""
    import asyncio
    import socket

    from fairshare.live.cli import listen_socket

    async def accepted_nodelay(sock) -> int:
        seen: list[int] = []

        async def handle(reader, writer):
            seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(handle, sock=sock)
        _reader, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        return seen[0]

    assert asyncio.run(accepted_nodelay(listen_socket("127.0.0.1", 0))) != 0
    # the way serve made its socket before: no TCP_NODELAY (the delayed-ACK stall)
    assert asyncio.run(accepted_nodelay(socket.create_server(("127.0.0.1", 0)))) == 0


def test_the_readme_queues_sample_is_what_the_command_prints(monkeypatch, capsys):
    # the README's `fairshare queues` sample, its numbers sent back by a stub server: the
    # command prints exactly the sample (every column, same layout)
    from fairshare.client import Client

    readme = (Path(__file__).parents[1] / "README.md").read_text().splitlines()
    start = readme.index("$ .venv/bin/fairshare queues --token bob-demo-token") + 1
    sample = readme[start:next(i for i in range(start, len(readme)) if readme[i].startswith("$ "))]
    header = sample[0].split()
    rows = [dict(zip(header, line.split())) for line in sample[1:]]
    answer = {row["QUEUE"]: {"weight": float(row["WEIGHT"]), "current_dominant_share": float(row["CURRENT"]),
                             "fair_dominant_share": float(row["FAIR"]), "running_tasks": int(row["RUNNING"]),
                             "pending_tasks": int(row["PENDING"]), "guarantee": {}, "limit": {},
                             "time_below_fair_share": None}  # (the example's config: none, preemption off)
              for row in rows}
    monkeypatch.setattr(Client, "request", lambda *args, **kwargs: answer)
    monkeypatch.setenv("FAIRSHARE_SERVER", "http://stub")
    assert main(["queues", "--token", BOB]) == 0
    assert capsys.readouterr().out.splitlines() == sample


# --- job, status, queues set, --token-file ---------------------------------------------------------
def submit_and_start(server, tmp_path, capsys, tasks: int, running: int) -> None:
    """alice's job ``etl`` of ``tasks`` one-CPU tasks, submitted through the CLI; returns
    once ``running`` of them run on the manual executor."""
    from live_helpers import wait_for

    url, svc = server
    jobfile = write(tmp_path / "jobs.yaml", {"jobs": [job("etl", "ads.prod", tasks, {"cpu": 1})]})
    assert main(["submit", jobfile, "--server", url, "--token", ALICE]) == 0
    capsys.readouterr()
    wait_for(lambda: len(svc.executor.running) == running, 20, f"{running} tasks to start")


def test_job_shows_its_summary_and_its_tasks_page_by_page(server, tmp_path, capsys):
    from live_helpers import wait_for

    url, svc = server
    submit_and_start(server, tmp_path, capsys, tasks=3, running=3)
    failed = min(svc.executor.running)
    for _attempt in range(3):  # (the service's default --max-attempts: 3)
        wait_for(lambda: failed in svc.executor.running, 20, "the task to run (again)")
        svc.executor.finish(failed, ok=False, reason="line one\nboom: disk full")
    wait_for(lambda: any(t.state == "failed" for t in svc.store.tasks(1)), 20, "the failure to be recorded")
    assert main(["job", "1", "--server", url, "--token", ALICE]) == 0
    out = capsys.readouterr()
    summary, table = out.out.split("\n\n")
    assert "job:" in summary and "1 etl" in summary and "ads.prod" in summary and "alice" in summary
    assert "1/3 done: 0 succeeded, 1 failed, 2 running" in summary
    rows = table.splitlines()
    assert rows[0].split() == ["TASK", "CLASS", "STATE", "NODE", "ATTEMPTS", "EXIT", "MESSAGE"]
    assert len(rows) == 4 and out.err == ""
    by_id = {int(r.split()[0]): r for r in rows[1:]}
    assert set(by_id) == {t.id for t in svc.store.tasks(1)}
    failed_row = by_id[failed].split()
    assert (failed_row[2], failed_row[4]) == ("failed", "3")  # state, attempts (the default three)
    assert by_id[failed].endswith("boom: disk full")  # the message's last line
    assert all("running" in r and "-" in r.split() for i, r in by_id.items() if i != failed)
    # a bound below the job's tasks: the pages stop there, and stderr says so
    assert main(["job", "1", "--max-tasks", "2", "--server", url, "--token", ALICE]) == 0
    out = capsys.readouterr()
    assert len(out.out.split("\n\n")[1].splitlines()) == 3  # header + 2 tasks
    assert "showing the first 2 of 3 tasks (--max-tasks)" in out.err
    # json: every page joined, the cursor of the last one read
    assert main(["job", "1", "--max-tasks", "1", "--format", "json", "--server", url, "--token", ALICE]) == 0
    assert len(json.loads(capsys.readouterr().out)["tasks"]) == 1
    assert main(["job", "1", "--format", "json", "--server", url, "--token", ALICE]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert len(whole["tasks"]) == 3 and whole["tasks_next"] is None
    # not yours: the server's field error, exit 2
    assert main(["job", "1", "--server", url, "--token", BOB]) == 2
    assert "id: no job 1" in capsys.readouterr().err


def test_job_follows_tasks_next_with_the_remaining_bound(monkeypatch, capsys):
    # three pages of one task: each request continues after the previous page's cursor
    from fairshare.client import Client

    pages = {None: ([1], 1), "1": ([2], 2), "2": ([3], None)}
    asked: list[str] = []

    def answer(client, method, path, body=None, **kwargs):
        asked.append(path)
        after = path.partition("tasks_after=")[2].partition("&")[0] or None
        ids, nxt = pages[after]
        return {"id": 7, "name": "j", "queue": "q", "tenant": "t", "state": "running", "tasks_total": 3,
                "tasks_done": 0, "tasks_succeeded": 0, "tasks_failed": 0, "tasks_running": 3,
                "submitted_at": 0.0, "finished_at": None, "tasks_next": nxt,
                "tasks": [{"id": i, "class": "c", "state": "running", "node": "n", "attempts": 1,
                           "exit_code": None, "message": None} for i in ids]}

    monkeypatch.setattr(Client, "request", answer)
    monkeypatch.setenv("FAIRSHARE_SERVER", "http://stub")
    monkeypatch.setenv("FAIRSHARE_TOKEN", "t")
    assert main(["job", "7", "--max-tasks", "5", "--format", "json"]) == 0
    assert [t["id"] for t in json.loads(capsys.readouterr().out)["tasks"]] == [1, 2, 3]
    assert asked == ["/v1/jobs/7?tasks_limit=5", "/v1/jobs/7?tasks_after=1&tasks_limit=4",
                     "/v1/jobs/7?tasks_after=2&tasks_limit=3"]


def test_status_prints_health_policy_nodes_tasks_and_decisions(server, tmp_path, capsys):
    url, _ = server
    # 8 CPUs on three nodes (4 + 2 + 2): 8 of the 10 tasks run, 2 wait
    submit_and_start(server, tmp_path, capsys, tasks=10, running=8)
    assert main(["status", "--server", url, "--token", BOB]) == 0
    summary, nodes = capsys.readouterr().out.split("\n\n")
    fields = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in summary.splitlines()}
    assert fields["health"].startswith("ok") and fields["policy"] == "hdrf"
    assert fields["nodes"] == "3 up, 0 down" and fields["tasks"] == "8 running, 2 pending"
    assert int(fields["decisions"]) >= 8 and fields["preemptions"] == "-"  # (preemption off)
    assert fields["utilization"].startswith("cpu=100.0%")
    assert nodes.splitlines()[0].split() == ["NODE", "STATE", "CAPACITY", "USED"]
    assert [r.split()[:2] for r in nodes.splitlines()[1:]] == [["cpu-node", "up"], ["mic-node", "up"],
                                                                ["gpu-node", "up"]]
    assert main(["status", "--format", "json", "--server", url, "--token", BOB]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["health"]["status"] == "ok" and doc["status"]["running_tasks"] == 8


def test_status_reports_an_unavailable_service_and_exits_1(monkeypatch, capsys):
    # /healthz answers 503 with its document: printed, not an error, and the exit status says it
    import io
    import urllib.error
    import urllib.request

    def urlopen(req, timeout):
        if req.full_url.endswith("/healthz"):
            raise urllib.error.HTTPError(req.full_url, 503, "Service Unavailable", {},
                                         io.BytesIO(b'{"status": "unavailable", "detail": "the loop stopped"}'))
        return io.BytesIO(json.dumps({"policy": "drf", "nodes": [{"name": "a", "alive": False, "capacity": {},
                                                                   "used": {}}],
                                      "running_tasks": 0, "pending_tasks": 4, "decisions_total": 2,
                                      "preemptions_total": 1, "utilization": {"cpu": 0.0}}).encode())

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    assert main(["status", "--server", "http://x", "--token", BOB]) == 1
    out = capsys.readouterr().out
    assert "unavailable (the loop stopped)" in out and "0 up, 1 down" in out and "0 running, 4 pending" in out


def test_queues_set_sends_one_change_and_prints_the_queues_after(server, monkeypatch, capsys):
    import urllib.request

    url, _ = server
    real_urlopen = urllib.request.urlopen
    sent: list[tuple[str, dict | None]] = []

    def recording(req, timeout):
        sent.append((req.get_method(), json.loads(req.data) if req.data else None))
        return real_urlopen(req, timeout=timeout)

    monkeypatch.setattr(urllib.request, "urlopen", recording)
    assert main(["queues", "set", "dev", "--weight", "3", "--limit", "cpu=2", "--limit", "gpu=1",
                 "--no-guarantee", "--server", url, "--token", ADMIN]) == 0
    assert sent == [("PUT", {"weights": {"dev": 3.0},
                             "bounds": {"dev": {"guarantee": None, "limit": {"cpu": 2.0, "gpu": 1.0}}}})]
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:2] == ["QUEUE", "WEIGHT"]
    dev = next(line.split() for line in table if line.startswith("dev"))
    assert dev[1] == "3" and dev[-2] == "cpu=2,gpu=1"
    # the options before the action count too; the guarantee alone: the limit is kept
    sent.clear()
    assert main(["queues", "--server", url, "--token", ADMIN, "set", "dev", "--guarantee", "cpu=1",
                 "--format", "json"]) == 0
    assert sent == [("PUT", {"bounds": {"dev": {"guarantee": {"cpu": 1.0}}}})]
    after = json.loads(capsys.readouterr().out)["dev"]
    assert after["guarantee"] == {"cpu": 1.0} and after["limit"] == {"cpu": 2.0, "gpu": 1.0}


@pytest.mark.parametrize("args, message", [
    (["--limit", "tpu=1"], "bounds.dev.limit"),  # the server's field error
    (["--weight", "0"], "weights.dev"),
    (["--limit", "cpu"], "--limit: must be RES=AMOUNT (e.g. cpu=4), got 'cpu'"),  # refused before sending
    (["--guarantee", "cpu=x"], "--guarantee: must be RES=AMOUNT"),
    (["--limit", "cpu=1", "--limit", "cpu=2"], "--limit: cpu given twice"),
    ([], "queues set: nothing to change"),
])
def test_queues_set_refusals_exit_2_with_the_field(server, capsys, args, message):
    url, _ = server
    assert main(["queues", "set", "dev", *args, "--server", url, "--token", ADMIN]) == 2
    assert message in capsys.readouterr().err


def test_queues_set_is_for_the_admin(server, capsys):
    url, _ = server
    assert main(["queues", "set", "dev", "--weight", "2", "--server", url, "--token", BOB]) == 2
    assert "the server refused (403)" in capsys.readouterr().err


def test_token_file_is_read_stripped_and_a_bad_one_names_the_flag(server, tmp_path, capsys, monkeypatch):
    url, _ = server
    monkeypatch.delenv("FAIRSHARE_TOKEN", raising=False)
    token_file = tmp_path / "token"
    token_file.write_text(f"  {ADMIN}\n")
    assert main(["queues", "set", "dev", "--weight", "2", "--server", url, "--token-file", str(token_file)]) == 0
    capsys.readouterr()
    for argv in (["jobs"], ["job", "1"], ["cancel", "1"], ["queues"], ["status"]):
        assert main([*argv, "--server", url, "--token-file", str(tmp_path / "missing")]) == 2, argv
        assert f"--token-file: cannot read {tmp_path / 'missing'}" in capsys.readouterr().err
    (tmp_path / "empty").write_text("\n")
    assert main(["jobs", "--server", url, "--token-file", str(tmp_path / "empty")]) == 2
    assert f"--token-file: {tmp_path / 'empty'} is empty" in capsys.readouterr().err
    # --token and --token-file together: a usage error; the environment still serves
    assert main(["jobs", "--server", url, "--token", ADMIN, "--token-file", str(token_file)]) == 2
    monkeypatch.setenv("FAIRSHARE_TOKEN", ADMIN)
    assert main(["jobs", "--server", url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


# --- client profiles and --watch -----------------------------------------------------------------------
def write_profiles(config_home: Path, text: str) -> Path:
    path = config_home / "fairshare" / "client.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in ("FAIRSHARE_SERVER", "FAIRSHARE_TOKEN", "FAIRSHARE_PROFILE", "FAIRSHARE_CA_CERT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config"


def test_profiles_flag_over_env_over_profile_over_default(server, clean_env, tmp_path, monkeypatch, capsys):
    url, _ = server
    (tmp_path / "bob.token").write_text(BOB + "\n")
    (tmp_path / "admin.token").write_text(ADMIN)
    write_profiles(clean_env, f'default_profile = "bob"\n'
                              f'[profiles.bob]\nurl = "{url}"\ntoken_file = "{tmp_path / "bob.token"}"\n'
                              f'[profiles.admin]\nurl = "{url}"\ntoken_file = "../../admin.token"\n'
                              f'[profiles.dead]\nurl = "http://127.0.0.1:9"\ntoken = "x"\n')

    def whoami(*argv: str) -> str:
        # bob may not change a queue (403, exit 2); the admin may (0); a dead URL: exit 1
        return {0: "admin", 1: "dead", 2: "bob"}[main(["queues", "set", "dev", "--weight", "1", *argv])]

    assert whoami() == "bob"  # the default profile; its token file read stripped
    assert whoami("--profile", "admin") == "admin"  # a path relative to the file
    monkeypatch.setenv("FAIRSHARE_PROFILE", "admin")
    assert whoami() == "admin"
    assert whoami("--profile", "bob") == "bob"  # the flag over the environment
    monkeypatch.setenv("FAIRSHARE_TOKEN", BOB)
    assert whoami() == "bob"  # the environment's token over the profile's
    assert whoami("--token", ADMIN) == "admin"  # the flag over the environment
    monkeypatch.setenv("FAIRSHARE_PROFILE", "dead")
    assert whoami() == "dead"
    monkeypatch.setenv("FAIRSHARE_SERVER", url)
    assert whoami() == "bob"  # the environment's URL over the profile's
    assert whoami("--server", "http://127.0.0.1:9") == "dead"
    capsys.readouterr()


@pytest.mark.parametrize("text, argv, message", [
    ('[profiles.a]\nurl = "http://x"\ncolour = "red"\n', ["--profile", "a"],
     "client.toml: profiles.a.colour: unknown key (allowed: url, token, token_file, ca_cert)"),
    ('[profiles.a]\nurl = "http://x"\n', ["--profile", "b"], "client.toml: profile: no profile 'b' (profiles: a)"),
    ('default_profile = "b"\n[profiles.a]\nurl = "http://x"\n', [],
     "client.toml: default_profile: no profile 'b' (profiles: a)"),
    ('[profiles.a\n', [], "client.toml: invalid TOML"),
    ('servers = 1\n', [], "client.toml: servers: unknown key (allowed: default_profile, profiles)"),
    ('[profiles.a]\nurl = 3\n', ["--profile", "a"], "client.toml: profiles.a.url: must be a non-empty string"),
])
def test_a_bad_config_file_names_the_file_and_the_key(clean_env, capsys, text, argv, message):
    path = write_profiles(clean_env, text)
    assert main(["jobs", "--token", "x", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err


def test_an_unknown_profile_without_a_file_is_an_error(clean_env, capsys):
    assert main(["jobs", "--token", "x", "--profile", "prod"]) == 2
    assert f"profile 'prod': {clean_env / 'fairshare' / 'client.toml'} does not exist" in capsys.readouterr().err


def test_watch_redraws_until_ctrl_c(server, monkeypatch, capsys):
    from fairshare.live import cli as live_cli

    url, _ = server
    naps: list[float] = []

    def nap(seconds):
        naps.append(seconds)
        if len(naps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(live_cli, "_sleep", nap)
    assert main(["queues", "--watch", "--server", url, "--token", BOB]) == 0  # Ctrl-C: a normal end
    out = capsys.readouterr().out
    assert naps == [2.0, 2.0, 2.0]  # the default period
    assert out.count("every 2 s: fairshare queues") == 3 and out.count("\nQUEUE ") == 3
    assert "\033[2J" not in out  # not a terminal: no clearing
    naps.clear()
    monkeypatch.setattr(live_cli.sys.stdout, "isatty", lambda: True)
    assert main(["status", "--watch", "0.5", "--server", url, "--token", BOB]) == 0
    out = capsys.readouterr().out
    assert naps == [0.5] * 3 and out.count("\033[H\033[2J") == 3 and out.count("policy:") == 3


def test_watch_ends_on_a_first_error_and_shows_a_later_one(server, monkeypatch, capsys):
    from fairshare.client import Client, Unreachable
    from fairshare.live import cli as live_cli
    from live_helpers import free_port

    assert main(["jobs", "--watch", "1", "--server", f"http://127.0.0.1:{free_port()}", "--token", BOB]) == 1
    assert "cannot reach" in capsys.readouterr().err
    url, _ = server
    real = Client.jobs
    answers = [real, lambda self: (_ for _ in ()).throw(Unreachable("cannot reach it: restarting")), real]
    monkeypatch.setattr(Client, "jobs", lambda self: answers.pop(0)(self))
    monkeypatch.setattr(live_cli, "_sleep", lambda s: None if answers else (_ for _ in ()).throw(KeyboardInterrupt))
    assert main(["jobs", "--watch", "--server", url, "--token", BOB]) == 0
    frames = capsys.readouterr().out.split("every 2 s: fairshare jobs")[1:]
    assert ["\nID " in f for f in frames] == [True, False, True]
    assert "fairshare: error: cannot reach it: restarting" in frames[1]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "x"])
def test_watch_refuses_a_bad_period(value, capsys):
    assert main(["jobs", "--watch", value, "--server", "http://x", "--token", "t"]) == 2
    assert "--watch: must be a number of seconds > 0" in capsys.readouterr().err
