"""Decayed usage in serve (``fairness: {half_life}``; docs/live.md, "Fairness with memory"):
kept in the store across restarts, changed by ``PUT /v1/queues``, shown per queue.

The scheduler's sorter holds the history in its ``DecayLedger`` (``sorter.decay``,
``policies/machinery/decay.py``): per job and, with the tree policies, per queue a hidden
history leaf (``hdrf_online.HISTORY``) that keeps its finished jobs' usage. Everything
here reads and writes that ledger; nothing keeps a second account.

**Time base.** serve's engine clock (``LiveService.now``) is seconds since this process
started: it starts at 0 again at each restart. The ledger's times (each entry's
settled time, its origin) are saved on the wall clock (engine time plus the wall time at
this process's engine time 0) and read back on the new process's engine clock, where a
time before the restart is negative. The ledger only takes differences of times, so
``U`` keeps decaying and ``W`` keeps growing from the same origin.

**Downtime.** At a restart each entry is settled at the last save's time with the
allocation it held then, and holds nothing from then on: between the last save and the
restart, usage decays and is not charged (what ran meanwhile is not known to the new
process; an adopted task is charged again from the first pass that sees it). So every
queue's decayed usage continues from the last save, decayed by the time since: no reset
and no jump. A clean stop saves at the stop; a crash loses at most ``SAVE_EVERY_S`` of
charging.

**Changing the half-life** (``PUT /v1/queues`` with ``fairness.half_life``): at the
switch instant t every entry is settled and scaled by ``W_new(t) / W_old(t)``, so
``U / W`` -- the decayed average allocation, what the sorters order by and what is shown
-- is the same just before and just after the switch, and from then on decays with the
new half-life. Keeping ``U`` as it is instead would jump the order at the switch (usage
gathered under a short half-life is small against a long half-life's ``W``); carrying the
average over makes the change act gradually, at the pace the new half-life sets. A new
half-life of 0 drops the history (no memory), and a half-life set from 0 starts one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fairshare.engine.scheduler import Scheduler
from fairshare.live.store import Store
from fairshare.model.queues import ROOT
from fairshare.policies.dff_online import DFFSorter
from fairshare.policies.hdrf_online import HISTORY, HDRFSorter
from fairshare.policies.machinery.decay import DecayLedger
from fairshare.policies.online import OnlineSorter

#: at most one save of the ledger per this many seconds of the engine clock (and one at stop)
SAVE_EVERY_S = 1.0


def half_life_json(half_life: float) -> float | str:
    """A half-life as JSON has it: seconds, or ``"inf"`` (JSON has no infinity; the loader
    reads the string back, ``model.loader.parse_fairness``)."""
    return "inf" if math.isinf(half_life) else half_life


def _half_life(raw: Any) -> float:
    return math.inf if raw == "inf" else float(raw)


def continued(ledger: DecayLedger, half_life: float, t: float) -> DecayLedger:
    """The ledger with a new half-life from ``t`` on: every entry settled at ``t`` and
    scaled by ``W_new(t) / W_old(t)``, so each entry's ``U / W`` is unchanged at ``t``
    (module docstring); same origin, same allocations."""
    new = DecayLedger(half_life, ledger.m)
    new.origin = ledger.origin
    old_weight = ledger.weight(t)
    scale = new.weight(t) / old_weight if old_weight > 0 else 1.0
    for name, entry in ledger.entries.items():
        new.entries[name] = [[u * scale for u in ledger.usage(name, t)], list(entry[1]), t]
    new.half_lives = dict(ledger.half_lives)
    new.resync()  # (the entries were written directly: their rows follow)
    return new


def seeded(scheduler: Scheduler, half_life: float, t: float) -> DecayLedger:
    """A new ledger for a sorter that had none (half-life set from 0 at ``t``): every job
    charged with what it holds now, so its running tasks accrue from ``t`` on."""
    ledger = DecayLedger(half_life, scheduler.m)
    for name, job in scheduler.sorter.jobs.items():
        ledger.charge(name, t, job.usage)
    return ledger


def _job_queue(scheduler: Scheduler, name: str, arriving: Mapping[str, str]) -> str | None:
    """The queue a ledger entry counts for: a history leaf's queue, or its job's."""
    if name.startswith(HISTORY):
        return name[len(HISTORY):]
    job = scheduler.sorter.jobs.get(name)
    if job is not None:
        return job.queue
    rt = scheduler.jobs.get(name)
    return arriving.get(name) if rt is None else rt.job.queue


def queue_usage(scheduler: Scheduler, now: float,
                arriving: Mapping[str, str] | None = None) -> dict[str, tuple[float, ...]] | None:
    """Per queue path (every queue but the root; an inner queue sums its subtree): the
    decayed average allocation ``U / W`` at ``now`` of its jobs and its history leaf, in
    the resources' units (what ``A`` is in). None without decay (half-life 0).
    ``arriving``: job name -> queue of jobs not in the scheduler yet whose entries count
    (at a restart, the resumed jobs until the first pass re-adds them)."""
    ledger: DecayLedger | None = getattr(scheduler.sorter, "decay", None)
    if ledger is None:
        return None
    m = scheduler.m
    totals = {node.path: [0.0] * m for node in scheduler.queues if node.path != ROOT}
    weight = ledger.weight(now)
    for name in ledger.entries:
        queue = _job_queue(scheduler, name, arriving or {})
        if queue is None or queue not in totals or weight <= 0:
            continue
        usage = ledger.usage(name, now)
        path = queue
        while True:  # the queue and every ancestor below the root
            row = totals[path]
            for r in range(m):
                row[r] += usage[r]
            if "." not in path:
                break
            path = path.rsplit(".", 1)[0]
    return {path: tuple(u / weight if weight > 0 else 0.0 for u in row) for path, row in totals.items()}


def effective_share(allocated: Sequence[float], average: Sequence[float], capacity: Sequence[float]) -> float:
    """The dominant share of ``A + U / W`` (docs/policies.md, "Fairness with memory"): what
    the order is by, unweighted, as ``current_dominant_share`` is of ``A``."""
    return max(((a + u) / c for a, u, c in zip(allocated, average, capacity) if c > 0), default=0.0)


def has_memory(sorter: OnlineSorter) -> bool:
    """Whether the sorter orders by decayed usage when given a half-life (the base class's
    ``set_half_life`` refuses: fifo, timefair)."""
    return type(sorter).set_half_life is not OnlineSorter.set_half_life


class DecayKeeper:
    """Saves the sorter's ledger to the store and reads it back at a restart (module
    docstring). ``wall_at_zero``: the wall clock at this process's engine time 0."""

    def __init__(self, store: Store, resources: Sequence[str], wall_at_zero: float):
        self.store = store
        self.resources = tuple(resources)
        self.wall_at_zero = wall_at_zero
        #: what the store holds of each entry: (usage, allocation, settled_at), engine clock
        self._saved: dict[str, tuple] = {}
        self._last_save = -math.inf
        self._stored = False  # the store may hold a saved ledger (``restore`` or ``save`` put it there)
        #: job name -> queue of the jobs resumed at this restart (``queue_usage``'s
        #: ``arriving``: their entries count before the first pass re-adds them)
        self.resumed: dict[str, str] = {}

    def restore(self, half_life: float, t: float) -> DecayLedger | None:
        """The saved ledger on this process's clock, every entry settled at the save's
        time and holding nothing since; with another half-life than it was saved with,
        ``continued`` at the save's time. None when nothing is saved; with half-life 0
        the saved history is dropped (no memory)."""
        if not half_life:
            self.store.clear_decay()
            self._stored = False
            return None
        loaded = self.store.load_decay()
        self._stored = loaded is not None
        if loaded is None:
            return None
        head, rows = loaded
        offset = self.wall_at_zero
        saved_at = min(head["saved_at"] - offset, t)
        index = {r: i for i, r in enumerate(head["resources"])}

        def vector(values: Sequence[float]) -> list[float]:  # (by name: the config's resources may change)
            return [float(values[index[r]]) if r in index else 0.0 for r in self.resources]

        ledger = DecayLedger(_half_life(head["half_life"]), len(self.resources))
        ledger.origin = None if head["origin"] is None else head["origin"] - offset
        zero = [0.0] * len(self.resources)
        for name, (usage, alloc, settled_at) in rows.items():
            ledger.entries[name] = [vector(usage), vector(alloc), settled_at - offset]
            ledger.charge(name, saved_at, zero)  # settled at the save, nothing held since
        if ledger.half_life != half_life:
            ledger = continued(ledger, half_life, saved_at)
        return ledger

    def due(self, now: float) -> bool:
        return now - self._last_save >= SAVE_EVERY_S

    def save(self, ledger: DecayLedger | None, now: float) -> None:
        """Write the entries that changed since the last save, the ones gone, and the head,
        in one transaction (``Store.save_decay``). Without a ledger: forget the history."""
        self._last_save = now
        if ledger is None:  # (half-life 0: touches the store only to drop a saved ledger)
            if self._stored:
                self.store.clear_decay()
            self._saved, self._stored = {}, False
            return
        current = {name: (tuple(u), tuple(a), t0) for name, (u, a, t0) in ledger.entries.items()}
        offset = self.wall_at_zero
        upsert = [(name, u, a, t0 + offset) for name, (u, a, t0) in current.items() if self._saved.get(name) != (u, a, t0)]
        drop = [name for name in self._saved if name not in current]
        head = {"half_life": half_life_json(ledger.half_life), "resources": list(self.resources),
                "origin": None if ledger.origin is None else ledger.origin + offset, "saved_at": now + offset}
        self.store.save_decay(head, upsert, drop)
        self._saved, self._stored = current, True

    def forget_unresumed(self, scheduler: Scheduler, ledger: DecayLedger, resumed: Mapping[str, str],
                         queue_of: Callable[[str], str | None], t: float) -> None:
        """At a restart: the saved entries of jobs that do not come back (cancelled or not
        resumable, or finished just before the save) leave the ledger; with a tree policy
        their usage joins their queue's history leaf, as a finished job's does
        (``HDRFSorter._retire``, ``DFFSorter._retire``). ``resumed``: job name -> queue of
        the jobs that resume; ``queue_of``: job name -> its queue (None: unknown)."""
        self.resumed = dict(resumed)
        keeps_history = isinstance(scheduler.sorter, (HDRFSorter, DFFSorter))
        for name in [n for n in ledger.entries if not n.startswith(HISTORY) and n not in resumed]:
            past = ledger.usage(name, t)
            ledger.forget(name)
            queue = queue_of(name)
            if not keeps_history or queue is None or queue not in scheduler.queues:
                continue
            key = HISTORY + queue
            ledger.absorb(key, past, t)
