"""Live service benchmark: decisions per second and submit-to-start latency, through the
HTTP API, on a local Ray cluster (``fairshare serve`` as a subprocess, 3 virtual nodes
with 8 CPUs in all, the test config of tests/live_helpers.py).

The numbers:

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
5. **tasks/s against Ray's bare rate** (``--only rate``): first Ray alone, on a local
   cluster of the same three nodes and resources as serve's (``fs_<resource>`` custom
   resources, ``fs_node_<name>`` marks): ``--tasks`` trivial tasks (each runs ``true``
   in a subprocess; again with serve's own task body, ``ray_executor._run_command``,
   where this tree has it), pinned to the nodes in
   proportion to their CPUs with ``NodeAffinitySchedulingStrategy``, each reserving
   ``cpu: 1`` through the same options serve uses (``ray_executor.ray_options``),
   submitted at once with ``.remote()`` and waited for with ``ray.get``: tasks/s end to
   end, cold (first run: Ray starts the worker processes) and warm (second run); then
   in a closed loop (one task per CPU in flight, the next one submitted as soon as one
   is seen done, with ``ray.wait``: what a scheduler deciding at each end can get). Then
   serve (its own cluster of the same shape) runs the same number of ``true`` tasks
   (two jobs of ``cpu: 1`` tasks, 8 CPUs: 8 at a time), twice: tasks/s from the first
   submission to the last job's end. Reported: the rates and the ratios serve / Ray
   (warm, and closed loop), from the same run; ``--rounds N`` repeats the pair.

With ``--only submit``, the serve process's CPU time (user + system, all its threads,
from ``/proc``) over the 32-client phase is reported per submission too: what a
submission costs the service, which the machine's load changes less than the rates.

Usage: ``python benchmarks/bench_live.py [--tasks N] [--samples N] [--only submit|rate|tasks] [--rounds N]
[--clients 32] [--per-client 200] [--tasks-per-job 1] [--no-ray] [--server-src DIR] [--base-config]``.
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
    # (DIR[:DIR...]: e.g. a source tree and a --target directory of packages it needs)
    path = os.pathsep.join(str(Path(p).resolve()) for p in server_src.split(os.pathsep)) if server_src else \
        str(ROOT / "src")
    env = {**os.environ, "PYTHONPATH": path}
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


def wait_done(port: int, job_id: int, timeout_s: float = 120, every_s: float = 0.01, detail: bool = True) -> dict:
    """The job once it has ended; ``detail=False``: its summary (``GET /v1/jobs`` for that
    one id, no task list: a cheap poll for a job of many tasks)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if detail:
            got = http(port, "GET", f"/v1/jobs/{job_id}", ADMIN)
        else:
            (got,) = http(port, "GET", f"/v1/jobs?after={job_id - 1}&limit=1", ADMIN)
        if got["state"] in ("succeeded", "failed", "cancelled"):
            return got
        time.sleep(every_s)
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


def throughput(port: int, tasks: int, every_s: float = 0.01) -> dict:
    """``tasks`` ``true`` tasks in two jobs through serve: decisions/s from the first
    submission to the last job's end (seen by polling every ``every_s``)."""
    before = http(port, "GET", "/v1/status", ADMIN)["decisions_total"]
    t0 = time.monotonic()
    half = tasks // 2
    (a,) = http(port, "POST", "/v1/jobs", ALICE, {"jobs": [job("ta", "ads", half, {"cpu": 1}, ["true"])]})["ids"]
    (b,) = http(port, "POST", "/v1/jobs", BOB, {"jobs": [job("tb", "dev", tasks - half, {"cpu": 1}, ["true"])]})["ids"]
    wait_done(port, a, 600, every_s, detail=False)
    wait_done(port, b, 600, every_s, detail=False)
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


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (all its threads; Linux /proc)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def submissions(port: int, clients: int, per_client: int, tasks_per_job: int = 1, pid: int | None = None) -> dict:
    """Submissions/s and latency of ``clients`` keep-alive connections (module doc, 4);
    with the server's ``pid``, its CPU time per submission."""
    cpu0 = cpu_seconds(pid)
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
    cpu1 = cpu_seconds(pid)
    listed = {j["id"] for j in http(port, "GET", "/v1/jobs", ADMIN)}
    cpu = {} if cpu0 is None or cpu1 is None else \
        {"server_cpu_ms_per_submission": round(1000 * (cpu1 - cpu0) / max(1, len(latencies)), 3)}
    return {"clients": clients, "submissions": len(latencies), "seconds": round(elapsed, 2), **cpu,
            "submissions_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": round(1000 * pct(latencies, 0.50), 2), "p99_ms": round(1000 * pct(latencies, 0.99), 2),
            "max_ms": round(1000 * max(latencies), 2), "statuses": statuses,
            "acknowledged": len(ids), "acknowledged_missing_from_store": len(set(ids) - listed),
            "duplicate_ids": len(ids) - len(set(ids))}


def submission_benchmark(port: int, clients: int, per_client: int, tasks_per_job: int = 1,
                         pid: int | None = None) -> None:
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
    print(f"submissions, {clients} clients: "
          f"{json.dumps(submissions(port, clients, per_client, tasks_per_job, pid))}")
    print(f"uptime: {os.getloadavg()}")
    http(port, "POST", f"/v1/jobs/{blocker}/cancel", ADMIN)


def _run_true(argv: list[str]) -> int:
    """A bare Ray task's body: the command in a subprocess, nothing else."""
    return subprocess.run(argv, capture_output=True).returncode


def _run_as_serve(argv: list[str]) -> int:
    """A bare Ray task whose body is serve's own (``ray_executor._run_command``: the
    environment copied, output captured, the parent-death signal set before exec)."""
    from fairshare.live import ray_executor

    return ray_executor._run_command(argv, False, {}, None)[0]


def ray_bare_rate(tasks: int, body=_run_true) -> dict:
    """Ray's own end-to-end rate for ``tasks`` trivial pinned tasks (module doc, 5): a
    local cluster shaped like serve's, the tasks submitted at once, cold then warm, then
    in a closed loop; each task runs ``body``."""
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from fairshare.live.ray_executor import discover_nodes, ray_options, resource_mapping

    config = make_config()
    resources = config.resources

    def node_args(node) -> dict:  # as serve's local cluster advertises a configured node
        res = {f"fs_{r}": float(c) for r, c in zip(resources, node.capacity) if c > 0}
        res[f"fs_node_{node.name}"] = 1.0
        return {"num_cpus": 1, "resources": res, "object_store_memory": 100 * 2 ** 20}

    cluster = Cluster(initialize_head=True, head_node_args=node_args(config.nodes[0]))
    try:
        for node in config.nodes[1:]:
            cluster.add_node(**node_args(node))
        ray.init(address=cluster.address, log_to_driver=False, logging_level=30)  # (logging.WARNING)
        cluster.wait_for_nodes()
        mapping = resource_mapping(resources, ray.nodes())
        found = discover_nodes(ray.nodes(), resources, mapping, {n.name: n for n in config.nodes})
        demand = tuple(1.0 if r == "cpu" else 0.0 for r in resources)
        # every task reserves cpu: 1 on its node; the nodes get tasks in proportion to
        # their CPUs, so all 8 are busy until the end
        cpu = resources.index("cpu")
        slots = [node_id for _name, node_id, node in found for _ in range(int(node.capacity[cpu]))]
        remote = ray.remote(num_cpus=0, max_retries=0)(body)
        options = [dict(ray_options(resources, mapping, demand),
                        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
                   for node_id in slots]
        ray.get(remote.remote(["true"]))  # (Ray's serialization set up, as serve's trial task does)
        out = {}
        for run in ("cold", "warm"):
            t0 = time.monotonic()
            refs = [remote.options(**options[k % len(options)]).remote(["true"]) for k in range(tasks)]
            codes = ray.get(refs, timeout=600)
            elapsed = time.monotonic() - t0
            assert codes == [0] * tasks, "a bare task failed"
            out[run] = {"tasks": tasks, "seconds": round(elapsed, 3), "tasks_per_s": round(tasks / elapsed, 1)}
        # closed loop, as a scheduler that starts a task when one ends: one task per CPU
        # in flight, the next submitted (on the freed CPU's node) as soon as one is seen done
        t0 = time.monotonic()
        slot_of = {}
        for k in range(min(tasks, len(options))):
            slot_of[remote.options(**options[k]).remote(["true"])] = k
        started = len(slot_of)
        while slot_of:
            done, _ = ray.wait(list(slot_of), num_returns=1, timeout=600)
            for ref in done:
                slot = slot_of.pop(ref)
                assert ray.get(ref) == 0, "a bare task failed"
                if started < tasks:
                    slot_of[remote.options(**options[slot]).remote(["true"])] = slot
                    started += 1
        elapsed = time.monotonic() - t0
        out["closed_loop"] = {"tasks": tasks, "seconds": round(elapsed, 3), "tasks_per_s": round(tasks / elapsed, 1)}
        return out
    finally:
        ray.shutdown()
        cluster.shutdown()


def rate_benchmark(tasks: int, rounds: int, server_src: str | None, limits: bool) -> None:
    """Ray's bare rate, then serve's, ``rounds`` times (module doc, 5)."""
    from fairshare.live import ray_executor

    # (serve's task body, where this tree's executor runs commands in plain Ray tasks)
    as_serve = hasattr(ray_executor, "_run_command")
    for k in range(rounds):
        print(f"uptime: {os.getloadavg()}")
        bare = ray_bare_rate(tasks)
        print(f"round {k + 1}: Ray alone, {tasks} pinned trivial tasks: {json.dumps(bare)}")
        if as_serve:
            print(f"uptime: {os.getloadavg()}")
            bare_serve_body = ray_bare_rate(tasks, _run_as_serve)
            print(f"round {k + 1}: Ray alone, the same tasks with serve's task body: {json.dumps(bare_serve_body)}")
        print(f"uptime: {os.getloadavg()}")
        with tempfile.TemporaryDirectory() as d:
            port = free_port()
            proc = start_serve(Path(d), port, server_src, limits=limits)
            try:
                served = {run: throughput(port, tasks, every_s=0.05) for run in ("cold", "warm")}
            finally:
                stop(proc)
        print(f"round {k + 1}: serve, {tasks} tasks of `true`: {json.dumps(served)}")
        rate = served["warm"]["decisions_per_s"]
        ratios = {"warm_all_at_once": rate / bare["warm"]["tasks_per_s"],
                  "closed_loop": rate / bare["closed_loop"]["tasks_per_s"]}
        if as_serve:
            ratios["serve_body_warm_all_at_once"] = rate / bare_serve_body["warm"]["tasks_per_s"]
            ratios["serve_body_closed_loop"] = rate / bare_serve_body["closed_loop"]["tasks_per_s"]
        print(f"round {k + 1}: serve / Ray alone: {json.dumps({n: round(r, 2) for n, r in ratios.items()})}; "
              f"uptime: {os.getloadavg()}")


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
    if hasattr(cli, "tune_switching"):
        cli.tune_switching()
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
    parser.add_argument("--only", choices=("submit", "rate", "tasks"), default=None,
                        help="run only the submission benchmark (4 in the module doc), only serve's "
                             "tasks/s against Ray's bare rate (5), or only the task numbers through Ray (1 and 2)")
    parser.add_argument("--rounds", type=int, default=1, help="--only rate: pairs of runs (default 1)")
    parser.add_argument("--clients", type=int, default=32, help="keep-alive connections submitting (default 32)")
    parser.add_argument("--per-client", type=int, default=200, help="submissions per connection (default 200)")
    parser.add_argument("--tasks-per-job", type=int, default=1,
                        help="tasks in each submitted job (default 1; 0: jobs that end at once, no backlog)")
    parser.add_argument("--no-ray", action="store_true",
                        help="serve on an executor without Ray (submission benchmark only)")
    parser.add_argument("--server-src", default=None, metavar="DIR[:DIR...]",
                        help="run serve with PYTHONPATH=DIR (another source tree, e.g. the code before a change, "
                             "and directories of packages it needs)")
    parser.add_argument("--base-config", action="store_true",
                        help="no per-tenant limits in the config (for a serve that does not know them)")
    args = parser.parse_args()
    if args.only == "rate":
        rate_benchmark(args.tasks, args.rounds, args.server_src, not args.base_config)
        return
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
                submission_benchmark(port, args.clients, args.per_client, args.tasks_per_job, proc.pid)
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
