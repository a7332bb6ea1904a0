"""Library entry points: look up policies and compute static allocations."""

from __future__ import annotations

import dataclasses

from fairshare.model.allocation import Allocation
from fairshare.model.scenario import Scenario
from fairshare.policies import REGISTRY, UnknownPolicyError, make_policy
from fairshare.policies.base import Policy, refuse_usage


def policy_names() -> list[str]:
    return list(REGISTRY)


def get_policy(name: str, **options) -> Policy:
    return make_policy(name, **options)


def allocate(scenario: Scenario, policy: str | Policy, *, discrete: bool = False,
             respect_counts: bool = False, **options) -> Allocation:
    """The static allocation of ``policy`` on ``scenario`` (contract: ``fairshare allocate``).

    Divisible (fluid tasks on the pooled capacity) by default; ``discrete=True`` places
    whole tasks on the nodes. Raises :class:`~fairshare.policies.base.PolicyModeError`
    when the policy has no meaning in that mode or cannot take the scenario's past usage
    (``usage:``), and :class:`UnknownPolicyError` for an unknown name.
    """
    pol = make_policy(policy, **options) if isinstance(policy, str) else policy
    refuse_usage(scenario, pol)
    if discrete:
        result = pol.allocate_discrete(scenario, respect_counts=respect_counts)
    else:
        result = pol.allocate(scenario, respect_counts=respect_counts)
    if scenario.queues.bounded and not pol.honours_queue_bounds:
        note = f"policy {pol.name!r} does not model queue guarantees and limits; they were ignored"
        result = dataclasses.replace(result, notes=result.notes + (note,))
    if scenario.usage is not None:  # (what the entitlement was computed from: allocate JSON past_usage)
        result = dataclasses.replace(result, past_usage=scenario.usage.for_report(scenario.jobs, scenario.queues,
                                                                                  scenario.m))
    return result


__all__ = ["allocate", "get_policy", "policy_names", "UnknownPolicyError"]
