"""Placeholder replaced by the CEEI implementation (work in progress)."""
from fairshare.policies.base import Policy


class CEEI(Policy):
    name = "ceei"
    citation = "Ghodsi et al. NSDI'11, Sec. 5.2"

    def allocate(self, scenario, *, respect_counts=False):
        raise NotImplementedError
