"""The package's conformance plan as pytest parameters: one test per (policy, check), an
exemption a strict expected failure with the policy's reason, a refusal a skip."""

from __future__ import annotations

import pytest

from fairshare.conformance import NotApplicable, Planned


def param(label: str, factory, planned: Planned):
    """``{label}-{check}``: the check on ``factory``'s policies, xfail(strict) if exempted."""
    marks = ([pytest.mark.xfail(strict=True, raises=AssertionError, reason=planned.exemption)]
             if planned.exemption else [])
    return pytest.param(factory, planned.check, id=f"{label}-{planned.check.name}", marks=marks)


def run(check, factory) -> None:
    try:
        check.run(factory)
    except NotApplicable as exc:
        pytest.skip(str(exc))
