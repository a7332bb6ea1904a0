"""Where a run's output goes: the ``RunSink`` interface and the in-memory ``ResultCollector``.

The simulator hands every run's output to one sink, the same calls whatever the sink
does with them: each instant's timeline rows and demand changes (``record``), the end
time (``end``), each job's outcome once (``job``: when it finishes, else at the end), and
at last the run's ``SimResult`` to complete (``complete``). Two sinks implement it:

- ``ResultCollector`` (here): keeps everything and puts it into the ``SimResult``
  (``rows``, ``demand_changes``, ``jobs``, the preemption figures per job), from which
  ``sim.metrics`` and ``sim.output`` derive the files afterwards. ``Simulator`` uses it
  unless given another sink.
- ``sim.stream.StreamingOutput``: writes ``timeline.csv`` as the rows come and keeps
  running accumulators for ``summary.json``, so a run's memory is bounded by the jobs in
  the system; its ``SimResult`` says ``streamed`` and holds no rows.
"""

from __future__ import annotations

from typing import Protocol

from fairshare.model.jobs import Job
from fairshare.model.resources import Vector
from fairshare.sim.result import DemandChange, JobOutcome, Row, SimResult


class RunSink(Protocol):
    """What a run produces, handed over as the run goes."""

    def record(self, t: float, rows: list[Row], demand_changes: list[DemandChange],
               capacity: Vector | None) -> None:
        """One instant's timeline rows (in (kind, entity) order), demand changes, and the
        capacity when it changed."""

    def end(self, end_time: float) -> None:
        """The run's end time, known before the outcomes of the jobs left unfinished."""

    def job(self, index: int, job: Job, outcome: JobOutcome, tasks_preempted: int | None,
            work_lost: float | None) -> None:
        """A job's outcome (``index``: its place in the run's jobs, ``Arrivals.index``),
        once: when it finishes, else at the end (unfinished, or never submitted: ``end``
        came first). The preemption figures are None when preemption was off."""

    def complete(self, result: SimResult) -> None:
        """Put what the sink holds into the run's ``result`` (the run's own figures are
        in it already)."""


class ResultCollector:
    """The ``RunSink`` of an up-front run: every row, demand change and job outcome kept
    in memory for the ``SimResult`` (its ``jobs`` in index order: the scenario's order;
    given a stream, the arrival order, a reused name keeping its last job's outcome)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []  # in (time, kind, entity) order: instants come in time order
        self.demand_changes: list[DemandChange] = []
        self.outcomes: dict[int, JobOutcome] = {}  # by index (scenario order for a scenario's jobs)
        self.tasks_preempted: dict[str, int] = {}
        self.work_lost: dict[str, float] = {}

    def record(self, t: float, rows: list[Row], demand_changes: list[DemandChange],
               capacity: Vector | None) -> None:
        self.rows.extend(rows)
        self.demand_changes.extend(demand_changes)

    def end(self, end_time: float) -> None:
        pass  # (an outcome holds its own times: nothing here needs the end)

    def job(self, index: int, job: Job, outcome: JobOutcome, tasks_preempted: int | None,
            work_lost: float | None) -> None:
        self.outcomes[index] = outcome
        if tasks_preempted:  # (the jobs preemption touched: work_lost is theirs too)
            self.tasks_preempted[job.name] = tasks_preempted
            self.work_lost[job.name] = work_lost

    def complete(self, result: SimResult) -> None:
        result.rows = self.rows
        result.demand_changes = self.demand_changes
        result.jobs = {o.name: o for _, o in sorted(self.outcomes.items())}
        result.tasks_preempted = dict(self.tasks_preempted)
        result.work_lost = dict(self.work_lost)
