"""The executor seam: where the scheduling loop meets the machines that run the tasks.

Two runtimes sit behind it: the simulator's ``SimulatedExecutor`` (``sim/simulator.py``;
a task "runs" by pushing its completion onto the event heap) and the live service's
``RayExecutor`` (``live/ray_executor.py``; a task runs as a Ray task pinned to its node).
Neither holds policy logic. The loop above them is the same two steps:

1. ``apply(scheduler, event, now)`` for every event that happened (a task finished or
   failed, a node was lost or added): the ``Scheduler`` releases and re-queues;
2. ``dispatch(scheduler, executor, now)``: ``scheduler.schedule(now)`` decides, and every
   launch is handed to ``executor.start`` in decision order.

The simulator pops its events from its heap; the live service gets them from
``executor.poll()``. Decisions therefore differ between the runtimes only through the
order and grouping of the events they feed in (``tests/test_live_parity.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, Union

from fairshare.engine.scheduler import Launch, Scheduler
from fairshare.model.cluster import Node
from fairshare.model.jobs import Job


@dataclass(frozen=True)
class TaskFinished:
    """The task ran to its end with success (``ok``) or failed (the command's exit status
    was not 0, or the executor lost it). A failed task goes back to pending."""

    task_id: int
    ok: bool = True
    reason: str = ""


@dataclass(frozen=True)
class NodeLost:
    """A node died: its running tasks go back to pending and its capacity leaves the pool."""

    name: str


@dataclass(frozen=True)
class NodeAdded:
    node: Node


ExecutorEvent = Union[TaskFinished, NodeLost, NodeAdded]


class Executor(Protocol):
    """What the scheduling loop needs from a runtime."""

    def nodes(self) -> tuple[Node, ...]:
        """The nodes and their capacities (aligned with the scheduler's resources)."""
        ...

    def start(self, launch: Launch, now: float) -> None:
        """Start ``launch``'s task on ``launch.node`` with ``launch.demand`` reserved."""
        ...

    def poll(self) -> list[ExecutorEvent]:
        """Events since the last call, in the order they are to be applied."""
        ...


def apply(scheduler: Scheduler, event: ExecutorEvent, now: float) -> list[int]:
    """Tell ``scheduler`` about one event; returns the task ids it re-queued (node lost)
    or ``[]``. A completion for a task the scheduler no longer runs (lost with its node,
    or already reported) is ignored: events from a runtime can arrive late or twice."""
    if isinstance(event, TaskFinished):
        if event.task_id not in scheduler.tasks:
            return []
        if event.ok:
            scheduler.finish(event.task_id, now)
        else:
            scheduler.fail(event.task_id, now)
        return []
    if isinstance(event, NodeLost):
        index = scheduler.pool.index_of.get(event.name)
        if index is None or not scheduler.pool.alive(index):
            return []
        return scheduler.lose_node(event.name, now)
    if isinstance(event, NodeAdded):
        scheduler.add_node(event.node, now)
        return []
    raise TypeError(f"not an executor event: {event!r}")


def dispatch(scheduler: Scheduler, executor: Executor, now: float) -> list[Launch]:
    """One scheduling round: decide, then start every launch in decision order."""
    launches = scheduler.schedule(now)
    for launch in launches:
        executor.start(launch, now)
    return launches


def run_rounds(scheduler: Scheduler, executor: Executor,
               rounds: Iterable[tuple[float, list[ExecutorEvent], list[Job]]]) -> list[Launch]:
    """Replay: for each ``(now, events, arrivals)``, apply the events, submit the arrivals
    (the simulator's order within an instant: completions and node changes, then
    arrivals) and dispatch. Returns every launch in order. The parity test feeds it the
    rounds a live run recorded."""
    out: list[Launch] = []
    for now, events, arrivals in rounds:
        for event in events:
            apply(scheduler, event, now)
        for job in arrivals:
            scheduler.submit(job, now)
        out.extend(dispatch(scheduler, executor, now))
    return out
