"""Naive hierarchical DRF, as Hadoop's Capacity Scheduler implements it.

Bhattacharya et al., SoCC 2013, Sec. 3.3 ("Naive H-DRF": traverse from the root, pick
the demanding child with the smallest dominant share, no rescaling) and Sec. 5.2, which
compares "C.S-Current" (the unchanged Capacity Scheduler, which stops allocating once
any resource is fully used and so is not Pareto efficient) with "Pareto-Efficient-C.S"
(the naive algorithm that keeps scheduling jobs that do not need the saturated resource).

Statically (nothing finishes) the naive descent is Alg. 1 itself, so ``hdrf-naive``
gives the static H-DRF allocation; its starvation only appears online, when tasks finish
(Sec. 3.3). ``capacity`` stops at the first saturated resource.
"""

from __future__ import annotations

from fairshare.policies.hdrf import HDRFRule, hdrf_share
from fairshare.policies.hdrf_online import HDRFSorter
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.tree import hierarchical_tree


class NaiveHDRF(FillingPolicy):
    name = "hdrf-naive"
    remembers_usage = True  # history in the level (docs/policies.md, "Fairness with memory")
    share_is_usage_over_capacity = True
    citation = "Bhattacharya et al. SoCC'13, Sec. 3.3 (Naive H-DRF), Sec. 5.2 (Pareto-Efficient-C.S)"
    hierarchical = True
    conformance_exemptions = {
        "static limit": "H-DRF Sec. 3.3: the naive dynamic algorithm does not reach the static allocation "
                        "(Fig. 4: n1,1 takes every CPU, 1.0 against 0.5); the reason H-DRF rescales",
    }

    def build_tree(self, scenario, respect_counts):
        return hierarchical_tree(scenario, respect_counts)[0]

    def share_rule(self, resources, *, slots_total=1):
        """Sec. 3.3: no rescaling, blocked nodes and saturated resources still count."""
        return HDRFRule(rescale=False, ignore_blocked=False, stop_when_saturated=self.stop_at_first_saturation)

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Sec. 3.3: no rescaling, blocked nodes and saturated resources still count."""
        return HDRFSorter(len(resources), queues, capacity, share=hdrf_share, rescale=False, ignore_blocked=False,
                          stop_when_saturated=self.stop_at_first_saturation)


class CapacityScheduler(NaiveHDRF):
    name = "capacity"
    citation = "Bhattacharya et al. SoCC'13, Sec. 5.2 (C.S-Current: stops once any resource saturates)"
    stop_at_first_saturation = True
    conformance_exemptions = {
        "infeasible demand": "C.S-Current stops all allocation while any resource is saturated (H-DRF Sec. 5.2): "
                             "a job needing a resource no node has keeps it saturated, and nothing else runs "
                             "(measured: 0 launches, a GPU job on CPU-only nodes)",
        "static limit": "naive H-DRF (Sec. 3.3) that also waits while a resource is saturated (Sec. 5.2): "
                        "Fig. 4 ends away from the static answer (n2,2 0.31 against 0.5)",
    }
