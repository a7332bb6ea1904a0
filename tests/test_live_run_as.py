"""Tenants who cannot touch each other: ``run_as`` per tenant (config validation, serve's
refusals, the node agent starting commands as the tenant's user in its job's directory),
serve's files closed to other users, and HTTPS (``--tls-cert``/``--tls-key``, the
clients' ``--ca-cert``). docs/live.md, "Trust model".

The two-tenant test creates two throwaway users (``useradd``) and drives the node agent
without Ray; it needs root."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from live_helpers import ADMIN, ALICE, ManualExecutor, config_doc, free_port, wait_for
from fairshare.cli import main
from fairshare.engine.scheduler import Launch
from fairshare.live.commands import CommandBook
from fairshare.live.config import TaskCommand, parse_config
from fairshare.live.isolation import create_private, prepare_workdir
from fairshare.live.node_agent import REFUSED, STARTED, NodeAgent
from fairshare.model.errors import ScenarioError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="users, process groups: Linux")

needs_root_and_useradd = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("userdel") is None,
    reason="the two-tenant test creates operating-system users: it needs root and useradd/userdel")
OPENSSL = "/usr/bin/openssl" if os.path.exists("/usr/bin/openssl") else shutil.which("openssl")
needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="the TLS tests make a self-signed certificate "
                                                           "with openssl, which is not installed")


def some_user() -> str:
    """An existing unprivileged user of this host (``nobody`` on most)."""
    return next(p.pw_name for p in sorted(pwd.getpwall(), key=lambda p: p.pw_name != "nobody") if p.pw_uid != 0)


def run_as_doc(alice: str | None, bob: str | None = None) -> dict:
    doc = config_doc()
    for tenant, user in zip(doc["auth"]["tenants"], (alice, bob)):
        if user is not None:
            tenant["run_as"] = user
    return doc


def write(path: Path, doc: dict, mode: int = 0o600) -> str:
    path.write_text(yaml.safe_dump(doc))
    path.chmod(mode)
    return str(path)


# --- the config ------------------------------------------------------------------------------------
def test_run_as_names_an_existing_unprivileged_user():
    user = some_user()
    config = parse_config(run_as_doc(user), "c.yaml")
    assert dict(config.auth.run_as) == {"alice": user}  # bob has none: runs as serve's user


@pytest.mark.parametrize("user, reason", [
    ("no-such-user-fs19", "no user 'no-such-user-fs19' on this host (tenant 'bob'"),
    ("root", "'root' is root (uid 0)"),
    (7, "must be the name of an operating-system user, got 7"),
    ("", "must be the name of an operating-system user"),
])
def test_run_as_refusals_name_the_tenant_field(user, reason):
    with pytest.raises(ScenarioError) as exc:
        parse_config(run_as_doc(None, user), "c.yaml")
    problems = {e.path: e.reason for e in exc.value.errors}
    assert list(problems) == ["auth.tenants[1].run_as"]
    assert reason in problems["auth.tenants[1].run_as"]


def test_the_command_book_gives_run_as_tenants_their_user_and_job_directory(tmp_path):
    book = CommandBook(str(tmp_path), run_as={"alice": "nobody"}, workdir="/srv/work")
    book.register("7", "alice", (TaskCommand(("true",)),))
    book.register("8", "bob", (TaskCommand(("true",)),))
    alice = book.spec(Launch(1, "7", "c0", 0, "n1", (1.0,)))
    bob = book.spec(Launch(2, "8", "c0", 0, "n1", (1.0,)))
    assert (alice.user, alice.cwd) == ("nobody", "/srv/work/7")
    assert (bob.user, bob.cwd) == (None, str(tmp_path))  # without run_as: serve's directory, as before
    with pytest.raises(ValueError, match="workdir"):
        CommandBook(run_as={"alice": "nobody"})


# --- serve's refusals (before anything starts) -----------------------------------------------------
def serve(tmp_path: Path, config: str, *extra: str) -> int:
    return main(["serve", "--config", config, "--db", str(tmp_path / "fs.db"), *extra])


def test_serve_with_run_as_must_run_as_root(tmp_path, capsys, monkeypatch):
    config = write(tmp_path / "c.yaml", run_as_doc(some_user()))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert serve(tmp_path, config, "--workdir", str(tmp_path / "work")) == 2
    err = capsys.readouterr().err
    assert "--config: tenant 'alice' has run_as" in err and "serve must run as root" in err
    assert "uid 1000" in err and "Traceback" not in err


@pytest.mark.skipif(os.geteuid() != 0, reason="serve's run_as checks after the first need root")
def test_serve_with_run_as_needs_a_workdir_and_private_files(tmp_path, capsys):
    config = write(tmp_path / "c.yaml", run_as_doc(some_user()))
    assert serve(tmp_path, config) == 2
    assert "--workdir: is required when a tenant has run_as" in capsys.readouterr().err
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert serve(tmp_path, config, "--workdir", str(shared)) == 2
    assert f"--workdir: {shared} may be written by other users (mode 0777" in capsys.readouterr().err
    os.chmod(config, 0o644)
    assert serve(tmp_path, config, "--workdir", str(tmp_path / "work")) == 2
    err = capsys.readouterr().err
    assert f"--config: {config} is open to other users (mode 0644)" in err and f"chmod 600 {config}" in err
    assert stat.S_IMODE((tmp_path / "work").stat().st_mode) == 0o711  # made for the job directories
    assert not (tmp_path / "fs.db").exists()  # refused before the database was created


def test_serve_without_run_as_warns_of_an_open_config_and_makes_its_database_private(tmp_path, capsys, caplog):
    import sqlite3

    config = write(tmp_path / "c.yaml", config_doc(), mode=0o644)
    sqlite3.connect(tmp_path / "other.db").executescript("CREATE TABLE t(x)")  # refused after the checks
    os.chmod(tmp_path / "other.db", 0o600)
    assert main(["serve", "--config", config, "--db", str(tmp_path / "other.db")]) == 2
    assert "--db: " in capsys.readouterr().err
    assert f"{config} is open to other users (mode 0644)" in caplog.text
    # a new database is created closed to other users (here refused just after: another serve holds it)
    from fairshare.live.cli import _lock_database

    held = _lock_database(str(tmp_path / "new.db"))
    try:
        assert main(["serve", "--config", config, "--db", str(tmp_path / "new.db")]) == 2
        assert "is in use by another fairshare serve" in capsys.readouterr().err
    finally:
        held.close()
    assert stat.S_IMODE((tmp_path / "new.db").stat().st_mode) == 0o600


def test_a_token_file_open_to_others_is_warned_about(tmp_path, capsys):
    token = tmp_path / "token"
    token.write_text(ALICE)
    token.chmod(0o644)
    assert main(["jobs", "--server", f"http://127.0.0.1:{free_port()}", "--token-file", str(token)]) == 1
    assert f"--token-file: {token} may be read by other users (chmod 600 {token})" in capsys.readouterr().err
    token.chmod(0o600)
    assert main(["jobs", "--server", f"http://127.0.0.1:{free_port()}", "--token-file", str(token)]) == 1
    assert "--token-file" not in capsys.readouterr().err


def test_an_agent_that_is_not_root_refuses_a_run_as_command(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    agent = NodeAgent("n1")
    answer, reason = agent.run(1, 1, 1, ["true"], False, {}, str(tmp_path / "7"), some_user())
    assert answer == REFUSED and "the node agent runs as uid 1000, not root" in reason
    assert not (tmp_path / "7").exists()


# --- two tenants under run_as: the done-when test -------------------------------------------------
@pytest.fixture
def two_users():
    names = [f"fs19t{os.getpid() % 100000}{x}" for x in "ab"]
    for name in names:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True,
                       capture_output=True)
    try:
        yield names
    finally:
        for name in names:
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)  # (only these users' processes)
            subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def open_base():
    """A directory every user may pass through (0755), unlike pytest's tmp_path (its
    parent is 0700): what keeps the tenants out below is then the files' own modes."""
    base = Path(tempfile.mkdtemp(prefix="fs19-run-as-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


PROBE = """
probe() {{ if eval "$2" >/dev/null 2>&1; then echo "$1: allowed"; else echo "$1: denied"; fi; }}
probe database "cat {db}"
probe database-wal "cat {db}-wal"
probe public-file "cat {public}"
probe other-job-file "cat {other}/secret"
probe other-job-list "ls {other}"
probe own-job-file "echo mine > mine && cat mine"
probe signal-0 "kill -0 {pid}"
probe signal-term "kill -TERM {pid}"
"""


@needs_root_and_useradd
def test_two_tenants_under_run_as_cannot_touch_each_other_nor_serve(two_users, open_base):
    from fairshare.live.store import Store

    user_a, user_b = two_users
    config = parse_config(run_as_doc(user_a, user_b), "c.yaml")
    # serve's state, made as cmd_serve makes it, in a directory others may pass through
    state = open_base / "state"
    state.mkdir(mode=0o755)
    db = str(state / "fs.db")
    create_private(db)
    store = Store(db)  # (WAL: the -wal file exists while it is open)
    (state / "public.txt").write_text("for everyone\n")  # the control: a file open to all
    (state / "public.txt").chmod(0o644)
    workdir = str(open_base / "work")
    prepare_workdir(workdir)
    book = CommandBook(str(state), run_as=config.auth.run_as, workdir=workdir)
    book.register("1", "alice", (TaskCommand(("echo alice-secret > secret; id -u; id -G; pwd; "
                                              "echo $HOME $USER $LOGNAME; exec sleep 60",), shell=True),))
    agent = NodeAgent("n1")
    alice = book.spec(Launch(1, "1", "c0", 0, "n1", (1.0,)))
    answer, pid = agent.run(1, alice.attempt, 1, list(alice.argv), alice.shell, dict(alice.env), alice.cwd,
                            alice.user)
    assert answer == STARTED, pid
    try:
        secret = Path(workdir) / "1" / "secret"
        wait_for(secret.exists, 20, "alice's command to write its file")
        uid_a = pwd.getpwnam(user_a).pw_uid
        st = os.stat(Path(workdir) / "1")
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (uid_a, 0o700)
        assert os.stat(secret).st_uid == uid_a
        assert os.path.exists(f"{db}-wal")
        probe = PROBE.format(db=db, public=state / "public.txt", other=Path(workdir) / "1", pid=pid)
        book.register("2", "bob", (TaskCommand((probe,), shell=True),))
        bob = book.spec(Launch(2, "2", "c0", 0, "n1", (1.0,)))
        assert agent.run(2, bob.attempt, 1, list(bob.argv), bob.shell, dict(bob.env), bob.cwd, bob.user)[0] == STARTED
        deadline = time.monotonic() + 30
        while not (done := [e for e in agent.reports(1, [], 0, 1.0)[1] if e[0] == 2]):
            assert time.monotonic() < deadline, "bob's command did not end"
        (_, _, code, output, _), = done
        answers = dict(line.split(": ") for line in output.splitlines())
        assert code == 0, output
        assert answers == {"database": "denied", "database-wal": "denied", "public-file": "allowed",
                           "other-job-file": "denied", "other-job-list": "denied", "own-job-file": "allowed",
                           "signal-0": "denied", "signal-term": "denied"}
        os.kill(int(pid), 0)  # alice's command still runs (as root, the test may signal it)
        assert os.stat(Path(workdir) / "2").st_uid == pwd.getpwnam(user_b).pw_uid
    finally:
        agent.kill(1, 1, 1)
        store.close()
    deadline = time.monotonic() + 60  # (a loaded machine: the killed command's end may take a while)
    while not (ends := [e for e in agent.reports(1, [], 0, 1.0)[1] if e[0] == 1]):
        assert time.monotonic() < deadline, "alice's command did not end after its kill"
    (end,) = ends
    lines = end[3].splitlines()
    entry = pwd.getpwnam(user_a)
    assert lines[0] == str(entry.pw_uid)
    assert sorted(map(int, lines[1].split())) == sorted(set(os.getgrouplist(user_a, entry.pw_gid)))  # not root's
    assert lines[2:4] == [f"{workdir}/1", f"{entry.pw_dir} {user_a} {user_a}"]


# --- HTTPS -----------------------------------------------------------------------------------------
@pytest.fixture
def certificate(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return str(cert), str(key)


@needs_openssl
def test_serve_tls_refusals_name_the_flag(tmp_path, capsys, certificate):
    cert, key = certificate
    config = write(tmp_path / "c.yaml", config_doc())
    other_key = tmp_path / "other.pem"
    subprocess.run([OPENSSL, "genrsa", "-out", str(other_key), "2048"], check=True, capture_output=True)
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    for extra, message in [
        (["--tls-cert", cert], "--tls-key: is required with --tls-cert"),
        (["--tls-key", key], "--tls-cert: is required with --tls-key"),
        (["--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", key], "--tls-cert: cannot read"),
        (["--tls-cert", cert, "--tls-key", str(tmp_path / "missing.pem")], "--tls-key: cannot read"),
        (["--tls-cert", str(tmp_path / "junk.pem"), "--tls-key", key], "--tls-cert: "),
        (["--tls-cert", cert, "--tls-key", str(other_key)], "--tls-key: "),
    ]:
        assert serve(tmp_path, config, *extra) == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (extra, err)


@needs_openssl
def test_the_clients_speak_https_to_serve_with_a_certificate(tmp_path, capsys, certificate):
    import uvicorn

    from fairshare.live.api import create_app
    from fairshare.live.cli import tls_options
    from fairshare.live.service import LiveService
    from fairshare.live.store import Store

    cert, key = certificate
    config = parse_config(config_doc(), "c.yaml")
    svc = LiveService(config, Store(tmp_path / "fs.db"), ManualExecutor(config.nodes), policy="hdrf")
    svc.start()
    port = free_port()
    # serve's uvicorn options for --tls-cert/--tls-key
    srv = uvicorn.Server(uvicorn.Config(create_app(svc), host="127.0.0.1", port=port, log_level="error",
                                        **tls_options(cert, key)))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: srv.started, 20, "uvicorn to start")
        url = f"https://127.0.0.1:{port}"
        assert main(["queues", "--server", url, "--token", ADMIN, "--ca-cert", cert, "--format", "json"]) == 0
        assert '"ads"' in capsys.readouterr().out
        assert main(["jobs", "--server", url, "--token", ALICE]) == 1  # not trusted without --ca-cert
        err = capsys.readouterr().err
        assert f"cannot trust {url}" in err and "--ca-cert FILE" in err
        assert main(["jobs", "--server", url, "--token", ALICE, "--ca-cert", str(tmp_path / "no.pem")]) == 2
        assert f"--ca-cert: cannot use {tmp_path / 'no.pem'}" in capsys.readouterr().err
        assert main(["jobs", "--server", url.replace("https", "http"), "--token", ALICE]) == 1  # no plain HTTP
        capsys.readouterr()
    finally:
        srv.should_exit = True
        thread.join(timeout=10)
        svc.stop()


# --- end to end: serve over HTTPS on a local Ray cluster, two run_as tenants -----------------------
E2E_PROBE = """
pid=$(pgrep -u {user_a} -x sleep)
[ -n "$pid" ] || {{ echo "alice's command is not running"; exit 3; }}
for probe in "cat {db}" "cat {workdir}/{job_a}/secret" "ls {workdir}/{job_a}" "kill -0 $pid" "kill $pid"; do
  if eval "$probe" >/dev/null 2>&1; then echo "allowed: $probe"; exit 1; fi
done
[ "$(id -un)" = {user_b} ] && [ "$PWD" = {workdir}/$FAIRSHARE_JOB_ID ] || {{ echo "not {user_b} in its job dir"; exit 4; }}
echo all denied
"""


@pytest.mark.ray
@pytest.mark.slow
@needs_root_and_useradd
@needs_openssl
def test_serve_over_https_runs_each_tenant_as_its_user_apart_from_the_other(two_users, open_base, certificate):
    import json
    import ssl
    import urllib.request

    pytest.importorskip("ray", reason="the live extra (ray) is not installed")
    from live_helpers import BOB, job, serve_env, stop_serve

    user_a, user_b = two_users
    cert, key = certificate
    state = open_base / "state"
    state.mkdir(mode=0o755)
    config = write(state / "cluster.yaml", run_as_doc(user_a, user_b))
    db, workdir, port = state / "fs.db", open_base / "work", free_port()
    log = open(state / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "fairshare", "serve", "--config", config, "--db", str(db),
                             "--port", str(port), "--workdir", str(workdir), "--tls-cert", cert, "--tls-key", key],
                            cwd=state, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=serve_env())
    url = f"https://127.0.0.1:{port}"
    context = ssl.create_default_context(cafile=cert)

    def healthy() -> bool:
        assert proc.poll() is None, (state / "serve.log").read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2, context=context) as resp:
                return json.loads(resp.read())["status"] == "ok"
        except OSError:
            return False

    def client(token: str, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "fairshare", *args, "--server", url, "--token", token,
                               "--ca-cert", cert], capture_output=True, text=True, timeout=60, env=serve_env())
        assert done.returncode == 0, done.stderr
        return done.stdout

    def job_state(token: str, job_id: str) -> dict:
        return json.loads(client(token, "job", job_id, "--format", "json"))

    try:
        wait_for(healthy, 180, "serve to come up", every_s=0.5)
        assert f"listening on {url}" in (state / "serve.log").read_text()
        (state / "a.yaml").write_text(yaml.safe_dump({"jobs": [job("a", "ads.prod", 1, {"cpu": 1}, [
            "sh", "-c", "echo alice-secret > secret; exec sleep 120"])]}))
        job_a = client(ALICE, "submit", str(state / "a.yaml")).strip()
        wait_for(lambda: (workdir / job_a / "secret").exists(), 60, "alice's command to write its file")
        probe = E2E_PROBE.format(user_a=user_a, user_b=user_b, db=db, workdir=workdir, job_a=job_a)
        (state / "b.yaml").write_text(yaml.safe_dump({"jobs": [job("b", "dev", 1, {"cpu": 1}, ["sh", "-c", probe])]}))
        job_b = client(BOB, "submit", str(state / "b.yaml")).strip()
        final = wait_for(lambda: (j := job_state(BOB, job_b))["state"] in ("succeeded", "failed") and j, 90,
                         "bob's job to end", every_s=0.5)
        assert final["state"] == "succeeded", final
        assert job_state(ALICE, job_a)["state"] == "running"  # bob's kill did not reach it
        assert os.stat(workdir / job_a).st_uid == pwd.getpwnam(user_a).pw_uid
        assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
        client(ALICE, "cancel", job_a)
    finally:
        stop_serve(proc)
        log.close()
