"""Placeholder replaced by the slowdown implementation (work in progress)."""
from fairshare.policies.base import Policy


class Slowdown(Policy):
    name = "slowdown"
    citation = "Tan et al., Sec. 3-4"

    def allocate(self, scenario, *, respect_counts=False):
        raise NotImplementedError
