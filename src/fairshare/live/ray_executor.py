"""Ray behind the executor seam (``engine.executor.Executor``).

Two ways to get a cluster:

- **local** (no ``--ray-address``): one Ray node per configured node, each started by
  ``ray start --block`` in a session of its own (``live.ray_local``), so the cluster
  outlives serve: a ``kill -9`` of serve leaves it, and the tasks it runs, alone, and the
  restarted serve re-attaches to it (its address and processes are recorded next to the
  database). A clean stop (SIGTERM, Ctrl-C) stops it when no agent holds anything, and
  leaves it up, as a crash does, while commands run (``shutdown``). Each node advertises every
  fairshare resource ``r`` as the custom Ray resource ``fs_<r>`` with the configured
  amount, and ``fs_node_<name>: 1`` so its name can be found again.
- **attach** (``--ray-address``): ``ray.init(address=...)``; the nodes and their
  resources are discovered with ``ray.nodes()`` (polled: nodes that leave are lost,
  nodes that join are added). A node's name is its ``fs_node_<name>`` resource when it
  has one, else ``<address>-<first 6 digits of its node id>``.

Resource mapping (how capacities are read): when the cluster advertises ``fs_<r>`` (always
in local mode), resource ``r`` is ``fs_<r>``, in the user's own unit. Otherwise, on a
cluster started without them, ``cpu`` maps to Ray's ``CPU``, ``gpu`` to ``GPU``,
``memory`` to Ray's ``memory`` (fairshare amounts are GiB there) and any other resource
(``mic``, ``gpu_a100``) to the custom resource of the same name. fairshare does the
accounting itself (the scheduler never over-commits a node), so the mapping is used to
discover capacities, not to reserve them in Ray.

How a task runs: each node has a **node agent** (``live.node_agent``), a detached named
Ray actor pinned to its node (``NodeAffinitySchedulingStrategy(soft=False)``), named
``<service id>/<node>`` in the ``fairshare`` namespace (the service id is the
database's, so two serves on one Ray cluster never share agents). ``start`` is one actor
call, ``run(task id, attempt, incarnation, command)``; the agent runs the command as a
subprocess and keeps its result until serve acknowledges it (``acknowledge``, called by
the loop once the result is in the database). Ends reach serve through one long-poll
call per agent (``reports``), not one Ray task per task: per task, one actor call and
one fork, no worker lease. Because the agents are detached, the commands outlive serve:
after a restart ``recover`` finds the agents by name, adopts the attempts the database
says are running, and drops (kills) any other, so nothing runs that serve does not know
about. The agent fences off calls of an older serve incarnation (``live.node_agent``).

A node whose agent dies (the node died, or the agent was killed) loses its commands
(their parent-death signal); they are reported as failed by Ray (``ray: ...``), which the
loop re-queues without using an attempt.

Node health (``live.ray_health``): every node is probed with a tiny task pinned to it,
which needs the node's raylet to answer; one that does not answer for ``node_timeout_s``
is reported lost although Ray still lists it alive (a hung raylet: SIGSTOP, a frozen
machine), and comes back as added, empty, when it answers again. Whenever a node is
reported lost, for any reason, its tasks are forgotten here (``_forget_node``: their
ends, if they still come, belong to an attempt the loop no longer runs and are only
acknowledged) and its agent is told to kill them (an actor call goes to the agent's
worker directly, so it can arrive even while the raylet is hung).
"""

from __future__ import annotations

import logging
import time
import uuid

from fairshare.engine.events import ExecutorEvent, NodeAdded, NodeLost, TaskFinished
from fairshare.engine.scheduler import Launch
from fairshare.live.commands import CommandBook, TaskSpec
from fairshare.live.crashpoints import crash_point
from fairshare.live.node_agent import FENCED, STALE, STARTED, NodeAgent
from fairshare.live.ray_health import DEFAULT_NODE_TIMEOUT_S, DEFAULT_PROBE_INTERVAL_S, NodeProber
from fairshare.live.ray_local import NODE_MARK, PREFIX, start_or_attach
from fairshare.live.ray_programs import RayPrograms, _first_line
from fairshare.live.task_output import DEFAULT_MAX_BYTES, OutputFiles
from fairshare.model.cluster import Node

log = logging.getLogger(__name__)

GIB = float(2 ** 30)
NAMESPACE = "fairshare"
#: how long an agent's ``reports`` call waits for an end before returning empty
REPORT_WAIT_S = 1.0
#: how long to wait before asking an unreachable agent for its reports again
REPORT_RETRY_S = 0.5
#: calls an agent serves at once (``run``, ``kill`` and a ``reports`` long poll overlap)
AGENT_CONCURRENCY = 64
#: how long a read of a task's output waits for the agents (attach mode)
OUTPUT_READ_TIMEOUT_S = 10.0


def _trial() -> int:
    return 0


class RayExecutor:
    """Starts tasks through the node agents and reports what happened to them through
    ``poll``. What a task runs is looked up in ``commands`` (shared with the service)."""

    def __init__(self, resources: tuple[str, ...], nodes: tuple[Node, ...] = (), *, commands: CommandBook,
                 address: str | None = None, node_poll_s: float = 1.0, object_store_mb: int = 100,
                 state_file: str | None = None, node_timeout_s: float = DEFAULT_NODE_TIMEOUT_S,
                 probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S, output_dir: str | None = None,
                 output_max_bytes: int = DEFAULT_MAX_BYTES):
        """``state_file`` (local mode): where the local cluster is recorded, to re-attach
        to it after a restart (``fairshare serve`` uses ``<db>.ray.json``); without it the
        cluster is not found again by another process. ``output_dir``: the directory
        (an absolute path, on every node) under which each agent keeps the output of the
        attempts it runs, in ``<output_dir>/<service id>/`` (``live.task_output``); None:
        no output is kept."""
        import ray

        self.ray = ray
        self.resources = tuple(resources)
        self.address = address
        self.node_poll_s = node_poll_s
        self.output_dir = output_dir
        self.output_max_bytes = output_max_bytes
        self.cluster = None  # local mode: the ray_local.LocalCluster
        self._configured = {node.name: node for node in nodes}
        if address is None:
            if not nodes:
                raise ValueError("a local Ray cluster needs the configured nodes")
            self.cluster = start_or_attach(self.resources, tuple(nodes), state_file=state_file,
                                           object_store_mb=object_store_mb)
            self.address = self.cluster.address
        ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
        self._agent_class = ray.remote(NodeAgent)
        # One task now, from this thread: Ray builds its serialization context (importing
        # pydantic.v1) on the first submission, and doing that first in the scheduling
        # thread while the web server imports pydantic races in the import system.
        if ray.get(ray.remote(num_cpus=0)(_trial).remote(), timeout=180) != 0:
            raise RuntimeError("a trial task on the Ray cluster failed")
        self.commands = commands
        self.mapping = self._resource_mapping()
        self._nodes: dict[str, tuple[str, Node]] = {}  # name -> (ray node id, node), alive nodes
        deadline = time.monotonic() + 60
        while True:
            for name, node_id, node in self._discover():
                self._nodes[name] = (node_id, node)
            if self._nodes.keys() >= self._configured.keys() or address is not None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if not self._nodes:
            raise RuntimeError("the Ray cluster has no alive node")
        # the node health hook: the first probes now, before tasks compete with them for workers
        self.prober = NodeProber(ray, timeout_s=node_timeout_s, interval_s=probe_interval_s)
        self.prober.update({name: node_id for name, (node_id, _) in self._nodes.items()})
        silent = self.prober.wait_for_answers(timeout_s=60)
        if silent:
            log.warning("node(s) %s have not answered a first health probe yet", ", ".join(silent))
        self.service_id = uuid.uuid4().hex[:12]  # until ``recover`` gives the database's
        #: the jobs whose work is a Ray program: their placement groups and drivers
        self.programs = RayPrograms(ray, self.resources, self.mapping, self._pinned, self._service_output_dir,
                                    output_max_bytes, commands.cwd)
        self.programs.service_id = self.service_id
        self.incarnation = 0
        self._agents: dict[str, object] = {}  # node name -> its agent's handle
        self._running: dict[int, tuple[int, str]] = {}  # task id -> (attempt, node)
        self._starts: dict[object, tuple[int, int, str, tuple]] = {}  # run() ref -> (task, attempt, node, args)
        self._reports: dict[object, str] = {}  # outstanding reports() ref -> node
        self._retry_reports: dict[str, float] = {}  # node -> when to call reports() again (agent unreachable)
        self._after_seq: dict[str, int] = {}  # node -> newest end seen from its agent
        self._acks: dict[str, list[tuple[int, int]]] = {}  # node -> recorded ends to acknowledge
        self._reported: dict[tuple[int, int], str] = {}  # (task, attempt) handed to the loop -> node
        self._pending_events: list[ExecutorEvent] = []
        self._last_node_poll = 0.0

    # --- restart: find the agents, adopt what the database says runs -------------------------
    def recover(self, service_id: str, incarnation: int, running: dict[int, tuple[int, str]]) -> set[int]:
        """Called once by the service before anything starts. ``running``: task id ->
        (attempt, node) of the tasks the database says are running. Every alive node's
        agent is found (or created) and told the new ``incarnation`` (older ones are
        fenced off from then on); an attempt an agent holds that ``running`` names is
        adopted (its end, even one that came while serve was down, is reported by
        ``poll``); any other is dropped (killed if it runs). Returns the adopted task
        ids; the others of ``running`` are not running anywhere (the caller re-queues them)."""
        self.service_id, self.incarnation = service_id, incarnation
        self._agents.clear()
        self._running.clear()
        self._starts.clear()
        self._reports.clear()
        self._retry_reports.clear()
        self._reported.clear()
        self._after_seq.clear()
        hellos = {}
        for name in list(self._nodes):
            try:
                agent = self._agent(name)
                hellos[name] = agent.hello.remote(incarnation)
            except Exception as exc:  # noqa: BLE001 - the node is going away: its tasks are not adopted
                log.warning("node %s: no agent: %s", name, exc)
        adopted: set[int] = set()
        drops = []
        for name, ref in hellos.items():
            try:
                hello = self.ray.get(ref, timeout=120)
            except Exception as exc:  # noqa: BLE001
                log.warning("node %s: its agent does not answer: %s", name, exc)
                self._agents.pop(name, None)
                continue
            if hello["fenced"]:
                raise RuntimeError(f"node {name}: its agent has seen serve incarnation {hello['incarnation']}, "
                                   f"newer than this one ({incarnation}): another serve uses this database's agents")
            for task_id, attempt, _inc, _pid, _code, _seq in hello["runs"]:
                if running.get(task_id, (None, None)) == (attempt, name):
                    adopted.add(task_id)
                    self._running[task_id] = (attempt, name)
                else:
                    drops.append(self._agents[name].drop.remote(task_id, attempt, incarnation))
        if drops:
            self.ray.get(drops, timeout=60)
        if adopted:
            log.info("adopted %d running task(s) from the node agents", len(adopted))
        for name in list(self._agents):
            self._poll_reports(name)
        return adopted | self.programs.recover(service_id, running)

    def _agent(self, name: str):
        """The node's agent, created (detached, pinned to the node) if it does not exist."""
        agent = self._agents.get(name)
        if agent is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            node_id = self._nodes[name][0]
            agent = self._agent_class.options(
                name=f"{self.service_id}/{name}", namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
                num_cpus=0, max_concurrency=AGENT_CONCURRENCY, max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote(
                    name, self._service_output_dir(), self.output_max_bytes)
            self._agents[name] = agent
            self._after_seq.setdefault(name, 0)
        return agent

    def _poll_reports(self, name: str) -> None:
        """Keep one ``reports`` long poll outstanding per agent (carrying the acknowledgements)."""
        acks = self._acks.pop(name, [])
        ref = self._agents[name].reports.remote(self.incarnation, acks, self._after_seq.get(name, 0), REPORT_WAIT_S)
        self._reports[ref] = name

    # --- the seam -----------------------------------------------------------------------------
    def nodes(self) -> tuple[Node, ...]:
        return tuple(node for _, node in self._nodes.values())

    def start(self, launch: Launch, now: float) -> None:
        program = self.commands.program(launch.job)
        if program is not None:  # a Ray program's bundle: started with its gang (``live.ray_programs``)
            if launch.node not in self._nodes:
                self._pending_events.append(TaskFinished(launch.task_id, ok=False, attempt=launch.attempt,
                                                         reason=f"node {launch.node} is gone"))
            else:
                self.programs.gather(launch, program, self.commands.program_env(launch))
            return
        spec: TaskSpec = self.commands.spec(launch)
        if launch.node not in self._nodes:  # the node left between the decision and the start
            self._pending_events.append(TaskFinished(launch.task_id, ok=False, reason=f"node {launch.node} is gone",
                                                     attempt=spec.attempt))
            return
        fresh = launch.node not in self._agents
        agent = self._agent(launch.node)
        if fresh:
            self._poll_reports(launch.node)
        args = (launch.task_id, spec.attempt, self.incarnation, list(spec.argv), spec.shell, dict(spec.env), spec.cwd)
        if spec.user is not None:  # (only then: the call stays the one an agent of an older serve knows)
            args += (spec.user,)
        ref = agent.run.remote(*args)
        self._running[launch.task_id] = (spec.attempt, launch.node)
        self._starts[ref] = (launch.task_id, spec.attempt, launch.node, args)
        crash_point("handed")

    def poll(self) -> list[ExecutorEvent]:
        events, self._pending_events = self._pending_events, []
        events.extend(self.programs.poll())
        infrastructure_failure = False
        finished: list[ExecutorEvent] = []
        refs = list(self._starts) + list(self._reports)
        ready = self.ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=True)[0] if refs else []
        for ref in ready:
            if ref in self._starts:
                task_id, attempt, node, args = self._starts.pop(ref)
                try:
                    answer, detail = self.ray.get(ref)
                except self.ray.exceptions.ActorUnavailableError as exc:
                    # unreachable for now (it may or may not have run the call): ``run`` of a
                    # (task, attempt) is idempotent, so ask again
                    if self._running.get(task_id) == (attempt, node) and node in self._agents:
                        log.warning("task %d: the agent of %s is unreachable (%s); starting again",
                                    task_id, node, _first_line(exc))
                        self._starts[self._agents[node].run.remote(*args)] = (task_id, attempt, node, args)
                    continue
                except self.ray.exceptions.RayError as exc:
                    # the agent is gone; its reports call fails too, and ends its tasks
                    log.warning("task %d: the agent of %s did not take it: %s", task_id, node, _first_line(exc))
                    continue
                if answer == STARTED:
                    crash_point("running")
                elif answer in (FENCED, STALE):
                    log.error("task %d attempt %d: the agent of %s refused it: %s", task_id, attempt, node, detail)
                    if self._running.get(task_id) == (attempt, node):
                        del self._running[task_id]
                        finished.append(TaskFinished(task_id, ok=False, reason=f"ray: agent refused: {detail}",
                                                     attempt=attempt))
                        infrastructure_failure = True
                # (REFUSED: the command could not start; the agent reports that end itself)
                continue
            node = self._reports.pop(ref)
            try:
                newest, ends = self.ray.get(ref)
            except self.ray.exceptions.ActorUnavailableError as exc:
                # not known dead (a busy or briefly unreachable agent): its commands may run
                # on, so its tasks are not failed (they would run twice); ask again soon. A
                # dead node is removed through the node list (``NodeLost``)
                log.warning("the agent of node %s is unreachable: %s", node, _first_line(exc))
                self._retry_reports[node] = time.monotonic() + REPORT_RETRY_S
                infrastructure_failure = True
                continue
            except self.ray.exceptions.RayError as exc:
                infrastructure_failure = True
                finished.extend(self._agent_lost(node, exc))
                continue
            if newest > self.incarnation:
                log.error("node %s: a newer serve (incarnation %d) uses this agent; this one (%d) stops "
                          "reading it", node, newest, self.incarnation)
                continue
            for task_id, attempt, code, output, seq in ends:
                self._after_seq[node] = max(self._after_seq.get(node, 0), seq)
                key = (task_id, attempt)
                if self._running.get(task_id) == (attempt, node):
                    del self._running[task_id]
                    self._reported[key] = node
                    reason = "" if code == 0 else f"exit status {code}: {output.strip()[-500:]}"
                    finished.append(TaskFinished(task_id, ok=code == 0, reason=reason, attempt=attempt))
                    crash_point("finished")
                else:  # killed and reported already, or not this serve's: nothing to record
                    self._acks.setdefault(node, []).append(key)
            if node in self._agents:
                self._poll_reports(node)
        now = time.monotonic()
        for node, when in list(self._retry_reports.items()):
            if now >= when:
                del self._retry_reports[node]
                if node in self._agents:
                    self._poll_reports(node)
        # a node death surfaces first as failed tasks: look at the nodes now, so the node
        # is removed before its tasks are re-queued (and not placed on it again); so does a
        # node that stopped or started answering its health probes
        if self.prober.tick(now) or infrastructure_failure or now - self._last_node_poll >= self.node_poll_s:
            self._last_node_poll = now
            events.extend(self._node_changes())
        return events + finished

    def acknowledge(self, ends: list[tuple[int, int]]) -> None:
        """``(task id, attempt)`` whose end the service has recorded: the agents may forget
        them (sent with the next ``reports`` call)."""
        for key in ends:
            node = self._reported.pop(key, None)
            if node is not None:
                self._acks.setdefault(node, []).append(key)
        self.programs.acknowledge(ends)

    def kill(self, task_id: int) -> None:
        """Kill the task's command (its process group) and report its end at once (the
        next ``poll``): the task id may be started again before the agent reports the
        killed attempt's end, and that late end must not be taken for the new start's
        (it is recognised by its attempt and dropped)."""
        if self.programs.kill(task_id):
            return
        entry = self._running.pop(task_id, None)
        if entry is None:
            return
        attempt, node = entry
        agent = self._agents.get(node)
        if agent is not None:
            agent.kill.remote(task_id, attempt, self.incarnation)
        self._pending_events.append(TaskFinished(task_id, ok=False, reason="cancelled", attempt=attempt))

    def running(self) -> int:
        return len(self._running) + self.programs.running()

    def placement_group(self, job: str) -> dict | None:
        """A Ray program's placement group (``GET /v1/jobs/{id}``); None: not a running program."""
        return self.programs.placement_group(job)

    def _pinned(self) -> set[str]:
        """The nodes that advertise their ``fs_node_<name>`` marker (a program's bundles are pinned by it)."""
        return {key[len(NODE_MARK):] for n in self.ray.nodes() if n.get("Alive")
                for key in n.get("Resources", {}) if key.startswith(NODE_MARK)}

    def shutdown(self, stop_commands: bool = False) -> int:
        """A clean stop (SIGTERM, Ctrl-C) leaves what a ``kill -9`` leaves: an agent that
        holds something (a command running, an end the database has not recorded) stays,
        with its commands, for the next serve on this database to adopt (``recover``);
        the agents that hold nothing are killed, and a local cluster none of whose agents
        holds anything is stopped (it is left up otherwise, recorded in its state file,
        for the next serve to re-attach to). ``stop_commands`` (``serve
        --stop-commands-on-exit``): every agent is killed, its commands with it (their
        parent-death signal), and a local cluster is stopped; the next serve re-queues
        the tasks they ran. Returns the commands left running."""
        left_running = 0
        holding = 0
        try:
            # Ray programs: left running (detached, adopted by the next serve) like commands
            programs = self.programs.shutdown(stop_commands)
            left_running += programs
            holding += programs
            killed = []
            for name, agent in list(self._agents.items()):
                try:
                    if stop_commands:
                        if self.cluster is None:
                            self.ray.kill(agent)
                            killed.append(agent)
                        continue
                    # (the acknowledgements not sent yet first: a recorded end is not held)
                    self.ray.get(agent.reports.remote(self.incarnation, self._acks.pop(name, []), 0, 0.0),
                                 timeout=10)
                    hello = self.ray.get(agent.hello.remote(self.incarnation), timeout=10)
                    if hello["fenced"] or hello["runs"]:  # (fenced: a newer serve's now)
                        holding += 1
                        left_running += sum(1 for run in hello["runs"] if run[4] is None)
                    else:
                        self.ray.kill(agent)
                        killed.append(agent)
                except Exception as exc:  # noqa: BLE001 - not known idle: left alone
                    holding += 1
                    log.warning("clean stop: the agent of %s did not answer (%s); left as it is", name,
                                _first_line(exc))
            # ``ray.kill`` only sends the request: see each killed agent gone before this
            # driver disconnects, or the request may go with it
            for agent in killed:
                try:
                    self.ray.get(agent.ping.remote(), timeout=10)
                except Exception:  # noqa: BLE001, S110 - gone, as asked
                    pass
            if holding:
                log.info("clean stop: %d command(s) left running under %d node agent(s); the next serve on "
                         "this database adopts them", left_running, holding)
            self.ray.shutdown()
        finally:
            if self.cluster is not None:
                if holding == 0:
                    self.cluster.stop()
                self.cluster = None
        return left_running

    # --- task output ---------------------------------------------------------------------------
    def _service_output_dir(self) -> str | None:
        """This database's output directory (per service id: a new database on the same
        cluster and directory starts its task ids again)."""
        return None if self.output_dir is None else f"{self.output_dir}/{self.service_id}"

    def task_outputs(self, task_ids: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
        """Local mode: the files, read here (every node is on this machine, and they are
        there even when the agents are not); attach mode: every agent's, through it."""
        if self.output_dir is None:
            return {}
        if self.cluster is not None:
            return OutputFiles(self._service_output_dir()).list(task_ids)
        out: dict[tuple[int, int], tuple[int, int]] = {}
        for listed in self._ask_agents("output_list", list(task_ids)):
            for key, (kept, dropped) in listed.items():
                if key not in out or kept > out[key][0]:  # (a re-run attempt's leftovers: the longer)
                    out[key] = (kept, dropped)
        return out

    def read_task_output(self, task_id: int, attempt: int, offset: int, limit: int):
        if self.output_dir is None:
            return None
        if self.cluster is not None:
            return OutputFiles(self._service_output_dir()).read(task_id, attempt, offset, limit)
        chunks = [c for c in self._ask_agents("output_read", task_id, attempt, offset, limit) if c is not None]
        return max(chunks, key=lambda c: c.size, default=None)

    def _ask_agents(self, method: str, *args) -> list:
        """The answers of every known agent (called from API threads: the handles are
        read, not changed; an agent that does not answer in time is left out)."""
        refs = []
        for name, agent in list(self._agents.items()):
            try:
                refs.append((name, getattr(agent, method).remote(*args)))
            except Exception as exc:  # noqa: BLE001 - an agent going away
                log.debug("agent of %s: %s", name, exc)
        answers = []
        for name, ref in refs:
            try:
                answers.append(self.ray.get(ref, timeout=OUTPUT_READ_TIMEOUT_S))
            except Exception as exc:  # noqa: BLE001 - unreachable: its output is not listed now
                log.warning("the agent of %s did not answer %s: %s", name, method, _first_line(exc))
        return answers

    # --- test hooks (local mode) -----------------------------------------------------------------
    def remove_node(self, name: str) -> None:
        """Kill one local node's processes (the dead-node test)."""
        assert self.cluster is not None, "only a local cluster's nodes can be removed"
        self.cluster.kill_node(name)

    def raylet_pid(self, name: str) -> int:
        """The process id of one local node's raylet (the hung-node test stops it)."""
        assert self.cluster is not None, "only a local cluster's raylets are known"
        return self.cluster.raylet_pid(name)

    def health(self) -> dict:
        """Ray's state for ``/healthz`` and ``/metrics`` (``NodeProber.health``)."""
        return self.prober.health()

    # --- helpers ---------------------------------------------------------------------------------
    def _agent_lost(self, node: str, exc: BaseException) -> list[ExecutorEvent]:
        """The agent of ``node`` died: so did its commands. Each of its tasks fails as an
        infrastructure failure (re-queued without using an attempt); a new agent is
        made at the node's next start, if the node lives."""
        log.warning("the agent of node %s died: %s", node, _first_line(exc))
        self._agents.pop(node, None)
        self._after_seq.pop(node, None)
        self._acks.pop(node, None)
        out = []
        for task_id, (attempt, where) in sorted(self._running.items()):
            if where == node:
                del self._running[task_id]
                out.append(TaskFinished(task_id, ok=False, reason=f"ray: the agent of node {node} died",
                                        attempt=attempt))
        return out

    def _resource_mapping(self) -> dict[str, tuple[str, float]]:
        return resource_mapping(self.resources, self.ray.nodes())

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
                self._forget_node(name)
                self.programs.lost(name)
                events.append(NodeLost(name))
        for name in sorted(seen):
            if name not in self._nodes:
                self._nodes[name] = seen[name]
                events.append(NodeAdded(seen[name][1]))
        return events

    def _forget_node(self, name: str) -> None:
        """A lost node: its agent and its tasks (the loop re-queues them with the node).
        The agent is told to kill them, fire and forget: a dead node's agent is gone with
        its commands; a hung node's may still run them, and their ends, if they come,
        are of attempts no longer running (acknowledged, never recorded)."""
        agent = self._agents.get(name)
        if agent is not None:
            for task_id, (attempt, node) in self._running.items():
                if node == name:
                    try:
                        agent.kill.remote(task_id, attempt, self.incarnation)
                    except Exception as exc:  # noqa: BLE001 - the agent may be gone already
                        log.debug("kill of task %d on lost node %s: %s", task_id, name, exc)
        self._agents.pop(name, None)
        self._after_seq.pop(name, None)
        self._acks.pop(name, None)
        self._retry_reports.pop(name, None)
        for ref in [r for r, n in self._reports.items() if n == name]:
            del self._reports[ref]
        for task_id in [t for t, (_a, n) in self._running.items() if n == name]:
            del self._running[task_id]


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
