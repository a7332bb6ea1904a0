"""When a waiting job will start: a forward simulation of the current state (issue 21,
item 3).

From a quiet point of a :class:`~fairshare.engine.scheduler.Scheduler` (the simulator's
or serve's), on a deep copy: every running task ends at its start plus its expected
duration given how long it has run already (none known: it ends now), each end is one
decision round (``Scheduler.schedule``, the engine's own), and each launch ends after its
expected duration in turn, until the job asked about starts. The expected durations are
the caller's (``expected``): serve gives the user's ``duration`` when the job has one,
else the median of its queue's recent finished tasks that ran longer than it has so far
(``RecentDurations``: the median, not the mean, because the error to make small is the
absolute one, and run times are skewed, e.g. SWIM's 9 s and 70 s tasks in one queue);
the accuracy benchmark gives the same (``benchmarks/bench_forecast.py``).

What the forecast does not know: jobs that arrive later (they may pass ahead), failures,
preemption and lost nodes. Nothing here runs unless asked.
"""

from __future__ import annotations

import copy
import heapq
import math
import statistics
from collections import deque
from collections.abc import Callable

from fairshare.engine.scheduler import Scheduler
from fairshare.model.jobs import Duration

#: decision rounds simulated at most (a bound on what one forecast costs)
MAX_ROUNDS = 100_000

#: (job name, class index, seconds it has run so far) -> expected seconds one of its
#: tasks runs in all; None: unknown
ExpectedDuration = Callable[[str, int, float], float | None]


def forecast_start(sch: Scheduler, name: str, now: float, expected: ExpectedDuration) -> float | None:
    """The absolute time job ``name`` next starts a task in a forward simulation of ``sch``
    from ``now`` (module docstring); None when it does not start (it fits nowhere, a
    duration is unknown, or ``MAX_ROUNDS`` were not enough). ``sch`` is not changed."""
    rt = sch.jobs.get(name)
    if rt is None or not rt.demanding:
        return None
    trial = copy.deepcopy(sch)
    ends: list[tuple[float, int]] = []

    for task in trial.tasks.values():
        seconds = expected(task.job, task.class_index, now - task.started_at)
        if seconds is None or not math.isfinite(seconds):
            return None
        # (a task that outlived its estimate: it ends any moment)
        ends.append((max(now, task.started_at + seconds), task.task_id))
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
            seconds = expected(launch.job, launch.class_index, 0.0)
            if seconds is None or not math.isfinite(seconds):
                return None
            heapq.heappush(ends, (t + max(0.0, seconds), launch.task_id))
    return None


class RecentDurations:
    """Per queue, the run times of its last ``keep`` finished tasks: what a task whose job
    gives no duration is expected to run."""

    def __init__(self, keep: int = 100):
        self.keep = keep
        self._seconds: dict[str, deque[float]] = {}

    def add(self, queue: str, seconds: float) -> None:
        self._seconds.setdefault(queue, deque(maxlen=self.keep)).append(seconds)

    def expected(self, queue: str, ran: float = 0.0) -> float | None:
        """The median of the queue's kept run times longer than ``ran`` (a task that has
        run ``ran`` seconds is one of those); a queue with none: the same over every
        queue; ``ran`` when no kept run time is longer (it ends any moment); None: no
        task has finished yet."""
        if not self._seconds:
            return None
        longer = [s for s in self._seconds.get(queue, ()) if s > ran]
        if not longer:
            longer = [s for seconds in self._seconds.values() for s in seconds if s > ran]
        return statistics.median(longer) if longer else ran


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
