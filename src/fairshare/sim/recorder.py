"""The timeline's rows, read from what the engine says changed at an instant; with
decayed usage, each queue's sampled from the sorter's ledger (``DecayedUsageRecorder``).

A row is written for an entity (a job, a queue, the cluster) only when its state (tasks
running, allocation, dominant share) differs from its last row; a job's demand change
(it starts or stops wanting more) is noted when it flips. The engine rolls up what moved
(``Engine.changes``, ``engine.snapshot``); nothing here reads engine internals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter

from fairshare.engine.snapshot import Changes
from fairshare.model.resources import Vector, dominant_share
from fairshare.policies.hdrf_online import HISTORY
from fairshare.sim.result import CLUSTER, DecayRow, DemandChange, Row

#: a row's (kind, entity): the order of an instant's rows
_KIND_ENTITY = itemgetter(1, 2)


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
        # (``_row_if_changed`` inlined: this runs for every changed job at every instant)
        last = self._last
        demanding_was = self._demanding
        for name, _queue, running, usage, ds, demanding, finished in changes.jobs:
            key = ("job", name)
            state = (running, usage, ds)
            if last.get(key) != state:
                last[key] = state
                out.append((t, "job", name, running, ds, usage))
            if demanding_was.get(name, False) != demanding:
                demanding_was[name] = demanding
                demand_changes.append((t, name, demanding))
            if finished:
                finished_jobs.append(name)
        for path, state in changes.queues.items():  # (a ``Usage`` is its (running, usage, ds) state)
            key = ("queue", path)
            if last.get(key) != state:
                last[key] = state
                out.append((t, "queue", path, state[0], state[2], state[1]))
        if changes.cluster is not None:
            running, usage, ds = changes.cluster
            row = self._row_if_changed("cluster", CLUSTER, t, running, usage, ds)
            if row is not None:
                out.append(row)
        if len(out) > 1:
            out.sort(key=_KIND_ENTITY)
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


class DecayedUsageRecorder:
    """Per queue, the decayed usage the policy orders by (``fairness: {half_life}``, docs/
    policies.md "Fairness with memory"), sampled at every instant of the run.

    Read from the sorter's own ``DecayLedger`` (``policies/machinery/decay.py``), never
    recomputed: a queue's decayed usage ``U`` is the sum of the ledger's entries below it
    (its jobs', and with a tree policy, H-DRF's or DFF's, its hidden history leaf's: the
    finished jobs' usage it keeps), and its current allocation ``A`` the sum of their
    allocations. A flat policy (drf, asset, ...) orders jobs and forgets a finished job's
    history, so there a queue's ``U`` is its unfinished jobs' (what the policy still
    remembers). Each sample
    is ``(time, queue, decayed_share, effective_share, U)``: the dominant shares of
    ``U / W`` (the decayed average past allocation) and of ``A + U / W`` (the key, before
    H-DRF's rescaling), over the sorter's capacity. Only queues with something to show
    (a ledger entry below them) get a row."""

    def __init__(self, sorter: Callable[[], object], keep_rows: bool = True) -> None:
        # () -> the scheduler's current sorter (it is rebuilt on a queue change, the ledger
        # carried over); its queue tree names the queues, those added by events included
        self._sorter_of = sorter
        self.rows: list[DecayRow] | None = [] if keep_rows else None
        #: the latest sample per queue (the summary's ``decayed_usage`` at the end)
        self.last: dict[str, DecayRow] = {}

    def sample(self, t: float) -> list[DecayRow]:
        sorter = self._sorter_of()
        ledger = getattr(sorter, "decay", None)
        if ledger is None:
            return []
        m = ledger.m
        usage: dict[str, list[float]] = {}
        alloc: dict[str, list[float]] = {}
        jobs = sorter.jobs
        for name, entry in ledger.entries.items():
            if name.startswith(HISTORY):
                queue = name[len(HISTORY):]
            else:
                job = jobs.get(name)
                if job is None or not job.queue:
                    continue  # (a job directly under the root belongs to no queue)
                queue = job.queue
            u = ledger.usage(name, t)
            for path in _ancestors(queue):
                into_u = usage.setdefault(path, [0.0] * m)
                into_a = alloc.setdefault(path, [0.0] * m)
                for r in range(m):
                    into_u[r] += u[r]
                    into_a[r] += entry[1][r]
        w = ledger.weight(t)
        capacity = sorter.capacity
        out: list[DecayRow] = []
        for path in sorter.queues.paths:
            u = usage.get(path)
            if u is None:
                continue
            average = [x / w if w > 0 else 0.0 for x in u]
            row = (t, path, dominant_share(average, capacity),
                   dominant_share([a + x for a, x in zip(alloc[path], average)], capacity), tuple(u))
            out.append(row)
            self.last[path] = row
        if self.rows is not None:
            self.rows.extend(out)
        return out


def _ancestors(path: str) -> list[str]:
    """``a.b.c`` -> ``a.b.c``, ``a.b``, ``a`` (a job's usage counts for every queue above it)."""
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
