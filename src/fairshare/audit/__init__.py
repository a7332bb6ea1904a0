"""Audit a policy's static allocation against the papers' fairness properties.

``audit(scenario, policy)`` computes the policy's static allocation (as ``fairshare
allocate`` does) and checks sharing incentive, envy-freeness, Pareto efficiency,
bottleneck fairness, strategy-proofness, the hierarchical share guarantee and population
monotonicity on it (contract: ``fairshare audit``). The definitions, how each is read for
weights, hierarchy, multiclass jobs and task counts, and the tolerance are in
:mod:`fairshare.audit.properties`.
"""

from __future__ import annotations

from collections.abc import Iterable

from fairshare.audit.properties import CHECKS, RTOL, AuditContext, exceeds, hierarchical_guarantees
from fairshare.audit.report import ALL_PROPERTY_NAMES, PROPERTY_NAMES, AuditReport, PropertyResult
from fairshare.model.scenario import Scenario
from fairshare.policies import make_policy
from fairshare.policies.base import Policy


def audit(scenario: Scenario, policy: str | Policy, *, respect_counts: bool = False, discrete: bool = False,
          max_jobs_searched: int = 20, properties: Iterable[str] | None = None) -> AuditReport:
    """Check ``policy``'s static allocation on ``scenario`` against the papers' properties.

    ``max_jobs_searched`` bounds the two searches (strategy-proofness: misreports of that
    many jobs; population monotonicity: removing each of that many jobs), chosen
    deterministically (all jobs if few, else the first by name). ``properties`` restricts
    the audit to some of :data:`PROPERTY_NAMES` (default: all, in the contract's order;
    ``guarantees_and_limits`` only when some queue has a guarantee or a limit).
    Raises :class:`~fairshare.policies.base.PolicyModeError` when the policy has no
    static allocation in the mode asked.
    """
    pol = make_policy(policy) if isinstance(policy, str) else policy
    if properties is None:
        # the contract's seven, and guarantees_and_limits where the scenario has bounds
        # (an unbounded scenario's report stays exactly the contract's shape)
        wanted = list(PROPERTY_NAMES) + (["guarantees_and_limits"] if scenario.queues.bounded else [])
    else:
        wanted = list(properties)
    unknown = [p for p in wanted if p not in CHECKS]
    if unknown:
        raise ValueError(f"unknown properties {unknown}; known: {', '.join(ALL_PROPERTY_NAMES)}")
    if discrete:
        allocation = pol.allocate_discrete(scenario, respect_counts=respect_counts)
    else:
        allocation = pol.allocate(scenario, respect_counts=respect_counts)
    ctx = AuditContext(scenario, pol, respect_counts, discrete, max_jobs_searched, allocation)
    results = {name: CHECKS[name](ctx) for name in ALL_PROPERTY_NAMES if name in wanted}
    return AuditReport(pol.name, allocation.mode, respect_counts, results)


__all__ = ["audit", "AuditReport", "PropertyResult", "PROPERTY_NAMES", "ALL_PROPERTY_NAMES", "RTOL", "exceeds",
           "hierarchical_guarantees"]
