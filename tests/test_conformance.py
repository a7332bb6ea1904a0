"""Conformance suite, static checks: every registered policy passes the same checks.

Modelled on scikit-learn's ``estimator_checks`` and the Mesos sorter tests typed over all
sorters: a new policy registered in ``fairshare.policies.REGISTRY`` gets every check of
``fairshare.conformance.static`` without writing a test. Policies without a static
allocation must refuse it with :class:`PolicyModeError` naming themselves, never crash or
return something made up (the check is then skipped). Every policy with an online mode
also runs through test_conformance_online.py; ``python -m fairshare.conformance`` runs
both on a policy anywhere.
"""

from __future__ import annotations

import sys

import pytest
from conformance_cases import param, run

from fairshare.conformance import plan
from fairshare.policies import REGISTRY, make_policy

ALL = sorted(REGISTRY)


def cases():
    for name in ALL:
        for planned in plan(make_policy(name), online=False):
            yield param(name, REGISTRY[name], planned)


@pytest.mark.parametrize("factory, check", list(cases()))
def test_static_conformance(factory, check):
    run(check, factory)


@pytest.mark.parametrize("policy", ALL)
def test_registered_under_its_name_and_cites_its_paper(policy):
    cls = REGISTRY[policy]
    assert cls.name == policy
    assert cls.citation and any(ch.isdigit() for ch in cls.citation), "citation names a section"
    doc = sys.modules[cls.__module__].__doc__ or ""
    assert "Sec." in doc or "Alg." in doc or "baseline" in doc, f"{cls.__module__} docstring must cite the paper"
    make_policy(policy)  # default options construct


@pytest.mark.parametrize("policy", ALL)
def test_unknown_options_are_refused(policy):
    with pytest.raises(ValueError, match=policy):
        make_policy(policy, no_such_option=True)
