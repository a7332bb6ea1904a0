"""Conformance checks for policies, runnable on a policy outside this package.

Modelled on scikit-learn's ``check_estimator``: every check is a plain function
``check_xxx(policy_factory)`` raising ``AssertionError`` with a message naming the
policy and what went wrong. The static ones (``conformance.static``) ask for the
policy's static allocation; the online ones (``conformance.online``) drive a fresh
``Engine`` (``conformance.driver``) or the simulator with it. ``check_policy(policy)``
runs every check that applies, honouring the exemptions the policy declares
(``Policy.conformance_exemptions``: run, and required to fail), and returns a
``Report``. ``python -m fairshare.conformance [TARGET ...]`` does the same from the
command line for the registered policies and their declared variants
(``Policy.conformance_variants``), or for ``pkg.mod:ClassName``. docs/architecture.md,
"Writing and checking a new policy".
"""

from fairshare.conformance.online import (check_capacity_never_exceeded, check_empty_cluster_and_empty_queue,
                                          check_gangs_run_whole_and_packed, check_preemption_takes_gangs_whole,
                                          check_priority_order_within_queue,
                                          check_infeasible_demand_reported_not_raised, check_job_weights_respected,
                                          check_no_mutation_and_reusable, check_queue_limits_hold,
                                          check_queue_weights_respected, check_same_seed_same_launches,
                                          check_slot_limit, check_tiny_tasks_reach_the_static_allocation,
                                          has_online_mode)
from fairshare.conformance.static import (NotApplicable, check_capacity_and_contract_shape_discrete,
                                          check_capacity_and_contract_shape_divisible,
                                          check_counts_are_caps_with_respect_counts,
                                          check_deterministic_and_does_not_mutate_the_scenario,
                                          check_discrete_placement_matches_tasks_and_fits_nodes,
                                          check_no_jobs_gives_an_empty_allocation, check_weights_are_respected)
from fairshare.conformance.suite import (CHECKS, ONLINE_CHECKS, STATIC_CHECKS, Check, CheckResult, Planned, Report,
                                         check_policy, plan, run_planned, summary_table)

__all__ = ["CHECKS", "Check", "CheckResult", "NotApplicable", "ONLINE_CHECKS", "Planned", "Report", "STATIC_CHECKS",
           "check_capacity_and_contract_shape_discrete", "check_capacity_and_contract_shape_divisible",
           "check_capacity_never_exceeded", "check_counts_are_caps_with_respect_counts",
           "check_deterministic_and_does_not_mutate_the_scenario",
           "check_discrete_placement_matches_tasks_and_fits_nodes", "check_empty_cluster_and_empty_queue",
           "check_gangs_run_whole_and_packed", "check_preemption_takes_gangs_whole",
           "check_priority_order_within_queue",
           "check_infeasible_demand_reported_not_raised", "check_job_weights_respected",
           "check_no_jobs_gives_an_empty_allocation", "check_no_mutation_and_reusable", "check_policy",
           "check_queue_limits_hold", "check_queue_weights_respected", "check_same_seed_same_launches",
           "check_slot_limit", "check_tiny_tasks_reach_the_static_allocation", "check_weights_are_respected",
           "has_online_mode", "plan", "run_planned", "summary_table"]
