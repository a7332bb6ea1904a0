"""Ray behind the executor seam (``engine.executor.Executor``).

Two ways to get a cluster:

- **local** (no ``--ray-address``): one Ray node per configured node, started with
  ``ray.cluster_utils.Cluster`` (each a raylet process on this machine; the first is the
  head). Each node advertises every fairshare resource ``r`` as the custom Ray resource
  ``fs_<r>`` with the configured amount, and ``fs_node_<name>: 1`` so its name can be
  found again. The Ray cluster belongs to the service: it stops with it (and dies with
  it on ``kill -9``).
- **attach** (``--ray-address``): ``ray.init(address=...)``; the nodes and their
  resources are discovered with ``ray.nodes()`` (polled: nodes that leave are lost,
  nodes that join are added). A node's name is its ``fs_node_<name>`` resource when it
  has one, else ``<address>-<first 6 digits of its node id>``.

Resource mapping (what a task reserves in Ray): when the cluster advertises ``fs_<r>``
(always in local mode), resource ``r`` is reserved as ``fs_<r>``, in the user's own
unit. Otherwise, on a cluster started without them, ``cpu`` maps to Ray's ``CPU``,
``gpu`` to ``GPU``, ``memory`` to Ray's ``memory`` (fairshare amounts are GiB there) and
any other resource (``mic``, ``gpu_a100``) to the custom resource of the same name.
Custom ``fs_cpu`` instead of Ray's ``CPU`` keeps Ray from sizing its worker pool by
fractional CPUs (a task asks ``num_cpus=0``): fractional ``num_cpus`` makes Ray start
many workers and drops throughput.

A task runs as a Ray task pinned to its node with
``NodeAffinitySchedulingStrategy(node_id, soft=False)``. A pin that cannot be honoured
fails at once (``TaskUnschedulableError``); a demand no node can hold would wait forever
in Ray, which is why the service checks feasibility itself before accepting a job.
``max_retries=0``: fairshare, not Ray, decides where a failed task runs again.

Node health (``live.ray_health``): every node is probed; one that does not answer for
``node_timeout_s`` is reported lost although Ray still lists it alive, and comes back as
added when it answers again. Whenever a node is reported lost, for any reason, its tasks'
Ray tasks are cancelled and forgotten (``_fence_node``): the engine re-queues them, and a
late result of an old attempt must not be taken for the next attempt of the same task id.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time

from fairshare.engine.events import ExecutorEvent, NodeAdded, NodeLost, TaskFinished
from fairshare.engine.scheduler import Launch
from fairshare.live.commands import CommandBook, TaskSpec
from fairshare.live.ray_health import DEFAULT_NODE_TIMEOUT_S, DEFAULT_PROBE_INTERVAL_S, NodeProber
from fairshare.model.cluster import Node

log = logging.getLogger(__name__)

NODE_MARK = "fs_node_"
PREFIX = "fs_"
OUTPUT_TAIL = 2000  # characters of a task's output kept with its record
GIB = float(2 ** 30)


def _die_with_parent_hook():
    """A ``preexec_fn`` that makes the command receive SIGKILL when the Ray worker that
    started it dies (Linux ``prctl(PR_SET_PDEATHSIG)``): a cancelled task (its worker is
    killed) or a dead service's tasks do not leave their commands running. libc is
    loaded here, before the fork, so the child only makes one system call."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # not Linux: commands may outlive a killed worker
        return None

    def hook() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1

    return hook


def _run_command(argv: list[str], shell: bool, env: dict[str, str], cwd: str | None) -> tuple[int, str]:
    """Runs inside a Ray worker: the command, without a shell unless asked."""
    import subprocess

    full_env = dict(os.environ)
    full_env.update(env)
    if cwd is not None and not os.path.isdir(cwd):
        cwd = None
    args = (argv[0] if len(argv) == 1 else " ".join(argv)) if shell else argv
    try:
        proc = subprocess.run(args, shell=shell, env=full_env, cwd=cwd, capture_output=True, text=True,
                              errors="replace", preexec_fn=_die_with_parent_hook())
    except (OSError, ValueError, subprocess.SubprocessError) as exc:  # not found, not executable, ...
        return 127, f"cannot run {argv[0]!r}: {exc}"
    out = (proc.stdout or "") + (proc.stderr or "")
    return proc.returncode, out[-OUTPUT_TAIL:]


class RayExecutor:
    """Starts tasks on Ray and reports what happened to them through ``poll``. What a
    task runs is looked up in ``commands`` (shared with the service)."""

    def __init__(self, resources: tuple[str, ...], nodes: tuple[Node, ...] = (), *, commands: CommandBook,
                 address: str | None = None, node_poll_s: float = 1.0, object_store_mb: int = 100,
                 node_timeout_s: float = DEFAULT_NODE_TIMEOUT_S, probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S):
        import ray

        self.ray = ray
        self.resources = tuple(resources)
        self.address = address
        self.node_poll_s = node_poll_s
        self.cluster = None
        self._configured = {node.name: node for node in nodes}
        self._ray_nodes: dict[str, object] = {}  # local mode: name -> ray node handle (for tests)
        if address is None:
            if not nodes:
                raise ValueError("a local Ray cluster needs the configured nodes")
            from ray.cluster_utils import Cluster

            def args(node: Node) -> dict:
                res = {PREFIX + r: float(c) for r, c in zip(self.resources, node.capacity) if c > 0}
                res[NODE_MARK + node.name] = 1.0
                return {"num_cpus": 1, "resources": res, "object_store_memory": object_store_mb * 2 ** 20}

            self.cluster = Cluster(initialize_head=True, head_node_args=args(nodes[0]))
            self._ray_nodes[nodes[0].name] = self.cluster.head_node
            for node in nodes[1:]:
                self._ray_nodes[node.name] = self.cluster.add_node(**args(node))
            ray.init(address=self.cluster.address, log_to_driver=False, logging_level=logging.WARNING)
            self.cluster.wait_for_nodes()
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        self._remote = ray.remote(num_cpus=0, max_retries=0)(_run_command)
        # One task now, from this thread: Ray builds its serialization context (importing
        # pydantic.v1) on the first submission, and doing that first in the scheduling
        # thread while the web server imports pydantic races in the import system.
        code, output = ray.get(self._remote.remote(["true"], False, {}, None), timeout=120)
        if code != 0:
            raise RuntimeError(f"a trial task on the Ray cluster failed: {output}")
        self._lock = threading.Lock()
        self._refs: dict[object, int] = {}  # object ref -> task id
        self._by_task: dict[int, object] = {}
        self._node_of: dict[int, str] = {}  # task id -> the node it was started on (``_fence_node``)
        self.prober = NodeProber(ray, timeout_s=node_timeout_s, interval_s=probe_interval_s)
        self._pending_events: list[ExecutorEvent] = []
        self._last_node_poll = 0.0
        self.commands = commands
        self.mapping = self._resource_mapping()
        self._nodes: dict[str, tuple[str, Node]] = {}  # name -> (ray node id, node), alive nodes
        for name, node_id, node in self._discover():
            self._nodes[name] = (node_id, node)
        if not self._nodes:
            raise RuntimeError("the Ray cluster has no alive node")
        # the node health hook: the first probes now, before tasks compete with them for workers
        self.prober.update({name: node_id for name, (node_id, _) in self._nodes.items()})
        silent = self.prober.wait_for_answers(timeout_s=60)
        if silent:
            log.warning("node(s) %s have not answered a first health probe yet", ", ".join(silent))

    # --- the seam -----------------------------------------------------------------------------
    def nodes(self) -> tuple[Node, ...]:
        return tuple(node for _, node in self._nodes.values())

    def start(self, launch: Launch, now: float) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        spec: TaskSpec = self.commands.spec(launch)
        entry = self._nodes.get(launch.node)
        if entry is None:  # the node left between the decision and the start
            self._pending_events.append(TaskFinished(launch.task_id, ok=False, reason=f"node {launch.node} is gone"))
            return
        options = self._ray_options(launch.demand)
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(entry[0], soft=False)
        ref = self._remote.options(**options).remote(list(spec.argv), spec.shell, dict(spec.env), spec.cwd)
        with self._lock:
            self._refs[ref] = launch.task_id
            self._by_task[launch.task_id] = ref
            self._node_of[launch.task_id] = launch.node

    def poll(self) -> list[ExecutorEvent]:
        events, self._pending_events = self._pending_events, []
        infrastructure_failure = False
        with self._lock:
            refs = list(self._refs)
        finished: list[ExecutorEvent] = []
        if refs:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=True)
            for ref in ready:
                with self._lock:
                    task_id = self._refs.pop(ref, None)
                    if task_id is None:  # fenced meanwhile (its node was lost): not reported
                        continue
                    self._by_task.pop(task_id, None)
                    self._node_of.pop(task_id, None)
                try:
                    code, output = self.ray.get(ref)
                    reason = "" if code == 0 else f"exit status {code}: {output.strip()[-500:]}"
                    finished.append(TaskFinished(task_id, ok=code == 0, reason=reason))
                except self.ray.exceptions.TaskCancelledError:
                    finished.append(TaskFinished(task_id, ok=False, reason="cancelled"))
                except self.ray.exceptions.RayError as exc:
                    infrastructure_failure = True
                    finished.append(TaskFinished(task_id, ok=False,
                                                 reason=f"ray: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"))
        # a node death surfaces first as failed tasks: look at the nodes now, so the node
        # is removed before its tasks are re-queued (and not placed on it again)
        now = time.monotonic()
        # (the node health hook: a node that stopped or started answering again is looked at now)
        if self.prober.tick(now) or infrastructure_failure or now - self._last_node_poll >= self.node_poll_s:
            self._last_node_poll = now
            events.extend(self._node_changes())
        return events + finished

    def kill(self, task_id: int) -> None:
        """Cancel the task's Ray task, forcefully, and report its end at once (the next
        ``poll``), forgetting its object ref: the task id may be started again before
        Ray resolves the cancelled ref (a preempted task whose id is its store row), and
        that late resolution must not be taken for the new start's end. A task that has
        already ended is left to ``poll`` (its real end is reported)."""
        with self._lock:
            ref = self._by_task.get(task_id)
        if ref is None:
            return
        ready, _ = self.ray.wait([ref], num_returns=1, timeout=0, fetch_local=False)
        if ready:
            return
        with self._lock:
            self._by_task.pop(task_id, None)
            self._refs.pop(ref, None)
            self._node_of.pop(task_id, None)
        try:
            # force: the worker process is killed, and with it the command (its
            # parent-death signal); a polite cancel does not reach a blocked subprocess
            self.ray.cancel(ref, force=True)
        except Exception as exc:  # noqa: BLE001 - the task may be finishing right now
            log.debug("cancel of task %s: %s", task_id, exc)
        self._pending_events.append(TaskFinished(task_id, ok=False, reason="cancelled"))

    def running(self) -> int:
        with self._lock:
            return len(self._refs)

    def shutdown(self) -> None:
        try:
            self.ray.shutdown()
        finally:
            if self.cluster is not None:
                self.cluster.shutdown()
                self.cluster = None

    # --- test hooks (local mode) -----------------------------------------------------------------
    def remove_node(self, name: str) -> None:
        """Kill one virtual node's raylet (the dead-node test)."""
        assert self.cluster is not None, "only a local cluster's nodes can be removed"
        self.cluster.remove_node(self._ray_nodes.pop(name), allow_graceful=False)

    def health(self) -> dict:
        """Ray's state for ``/healthz`` and ``/metrics`` (``NodeProber.health``)."""
        return self.prober.health()

    def raylet_pid(self, name: str) -> int:
        """The process id of one virtual node's raylet (the hung-node test stops it)."""
        assert self.cluster is not None, "only a local cluster's raylets are known"
        return self._ray_nodes[name].all_processes["raylet"][0].process.pid

    # --- helpers ---------------------------------------------------------------------------------
    def _fence_node(self, name: str) -> None:
        """The node is reported lost: cancel its tasks' Ray tasks and forget their refs, so
        their results, if they still come, are never reported (the engine re-queues the
        tasks, whose ids the next attempts reuse)."""
        with self._lock:
            fenced = [task_id for task_id, node in self._node_of.items() if node == name]
            refs = []
            for task_id in fenced:
                del self._node_of[task_id]
                ref = self._by_task.pop(task_id, None)
                if ref is not None:
                    self._refs.pop(ref, None)
                    refs.append(ref)
        for ref in refs:
            try:
                # force: the worker, and with it the command, is killed; the cancel goes
                # through the node's raylet, so a hung raylet passes it on only when it
                # answers again (the command may have ended by then: its result is fenced)
                self.ray.cancel(ref, force=True)
            except Exception as exc:  # noqa: BLE001 - the task may be ending right now, or its node gone
                log.debug("cancel of a task on lost node %s: %s", name, exc)
        if fenced:
            log.info("node %s lost: %d Ray task(s) cancelled and fenced", name, len(fenced))

    def _resource_mapping(self) -> dict[str, tuple[str, float]]:
        return resource_mapping(self.resources, self.ray.nodes())

    def _ray_options(self, demand) -> dict:
        return ray_options(self.resources, self.mapping, demand)

    def _discover(self) -> list[tuple[str, str, Node]]:
        return discover_nodes(self.ray.nodes(), self.resources, self.mapping, self._configured)

    def _node_changes(self) -> list[ExecutorEvent]:
        try:
            listed = self._discover()
        except Exception as exc:  # noqa: BLE001 - the GCS may be briefly unreachable; try again later
            log.warning("cannot list Ray nodes: %s", exc)
            self.prober.listing_failed(exc)
            return []
        # the node health hook: a node that stopped answering counts as gone (ray_health)
        unhealthy = self.prober.update({name: node_id for name, node_id, _ in listed})
        seen = {name: (node_id, node) for name, node_id, node in listed if name not in unhealthy}
        events: list[ExecutorEvent] = []
        for name in sorted(self._nodes):
            if name not in seen or seen[name][0] != self._nodes[name][0]:
                del self._nodes[name]
                self._fence_node(name)
                events.append(NodeLost(name))
        for name in sorted(seen):
            if name not in self._nodes:
                self._nodes[name] = seen[name]
                events.append(NodeAdded(seen[name][1]))
        return events


# --- the mapping between fairshare and Ray (pure functions of ray.nodes() records) --------------
def resource_mapping(resources: tuple[str, ...], ray_nodes: list[dict]) -> dict[str, tuple[str, float]]:
    """fairshare resource -> (Ray resource, Ray units per fairshare unit): ``fs_<r>`` when
    any alive node advertises an ``fs_`` resource, else the native names (module doc)."""
    keys: set[str] = set()
    for n in ray_nodes:
        if n.get("Alive"):
            keys.update(n.get("Resources", {}))
    if any(k.startswith(PREFIX) and not k.startswith(NODE_MARK) for k in keys):
        return {r: (PREFIX + r, 1.0) for r in resources}
    native = {"cpu": ("CPU", 1.0), "gpu": ("GPU", 1.0), "memory": ("memory", GIB)}
    return {r: native.get(r, (r, 1.0)) for r in resources}


def ray_options(resources: tuple[str, ...], mapping: dict[str, tuple[str, float]], demand) -> dict:
    """The ``.options(...)`` that reserve ``demand`` in Ray."""
    custom: dict[str, float] = {}
    options: dict = {"num_cpus": 0}
    for r, amount in zip(resources, demand):
        if amount <= 0:
            continue
        key, scale = mapping[r]
        value = amount * scale
        if key == "CPU":
            options["num_cpus"] = value
        elif key == "GPU":
            options["num_gpus"] = value
        elif key == "memory":
            options["memory"] = int(math.ceil(value))
        else:
            custom[key] = value
    if custom:
        options["resources"] = custom
    return options


def discover_nodes(ray_nodes: list[dict], resources: tuple[str, ...], mapping: dict[str, tuple[str, float]],
                   configured: dict[str, Node]) -> list[tuple[str, str, Node]]:
    """``(name, Ray node id, Node)`` of the alive nodes; configured nodes first, in config
    order (first-fit walks them as the simulator does), then the others by name."""
    order = {name: i for i, name in enumerate(configured)}
    out = []
    for n in ray_nodes:
        if not n.get("Alive"):
            continue
        res = n.get("Resources", {})
        node_id = n["NodeID"]
        marks = sorted(k[len(NODE_MARK):] for k in res if k.startswith(NODE_MARK))
        name = marks[0] if marks else f"{n.get('NodeManagerAddress', 'node')}-{node_id[:6]}"
        capacity = tuple(float(res.get(mapping[r][0], 0.0)) / mapping[r][1] for r in resources)
        known = configured.get(name)
        # a configured node keeps its attributes (task constraints match them)
        out.append((name, node_id, Node(name, capacity, name, known.attributes if known else ())))
    out.sort(key=lambda t: (order.get(t[0], len(order)), t[0]))
    return out
