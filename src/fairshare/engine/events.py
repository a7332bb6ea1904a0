"""The engine's events: everything that can happen to a cluster between two decisions.

A runtime (the simulator's heap, the live service's executor and inbox, a replay) turns
what it observes into these values and hands them to ``Engine.step`` (``engine.step``),
the one place they are applied. They are plain values: a recorded list of them replays
the same decisions (``engine.step.run_rounds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from fairshare.model.cluster import Node
from fairshare.model.jobs import Job
from fairshare.model.queues import QueueChange


@dataclass(frozen=True, slots=True)
class JobArrived:
    """A job was submitted; its tasks become pending. ``task_ids``: per class, the ids its
    tasks will run under, in start order (the live service's store rows), or None for the
    scheduler's own numbering. ``running``: ``(task id, class index, node, attempt)`` of
    tasks that already run (a restarted service adopts them: not decisions); the class
    counts include them."""

    job: Job
    task_ids: tuple[tuple[int, ...], ...] | None = None
    running: tuple[tuple[int, int, str, int], ...] = ()
    #: ``(task id, starts so far)`` of pending tasks that ran before (a restart)
    attempts: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class JobCancelled:
    """A job was cancelled: no new tasks start; its running tasks are killed through
    ``Executor.kill`` and come back as failed ``TaskFinished`` events."""

    name: str


@dataclass(frozen=True, slots=True)
class TaskFinished:
    """The task ran to its end with success (``ok``) or failed (the command's exit status
    was not 0, or the executor lost it). A failed task goes back to pending.
    ``attempt``: which start of the task ended, when the executor knows (the live
    service fences off the late end of an older attempt with it); None otherwise."""

    task_id: int
    ok: bool = True
    reason: str = ""
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class NodeLost:
    """A node died: its running tasks go back to pending and its capacity leaves the pool."""

    name: str


@dataclass(frozen=True, slots=True)
class NodeAdded:
    node: Node


@dataclass(frozen=True, slots=True)
class QueueChanged:
    """The queue tree changed (``model.queues.QueueChange``: a weight, order, guarantee or
    limit, a queue added or removed). The scheduler applies it in place: the jobs, their
    running tasks and the nodes stay; the policy's order follows the new tree."""

    change: QueueChange


@dataclass(frozen=True, slots=True)
class Wake:
    """Time passed with nothing else happening: a starved queue's wait for preemption
    ended (``Engine.wake_at``). The step decides (and preempts) as after any event."""


#: what an executor reports (``Executor.poll``)
ExecutorEvent = Union[TaskFinished, NodeLost, NodeAdded]
#: everything ``Engine.step`` applies
Event = Union[JobArrived, JobCancelled, TaskFinished, NodeLost, NodeAdded, QueueChanged, Wake]

#: The one order of simultaneous events, lower first: what happened to running work
#: (completions and failures), then to the cluster (nodes lost, nodes added), then to the
#: queue tree, then new work (arrivals) and withdrawn work (cancellations), and last a
#: ``Wake``. So a job arriving at t sees the resources freed at t and the queue tree as
#: changed at t, and a cancellation can name a job that arrived in the same instant.
#: The simulator's heap (``sim.events``), the live service's pass and the conformance
#: driver all order an instant's events by it; ties keep the order they were reported in.
INSTANT_ORDER: dict[type, int] = {TaskFinished: 0, NodeLost: 1, NodeAdded: 2, QueueChanged: 3, JobArrived: 4,
                                  JobCancelled: 5, Wake: 6}


def instant_rank(event: Event) -> int:
    """``event``'s place among the events of one instant (``INSTANT_ORDER``)."""
    return INSTANT_ORDER[type(event)]
