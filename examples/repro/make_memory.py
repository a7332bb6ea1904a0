"""Plots and numbers for docs/reproductions/memory.md (fairness with memory, issue 22).

    .venv/bin/python examples/repro/make_memory.py

(a) kueue#9734's case (examples/repro/memory_idle_team.yaml and _jobs.yaml): team a has
    the cluster for six days, team b submits on day seven; hdrf and drf with half-lives
    0, 1 day and 3 days. (b) week-long tasks against a half-life of two days
    (examples/repro/memory_weekly_tasks.yaml), usage charged as it accrues (the
    simulator's ledger) against charged when a task ends (``ChargeAtEndLedger`` below,
    installed in the sorter for the comparison only). (c) Tan's time-averaged window
    (``timefair``) against half-life decay on (a)'s scenarios.

Prints every number the doc quotes and writes SVG plots into docs/reproductions/img/.
Deterministic (fixed durations; SVGs without a date, fixed id salt). Takes ~10 s.
tests/test_reproductions_memory.py checks the relations the doc states from these runs.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fairshare.model import load_scenario  # noqa: E402
from fairshare.model.scenario import FairnessConfig, Scenario  # noqa: E402
from fairshare.policies import make_policy  # noqa: E402
from fairshare.policies.machinery.decay import LN2, DecayLedger  # noqa: E402
from fairshare.sim import SimOptions  # noqa: E402
from fairshare.sim.metrics import summarize  # noqa: E402
from fairshare.sim.simulator import Simulator  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "examples" / "repro"
IMG = ROOT / "docs" / "reproductions" / "img"
plt.rcParams["svg.hashsalt"] = "fairshare-repro-memory"
plt.rcParams["font.size"] = 9

DAY = 86400.0
HOUR = 3600.0
IDLE_TEAM = HERE / "memory_idle_team.yaml"
IDLE_TEAM_JOBS = HERE / "memory_idle_team_jobs.yaml"
WEEKLY = HERE / "memory_weekly_tasks.yaml"
ARRIVAL = 6 * DAY  # b submits at the start of day seven
UNTIL_A = 10 * DAY
UNTIL_B = 28 * DAY
HALF_LIVES = (0.0, 1 * DAY, 3 * DAY)
WINDOWS = (1 * DAY, 3 * DAY)


class ChargeAtEndLedger(DecayLedger):
    """The accounting long tasks can game: a task's usage is charged, in one lump, when it
    ends (what it accrued, decayed to then), and nothing while it runs. Tasks of a job end
    in the order they started (true of the fixed durations used here), so a release takes
    the oldest starts first. For the comparison in (b) only."""

    def __init__(self, half_life: float, m: int):
        super().__init__(half_life, m)
        self.starts: dict[str, list[list]] = {}  # name -> [[start time, amount vector], ...]
        self.held: dict[str, list[float]] = {}  # name -> its allocation (the entry's accrues nothing)

    def charge(self, name: str, t: float, alloc) -> None:
        if self.origin is None:
            self.origin = t
        entry = self.entries.get(name)
        before = self.held.get(name, [0.0] * self.m)
        usage = [0.0] * self.m if entry is None else self._decayed(name, entry, t)
        starts = self.starts.setdefault(name, [])
        delta = [a - b for a, b in zip(alloc, before)]
        if any(d > 0 for d in delta):
            starts.append([t, delta])
        elif any(d < 0 for d in delta):
            usage = self._charge_ended(starts, [-d for d in delta], usage, t)
        # (accrues nothing while running: the entry's allocation for decay is zero)
        self.entries[name] = [usage, [0.0] * self.m, t]
        self._store(name, self.entries[name])  # (the ledger's rows, which the sorters read)
        self.held[name] = list(alloc)

    def _charge_ended(self, starts: list[list], ended: list[float], usage: list[float], t: float) -> list[float]:
        r = max(range(self.m), key=lambda i: ended[i])  # (one task class: vectors proportional)
        left = ended[r]
        while left > 1e-12 and starts:
            start, amount = starts[0]
            take = min(1.0, left / amount[r])
            accrued = self._accrued(start, t)
            usage = [u + take * a * accrued for u, a in zip(usage, amount)]
            left -= take * amount[r]
            if take >= 1.0:
                starts.pop(0)
            else:
                starts[0][1] = [a * (1 - take) for a in amount]
        return usage

    def _accrued(self, start: float, t: float) -> float:
        """Integral of 2^-((t - s)/h) over [start, t]: a unit held over it, decayed to t."""
        h = self.half_life
        return (t - start) if math.isinf(h) else (1.0 - 2.0 ** (-(t - start) / h)) / (LN2 / h)

    def _effective_rows(self, rows, t: float, half_life: float):
        """The sorters' keys: the rows hold no allocation (nothing accrues while a task
        runs), so the held allocation is added here, as ``effective`` adds the sorter's."""
        out = super()._effective_rows(rows, t, half_life)
        name_of = {row: name for name, row in self.rows.items()}
        zero = [0.0] * self.m
        return out + np.array([self.held.get(name_of[r], zero) for r in rows.tolist()]).reshape(out.shape)

    def forget(self, name: str) -> None:
        super().forget(name)
        self.starts.pop(name, None)
        self.held.pop(name, None)


@dataclass
class Run:
    label: str
    policy: str
    half_life: float
    sim: Simulator
    summary: dict

    @property
    def result(self):
        return self.sim.run()

    def cpus(self, entity: str, kind: str = "queue") -> list[tuple[float, float]]:
        """(time, CPUs held from then on): the timeline's step function for one entity."""
        return [(t, alloc[0]) for t, k, e, _r, _s, alloc in self.result.rows if k == kind and e == entity]

    def cpus_at(self, entity: str, t: float, kind: str = "queue") -> float:
        held = 0.0
        for when, cpus in self.cpus(entity, kind):
            if when > t:
                break
            held = cpus
        return held

    def mean_cpus(self, entity: str, start: float, stop: float, kind: str = "queue") -> float:
        """Time-average of the CPUs held over [start, stop]."""
        steps = self.cpus(entity, kind)
        total = 0.0
        for i, (t, cpus) in enumerate(steps):
            nxt = steps[i + 1][0] if i + 1 < len(steps) else stop
            lo, hi = max(t, start), min(nxt, stop)
            if hi > lo:
                total += cpus * (hi - lo)
        return total / (stop - start)

    def first_time(self, entity: str, after: float, test) -> float | None:
        for t, cpus in self.cpus(entity):
            if t >= after and test(cpus):
                return t
        return None

    def decayed(self, queue: str) -> list[tuple[float, float, float]]:
        """(time, decayed_share, effective_share) samples of a queue (decayed_usage.csv)."""
        return [(t, d, e) for t, q, d, e, _u in self.result.decayed_usage or () if q == queue]


def with_half_life(sc: Scenario, half_life: float) -> Scenario:
    return dataclasses.replace(sc, fairness=FairnessConfig(half_life) if half_life else None)


def run(path: Path, policy: str, half_life: float, until: float, *, label: str = "",
        charge_at_end: bool = False, **options) -> Run:
    sc = with_half_life(load_scenario(path), half_life)
    sim = Simulator(sc, make_policy(policy, **options), SimOptions(seed=1, until=until))
    if charge_at_end:  # (the sorter's own ledger swapped before the run: (b) only)
        sim.scheduler.sorter.set_half_life(half_life, ChargeAtEndLedger(half_life, sc.m))
    sim.run()
    return Run(label or f"{policy} h={days(half_life)}", policy, half_life, sim, summarize(sim.run(), fairness_gap=False))


def days(seconds: float) -> str:
    return "0" if not seconds else f"{seconds / DAY:g} d"


def hours(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds / HOUR:.0f} h"


# --- (a) the idle team -----------------------------------------------------------------------------
def closed_form_b_cpus(a_held: float, b_held: float, capacity: float) -> float:
    """b's CPUs once the freed cluster is refilled at its arrival, from the key A + U/W:
    each team's U/W is its decayed average allocation (a_held, b_held: each held that many
    CPUs for the whole elapsed time, so U/W is exactly that), and the refill equalises
    x_b + u_b = x_a + u_a with x_a + x_b = capacity: x_b = (capacity + u_a - u_b) / 2,
    capped at the capacity (docs/reproductions/memory.md)."""
    return min(capacity, max(0.0, (capacity + a_held - b_held) / 2))


def fluid_advantage(tau: float, half_life: float) -> float:
    """b's CPUs above a's, as a fraction of the cluster, tau after its arrival in the fluid
    model with W saturated (u' = k (x - u) per team, keys kept equal): x_b - x_a = u_a -
    u_b halves every h / 2, from 1."""
    return 2.0 ** (-2.0 * tau / half_life)


def idle_team_runs() -> list[Run]:
    runs = []
    for path, form in ((IDLE_TEAM, "one job"), (IDLE_TEAM_JOBS, "a new job")):
        for policy in ("hdrf", "drf"):
            for h in HALF_LIVES:
                runs.append(run(path, policy, h, UNTIL_A, label=f"{form}: {policy} h={days(h)}"))
    return runs


def idle_team_table(runs: list[Run]) -> None:
    print("| a's day 7 | policy | half-life | b on arrival (CPUs) | closed form | b over day 7 (mean CPUs) "
          "| b's wait (s) | b down to 6 CPUs | b down to 5 CPUs |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        form, _ = r.label.split(":")
        a_memory = 10.0 if r.half_life and (form == "one job" or r.policy == "hdrf") else 0.0
        b = r.summary["jobs"]["b-work"]
        print(f"| {form} | {r.policy} | {days(r.half_life)} | {r.cpus_at('b', ARRIVAL):g} | "
              f"{closed_form_b_cpus(a_memory, 0.0, 10):g} | {r.mean_cpus('b', ARRIVAL, ARRIVAL + DAY):.2f} | "
              f"{b['start'] - b['submit']:g} | {hours(elapsed(r.first_time('b', ARRIVAL, lambda c: c <= 6)))} | "
              f"{hours(elapsed(r.first_time('b', ARRIVAL, lambda c: c <= 5)))} |")


def elapsed(t: float | None) -> float | None:
    return None if t is None else t - ARRIVAL


def fluid_table() -> None:
    print("\nfluid model: b's CPUs tau after arrival, 10 * (1 + 2^(-2 tau / h)) / 2")
    for h in HALF_LIVES[1:]:
        cells = ", ".join(f"{tau / HOUR:g} h: {10 * (1 + fluid_advantage(tau, h)) / 2:.2f}"
                          for tau in (6 * HOUR, 12 * HOUR, DAY, 2 * DAY))
        to_6 = h / 2 * math.log2(1 / 0.2)  # x_b - x_a = 0.2: 6 against 4
        print(f"  h = {days(h)}: {cells}; b down to 6 CPUs after {to_6 / HOUR:.1f} h")


def step_b_after_arrival(ax, r: Run, style, label: str) -> None:
    """b's CPUs from its arrival to the end of the run, hours after its arrival."""
    steps = [(t, c) for t, c in r.cpus("b") if t >= ARRIVAL]
    ax.step([(t - ARRIVAL) / HOUR for t, _ in steps] + [(UNTIL_A - ARRIVAL) / HOUR],
            [c for _, c in steps] + [steps[-1][1]], where="post", linestyle=style, label=label)


def label(ax, xlabel: str, ylabel: str, title: str, **legend) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(**legend)


def b_axes(ax, title: str, **legend) -> None:
    """The axes of b's CPUs over the four days after its arrival."""
    ax.set_xlim(0, 96)
    ax.set_ylim(0, 10.5)
    label(ax, "hours after b's arrival (day 7)", "b's CPUs (of 10)", title, **legend)


def plot_idle_team(runs: list[Run]) -> None:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.2))
    for r, style in zip([r for r in runs if r.label.startswith("one job: hdrf")], ("-", "--", ":")):
        step_b_after_arrival(ax, r, style, f"h = {days(r.half_life)}")
        if r.half_life:
            taus = [i * HOUR for i in range(0, 97)]
            ax.plot([t / HOUR for t in taus], [10 * (1 + fluid_advantage(t, r.half_life)) / 2 for t in taus],
                    color="0.6", linewidth=0.8, linestyle=style)
            samples = r.decayed("a")
            ax2.plot([t / DAY for t, _d, _e in samples], [d for _t, d, _e in samples], linestyle=style,
                     label=f"a, h = {days(r.half_life)}")
            samples = r.decayed("b")
            ax2.plot([t / DAY for t, _d, _e in samples], [d for _t, d, _e in samples], linestyle=style,
                     label=f"b, h = {days(r.half_life)}")
    b_axes(ax, "hdrf: b's allocation (grey: fluid model)", loc="upper right")
    label(ax2, "simulated time (days)", "decayed share (U / W over capacity)", "decayed usage (decayed_usage.csv)",
          loc="center left", fontsize=7)
    save(fig, "memory_idle_team.svg")


# --- (b) week-long tasks ---------------------------------------------------------------------------
def weekly_runs() -> list[Run]:
    h = 2 * DAY
    return [run(WEEKLY, "hdrf", 0.0, UNTIL_B, label="instantaneous (h = 0)"),
            run(WEEKLY, "hdrf", h, UNTIL_B, label="charged as it accrues (h = 2 d)"),
            run(WEEKLY, "hdrf", h, UNTIL_B, label="charged at task end (h = 2 d)", charge_at_end=True)]


def weekly_table(runs: list[Run]) -> None:
    print("| accounting | weekly, week 1 | weekly, week 2 | weekly, weeks 3-4 | weekly, 4 weeks | "
          "weekly, most held | hourly, 4 weeks |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        most = max(c for _t, c in r.cpus("weekly"))
        print(f"| {r.label} | {r.mean_cpus('weekly', 0, 7 * DAY):.2f} | {r.mean_cpus('weekly', 7 * DAY, 14 * DAY):.2f} | "
              f"{r.mean_cpus('weekly', 14 * DAY, UNTIL_B):.2f} | {r.mean_cpus('weekly', 0, UNTIL_B):.2f} | "
              f"{most:g} | {r.mean_cpus('hourly', 0, UNTIL_B):.2f} |")


def plot_weekly(runs: list[Run]) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    for r, style in zip(runs, ("-", "--", ":")):
        steps = r.cpus("weekly")
        ax.step([t / DAY for t, _ in steps] + [UNTIL_B / DAY], [c for _, c in steps] + [steps[-1][1]],
                where="post", linestyle=style, label=r.label)
    ax.set_xlim(0, UNTIL_B / DAY)
    ax.set_ylim(0, 10.5)
    label(ax, "simulated time (days)", "queue weekly: CPUs (of 10)",
          "Week-long tasks against a half-life of two days (hdrf)", loc="lower right", fontsize=7)
    save(fig, "memory_weekly_tasks.svg")


# --- (c) Tan's window against half-life decay ------------------------------------------------------
def window_runs() -> list[Run]:
    runs = []
    for l in WINDOWS:
        runs.append(run(IDLE_TEAM, "timefair", 0.0, UNTIL_A, label=f"timefair l={days(l)}", window=l))
        for h in (matched_half_life(l), l * math.log(2)):
            runs.append(run(IDLE_TEAM, "hdrf", h, UNTIL_A, label=f"hdrf h={h / DAY:.2f} d"))
    for l in WINDOWS:
        runs.append(run(IDLE_TEAM_JOBS, "timefair", 0.0, UNTIL_A, label=f"a new job: timefair l={days(l)}", window=l))
    return runs


def matched_half_life(window: float) -> float:
    """The half-life whose extra service to b equals the window's (fluid models): the
    window gives b the cluster for l/3 (C_b grows 2/s, C_a falls 1/s), an extra half
    cluster for l/3: l/6; decay gives an extra 2^(-2 tau/h)/2, in all h/(4 ln 2).
    Equal for h = (2/3) l ln 2."""
    return 2.0 / 3.0 * window * math.log(2)


def extra_service(r: Run, start: float, stop: float) -> float:
    """b's CPU-hours above the even 5 CPUs over [start, stop] (seconds after its arrival)."""
    return (r.mean_cpus("b", ARRIVAL + start, ARRIVAL + stop) - 5.0) * (stop - start) / HOUR


def first_advantage(r: Run) -> float:
    """b's extra CPU-hours (above the even 5) until it first holds 5 or fewer."""
    stop = r.first_time("b", ARRIVAL, lambda c: c <= 5)
    return extra_service(r, 0.0, (UNTIL_A if stop is None else stop) - ARRIVAL)


def fluid_extra(r: Run) -> float:
    """The fluid models' extra CPU-hours for b (``matched_half_life``); 0 for a new user."""
    if r.label.startswith("a new job"):
        return 0.0  # (a new user has no C behind it, as b has none)
    if r.policy == "timefair":
        return 10 * r.sim.policy.params()["window"] / 6 / HOUR
    return 10 * r.half_life / (4 * math.log(2)) / HOUR


def window_table(runs: list[Run]) -> None:
    print("| run | b's wait (s) | b on arrival | b holds 10 CPUs for | b down to 5 CPUs | "
          "b's extra CPU-hours until then | fluid model's | b's net extra, days 7-10 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        b = r.summary["jobs"]["b-work"]
        ahead = r.cpus_at("b", ARRIVAL) > 5  # (else b starts with no advantage to measure)
        full = hours(elapsed(r.first_time("b", ARRIVAL, lambda c: c < 10))) if ahead else "-"
        even = hours(elapsed(r.first_time("b", ARRIVAL, lambda c: c <= 5))) if ahead else "-"
        print(f"| {r.label} | {b['start'] - b['submit']:g} | {r.cpus_at('b', ARRIVAL):g} | {full} | "
              f"{even} | {first_advantage(r) if ahead else 0.0:.0f} | "
              f"{fluid_extra(r):.0f} | {extra_service(r, 0.0, UNTIL_A - ARRIVAL):.0f} |")


def plot_windows(runs: list[Run]) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    for r, style in zip([r for r in runs if not r.label.startswith("a new job")], ("-", "--", ":", "-", "--", ":")):
        step_b_after_arrival(ax, r, style, r.label)
    b_axes(ax, "Tan's window (timefair) against half-life decay (hdrf)", loc="center left",
           bbox_to_anchor=(1.0, 0.5), fontsize=7)
    save(fig, "memory_window_vs_decay.svg")


def save(fig, name: str) -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(IMG / name, format="svg", metadata={"Date": None})
    plt.close(fig)


def main() -> None:
    idle = idle_team_runs()
    print("## (a) the idle team (examples/repro/memory_idle_team.yaml, _jobs.yaml; until 10 days)")
    idle_team_table(idle)
    fluid_table()
    plot_idle_team(idle)
    weekly = weekly_runs()
    print("\n## (b) week-long tasks, half-life 2 days (examples/repro/memory_weekly_tasks.yaml, hdrf, 28 days)")
    weekly_table(weekly)
    plot_weekly(weekly)
    windows = window_runs()
    print("\n## (c) timefair's window against half-life decay (examples/repro/memory_idle_team*.yaml)")
    window_table(windows)
    plot_windows(windows)


if __name__ == "__main__":
    sys.exit(main())
