"""Decayed usage in the tree sorters: what H-DRF's (``hdrf_online.py``) and DFF's
(``dff_online.py``) share.

docs/policies.md, "Fairness with memory". Each job leaf holds its effective vector (its
allocation plus its decayed average past allocation, ``machinery/decay.py``) in place of
its allocation, and a job that ends leaves its history to a hidden, never demanding leaf
of its queue (key ``HISTORY + path``), so the queue remembers it. A job's usage and its
queue's history decay with the queue's half-life (``QueueTree.half_life_of``). Time
moving changes every effective vector, so the leaves are re-charged once per new instant
(:meth:`QueueHistory._advance`), in one vectorized pass over the ledger's rows
(:meth:`QueueHistory._effective_leaves`); how a sorter takes the new vectors in is its own
(``_recharge``, and ``_set_history`` for a history leaf).
"""

from __future__ import annotations

import numpy as np

from fairshare.policies.machinery.decay import DecayLedger

#: the key prefix of a queue's hidden history leaf (decayed usage of its finished jobs)
HISTORY = "\0history:"


class QueueHistory:
    """Mixin for a tree sorter with a node table (``index``, ``key``, ``_add_node(key,
    parent, weight, is_job)``), ``jobs``, ``queues``, ``views`` and ``m``; it calls
    :meth:`_init_history` in its constructor and implements ``_recharge`` (time moved:
    every leaf's vector is new) and ``_set_history(idx, vector)``."""

    def _init_history(self) -> None:
        # decayed usage (``set_half_life``; None: the instantaneous policy), the latest
        # instant the leaves were charged at, and per queue node its hidden history leaf
        self.decay: DecayLedger | None = None
        self._keyed_at = 0.0
        self._history: dict[int, int] = {}

    def set_half_life(self, half_life: float, ledger: DecayLedger | None = None) -> None:
        """Order by decayed usage (module docstring; each sorter's module docstring says how
        its algorithm reads the effective vectors). ``ledger``: the history to continue."""
        self.decay = ledger if ledger is not None else DecayLedger(half_life, self.m)
        for name, job in self.jobs.items():
            self.decay.enrol(name, self._half_life(job.queue))
        for name in list(self.decay.entries):
            queue = name[len(HISTORY):]
            if name.startswith(HISTORY) and queue in self.index:
                self.decay.assign(name, self._half_life(queue))
                self._history_leaf(queue)
        self._recharge()

    def _half_life(self, queue: str) -> float:
        return self.queues.half_life_of(queue, self.decay.half_life)

    def _history_leaf(self, queue: str) -> int:
        q = self.index[queue]
        idx = self._history.get(q)
        if idx is None:  # (never demanding: the descent and a FIFO scan pass it over)
            idx = self._history[q] = self._add_node(HISTORY + queue, q, 1.0, True)
        return idx

    def _effective_leaves(self) -> tuple[list[int], list[list[float]]]:
        """Every leaf (the jobs', then the history leaves) and its effective vector now, in
        one vectorized pass (``DecayLedger.effective_rows``)."""
        leaves = [self.index[name] for name in self.jobs]
        leaves.extend(self._history.values())
        rows, key = self.decay.rows, self.key
        effective = self.decay.effective_rows(np.array([rows[key[idx]] for idx in leaves], dtype=np.intp),
                                              self._keyed_at).tolist()
        return leaves, effective

    def _advance(self, now: float) -> None:
        if now > self._keyed_at:
            self._keyed_at = now
            self._recharge()

    def _charged(self, name: str, now: float) -> list[float]:
        """With decay, the vector a job's leaf holds once its allocation changed at ``now``:
        charged, then effective."""
        usage = self.jobs[name].usage
        self._advance(now)
        self.decay.charge(name, now, usage)
        return self.decay.effective(name, usage, self._keyed_at)

    def _retire(self, name: str) -> None:
        """A job ends: its decayed usage joins its queue's history leaf."""
        ledger, now = self.decay, self._keyed_at
        queue = self.jobs[name].queue
        zero = [0.0] * self.m
        ledger.charge(name, now, zero)
        past = ledger.usage(name, now)
        ledger.forget(name)
        ledger.assign(HISTORY + queue, self._half_life(queue))
        ledger.absorb(HISTORY + queue, past, now)
        idx = self._history_leaf(queue)
        self.views.tick()
        self._set_history(idx, ledger.effective(HISTORY + queue, zero, now))
