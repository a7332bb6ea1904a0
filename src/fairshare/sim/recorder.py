"""The timeline's rows, read from what the engine says changed at an instant.

A row is written for an entity (a job, a queue, the cluster) only when its state (tasks
running, allocation, dominant share) differs from its last row; a job's demand change
(it starts or stops wanting more) is noted when it flips. The engine rolls up what moved
(``Engine.changes``, ``engine.snapshot``); nothing here reads engine internals.
"""

from __future__ import annotations

from collections.abc import Iterable

from fairshare.engine.snapshot import Changes
from fairshare.model.resources import Vector
from fairshare.sim.result import CLUSTER, DemandChange, Row


class TimelineRecorder:
    def __init__(self) -> None:
        # last recorded state: (kind, entity) -> (running, allocation, dominant share)
        self._last: dict[tuple[str, str], tuple[int, Vector, float]] = {}
        self._demanding: dict[str, bool] = {}

    def record(self, t: float, changes: Changes,
               extra: Iterable[Row] = ()) -> tuple[list[Row], list[DemandChange], list[str]]:
        """The rows of the entities whose state changed at ``t`` (sorted by kind, entity),
        with ``extra`` rows (preemptions) among them; the demand changes; the jobs
        ``changes`` reports finished (a finished job is reported again whenever the
        capacity changes, as long as the engine keeps it)."""
        out: list[Row] = list(extra)
        demand_changes: list[DemandChange] = []
        finished_jobs: list[str] = []
        row_if_changed = self._row_if_changed
        demanding_was = self._demanding
        for name, _queue, running, usage, ds, demanding, finished in changes.jobs:
            row = row_if_changed("job", name, t, running, usage, ds)
            if row is not None:
                out.append(row)
            if demanding_was.get(name, False) != demanding:
                demanding_was[name] = demanding
                demand_changes.append((t, name, demanding))
            if finished:
                finished_jobs.append(name)
        for path, (running, usage, ds) in changes.queues.items():
            row = row_if_changed("queue", path, t, running, usage, ds)
            if row is not None:
                out.append(row)
        if changes.cluster is not None:
            running, usage, ds = changes.cluster
            row = row_if_changed("cluster", CLUSTER, t, running, usage, ds)
            if row is not None:
                out.append(row)
        out.sort(key=lambda r: (r[1], r[2]))
        return out, demand_changes, finished_jobs

    def forget(self, job: str) -> None:
        """A job left the run for good (a streaming run forgets its finished jobs)."""
        self._last.pop(("job", job), None)
        self._demanding.pop(job, None)

    def _row_if_changed(self, kind: str, entity: str, t: float, running: int, alloc: Vector,
                        ds: float) -> Row | None:
        """A row when the entity's state differs from its last row (always its first row)."""
        key = (kind, entity)
        state = (running, alloc, ds)
        if self._last.get(key) == state:
            return None
        self._last[key] = state
        return (t, kind, entity, running, ds, alloc)
