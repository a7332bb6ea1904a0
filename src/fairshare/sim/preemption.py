"""The simulator's books of fair-share preemption: what each preemption cost its job.

The engine decides the preemptions (``engine/preemption.py``) and reports each instant's
victims (``Instant.preempted``); the books charge each victim the work it loses (the time
since it started, less what its last checkpoint kept: ``checkpoint`` on its task class),
credit the kept work to the next task of that job and class to start (the
``SimulatedExecutor`` runs it that much shorter) and make one ``preempt`` timeline row
per victim job and instant (tasks stopped, what they held).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from fairshare.engine.step import Instant
from fairshare.model.jobs import Job
from fairshare.sim.result import PREEMPT, Row


class PreemptionBooks:
    """Per job: tasks preempted, work lost (task-seconds) and the checkpointed work credited
    to its next starts; the run's total. ``on``: fair-share preemption is on (else nothing
    is ever preempted and ``settle`` reports no figures)."""

    def __init__(self, m: int, *, on: bool):
        self.m = m
        self.on = on
        #: work kept by checkpoints of preempted tasks, per (job, class index), for the next
        #: start (the executor takes it)
        self.credits: dict[tuple[str, int], list[float]] = {}
        self.tasks_preempted: dict[str, int] = {}
        self.work_lost: dict[str, float] = {}
        self.total = 0  # tasks preempted in all

    def account(self, t: float, instant: Instant, jobs: Mapping[str, Job]) -> list[Row]:
        """Account the instant's preemptions (``jobs``: the scenario's jobs by name, no
        engine internals read); one ``preempt`` row per victim job."""
        stopped: dict[str, list] = {}
        for p in instant.preempted:
            for task in p.victims:
                job = jobs[task.job]
                elapsed = max(0.0, t - task.started_at)
                every = job.classes[task.class_index].checkpoint
                kept = math.floor(elapsed / every) * every if every else 0.0
                if kept > 0:
                    self.credits.setdefault((task.job, task.class_index), []).append(kept)
                self.work_lost[task.job] = self.work_lost.get(task.job, 0.0) + (elapsed - kept)
                self.tasks_preempted[task.job] = self.tasks_preempted.get(task.job, 0) + 1
                self.total += 1
                stopped.setdefault(task.job, []).append(task.demand)
        out: list[Row] = []
        for name, demands in stopped.items():
            freed = tuple(sum(d[r] for d in demands) for r in range(self.m))
            out.append((t, PREEMPT, name, len(demands), 0.0, freed))
        return out

    def settle(self, job: Job) -> tuple[int | None, float | None]:
        """The job leaves the run (finished, or the run ended): its figures (None, None
        when preemption is off), which the books then forget with its credits left
        unused."""
        name = job.name
        for j in range(len(job.classes)):
            self.credits.pop((name, j), None)
        if not self.on:
            return None, None
        return self.tasks_preempted.pop(name, 0), self.work_lost.pop(name, 0.0)
