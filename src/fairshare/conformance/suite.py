"""The checks by name, which of them apply to a policy, and ``check_policy``.

A policy's plan (``plan``) is every check of the suite with, for this policy, why it
does not apply (the online checks for a policy with no online mode; the slot limit for
one that declares no slots) or why it must fail (the policy's own
``conformance_exemptions``). ``check_policy`` runs the plan; the tests parametrize over
the same plan, so the command line, the library and pytest run the same checks with
the same exemptions.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from fairshare.conformance import online as online_checks
from fairshare.conformance import static as static_checks
from fairshare.conformance.static import NotApplicable
from fairshare.policies import Policy

PolicyFactory = Callable[[], Policy]
Kind = Literal["static", "online"]


@dataclass(frozen=True)
class Check:
    name: str
    kind: Kind
    run: Callable[[PolicyFactory], None]


STATIC_CHECKS: tuple[Check, ...] = tuple(Check(name, "static", fn) for name, fn in (
    ("allocation capacity, divisible", static_checks.check_capacity_and_contract_shape_divisible),
    ("allocation capacity, discrete", static_checks.check_capacity_and_contract_shape_discrete),
    ("allocation placement", static_checks.check_discrete_placement_matches_tasks_and_fits_nodes),
    ("allocation deterministic", static_checks.check_deterministic_and_does_not_mutate_the_scenario),
    ("allocation no jobs", static_checks.check_no_jobs_gives_an_empty_allocation),
    ("allocation weights", static_checks.check_weights_are_respected),
    ("allocation counts", static_checks.check_counts_are_caps_with_respect_counts),
))
#: the slot limit runs for a policy that declares ``slots_per_node()`` (slot scheduling),
#: whose resource capacity it exempts
SLOT_LIMIT = "slot limit"
ONLINE_CHECKS: tuple[Check, ...] = tuple(Check(name, "online", fn) for name, fn in (
    ("capacity", online_checks.check_capacity_never_exceeded),
    ("queue limits", online_checks.check_queue_limits_hold),
    ("half-life 0 is instantaneous", online_checks.check_half_life_zero_is_instantaneous),
    ("decayed limits", online_checks.check_decayed_limits_hold),
    ("same seed same launches", online_checks.check_same_seed_same_launches),
    ("empty cluster and queue", online_checks.check_empty_cluster_and_empty_queue),
    ("infeasible demand", online_checks.check_infeasible_demand_reported_not_raised),
    ("job weights", online_checks.check_job_weights_respected),
    ("queue weights", online_checks.check_queue_weights_respected),
    ("no mutation, reusable", online_checks.check_no_mutation_and_reusable),
    ("static limit", online_checks.check_tiny_tasks_reach_the_static_allocation),
    ("gangs whole", online_checks.check_gangs_run_whole_and_packed),
    ("preemption takes gangs whole", online_checks.check_preemption_takes_gangs_whole),
    ("priority within queue", online_checks.check_priority_order_within_queue),
    (SLOT_LIMIT, online_checks.check_slot_limit),
))
CHECKS: dict[str, Check] = {check.name: check for check in STATIC_CHECKS + ONLINE_CHECKS}


@dataclass(frozen=True)
class Planned:
    """One check for one policy: ``not_applicable`` (why it is not run) or
    ``exemption`` (why it must fail), or neither."""

    check: Check
    exemption: str | None = None
    not_applicable: str | None = None


def factory_of(policy_or_factory) -> PolicyFactory:
    """A policy class (its default options), a factory, or a policy object: cloned from
    its ``params()`` (scikit-learn's ``clone``), so every check gets a fresh one."""
    if isinstance(policy_or_factory, Policy):
        cls, params = type(policy_or_factory), policy_or_factory.params()
        return lambda: cls(**params)
    if callable(policy_or_factory):
        return policy_or_factory
    raise TypeError(f"not a policy, policy class or factory: {policy_or_factory!r}")


def variant_label(label: str, options: dict) -> str:
    """``hdrf[rescale=False]``: the label of a policy run with ``options``."""
    return label + "".join(f"[{k}={v}]" for k, v in options.items())


def _selected(checks: tuple[Check, ...], which: bool | Iterable[str] | None) -> list[Check]:
    """``None`` or True: all; False: none; else the named ones (of this kind)."""
    if which is None or which is True:
        return list(checks)
    if which is False:
        return []
    names = list(which)
    known = {check.name: check for check in checks}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown {checks[0].kind} check(s) {unknown}; known: {', '.join(known)}")
    return [known[name] for name in names]


def plan(policy: Policy, *, static: bool | Iterable[str] | None = None,
         online: bool | Iterable[str] | None = None) -> list[Planned]:
    """The checks for ``policy``: the static ones, then the online ones, each with its
    exemption or why it does not apply. ``static`` and ``online``: None (every check of
    that kind), False (none), or the names to run."""
    exemptions = type(policy).conformance_exemptions
    has_online = None
    out = []
    for check in _selected(STATIC_CHECKS, static) + _selected(ONLINE_CHECKS, online):
        not_applicable = None
        if check.kind == "online":
            if has_online is None:
                has_online = online_checks.has_online_mode(policy)
            if not has_online:
                not_applicable = f"{policy!r} has no online mode (online() raises PolicyModeError)"
            elif check.name == SLOT_LIMIT and policy.slots_per_node() is None:
                not_applicable = f"{policy!r} declares no slots_per_node() (not slot scheduling)"
        out.append(Planned(check, exemptions.get(check.name), not_applicable))
    return out


PASSED, FAILED, EXEMPTED, STALE, SKIPPED = "passed", "failed", "exempted", "exemption no longer needed", "skipped"
#: the statuses that are not failures
OK = {PASSED, EXEMPTED, SKIPPED}


@dataclass(frozen=True)
class CheckResult:
    policy: str  # the policy's label
    check: str
    status: str  # PASSED, FAILED, EXEMPTED, STALE or SKIPPED
    detail: str = ""  # the failure, the exemption's or the skip's reason
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in OK

    def line(self) -> str:
        """One progress line: the policy, the check, the status and why."""
        why = f": {self.detail}" if self.detail and self.status != PASSED else ""
        return f"{self.policy}  {self.check}  {self.status} ({self.seconds:.1f} s){why}"


def run_planned(planned: Planned, factory: PolicyFactory, label: str) -> CheckResult:
    """Run one planned check: an AssertionError is its failure (expected, when
    exempted); NotApplicable a skip; any other exception a failure, exempted or not (an
    exemption expects the check to fail, not to crash)."""
    name = planned.check.name
    if planned.not_applicable is not None:
        return CheckResult(label, name, SKIPPED, planned.not_applicable)
    start = time.perf_counter()

    def result(status: str, detail: str = "") -> CheckResult:
        return CheckResult(label, name, status, detail, time.perf_counter() - start)

    try:
        planned.check.run(factory)
    except NotApplicable as exc:
        return result(SKIPPED, str(exc))
    except AssertionError as exc:
        return result(EXEMPTED, planned.exemption) if planned.exemption else result(FAILED, str(exc) or repr(exc))
    except Exception as exc:
        return result(FAILED, f"raised {exc!r}")
    if planned.exemption:
        return result(STALE, f"the check passes; remove the exemption ({planned.exemption})")
    return result(PASSED)


@dataclass
class Report:
    """What ``check_policy`` found for one policy."""

    policy: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def counts(self) -> Counter:
        return Counter(r.status for r in self.results)

    def __str__(self) -> str:
        return "\n".join([r.line() for r in self.results] + [summary_table([self])])


def check_policy(policy_or_factory, *, static: bool | Iterable[str] | None = None,
                 online: bool | Iterable[str] | None = None, label: str | None = None,
                 progress: Callable[[CheckResult], None] | None = None) -> Report:
    """Run every applicable conformance check on a policy (scikit-learn's
    ``check_estimator``) and report which passed, failed, were exempted (with the
    policy's reasons) or did not apply.

    ``policy_or_factory``: a ``Policy`` subclass (default options), a policy object
    (cloned from its ``params()`` for each check) or a zero-argument factory.
    ``static``/``online``: None (all), False (none) or check names (``CHECKS``).
    ``progress`` is called with each result as it is known. ``print(report)`` shows
    every check and a summary; ``report.ok`` is False when a check failed or an
    exemption is no longer needed."""
    factory = factory_of(policy_or_factory)
    policy = factory()
    unknown = sorted(set(type(policy).conformance_exemptions) - set(CHECKS))
    report = Report(label or repr(policy))
    # (a misspelt exemption would silently exempt nothing)
    misspelt = [CheckResult(report.policy, name, FAILED, f"exemption for an unknown check; known: {', '.join(CHECKS)}")
                for name in unknown]
    ran = (run_planned(planned, factory, report.policy) for planned in plan(policy, static=static, online=online))
    for got in itertools.chain(misspelt, ran):  # (as each check ends, for ``progress``)
        report.results.append(got)
        if progress is not None:
            progress(got)
    return report


def summary_table(reports: list[Report]) -> str:
    """One row per policy (checks passed, exempted, skipped, failed), then every failure
    with its message."""
    columns = (PASSED, EXEMPTED, SKIPPED, FAILED)
    width = max([len("policy")] + [len(r.policy) for r in reports])
    lines = [f"{'policy':<{width}}  " + "  ".join(f"{c:>8}" for c in columns)]
    for report in reports:
        counts = report.counts()
        failed = sum(n for status, n in counts.items() if status not in OK)
        row = [counts[PASSED], counts[EXEMPTED], counts[SKIPPED], failed]
        lines.append(f"{report.policy:<{width}}  " + "  ".join(f"{n:>8}" for n in row))
    failures = [r for report in reports for r in report.results if not r.ok]
    if failures:
        lines.append("")
        for r in failures:
            why = r.detail if r.status == FAILED else f"{r.status}: {r.detail}"
            lines.append(f"FAILED  {r.policy}  {r.check}: {why}")
    return "\n".join(lines)
