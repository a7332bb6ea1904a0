"""Decayed usage: each entity's past allocation, decaying with a half-life, read lazily.

docs/policies.md, "Fairness with memory". An entity (a job) with current allocation
vector ``A`` (changing only at task starts and ends) has decayed past usage

    U(t) = U(t0) * 2^(-(t - t0)/h) + A * integral_{t0}^{t} 2^(-(t - s)/h) ds

so a running task is charged continuously, as it accrues, not when it ends. The ledger
stores ``U`` and the time ``t0`` it was settled at, and decays on read: a charge (a task
starts or ends) settles one entity, O(m); nothing is recomputed for the others.

The sorters order by the dominant share of ``A + U(t) / W(t)``, where

    W(t) = integral_{origin}^{t} 2^(-(t - s)/h) ds = (h / ln 2) * (1 - 2^(-(t - origin)/h))

is the same decayed weight of the elapsed time for everyone. ``U / W`` is the decayed
*average* allocation (an entity holding ``A`` since the origin has average exactly
``A``), in the units of ``A``, so the two terms add. Once ``t - origin`` is a few
half-lives, ``W`` is ``h / ln 2`` (``U * ln 2 / h``); with ``h = inf`` it is the elapsed
time, and ``U / W`` the cumulative usage over the elapsed time (cumulative usage order).
``origin`` is the first instant the ledger sees.

Per-queue half-lives (a queue's ``fairness: {half_life: S}``): each entry decays with its
own half-life (the sorter assigns a job its queue's, :meth:`DecayLedger.assign`), and
its ``W`` is that half-life's, from the one origin, so that ``U / W`` stays an average
allocation and the terms of different half-lives compare in one unit. Half-life 0 is no
memory: ``U = 0`` and the effective vector is ``A``.

The entries are also kept as rows of arrays, so that a sorter re-keying every job when
time moves reads them in one vectorized pass (:meth:`DecayLedger.effective_rows`, the
same arithmetic as :meth:`DecayLedger.effective`): ``entries`` is for reading, and every
write goes through :meth:`charge`, :meth:`open`, :meth:`absorb` or :meth:`forget`, which
keep the two in step (whoever writes ``entries`` directly, restoring a saved ledger,
calls :meth:`resync` after).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

LN2 = math.log(2.0)


def _decay_terms(dt: float, half_life: float) -> tuple[float, float]:
    """``(2^(-dt/h), integral of 2^(-(t - s)/h) over [t - dt, t])`` for a finite ``h > 0``.

    The integral is ``(h / ln 2)(1 - 2^(-dt/h))``, computed with ``expm1``: ``1 - 2^(-dt/h)``
    written as a subtraction loses about ``log10(h / dt)`` digits (a few seconds against a
    day's half-life: 1e-12 relative), above the tie rule's 12-digit rounding, so jobs that
    are tied would be ordered by rounding noise; ``expm1`` keeps full precision."""
    x = -dt * LN2 / half_life
    return math.exp(x), -math.expm1(x) * half_life / LN2


class DecayLedger:
    """Per entity: ``[U, A, t0]`` (decayed usage settled at ``t0``, current allocation),
    decaying with ``half_life`` unless :meth:`assign` gave it its own."""

    def __init__(self, half_life: float, m: int):
        if not half_life >= 0:
            raise ValueError(f"fairness.half_life: must be >= 0 seconds, got {half_life}")
        self.half_life = half_life
        self.m = m
        self.origin: float | None = None
        self.entries: dict[str, list] = {}
        #: the entries with a half-life of their own (``assign``)
        self.half_lives: dict[str, float] = {}
        # the entries as rows (``effective_rows``): each name's row, the rows to reuse
        self.rows: dict[str, int] = {}
        self._free: list[int] = []
        self._usage = np.zeros((16, m))
        self._alloc = np.zeros((16, m))
        self._t0 = np.zeros(16)
        self._half = np.full(16, float(half_life))

    def _store(self, name: str, entry: list) -> None:
        """Copy ``name``'s entry into its row (a new row for a new name)."""
        row = self.rows.get(name)
        if row is None:
            if not self._free:
                n = len(self._t0)
                self._usage = np.vstack([self._usage, np.zeros((n, self.m))])
                self._alloc = np.vstack([self._alloc, np.zeros((n, self.m))])
                self._t0 = np.concatenate([self._t0, np.zeros(n)])
                self._half = np.concatenate([self._half, np.zeros(n)])
                self._free = list(range(2 * n - 1, n - 1, -1))
            row = self.rows[name] = self._free.pop()
        self._usage[row] = entry[0]
        self._alloc[row] = entry[1]
        self._t0[row] = entry[2]
        self._half[row] = self.half_lives.get(name, self.half_life)

    def half_life_of(self, name: str) -> float:
        return self.half_lives.get(name, self.half_life)

    def assign(self, name: str, half_life: float) -> None:
        """``name`` decays with ``half_life`` (its queue's) from its settled time on."""
        if half_life == self.half_life:
            self.half_lives.pop(name, None)
        else:
            self.half_lives[name] = half_life
        if name in self.rows:
            self._half[self.rows[name]] = half_life

    @staticmethod
    def _decayed_by(entry: list, t: float, half_life: float) -> list[float]:
        """``U(t)`` of one entry, from its settled ``U(t0)`` and allocation ``A``."""
        usage, alloc, t0 = entry
        dt = t - t0
        if dt <= 0:
            return usage
        if half_life == 0:
            return [0.0] * len(usage)
        if math.isinf(half_life):
            return [u + a * dt for u, a in zip(usage, alloc)]
        d, grown = _decay_terms(dt, half_life)
        return [u * d + a * grown for u, a in zip(usage, alloc)]

    def _decayed(self, name: str, entry: list, t: float) -> list[float]:
        return self._decayed_by(entry, t, self.half_lives.get(name, self.half_life))

    def weight(self, t: float, half_life: float | None = None) -> float:
        """``W(t)`` of ``half_life`` (default: the ledger's): the decayed weight of the time
        since the origin (module docstring)."""
        if half_life is None:
            half_life = self.half_life
        if self.origin is None or t <= self.origin or half_life == 0:
            return 0.0
        elapsed = t - self.origin
        if math.isinf(half_life):
            return elapsed
        return _decay_terms(elapsed, half_life)[1]

    def charge(self, name: str, t: float, alloc: Sequence[float]) -> None:
        """From ``t`` on, ``name`` holds ``alloc`` (a task started or ended): settle its
        usage at ``t``, O(m)."""
        if self.origin is None:
            self.origin = t
        entry = self.entries.get(name)
        if entry is None:
            entry = self.entries[name] = [[0.0] * self.m, list(alloc), t]
        else:
            entry[0] = self._decayed(name, entry, t)
            entry[1] = list(alloc)
            entry[2] = t
        self._store(name, entry)

    def open(self, name: str) -> None:
        """Give ``name`` an entry with no usage and no allocation (if it has none), without
        starting the clock (``origin``): a sorter that reads rows gives every job one."""
        entry = self.entries.get(name)
        if entry is None:
            entry = self.entries[name] = [[0.0] * self.m, [0.0] * self.m, 0.0]
            self._store(name, entry)
        elif name not in self.rows:  # (an entry written directly)
            self._store(name, entry)

    def resync(self) -> None:
        """Copy every entry into its row again, after ``entries`` was written directly."""
        for name, entry in self.entries.items():
            self._store(name, entry)

    def enrol(self, name: str, half_life: float) -> None:
        """A new entity (a job) that decays with ``half_life`` (its queue's): :meth:`open`
        and :meth:`assign`."""
        self.open(name)
        self.assign(name, half_life)

    def absorb(self, name: str, usage: Sequence[float], t: float) -> None:
        """Add ``usage`` (decayed usage at ``t``) to ``name``'s, settled at ``t``: a finished
        job's history joining its queue's."""
        self.charge(name, t, self.entries[name][1] if name in self.entries else [0.0] * self.m)
        entry = self.entries[name]
        entry[0] = [a + b for a, b in zip(entry[0], usage)]
        self._store(name, entry)

    def forget(self, name: str) -> None:
        if self.entries.pop(name, None) is not None:
            self._free.append(self.rows.pop(name))
        self.half_lives.pop(name, None)

    def usage(self, name: str, t: float) -> list[float]:
        """``U(t)``: the decayed past usage (resource-seconds), decayed on read."""
        entry = self.entries.get(name)
        return [0.0] * self.m if entry is None else self._decayed(name, entry, t)

    def effective(self, name: str, alloc: Sequence[float], t: float) -> list[float]:
        """``A + U(t) / W(t)``: what the sorters take the dominant share of."""
        half_life = self.half_lives.get(name, self.half_life)
        w = self.weight(t, half_life)
        entry = self.entries.get(name)
        if entry is None or w <= 0:
            return list(alloc)
        return [a + u / w for a, u in zip(alloc, self._decayed_by(entry, t, half_life))]

    def effective_rows(self, rows: np.ndarray, t: float) -> np.ndarray:
        """:meth:`effective` of the entries in ``rows`` (``self.rows[name]``), each with its
        entry's allocation, as one array (len(rows) x m): the same arithmetic, vectorized,
        one pass per half-life among them."""
        halves = self._half[rows]
        first = float(halves[0]) if len(rows) else self.half_life
        if not (halves == first).all():
            out = np.empty((len(rows), self.m))
            for half_life in np.unique(halves).tolist():
                mask = halves == half_life
                out[mask] = self._effective_rows(rows[mask], t, half_life)
            return out
        return self._effective_rows(rows, t, first)

    def _effective_rows(self, rows: np.ndarray, t: float, half_life: float) -> np.ndarray:
        usage, alloc = self._usage[rows], self._alloc[rows]
        w = self.weight(t, half_life)
        if w <= 0:
            return alloc
        dt = np.maximum(t - self._t0[rows], 0.0)[:, None]
        if math.isinf(half_life):
            decayed = usage + alloc * dt
        else:
            # the scalar read's own terms, element by element (numpy's exp and expm1 may
            # differ from the math module's by an ulp: the two paths must give the same keys)
            terms = [_decay_terms(x, half_life) for x in dt.ravel().tolist()]
            d = np.array([a for a, _ in terms])[:, None]
            grown = np.array([b for _, b in terms])[:, None]
            decayed = usage * d + alloc * grown
        return alloc + decayed / w
