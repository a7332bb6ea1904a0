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
from fairshare.policies.machinery.flat import FlatSorter
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
    """The per-decision reference: DRF's share with each job's weight its collapsed weight
    among the jobs demanding at that decision; a job that is not demanding keeps its own
    weight (it is never picked)."""

    flat = True

    def begin(self, sorter):
        self.weights = collapsed_weights(sorter.queues, (j for j in sorter.jobs.values() if j.demanding))

    def leaf_share(self, sorter, job, state):
        return drf_share(job.usage, sorter.capacity, self.weights.get(job.name, job.weight))


class CollapsedSorter(FlatSorter):
    """Online collapsed hierarchy, incremental: weighted DRF's lazy heap
    (``machinery/flat.py``) with each job's weight its collapsed weight.

    The weights depend only on which jobs demand (H-DRF Sec. 3.2: "each time jobs are
    added, removed, or change their demand-status, the weights are recalculated"), so
    they are recomputed after those events, O(jobs + queues), once before the next
    decision, and only the jobs whose weight moved are re-keyed; a task start or finish re-keys one job, as in DRF.
    The reference recomputes them per decision. Both call :func:`collapsed_weights` on
    the demanding jobs in arrival order, so each weight is the same float and the
    decisions are identical (tests/test_online_parity.py)."""

    def __init__(self, resources: int, queues, capacity):
        super().__init__(drf_share, resources, queues, capacity)
        self.weights: dict[str, float] = {}
        # The demanding set changed since the weights were computed. They are recomputed
        # at the next decision, not per change: 10,000 jobs arriving together cost one
        # recomputation, not 10,000. Until then a re-keyed job uses its last weight, and
        # ``_reweigh`` re-keys every job whose weight moved.
        self._stale = False

    def _weight(self, job) -> float:
        return self.weights.get(job.name, job.weight)

    def _reweigh(self) -> None:
        self._stale = False
        old, self.weights = self.weights, collapsed_weights(self.queues,
                                                            (j for j in self.jobs.values() if j.demanding))
        for name, job in self.jobs.items():
            # (old.get(...) is the weight its heap key was computed with)
            if self.weights.get(name, job.weight) != old.get(name, job.weight):
                self._rekey(name)

    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, demand)
        self._stale = True

    def remove_job(self, name):
        super().remove_job(name)
        self.weights.pop(name, None)
        self._stale = True

    def set_demanding(self, name, demanding):
        if self.jobs[name].demanding != demanding:
            super().set_demanding(name, demanding)
            self._stale = True

    def pick(self, runnable, now=0.0):
        if self._stale:
            self._reweigh()
        return super().pick(runnable, now)

    def pick_among(self, names, runnable, now=0.0):
        if self._stale:
            self._reweigh()
        return super().pick_among(names, runnable, now)

    def shares(self):
        if self._stale:
            self._reweigh()
        return super().shares()


class Collapsed(FillingPolicy):
    name = "collapsed"
    remembers_usage = True  # history in the level (docs/policies.md, "Fairness with memory")
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

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Weighted DRF over the collapsed weights, incremental (:class:`CollapsedSorter`)."""
        return CollapsedSorter(len(resources), queues, capacity)
