"""Max-min fairness on one resource only (the "CPU-fair" baseline).

Ghodsi et al., NSDI 2011, Sec. 7.2 compare DRF with "(max-min) fair sharing applied only
to a single resource (CPU)". Jobs are compared by their weighted share of that one
resource; other resources only bound what fits. A job that does not use the resource at
all has a share that never grows, so it keeps being picked until it is blocked.
"""

from __future__ import annotations

from fairshare.policies._tree import flat_tree
from fairshare.policies.progressive import FillingPolicy


class SingleResourceFair(FillingPolicy):
    name = "cpu"
    share_is_usage_over_capacity = True
    citation = "Ghodsi et al. NSDI'11, Sec. 7.2 (CPU-only fair sharing baseline)"

    def __init__(self, resource: str | None = None):
        self.resource = resource

    def params(self) -> dict:
        return {"resource": self.resource}

    def resource_index(self, scenario) -> int:
        if self.resource is None:
            return 0
        if self.resource not in scenario.resources:
            raise ValueError(f"--resource: {self.resource!r} is not a resource of this scenario "
                             f"(resources: {', '.join(scenario.resources)})")
        return scenario.resources.index(self.resource)

    def build_tree(self, scenario, respect_counts):
        k = self.resource_index(scenario)

        def ref(job):
            return tuple(job.weight * c if r == k else 0.0 for r, c in enumerate(scenario.capacity))

        return flat_tree(scenario, respect_counts, leaf_ref=ref)

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Lowest share of the one resource first: one lazy heap (``policies/flat_online.py``)."""
        from fairshare.policies.flat_online import FlatSorter

        k = resources.index(self.resource) if self.resource else 0
        return FlatSorter("cpu", len(resources), queues, capacity, resource_index=k)
