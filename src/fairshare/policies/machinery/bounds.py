"""Guarantees and limits on queues: their exact static semantics.

A queue's ``guarantee`` is a floor (it may always use at least that much of each listed
resource while its jobs can use it) and its ``limit`` a ceiling (it never uses more of
a listed resource, even on an idle cluster). Every progressive-filling policy (hdrf,
hdrf-naive, capacity, collapsed, drf, dff, asset, cpu) honours them the same way, by
chaining exact fills (:func:`fairshare.policies.machinery.filling.fill`):

1. **Guarantees, innermost first.** For each depth d at which some queue has a
   guarantee, deepest first, the *frontier* ``T_d`` is the set of queues with a guarantee
   at depth >= d none of whose guaranteed ancestors is at depth >= d. Only the jobs below
   ``T_d`` receive, by the policy's own rule, each queue of ``T_d`` capped at its
   guarantee (listed resources only). A nested guarantee is met before its ancestor's
   is shared out, and then it is a floor, not a cap: in the next phase the child may grow
   further inside its ancestor's guarantee.
2. **Fair sharing from there.** Every job receives, by the policy's rule, from the
   allocation the guarantees gave; a queue at its limit on a resource blocks its jobs
   that need it, as a saturated resource blocks every job (H-DRF Sec. 3.4's "blocked").

Limits hold in every phase. The loader refuses guarantees that cannot all be honoured
(``model.queues.bound_claims_problems``), so phase 1 always reaches every guarantee
that the queue's jobs can use, unless a resource *no* guarantee lists saturates first
(a guarantee of CPUs does not reserve memory). The result is the water-filling with a
lower bound at the guarantee and an upper bound at the limit (YARN's fair share with
``minResources`` / ``maxResources``); docs/policies.md, "Guarantees and limits", says
why, and how Kueue's nominal quota differs.

Flat policies (drf, asset, ...) fill over jobs and ignore the queue tree's weights; the
bounds still apply to each queue's jobs together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fairshare.model.queues import ROOT
from fairshare.model.resources import Vector
from fairshare.model.scenario import Scenario
from fairshare.policies.machinery.filling import FillResult, FillTree, LevelRule, fill

#: a bounded set of leaves: (leaf indices of the tree, cap per resource, ``inf`` = none)
Group = tuple[list[int], Vector]


@dataclass(frozen=True)
class Phase:
    """One fill of the chain: who may receive (None: every leaf) and the caps in force."""

    eligible: frozenset[int] | None
    groups: tuple[Group, ...]
    last: bool  # the fair-sharing phase (C.S-Current's early stop applies only here)


def queue_leaves(scenario: Scenario, tree: FillTree) -> dict[str, list[int]]:
    """The tree's leaves (jobs) below every queue path, in tree order."""
    index = {tree.keys[i]: i for i in range(len(tree.keys)) if tree.is_leaf[i]}
    out: dict[str, list[int]] = {path: [] for path in scenario.queues.paths}
    for job in scenario.jobs:
        leaf = index.get(job.name)
        if leaf is None:
            continue
        for path in scenario.queues.ancestors(job.queue):
            if path != ROOT:
                out[path].append(leaf)
    for leaves in out.values():
        leaves.sort()
    return out


def phases(scenario: Scenario, tree: FillTree) -> list[Phase]:
    """The chain of fills that honours the scenario's guarantees and limits (module
    docstring); a single unbounded phase when there are none."""
    queues = scenario.queues
    resources = scenario.resources
    below = queue_leaves(scenario, tree)
    limits = tuple((below[q.path], q.limit_vector(resources)) for q in queues if q.path != ROOT and q.limit)
    guaranteed = [q for q in queues if q.path != ROOT and any(a > 0 for _r, a in q.guarantee)]
    with_guarantee = {q.path for q in guaranteed}
    out: list[Phase] = []
    for d in sorted({queues.depth(q.path) for q in guaranteed}, reverse=True):
        frontier = [q for q in guaranteed if queues.depth(q.path) >= d and
                    not any(a in with_guarantee and queues.depth(a) >= d for a in queues.ancestors(q.path)[1:])]
        caps = tuple((below[q.path], tuple(g if g > 0 else math.inf for g in q.guarantee_vector(resources)))
                     for q in frontier)
        # a job that needs none of its queue's guaranteed resources gains nothing from the
        # guarantee (and no cap would ever stop it): it waits for the fair-sharing phase
        eligible = frozenset(i for q, (_leaves, cap) in zip(frontier, caps) for i in below[q.path]
                             if any(d > 0 and c < math.inf for d, c in zip(tree.demand[i], cap)))
        out.append(Phase(eligible, caps + limits, last=False))
    out.append(Phase(None, limits, last=True))
    return out


def bounded_fill(tree: FillTree, rule: LevelRule, scenario: Scenario, *,
                 stop_at_first_saturation: bool = False) -> FillResult:
    """The exact divisible allocation under the scenario's guarantees and limits."""
    start: dict[str, float] | None = None
    total_phases = 0
    result = None
    for phase in phases(scenario, tree):
        result = fill(tree, rule, stop_at_first_saturation=stop_at_first_saturation and phase.last,
                      groups=phase.groups, start=start, eligible=phase.eligible)
        total_phases += result.phases
        start = result.tasks
    assert result is not None
    return FillResult(result.tasks, result.saturated, total_phases)
