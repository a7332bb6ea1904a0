"""Max-min fairness on one resource only (the "CPU-fair" baseline).

Ghodsi et al., NSDI 2011, Sec. 7.2 compare DRF with "(max-min) fair sharing applied only
to a single resource (CPU)". Jobs are compared by their weighted share of that one
resource; other resources only bound what fits. A job that does not use the resource at
all has a share that never grows, so it keeps being picked until it is blocked.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fairshare.model.resources import Vector
from fairshare.policies.base import PolicyOption
from fairshare.policies.machinery.flat import FlatShareRule, FlatSorter, JobShare
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.tree import flat_tree


def single_resource_share(k: int) -> JobShare:
    """The share of resource ``k`` alone, ``U_k / (w R_k)`` (0 when ``R_k`` is 0), the
    online sorters' measure."""
    def share(usage: Sequence[float], capacity: Vector, weight: float) -> float:
        return usage[k] / capacity[k] / weight if capacity[k] > 0 else 0.0

    def shares(usage: np.ndarray, capacity: Vector, weights: np.ndarray) -> np.ndarray:
        # (each row's ``share``, in one pass: ``drf.drf_shares``)
        return usage[:, k] / capacity[k] / weights if capacity[k] > 0 else np.zeros(len(usage))

    share.many = shares  # (read by FlatSorter)
    return share


class SingleResourceFair(FillingPolicy):
    name = "cpu"
    remembers_usage = True  # history in the level (docs/policies.md, "Fairness with memory")
    share_is_usage_over_capacity = True
    citation = "Ghodsi et al. NSDI'11, Sec. 7.2 (CPU-only fair sharing baseline)"
    options = (PolicyOption("resource", "--resource", "the one resource to be fair on (default: the first listed)",
                            value="resource", metavar="NAME"),)
    conformance_variants = ({"resource": "mem"},)
    conformance_exemptions = {"queue weights": "flat over jobs (DRF Sec. 7.2): the queue tree is ignored"}

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

    def share_rule(self, resources, *, slots_total=1):
        return FlatShareRule(single_resource_share(self._online_index(resources)))

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Lowest share of the one resource first: one lazy heap (``policies/machinery/flat.py``)."""
        return FlatSorter(single_resource_share(self._online_index(resources)), len(resources), queues, capacity)

    def _online_index(self, resources: tuple[str, ...]) -> int:
        return resources.index(self.resource) if self.resource else 0
