"""The pending task shapes: which (demand, constraints) shapes still have tasks waiting.

The ``Scheduler`` tracks every task class with pending tasks here, by shape (its demand
and its placement constraints). Three questions are answered from it without looking at
the jobs:

- ``minimal()``: the shapes not dominated by another pending shape with the same
  constraints. If none of those fits anywhere, no pending task does, and ``schedule``
  stops without asking the sorter.
- ``saturated(free)``: the resources no pending task could get any more of (H-DRF
  Sec. 3.4), for the sorter.
- ``matrix(constraints)``: the pending shapes of one constraint set and their needs as a
  matrix (a column per shape), for the vectorized scan of freed nodes (``engine.fitmemo``).

All are kept as shapes come and go (trace workloads have hundreds of shapes, one per
pod), never recomputed from every job.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from fairshare.model.jobs import TaskClass
from fairshare.model.resources import FIT_TOLERANCE, Vector


class PendingShapes:
    def __init__(self, m: int):
        self.m = m
        # per resource: how many pending task classes need each amount (saturation test)
        self._demands: list[Counter] = [Counter() for _ in range(m)]
        # their minima (None: no pending demand for r), re-derived when a demand value
        # appears or goes; and the saturated sets seen, by bit mask (one object each)
        self._min: list[float | None] | None = None
        self._saturated_sets: dict[int, frozenset[int]] = {}
        #: pending task classes per shape key ``(demand, constraints)``
        self.keys: Counter = Counter()
        #: pending demands per constraint set
        self.by_constraints: dict[tuple, set[Vector]] = {}
        # the minimal demands per constraint set, kept as shapes come and go: a new shape
        # is checked against its group's minimal demands; a minimal one leaving re-derives
        # only its group
        self._minimal_by_constraints: dict[tuple, list[Vector]] = {}
        self._minimal_keys: list[tuple] | None = []
        #: shapes that appeared since the scheduler's last quiet point (it clears the set)
        self.new: set[tuple] = set()
        # per constraint set: (pending shape keys, their needs as a matrix)
        self._matrix: dict[tuple, tuple[list[tuple], np.ndarray]] = {}

    def track(self, cls: TaskClass, delta: int) -> None:
        """A task class gained (+1) or lost (-1) its pending tasks."""
        key = (cls.demand, cls.constraints)
        keys = self.keys
        before = keys[key]
        keys[key] += delta
        if keys[key] <= 0:
            del keys[key]
        after = keys.get(key, 0)
        if before <= 0 < after:
            self._appeared(cls.demand, cls.constraints)
        elif after <= 0 < before:
            self._left(cls.demand, cls.constraints)
        for r, d in enumerate(cls.demand):
            if d > 0:
                c = self._demands[r]
                before_d = c[d]
                c[d] += delta
                if c[d] <= 0:
                    del c[d]
                if (before_d <= 0) != (c.get(d, 0) <= 0):
                    self._min = None

    def saturated(self, free: Vector) -> frozenset[int]:
        """Resources counted as saturated (H-DRF Sec. 3.4: "a resource is saturated when it
        is fully utilized"; Alg. 2: "Y = set of nonzero resources in W"), for whole tasks.

        Reading: r is saturated while the cluster's total free amount of r (``free``) is
        less than the smallest pending task's demand for it, i.e. no pending task could
        get any more of r. This is the paper's own test of when the online and static
        allocations should agree: "at times when there are no excess resources, except
        those which are not useful to any of the leaves" (Sec. 3.4). An earlier reading,
        "less than the largest pending task", counted r as saturated while smaller tasks
        still fitted in it, and the online schedule then drifted away from the static
        allocation in three paper examples (docs/policies.md, "Online decisions and the
        static allocation")."""
        lows = self._min
        if lows is None:
            lows = self._min = [min(c) if c else None for c in self._demands]
        mask = 0
        for r, low in enumerate(lows):
            # The fit tolerance taken as absolute, as this test always has (decisions
            # depend on it): fit_limit(free[r]) is wider when the total free is above 1.
            if low is not None and free[r] < low - FIT_TOLERANCE:
                mask |= 1 << r
        got = self._saturated_sets.get(mask)
        if got is None:
            got = self._saturated_sets[mask] = frozenset(r for r in range(self.m) if mask >> r & 1)
        return got

    def minimal(self, headroom: bool) -> list[tuple]:
        """Pending shapes not dominated by another pending shape with the same
        constraints: if none of these fits anywhere, no pending task does. Under
        ``headroom``, every pending shape: a smaller task may have to leave room that a
        larger one need not (placement's headroom rule), so dominance in demand says
        nothing."""
        if headroom:
            return list(self.keys)
        if self._minimal_keys is None:
            self._minimal_keys = [(d, cons) for cons, group in self._minimal_by_constraints.items() for d in group]
        return self._minimal_keys

    def matrix(self, constraints: tuple, effective_need) -> tuple[list[tuple], np.ndarray]:
        """The pending shapes with these constraints and their needs (``effective_need``:
        the demand as the pool matches it, with headroom and devices) as the *columns* of
        a matrix (one row per index column), rebuilt when the shapes change. Columns, as a
        node's test ``~(needs > limits[:, None]).any(axis=0)`` then reduces across a few
        contiguous rows, several times faster than across each shape's short row."""
        got = self._matrix.get(constraints)
        if got is None:
            demands = sorted(self.by_constraints[constraints])
            keys = [(d, constraints) for d in demands]
            rows = np.array([effective_need(d) for d in demands], dtype=float).reshape(len(demands), -1)
            got = self._matrix[constraints] = (keys, np.ascontiguousarray(rows.T))
        return got

    def clear_matrices(self) -> None:
        """What a shape needs changed (the headroom moved)."""
        self._matrix.clear()

    def _appeared(self, demand: Vector, constraints: tuple) -> None:
        self.new.add((demand, constraints))
        self._matrix.pop(constraints, None)
        self.by_constraints.setdefault(constraints, set()).add(demand)
        group = self._minimal_by_constraints.setdefault(constraints, [])
        if any(dominates(o, demand) for o in group):
            return
        group[:] = [o for o in group if not dominates(demand, o)] + [demand]
        self._minimal_keys = None

    def _left(self, demand: Vector, constraints: tuple) -> None:
        self._matrix.pop(constraints, None)
        pending = self.by_constraints[constraints]
        pending.discard(demand)
        group = self._minimal_by_constraints[constraints]
        if demand not in group:
            return
        if not pending:
            del self.by_constraints[constraints]
            del self._minimal_by_constraints[constraints]
        else:
            # smallest sum first: a shape can only be dominated by one of smaller sum
            kept: list[Vector] = []
            for d in sorted(pending, key=lambda d: (sum(d), d)):
                if not any(dominates(o, d) for o in kept):
                    kept.append(d)
            group[:] = kept
        self._minimal_keys = None


def dominates(a: Vector, b: Vector) -> bool:
    """a <= b in every resource: where b fits, a fits."""
    return all(x <= y for x, y in zip(a, b))
