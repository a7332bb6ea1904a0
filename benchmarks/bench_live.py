"""Live service benchmark: decisions per second and submit-to-start latency, through the
HTTP API, on a local Ray cluster (``fairshare serve`` as a subprocess, 3 virtual nodes
with 8 CPUs in all, the test config of tests/live_helpers.py).

Three numbers:

1. **submit-to-start latency** on an idle cluster, one 1-task job at a time (N=20):
   ``dispatch``: the job's ``submitted_at`` to its task's ``started_at`` (both stamped by
   the server: accepted and committed -> decided, committed and handed to Ray);
   ``process``: ``submitted_at`` to the moment the task's command itself starts on a Ray
   worker (the command writes its clock), what a user waits for;
   ``client``: the client's POST sent to that process start.
2. **end-to-end decisions/s**: a backlog of short tasks (``true``) drained through Ray,
   8 at a time: ``decisions_total`` over the wall time, twice ("cold" and "warm": with a
   Ray task per task, as before the node agents, the first backlog waited for Ray to
   start a worker process per concurrent task and node; with the agents the two differ
   little).
3. **service-only decisions/s**: the same service loop (store, scheduler, policy) on a
   no-op executor that finishes every task at once, in process, without HTTP or Ray:
   what fairshare itself costs per decision (the SQLite commits included).
4. **submissions/s** through ``POST /v1/jobs``: ``--clients`` keep-alive HTTP/1.1
   connections (asyncio, one request in flight per connection, each with an
   ``Idempotency-Key``) each send ``--per-client`` one-task jobs as fast as the answers
   come, on a cluster filled by a blocker job (so every submitted task stays pending and
   the scheduling loop still takes each arrival; ``--tasks-per-job 0``: jobs of no
   task, which end as they are admitted, so no backlog builds up). Reported: submissions/s over the wall
   time, client-side latency p50/p99/max, every status seen; then a check that every job
   acknowledged with 201 is in ``GET /v1/jobs`` (nothing acknowledged lost, no duplicate).
   ``--server-src DIR`` runs serve from another source tree (e.g. the code before a
   change: ``--server-src /work/base/src --base-config``; ``--base-config`` leaves the
   per-tenant limits out of the config, for a serve that does not know them).
   ``--no-ray``: the same service and HTTP server in a subprocess, on the executor seam
   without Ray (``live_helpers.ManualExecutor``: tasks start and never finish), so the
   Ray cluster's own processes take no CPU from the measurement.

Usage: ``python benchmarks/bench_live.py [--tasks N] [--samples N] [--only submit]
[--clients 32] [--per-client 200] [--tasks-per-job 1] [--no-ray] [--server-src DIR] [--base-config]``;
``--only tasks``: 1 and 2 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from live_helpers import ADMIN, ALICE, BOB, ManualExecutor, config_doc, free_port, job, make_config  # noqa: E402


def http(port: int, method: str, path: str, token: str, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


#: per-tenant limits of the benchmark's config: high enough that the submission benchmark
#: measures the service, not the (default) rate limit
BENCH_LIMITS = {"submit_rate": 100_000, "submit_burst": 100_000, "max_pending_tasks": 1_000_000}


def start_serve(tmp: Path, port: int, server_src: str | None = None, limits: bool = True,
                ray: bool = True) -> subprocess.Popen:
    import yaml

    doc = config_doc()
    if limits:
        doc["auth"]["limits"] = dict(BENCH_LIMITS)
    (tmp / "cluster.yaml").write_text(yaml.safe_dump(doc))
    # this tree's sources unless told otherwise (the subprocess runs in tmp: no relative path)
    env = {**os.environ, "PYTHONPATH": str(Path(server_src).resolve()) if server_src else str(ROOT / "src")}
    if ray:
        argv = [sys.executable, "-m", "fairshare", "serve", "--config", str(tmp / "cluster.yaml"),
                "--db", str(tmp / "fs.db"), "--port", str(port), "--policy", "hdrf"]
    else:
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve-without-ray", str(tmp), str(port)]
    proc = subprocess.Popen(argv, cwd=tmp, stdout=open(tmp / "serve.log", "w"), stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return proc
        except OSError:
            time.sleep(0.3)
    raise SystemExit("serve did not start: " + (tmp / "serve.log").read_text())


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_done(port: int, job_id: int, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        detail = http(port, "GET", f"/v1/jobs/{job_id}", ADMIN)
        if detail["state"] in ("succeeded", "failed", "cancelled"):
            return detail
        time.sleep(0.01)
    raise SystemExit(f"job {job_id} did not finish")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def latency(port: int, tmp: Path, samples: int) -> dict:
    dispatch, process, client = [], [], []
    for k in range(samples):
        stamp = tmp / f"start-{k}.txt"
        cmd = [sys.executable, "-c", f"import time; open({str(stamp)!r}, 'w').write(repr(time.time()))"]
        sent = time.time()
        (job_id,) = http(port, "POST", "/v1/jobs", ALICE, {"jobs": [job(f"l{k}", "ads", 1, {"cpu": 1}, cmd)]})["ids"]
        detail = wait_done(port, job_id)
        started = float(stamp.read_text())
        task = detail["tasks"][0]
        dispatch.append(task["started_at"] - detail["submitted_at"])
        process.append(started - detail["submitted_at"])
        client.append(started - sent)
    # the first sample pays for a cold Ray worker; the rest reuse idle workers
    return {name: {"median_ms": 1000 * statistics.median(v), "p95_ms": 1000 * pct(v, 0.95),
                   "first_ms": 1000 * v[0]} for name, v in
            (("dispatch", dispatch), ("process", process), ("client", client))}


def throughput(port: int, tasks: int) -> dict:
    before = http(port, "GET", "/v1/status", ADMIN)["decisions_total"]
    t0 = time.monotonic()
    half = tasks // 2
    (a,) = http(port, "POST", "/v1/jobs", ALICE, {"jobs": [job("ta", "ads", half, {"cpu": 1}, ["true"])]})["ids"]
    (b,) = http(port, "POST", "/v1/jobs", BOB, {"jobs": [job("tb", "dev", tasks - half, {"cpu": 1}, ["true"])]})["ids"]
    wait_done(port, a, 600)
    wait_done(port, b, 600)
    elapsed = time.monotonic() - t0
    after = http(port, "GET", "/v1/status", ADMIN)["decisions_total"]
    return {"tasks": tasks, "decisions": after - before, "seconds": elapsed, "decisions_per_s": (after - before) / elapsed}


def service_only(tasks: int) -> dict:
    from fairshare.live.auth import Principal
    from fairshare.live.service import LiveService
    from fairshare.live.store import Store

    with tempfile.TemporaryDirectory() as d:
        config = make_config(cpu_node=64, mic_node=32, gpu_node=32)
        ex = ManualExecutor(config.nodes)
        svc = LiveService(config, Store(Path(d) / "fs.db"), ex, policy="hdrf")
        svc.recover()
        admin = Principal("admin", admin=True)
        jobs = [job(f"j{i}", q, tasks // 8, {"cpu": 1}, ["true"]) for i, q in
                enumerate(["ads.prod", "ads.test", "dev", "ads.prod", "ads.test", "dev", "dev", "ads.prod"])]
        svc.submit(admin, {"jobs": jobs})
        t0 = time.perf_counter()
        svc.step()
        while ex.running:
            for task_id in list(ex.running):
                ex.finish(task_id)
            svc.step()
        elapsed = time.perf_counter() - t0
        decisions = svc.status()["decisions_total"]
        return {"tasks": decisions, "seconds": elapsed, "decisions_per_s": decisions / elapsed,
                "cluster_cpus": 128}


async def _submitter(port: int, token: str, queue: str, prefix: str, count: int, tasks_per_job: int,
                     latencies: list[float], statuses: dict[int, int], ids: list[int]) -> None:
    """One keep-alive HTTP/1.1 connection sending ``count`` submissions back to back."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for i in range(count):
            body = json.dumps({"jobs": [job(f"{prefix}-{i}", queue, tasks_per_job, {"cpu": 1}, ["true"])]}).encode()
            head = (f"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
                    f"Content-Type: application/json\r\nIdempotency-Key: {uuid.uuid4()}\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode()
            t0 = time.perf_counter()
            writer.write(head + body)
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            payload = await reader.readexactly(length)
            latencies.append(time.perf_counter() - t0)
            status = int(status_line.split()[1])
            statuses[status] = statuses.get(status, 0) + 1
            if status == 201:
                ids.extend(json.loads(payload)["ids"])
    finally:
        writer.close()


def submissions(port: int, clients: int, per_client: int, tasks_per_job: int = 1) -> dict:
    """Submissions/s and latency of ``clients`` keep-alive connections (module doc, 4)."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    ids: list[int] = []

    async def run() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(
            _submitter(port, (ALICE, BOB)[c % 2], ("ads.prod", "dev")[c % 2], f"c{c}", per_client,
                       tasks_per_job, latencies, statuses, ids) for c in range(clients)))
        return time.perf_counter() - t0

    elapsed = asyncio.run(run())
    listed = {j["id"] for j in http(port, "GET", "/v1/jobs", ADMIN)}
    return {"clients": clients, "submissions": len(latencies), "seconds": round(elapsed, 2),
            "submissions_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": round(1000 * pct(latencies, 0.50), 2), "p99_ms": round(1000 * pct(latencies, 0.99), 2),
            "max_ms": round(1000 * max(latencies), 2), "statuses": statuses,
            "acknowledged": len(ids), "acknowledged_missing_from_store": len(set(ids) - listed),
            "duplicate_ids": len(ids) - len(set(ids))}


def submission_benchmark(port: int, clients: int, per_client: int, tasks_per_job: int = 1) -> None:
    # fill every CPU with a long task, so the submitted tasks stay pending (the loop still
    # admits each arrival and tries to place it)
    (blocker,) = http(port, "POST", "/v1/jobs", ADMIN,
                      {"jobs": [job("blocker", "dev", 8, {"cpu": 1}, ["sleep", "600"])]})["ids"]
    print(f"uptime: {os.getloadavg()}")
    print(f"jobs of {tasks_per_job} task(s) each")
    print(f"warm-up (2 clients x 50): {json.dumps(submissions(port, 2, 50, tasks_per_job))}")
    print(f"uptime: {os.getloadavg()}")
    print(f"submissions, 1 client: {json.dumps(submissions(port, 1, per_client, tasks_per_job))}")
    print(f"uptime: {os.getloadavg()}")
    print(f"submissions, {clients} clients: {json.dumps(submissions(port, clients, per_client, tasks_per_job))}")
    print(f"uptime: {os.getloadavg()}")
    http(port, "POST", f"/v1/jobs/{blocker}/cancel", ADMIN)


def serve_without_ray(tmp: Path, port: int) -> None:
    """``--no-ray``'s server (run as its own process): serve's service, app and socket on
    ``ManualExecutor``, from whichever source tree ``PYTHONPATH`` names."""
    import socket

    import uvicorn

    from fairshare.live import cli
    from fairshare.live.api import create_app
    from fairshare.live.config import load_config
    from fairshare.live.service import LiveService
    from fairshare.live.store import Store

    config = load_config(tmp / "cluster.yaml")
    service = LiveService(config, Store(tmp / "fs.db"), ManualExecutor(config.nodes), policy="hdrf")
    service.start()
    if hasattr(cli, "tune_gc"):  # as this tree's serve does
        cli.tune_gc()
    # the socket as this tree's serve makes it (before the TCP_NODELAY fix: create_server)
    listen = getattr(cli, "listen_socket", None)
    sock = listen("127.0.0.1", port) if listen else socket.create_server(("127.0.0.1", port))
    try:
        uvicorn.Server(uvicorn.Config(create_app(service), log_level="warning")).run(sockets=[sock])
    finally:
        service.stop()


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-without-ray":
        serve_without_ray(Path(sys.argv[2]), int(sys.argv[3]))
        return
    try:
        import fastapi  # noqa: F401
        import ray  # noqa: F401
    except ImportError as exc:
        print(f"bench_live: skipped, the live extra is not installed ({exc}); pip install -e '.[live]'")
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=400, help="backlog for the end-to-end rate (default 400)")
    parser.add_argument("--samples", type=int, default=20, help="latency samples (default 20)")
    parser.add_argument("--only", choices=("submit", "tasks"), default=None,
                        help="run only the submission benchmark (4 in the module doc), or only the task "
                             "numbers through Ray (1 and 2)")
    parser.add_argument("--clients", type=int, default=32, help="keep-alive connections submitting (default 32)")
    parser.add_argument("--per-client", type=int, default=200, help="submissions per connection (default 200)")
    parser.add_argument("--tasks-per-job", type=int, default=1,
                        help="tasks in each submitted job (default 1; 0: jobs that end at once, no backlog)")
    parser.add_argument("--no-ray", action="store_true",
                        help="serve on an executor without Ray (submission benchmark only)")
    parser.add_argument("--server-src", default=None, metavar="DIR",
                        help="run serve with PYTHONPATH=DIR (another source tree, e.g. the code before a change)")
    parser.add_argument("--base-config", action="store_true",
                        help="no per-tenant limits in the config (for a serve that does not know them)")
    args = parser.parse_args()
    if args.only is None:
        print(f"service only (no Ray, no HTTP): {json.dumps(service_only(4000))}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        port = free_port()
        t0 = time.monotonic()
        if args.no_ray and args.only != "submit":
            parser.error("--no-ray needs --only submit (the other numbers are about Ray)")
        proc = start_serve(tmp, port, args.server_src, limits=not args.base_config, ray=not args.no_ray)
        print(f"serve up ({'no Ray' if args.no_ray else 'local Ray cluster of 3 nodes'}) in "
              f"{time.monotonic() - t0:.1f} s")
        try:
            if args.only == "submit":
                submission_benchmark(port, args.clients, args.per_client, args.tasks_per_job)
                return
            lat = latency(port, tmp, args.samples)
            for name, v in lat.items():
                print(f"submit-to-start {name:8s}: median {v['median_ms']:.1f} ms, p95 {v['p95_ms']:.1f} ms, "
                      f"first (cold worker) {v['first_ms']:.1f} ms")
            # the first backlog makes Ray start a worker process per concurrent task on each
            # node (cold); the second reuses them (warm, the steady state of a busy service)
            print(f"end to end through Ray, cold workers: {json.dumps(throughput(port, args.tasks))}")
            print(f"end to end through Ray, warm workers: {json.dumps(throughput(port, args.tasks))}")
            if args.only == "tasks":
                return
            submission_benchmark(port, args.clients, args.per_client, args.tasks_per_job)
        finally:
            stop(proc)


if __name__ == "__main__":
    main()
