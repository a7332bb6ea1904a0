"""``fairshare.client.Client`` (issue 19, "Fast, light clients"): against a real serve API
(uvicorn in a thread, the service on ``ManualExecutor``: no Ray) for jobs, queues and
status; against ``FakeLogs``, a standard-library server written from the task-output
contract (docs/live.md, "Task output"), for ``logs``; over https with a CA file; and
without numpy, scipy, PyYAML, FastAPI or pydantic loaded."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from live_helpers import ADMIN, ALICE, BOB, api_in_thread, job, wait_for
from fairshare.cli import main
from fairshare.client import Client, ClientError, Job, Queue, Status, Unreachable

SRC = Path(__file__).resolve().parents[1] / "src"


# --- import weight -------------------------------------------------------------------------------
def test_importing_the_client_loads_nothing_heavy():
    heavy = ("numpy", "scipy", "yaml", "fastapi", "pydantic", "starlette", "ray", "matplotlib",
             "fairshare.policies", "fairshare.engine", "fairshare.live")
    code = ("import json, sys; from fairshare.client import Client; "
            f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r} or m in {heavy!r} "
            f"or m.startswith({heavy!r}))))")
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(SRC)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_the_import_check_sees_a_heavy_module():
    code = "import sys, yaml; from fairshare.client import Client; print('yaml' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(SRC)),
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True"


# --- against a real serve API --------------------------------------------------------------------
@pytest.fixture
def api(tmp_path):
    with api_in_thread(tmp_path / "fs.db") as running:
        yield running


def test_submit_jobs_job_cancel_wait(api, tmp_path):
    url, svc = api
    alice = Client(url, ALICE)
    result = alice.submit([job("etl", "ads.prod", 2, {"cpu": 1}), job("mic", "ads.test", 1, {"cpu": 1, "mic": 1})])
    assert result.ids == (1, 2) and result.idempotency_key
    jobs = alice.jobs()
    assert [(j.id, j.name, j.queue, j.tenant, j.tasks_total) for j in jobs] == [
        (1, "etl", "ads.prod", "alice", 2), (2, "mic", "ads.test", "alice", 1)]
    assert all(isinstance(j, Job) and not j.terminal for j in jobs)
    wait_for(lambda: len(svc.executor.running) == 3, 20, "the three tasks to start")
    detail = alice.job(1)
    assert [t.task_class for t in detail.tasks] == ["main", "main"]  # (a task class without a name)
    assert detail.tasks_next is None
    assert detail.raw["id"] == 1 and detail.weight == 1.0
    assert len(alice.job(1, max_tasks=1).tasks) == 1 and alice.job(1, max_tasks=1).tasks_next is not None
    for task_id in [t.id for t in detail.tasks]:
        svc.executor.finish(task_id)
    assert [j.state for j in alice.cancel([2])] == ["cancelled"]
    done = alice.wait([1, 2], timeout_s=20, poll_s=0.05)
    assert [(j.id, j.state) for j in done] == [(1, "succeeded"), (2, "cancelled")]
    # a job file by path: read with the scenario loader's parser
    jobfile = tmp_path / "jobs.json"
    jobfile.write_text(json.dumps({"jobs": [job("late", "ads", 1, {"cpu": 1})]}))
    assert alice.submit(jobfile).ids == (3,)


def test_refusals_carry_the_status_and_the_field_errors(api, tmp_path):
    url, _ = api
    with pytest.raises(ClientError) as refused:
        Client(url, ALICE).submit([job("x", "dev", 1, {"cpu": 1})])
    assert refused.value.status == 403  # (not granted)
    assert [e.field for e in refused.value.errors] == ["jobs[0].queue"]
    with pytest.raises(ClientError) as other:
        Client(url, BOB).cancel(1)
    assert other.value.status == 404 and other.value.errors[0].field == "id"
    with pytest.raises(ClientError) as bad_token:
        Client(url, "wrong").jobs()
    assert bad_token.value.status == 401
    (tmp_path / "bad.yaml").write_text("jobs: [\n")
    with pytest.raises(ClientError) as bad_file:
        Client(url, ALICE).submit(tmp_path / "bad.yaml")
    assert bad_file.value.status is None and "invalid YAML at line 2" in bad_file.value.errors[0].reason


@pytest.mark.parametrize("url, token, field", [("ftp://x", "t", "url"), ("http://x", "", "token")])
def test_the_constructor_names_a_bad_argument(url, token, field):
    with pytest.raises(ClientError, match=f"^{field}: "):
        Client(url, token)


def test_queues_set_queue_and_status(api):
    url, svc = api
    queues = Client(url, BOB).queues()
    assert list(queues) == ["ads", "ads.prod", "ads.test", "dev"]
    assert all(isinstance(q, Queue) for q in queues.values()) and queues["dev"].weight == 1.0
    admin = Client(url, ADMIN)
    after = admin.set_queue("dev", weight=3, limit={"cpu": 2})
    assert after["dev"].weight == 3 and after["dev"].limit == {"cpu": 2.0}
    after = admin.set_queue("dev", guarantee={"cpu": 1})  # the limit left out: kept
    assert after["dev"].guarantee == {"cpu": 1.0} and after["dev"].limit == {"cpu": 2.0}
    assert admin.set_queue("dev", limit=None)["dev"].limit == {}
    with pytest.raises(ClientError, match="nothing to change"):
        admin.set_queue("dev")
    with pytest.raises(ClientError) as refused:
        Client(url, BOB).set_queue("dev", weight=2)
    assert refused.value.status == 403
    status = Client(url, BOB).status()
    assert isinstance(status, Status) and status.health == "ok" and status.policy == "hdrf"
    assert [n.name for n in status.nodes] == ["cpu-node", "mic-node", "gpu-node"] and all(n.alive for n in status.nodes)
    assert status.raw["status"]["policy"] == "hdrf" and status.preemptions_total is None


def test_wait_gives_up_after_its_timeout(api):
    url, _ = api
    client = Client(url, ALICE)
    client.submit([job("etl", "ads.prod", 1, {"cpu": 1})])
    with pytest.raises(TimeoutError, match="jobs 1 still running after 0.2 s"):
        client.wait(1, timeout_s=0.2, poll_s=0.05)


def test_submit_retries_with_one_key_then_gives_up(monkeypatch):
    # nothing listens: every try is a lost connection; the waits double
    from live_helpers import free_port

    waits, told = [], []
    client = Client(f"http://127.0.0.1:{free_port()}", ALICE, retries=3, sleep=waits.append,
                    on_retry=lambda message, wait_s: told.append(message))
    with pytest.raises(Unreachable, match="after 3 retries"):
        client.submit([job("x", "ads", 1, {"cpu": 1})])
    assert waits == [0.5, 1.0, 2.0] and len(told) == 3


# --- the task-output contract, on a fake server ----------------------------------------------------
class FakeLogs:
    """A server of the logs routes as the contract says (docs/live.md, "Task output"), and
    of ``GET /v1/jobs/{id}``'s state, for one job of alice's. ``outputs[(task, attempt)]``:
    the attempt's whole output as written (``kept_from``: the first byte rotation kept)."""

    def __init__(self, tasks: int):
        self.tasks = tasks
        self.outputs: dict[tuple[int, int], dict] = {}
        self.job_state = "running"
        self.asked: list[str] = []
        self.lock = threading.Lock()

    def write(self, task: int, attempt: int, text: str, *, ended: bool = False, kept_from: int = 0) -> None:
        with self.lock:
            out = self.outputs.setdefault((task, attempt), {"data": b"", "ended": False, "kept_from": 0})
            out["data"] += text.encode()
            out["ended"] = ended
            out["kept_from"] = kept_from

    def answer(self, path: str, query: dict[str, str], token: str | None) -> tuple[int, dict]:
        self.asked.append(path + ("?" + urllib.parse.urlencode(query) if query else ""))
        if token != f"Bearer {ALICE}":
            return 401, {"errors": [{"field": "Authorization", "reason": "unknown token"}]}
        parts = path.strip("/").split("/")
        if parts[:2] != ["v1", "jobs"] or len(parts) < 3 or parts[2] != "1":
            return 404, {"errors": [{"field": "job", "reason": "no such job"}]}
        with self.lock:
            if len(parts) == 3:
                return 200, {"id": 1, "name": "j", "queue": "ads", "tenant": "alice", "state": self.job_state,
                             "tasks_total": self.tasks, "tasks_done": 0, "tasks_succeeded": 0, "tasks_running": 0,
                             "tasks_failed": 0, "submitted_at": 0.0, "finished_at": None, "weight": 1.0,
                             "spec": {}, "tasks": [], "tasks_next": None}
            if parts[3:] == ["logs"]:
                return 200, {"job": 1, "logs": [
                    {"task": t, "attempt": a, "bytes": len(o["data"]) - o["kept_from"], "dropped": o["kept_from"],
                     "ended": o["ended"]} for (t, a), o in sorted(self.outputs.items())]}
            task = int(parts[4])
            attempts = sorted(a for t, a in self.outputs if t == task)
            if not attempts:
                return 404, {"errors": [{"field": "task", "reason": f"no output of task {task}"}]}
            attempt = int(query.get("attempt", attempts[-1]))
            if (task, attempt) not in self.outputs:
                return 404, {"errors": [{"field": "attempt", "reason": f"no attempt {attempt}"}]}
            out = self.outputs[task, attempt]
            limit = min(int(query.get("limit", 65536)), 1048576)
            start = max(int(query.get("offset", 0)), out["kept_from"])
            data = out["data"][start:start + limit]
            return 200, {"job": 1, "task": task, "attempt": attempt, "offset": start,
                         "next_offset": start + len(data), "dropped": out["kept_from"],
                         "data": data.decode("utf-8", "replace"), "ended": out["ended"]}

    def serve(self, tls: ssl.SSLContext | None = None):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                status, doc = fake.answer(url.path, dict(urllib.parse.parse_qsl(url.query)),
                                          self.headers.get("Authorization"))
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            server.socket = tls.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


@pytest.fixture
def fake():
    logs = FakeLogs(tasks=2)
    server = logs.serve()
    logs.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield logs
    server.shutdown()
    server.server_close()


def test_logs_reads_each_tasks_latest_attempt_page_by_page(fake):
    fake.write(1, 1, "first try\n", ended=True)
    fake.write(1, 2, "x" * 70_000 + "\n", ended=True)  # more than one 65,536-byte page
    fake.write(2, 1, "two\n")
    chunks = list(Client(fake.url, ALICE).logs(1))
    assert [(c.task, c.attempt, c.offset) for c in chunks] == [(1, 2, 0), (1, 2, 65_536), (2, 1, 0)]
    assert "".join(c.data for c in chunks) == "x" * 70_000 + "\ntwo\n"
    # one task, an older attempt by number
    assert [c.data for c in Client(fake.url, ALICE).logs(1, 1, attempt=1)] == ["first try\n"]


def test_logs_says_what_rotation_dropped(fake):
    fake.write(1, 1, "0123456789tail\n", ended=True, kept_from=10)
    [chunk] = Client(fake.url, ALICE).logs(1, 1)
    assert (chunk.offset, chunk.skipped, chunk.data) == (10, 10, "tail\n")


def test_logs_follow_polls_until_every_attempt_and_the_job_ended(fake):
    fake.write(1, 1, "a")
    script = [lambda: fake.write(1, 1, "b"), lambda: fake.write(2, 1, "late\n"),  # task 2 starts later
              lambda: fake.write(1, 1, "c\n", ended=True), lambda: fake.write(2, 1, "", ended=True),
              lambda: setattr(fake, "job_state", "succeeded")]
    sleeps = []

    def sleep(seconds):  # each poll's wait moves the fake server on by one step
        sleeps.append(seconds)
        script.pop(0)()

    chunks = list(Client(fake.url, ALICE, sleep=sleep).logs(1, follow=True, poll_s=0.5))
    assert "".join(c.data for c in chunks if c.task == 1) == "abc\n"
    assert "".join(c.data for c in chunks if c.task == 2) == "late\n"
    assert script == [] and set(sleeps) == {0.5}


def test_logs_follow_of_one_task_stops_when_it_ended(fake):
    fake.write(2, 1, "x")
    script = [lambda: fake.write(2, 1, "y\n", ended=True)]
    client = Client(fake.url, ALICE, sleep=lambda s: script.pop(0)())
    assert "".join(c.data for c in client.logs(1, 2, follow=True)) == "xy\n"


@pytest.mark.parametrize("call, status, field", [
    (lambda c: list(c.logs(2)), 404, "job"),
    (lambda c: list(c.logs(1, 9)), 404, "task"),
    (lambda c: list(c.logs(1, 1, attempt=5)), 404, "attempt"),
])
def test_logs_unknown_job_task_or_attempt_is_a_404_with_its_field(fake, call, status, field):
    fake.write(1, 1, "x", ended=True)
    with pytest.raises(ClientError) as refused:
        call(Client(fake.url, ALICE))
    assert refused.value.status == status and refused.value.errors[0].field == field


def test_the_logs_command_prints_headers_for_several_tasks(fake, capsys):
    fake.write(1, 1, "one", ended=True)  # (no final newline: the next header starts a line)
    fake.write(2, 3, "three\n", ended=True)
    assert main(["logs", "1", "--server", fake.url, "--token", ALICE]) == 0
    assert capsys.readouterr().out == ("==> task 1 (attempt 1) <==\none\n\n"
                                       "==> task 2 (attempt 3) <==\nthree\n")
    assert main(["logs", "1", "2", "--server", fake.url, "--token", ALICE]) == 0
    assert capsys.readouterr().out == "three\n"  # one task asked for: no header
    assert main(["logs", "1", "--attempt", "1", "--server", fake.url, "--token", ALICE]) == 2
    assert "--attempt: needs TASK" in capsys.readouterr().err


def test_the_logs_command_of_a_one_task_job_has_no_header(capsys):
    fake = FakeLogs(tasks=1)
    server = fake.serve()
    try:
        fake.write(1, 1, "0123456789rest\n", ended=True, kept_from=10)
        assert main(["logs", "1", "--server", f"http://127.0.0.1:{server.server_address[1]}", "--token", ALICE]) == 0
        out = capsys.readouterr()
        assert out.out == "rest\n"
        assert "10 bytes of task 1 (attempt 1) were dropped (rotated) before byte 10" in out.err
    finally:
        server.shutdown()
        server.server_close()


# --- https with a CA file ---------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_https_with_a_ca_file(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    fake = FakeLogs(tasks=1)
    server = fake.serve(tls)
    url = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        fake.write(1, 1, "secure\n", ended=True)
        assert [c.data for c in Client(url, ALICE, ca_cert=cert).logs(1)] == ["secure\n"]
        with pytest.raises(Unreachable, match="cannot trust .*--ca-cert"):
            Client(url, ALICE).log_entries(1)  # the system's authorities do not know it
        with pytest.raises(ClientError, match=f"^ca_cert: cannot use {tmp_path / 'missing.pem'}"):
            Client(url, ALICE, ca_cert=tmp_path / "missing.pem")
    finally:
        server.shutdown()
        server.server_close()
