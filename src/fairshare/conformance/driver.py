"""The online checks' driver: a workload through ``Engine.step``, accounted independently.

``drive(policy, workload)`` is a small runtime on the executor seam, like the simulator's
but with nothing the checks would have to trust: an event heap keyed ``(time, instant
rank, sequence)`` (so an instant's events reach ``Engine.step`` in the one order of
``engine.events.INSTANT_ORDER``, ties in the order they were pushed), fixed or seeded
task durations, and an executor (``AccountingExecutor``) that keeps its own account of
what runs where from the launches it is given and the node events it reports. The
capacity and limit checks read that account, never the engine's bookkeeping they check.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from fairshare.engine import (Engine, Event, JobArrived, JobCancelled, Launch, NodeAdded, NodeLost, Preempted,
                              Scheduler, TaskFinished, Wake, instant_rank)
from fairshare.engine.executor import ExecutorDefaults
from fairshare.engine.preemption import Preemptor
from fairshare.model import Node
from fairshare.model.scenario import Scenario
from fairshare.conformance.workloads import Workload
from fairshare.policies import Policy

#: a task's length from its launch and the run's seeded generator
Duration = Callable[[Launch, random.Random], float]


class EventHeap:
    """Timed engine events, popped one instant at a time in ``instant_rank`` order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = 0
        self.now = 0.0  # the instant being stepped

    def push(self, time: float, event: Event) -> None:
        heapq.heappush(self._heap, (time, instant_rank(event), self._seq, event))
        self._seq += 1

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_instant(self) -> tuple[float, list[Event]]:
        """Every event of the earliest instant, in order."""
        self.now = now = self._heap[0][0]
        events = []
        while self._heap and self._heap[0][0] == now:
            events.append(heapq.heappop(self._heap)[3])
        return now, events


class AccountingExecutor(ExecutorDefaults):
    """The checks' executor (``engine.executor.Executor``): a started task "runs" by
    pushing its completion onto the heap; a killed one ends now, failed (as the
    simulator's). Its account (``alive``, ``running``, ``started``) changes only with the
    launches it is given and the executor events it reports (``report``), so it is a
    second bookkeeping beside the scheduler's."""

    def __init__(self, nodes: tuple[Node, ...], heap: EventHeap, duration: Duration, seed: int):
        self._nodes = tuple(nodes)
        self.heap = heap
        self.duration = duration
        self.rng = random.Random(seed)  # drawn in launch order
        self.alive: dict[str, tuple] = {n.name: n.capacity for n in nodes}  # node up -> capacity
        self.running: dict[int, tuple[str, str, tuple]] = {}  # task id -> (job, node, demand)
        self.started: Counter = Counter()  # per job: tasks started and not lost or failed

    def nodes(self) -> tuple[Node, ...]:
        return self._nodes

    def start(self, launch: Launch, now: float) -> None:
        self.running[launch.task_id] = (launch.job, launch.node, launch.demand)
        self.started[launch.job] += 1
        self.heap.push(now + self.duration(launch, self.rng), TaskFinished(launch.task_id))

    def kill(self, task_id: int) -> None:
        """The task stops now (out of the account at once: the engine may start another
        task in its room within the same step, as for a preemption's victims or the rest
        of a gang); its failure reaches the engine as an event of this time."""
        ended = self.running.pop(task_id, None)
        if ended is not None:
            self.started[ended[0]] -= 1
        self.heap.push(self.heap.now, TaskFinished(task_id, ok=False, reason="killed"))

    def poll(self) -> list:
        return []  # (everything comes through the heap)

    def report(self, event: Event) -> None:
        """``event`` is about to be handed to the engine: what it does to the cluster."""
        if isinstance(event, TaskFinished):
            ended = self.running.pop(event.task_id, None)  # (None: lost with its node since)
            if ended is not None and not event.ok:
                self.started[ended[0]] -= 1
        elif isinstance(event, NodeLost) and event.name in self.alive:
            del self.alive[event.name]
            for task_id in [t for t, (_, node, _) in self.running.items() if node == event.name]:
                self.started[self.running.pop(task_id)[0]] -= 1
        elif isinstance(event, NodeAdded):
            self.alive[event.node.name] = event.node.capacity

    def per_node(self) -> dict[str, list[tuple[str, tuple]]]:
        """Node -> (job, demand) of each task running there (every node up listed)."""
        out: dict[str, list] = {name: [] for name in self.alive}
        for jname, node, demand in self.running.values():
            out.setdefault(node, []).append((jname, demand))
        return out


@dataclass
class Instant:
    """The state after one ``Engine.step``, as the executor accounted it."""

    now: float
    launches: list[Launch]  # in decision order
    running: dict[str, list[tuple[str, tuple]]]  # node -> (job, demand) of each task running there
    capacity: dict[str, tuple]  # node up -> its capacity
    #: per job, tasks started and not lost, failed or killed (finished ones included)
    started: dict[str, int] = field(default_factory=dict)
    #: the step's preemptions (the scenario's ``preemption:`` section on)
    preempted: tuple[Preempted, ...] = ()


@dataclass
class Run:
    instants: list[Instant] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # inadmissible launches seen

    @property
    def log(self) -> list[tuple]:
        """Every decision: (time, task id, job, task class, node)."""
        return [(i.now, la.task_id, la.job, la.task_class, la.node) for i in self.instants for la in i.launches]


def engine_for(policy: Policy, sc: Scenario, nodes: tuple[Node, ...], heap: EventHeap, *,
               duration: Duration | None = None, seed: int = 0) -> tuple[Engine, AccountingExecutor]:
    """A fresh Scheduler for ``policy`` on ``nodes`` and its Engine, with the checks'
    executor. Task durations are 1-5 s drawn from ``random.Random(seed)`` in launch
    order unless ``duration(launch, rng)`` says otherwise."""
    executor = AccountingExecutor(nodes, heap, duration or (lambda launch, rng: float(rng.randint(1, 5))), seed)
    policy = policy.configured(sc)
    preemptor = None if sc.preemption is None else Preemptor(sc.preemption, policy, sc.resources)
    half_life = sc.fairness.half_life if sc.fairness else 0.0
    return Engine(Scheduler(sc.resources, nodes, sc.queues, policy, half_life=half_life), executor,
                  preemptor), executor


def drive(policy: Policy, workload: Workload, *, duration: Duration | None = None) -> Run:
    """Run ``workload`` through an Engine for ``policy``: each instant's events (arrivals,
    cancellations, node changes, completions) in one ``Engine.step``. Records every
    step's launches and the executor's per-node account after it, and every inadmissible
    launch (on a node that is not up, for a job not submitted, cancelled, or past its
    task count)."""
    sc = workload.scenario
    nodes = tuple(sc.cluster.nodes if workload.nodes is None else workload.nodes)
    heap = EventHeap()
    engine, executor = engine_for(policy, sc, nodes, heap, duration=duration, seed=workload.seed)
    for t, what, node in workload.node_events:
        heap.push(t, NodeLost(node) if what == "lose" else NodeAdded(node))
    for t, name in workload.cancels:
        heap.push(t, JobCancelled(name))
    for jb in sc.jobs:
        heap.push(jb.submit_s, JobArrived(jb))
    counts = {jb.name: jb.total_count for jb in sc.jobs}
    submitted: set[str] = set()
    cancelled: set[str] = set()
    run = Run()
    woken: set[float] = set()
    while heap.next_time() is not None and heap.next_time() <= workload.until:
        now, events = heap.pop_instant()
        for event in events:
            executor.report(event)
            if isinstance(event, JobArrived):
                submitted.add(event.job.name)
            elif isinstance(event, JobCancelled):
                cancelled.add(event.name)
        instant = engine.step(now, events)
        launches = instant.launches
        wake = engine.wake_at()  # (a starved queue's wait for preemption ends then)
        if wake is not None and wake > now and wake not in woken:
            woken.add(wake)
            heap.push(wake, Wake())
        for la in launches:
            if la.node not in executor.alive:
                run.problems.append(f"t={now}: task {la.task_id} of {la.job} launched on {la.node}, which is not up")
            if la.job not in submitted or la.job in cancelled:
                run.problems.append(f"t={now}: task {la.task_id} of {la.job}, which is not submitted or is cancelled")
            if counts.get(la.job) is not None and executor.started[la.job] > counts[la.job]:
                run.problems.append(f"t={now}: {la.job} runs {executor.started[la.job]} tasks, "
                                    f"past its count {counts[la.job]}")
        run.instants.append(Instant(now, launches, executor.per_node(), dict(executor.alive), dict(executor.started),
                                    instant.preempted))
    return run
