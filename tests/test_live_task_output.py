"""Task output kept per attempt: the rotated files (``live.task_output``), the node agent
writing them, and the two routes (``GET /v1/jobs/{id}/logs``, ``GET
/v1/jobs/{id}/tasks/{task}/logs``) with tenant isolation and their 404s, without Ray
(``ManualExecutor`` with the files behind the executor's output methods)."""

from __future__ import annotations

import sys
import warnings

import pytest

from live_helpers import ADMIN, ALICE, BOB, ManualExecutor, job, make_config, wait_for
from fairshare.live.node_agent import NodeAgent
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from fairshare.live.task_output import MIN_MAX_BYTES, OutputFiles, OutputWriter

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from fairshare.live.api import create_app  # noqa: E402


# --- the files -------------------------------------------------------------------------------------
def test_output_under_the_cap_is_kept_whole_and_read_by_offset(tmp_path):
    writer = OutputWriter(tmp_path, 7, 1, max_bytes=4096)
    writer.write(b"hello ")
    writer.write(b"world\n")
    files = OutputFiles(tmp_path)
    assert files.list([7, 8]) == {(7, 1): (12, 0)}  # 12 bytes kept, none dropped
    chunk = files.read(7, 1, offset=6, limit=100)
    assert (chunk.offset, chunk.data, chunk.dropped, chunk.size) == (6, b"world\n", 0, 12)
    assert files.read(7, 1, offset=0, limit=5).data == b"hello"
    assert files.read(7, 1, offset=12, limit=5).data == b""  # a follower at the end: nothing new
    assert files.read(7, 2, offset=0, limit=5) is None  # no such attempt
    writer.close()


def test_rotation_keeps_the_tail_and_counts_what_it_dropped(tmp_path):
    cap = MIN_MAX_BYTES  # segments of cap // 2 = 1024 bytes
    writer = OutputWriter(tmp_path, 3, 2, max_bytes=cap)
    whole = b"".join(f"line {i:05d}\n".encode() for i in range(500))  # 11 bytes a line: 5500 bytes
    for i in range(0, len(whole), 700):  # (pieces that straddle the segment boundaries)
        writer.write(whole[i:i + 700])
    writer.close()
    files = OutputFiles(tmp_path)
    ((key, (kept, dropped)),) = files.list([3]).items()
    # 5500 bytes = 5 full segments of 1024, then 380: the newest two kept (1024 + 380), 5 * 1024 - 1024 dropped
    assert key == (3, 2) and (kept, dropped) == (1024 + 380, 4 * 1024)
    assert dropped + kept == len(whole)
    chunk = files.read(3, 2, offset=0, limit=10_000)  # from 0: moved up to the first byte kept
    assert chunk.offset == dropped and chunk.data == whole[dropped:] and chunk.size == len(whole)
    # across the boundary of the two kept segments
    middle = files.read(3, 2, offset=dropped + 1000, limit=100)
    assert middle.offset == dropped + 1000 and middle.data == whole[dropped + 1000:dropped + 1100]


def test_the_cap_is_checked(tmp_path):
    with pytest.raises(ValueError, match="max_bytes"):
        OutputWriter(tmp_path, 1, 1, max_bytes=MIN_MAX_BYTES - 1)


def test_the_agent_writes_each_attempts_output_and_keeps_the_tail_for_the_message(tmp_path):
    agent = NodeAgent("n1", output_dir=str(tmp_path), output_max_bytes=MIN_MAX_BYTES)
    script = "import sys\nfor i in range(400): print(f'out {i:04d}', file=sys.stderr if i % 2 else sys.stdout)\n" \
             "sys.exit(3)"
    assert agent.run(5, 1, 1, [sys.executable, "-c", script], False, {}, None)[0] == "started"
    _, ends = agent.reports(1, [], 0, wait_s=30)
    ((task_id, attempt, code, message, _seq),) = ends
    assert (task_id, attempt, code) == (5, 1, 3)
    whole = "".join(f"out {i:04d}\n" for i in range(400)).encode()  # 3600 bytes, stdout and stderr merged
    assert message.endswith("out 0399\n")
    chunk = agent.output_read(5, 1, 0, 1 << 20)
    assert chunk.size == len(whole) and chunk.data == whole[chunk.offset:] and chunk.offset == chunk.dropped > 0
    assert agent.output_list([5]) == {(5, 1): (len(whole) - chunk.dropped, chunk.dropped)}


def test_a_command_that_cannot_start_has_its_reason_as_output(tmp_path):
    agent = NodeAgent("n1", output_dir=str(tmp_path))
    assert agent.run(6, 1, 1, ["no-such-command-xyz"], False, {}, None)[0] == "refused"
    assert b"no-such-command-xyz" in agent.output_read(6, 1, 0, 1000).data


# --- the routes ------------------------------------------------------------------------------------
class OutputExecutor(ManualExecutor):
    """``ManualExecutor`` whose attempts' output is files under a directory (as a
    ``RayExecutor`` in local mode reads them)."""

    def __init__(self, nodes, directory):
        super().__init__(nodes)
        self.files = OutputFiles(directory)
        self.directory = directory

    def task_outputs(self, task_ids):
        return self.files.list(task_ids)

    def read_task_output(self, task_id, attempt, offset, limit):
        return self.files.read(task_id, attempt, offset, limit)

    def output(self, task_id: int, attempt: int, text: str) -> None:
        writer = OutputWriter(self.directory, task_id, attempt, max_bytes=MIN_MAX_BYTES)
        writer.write(text.encode())
        writer.close()


def H(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def api(tmp_path):
    config = make_config()
    executor = OutputExecutor(config.nodes, tmp_path / "out")
    svc = LiveService(config, Store(tmp_path / "fs.db"), executor, policy="hdrf")
    svc.recover()
    return TestClient(create_app(svc), raise_server_exceptions=False), svc, executor


def started(client, svc, token, doc) -> tuple[int, list[int]]:
    """Submit one job and run passes until its tasks run: (job id, task ids)."""
    (job_id,) = client.post("/v1/jobs", json={"jobs": [doc]}, headers=H(token)).json()["ids"]
    wait_for(lambda: svc.step() or client.get(f"/v1/jobs/{job_id}", headers=H(token)).json()["tasks_running"],
             10, "the job's tasks to start")
    tasks = [t["id"] for t in client.get(f"/v1/jobs/{job_id}", headers=H(token)).json()["tasks"]]
    return job_id, tasks


def test_a_running_attempts_output_is_followed_then_ended(api):
    client, svc, executor = api
    job_id, (task,) = started(client, svc, ALICE, job("a", "ads.prod", 1, {"cpu": 1}))
    executor.output(task, 1, "first\nsecond\n")
    listing = client.get(f"/v1/jobs/{job_id}/logs", headers=H(ALICE)).json()
    assert listing == {"job": job_id, "logs": [{"task": task, "attempt": 1, "bytes": 13, "dropped": 0,
                                                "ended": False}]}
    url = f"/v1/jobs/{job_id}/tasks/{task}/logs"
    part = client.get(url, params={"limit": 6}, headers=H(ALICE)).json()
    assert part == {"job": job_id, "task": task, "attempt": 1, "offset": 0, "next_offset": 6, "dropped": 0,
                    "data": "first\n", "ended": False}
    rest = client.get(url, params={"offset": part["next_offset"]}, headers=H(ALICE)).json()
    assert (rest["data"], rest["next_offset"], rest["ended"]) == ("second\n", 13, False)
    executor.finish(task)
    svc.step()
    done = client.get(url, params={"offset": 13}, headers=H(ALICE)).json()
    assert (done["data"], done["next_offset"], done["ended"]) == ("", 13, True)  # a follower stops here
    assert client.get(f"/v1/jobs/{job_id}/logs", headers=H(ALICE)).json()["logs"][0]["ended"] is True


def test_each_attempt_is_kept_and_the_default_is_the_latest(api):
    client, svc, executor = api
    job_id, (task,) = started(client, svc, ALICE, job("a", "ads.prod", 1, {"cpu": 1}))
    executor.output(task, 1, "attempt one\n")
    executor.finish(task, ok=False)  # re-queued: a second attempt starts
    wait_for(lambda: svc.step() or task in executor.running, 10, "the second attempt")
    executor.output(task, 2, "attempt two\n")
    url = f"/v1/jobs/{job_id}/tasks/{task}/logs"
    assert client.get(url, headers=H(ALICE)).json()["data"] == "attempt two\n"
    first = client.get(url, params={"attempt": 1}, headers=H(ALICE)).json()
    assert (first["data"], first["ended"]) == ("attempt one\n", True)
    listing = client.get(f"/v1/jobs/{job_id}/logs", headers=H(ALICE)).json()["logs"]
    assert [(e["attempt"], e["ended"]) for e in listing] == [(1, True), (2, False)]


def test_rotated_output_reports_what_was_dropped(api):
    client, svc, executor = api
    job_id, (task,) = started(client, svc, ALICE, job("a", "ads.prod", 1, {"cpu": 1}))
    executor.output(task, 1, "x" * 3000 + "tail\n")  # a cap of 2048: segments of 1024
    got = client.get(f"/v1/jobs/{job_id}/tasks/{task}/logs", headers=H(ALICE)).json()
    # 3005 bytes = 2 full segments + 957: the last two kept, the first dropped
    assert (got["offset"], got["dropped"], got["next_offset"]) == (1024, 1024, 3005)
    assert got["data"].endswith("tail\n")


def test_another_tenants_job_and_unknown_tasks_and_attempts_are_404(api):
    client, svc, executor = api
    job_id, (task,) = started(client, svc, ALICE, job("a", "ads.prod", 1, {"cpu": 1}))
    executor.output(task, 1, "secret\n")
    url = f"/v1/jobs/{job_id}/tasks/{task}/logs"
    for path in (f"/v1/jobs/{job_id}/logs", url):  # bob does not see alice's job, nor learns it exists
        response = client.get(path, headers=H(BOB))
        assert response.status_code == 404 and response.json()["errors"][0]["field"] == "job_id"
    assert client.get(url, headers=H(ADMIN)).json()["data"] == "secret\n"  # the admin sees every job
    cases = [(f"/v1/jobs/{job_id + 100}/logs", {}, "job_id"), (f"/v1/jobs/{job_id}/tasks/{task + 100}/logs", {},
             "task_id"), (url, {"attempt": 2}, "attempt")]
    for path, params, field in cases:
        response = client.get(path, params=params, headers=H(ALICE))
        assert response.status_code == 404, (path, params)
        assert response.json()["errors"][0]["field"] == field
    assert client.get(url, params={"limit": 0}, headers=H(ALICE)).status_code == 422
    assert client.get(f"/v1/jobs/{job_id}/logs").status_code == 401


def test_a_task_that_has_not_started_has_no_attempt_yet(api):
    client, _svc, _executor = api
    (job_id,) = client.post("/v1/jobs", json={"jobs": [job("a", "ads.prod", 1, {"cpu": 1})]},
                            headers=H(ALICE)).json()["ids"]
    (task,) = [t["id"] for t in client.get(f"/v1/jobs/{job_id}", headers=H(ALICE)).json()["tasks"]]
    # (no scheduling pass ran: the task is pending)
    response = client.get(f"/v1/jobs/{job_id}/tasks/{task}/logs", headers=H(ALICE))
    assert response.status_code == 404 and response.json()["errors"][0]["field"] == "attempt"
    assert client.get(f"/v1/jobs/{job_id}/logs", headers=H(ALICE)).json() == {"job": job_id, "logs": []}


# --- the client: fairshare logs ----------------------------------------------------------------------
@pytest.fixture
def cli_on(api, monkeypatch):
    """``fairshare logs`` with its requests sent to the app (as ALICE); the polls' waits
    run ``before_wait`` (the test moves the service on) instead of sleeping."""
    from fairshare import client as client_module
    from fairshare.live import cli as live_cli

    client, svc, executor = api
    waits: list = []

    def request(self, method, path, body=None, *, headers=None, answered=()):
        response = client.request(method, path, headers=H(ALICE))
        if response.status_code >= 400:
            raise client_module._refusal(response.status_code, "", response.content, response.headers)
        return response.json()

    monkeypatch.setattr(client_module.Client, "request", request)
    monkeypatch.setenv("FAIRSHARE_SERVER", "http://testserver")
    monkeypatch.setenv("FAIRSHARE_TOKEN", ALICE)
    monkeypatch.setattr(live_cli, "_sleep", lambda s: waits.pop(0)())
    return client, svc, executor, waits


def test_logs_prints_each_tasks_latest_attempt_under_a_header(cli_on, capsys):
    from fairshare.cli import main

    client, svc, executor, _waits = cli_on
    job_id, (t1, t2) = started(client, svc, ALICE, job("a", "ads.prod", 2, {"cpu": 1}))
    executor.output(t1, 1, "one\n")
    executor.output(t2, 1, "two\n")
    assert main(["logs", str(job_id)]) == 0
    assert capsys.readouterr().out == f"==> task {t1} (attempt 1) <==\none\n\n==> task {t2} (attempt 1) <==\ntwo\n"
    assert main(["logs", str(job_id), str(t2)]) == 0
    assert capsys.readouterr().out == "two\n"  # one task: no header
    assert main(["logs", str(job_id), "--attempt", "1"]) == 2
    assert "--attempt: needs TASK" in capsys.readouterr().err


def test_logs_follow_prints_new_output_until_the_attempt_ends(cli_on, capsys, tmp_path):
    from fairshare.cli import main

    client, svc, executor, waits = cli_on
    job_id, (task,) = started(client, svc, ALICE, job("a", "ads.prod", 1, {"cpu": 1}))
    writer = OutputWriter(tmp_path / "out", task, 1, max_bytes=MIN_MAX_BYTES)
    writer.write(b"begin\n")

    def more():  # (the first wait: more output, still running)
        writer.write(b"middle\n")

    def end():  # (the second: the last line, then the end recorded)
        writer.write(b"end\n")
        writer.close()
        executor.finish(task)
        svc.step()

    waits.extend([more, end])
    assert main(["logs", str(job_id), str(task), "--follow"]) == 0
    assert capsys.readouterr().out == "begin\nmiddle\nend\n"
    assert waits == []  # it stopped at the end, after exactly two waits


# --- serve's log lines -----------------------------------------------------------------------------
def test_json_log_lines_carry_time_level_logger_message_and_extra_fields():
    import json
    import logging

    from fairshare.live.cli import JsonLogFormatter

    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, "GET %s %d", ("/v1/jobs", 200), None)
    record.client = "127.0.0.1"  # (an extra field, as log.info(..., extra={...}) sets it)
    doc = json.loads(JsonLogFormatter().format(record))
    assert {k: doc[k] for k in ("level", "logger", "message", "client")} == \
        {"level": "info", "logger": "uvicorn.access", "message": "GET /v1/jobs 200", "client": "127.0.0.1"}
    assert doc["time"].endswith("Z") and "T" in doc["time"]
    assert "args" not in doc and "msg" not in doc  # (the record's own attributes are not extra)


def test_serve_logging_puts_every_logger_on_one_handler_at_the_level(monkeypatch):
    import logging

    from fairshare.live.cli import JsonLogFormatter, configure_logging

    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("info", "text")
        configure_logging("warning", "json")  # replaces the first: one handler of ours
        (handler,) = [h for h in root.handlers if h.get_name() == "fairshare"]
        assert isinstance(handler.formatter, JsonLogFormatter) and root.level == logging.WARNING
        assert all(h in root.handlers for h in saved[0] if h.get_name() != "fairshare")  # others (pytest's) stay
        assert logging.getLogger("uvicorn.error").level == logging.WARNING
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
