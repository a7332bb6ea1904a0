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

The entries are also kept as rows of arrays, so that a sorter re-keying every job when
time moves reads them in one vectorized pass (:meth:`DecayLedger.effective_rows`, the
same arithmetic as :meth:`DecayLedger.effective`): ``entries`` is for reading, and every
write goes through :meth:`charge`, :meth:`open`, :meth:`absorb` or :meth:`forget`, which
keep the two in step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

LN2 = math.log(2.0)


class DecayLedger:
    """Per entity: ``[U, A, t0]`` (decayed usage settled at ``t0``, current allocation)."""

    def __init__(self, half_life: float, m: int):
        if not half_life > 0:
            raise ValueError(f"fairness.half_life: a decay ledger needs a half-life > 0, got {half_life}")
        self.half_life = half_life
        self.infinite = math.isinf(half_life)
        self.k = 0.0 if self.infinite else LN2 / half_life  # the decay rate
        self.m = m
        self.origin: float | None = None
        self.entries: dict[str, list] = {}
        # the entries as rows (``effective_rows``): each name's row, the rows to reuse
        self.rows: dict[str, int] = {}
        self._free: list[int] = []
        self._usage = np.zeros((16, m))
        self._alloc = np.zeros((16, m))
        self._t0 = np.zeros(16)

    def _store(self, name: str, entry: list) -> None:
        """Copy ``name``'s entry into its row (a new row for a new name)."""
        row = self.rows.get(name)
        if row is None:
            if not self._free:
                n = len(self._t0)
                self._usage = np.vstack([self._usage, np.zeros((n, self.m))])
                self._alloc = np.vstack([self._alloc, np.zeros((n, self.m))])
                self._t0 = np.concatenate([self._t0, np.zeros(n)])
                self._free = list(range(2 * n - 1, n - 1, -1))
            row = self.rows[name] = self._free.pop()
        self._usage[row] = entry[0]
        self._alloc[row] = entry[1]
        self._t0[row] = entry[2]

    def _decayed(self, entry: list, t: float) -> list[float]:
        """``U(t)`` of one entry, from its settled ``U(t0)`` and allocation ``A``."""
        usage, alloc, t0 = entry
        dt = t - t0
        if dt <= 0:
            return usage
        if self.infinite:
            return [u + a * dt for u, a in zip(usage, alloc)]
        d = 2.0 ** (-dt / self.half_life)
        grown = (1.0 - d) / self.k  # integral of 2^(-(t - s)/h) over [t0, t]
        return [u * d + a * grown for u, a in zip(usage, alloc)]

    def weight(self, t: float) -> float:
        """``W(t)``: the decayed weight of the time since the origin (module docstring)."""
        if self.origin is None or t <= self.origin:
            return 0.0
        elapsed = t - self.origin
        if self.infinite:
            return elapsed
        return (1.0 - 2.0 ** (-elapsed / self.half_life)) / self.k

    def charge(self, name: str, t: float, alloc: Sequence[float]) -> None:
        """From ``t`` on, ``name`` holds ``alloc`` (a task started or ended): settle its
        usage at ``t``, O(m)."""
        if self.origin is None:
            self.origin = t
        entry = self.entries.get(name)
        if entry is None:
            entry = self.entries[name] = [[0.0] * self.m, list(alloc), t]
        else:
            entry[0] = self._decayed(entry, t)
            entry[1] = list(alloc)
            entry[2] = t
        self._store(name, entry)

    def open(self, name: str) -> None:
        """Give ``name`` an entry with no usage and no allocation (if it has none), without
        starting the clock (``origin``): a sorter that reads rows gives every job one."""
        if name not in self.entries:
            entry = self.entries[name] = [[0.0] * self.m, [0.0] * self.m, 0.0]
            self._store(name, entry)

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

    def usage(self, name: str, t: float) -> list[float]:
        """``U(t)``: the decayed past usage (resource-seconds), decayed on read."""
        entry = self.entries.get(name)
        return [0.0] * self.m if entry is None else self._decayed(entry, t)

    def effective(self, name: str, alloc: Sequence[float], t: float) -> list[float]:
        """``A + U(t) / W(t)``: what the sorters take the dominant share of."""
        w = self.weight(t)
        entry = self.entries.get(name)
        if entry is None or w <= 0:
            return list(alloc)
        return [a + u / w for a, u in zip(alloc, self._decayed(entry, t))]

    def effective_rows(self, rows: np.ndarray, t: float) -> np.ndarray:
        """:meth:`effective` of the entries in ``rows`` (``self.rows[name]``), each with its
        entry's allocation, as one array (len(rows) x m): the same arithmetic, vectorized."""
        usage, alloc = self._usage[rows], self._alloc[rows]
        w = self.weight(t)
        if w <= 0:
            return alloc
        dt = np.maximum(t - self._t0[rows], 0.0)[:, None]
        if self.infinite:
            decayed = usage + alloc * dt
        else:
            # 2^x by Python's pow, as in ``_decayed``: numpy's may differ by an ulp, and
            # 1 - d cancels (a few seconds against a day's half-life: 1e-12 relative), so
            # the two paths would give keys that differ above the tie rule's rounding
            d = np.array([2.0 ** x for x in (-dt / self.half_life).ravel().tolist()])[:, None]
            decayed = usage * d + alloc * ((1.0 - d) / self.k)
        return alloc + decayed / w
