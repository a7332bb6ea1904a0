"""First in, first out over all jobs: by submit time, then file order.

The baseline every cluster scheduler starts from (Hadoop's default FIFO scheduler).
Statically, the first job takes all it can use, then the next job takes what is left
of the resources it needs, and so on.
"""

from __future__ import annotations

from fairshare.policies._tree import flat_tree
from fairshare.policies.progressive import FillingPolicy


class FIFO(FillingPolicy):
    name = "fifo"
    citation = "FIFO baseline (jobs in submit order)"

    def build_tree(self, scenario, respect_counts):
        return flat_tree(scenario, respect_counts, fifo=True)
