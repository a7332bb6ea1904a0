"""First in, first out over all jobs: by submit time, then file order.

The baseline every cluster scheduler starts from (Hadoop's default FIFO scheduler); the
H-DRF paper uses FIFO inside leaf queues (Sec. 4.3 "recursive scheduling", Sec. 5.3.2).
Statically, the first job takes all it can use, then the next job takes what is left
of the resources it needs, and so on.
"""

from __future__ import annotations

from fairshare.policies.drf import drf_share
from fairshare.policies.machinery.flat import FifoSorter, FlatShareRule
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.tree import flat_tree


class FIFO(FillingPolicy):
    name = "fifo"
    citation = "FIFO baseline; H-DRF (Bhattacharya et al. SoCC'13) Sec. 4.3, 5.3.2 (FIFO within a leaf)"
    conformance_exemptions = {
        "allocation weights": "FIFO ignores weights by definition: the first job takes what it can use",
        "job weights": "FIFO ignores weights by definition: the first job takes what it can use",
        "queue weights": "FIFO ignores weights and queues by definition",
    }

    def build_tree(self, scenario, respect_counts):
        return flat_tree(scenario, respect_counts, fifo=True)

    def share_rule(self, resources, *, slots_total=1):
        # the order is arrival; the shares (DRF's) are only reported
        return FlatShareRule(drf_share, fifo=True)

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Oldest runnable job first, scanning in arrival order (``machinery/flat.py``'s ``FifoSorter``)."""
        return FifoSorter(len(resources), queues, capacity)
