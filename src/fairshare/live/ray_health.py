"""Is each Ray node still answering? The node prober behind ``RayExecutor``.

Why a probe: a raylet that hangs (stopped with SIGSTOP, swapping, a kernel stall) stays
``Alive`` in ``ray.nodes()`` for a long time (the GCS gives up on it only after its own
health checks fail many times over; 25 s of SIGSTOP go unnoticed), its socket still
accepts connections, and the tasks already running there keep running (a worker answers
its owner directly, without the raylet). Only something that needs that raylet to
answer notices: a tiny task pinned to the node (``NodeAffinitySchedulingStrategy``,
``soft=False``) needs a worker lease from it. So every node gets such a probe every
``interval_s``, in a runtime environment of its own (``PROBE_RUNTIME_ENV``): Ray keeps
workers per runtime environment, so the probe's worker is never handed to a task and
stays warm between probes. Without it a probe often needs a new worker, and a node
starts its workers one at a time (as many at once as it has Ray CPUs): sent right after
8 tasks, a plain probe waited 4.4 to 8.1 s on this loaded 2-core machine, the
own-environment one 0.01 to 0.03 s (``benchmarks/bench_probe.py``; docs/live.md, Node
health). The probe's reference is checked without blocking (``ray.wait(timeout=0)``) whenever the executor
looks at its nodes, so probing never holds up the scheduling loop.

The rule: a node is **unhealthy** when a probe has been waiting ``timeout_s`` seconds (since
the first probe sent after its last answer) without an answer. An unhealthy node is taken
out of scheduling: the executor reports it as ``NodeLost`` (no new task is placed on it,
its tasks are re-queued like a dead node's, and their old Ray tasks are cancelled and
forgotten, so a late result cannot be taken for a new attempt). It keeps being probed; when
a probe answers, it is healthy again and comes back as ``NodeAdded`` (empty). A node that
Ray itself lists as dead, or no longer lists, is **dead** (it may come back under a new
Ray node id, as a new node).

A probe that fails (Ray error rather than no answer) does not count as an answer: another
is sent at once, and the wait keeps running from the first one.

Answers are read before deadlines are judged, so a scheduling loop that was busy for a
while does not declare a node dead whose answer simply was not looked at; nor does a node
count as waiting while no probe is out (probes are only sent when the executor looks).

What is not covered: the head node. The driver (serve) reaches every raylet through the
GCS on the head; if the head's raylet or GCS hangs, every probe waits and every node is
declared unhealthy (and ``ray.nodes()`` itself blocks: ``/healthz`` says Ray is
unreachable).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: default of ``fairshare serve --node-timeout``
DEFAULT_NODE_TIMEOUT_S = 10.0
#: seconds between a node's answer and its next probe. Under 1 s on purpose: a raylet
#: with more workers than its Ray CPUs kills a worker idle for 1 s
#: (``idle_worker_killing_time_threshold_ms``), and a probe that then needs a new worker
#: waits for it to start behind the tasks' workers (seconds on a loaded machine)
DEFAULT_PROBE_INTERVAL_S = 0.5
#: the shortest time between two ``tick``s that do something (``tick`` runs on every
#: poll of the scheduling loop; one costs a ``ray.wait(timeout=0)`` on the probes out)
TICK_S = 0.1
#: the least time a node's first probe is given (``timeout_s`` if longer): it waits for
#: the probes' worker to start on that node, seconds on a loaded machine
FIRST_ANSWER_S = 30.0

ALIVE, UNHEALTHY, DEAD = "alive", "unhealthy", "dead"
STATES = (ALIVE, UNHEALTHY, DEAD)

#: the probes' runtime environment: only there to give them workers of their own
PROBE_RUNTIME_ENV = {"env_vars": {"FAIRSHARE_PROBE": "1"}}


def _probe() -> int:
    """Runs on the probed node: answering at all is the point (the pid helps debugging)."""
    return os.getpid()


@dataclass
class _Node:
    name: str
    node_id: str
    state: str = ALIVE
    ref: object | None = None        # the probe out now
    sent_at: float | None = None     # when that probe was sent
    waiting_since: float | None = None  # first probe sent since the last answer
    answered_at: float | None = None    # when the last answer was seen
    unhealthy_since: float | None = None


class NodeProber:
    """Probes nodes and judges them (module docstring). ``update`` is called by one
    thread (the executor's poll); ``report`` may be called from any thread (it reads a
    copy made under the GIL of plain attributes)."""

    def __init__(self, ray, *, timeout_s: float = DEFAULT_NODE_TIMEOUT_S,
                 interval_s: float = DEFAULT_PROBE_INTERVAL_S, clock: Callable[[], float] | None = None):
        if not (timeout_s > 0 and timeout_s < float("inf")):
            raise ValueError(f"node timeout: must be a positive number of seconds, got {timeout_s!r}")
        if not (interval_s > 0 and interval_s < float("inf")):
            raise ValueError(f"probe interval: must be a positive number of seconds, got {interval_s!r}")
        self.ray = ray
        self.timeout_s = float(timeout_s)
        self.interval_s = float(interval_s)
        self.clock = clock or time.monotonic
        self._remote = ray.remote(num_cpus=0, max_retries=0)(_probe)
        self._nodes: dict[str, _Node] = {}   # Ray node id -> what is known of it
        self._dead: dict[str, float] = {}    # name -> when Ray stopped listing it alive
        self._listed_at: float | None = None  # last time Ray listed its nodes
        self._listing_error: str | None = None  # why the last listing failed (None: it did not)
        self._ticked_at: float | None = None
        self.probes_sent = 0
        self.declared_unhealthy = 0  # times a node was taken out for not answering
        self.recovered = 0           # times an unhealthy node answered again

    # --- the executor's hooks --------------------------------------------------------------------
    def listing_failed(self, exc: BaseException) -> None:
        """``ray.nodes()`` raised: the GCS may be unreachable (``health``)."""
        self._listing_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"

    def update(self, alive: Mapping[str, str], now: float | None = None) -> set[str]:
        """``alive``: name -> Ray node id of the nodes Ray lists alive (the executor's node
        listing). Follows the nodes that come and go, then ``tick``s; returns the names to
        keep out of scheduling (the unhealthy ones)."""
        now = self.clock() if now is None else now
        self._listed_at, self._listing_error = now, None
        by_id = {node_id: name for name, node_id in alive.items()}
        for node_id in list(self._nodes):
            if node_id not in by_id:  # Ray says it is gone
                node = self._nodes.pop(node_id)
                self._drop_probe(node)
                self._dead[node.name] = now
                log.warning("node %s: Ray lists it dead", node.name)
        for node_id, name in by_id.items():
            if node_id not in self._nodes:
                self._nodes[node_id] = _Node(name, node_id)
                self._dead.pop(name, None)
        self._ticked_at = None
        self.tick(now)
        return {node.name for node in self._nodes.values() if node.state == UNHEALTHY}

    def tick(self, now: float | None = None) -> bool:
        """Reads the probes' answers, judges deadlines, sends the probes due (at most every
        ``TICK_S``; the executor calls it on every poll). True when a node turned unhealthy
        or healthy again: the executor lists its nodes at once."""
        now = self.clock() if now is None else now
        if self._ticked_at is not None and now - self._ticked_at < TICK_S:
            return False
        self._ticked_at = now
        before = {node.node_id for node in self._nodes.values() if node.state == UNHEALTHY}
        self._read_answers(now)
        for node in self._nodes.values():
            self._judge(node, now)
            self._send_if_due(node, now)
        return before != {node.node_id for node in self._nodes.values() if node.state == UNHEALTHY}

    def wait_for_answers(self, timeout_s: float) -> list[str]:
        """Blocks until every node followed has answered a probe (so the probes' workers
        are up before tasks start competing with them), at most ``timeout_s``; returns
        the names of the nodes that have not answered."""
        deadline = self.clock() + timeout_s
        while True:
            self._ticked_at = None
            self.tick()
            silent = sorted(node.name for node in self._nodes.values() if node.answered_at is None)
            if not silent or self.clock() >= deadline:
                return silent
            time.sleep(TICK_S)

    def _read_answers(self, now: float) -> None:
        out = {node.ref: node for node in self._nodes.values() if node.ref is not None}
        if not out:
            return
        ready, _ = self.ray.wait(list(out), num_returns=len(out), timeout=0, fetch_local=True)
        for ref in ready:
            node = out[ref]
            node.ref = None
            try:
                self.ray.get(ref, timeout=0)
            except Exception as exc:  # noqa: BLE001 - an error is not an answer: probe again
                log.info("node %s: probe failed: %s", node.name, str(exc).splitlines()[0][:200] if str(exc) else
                         type(exc).__name__)
                node.sent_at = None  # (sent again at once; waiting_since stays)
                continue
            if node.state == UNHEALTHY:
                self.recovered += 1
                log.warning("node %s answers again after %.1f s: back in scheduling", node.name,
                            now - (node.unhealthy_since or now))
            node.state = ALIVE
            node.waiting_since = node.sent_at = node.unhealthy_since = None
            node.answered_at = now

    def _judge(self, node: _Node, now: float) -> None:
        limit = self.timeout_s if node.answered_at is not None else max(self.timeout_s, FIRST_ANSWER_S)
        if node.state == ALIVE and node.waiting_since is not None and now - node.waiting_since >= limit:
            node.state = UNHEALTHY
            node.unhealthy_since = now
            self.declared_unhealthy += 1
            log.warning("node %s: no answer for %.1f s (node timeout %g s): unhealthy, its tasks are re-queued",
                        node.name, now - node.waiting_since, self.timeout_s)

    def _send_if_due(self, node: _Node, now: float) -> None:
        if node.ref is not None:
            if node.state == UNHEALTHY and now - (node.sent_at or now) >= self.timeout_s:
                # a probe waiting this long may have been dropped (the raylet restarted):
                # replace it, so an answer can still come
                self._drop_probe(node)
            else:
                return
        if node.answered_at is not None and node.waiting_since is None and now - node.answered_at < self.interval_s:
            return
        try:
            node.ref = self._remote.options(scheduling_strategy=self._pin(node.node_id),
                                            runtime_env=PROBE_RUNTIME_ENV).remote()
        except Exception as exc:  # noqa: BLE001 - Ray refused the submission: try at the next update
            log.info("node %s: probe not sent: %s", node.name, exc)
            node.ref = None
            return
        node.sent_at = now
        if node.waiting_since is None:
            node.waiting_since = now
        self.probes_sent += 1

    @staticmethod
    def _pin(node_id: str):
        """Run there or nowhere: a probe answered by another node would prove nothing."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(node_id, soft=False)

    def _drop_probe(self, node: _Node) -> None:
        if node.ref is None:
            return
        try:
            self.ray.cancel(node.ref)  # (asynchronous: does not wait for the raylet)
        except Exception as exc:  # noqa: BLE001 - it may be finishing right now
            log.debug("cancel of a probe of %s: %s", node.name, exc)
        node.ref = None
        node.sent_at = None

    # --- what /healthz and /metrics show -----------------------------------------------------------
    def report(self, now: float | None = None) -> list[dict]:
        """One entry per node known: ``name``, ``state`` (alive, unhealthy, dead),
        ``last_answer_s`` (seconds since its last answer; None: none yet) and
        ``waiting_s`` (how long its probe has waited; None: none out). By name."""
        now = self.clock() if now is None else now
        out = []
        for node in list(self._nodes.values()):
            out.append({"name": node.name, "state": node.state,
                        "last_answer_s": None if node.answered_at is None else round(now - node.answered_at, 3),
                        "waiting_s": None if node.waiting_since is None else round(now - node.waiting_since, 3)})
        names = {entry["name"] for entry in out}
        for name in list(self._dead):
            if name not in names:
                out.append({"name": name, "state": DEAD, "last_answer_s": None, "waiting_s": None})
        out.sort(key=lambda entry: entry["name"])
        return out

    def health(self, now: float | None = None) -> dict:
        """Ray's state for ``/healthz``: ``reachable`` (Ray listed its nodes within the
        node timeout), ``last_contact_s`` (seconds since that listing),
        ``error`` (of the last failed listing), ``node_timeout_s``, the ``nodes`` counted
        by state and each node (``report``)."""
        now = self.clock() if now is None else now
        nodes = self.report(now)
        age = None if self._listed_at is None else now - self._listed_at
        # (one failed listing is a blip; no listing for the node timeout is an outage)
        reachable = age is not None and age <= max(self.timeout_s, 3 * self.interval_s)
        counts = {state: sum(1 for n in nodes if n["state"] == state) for state in STATES}
        return {"reachable": reachable, "last_contact_s": None if age is None else round(age, 3),
                "error": self._listing_error, "node_timeout_s": self.timeout_s, "nodes": counts,
                "node_states": nodes}
