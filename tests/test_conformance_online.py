"""Online conformance suite: every policy with an online mode passes the same checks.

The static suite (tests/test_conformance.py) skips the policies that have no static
allocation, so an online-only policy would pass it vacuously. This one is generated from
``fairshare.policies.REGISTRY``: every registered policy whose ``online(...)`` does not
raise ``PolicyModeError`` (and each of its declared ``conformance_variants``) is run
through every online check of ``fairshare.conformance`` (scikit-learn's
``check_estimator`` style), so a new policy gets them all without writing a test.

A check that does not apply to a policy is exempted by the policy itself
(``conformance_exemptions``: check name -> reason). An exemption is not a skip: the
check still runs and must fail (``xfail(strict=True)``), so an exemption that is no
longer needed (the policy now passes) fails the suite until the entry is removed. One
check is selected by what the policy declares rather than exempted: the slot limit runs
for the policies that declare ``slots_per_node()`` (slot scheduling), whose resource
capacity is exempted.
"""

from __future__ import annotations

import pytest
from conformance_cases import param, run

from fairshare.conformance import CHECKS, has_online_mode, plan
from fairshare.conformance.suite import variant_label
from fairshare.policies import REGISTRY, make_policy

ONLINE = [name for name in sorted(REGISTRY) if has_online_mode(make_policy(name))]


def variants() -> list[tuple[str, dict]]:
    return [(name, options) for name in ONLINE for options in ({},) + REGISTRY[name].conformance_variants]


def cases():
    for name, options in variants():
        for planned in plan(make_policy(name, **options), static=False):
            if planned.not_applicable is None:  # (the slot limit, for a policy without slots)
                yield param(variant_label(name, options), lambda name=name, options=options:
                            make_policy(name, **options), planned)


@pytest.mark.parametrize("factory, check", list(cases()))
def test_online_conformance(factory, check):
    run(check, factory)


def test_the_registry_split_is_as_documented():
    # docs/architecture.md: ceei and slowdown are static-only; everything else has an
    # online mode and so runs through this suite
    assert set(REGISTRY) - set(ONLINE) == {"ceei", "slowdown"}
    assert not any(REGISTRY[name].conformance_variants for name in set(REGISTRY) - set(ONLINE)), \
        "a variant names a policy with no online mode"
    for name, options in variants():
        make_policy(name, **options)  # every variant's options construct


def test_every_exemption_names_a_check_it_runs_with_a_reason():
    # the queue-weights exemptions are exactly the policies that declare themselves flat,
    # and Fair Tree, which weighs queues by past usage, not by what runs now (its reason)
    flat = {name for name in ONLINE if not REGISTRY[name].hierarchical}
    assert {name for name in ONLINE if "queue weights" in REGISTRY[name].conformance_exemptions} == \
        flat | {"slurm-fairtree"}
    for name, cls in REGISTRY.items():
        for check_name, reason in cls.conformance_exemptions.items():
            assert check_name in CHECKS, f"{name}: exemption for unknown check {check_name!r}"
            assert CHECKS[check_name].kind == "static" or name in ONLINE, \
                f"{name}: exemption for the online check {check_name!r}, and no online mode"
            assert len(reason) > 20, f"exemption ({name}, {check_name}) needs a reason"
