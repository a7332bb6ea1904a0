"""When a waiting job will start: a forward simulation of the current state (issue 21,
item 3).

From a quiet point of a :class:`~fairshare.engine.scheduler.Scheduler` (the simulator's
or serve's), on a deep copy: every running task ends at its start plus its expected
duration (an overdue task, now: it is expected to end any moment), each end is one
decision round (``Scheduler.schedule``, the engine's own), and each launch ends after its
expected duration in turn, until the job asked about starts. The expected durations are
the caller's (``expected``): serve gives the user's ``duration`` when the job has one,
else its queue's mean over its recent finished tasks (``live.service``); the accuracy
benchmark gives the same running means (``benchmarks/bench_forecast.py``).

What the forecast does not know: jobs that arrive later (they may pass ahead), failures,
preemption and lost nodes. Nothing here runs unless asked.
"""

from __future__ import annotations

import copy
import heapq
import math
from collections.abc import Callable

from fairshare.engine.scheduler import Scheduler
from fairshare.model.jobs import Duration

#: decision rounds simulated at most (a bound on what one forecast costs)
MAX_ROUNDS = 100_000

#: (job name, class index) -> expected seconds one of its tasks runs; None: unknown
ExpectedDuration = Callable[[str, int], float | None]


def forecast_start(sch: Scheduler, name: str, now: float, expected: ExpectedDuration) -> float | None:
    """The absolute time job ``name`` next starts a task in a forward simulation of ``sch``
    from ``now`` (module docstring); None when it does not start (it fits nowhere, a
    duration is unknown, or ``MAX_ROUNDS`` were not enough). ``sch`` is not changed."""
    rt = sch.jobs.get(name)
    if rt is None or not rt.demanding:
        return None
    trial = copy.deepcopy(sch)
    ends: list[tuple[float, int]] = []

    def end_of(job: str, class_index: int, started: float) -> float | None:
        seconds = expected(job, class_index)
        if seconds is None or not math.isfinite(seconds):
            return None
        return max(now, started + max(0.0, seconds))

    for task in trial.tasks.values():
        end = end_of(task.job, task.class_index, task.started_at)
        if end is None:
            return None
        ends.append((end, task.task_id))
    heapq.heapify(ends)
    for _round in range(MAX_ROUNDS):
        if not ends:
            return None
        t = ends[0][0]
        while ends and ends[0][0] == t:
            trial.finish(heapq.heappop(ends)[1], t)
        for launch in trial.schedule(t):
            if launch.job == name:
                return t
            end = end_of(launch.job, launch.class_index, t)
            if end is None:
                return None
            heapq.heappush(ends, (end, launch.task_id))
    return None


class RecentDurations:
    """Per queue, the mean run time of its last ``keep`` finished tasks: the expected
    duration of a task whose job gives none."""

    def __init__(self, keep: int = 100):
        self.keep = keep
        self._seconds: dict[str, list[float]] = {}
        self._sums: dict[str, float] = {}

    def add(self, queue: str, seconds: float) -> None:
        kept = self._seconds.setdefault(queue, [])
        kept.append(seconds)
        self._sums[queue] = self._sums.get(queue, 0.0) + seconds
        if len(kept) > self.keep:
            self._sums[queue] -= kept.pop(0)

    def mean(self, queue: str) -> float | None:
        """The queue's mean; a queue with none yet: the mean over every queue; None: no
        task has finished at all."""
        kept = self._seconds.get(queue)
        if kept:
            return self._sums[queue] / len(kept)
        count = sum(len(k) for k in self._seconds.values())
        return sum(self._sums.values()) / count if count else None


def expected_seconds(duration: Duration) -> float:
    """The mean of a task class's duration distribution (``model.jobs.Duration``; a
    lognormal's is exp(mu + sigma^2 / 2))."""
    kind, param = duration.kind, duration.param
    if kind == "fixed":
        return float(param("value"))
    if kind == "list":
        values = [float(v) for v in param("values")]
        return sum(values) / len(values)
    if kind == "exponential":
        return float(param("mean"))
    if kind == "uniform":
        return (float(param("low")) + float(param("high"))) / 2
    if kind == "lognormal":
        return math.exp(float(param("mu")) + float(param("sigma")) ** 2 / 2)
    raise ValueError(f"unknown duration kind {kind!r}")
