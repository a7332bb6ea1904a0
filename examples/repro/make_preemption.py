"""Plots and numbers for docs/reproductions/preemption.md (fair-share preemption).

    .venv/bin/python examples/repro/make_preemption.py

Runs examples/preemption.yaml (a long-task tenant and a late tenant) and
examples/repro/preemption_thrash.yaml (indivisible tasks of two sizes) through the
simulator's Python entry point, without preemption, with the loop-free rule and with the
naive rule (no check of what a victim keeps: the comparison the docs call YARN-like),
prints the numbers the doc quotes and writes SVG plots into docs/reproductions/img/.
Deterministic (seed 1; SVGs without a date, fixed id salt). Takes a few seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fairshare.model import load_scenario  # noqa: E402
from fairshare.model.scenario import PreemptionConfig  # noqa: E402
from fairshare.report.plots import step_series  # noqa: E402
from fairshare.sim import SimOptions, simulate  # noqa: E402
from fairshare.sim.metrics import summarize  # noqa: E402
from fairshare.sim.simulator import PREEMPT  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "reproductions" / "img"
plt.rcParams["svg.hashsalt"] = "fairshare-repro-preemption"
plt.rcParams["font.size"] = 9

RUNS = {
    "no preemption": SimOptions(seed=1, track_fair_share=True),
    "loop-free": SimOptions(seed=1, preemption=PreemptionConfig(after=30, tolerance=0.05, max_per_round=4)),
    "naive": SimOptions(seed=1, preemption=PreemptionConfig(after=30, tolerance=0.05, max_per_round=4,
                                                            rule="naive")),
}


def queue_series(result, path: str):
    times, shares = [], []
    for t, kind, entity, _running, share, _alloc in result.rows:
        if kind == "queue" and entity == path:
            times.append(t)
            shares.append(share)
    return times, shares


def run_all(path: Path, policy: str, until: float | None = None):
    sc = load_scenario(path)
    out = {}
    for label, options in RUNS.items():
        if until is not None:
            options = SimOptions(**{**options.__dict__, "until": until})
        result = simulate(sc, policy, options)
        out[label] = (result, summarize(result, fairness_gap=False))
    return out


def plot(runs, path: str, end: float, name: str, title: str) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    for (label, (result, _s)), style in zip(runs.items(), ("-", "--", ":")):
        x, y, _ = step_series(*queue_series(result, path), end)
        ax.step(x, 100 * y, where="post", linestyle=style, label=label)
        marks = sorted({row[0] for row in result.rows if row[1] == PREEMPT})
        if marks and label == "naive":
            ax.plot(marks, [2] * len(marks), "|", color="#c0392b", label="naive: preemptions")
    ax.set_xlim(0, end)
    ax.set_ylim(0, 105)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel(f"queue {path}: dominant share (%)")
    ax.set_title(title)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    IMG.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(IMG / name, format="svg", metadata={"Date": None})
    plt.close(fig)


def table(runs, late_job: str, long_job: str, late_queue: str) -> None:
    print(f"| run | {late_job} starts (s) | {late_queue} below fair share (s) | tasks preempted | "
          f"work lost (task-s) | {long_job} finishes (s) | makespan (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, (_r, s) in runs.items():
        jobs = s["jobs"]
        fin = jobs[long_job]["finish"]
        print(f"| {label} | {jobs[late_job]['start']:.0f} | "
              f"{s['queues'][late_queue].get('time_below_fair_share', float('nan')):.0f} | "
              f"{s.get('preemptions', 0)} | {s.get('work_lost', 0.0):.0f} | "
              f"{'-' if fin is None else f'{fin:.0f}'} | {s['makespan']:.0f} |")


def main() -> None:
    late = run_all(ROOT / "examples" / "preemption.yaml", "hdrf")
    print("## long-task tenant vs late tenant (examples/preemption.yaml, hdrf)")
    table(late, "queries", "training", "product")
    plot(late, "product", 5600, "preemption_late_tenant.svg",
         "Late tenant (product): its share without and with preemption")
    thrash = run_all(ROOT / "examples" / "repro" / "preemption_thrash.yaml", "hdrf", until=1200)
    print("\n## two task sizes (examples/repro/preemption_thrash.yaml, hdrf, until 1200 s)")
    table(thrash, "small", "big", "b")
    for label, (_r, s) in thrash.items():
        by_job = {name: j.get("tasks_preempted") for name, j in s["jobs"].items()}
        print(f"  {label}: tasks preempted per job {by_job}")
    plot(thrash, "a", 1200, "preemption_thrash.svg", "Queue a's share: the naive rule takes the node back and forth")


if __name__ == "__main__":
    sys.exit(main())
