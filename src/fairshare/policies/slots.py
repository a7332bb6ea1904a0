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


class Slots(_OnlineOnly):
    name = "slots"
    citation = "Ghodsi et al. NSDI'11 Sec. 7.2; Bhattacharya et al. SoCC'13 Sec. 5.3 (hierarchical slot fair sharing)"
    hierarchical = True
    reason = "slot scheduling and its over-subscription exist only for tasks running on nodes (use `fairshare simulate`)"
    options = (PolicyOption("slots", "--slots", "slots per node", value="positive_int", metavar="N"),)

    def __init__(self, slots: int = 4):
        self.slots = slots

    def params(self):
        return {"slots": self.slots}

    def slots_per_node(self) -> int | None:
        return self.slots

    def share_rule(self, resources, *, slots_total=1):
        return SlotsRule(slots_total)
