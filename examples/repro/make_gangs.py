"""Numbers and the plot for docs/reproductions/gangs.md (a gang behind small jobs).

    .venv/bin/python examples/repro/make_gangs.py

Runs examples/repro/gangs_starvation.yaml (a 16-task gang arriving behind a stream of
small jobs) through the simulator's Python entry point under hdrf: without a
reservation, and with ``gangs: {reserve_after: S}`` for a few S, each with backfill (the
simulator's default: it knows durations) and without (what ``fairshare serve`` does: it
knows none). Prints the table the doc quotes and writes docs/reproductions/img/gangs.svg.
Deterministic (seed 1; SVG without a date, fixed id salt). Takes a few seconds.
``tests/test_reproductions_gangs.py`` checks the relations the doc claims from these runs.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from fairshare.model import load_scenario
from fairshare.model.scenario import GangsConfig
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, Simulator
from fairshare.sim.metrics import summarize

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "examples" / "repro" / "gangs_starvation.yaml"
IMG = ROOT / "docs" / "reproductions" / "img"
POLICY = "hdrf"
GANG = "train"
#: the reserve_after values compared (seconds)
RESERVE_AFTER = (0, 120, 300)


@dataclasses.dataclass(frozen=True)
class Run:
    label: str
    reserve_after: float | None
    backfill: bool
    summary: dict
    #: (time, CPUs allocated) of the cluster
    cluster: list[tuple[float, float]]
    #: when the gang's reservation was made, and its shadow time (None: no reservation)
    reserved: tuple[float, float | None] | None

    @property
    def gang_wait(self) -> float:
        return self.summary["jobs"][GANG]["gang_wait"]

    @property
    def reserved_idle(self) -> float:
        return self.summary.get("reserved_idle", {}).get("cpu", 0.0)

    @property
    def utilization(self) -> float:
        return self.summary["utilization"]["cpu"]


def longest_other_task(scenario) -> float:
    """D_max of the bound (docs/policies.md): the longest task of the jobs other than the
    gang (the tasks that can run while it waits), from the scenario's durations."""
    longest = 0.0
    for job in scenario.jobs:
        if job.name == GANG:
            continue
        for cls in job.classes:
            params = dict(cls.duration.params)
            longest = max(longest, float(params.get("high", params.get("value", 0.0))))
    return longest


def run(reserve_after: float | None, backfill: bool) -> Run:
    scenario = load_scenario(SCENARIO)
    if reserve_after is not None:
        scenario = dataclasses.replace(scenario, gangs=GangsConfig(reserve_after))
    sim = Simulator(scenario, make_policy(POLICY), SimOptions(seed=1))
    if not backfill:
        sim.scheduler.reserve.next_duration = None  # (serve's view: no duration known ahead)
    result = sim.run()
    cluster = [(t, alloc[0]) for t, kind, entity, _n, _share, alloc in result.rows
               if kind == "cluster"]
    if reserve_after is None:
        label = "no reservation"
    else:
        label = f"reserve_after {reserve_after:g}" + ("" if backfill else ", no backfill")
    history = [] if sim.scheduler.reserve is None else sim.scheduler.reserve.history
    reserved = next(((at, shadow) for name, at, shadow in history if name == GANG), None)
    return Run(label, reserve_after, backfill, summarize(result, fairness_gap=False), cluster, reserved)


def all_runs() -> list[Run]:
    runs = [run(None, True)]
    for after in RESERVE_AFTER:
        runs += [run(after, True), run(after, False)]
    return runs


def table(runs: list[Run], longest: float) -> None:
    print(f"| run | gang wait (s) | bound reserve_after + {longest:g} (s) | reserved idle (CPU-s) | "
          f"CPU utilization | makespan (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in runs:
        bound = "-" if r.reserve_after is None else f"{r.reserve_after + longest:.0f}"
        print(f"| {r.label} | {r.gang_wait:.0f} | {bound} | {r.reserved_idle:.0f} | "
              f"{100 * r.utilization:.2f}% | {r.summary['makespan']:.0f} |")


def plot(runs: list[Run], longest: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "fairshare-repro-gangs"
    plt.rcParams["font.size"] = 9
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.2), gridspec_kw={"width_ratios": [3, 2]})
    shown = [r for r in runs if r.reserve_after in (None, 0)]
    for r, style in zip(shown, ("-", "--", ":")):
        xs = [t for t, _c in r.cluster]
        ys = [c for _t, c in r.cluster]
        left.step(xs, ys, where="post", linestyle=style, label=r.label)
        start = r.summary["jobs"][GANG]["start"]
        left.axvline(start, linestyle=style, linewidth=0.8, color=left.lines[-1].get_color())
    left.set_xlim(0, 2600)
    left.set_ylim(0, 34)
    left.set_xlabel("simulated time (s); vertical lines: the gang starts")
    left.set_ylabel("CPUs in use (of 32)")
    left.set_title("Cluster CPUs in use")
    left.legend(loc="lower left", fontsize=8)
    labels = [r.label.replace("reserve_after ", "ra ").replace(", no backfill", "\nno backfill") for r in runs]
    xs = range(len(runs))
    right.bar(xs, [r.gang_wait for r in runs], color=["#c0392b"] + ["#2c7fb8"] * (len(runs) - 1))
    for x, r in zip(xs, runs):
        if r.reserve_after is not None:
            right.plot([x - 0.4, x + 0.4], [r.reserve_after + longest] * 2, color="black", linewidth=1)
    right.set_xticks(list(xs), labels, rotation=60, ha="right", fontsize=7)
    right.set_ylabel("gang wait (s)")
    right.set_title(f"Gang wait; black: reserve_after + {longest:g} s")
    IMG.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(IMG / "gangs.svg", format="svg", metadata={"Date": None})
    plt.close(fig)


def main() -> None:
    runs = all_runs()
    longest = longest_other_task(load_scenario(SCENARIO))
    print(f"## a 16-task gang behind small jobs ({SCENARIO.relative_to(ROOT)}, {POLICY}, seed 1)")
    table(runs, longest)
    for r in runs[1:]:
        at, shadow = r.reserved
        print(f"  {r.label}: reserved at {at:.0f} s, shadow time {shadow:.0f} s, "
              f"gang starts {r.summary['jobs'][GANG]['start']:.0f} s")
    plot(runs, longest)


if __name__ == "__main__":
    sys.exit(main())
