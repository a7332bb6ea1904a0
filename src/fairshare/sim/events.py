"""The event heap: events keyed ``(time, priority, sequence)`` (SimPy ``core.py``).

Simultaneous events are processed in a fixed order: by ``priority`` (the constants
below; lower first), then by ``sequence``, the order they were pushed. The heap never
compares payloads, so any object can ride along. Nothing here reads a clock.
``engine_event`` turns a scenario's cluster event into its engine event and priority.
"""

from __future__ import annotations

import heapq
from typing import Any

from fairshare.engine.events import (INSTANT_ORDER, Event, JobArrived, JobCancelled, NodeAdded, NodeLost,
                                     QueueChanged, TaskFinished, Wake, instant_rank)
from fairshare.model.scenario import ClusterEvent

# Priorities at one instant: the engine's one order of simultaneous events
# (``engine.events.INSTANT_ORDER``). The scheduler runs once after all of them (it is not
# an event: the simulator calls it when the instant is done).
TASK_END = INSTANT_ORDER[TaskFinished]
NODE_FAIL = INSTANT_ORDER[NodeLost]
NODE_ADD = INSTANT_ORDER[NodeAdded]
QUEUE_CHANGE = INSTANT_ORDER[QueueChanged]
JOB_ARRIVAL = INSTANT_ORDER[JobArrived]
JOB_CANCEL = INSTANT_ORDER[JobCancelled]
WAKE = INSTANT_ORDER[Wake]  # a starved queue's wait for preemption ends (after everything else at that time)

PRIORITY_NAMES = {TASK_END: "task_end", NODE_FAIL: "node_fail", NODE_ADD: "node_add", QUEUE_CHANGE: "queue_change",
                  JOB_ARRIVAL: "job_arrival", JOB_CANCEL: "job_cancel", WAKE: "wake"}


def engine_event(event: ClusterEvent) -> tuple[int, Event]:
    """The engine event of a scenario's ``events:`` entry, with its priority at its instant
    (``instant_rank``): the one place a kind of cluster event becomes an engine event."""
    if event.kind == "node_fail":
        engine: Event = NodeLost(event.node_name)
    elif event.kind == "node_add":
        engine = NodeAdded(event.node)
    elif event.kind == "queue":
        engine = QueueChanged(event.queue_change)
    else:
        raise ValueError(f"unknown cluster event kind {event.kind!r} at {event.time_s} s")
    return instant_rank(engine), engine


class EventQueue:
    """A min-heap of ``(time, priority, sequence, payload)``."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Any]] = []
        self._sequence = 0  # insertion counter: the last tie-break, so ties are stable

    def push(self, time: float, priority: int, payload: Any) -> None:
        if time != time:  # NaN would break the heap order silently
            raise ValueError(f"event time must be a number, got {time}")
        heapq.heappush(self._heap, (time, priority, self._sequence, payload))
        self._sequence += 1

    def pop(self) -> tuple[float, int, Any]:
        time, priority, _seq, payload = heapq.heappop(self._heap)
        return time, priority, payload

    def pop_at(self, time: float, into: list, below: int | None = None) -> None:
        """Append to ``into`` the payload of every event at ``time`` (all at the top: the
        heap holds nothing earlier), in ``(priority, sequence)`` order, stopping before
        the first whose priority is ``below`` or above (None: no bound). ``pop`` and
        ``peek`` in a loop, without their tuples: the simulator takes every instant so."""
        heap = self._heap
        heappop = heapq.heappop
        while heap:
            top = heap[0]
            if top[0] != time or (below is not None and top[1] >= below):
                return
            into.append(heappop(heap)[3])

    def peek_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def peek(self) -> tuple[float, int] | None:
        """``(time, priority)`` of the next event, None when empty."""
        if not self._heap:
            return None
        top = self._heap[0]
        return top[0], top[1]

    def entries(self) -> list[tuple[float, Any]]:
        """``(time, payload)`` of every event queued, in no particular order (a read)."""
        return [(time, payload) for time, _p, _s, payload in self._heap]

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
