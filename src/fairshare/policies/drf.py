"""Weighted Dominant Resource Fairness.

Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of Multiple Resource Types",
NSDI 2011: Sec. 4.2 Alg. 1 (pick the user with the lowest dominant share), Sec. 4.3
(weighted DRF with equal per-resource weights: ``s_i = max_j u_ij / (w_i r_j)``),
Appendix A.1 (progressive filling, which this computes exactly). Flat over jobs: the
queue tree is ignored. Discrete mode: Sec. 6.2.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import truediv

import numpy as np

from fairshare.model.resources import Vector
from fairshare.policies.machinery.flat import FlatShareRule, FlatSorter
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.tree import flat_tree


def drf_share(usage: Sequence[float], capacity: Vector, weight: float) -> float:
    """Sec. 4.3's weighted dominant share ``max_r U_r / (w R_r)`` over the resources with
    ``R_r > 0`` (saturated ones count: DRF has no Y), the online sorters' measure."""
    return max((usage[r] / capacity[r] for r in range(len(capacity)) if capacity[r] > 0), default=0.0) / weight


def drf_shares(usage: np.ndarray, capacity: Vector, weights: np.ndarray) -> np.ndarray:
    """:func:`drf_share` of each row of ``usage`` (one weight per row), in one pass: the
    decayed sorter re-keys every job when time moves (``machinery/flat.py``)."""
    counted = [r for r in range(len(capacity)) if capacity[r] > 0]
    if not counted:
        return np.zeros(len(usage))
    return (usage[:, counted] / np.array([capacity[r] for r in counted])).max(axis=1) / weights


def drf_share_at(capacity: Vector):
    """:func:`drf_share` with ``capacity`` fixed, as ``share(usage, weight)``, for the flat
    sorter's re-key of a job at every task start and end (``FlatSorter._rekey``). Where
    every ``R_r > 0`` (a cluster's usual capacity) it is ``max(map(truediv, usage,
    capacity)) / weight``: the same quotients ``U_r / R_r``, in the same order, through
    the same ``max``, so the same float, without a generator and its test per resource;
    otherwise :func:`drf_share` itself."""
    if capacity and all(c > 0 for c in capacity):
        return lambda usage, weight: max(map(truediv, usage, capacity)) / weight
    return lambda usage, weight: drf_share(usage, capacity, weight)


drf_share.many = drf_shares  # (read by FlatSorter)
drf_share.at = drf_share_at


class DRF(FillingPolicy):
    name = "drf"
    remembers_usage = True  # history in the level (docs/policies.md, "Fairness with memory")
    share_is_usage_over_capacity = True
    fairness_reference = "flat"  # DRF is the flat scenarios' fairness (DRF Sec. 4)
    citation = "Ghodsi et al. NSDI'11, Sec. 4.2 Alg. 1, Sec. 4.3 (weighted), App. A.1 (progressive filling)"
    conformance_exemptions = {"queue weights": "flat over jobs (DRF Sec. 4): the queue tree is ignored"}

    def build_tree(self, scenario, respect_counts):
        return flat_tree(scenario, respect_counts)

    def share_rule(self, resources, *, slots_total=1):
        return FlatShareRule(drf_share)

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Alg. 1 online: one lazy heap over the jobs (``policies/machinery/flat.py``)."""
        return FlatSorter(drf_share, len(resources), queues, capacity)
