"""Where a run's jobs come from, and how long the run keeps them.

- ``ScenarioArrivals`` (an up-front run): the scenario's own jobs, all known before the
  run. Their duration streams are seeded before anything runs, in scenario order
  (``sim.durations``); a job's ``index`` is its place in the scenario; a finished job
  stays in the engine (a caller may read it after the run).
- ``StreamedArrivals`` (``Simulator(arrivals=...)``): jobs from an iterable in submit
  order, each checked as it comes (what the loader checks for a scenario's own jobs), its
  duration streams seeded at its arrival (the same seeds as an up-front run whenever the
  scenario lists its jobs in submit order), its ``index`` its arrival order; a finished
  job is forgotten by every part of the run, so memory is bounded by the jobs in the
  system, not the workload's size.

Either way the simulator takes one pending arrival at a time (``next``), in submit order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT
from fairshare.model.scenario import Scenario
from fairshare.sim.durations import DurationSampler
from fairshare.sim.result import SimulationError


def check_bounded(jobs: Iterable[Job], until: float | None) -> None:
    """Raise ``SimulationError`` naming the jobs with unbounded task counts when there is
    no stop time (they would never finish)."""
    unbounded = [j.name for j in jobs if j.total_count is None]
    if unbounded and until is None:
        shown = ", ".join(unbounded[:5]) + (f" and {len(unbounded) - 5} more" if len(unbounded) > 5 else "")
        raise SimulationError(f"job(s) {shown} have unbounded task counts and would never finish: "
                              f"give a stop time (--until SECONDS)")


class ScenarioArrivals:
    """An up-front run's jobs: ``scenario.jobs``, in submit order, ties in scenario order
    (the order a heap with every arrival pushed up front popped them in)."""

    #: a finished job stays in the engine, the sampler and the timeline's books
    forgets_finished = False

    def __init__(self, scenario: Scenario):
        #: every job by name (the executor and the preemption books look jobs up here)
        self.jobs = {j.name: j for j in scenario.jobs}
        self._index = {j.name: i for i, j in enumerate(scenario.jobs)}
        self._order = iter(sorted(scenario.jobs, key=lambda j: j.submit_s))

    def next(self) -> Job | None:
        """The next arrival, None when there is none."""
        return next(self._order, None)

    def admit(self, job: Job) -> int:
        """``job`` enters the system (its streams were seeded up front); its index."""
        return self._index[job.name]

    def unreached(self, job: Job) -> int:
        """The index of a job the run stopped before."""
        return self._index[job.name]

    def forget(self, job: Job) -> None:
        raise AssertionError("an up-front run keeps its finished jobs")


class StreamedArrivals:
    """A streaming run's jobs, from ``arrivals`` in submit order; ``scenario.jobs`` is empty."""

    forgets_finished = True

    def __init__(self, arrivals: Iterable[Job], scenario: Scenario, until: float | None,
                 durations: DurationSampler):
        self.scenario = scenario
        self.until = until
        self.durations = durations
        #: the jobs in the system by name (admitted, not finished)
        self.jobs: dict[str, Job] = {}
        self._arrivals = iter(arrivals)
        self._count = 0  # jobs numbered so far: the next index
        self._last_submit = -math.inf

    def next(self) -> Job | None:
        """The next arrival, None when there is none; checked against the scenario and the
        submit order."""
        job = next(self._arrivals, None)
        if job is None:
            return None
        if not job.submit_s >= self._last_submit:
            raise SimulationError(f"arrivals must come in submit order: job {job.name!r} submits at "
                                  f"{job.submit_s} s, after a job submitted at {self._last_submit} s")
        if job.total_count is None and self.until is None:
            raise SimulationError(f"job {job.name!r} has an unbounded task count and would never finish: "
                                  f"give a stop time (until)")
        if job.name in self.jobs:
            raise SimulationError(f"job {job.name!r} arrives while a job of that name is in the system")
        # (what the loader checks for a scenario's own jobs and the engine relies on)
        if job.queue != ROOT and job.queue not in self.scenario.queues:
            raise SimulationError(f"job {job.name!r}: unknown queue {job.queue!r}")
        m = self.scenario.m
        for cls in job.classes:
            if len(cls.demand) != m:
                raise SimulationError(f"job {job.name!r}: task class {cls.name!r} has {len(cls.demand)} "
                                      f"demand amounts, the scenario has {m} resources")
        self._last_submit = job.submit_s
        return job

    def admit(self, job: Job) -> int:
        """``job`` enters the system: its duration seeds are drawn now; its index."""
        self.jobs[job.name] = job
        index = self._number()
        self.durations.add(job)
        return index

    def unreached(self, job: Job) -> int:
        return self._number()

    def forget(self, job: Job) -> None:
        del self.jobs[job.name]

    def _number(self) -> int:
        self._count += 1
        return self._count - 1
