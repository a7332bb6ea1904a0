"""Policies defined only online, by the order in which whole tasks start over time.

``timefair`` is Tan et al.'s time-averaged (l, epsilon)-fairness (Sec. 5): its indicator
C_i(t) integrates slowdowns over a window of past time, so a static allocation has no
meaning for it (as l -> 0 with divisible jobs it reduces to DRF, Tan Sec. 5).
``slots`` is the hierarchical slot scheduler (Hadoop Fair Scheduler; DRF Sec. 7.2, H-DRF
Sec. 5.3), which counts slots per node and oversubscribes nodes when tasks outgrow
them: its effects only exist when tasks run on nodes over time.

Both are registered so their names are known; ``fairshare allocate`` and ``audit``
refuse them with exit status 2 and say so. The online implementations come with the
simulator (``fairshare simulate``).
"""

from __future__ import annotations

from fairshare.policies.base import Policy, PolicyModeError


class _OnlineOnly(Policy):
    reason = ""

    def allocate(self, scenario, *, respect_counts=False):
        raise PolicyModeError(f"policy {self.name!r} has no static allocation: {self.reason}")

    def allocate_discrete(self, scenario, *, respect_counts=False):
        return self.allocate(scenario, respect_counts=respect_counts)


class TimeFair(_OnlineOnly):
    name = "timefair"
    citation = "Tan et al., Sec. 5 (time-averaged (l, epsilon)-fairness, relaxed candidate set S(t, p))"
    reason = ("its fairness is a time average over a window of a simulated run "
              "(use `fairshare simulate`); with divisible tasks and l -> 0 it equals drf (Tan Sec. 5)")

    def __init__(self, window: float = 100.0, relax: float = 0.1):
        self.window = window
        self.relax = relax

    def params(self):
        return {"window": self.window, "relax": self.relax}


class Slots(_OnlineOnly):
    name = "slots"
    citation = "Ghodsi et al. NSDI'11 Sec. 7.2; Bhattacharya et al. SoCC'13 Sec. 5.3 (hierarchical slot fair sharing)"
    hierarchical = True
    reason = "slot scheduling and its over-subscription exist only for tasks running on nodes (use `fairshare simulate`)"

    def __init__(self, slots: int = 4):
        self.slots = slots

    def params(self):
        return {"slots": self.slots}
