"""Simulation speed: a 100,000-task run (200 jobs x 500 tasks on 100 nodes) under hdrf.

Workload (seeded, built here): 4 top-level queues x 5 sub-queues, 10 jobs in each
sub-queue (200 jobs), 500 tasks per job, jobs submitted over the first 2,000 s, task
demands drawn from {1, 2, 4} CPUs x {2, 4, 8} GB (a GPU for a quarter of the jobs),
exponential durations with means of 20-120 s, 100 nodes of 32 CPUs, 128 GB, 4 GPUs.
Target: the whole ``simulate`` (run + summary + files + report) under one minute.

Timed separately: the event loop (``Simulator.run``), the summary (with and without the
fairness gap) and writing the files. ``--profile`` prints the top functions of the run.
``--reasons``: the run keeps why jobs wait (``simulate --reasons``, ``sim.reasons``): its
cost is the event loop's time against a run without.

Run: ``.venv/bin/python benchmarks/bench_simulate.py [--jobs 200 --tasks 500 --nodes 100
--policy hdrf --profile --reasons]``.

``--growth`` (issue 24: "a whole simulation's time grows at most 16x for 10x the jobs,
nodes and tasks"): for each ``--policy`` (several may be given), the scenario at a tenth
of the jobs and nodes (same tasks per job, same mix, same seed) and at full size, each in
a process of its own, run alternately ``--rounds`` times (the best of each is kept: the
machine is shared). Each process times, in CPU time, the start-up (building the scenario
and the ``Simulator``: scheduler, sorter), the event loop (``Simulator.run``) and the
rest of a ``simulate`` (summary with the fairness gap, files, report); the ratios printed
are of the event loop and of the whole run with the start-up subtracted.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fairshare.model import parse_scenario
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, Simulator


def scenario(jobs: int = 200, tasks: int = 500, nodes: int = 100, seed: int = 0):
    rng = random.Random(seed)
    queues = [{"name": f"org{a}", "children": [{"name": f"team{b}", "weight": rng.choice([1, 2])} for b in range(5)]}
              for a in range(4)]
    paths = [f"org{a}.team{b}" for a in range(4) for b in range(5)]
    job_list = []
    for i in range(jobs):
        demand = {"cpu": rng.choice([1, 2, 4]), "memory": rng.choice([2, 4, 8])}
        if rng.random() < 0.25:
            demand["gpu"] = 1
        job_list.append({"name": f"job{i:03d}", "queue": paths[i % len(paths)],
                         "submit": round(rng.uniform(0, 2000), 1),
                         "tasks": [{"demand": demand, "count": tasks,
                                    "duration": {"dist": "exponential", "mean": rng.choice([20, 40, 60, 120])}}]})
    data = {"resources": ["cpu", "memory", "gpu"],
            "cluster": {"nodes": [{"name": "n", "count": nodes, "capacity": {"cpu": 32, "memory": 128, "gpu": 4}}]},
            "queues": queues, "jobs": job_list}
    return parse_scenario(data, f"<bench jobs={jobs} tasks={tasks} nodes={nodes}>")


def measure(jobs: int, tasks: int, nodes: int, policy: str) -> dict:
    """CPU seconds of one whole run: start-up (scenario and ``Simulator`` built), event
    loop, and the rest (summary with the gap, files, report), in this process."""
    from fairshare.report import plots
    from fairshare.report.html import run_report
    from fairshare.sim.metrics import summarize
    from fairshare.sim.output import write_outputs

    c0 = time.process_time()
    plots._plt()  # (matplotlib's import and style: start-up, whatever the size)
    sc = scenario(jobs, tasks, nodes)
    sim = Simulator(sc, make_policy(policy), SimOptions(seed=1))
    c1 = time.process_time()
    result = sim.run()
    c2 = time.process_time()
    summary = summarize(result)
    with tempfile.TemporaryDirectory() as tmp:
        write_outputs(Path(tmp), result, summary)
        (Path(tmp) / "report.html").write_text(run_report(result, summary, scenario_name="bench"), encoding="utf-8")
    c3 = time.process_time()
    return {"policy": policy, "jobs": jobs, "tasks": tasks, "nodes": nodes, "startup_s": c1 - c0,
            "loop_s": c2 - c1, "rest_s": c3 - c2, "tasks_completed": result.tasks_completed}


def growth(policies: list[str], jobs: int, tasks: int, nodes: int, rounds: int) -> None:
    """The small (jobs/10, nodes/10) and the full scenario, each in its own process,
    alternated ``rounds`` times; the best CPU times of each, and their ratios."""
    if jobs % 10 or nodes % 10:
        raise SystemExit(f"--growth needs --jobs and --nodes divisible by 10, got {jobs} and {nodes}")
    sizes = [(jobs // 10, nodes // 10), (jobs, nodes)]
    print(f"growth: {jobs // 10} -> {jobs} jobs x {tasks} tasks, {nodes // 10} -> {nodes} nodes; "
          f"best of {rounds}, CPU time, load average {os.getloadavg()[0]:.1f}")
    for policy in policies:
        best: dict[tuple[int, int], dict] = {}
        for _ in range(rounds):
            for j, n in sizes:
                out = subprocess.run([sys.executable, __file__, "--measure", "--jobs", str(j), "--tasks", str(tasks),
                                      "--nodes", str(n), "--policy", policy],
                                     check=True, capture_output=True, text=True).stdout
                got = json.loads(out.strip().splitlines()[-1])
                if (j, n) not in best or got["loop_s"] + got["rest_s"] < best[(j, n)]["loop_s"] + best[(j, n)]["rest_s"]:
                    best[(j, n)] = got
        small, full = best[sizes[0]], best[sizes[1]]
        for size in (small, full):
            print(f"  {policy:5} {size['jobs']:5} jobs {size['nodes']:5} nodes {size['tasks_completed']:>9,} tasks: "
                  f"start-up {size['startup_s']:6.2f} s, event loop {size['loop_s']:7.2f} s, "
                  f"summary+files {size['rest_s']:6.2f} s")
        whole_small = small["loop_s"] + small["rest_s"]
        whole_full = full["loop_s"] + full["rest_s"]
        print(f"  {policy:5} growth: event loop {full['loop_s'] / small['loop_s']:.1f}x, "
              f"whole simulate less start-up {whole_full / whole_small:.1f}x (target <= 16x)", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--policy", nargs="+", default=["hdrf"], help="one policy (several with --growth)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--reasons", action="store_true", help="keep why jobs wait (simulate --reasons)")
    ap.add_argument("--growth", action="store_true",
                    help="time jobs/10 and nodes/10 against the full size, each in its own process")
    ap.add_argument("--rounds", type=int, default=1, help="with --growth: alternations (the best is kept)")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # (one --growth process)
    args = ap.parse_args()
    if args.growth:
        growth(args.policy, args.jobs, args.tasks, args.nodes, args.rounds)
        return
    if args.measure:
        print(json.dumps(measure(args.jobs, args.tasks, args.nodes, args.policy[0])))
        return
    if len(args.policy) != 1:
        raise SystemExit("several policies are for --growth; give one")
    args.policy = args.policy[0]

    sc = scenario(args.jobs, args.tasks, args.nodes)
    sim = Simulator(sc, make_policy(args.policy), SimOptions(seed=1, reasons=args.reasons))
    prof = cProfile.Profile() if args.profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    result = sim.run()
    if prof:
        prof.disable()
    t_run = time.perf_counter() - t0
    from fairshare.report.html import run_report
    from fairshare.sim.metrics import summarize
    from fairshare.sim.output import write_outputs

    t1 = time.perf_counter()
    summary_nogap = summarize(result, fairness_gap=False)
    t_sum = time.perf_counter() - t1
    t1 = time.perf_counter()
    summary = summarize(result)
    t_gap = time.perf_counter() - t1
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_outputs(Path(tmp), result, summary)
        (Path(tmp) / "report.html").write_text(run_report(result, summary, scenario_name="bench"), encoding="utf-8")
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
    t_out = time.perf_counter() - t1
    assert summary_nogap["makespan"] == summary["makespan"]
    print(f"{args.jobs} jobs x {args.tasks} tasks on {args.nodes} nodes, policy {args.policy} "
          f"(sorter {type(sim.scheduler.sorter).__name__}){', with --reasons' if args.reasons else ''}")
    print(f"  tasks completed     {result.tasks_completed:,} (decisions {result.decisions:,}), "
          f"makespan {result.end_time:,.0f} s, timeline rows {len(result.rows):,}")
    print(f"  event loop          {t_run:8.2f} s  ({result.tasks_completed / t_run:,.0f} tasks/s, "
          f"{result.decisions / t_run:,.0f} decisions/s)")
    print(f"  summary (no gap)    {t_sum:8.2f} s")
    print(f"  summary + gap       {t_gap:8.2f} s  ({summary['fairness_gap']['static_allocations']} static allocations)")
    print(f"  files + report      {t_out:8.2f} s  ({size / 1e6:.1f} MB)")
    print(f"  total (run+gap+out) {t_run + t_gap + t_out:8.2f} s")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
