"""Hierarchical DRF (H-DRF).

Bhattacharya et al., "Hierarchical Scheduling for Diverse Datacenter Workloads", SoCC
2013. The static allocation is Sec. 3.1, Alg. 1: descend from the root taking the
demanding child with the lowest dominant share (internal nodes are charged the sum of
their children), give the leaf an epsilon sliver, until nothing can be scheduled.
Weights divide the shares at every level (Sec. 3: "generalized to multiple weights in a
straightforward fashion (c.f. [1])"). Theorem 1: the dynamic algorithm (Alg. 2-4, with
rescaling and ignoring blocked nodes) reaches this same allocation whenever resources
are fully allocated, which is why ``rescale`` and ``ignore_blocked`` do not change the
static answer; they are the online algorithm's ablation switches.
"""

from __future__ import annotations

from collections.abc import Sequence

from fairshare.model.resources import Vector
from fairshare.policies.base import PolicyOption
from fairshare.policies.hdrf_online import HDRFSorter
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.reference import ShareRule
from fairshare.policies.machinery.tree import hierarchical_tree


def hdrf_share(usage: Sequence[float], capacity: Vector, counted: Sequence[int], weight: float) -> float:
    """A node's dominant share over the counted resources Y, divided by its weight:
    ``max_{r in Y} U_r / R_r / w`` (Alg. 3; 0 when Y is empty). Leaves and queues alike,
    in the reference's rule and the incremental sorter (which inlines it once, in
    ``HDRFSorter._recompute``, where the call measurably costs)."""
    best = 0.0
    for r in counted:
        x = usage[r] / capacity[r]
        if x > best:
            best = x
    return best / weight


class HDRFRule(ShareRule):
    """Dynamic H-DRF for the reference sorter (Alg. 2-4), per decision from scratch.

    A leaf's share is ``max_{r in Y} U_r / R_r`` over the non-saturated resources Y,
    divided by its weight; a queue rescales its demanding non-blocked children's usage
    vectors to the smallest of their (weighted) shares and adds its blocked children's
    vectors unscaled (Alg. 3), then takes its share over Y. A leaf is blocked when it is
    not demanding or needs a saturated resource. ``rescale=False`` adds the children's
    vectors as they are; ``ignore_blocked=False`` rescales to the smallest demanding child
    whether blocked or not and counts every resource. Naive H-DRF (Sec. 3.3) is both off;
    C.S-Current (Sec. 5.2) is naive and stops while any resource is saturated.
    ``hdrf_online.HDRFSorter`` computes the same shares incrementally.
    """

    def __init__(self, *, rescale: bool = True, ignore_blocked: bool = True, stop_when_saturated: bool = False):
        self.rescale = rescale
        self.ignores_saturated = ignore_blocked
        self.stop_when_saturated = stop_when_saturated

    def leaf_share(self, sorter, job, state):
        return hdrf_share(job.usage, sorter.capacity, state.counted, job.weight)

    def node_share(self, sorter, key, state):
        return hdrf_share(state.usage[key], sorter.capacity, state.counted, sorter.queues[key].weight)

    def combine(self, sorter, key, state):
        if not self.rescale:
            return super().combine(sorter, key, state)
        m, children = sorter.m, state.kids.get(key, [])
        usage, share, demanding, blocked = state.usage, state.share, state.demanding, state.blocked
        # Alg. 3: rescale the demanding (non-blocked) children to the smallest share
        pool = [c for c, _ in children if demanding[c] and (not self.ignores_saturated or not blocked[c])]
        low = min((share[c] for c in pool), default=None)
        total = [0.0] * m
        for c, _ in children:
            factor = 1.0
            if c in pool and low is not None:
                # rescale so the child's weighted share becomes the smallest one
                factor = (low / share[c]) if share[c] > 0 else 0.0
            for r in range(m):
                total[r] += usage[c][r] * factor
        return total


class HDRF(FillingPolicy):
    name = "hdrf"
    remembers_usage = True  # history in the level (docs/policies.md, "Fairness with memory")
    share_is_usage_over_capacity = True
    citation = "Bhattacharya et al. SoCC'13, Sec. 3.1 Alg. 1 (static); Sec. 3.4 Alg. 2-4 (dynamic)"
    hierarchical = True
    fairness_reference = "hierarchical"  # H-DRF generalises DRF to the queue tree (H-DRF Sec. 3)
    options = (PolicyOption("rescale", "--no-rescale", "disable rescaling of demand vectors (H-DRF Sec. 3.4 ablation)",
                            value="off"),
               PolicyOption("ignore_blocked", "--no-ignore-blocked",
                            "do not ignore blocked nodes (H-DRF Sec. 3.4 ablation)", value="off"))
    conformance_variants = ({"rescale": False}, {"ignore_blocked": False})

    def __init__(self, rescale: bool = True, ignore_blocked: bool = True):
        self.rescale = rescale
        self.ignore_blocked = ignore_blocked

    def params(self) -> dict:
        return {"rescale": self.rescale, "ignore_blocked": self.ignore_blocked}

    def build_tree(self, scenario, respect_counts):
        return hierarchical_tree(scenario, respect_counts)[0]

    def share_rule(self, resources, *, slots_total=1):
        return HDRFRule(rescale=self.rescale, ignore_blocked=self.ignore_blocked)

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Dynamic H-DRF, Alg. 2-4, incremental (``policies/hdrf_online.py``)."""
        return HDRFSorter(len(resources), queues, capacity, share=hdrf_share, rescale=self.rescale,
                          ignore_blocked=self.ignore_blocked)
