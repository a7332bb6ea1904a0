"""Constrained fairness: a job competes for the capacity of the nodes it may use.

docs/policies.md, "Constraints and fairness": a job whose task classes are all
constrained competes only for the capacity of the nodes it may use (its *eligible*
nodes, the union over its classes). For the policies whose share is usage over capacity
(``Policy.share_is_usage_over_capacity``) the scheduler reports the job's usage to the
sorter normalized, ``U'_r = U_r * C_r / C^elig_r``, so that the sorter's ``U'_r / C_r``
is ``U_r / C^elig_r``; queues then sum normalized usage. An unconstrained job (or one
eligible everywhere) is reported as is, with no arithmetic at all.
"""

from __future__ import annotations

from fairshare.engine.placement import NodePool
from fairshare.model.jobs import TaskClass
from fairshare.model.resources import Vector


class EligibleCapacity:
    """``C_r / C^elig_r`` per set of class constraints, cached until the nodes change."""

    def __init__(self, pool: NodePool, m: int, enabled: bool):
        self.pool = pool
        self.m = m
        self.enabled = enabled  # the policy's share is usage over capacity
        self._factors: dict[frozenset, Vector | None] = {}

    def clear(self) -> None:
        """Nodes changed: eligible capacities too."""
        self._factors.clear()

    def factor(self, constraint_sets: frozenset) -> Vector | None:
        """The factor for a job whose classes have these constraint sets, or None (factor
        1, no arithmetic) when some class is unconstrained, when its eligible nodes are
        every node that is up, or when the policy's share is not usage over capacity. A
        resource no eligible node has gets 1 (the job cannot use it)."""
        if not self.enabled or () in constraint_sets:
            return None
        if constraint_sets in self._factors:
            return self._factors[constraint_sets]
        pool = self.pool
        eligible: set[int] = set()
        for constraints in constraint_sets:
            eligible.update(pool.eligible(constraints))
        alive = [i for i in sorted(eligible) if pool.alive(i)]
        factor = None
        if len(alive) < sum(1 for st in pool.states if st.alive):
            elig = [0.0] * self.m
            for i in alive:
                for r, c in enumerate(pool.states[i].node.capacity):
                    elig[r] += c
            total = pool.total_capacity
            factor = tuple(total[r] / elig[r] if elig[r] > 0 else 1.0 for r in range(self.m))
        self._factors[constraint_sets] = factor
        return factor

    def factor_and_reported(self, classes: tuple[TaskClass, ...]) -> tuple[Vector | None, list[Vector]]:
        """A job's factor and per-class demands as reported to the sorter (the real ones
        when the factor is 1)."""
        factor = self.factor(frozenset(c.constraints for c in classes))
        if factor is None:
            return None, [c.demand for c in classes]
        return factor, [tuple(d * x for d, x in zip(c.demand, factor)) for c in classes]
