"""Collapsed hierarchies: flatten the tree to leaf weights, then weighted DRF.

Bhattacharya et al., SoCC 2013, Sec. 3.2: "assigning to each node a weight that
corresponds to the product of its weighted shares in the hierarchy from the leaf to the
root". A node's weighted share is its weight over the weights of its demanding siblings
(siblings with at least one job below them). The paper leaves recomputation on demand
changes aside ("this approach breaks down even without recalculation"), and so do we:
weights are computed once from the scenario, where every job demands.
"""

from __future__ import annotations

from fairshare.model.queues import ROOT
from fairshare.policies._tree import flat_tree
from fairshare.policies.progressive import FillingPolicy


def collapsed_weights(queues, jobs) -> dict[str, float]:
    """Leaf weight = product over the path of ``w_node / sum(w of demanding siblings)``.

    ``jobs`` are the demanding jobs (anything with ``name``, ``queue`` and ``weight``); a
    queue demands when a demanding job is below it. The static policy passes every job,
    the online reference the jobs demanding at that moment (H-DRF Sec. 3.2: "each time
    jobs are added, removed, or change their demand-status, the weights are recalculated").
    """
    jobs = list(jobs)
    has_jobs: set[str] = set()
    for job in jobs:
        has_jobs.update(queues.ancestors(job.queue))
    # weight totals of the demanding children of each queue (child queues and jobs)
    totals: dict[str, float] = {}
    for path in queues.paths:
        if path in has_jobs:
            parent = queues[path].parent
            totals[parent] = totals.get(parent, 0.0) + queues[path].weight
    for job in jobs:
        totals[job.queue] = totals.get(job.queue, 0.0) + job.weight
    weights = {}
    for job in jobs:
        w = job.weight / totals[job.queue]
        path = job.queue
        while path != ROOT:
            node = queues[path]
            w *= node.weight / totals[node.parent]
            path = node.parent
        weights[job.name] = w
    return weights


class Collapsed(FillingPolicy):
    name = "collapsed"
    citation = "Bhattacharya et al. SoCC'13, Sec. 3.2 (collapsed hierarchies + weighted DRF)"
    # its leaf weights are the hierarchical entitlements, so audits judge it by those
    hierarchical = True

    def build_tree(self, scenario, respect_counts):
        weights = collapsed_weights(scenario.queues, scenario.jobs)
        return flat_tree(scenario, respect_counts,
                         leaf_ref=lambda job: tuple(weights[job.name] * c for c in scenario.capacity))
