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
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--policy", default="hdrf")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--reasons", action="store_true", help="keep why jobs wait (simulate --reasons)")
    args = ap.parse_args()

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
