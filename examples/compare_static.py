"""Compare the static allocations of several policies on one scenario (used by `make demo`).

    python examples/compare_static.py SCENARIO POLICY [POLICY ...]

SCENARIO is a scenario file or ``default`` (the bundled DFF Sec. 4.1 cluster). For each
policy it prints every job's dominant share and the utilization of every resource, so
the effect of the policy on the scarce resource (on ``default``: the MIC coprocessors)
shows in one table. A policy that cannot run here is listed with its reason.
"""

from __future__ import annotations

import sys

from fairshare import allocate
from fairshare.cli import load_scenario_argument
from fairshare.model import ScenarioError
from fairshare.policies import UnknownPolicyError
from fairshare.policies.base import PolicyModeError
from fairshare.report.table import fmt_percent, render_table


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        scenario = load_scenario_argument(argv[0])
    except ScenarioError as exc:
        print(exc, file=sys.stderr)
        return 2
    jobs = [job.name for job in scenario.jobs]
    header = ["policy", *jobs, "|", *(f"util {r}" for r in scenario.resources)]
    rows, failed = [], 0
    for policy in argv[1:]:
        try:
            result = allocate(scenario, policy)
        except (PolicyModeError, UnknownPolicyError, NotImplementedError) as exc:
            rows.append([policy, f"(not run: {exc or type(exc).__name__})"] + [""] * (len(header) - 2))
            failed += 1
            continue
        rows.append([policy, *(fmt_percent(result.jobs[j].dominant_share) for j in jobs), "|",
                     *(fmt_percent(u) for u in result.utilization)])
    print("dominant share per job and utilization per resource (static, divisible):")
    print(render_table(header, rows))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
