"""``fairshare compare``: several policies on the same scenario, options and seed.

Every run gets the same scenario, the same ``SimOptions`` (so the same seed) and therefore
the same task durations class by class (``sim.durations``: common random numbers), which
makes the differences between the runs the policies' doing. ``comparison`` builds the
``compare.json`` document from the runs' summaries.
"""

from __future__ import annotations

from fairshare.sim.result import SimResult


def comparison(runs: list[tuple[str, SimResult, dict]], *, scenario_name: str) -> dict:
    """The ``compare.json`` document: per policy, the headline numbers of its summary."""
    first = runs[0][1]
    opts = first.options
    table = {}
    for policy, result, summary in runs:
        ct = summary["completion_time"]
        gap = summary.get("fairness_gap")
        table[policy] = {
            "makespan": summary["makespan"],
            "completion_time_mean": ct["mean"],
            "completion_time_p95": ct["p95"],
            "finished_jobs": ct["finished_jobs"],
            "unfinished_jobs": ct["unfinished_jobs"],
            "utilization": dict(summary["utilization"]),
            "starvation": dict(summary["starvation"]),
            "fairness_gap": None if gap is None else {"value": gap["value"], "static_policy": gap["static_policy"],
                                                      "static_policy_reason": gap["static_policy_reason"]},
            "decisions": summary["decisions"],
            "params": dict(result.params),
            "summary": f"{policy}/summary.json",
            "report": f"{policy}/report.html",
        }
    return {
        "scenario": scenario_name,
        "seed": opts.seed,
        "until": opts.until,
        "placement": opts.placement,
        "headroom": opts.headroom,
        "resources": list(first.scenario.resources),
        # (the one static allocation every row's fairness gap is measured against)
        "fairness_reference_policy": runs[0][2].get("fairness_reference_policy"),
        "policies": [p for p, _, _ in runs],
        "results": table,
    }
