"""Policies defined only online, by the order in which whole tasks start over time.

``slots`` is the hierarchical slot scheduler (Hadoop Fair Scheduler; DRF Sec. 7.2, H-DRF
Sec. 5.3), which counts slots per node and oversubscribes nodes when tasks outgrow
them: its effects only exist when tasks run on nodes over time.

It is registered so its name is known; ``fairshare allocate`` and ``audit`` refuse it
with exit status 2 and say so. (``timefair``, Tan et al. Sec. 5, is the other policy
with no static allocation; it has its own module, ``policies/timefair.py``.)
"""

from __future__ import annotations

from fairshare.policies.base import Policy, PolicyModeError, PolicyOption
from fairshare.policies.hdrf import hdrf_share
from fairshare.policies.hdrf_online import HDRFSorter
from fairshare.policies.machinery.reference import ShareRule


class _OnlineOnly(Policy):
    reason = ""

    def allocate(self, scenario, *, respect_counts=False):
        raise PolicyModeError(f"policy {self.name!r} has no static allocation: {self.reason}")

    def allocate_discrete(self, scenario, *, respect_counts=False):
        return self.allocate(scenario, respect_counts=respect_counts)


class SlotsRule(ShareRule):
    """Hierarchical max-min on running tasks: a node's share is its running tasks over the
    cluster's slots, divided by its weight (resources do not count)."""

    def __init__(self, slots_total: int):
        self.slots_total = max(1, slots_total)

    def leaf_share(self, sorter, job, state):
        return job.running / self.slots_total / job.weight

    def node_share(self, sorter, key, state):
        return state.running[key] / self.slots_total / sorter.queues[key].weight


_ONE_SLOT = (1.0,)


class SlotsSorter(HDRFSorter):
    """Online slot fair sharing, incremental: the slot rule is naive H-DRF (no rescaling,
    blocked nodes count) on one resource, *slots*, of which every task takes one and the
    cluster has ``slots_total``: a node's share ``max_r U_r / R_r / w`` is then its running
    tasks over the slots over its weight, :class:`SlotsRule`'s formula with the same
    operations in the same order, so the tree sorter of ``hdrf_online`` decides exactly
    as the reference (tests/test_online_parity.py), updating one path per start or finish
    instead of every node per decision. Real demands, capacities and saturated resources
    do not enter the slot rule (the reference's ``slots_total`` is fixed when the
    scheduler is built, and so is this one's)."""

    def __init__(self, queues, slots_total: int):
        super().__init__(1, queues, (float(max(1, slots_total)),), share=hdrf_share, rescale=False,
                         ignore_blocked=False)

    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, _ONE_SLOT)

    def allocated(self, name, demand, now=0.0):
        super().allocated(name, _ONE_SLOT, now)

    def released(self, name, demand, now=0.0):
        super().released(name, _ONE_SLOT, now)

    def set_capacity(self, capacity):
        """Slots do not follow the resources (see the class doc)."""

    def set_saturated(self, resources):
        """No resource saturates in the slot rule."""


class Slots(_OnlineOnly):
    name = "slots"
    citation = "Ghodsi et al. NSDI'11 Sec. 7.2; Bhattacharya et al. SoCC'13 Sec. 5.3 (hierarchical slot fair sharing)"
    hierarchical = True
    reason = "slot scheduling and its over-subscription exist only for tasks running on nodes (use `fairshare simulate`)"
    options = (PolicyOption("slots", "--slots", "slots per node", value="positive_int", metavar="N"),)
    conformance_variants = ({"slots": 2},)
    conformance_exemptions = {
        "capacity": "slot scheduling counts tasks, not resources, and oversubscribes nodes by design "
                    "(DRF Sec. 7.2, H-DRF Sec. 5.3); the slot limit check holds it to its own invariant",
        "static limit": "no static allocation: slot scheduling exists only for tasks running on nodes",
        "infeasible demand": "slot scheduling ignores task sizes by design: any task fits in a free slot, "
                             "however big (it oversubscribes the node instead)",
    }

    def __init__(self, slots: int = 4):
        self.slots = slots

    def params(self):
        return {"slots": self.slots}

    def slots_per_node(self) -> int | None:
        return self.slots

    def share_rule(self, resources, *, slots_total=1):
        return SlotsRule(slots_total)

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Hierarchical slot max-min, incremental (:class:`SlotsSorter`)."""
        return SlotsSorter(queues, slots_total)
