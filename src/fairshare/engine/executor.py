"""The executor seam: where the engine meets the machines that run the tasks.

Two runtimes sit behind it: the simulator's ``SimulatedExecutor`` (``sim/executor.py``;
a task "runs" by pushing its completion onto the event heap) and the live service's
``RayExecutor`` (``live/ray_executor.py``; a task runs as a Ray task pinned to its
node). Neither holds policy logic; ``engine.step.Engine`` drives both the same way.

An executor gets whatever it needs (an event heap, a duration sampler, the commands to
run) through its constructor; the engine calls only the four methods below.
"""

from __future__ import annotations

from typing import Protocol

from fairshare.engine.events import ExecutorEvent, NodeAdded, NodeLost, TaskFinished
from fairshare.engine.scheduler import Launch
from fairshare.model.cluster import Node

__all__ = ["Executor", "ExecutorEvent", "NodeAdded", "NodeLost", "TaskFinished"]


class Executor(Protocol):
    """What the engine needs from a runtime."""

    def nodes(self) -> tuple[Node, ...]:
        """The nodes and their capacities when the runtime starts (aligned with the
        scheduler's resources); later changes are reported as events."""
        ...

    def start(self, launch: Launch, now: float) -> None:
        """Start ``launch``'s task on ``launch.node`` with ``launch.demand`` reserved."""
        ...

    def kill(self, task_id: int) -> None:
        """Stop a running task (its job was cancelled). Its end is still reported, as a
        failed ``TaskFinished``; a task already ended is ignored."""
        ...

    def poll(self) -> list[ExecutorEvent]:
        """Events since the last call, in the order they are to be applied."""
        ...
