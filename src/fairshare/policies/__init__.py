"""The policy registry: one module per policy, registered here by name, explicitly.

``REGISTRY`` maps each ``--policy`` name of the contract to its class; options are the
class's constructor arguments (scikit-learn's convention).
"""

from __future__ import annotations

from fairshare.policies.asset import AssetFairness
from fairshare.policies.base import Policy, PolicyModeError
from fairshare.policies.ceei import CEEI
from fairshare.policies.collapsed import Collapsed
from fairshare.policies.cpu import SingleResourceFair
from fairshare.policies.dff import DFF
from fairshare.policies.drf import DRF
from fairshare.policies.fifo import FIFO
from fairshare.policies.hdrf import HDRF
from fairshare.policies.kueue import Kueue
from fairshare.policies.naive import CapacityScheduler, NaiveHDRF
from fairshare.policies.slots import Slots
from fairshare.policies.slowdown import Slowdown
from fairshare.policies.slurm_fairtree import SlurmFairTree
from fairshare.policies.timefair import TimeFair
from fairshare.policies.yarn_fair import YarnFair

REGISTRY: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (DRF, AssetFairness, CEEI, HDRF, NaiveHDRF, CapacityScheduler, Collapsed, DFF,
                Slowdown, TimeFair, Slots, SingleResourceFair, FIFO,
                # the peer baselines (docs/policies.md, "Peer baselines")
                YarnFair, Kueue, SlurmFairTree)
}


class UnknownPolicyError(ValueError):
    pass


def unknown_policy(name: str) -> str:
    """Why ``name`` is refused: the known policies, and the closest one when ``name`` looks
    like a typo of it: ``unknown policy 'hdfr' (did you mean 'hdrf'?); known policies: ...``."""
    import difflib

    close = difflib.get_close_matches(name, REGISTRY, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown policy {name!r}{hint}; known policies: {', '.join(REGISTRY)}"


def make_policy(name: str, **options) -> Policy:
    """Instantiate a registered policy; options the policy does not take are an error."""
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise UnknownPolicyError(unknown_policy(name)) from None
    try:
        return cls(**options)
    except TypeError as exc:
        raise UnknownPolicyError(f"policy {name!r} does not take options {sorted(options)}: {exc}") from None


__all__ = ["REGISTRY", "Policy", "PolicyModeError", "UnknownPolicyError", "make_policy"]
