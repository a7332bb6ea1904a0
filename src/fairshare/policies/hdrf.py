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

from fairshare.policies._tree import hierarchical_tree
from fairshare.policies.progressive import FillingPolicy


class HDRF(FillingPolicy):
    name = "hdrf"
    share_is_usage_over_capacity = True
    citation = "Bhattacharya et al. SoCC'13, Sec. 3.1 Alg. 1 (static); Sec. 3.4 Alg. 2-4 (dynamic)"
    hierarchical = True

    def __init__(self, rescale: bool = True, ignore_blocked: bool = True):
        self.rescale = rescale
        self.ignore_blocked = ignore_blocked

    def params(self) -> dict:
        return {"rescale": self.rescale, "ignore_blocked": self.ignore_blocked}

    def build_tree(self, scenario, respect_counts):
        return hierarchical_tree(scenario, respect_counts)[0]

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Dynamic H-DRF, Alg. 2-4, incremental (``policies/hdrf_online.py``)."""
        from fairshare.policies.hdrf_online import HDRFSorter

        return HDRFSorter(len(resources), queues, capacity, rescale=self.rescale,
                          ignore_blocked=self.ignore_blocked)
