"""Asset Fairness: equalise each job's aggregate share ``sum_j u_ij / r_j``.

Ghodsi et al., NSDI 2011, Sec. 5.1 ("it repeatedly launches tasks for the user with the
minimum aggregate share"); weights divide the aggregate share as in weighted DRF. The
allocation is the progressive filling on the aggregate share, computed exactly; after a
resource saturates, jobs that do not need it keep growing (as in DRF's Sec. 4.1 remark).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import truediv

import numpy as np

from fairshare.model.resources import Vector
from fairshare.policies.machinery.filling import LevelRule
from fairshare.policies.machinery.flat import FlatShareRule, FlatSorter
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.tree import flat_tree


def asset_share(usage: Sequence[float], capacity: Vector, weight: float) -> float:
    """The weighted aggregate share ``sum_r U_r / (w R_r)`` over the resources with
    ``R_r > 0``, the online sorters' measure."""
    return sum(usage[r] / capacity[r] for r in range(len(capacity)) if capacity[r] > 0) / weight


def asset_shares(usage: np.ndarray, capacity: Vector, weights: np.ndarray) -> np.ndarray:
    """:func:`asset_share` of each row of ``usage`` (one weight per row), in one pass
    (``drf.drf_shares``)."""
    counted = [r for r in range(len(capacity)) if capacity[r] > 0]
    return (usage[:, counted] / np.array([capacity[r] for r in counted], dtype=float)).sum(axis=1) / weights


def asset_share_at(capacity: Vector):
    """:func:`asset_share` with ``capacity`` fixed, as ``share(usage, weight)``
    (``drf.drf_share_at``): where every ``R_r > 0``, ``sum(map(truediv, usage, capacity))``,
    the same quotients summed by the same ``sum`` in the same order."""
    if capacity and all(c > 0 for c in capacity):
        return lambda usage, weight: sum(map(truediv, usage, capacity)) / weight
    return lambda usage, weight: asset_share(usage, capacity, weight)


asset_share.many = asset_shares  # (read by FlatSorter)
asset_share.at = asset_share_at


class AssetFairness(FillingPolicy):
    name = "asset"
    remembers_usage = True  # history in the level (docs/policies.md, "Fairness with memory")
    share_is_usage_over_capacity = True
    citation = "Ghodsi et al. NSDI'11, Sec. 5.1 (Asset Fairness)"
    conformance_exemptions = {"queue weights": "flat over jobs (DRF Sec. 5.1): the queue tree is ignored"}
    rule = LevelRule(kind="sum")

    def build_tree(self, scenario, respect_counts):
        return flat_tree(scenario, respect_counts)

    def share_rule(self, resources, *, slots_total=1):
        return FlatShareRule(asset_share)

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Lowest aggregate share first: one lazy heap over the jobs (``policies/machinery/flat.py``)."""
        return FlatSorter(asset_share, len(resources), queues, capacity)
