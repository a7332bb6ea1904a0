"""Plots and numbers for docs/reproductions/part2.md (H-DRF Sec. 5.2, 5.3.1; DFF Sec. 4; Tan Sec. 5).

    .venv/bin/python examples/repro/make_plots_part2.py

Runs the scenarios of examples/repro/ through the simulator's Python entry point
(``fairshare.sim.simulate``, the function ``fairshare simulate`` calls; helpers in
``repro_part2.py``, shared with tests/test_reproductions_part2.py), writes SVG plots into
docs/reproductions/img/ and prints the numbers the doc quotes. Deterministic: seed 0,
the simulator's own randomness only, SVGs written without a date and with a fixed id
salt. Takes about a minute.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import repro_part2 as R  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "reproductions" / "img"

plt.rcParams["svg.hashsalt"] = "fairshare-repro-part2"
plt.rcParams["font.size"] = 9

GPU, MIC = 2, 2  # resource columns (H-DRF schedules: memory, cpu, gpu; DFF: cpu, memory, mic)


def save(fig, name: str) -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(IMG / name, format="svg", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote docs/reproductions/img/{name}")


def plot_step(ax, step: R.Step, scale: float = 1.0, **kw) -> None:
    xs = list(step.times) + [step.end]
    ys = [v * scale for v in step.values]
    ys.append(ys[-1] if ys else 0.0)
    ax.step(xs, ys, where="post", **kw)


# --- 6. H-DRF Sec. 5.2 ----------------------------------------------------------------------
SEC52_POLICIES = [("capacity", "C.S-Current (capacity)"), ("hdrf-naive", "Pareto-Efficient-C.S (hdrf-naive)"),
                  ("hdrf", "H-DRF (hdrf)")]
LEAVES = [("n1.n11", "n1,1 (CPU)"), ("n1.n12", "n1,2 (GPU)"), ("n2", "n2 (3 leaves)"), ("n3.n31", "n3,1")]


def sec52(name: str, img: str, title: str) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharey=True)
    print(f"\n== {name} (seed 0, no headroom)")
    for ax, (policy, label) in zip(axes, SEC52_POLICIES):
        run = R.run(name, policy)
        for queue, qlabel in LEAVES:
            plot_step(ax, R.step(run, "queue", queue, "running"), label=qlabel, lw=0.9)
        end = R.queue_finish(run, "n2")
        ax.axvline(end, color="grey", ls=":", lw=0.8)
        ax.set_title(label)
        ax.set_xlabel("time (s)")
        n12 = R.step(run, "queue", "n1.n12", "share").mean(0, end)
        n11 = R.step(run, "queue", "n1.n11", "share").mean(0, end)
        med = R.step(run, "queue", "n1.n11", "running").median(0, end)
        idle = 50 - R.step(run, "cluster", "cluster", GPU).mean(0, end)
        print(f"{policy:10s} window [0, {end:.0f}] s: n1,2 GPU share {n12:.3f}, n1,1 CPU share {n11:.3f}, "
              f"n1,1 median running {med:.0f}, idle GPUs {idle:.1f}/50; n1,1 done {R.queue_finish(run, 'n1.n11'):.0f} s,"
              f" n1,2 done {R.queue_finish(run, 'n1.n12'):.0f} s, makespan {run.end_time:.0f} s")
    axes[0].set_ylabel("running tasks")
    axes[0].legend(loc="upper left", fontsize=7)
    fig.suptitle(title + " (dotted: n2's last job done)", fontsize=9)
    save(fig, img)
    hdrf = R.run(name, "hdrf")
    for other in ("capacity", "hdrf-naive"):
        run = R.run(name, other)
        parts = []
        for queue in ("n1.n11", "n1.n12", "n2", "n3.n31"):
            jobs = [j.name for j in R.scenario(name).jobs if j.queue == queue or j.queue.startswith(queue + ".")]
            imp = [100 * (R.completion(run, j) - R.completion(hdrf, j)) / R.completion(run, j) for j in jobs]
            parts.append(f"{queue} mean {statistics.mean(imp):+.0f}% (median {statistics.median(imp):+.0f}%)")
        print(f"  response-time improvement of hdrf over {other}: " + "; ".join(parts))


def sec52_headroom() -> None:
    run = R.run("hdrf_sec52_capacity", "hdrf-naive", headroom=True)
    print(f"\n== hdrf_sec52_capacity, hdrf-naive --headroom: all finished {run.all_finished}; "
          f"n1,2 tasks completed {sum(o.tasks_completed for o in run.jobs.values() if o.queue == 'n1.n12')}; "
          f"notes {run.notes}")
    for policy in ("capacity", "hdrf-naive", "hdrf"):
        run = R.run("hdrf_sec52_capacity", policy, headroom=True)
        end = R.queue_finish(run, "n2")
        n12 = R.step(run, "queue", "n1.n12", "share").mean(0, end)
        n11 = R.step(run, "queue", "n1.n11", "share").mean(0, end)
        med = R.step(run, "queue", "n1.n11", "running").median(0, end)
        idle = 50 - R.step(run, "cluster", "cluster", GPU).mean(0, end)
        print(f"  --headroom {policy:10s} window [0, {end:.0f}] s: n1,2 GPU share {n12:.3f}, n1,1 CPU share {n11:.3f}, "
              f"n1,1 median running {med:.0f}, idle GPUs {idle:.1f}/50; n1,2 done {R.queue_finish(run, 'n1.n12'):.0f} s")


# --- 7. H-DRF Sec. 5.3.1 --------------------------------------------------------------------
PAPER_531 = {"hdrf": 1379, "4 slots": 1446, "5 slots": 1514, "6 slots": 1732}
BINS = [(0, 19, "0-19"), (20, 149, "20-149"), (150, 499, "150-499"), (500, 10**9, "500+")]


def sec531() -> None:
    name = "hdrf_sec531_slots"
    hdrf = R.run(name, "hdrf")
    runs = {"hdrf": hdrf, **{f"{k} slots": R.run(name, "slots", slots=k) for k in (4, 5, 6)}}
    print(f"\n== {name} (seed 0)")
    for label, run in runs.items():
        print(f"{label:8s} makespan {run.end_time:.0f} s (paper {PAPER_531[label]} s); "
              f"tasks stretched {run.tasks_stretched}/{run.tasks_launched}")
    hr = R.run(name, "hdrf", headroom=True)
    print(f"hdrf --headroom makespan {hr.end_time:.0f} s")
    counts = {j.name: j.total_count for j in R.scenario(name).jobs}
    medians: dict[str, list[float]] = {}
    for k in (4, 5, 6):
        other = runs[f"{k} slots"]
        imp = {j: 100 * (R.completion(other, j) - R.completion(hdrf, j)) / R.completion(other, j) for j in hdrf.jobs}
        total_h = sum(R.completion(hdrf, j) for j in hdrf.jobs)
        total_o = sum(R.completion(other, j) for j in hdrf.jobs)
        row = []
        for lo, hi, label in BINS:
            vals = [v for j, v in imp.items() if lo <= counts[j] <= hi]
            medians.setdefault(label, []).append(statistics.median(vals))
            row.append(f"{label}: median {statistics.median(vals):+.0f}% mean {statistics.mean(vals):+.0f}%")
        print(f"  hdrf vs {k} slots: summed response time {100 * (total_o - total_h) / total_o:+.1f}%; " + "; ".join(row))

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    labels = list(runs)
    xs = range(len(labels))
    ax1.bar([x - 0.2 for x in xs], [PAPER_531[k] for k in labels], 0.4, label="paper (prototype)", color="#bbbbbb")
    ax1.bar([x + 0.2 for x in xs], [runs[k].end_time for k in labels], 0.4, label="ours (simulated)", color="#1f77b4")
    ax1.set_xticks(list(xs), labels)
    ax1.set_ylabel("schedule makespan (s)")
    ax1.legend(fontsize=7, loc="lower right")
    ax1.set_title("Makespan: H-DRF vs slot scheduling")
    width = 0.25
    for i, k in enumerate((4, 5, 6)):
        ax2.bar([b + (i - 1) * width for b in range(len(BINS))], [medians[label][i] for _, _, label in BINS],
                width, label=f"vs {k} slots")
    ax2.axhline(0, color="black", lw=0.6)
    ax2.set_xticks(range(len(BINS)), [label for _, _, label in BINS])
    ax2.set_xlabel("job size (tasks)")
    ax2.set_ylabel("median improvement of H-DRF (%)")
    ax2.legend(fontsize=7)
    ax2.set_title("Job response time (cf. paper Fig. 12)")
    save(fig, "hdrf_sec531_slots.svg")


# --- 8. DFF Sec. 4 --------------------------------------------------------------------------
DFF_CASES = [("dff_sec4", "paper's cluster: 3 MICs/node"), ("dff_sec4_mic4", "VARIANT: 4 MICs/node"),
             ("dff_sec4_mic4_long_cpu", "VARIANT: 4 MICs/node, CPU tasks x5")]


def dff() -> None:
    fig, axes = plt.subplots(2, 3, figsize=(12, 6))
    print("\n== DFF Sec. 4 (seed 0)")
    for col, (name, title) in enumerate(DFF_CASES):
        mics = sum(n.capacity[MIC] for n in R.scenario(name).cluster.nodes)
        ax = axes[0][col]
        runs = {p: R.run(name, p) for p in ("hdrf", "dff")}
        for policy, run in runs.items():
            plot_step(ax, R.step(run, "cluster", "cluster", MIC), scale=1 / mics, label=policy,
                      lw=1.0, ls="-" if policy == "dff" else "--")
        ax.set_ylim(0, 1.05)
        ax.set_title(title)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("MIC utilisation")
        ax.legend(fontsize=7)
        cpu_end = max(runs["hdrf"].jobs[j].finish for j in ("job1", "job2", "job3"))
        jobs = list(runs["hdrf"].jobs)
        bx = axes[1][col]
        for i, (policy, run) in enumerate(runs.items()):
            bx.bar([k + (i - 0.5) * 0.4 for k in range(len(jobs))], [R.completion(run, j) for j in jobs], 0.4,
                   label=policy)
        bx.set_xticks(range(len(jobs)), [j.replace("job", "job ") for j in jobs])
        bx.set_ylabel("completion time (s)")
        bx.legend(fontsize=7)
        totals = {p: sum(R.completion(r, j) for j in jobs) for p, r in runs.items()}
        window = min(2000.0, runs["hdrf"].end_time)
        util = {p: R.step(r, "cluster", "cluster", MIC).mean(0, window) / mics for p, r in runs.items()}
        util_cpu = {p: R.step(r, "cluster", "cluster", MIC).mean(0, cpu_end) / mics for p, r in runs.items()}
        print(f"{name}: MIC utilisation [0, {window:.0f}] s hdrf {util['hdrf']:.3f} dff {util['dff']:.3f}; "
              f"[0, {cpu_end:.0f}] s (CPU jobs running under hdrf) hdrf {util_cpu['hdrf']:.3f} dff {util_cpu['dff']:.3f}")
        print("  completion (hdrf -> dff): " + ", ".join(
            f"{j} {R.completion(runs['hdrf'], j):.0f} -> {R.completion(runs['dff'], j):.0f}" for j in jobs)
            + f"; total {totals['hdrf']:.0f} -> {totals['dff']:.0f} "
              f"({100 * (totals['dff'] - totals['hdrf']) / totals['hdrf']:+.1f}%); makespan "
              f"{runs['hdrf'].end_time:.0f} -> {runs['dff'].end_time:.0f} s")
    save(fig, "dff_sec4_mic.svg")


# --- 9. Tan Sec. 5 ----------------------------------------------------------------------------
def tan() -> None:
    name = "tan_sec5_two_users"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    print("\n== Tan Sec. 5 (seed 0)")
    for policy, until in (("drf", 10000.0), ("timefair", 10000.0)):
        run = R.run(name, policy, until=until)
        a, b = R.step(run, "job", "A", "running"), R.step(run, "job", "B", "running")
        # running averages of the slowdowns eta = running / tasks alone (3 for A, 10 for B)
        ts = [t for t in range(100, int(until) + 1, 50)]
        ratio = [(a.mean(0, t) / 3) / (b.mean(0, t) / 10) for t in ts]
        ax1.plot(ts, ratio, label=policy, lw=1.0)
        ea, eb = a.mean(0, until) / 3, b.mean(0, until) / 10
        print(f"{policy:8s} [0, {until:.0f}] s: share A {0.3 * a.mean(0, until):.3f}, B {0.1 * b.mean(0, until):.3f}; "
              f"eta_A {ea:.3f}, eta_B {eb:.3f}, ratio {ea / eb:.3f}"
              + (f"; at 5,000 s ratio {(a.mean(0, 5000) / 3) / (b.mean(0, 5000) / 10):.3f}" if policy == "timefair" else ""))
        if policy == "timefair":
            plot_step(ax2, a, scale=30, label="A (30 units/task)", lw=0.8)
            plot_step(ax2, b, scale=10, label="B (10 units/task)", lw=0.8)
    ax1.axhspan(1 / 1.1, 1.1, color="green", alpha=0.1, label="within 10%")
    ax1.axhline(1.089, color="grey", ls=":", lw=0.8, label="Z*M floor 1.089")
    ax1.set_xlabel("time t (s)")
    ax1.set_ylabel("eta_A([0,t]) / eta_B([0,t])")
    ax1.set_ylim(0.8, 1.8)
    ax1.legend(fontsize=7)
    ax1.set_title("Average-slowdown ratio, A over B")
    ax2.set_xlim(0, 600)
    ax2.set_xlabel("time (s)")
    ax2.set_ylabel("units held")
    ax2.legend(fontsize=7)
    ax2.set_title("timefair: the first 600 s (A bursts, then B)")
    save(fig, "tan_sec5_slowdowns.svg")


def main() -> None:
    sec52("hdrf_sec52_capacity", "hdrf_sec52_throughput.svg",
          "H-DRF Sec. 5.2 workload (1.5 GB or 1 GB per task): running tasks per leaf")
    sec52("hdrf_sec52_capacity_1gb", "hdrf_sec52_throughput_1gb.svg",
          "VARIANT: every task 1 GB: running tasks per leaf")
    sec52_headroom()
    sec531()
    dff()
    tan()


if __name__ == "__main__":
    main()
