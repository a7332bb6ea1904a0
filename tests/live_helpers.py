"""Builders for the live tests: a config with three heterogeneous nodes and two tenants,
and a ``ManualExecutor`` (the executor seam without Ray: the test decides when each
task finishes)."""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from fairshare.engine.events import ExecutorEvent, NodeAdded, NodeLost, TaskFinished
from fairshare.engine.executor import ExecutorDefaults
from fairshare.engine.scheduler import Launch
from fairshare.live.commands import CommandBook
from fairshare.live.config import LiveConfig, parse_config
from fairshare.model.cluster import Node

ALICE, BOB, ADMIN = "alice-token-0001", "bob-token-0002", "admin-token-0003"


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def config_doc(*, cpu_node=4, mic_node=2, gpu_node=2) -> dict:
    """Three heterogeneous nodes: plain CPUs, CPUs + a MIC, CPUs + a GPU; queues ads (alice)
    and dev (bob), weights 1:1."""
    return {
        "resources": ["cpu", "memory", "mic", "gpu"],
        "cluster": {"nodes": [
            {"name": "cpu-node", "capacity": {"cpu": cpu_node, "memory": 8}},
            {"name": "mic-node", "capacity": {"cpu": mic_node, "memory": 8, "mic": 1}},
            {"name": "gpu-node", "capacity": {"cpu": gpu_node, "memory": 8, "gpu": 1}},
        ]},
        "queues": [{"name": "ads", "children": [{"name": "prod"}, {"name": "test"}]}, {"name": "dev"}],
        "auth": {
            "admin_token_sha256": sha(ADMIN),
            "tenants": [
                {"name": "alice", "token_sha256": sha(ALICE), "queues": ["ads"]},
                {"name": "bob", "token_sha256": sha(BOB), "queues": ["dev"]},
            ],
        },
    }


def make_config(**kw) -> LiveConfig:
    return parse_config(config_doc(**kw), "test-config")


def job(name: str, queue: str, count: int, demand: dict, command="true", **extra) -> dict:
    task = {"demand": demand, "count": count, "command": command}
    task.update(extra)
    return {"name": name, "queue": queue, "tasks": [task]}


class ManualExecutor(ExecutorDefaults):
    """Starts nothing; records the launches; ``finish``/``lose`` queue events for ``poll``,
    each end naming its launch's attempt. Given the service's ``commands``, it checks that
    every launch has a command to run."""

    def __init__(self, nodes: tuple[Node, ...], commands: CommandBook | None = None):
        self._nodes = tuple(nodes)
        self.commands = commands
        self.started: list[Launch] = []
        self.running: dict[int, Launch] = {}
        self.killed: list[int] = []
        self._events: list[ExecutorEvent] = []

    def nodes(self) -> tuple[Node, ...]:
        return self._nodes

    def start(self, launch: Launch, now: float) -> None:
        if self.commands is not None:
            self.commands.spec(launch)  # the service can say what to run
        self.started.append(launch)
        self.running[launch.task_id] = launch

    def poll(self) -> list[ExecutorEvent]:
        out, self._events = self._events, []
        return out

    def kill(self, task_id: int) -> None:
        self.killed.append(task_id)
        if task_id in self.running:
            self.finish(task_id, ok=False, reason="cancelled")

    def finish(self, task_id: int, ok: bool = True, reason: str = "") -> None:
        launch = self.running.pop(task_id)
        self._events.append(TaskFinished(task_id, ok, reason if ok else (reason or "exit status 1: boom"),
                                         launch.attempt))

    def lose(self, name: str) -> None:
        for task_id in [t for t, la in self.running.items() if la.node == name]:
            self.running.pop(task_id)
        self._events.append(NodeLost(name))

    def add(self, node: Node) -> None:
        self._events.append(NodeAdded(node))


def wait_for(predicate, timeout_s: float, what: str, every_s: float = 0.05):
    """``predicate()``'s first truthy value, polled every ``every_s``; fails the test
    naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@contextlib.contextmanager
def api_in_thread(db: Path, config: LiveConfig | None = None, **service_options):
    """serve's HTTP API on ``config`` (default ``make_config()``; uvicorn in a thread, the
    service on a ``ManualExecutor``: no Ray): yields ``(url, service)``, stops both after."""
    import threading

    import uvicorn

    from fairshare.live.api import create_app
    from fairshare.live.service import LiveService
    from fairshare.live.store import Store

    config = config or make_config()
    svc = LiveService(config, Store(db), ManualExecutor(config.nodes), policy="hdrf", **service_options)
    svc.start()
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(svc), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: srv.started, 20, "uvicorn to start", every_s=0.02)
        yield f"http://127.0.0.1:{port}", svc
    finally:
        srv.should_exit = True
        thread.join(timeout=10)
        svc.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def serve_env(**extra: str) -> dict[str, str]:
    """The environment for a ``fairshare serve`` subprocess: this tree's sources first on
    ``PYTHONPATH``, whatever fairshare the interpreter has installed; no crash point
    inherited from the caller, ``extra`` added."""
    env = {k: v for k, v in os.environ.items() if k != "FAIRSHARE_CRASH_AT"}
    env["PYTHONPATH"] = os.pathsep.join([str(repo_root() / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


class PortTaken(AssertionError):
    """serve could not listen on its port: another process (a Ray worker, say) bound it
    after :func:`free_port` found it free; the test may start serve on another."""


def serve_came_up(proc: subprocess.Popen, port: int, log: Path, timeout_s: float, every_s: float) -> bool:
    """Poll serve's ``/healthz`` until it says ok (True) or ``timeout_s`` passes (False);
    fails the test with the log's tail if the process exits first (:class:`PortTaken` when
    it exited because its port was taken)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text()
            if "--port: cannot listen on" in text:
                raise PortTaken(f"serve's port {port} was taken: {text[-500:]}")
            raise AssertionError(f"serve exited with {proc.returncode}: {text[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                if json.loads(resp.read())["status"] == "ok":
                    return True
        except (OSError, http.client.HTTPException, ValueError, KeyError):
            # not up yet; or another process holds the port and answers something else
            # (serve then cannot listen and exits: above)
            pass
        time.sleep(every_s)
    return False


def start_serve_on_a_free_port(root: Path, log_name: str, env: dict[str, str], timeout_s: float,
                               extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, int]:
    """``fairshare serve`` on ``root``'s cluster.yaml and fs.db (and ``extra`` flags), on a
    port :func:`free_port` finds, up (:func:`serve_came_up`) or the test fails with the
    log's tail; another port when the one found free was taken before serve bound it
    (:class:`PortTaken`). The server runs in its own session, so that :func:`stop_serve`
    can clean up what it leaves behind (Ray's per-node agents) by process group, after
    a clean stop or a kill -9 alike, touching nothing else."""
    for _ in range(3):
        port = free_port()
        log = open(root / log_name, "w")  # noqa: SIM115 - the child keeps it
        proc = subprocess.Popen([sys.executable, "-m", "fairshare", "serve", "--config", str(root / "cluster.yaml"),
                                 "--db", str(root / "fs.db"), "--port", str(port), *extra],
                                cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()
        try:
            if serve_came_up(proc, port, root / log_name, timeout_s=timeout_s, every_s=0.2):
                return proc, port
        except PortTaken:
            stop_serve(proc)
            continue
        stop_serve(proc, signal.SIGKILL)
        raise AssertionError(f"serve did not come up: {(root / log_name).read_text()[-3000:]}")
    raise AssertionError("serve found its port taken three times")


class RecordingExecutor:
    """Another executor behind the seam, with every launch it was given recorded in order.
    (Not an ``ExecutorDefaults``: every call goes to the inner executor.)"""

    def __init__(self, inner):
        self.inner = inner
        self.started: list[Launch] = []

    def nodes(self) -> tuple[Node, ...]:
        return self.inner.nodes()

    def start(self, launch: Launch, now: float) -> None:
        self.started.append(launch)
        self.inner.start(launch, now)

    def kill(self, task_id: int) -> None:
        self.inner.kill(task_id)

    def poll(self) -> list[ExecutorEvent]:
        return self.inner.poll()

    def __getattr__(self, name: str):
        """The inner executor's other methods (``recover``, ``acknowledge``, ``health``,
        ``shutdown``)."""
        return getattr(self.inner, name)


class NullExecutor(ExecutorDefaults):
    """Runs nothing (a replay only wants the decisions)."""

    def nodes(self) -> tuple[Node, ...]:
        return ()

    def start(self, launch: Launch, now: float) -> None:
        pass

    def kill(self, task_id: int) -> None:
        pass

    def poll(self) -> list[ExecutorEvent]:
        return []


def replay(svc, policy: str) -> list[Launch]:
    """A fresh ``Engine`` (a ``Scheduler`` as the simulator builds it) fed the rounds
    ``svc`` recorded (``record_rounds=True``): the events serve fed to ``Engine.step``,
    arrivals with their task ids, queue changes included, from the tree and the nodes the
    service started with."""
    from fairshare.engine.scheduler import Scheduler
    from fairshare.engine.step import Engine, run_rounds
    from fairshare.policies import make_policy

    scheduler = Scheduler(svc.resources, svc._nodes, svc.loop.initial_tree, make_policy(policy),
                          placement=svc.placement)
    return run_rounds(Engine(scheduler, NullExecutor()), svc.rounds)


def feed_completions(svc, ex, ends: list[float], before_pass=lambda t: None):
    """After the service's first pass: the k-th launch of ``ex`` ends at ``ends[k]``;
    every later instant in time order, its completions in launch order (the simulator's
    heap breaks equal times by push order), then one pass of ``svc``. Yields each
    instant's time after its pass; ``before_pass(t)`` runs before it (to move a clock)."""
    heap: list[tuple[float, int]] = []
    pushed = 0
    while True:
        while pushed < len(ex.started):
            heapq.heappush(heap, (ends[pushed], pushed))
            pushed += 1
        if not heap:
            return
        t = heap[0][0]
        while heap and heap[0][0] == t:
            _, k = heapq.heappop(heap)
            ex.finish(ex.started[k].task_id)
        before_pass(t)
        svc.step()
        yield t


def workload_jobs(workload) -> list[dict]:
    """The job documents of ``(name, queue, count, demand, duration s)`` rows (one task
    class each, command ``true``)."""
    return [{"name": n, "queue": q, "tasks": [{"demand": d, "count": c, "duration": t, "command": "true"}]}
            for n, q, c, d, t in workload]


def simulate_launches(doc: dict, policy: str, source: str, observe=None) -> list[tuple]:
    """Simulate the scenario document ``doc`` (seed 0; every job must finish) and return
    its launches as ``(job, node, start time)``, in decision order: what the live service
    must reproduce when fed the same completions. ``observe(simulator, t)``: its value at
    each launch is appended to the launch's tuple."""
    from fairshare.model.loader import parse_scenario
    from fairshare.policies import make_policy
    from fairshare.sim.simulator import SimOptions, Simulator

    sim = Simulator(parse_scenario(doc, source), make_policy(policy), SimOptions(seed=0))
    launches = []
    start = sim.executor.start

    def record(launch, t):
        start(launch, t)
        launches.append((launch.job, launch.node, t) + (() if observe is None else (observe(sim, t),)))

    sim.executor.start = record
    assert sim.run().all_finished
    return launches


def stop_serve(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stop a ``fairshare serve`` subprocess started in its own session: ``sig`` (a clean
    stop by default), a kill after 60 s, then anything of its session still around."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
