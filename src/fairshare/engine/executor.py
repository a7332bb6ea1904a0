"""The executor seam: where the engine meets the machines that run the tasks.

Two runtimes sit behind it: the simulator's ``SimulatedExecutor`` (``sim/executor.py``;
a task "runs" by pushing its completion onto the event heap) and the live service's
``RayExecutor`` (``live/ray_executor.py``; a task runs as a Ray task pinned to its
node). Neither holds policy logic; ``engine.step.Engine`` drives both the same way.

An executor gets whatever it needs (an event heap, a duration sampler, the commands to
run) through its constructor; the engine calls the four methods ``nodes``, ``start``,
``kill``, ``poll``. A runtime that outlives its tasks' starter (the live service, whose
commands keep running under node agents across a restart) also calls ``recover``,
``acknowledge`` and ``health``, and keeps each attempt's output (``task_outputs``,
``read_task_output``); an executor whose tasks end with the process takes their trivial
forms from ``ExecutorDefaults``.
"""

from __future__ import annotations

from typing import Protocol

from fairshare.engine.events import ExecutorEvent, NodeAdded, NodeLost, TaskFinished
from fairshare.engine.scheduler import Launch
from fairshare.model.cluster import Node

__all__ = ["Executor", "ExecutorDefaults", "ExecutorEvent", "NodeAdded", "NodeLost", "TaskFinished"]


class Executor(Protocol):
    """What the engine needs from a runtime."""

    def nodes(self) -> tuple[Node, ...]:
        """The nodes and their capacities when the runtime starts (aligned with the
        scheduler's resources); later changes are reported as events."""
        ...

    def start(self, launch: Launch, now: float) -> None:
        """Start ``launch``'s task on ``launch.node`` (the scheduler has taken
        ``launch.demand`` from the node: an executor need not reserve it again). Its end
        is reported by ``poll`` as a ``TaskFinished`` naming ``launch.attempt``."""
        ...

    def kill(self, task_id: int) -> None:
        """Stop a running task (its job was cancelled). Its end is still reported, as a
        failed ``TaskFinished``; a task already ended is ignored."""
        ...

    def poll(self) -> list[ExecutorEvent]:
        """Events since the last call, in the order they are to be applied."""
        ...

    def recover(self, service_id: str, incarnation: int, running: dict[int, tuple[int, str]]) -> set[int]:
        """At a restart, before anything starts: ``running`` is task id -> (attempt, node)
        of the tasks the store says run. Returns those still running here (adopted; their
        ends come through ``poll``); anything else this executor runs is stopped.
        ``incarnation`` fences off the previous process's calls."""
        ...

    def acknowledge(self, ends: list[tuple[int, int]]) -> None:
        """``(task id, attempt)`` of ends the runtime has recorded: the executor may forget
        them (until then it reports them again after a restart)."""
        ...

    def health(self) -> dict | None:
        """The machinery's own state for ``/healthz`` and ``/metrics`` (None: none)."""
        ...

    def task_outputs(self, task_ids: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
        """``(task id, attempt) -> (bytes kept, bytes dropped by rotation)`` of the attempts
        of ``task_ids`` whose output is kept."""
        ...

    def read_task_output(self, task_id: int, attempt: int, offset: int, limit: int):
        """At most ``limit`` bytes of that attempt's output from byte ``offset`` (a
        ``live.task_output.OutputChunk``: moved up to the first byte kept), or None when
        none is kept."""
        ...


class ExecutorDefaults:
    """``recover``, ``acknowledge`` and ``health`` of an executor whose tasks end with the
    process that started them (the simulator's, a test's): nothing survives to adopt,
    nothing to acknowledge, no state of its own."""

    def recover(self, service_id: str, incarnation: int, running: dict[int, tuple[int, str]]) -> set[int]:
        return set()

    def acknowledge(self, ends: list[tuple[int, int]]) -> None:
        pass

    def health(self) -> dict | None:
        return None

    def task_outputs(self, task_ids: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
        return {}

    def read_task_output(self, task_id: int, attempt: int, offset: int, limit: int):
        return None
