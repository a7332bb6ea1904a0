"""Collapsed hierarchies: flatten the tree to leaf weights, then weighted DRF.

Bhattacharya et al., SoCC 2013, Sec. 3.2: "assigning to each node a weight that
corresponds to the product of its weighted shares in the hierarchy from the leaf to the
root". A node's weighted share is its weight over the weights of its demanding siblings
(siblings with at least one job below them). The paper leaves recomputation on demand
changes aside ("this approach breaks down even without recalculation"), and so do we:
weights are computed once from the scenario, where every job demands.
"""

from __future__ import annotations

from fairshare.model.queues import share_guarantees
from fairshare.policies.drf import drf_share
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.reference import ShareRule
from fairshare.policies.machinery.tree import flat_tree


def collapsed_weights(queues, jobs) -> dict[str, float]:
    """Leaf weight = product over the path of ``w_node / sum(w of demanding siblings)``:
    the jobs' hierarchical share guarantees (``model.queues.share_guarantees``).

    ``jobs`` are the demanding jobs. The static policy passes every job, the online
    reference the jobs demanding at that moment (H-DRF Sec. 3.2: "each time jobs are
    added, removed, or change their demand-status, the weights are recalculated").
    """
    return share_guarantees(queues, jobs)[1]


class CollapsedRule(ShareRule):
    """Online (served by the reference sorter, see ``machinery/flat.py``): DRF's share with
    each job's weight its collapsed weight among the jobs demanding at that decision; a
    job that is not demanding keeps its own weight (it is never picked)."""

    flat = True

    def begin(self, sorter):
        self.weights = collapsed_weights(sorter.queues, (j for j in sorter.jobs.values() if j.demanding))

    def leaf_share(self, sorter, job, state):
        return drf_share(job.usage, sorter.capacity, self.weights.get(job.name, job.weight))


class Collapsed(FillingPolicy):
    name = "collapsed"
    share_is_usage_over_capacity = True
    citation = "Bhattacharya et al. SoCC'13, Sec. 3.2 (collapsed hierarchies + weighted DRF)"
    # its leaf weights are the hierarchical entitlements, so audits judge it by those
    hierarchical = True

    def build_tree(self, scenario, respect_counts):
        weights = collapsed_weights(scenario.queues, scenario.jobs)
        return flat_tree(scenario, respect_counts,
                         leaf_ref=lambda job: tuple(weights[job.name] * c for c in scenario.capacity))

    def share_rule(self, resources, *, slots_total=1):
        return CollapsedRule()
