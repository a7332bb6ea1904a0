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
   8 at a time: ``decisions_total`` over the wall time, twice: with cold Ray workers
   (Ray starts a worker process per concurrent task and node) and then warm. Ray's task
   start rate bounds it.
3. **service-only decisions/s**: the same service loop (store, scheduler, policy) on a
   no-op executor that finishes every task at once, in process, without HTTP or Ray:
   what fairshare itself costs per decision (the SQLite commits included).

Usage: ``python benchmarks/bench_live.py [--tasks N] [--samples N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
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


def start_serve(tmp: Path, port: int) -> subprocess.Popen:
    import yaml

    (tmp / "cluster.yaml").write_text(yaml.safe_dump(config_doc()))
    proc = subprocess.Popen([sys.executable, "-m", "fairshare", "serve", "--config", str(tmp / "cluster.yaml"),
                             "--db", str(tmp / "fs.db"), "--port", str(port), "--policy", "hdrf"],
                            cwd=tmp, stdout=open(tmp / "serve.log", "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
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


def main() -> None:
    try:
        import fastapi  # noqa: F401
        import ray  # noqa: F401
    except ImportError as exc:
        print(f"bench_live: skipped, the live extra is not installed ({exc}); pip install -e '.[live]'")
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=400, help="backlog for the end-to-end rate (default 400)")
    parser.add_argument("--samples", type=int, default=20, help="latency samples (default 20)")
    args = parser.parse_args()
    print(f"service only (no Ray, no HTTP): {json.dumps(service_only(4000))}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        port = free_port()
        t0 = time.monotonic()
        proc = start_serve(tmp, port)
        print(f"serve up (local Ray cluster of 3 nodes) in {time.monotonic() - t0:.1f} s")
        try:
            lat = latency(port, tmp, args.samples)
            for name, v in lat.items():
                print(f"submit-to-start {name:8s}: median {v['median_ms']:.1f} ms, p95 {v['p95_ms']:.1f} ms, "
                      f"first (cold worker) {v['first_ms']:.1f} ms")
            # the first backlog makes Ray start a worker process per concurrent task on each
            # node (cold); the second reuses them (warm, the steady state of a busy service)
            print(f"end to end through Ray, cold workers: {json.dumps(throughput(port, args.tasks))}")
            print(f"end to end through Ray, warm workers: {json.dumps(throughput(port, args.tasks))}")
        finally:
            stop(proc)


if __name__ == "__main__":
    main()
