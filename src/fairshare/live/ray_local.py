"""serve's local Ray cluster: one ``ray start --block`` process per configured node,
each in its own session, so the cluster outlives ``fairshare serve`` (a ``kill -9`` of
serve leaves the nodes, their node agents and the commands running) and a restarted
serve re-attaches to it.

Why ``ray start --block`` in a session of its own rather than ``ray.cluster_utils.
Cluster``: ``Cluster`` makes the Ray processes children of serve that share its fate
(Ray's reaper / parent-death signal), and gives a later process no handle to stop them.
A ``ray start --block`` process is the parent of its node's Ray processes (GCS, raylet;
they die with it: Ray's kernel fate-sharing), and its session (``setsid``) holds exactly
that node's processes, workers included. So stopping a node is a signal to the
processes of one recorded session, never ``ray stop`` (which stops every Ray process of
the machine, other users' included).

What was started is recorded in a state file next to the database (``<db>.ray.json``):
the GCS address, the fingerprint of the nodes' Ray arguments and the pid of each node's
``ray start`` process. At start, serve re-attaches when the head node's process is
alive and the fingerprint matches the config (worker nodes that died meanwhile are
started again); otherwise it stops whatever the file recorded and starts afresh.

Every port is chosen free at start (several Ray clusters may share the machine): the
GCS port, the dashboard's and the dashboard agent's; Ray picks the others itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fairshare.model.cluster import Node

log = logging.getLogger(__name__)

NODE_MARK = "fs_node_"
PREFIX = "fs_"
STATE_VERSION = 1
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 10.0
#: the line that opens each start's part of a node's log
START_MARK = "=== fairshare: ray start of node"


def node_resources(resources: tuple[str, ...], node: Node) -> dict[str, float]:
    """The custom Ray resources a configured node advertises (``ray_executor`` doc)."""
    res = {PREFIX + r: float(c) for r, c in zip(resources, node.capacity) if c > 0}
    res[NODE_MARK + node.name] = 1.0
    return res


@dataclass
class LocalCluster:
    """A running local cluster: ``address`` (``host:port`` of its GCS) and, per node
    name, the pid of its ``ray start --block`` process (its session's leader)."""

    address: str
    nodes: dict[str, int]
    fingerprint: str
    state_file: Path | None = None
    log_dir: Path = Path(".")
    attached: bool = False  # re-attached to a cluster a previous serve started
    _procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    # --- life cycle -----------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every node this cluster started (workers first, the head last) and forget
        the state file. SIGKILL to each node's processes (its session): on SIGTERM Ray 2.60 first
        drains the node for up to 30 s, waiting for actors that never end here (the
        node agents), and a local cluster has nothing to flush that a kill would lose."""
        if not self.nodes:
            return
        names = [n for n in self.nodes if n != self.head] + [self.head]
        # a pid read back from the state file is signalled only while it is still a
        # ``ray start --block`` (not a pid the system gave to another process since)
        names = [n for n in names if n in self._procs or alive(self.nodes[n])]
        log.info("stopping the local Ray cluster at %s (nodes %s)", self.address, ", ".join(names))
        t0 = time.monotonic()
        for name in names:
            _signal_session(self.nodes[name], signal.SIGKILL)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for name in names:
            if not self._wait_gone(name, deadline):
                log.warning("local Ray node %s (pid %d) still there %g s after SIGKILL", name, self.nodes[name],
                            STOP_TIMEOUT_S)
        log.info("stopped the local Ray cluster in %.1f s", time.monotonic() - t0)
        self.nodes.clear()
        if self.state_file is not None:
            try:
                self.state_file.unlink()
            except FileNotFoundError:
                pass

    def kill_node(self, name: str) -> None:
        """SIGKILL every process of one node (the dead-node test): its raylet, its workers
        and its node agent die; commands the agent started die by their parent-death signal."""
        pid = self.nodes.pop(name)
        _signal_session(pid, signal.SIGKILL)
        self._wait_gone(name, time.monotonic() + 10, pid)
        self._save()

    def raylet_pid(self, name: str) -> int:
        """The pid of node ``name``'s raylet: the process of its session whose command is
        Ray's ``raylet`` binary (the hung-node test stops it)."""
        leader = self.nodes[name]
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    session = int(f.read().rsplit(")", 1)[1].split()[3])
                if session != leader:
                    continue
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv0 = f.read().split(b"\0")[0]
            except (OSError, ValueError, IndexError):  # gone meanwhile
                continue
            if argv0.endswith(b"/raylet") or argv0 == b"raylet":
                return int(entry)
        raise LookupError(f"node {name}: no raylet process in its session (leader pid {leader})")

    @property
    def head(self) -> str:
        return next(iter(self.nodes))

    # --- helpers --------------------------------------------------------------------------------
    def _wait_gone(self, name: str, deadline: float, pid: int | None = None) -> bool:
        pid = self.nodes.get(name, pid)
        proc = self._procs.get(name)
        while time.monotonic() < deadline:
            if proc is not None:
                if proc.poll() is not None:
                    return True
            elif not alive(pid):
                return True
            time.sleep(0.05)
        return False

    def _save(self) -> None:
        if self.state_file is None:
            return
        doc = {"version": STATE_VERSION, "address": self.address, "fingerprint": self.fingerprint,
               "nodes": self.nodes}
        tmp = self.state_file.with_name(self.state_file.name + ".tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(json.dumps(doc, indent=1))
        os.replace(tmp, self.state_file)


def load(state_file: str | Path) -> LocalCluster:
    """The cluster a state file records (``OSError``, ``ValueError`` ...: unreadable)."""
    path = Path(state_file)
    doc = json.loads(path.read_text())
    return LocalCluster(doc["address"], {str(k): int(v) for k, v in doc["nodes"].items()}, str(doc["fingerprint"]),
                        path, path.with_name(path.name.replace(".json", "") + "-logs"))


def fingerprint(resources: tuple[str, ...], nodes: tuple[Node, ...], object_store_mb: int) -> str:
    import ray

    doc = [ray.__version__, object_store_mb] + [[n.name, node_resources(resources, n)] for n in nodes]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def start_or_attach(resources: tuple[str, ...], nodes: tuple[Node, ...], *, state_file: str | Path | None,
                    object_store_mb: int = 100) -> LocalCluster:
    """The module docstring's procedure. Raises ``RuntimeError`` when a node cannot start."""
    want = fingerprint(resources, nodes, object_store_mb)
    path = Path(state_file) if state_file is not None else None
    if path is not None:
        log_dir = path.with_name(path.name.replace(".json", "") + "-logs")
    else:
        import tempfile

        log_dir = Path(tempfile.mkdtemp(prefix="fairshare-ray-"))
    log_dir.mkdir(mode=0o700, exist_ok=True)  # (serve's logs: not for the tenants' users to read)
    if path is not None and path.exists():
        try:
            old = load(path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s: unreadable (%s); starting a new local Ray cluster", path, exc)
            old = None
        if old is not None and old.nodes:
            head_alive = alive(old.nodes[old.head], old.address.rsplit(":", 1)[-1])
            if head_alive and old.fingerprint == want and old.head == nodes[0].name:
                for name, pid in list(old.nodes.items()):
                    if not alive(pid):
                        del old.nodes[name]
                by_name = {n.name: n for n in nodes}
                missing = [n for n in nodes if n.name not in old.nodes]
                for node in missing:  # a worker node that died while serve was down
                    log.info("local Ray node %s is not running: starting it again", node.name)
                _start_workers(old, [by_name[n.name] for n in missing], resources, object_store_mb)
                old.nodes = {n.name: old.nodes[n.name] for n in nodes if n.name in old.nodes}
                old.attached = True
                old._save()
                log.info("re-attached to the local Ray cluster at %s (nodes %s)", old.address, ", ".join(old.nodes))
                return old
            log.info("the local Ray cluster of %s is %s: starting a new one", path,
                     "gone" if not head_alive else "for another configuration")
            old.stop()
    port = free_port()
    cluster = LocalCluster(f"127.0.0.1:{port}", {}, want, path, log_dir)
    head = nodes[0]
    proc = _ray_start(["--head", f"--port={port}", f"--dashboard-port={free_port()}", "--include-dashboard=false"],
                      head, resources, object_store_mb, log_dir)
    cluster._procs[head.name] = proc
    cluster.nodes[head.name] = proc.pid
    try:
        _wait_started(proc, head.name, log_dir)
        cluster._save()
        _start_workers(cluster, list(nodes[1:]), resources, object_store_mb)
    except BaseException:
        cluster.stop()
        raise
    cluster._save()
    return cluster


def _start_workers(cluster: LocalCluster, nodes: list[Node], resources, object_store_mb: int) -> None:
    # one after the other: started together on a busy 2-core machine, a node's raylet
    # could miss the 30 s ``ray start`` gives it to register with the head
    for node in nodes:
        proc = _ray_start([f"--address={cluster.address}"], node, resources, object_store_mb, cluster.log_dir)
        cluster._procs[node.name] = proc
        cluster.nodes[node.name] = proc.pid
        try:
            _wait_started(proc, node.name, cluster.log_dir)
        except RuntimeError as exc:
            # once more: ``ray start`` gives up when its raylet has not registered with the
            # head within 30 s, which a node can miss on a busy machine
            if proc.poll() is None:
                raise
            log.warning("%s; starting it again", str(exc).splitlines()[0])
            proc = _ray_start([f"--address={cluster.address}"], node, resources, object_store_mb, cluster.log_dir)
            cluster._procs[node.name] = proc
            cluster.nodes[node.name] = proc.pid
            _wait_started(proc, node.name, cluster.log_dir)


def _ray_start(args: list[str], node: Node, resources, object_store_mb: int, log_dir: Path) -> subprocess.Popen:
    argv = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.exit(main())", "start",
            "--block", *args, "--num-cpus=1", f"--resources={json.dumps(node_resources(resources, node))}",
            f"--object-store-memory={object_store_mb * 2 ** 20}", f"--dashboard-agent-listen-port={free_port()}",
            "--disable-usage-stats"]
    with open(log_dir / f"{node.name}.log", "a") as out:  # (a retry's log follows the failed start's)
        out.write(f"{START_MARK} {node.name} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        out.flush()
        # a session of its own: serve's death (or its process group's) does not reach it
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _wait_started(proc: subprocess.Popen, name: str, log_dir: Path) -> None:
    """Until ``ray start`` says the node is up (it then blocks)."""
    path = log_dir / f"{name}.log"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace").rpartition(START_MARK)[2]  # this start's lines
        if "Ray runtime started" in text and "--block" in text.split("Ray runtime started", 1)[1]:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the local Ray node {name} did not start (exit status {proc.returncode}); "
                               f"see {path}:\n{text[-2000:]}")
        time.sleep(0.1)
    raise RuntimeError(f"the local Ray node {name} did not start in {START_TIMEOUT_S:g} s; see {path}")


def alive(pid: int | None, port: str | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and is a ``ray start --block`` (with ``--port=port``
    when given): a recorded pid reused by another process does not count."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except (OSError, IndexError):
        return False
    return b"start" in argv and b"--block" in argv and (port is None or f"--port={port}".encode() in argv)


def _signal_session(pid: int, sig: int) -> None:
    """``sig`` to every process of the session ``pid`` leads (a node's ``ray start``
    made it: the node's GCS, raylet, agents and workers, which Ray puts in process groups
    of their own, so a group signal would miss them). Commands started by the node
    agents are in sessions of their own: they die with their agent (parent-death signal)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == pid:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                session = int(f.read().rsplit(")", 1)[1].split()[3])
            if session == pid:
                os.kill(int(entry), sig)
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours
            continue


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
