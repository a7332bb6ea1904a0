"""The fairness properties of the papers, checked on one policy's static allocation.

Sources: Ghodsi et al., "Dominant Resource Fairness", NSDI 2011 (DRF) Sec. 3 (the
properties), Sec. 6 / Table 2 (which policy has which), Theorems 1, 2, 4, 5 (the
counter-examples), Appendix A (DRF's proofs); Bhattacharya et al., "Hierarchical
Scheduling for Diverse Datacenter Workloads", SoCC 2013 (H-DRF) Sec. 2.1 and 4.1
(hierarchical share guarantee), Sec. 4.3 (population monotonicity, Fig. 6/7).

Common readings
---------------
* **Utility.** A job's utility is its number of tasks: ``JobAllocation.tasks``, i.e.
  composite tasks for a fixed-mix multiclass job (one composite task holds the class
  demands weighted by ``Job.class_mix``, so a job's composite demand ``d_i`` stands for
  it everywhere below). With ``respect_counts`` a job's tasks are capped at its total
  count ``cap_i``; a job whose count is met has no further demand ("capped") and is
  exempt from every "it should get more" check. Without it, ``cap_i = inf``.
* **Chosen mixes.** A policy that picks a multiclass job's class mix itself (``slowdown``,
  Tan et al. Sec. 4) reports tasks at its own mix; there (divisible mode) the job's
  ``d_i`` in every formula below is its per-task average at that mix, ``allocation /
  tasks``, so utility is still tasks, at the mix the policy chose. Lies are still told
  about the declared classes.
* **Entitlement** ``e_i`` (the job's "own partition"). Flat policies
  (``policy.hierarchical`` False): ``e_i = w_i / sum_j w_j`` over all jobs (weighted DRF,
  Sec. 4.3). Hierarchical policies: the product along the job's path of
  ``w_node / sum(w of its demanding siblings)``, a sibling being demanding when it has
  at least one job below it (H-DRF Sec. 2.1; the weights ``collapsed`` uses). A job
  capped by its count still counts as a demanding sibling (it had demand when the
  scenario started), which makes the guarantees conservative: redistributing a capped
  sibling's unused entitlement would need a multi-resource water-fill we do not attempt.
* **Tolerance.** Every comparison goes through :func:`exceeds`: ``a`` exceeds ``b`` when
  ``a > b + RTOL * max(|a|, |b|, unit)``, ``RTOL = 1e-7``. ``unit`` is the natural size
  of the quantity: for a job's tasks, the tasks it could run alone on the whole pooled
  cluster (so a starved job's float noise is not a violation); for shares, 1; for an
  amount of resource r, ``C_r``.
* **Discrete mode** (``discrete=True``): whole tasks on the nodes. DRF only promises to
  be within one task of the divisible allocation there (DRF Sec. 6.2, Thm 7), so the
  bounds are on whole tasks: a partition is ``e_i`` of every node and holds
  ``sum_nodes floor(min_r e_i C_nr / d_ir)`` tasks; a bundle is worth the whole tasks
  that fit in it; a share is met when one more task of the node would reach it.

The properties
--------------
One module each, in the contract's order (:data:`CHECKS`); each module's docstring gives
the definition and how it is read, citing its paper and section:

* :mod:`~fairshare.audit.properties.sharing_incentive` (DRF Sec. 3)
* :mod:`~fairshare.audit.properties.envy_freeness` (DRF Sec. 3, Thm 11)
* :mod:`~fairshare.audit.properties.pareto_efficiency` (DRF Sec. 3, Thm 9)
* :mod:`~fairshare.audit.properties.bottleneck_fairness` (DRF Sec. 3, Thm 10)
* :mod:`~fairshare.audit.properties.strategy_proofness` (DRF Sec. 3, Thm 12; Thm 4)
* :mod:`~fairshare.audit.properties.hierarchical_share_guarantee` (H-DRF Sec. 2.1, Thm 2)
* :mod:`~fairshare.audit.properties.population_monotonicity` (DRF Sec. 3, Thm 5, 14; H-DRF Sec. 4.3)
* :mod:`~fairshare.audit.properties.guarantees_and_limits` (docs/policies.md; fairshare's
  extension, reported only where a queue has a guarantee or a limit)

Beside them, :mod:`~fairshare.audit.properties.context` holds what every check reads (the
tolerance, :class:`AuditContext`, the task counts) and
:mod:`~fairshare.audit.properties.wording` the numbers and phrases of their details.

A policy without a static allocation in the mode asked raises
:class:`~fairshare.policies.base.PolicyModeError`, which propagates.
"""

from __future__ import annotations

from collections.abc import Callable

from fairshare.audit.properties.bottleneck_fairness import (bottleneck_shares, check_bottleneck_fairness,
                                                          common_bottleneck, waterfill)
from fairshare.audit.properties.context import (RTOL, AuditContext, exceeds, hierarchical_guarantees, node_bundles,
                                               tasks_in, whole)
from fairshare.audit.properties.envy_freeness import check_envy_freeness
from fairshare.audit.properties.guarantees_and_limits import check_guarantees_and_limits
from fairshare.audit.properties.hierarchical_share_guarantee import check_hierarchical_share_guarantee
from fairshare.audit.properties.pareto_efficiency import check_pareto_efficiency
from fairshare.audit.properties.population_monotonicity import check_population_monotonicity
from fairshare.audit.properties.sharing_incentive import check_sharing_incentive
from fairshare.audit.properties.strategy_proofness import (SCALE_FACTORS, TOWARD_DOMINANT, UNUSED_SHARES,
                                                         check_strategy_proofness, lie, misreports)
from fairshare.audit.report import PropertyResult

#: property name -> its check, in the contract's order (then fairshare's extension)
CHECKS: dict[str, Callable[[AuditContext], PropertyResult]] = {
    "sharing_incentive": check_sharing_incentive,
    "envy_freeness": check_envy_freeness,
    "pareto_efficiency": check_pareto_efficiency,
    "bottleneck_fairness": check_bottleneck_fairness,
    "strategy_proofness": check_strategy_proofness,
    "hierarchical_share_guarantee": check_hierarchical_share_guarantee,
    "population_monotonicity": check_population_monotonicity,
    "guarantees_and_limits": check_guarantees_and_limits,
}

__all__ = ["CHECKS", "RTOL", "AuditContext", "exceeds", "hierarchical_guarantees", "tasks_in", "whole",
           "node_bundles", "check_sharing_incentive", "check_envy_freeness", "check_pareto_efficiency",
           "common_bottleneck", "waterfill", "bottleneck_shares", "check_bottleneck_fairness", "SCALE_FACTORS",
           "UNUSED_SHARES", "TOWARD_DOMINANT", "misreports", "lie", "check_strategy_proofness",
           "check_hierarchical_share_guarantee", "check_population_monotonicity", "check_guarantees_and_limits"]
