"""Plots and numbers for docs/reproductions/part1.md (DRF Sec. 7.1-7.2, H-DRF Sec. 3.3-3.4, 5.1).

    .venv/bin/python examples/repro/make_plots_part1.py

Runs the scenarios of examples/repro/ through the simulator's Python entry point (the
function `fairshare simulate` calls), writes SVG plots into docs/reproductions/img/ and
prints the numbers the doc quotes. Deterministic: fixed seeds, the simulator's own
randomness only, and SVGs written without a date and with a fixed id salt.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fairshare.model import load_scenario  # noqa: E402
from fairshare.sim import SimOptions, SimResult, simulate  # noqa: E402
from fairshare.sim.metrics import summarize  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REPRO = ROOT / "examples" / "repro"
IMG = ROOT / "docs" / "reproductions" / "img"

plt.rcParams["svg.hashsalt"] = "fairshare-repro-part1"
plt.rcParams["font.size"] = 9


def run(name: str, policy: str, *, seed: int = 0, until: float | None = None, **options) -> SimResult:
    return simulate(load_scenario(REPRO / name), policy, SimOptions(seed=seed, until=until), **options)


def series(result: SimResult, job: str, column):
    """(times, values) of a job's step function; column is an index or a callable(row)."""
    ts, vs = [], []
    for row in result.rows:
        if row[1] == "job" and row[2] == job:
            ts.append(row[0])
            vs.append(column(row) if callable(column) else row[column])
    ts.append(result.end_time)
    vs.append(vs[-1] if vs else 0.0)
    return ts, vs


def summed(result: SimResult, jobs: list[str], column) -> tuple[list[float], list[float]]:
    """Step function of the sum of several jobs' values (a user's phase jobs)."""
    times = sorted({r[0] for r in result.rows if r[1] == "job" and r[2] in jobs} | {result.end_time})
    current = {j: 0.0 for j in jobs}
    by_time: dict[float, list] = {}
    for row in result.rows:
        if row[1] == "job" and row[2] in jobs:
            by_time.setdefault(row[0], []).append(row)
    vs = []
    for t in times:
        for row in by_time.get(t, []):
            current[row[2]] = column(row) if callable(column) else row[column]
        vs.append(sum(current.values()))
    return times, vs


def time_avg(result: SimResult, job: str, start_s: float, end_s: float, column=4) -> float:
    ts, vs = series(result, job, column)
    total = 0.0
    for k in range(len(ts) - 1):
        t0, t1 = max(ts[k], start_s), min(ts[k + 1], end_s)
        if t1 > t0:
            total += vs[k] * (t1 - t0)
    return total / (end_s - start_s)


def save(fig, name: str) -> None:
    fig.tight_layout()
    fig.savefig(IMG / name, format="svg", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote docs/reproductions/img/{name}")


# --- 1. DRF Fig. 8 ------------------------------------------------------------------------------

def drf_fig8() -> None:
    res = run("drf_fig8_dynamic.yaml", "drf")
    cpu_total, mem_total = 192.0, 672.0
    users = {"job 1": ["job1a", "job1b", "job1c"], "job 2": ["job2a", "job2b", "job2c"]}
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), sharey=True)
    for label, jobs in users.items():
        t, cpu = summed(res, jobs, lambda r: r[5][0] / cpu_total)
        axes[0].step(t, cpu, where="post", label=label)
        t, mem = summed(res, jobs, lambda r: r[5][1] / mem_total)
        axes[1].step(t, mem, where="post", label=label)
        t, dom = summed(res, jobs, 4)  # one phase job runs at a time, apart from hand-overs
        axes[2].step(t, dom, where="post", label=label)
    for ax, title in zip(axes, ["(a) CPU share", "(b) memory share", "(c) dominant share"]):
        ax.set_title(title)
        ax.set_xlabel("time (s)")
        for x in (120, 240):
            ax.axvline(x, color="grey", lw=0.5, ls=":")
        ax.set_ylim(0, 1)
        ax.legend(loc="lower left")
    save(fig, "drf_fig8.svg")
    print("DRF Fig. 8, drf, seed 0: time-averaged shares per phase window")
    for (a, b), (j1, j2) in zip([(20, 110), (140, 230), (260, 350)],
                                [("job1a", "job2a"), ("job1b", "job2b"), ("job1c", "job2c")]):
        c1, c2 = (time_avg(res, j, a, b, lambda r: r[5][0] / cpu_total) for j in (j1, j2))
        m1, m2 = (time_avg(res, j, a, b, lambda r: r[5][1] / mem_total) for j in (j1, j2))
        n1, n2 = (time_avg(res, j, a, b, 3) for j in (j1, j2))
        print(f"  [{a}, {b}] s: job 1 cpu {c1:.3f} mem {m1:.3f} tasks {n1:.1f} | "
              f"job 2 cpu {c2:.3f} mem {m2:.3f} tasks {n2:.1f}")
    for seed in (1, 2, 3):
        r = run("drf_fig8_dynamic.yaml", "drf", seed=seed)
        vals = [f"{time_avg(r, j, a, b):.3f}" for (a, b), js in zip(
            [(20, 110), (140, 230), (260, 350)], [("job1a", "job2a"), ("job1b", "job2b"), ("job1c", "job2c")])
            for j in js]
        print(f"  seed {seed}: dominant shares phase 1-3 (job 1, job 2): {', '.join(vals)}")
    last = {j: t for t, j, d in res.demand_changes if not d}
    print("  last launch per phase job:", {j: round(t, 1) for j, t in last.items()})


# --- 2. DRF Sec. 7.2 ----------------------------------------------------------------------------

SCHEMES = [("DRF", "drf", {}), ("3 slots", "slots", {"slots": 3}), ("4 slots", "slots", {"slots": 4}),
           ("5 slots", "slots", {"slots": 5}), ("6 slots", "slots", {"slots": 6}), ("CPU-fair", "cpu", {})]


def drf_sec72() -> None:
    print("DRF Sec. 7.2: jobs completed in 600 s (completed tasks // 80, summed over users)")
    rows = {}
    for seed in (0, 1, 2):
        for label, pol, kw in SCHEMES:
            res = run("drf_sec72_slots.yaml", pol, seed=seed, until=600, **kw)
            s = summarize(res, fairness_gap=False)
            small = sum(v["tasks_completed"] // 80 for k, v in s["jobs"].items() if k.startswith("small"))
            large = sum(v["tasks_completed"] // 80 for k, v in s["jobs"].items() if k.startswith("large"))
            if seed == 0:
                rows[label] = (small, large, s["utilization"], s["tasks"]["stretched_by_oversubscription"],
                               s["jobs"]["small1"]["mean_running_tasks"], s["jobs"]["large1"]["mean_running_tasks"])
                print(f"  seed 0 {label:9s} small {small:3d} large {large:3d} total {small + large:3d} | "
                      f"util cpu {s['utilization']['cpu']:.3f} mem {s['utilization']['memory']:.3f} | "
                      f"running per small user {rows[label][4]:.1f}, per large user {rows[label][5]:.1f} | "
                      f"stretched tasks {rows[label][3]}")
            else:
                print(f"  seed {seed} {label:9s} small {small:3d} large {large:3d} total {small + large:3d}")
    fig, ax = plt.subplots(figsize=(7, 3.2))
    labels = list(rows)
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [rows[k][0] for k in labels], width=0.4, label="small jobs")
    ax.bar([x + 0.2 for x in xs], [rows[k][1] for k in labels], width=0.4, label="large jobs")
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("jobs completed in 600 s")
    ax.set_title("DRF Sec. 7.2 on the simulator (seed 0)")
    ax.legend()
    save(fig, "drf_sec72_jobs.svg")


# --- 3. H-DRF Fig. 4 starvation -------------------------------------------------------------------

def hdrf_fig4() -> None:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3), sharey=True)
    print("H-DRF Fig. 4(a): mean running tasks over [2, 200] s")
    for ax, pol in zip(axes, ["hdrf-naive", "hdrf"]):
        res = run("hdrf_fig4_starvation.yaml", pol, until=200)
        for job in ("n11", "n21", "n22"):
            t, v = series(res, job, 3)
            ax.step(t, v, where="post", label=job)
        ax.set_xlim(0, 20)
        ax.set_title(pol)
        ax.set_xlabel("time (s)")
        ax.legend(loc="center right")
        print(f"  {pol}: " + ", ".join(f"{j} {time_avg(res, j, 2, 200, 3):.2f}" for j in ("n11", "n21", "n22")))
    axes[0].set_ylabel("running tasks")
    save(fig, "hdrf_fig4_starvation.svg")


# --- 4. H-DRF Fig. 5 and the <1, eps> variant ------------------------------------------------------

def hdrf_fig5() -> None:
    variants = [("hdrf (rescale + ignore blocked)", {}), ("hdrf --no-ignore-blocked (rescale only)",
                                                          {"ignore_blocked": False})]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    print("H-DRF Fig. 5(a): GPU shares (of 60) over [20, 300] s")
    for ax, (label, kw) in zip(axes[:2], variants):
        res = run("hdrf_fig5_rescaling.yaml", "hdrf", until=300, **kw)
        for job in ("n32", "n41", "n31"):
            t, v = series(res, job, 4)
            ax.step(t, v, where="post", label=job)
        ax.set_title(label)
        ax.set_xlabel("time (s)")
        ax.set_ylim(0, 1)
        ax.legend(loc="upper right")
        print(f"  {label}: " + ", ".join(f"{j} {time_avg(res, j, 20, 300):.3f}" for j in ("n11", "n21", "n31",
                                                                                        "n32", "n41")))
    axes[0].set_ylabel("dominant share")
    ax = axes[2]
    print("H-DRF Fig. 4(a) with n2,1 = <1, 0.1>: mean running tasks over [50, 300] s")
    for label, kw, ls in [("hdrf", {}, "-"), ("--no-rescale", {"rescale": False}, "--")]:
        res = run("hdrf_fig4_eps.yaml", "hdrf", until=300, **kw)
        t, v = series(res, "n21", 3)
        ax.step(t, v, where="post", ls=ls, label=f"n21, {label}")
        print(f"  {label}: " + ", ".join(f"{j} {time_avg(res, j, 50, 300, 3):.2f}" for j in ("n11", "n21", "n22")))
    ax.set_title("<1, eps> variant of Fig. 4: n2,1's tasks")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("running tasks (of 10 CPUs)")
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.3, 10.3)
    ax.legend(loc="center right")
    save(fig, "hdrf_fig5_rescaling.svg")


# --- 5. H-DRF Figs. 8-9 -----------------------------------------------------------------------------

def hdrf_fig9() -> None:
    res = run("hdrf_fig8_sharing.yaml", "hdrf")
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for job in ("n11", "n12", "n21", "n22"):
        t, v = series(res, job, 4)
        ax.step(t, v, where="post", label=job)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("dominant share")
    ax.set_title("H-DRF Fig. 8 hierarchy on the simulator (hdrf, seed 0)")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="center left")
    save(fig, "hdrf_fig9_shares.svg")
    finish = {k: v.finish for k, v in res.jobs.items()}
    last = {j: t for t, j, d in res.demand_changes if not d}
    print("H-DRF Fig. 9: finish", {k: round(v, 1) for k, v in finish.items()},
          "last launch", {k: round(v, 1) for k, v in last.items()})
    for a, b, what in [(50, 300, "all four"), (finish["n11"], last["n22"], "after n11"),
                       (finish["n22"], last["n21"], "after n22")]:
        print(f"  {what} [{a:.1f}, {b:.1f}] s: " + ", ".join(
            f"{j} {time_avg(res, j, a, b):.3f}" for j in ("n11", "n12", "n21", "n22")))


def main() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    drf_fig8()
    drf_sec72()
    hdrf_fig4()
    hdrf_fig5()
    hdrf_fig9()


if __name__ == "__main__":
    main()
