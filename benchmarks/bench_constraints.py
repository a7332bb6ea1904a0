"""Trace-scale simulation with placement constraints: an Alibaba-2023-like GPU cluster.

Issue 4's target: the full Alibaba 2023 pod list (8,152 pods) on its 1,523 heterogeneous
nodes simulates under each main policy in under 2 minutes. This builds a synthetic
scenario of that shape (seeded; the trace itself is not read, so the benchmark runs
anywhere) and times ``fairshare simulate`` end to end (a subprocess: loading, the run,
summary.json, timeline.csv and report.html) under drf, hdrf, dff, timefair, capacity and
fifo.

The shape, from the trace's published files (docs: /work/shared/traces/README.md):

* 1,523 nodes: 310 CPU-only, then GPU nodes by model (node counts and GPUs per node as in
  ``openb_node_list_all_node.csv``: 549 G2 x 8, 387 T4 x 2, 131 P100 x 2, 39 G3 x 8, ...),
  each with a ``gpu_model`` attribute; ``gpu`` is a device resource (``cluster.devices``).
* 8,152 single-task jobs (pods) in 4 queues by QoS class: 13% without GPU, 86% with one
  GPU of which half take a fraction (``gpu_milli`` 810, 470, 320, 650, ... / 1000), the
  rest 2, 4 or 8 whole GPUs; a third of the GPU pods constrained to 1-3 GPU models (as
  the trace's ``_gpuspec33`` variant).
* Arrivals uniform over ``--span`` seconds (default 200,000 s, much denser than the
  trace's 12.9 M s, so that jobs queue and the policies have choices to make); lognormal
  durations (median ~400 s).

Run: ``.venv/bin/python benchmarks/bench_constraints.py [--policies drf,hdrf --pods 8152
--span 200000 --profile POLICY]``. ``--profile`` runs that policy in-process under
cProfile and prints the top functions instead of timing the CLI.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLICIES = ("drf", "hdrf", "dff", "timefair", "capacity", "fifo")

# (model, nodes, GPUs per node, cpu cores, memory GiB): the trace's node list, summarized
NODE_GROUPS = [
    ("none", 310, 0, 32, 256), ("G2", 549, 8, 96, 512), ("T4", 387, 2, 64, 256), ("P100", 131, 2, 64, 256),
    ("G3", 39, 8, 96, 512), ("V100M16", 28, 4, 64, 256), ("V100M32", 21, 8, 96, 512),
    ("V100M16", 19, 1, 32, 128), ("T4", 17, 4, 64, 256), ("V100M32", 9, 4, 64, 256), ("A10", 13, 1, 32, 128),
]
GPU_MODELS = ("G2", "T4", "P100", "G3", "V100M16", "V100M32", "A10")
FRACTIONS = (0.81, 0.47, 0.32, 0.65, 0.23, 0.46, 0.59, 0.16)
QOS = ("LS", "BE", "Burstable", "Guaranteed")


def alibaba_like(pods: int = 8152, span_s: float = 3_600.0, seed: int = 0) -> dict:
    """The scenario document (a dict, as a scenario file holds)."""
    rng = random.Random(seed)
    nodes = []
    for k, (model, count, gpus, cpu, mem) in enumerate(NODE_GROUPS):
        entry = {"name": f"{model.lower()}-{k}", "count": count, "capacity": {"cpu": cpu, "memory": mem, "gpu": gpus}}
        if gpus:
            entry["attributes"] = {"gpu_model": model}
        nodes.append(entry)
    jobs = []
    for i in range(pods):
        u = rng.random()
        demand: dict = {"cpu": rng.choice([2, 4, 6, 8, 12, 16]), "memory": rng.choice([8, 12, 16, 24, 32, 64])}
        task: dict = {"demand": demand, "count": 1,
                      "duration": round(min(200_000.0, rng.lognormvariate(7.5, 1.0)), 1)}
        if u < 0.13:
            pass  # a CPU-only pod
        else:
            if u < 0.56:
                demand["gpu"] = rng.choice(FRACTIONS)
            elif u < 0.99:
                demand["gpu"] = 1
            else:
                demand["gpu"] = rng.choice([2, 4, 8])
            if rng.random() < 0.33:
                eligible = [m for m in GPU_MODELS
                            if any(g[0] == m and g[2] >= demand["gpu"] for g in NODE_GROUPS)]
                task["constraints"] = {"gpu_model": sorted(rng.sample(eligible, min(len(eligible),
                                                                                 rng.choice([1, 2, 3]))))}
        jobs.append({"name": f"pod{i:05d}", "queue": QOS[i % len(QOS)] if rng.random() < 0.7 else rng.choice(QOS),
                     "submit": round(rng.uniform(0, span_s), 1), "tasks": [task]})
    return {"resources": ["cpu", "memory", "gpu"],
            "cluster": {"devices": ["gpu"], "nodes": nodes},
            "queues": [{"name": q, "weight": w} for q, w in zip(QOS, (3, 1, 2, 2))],
            "jobs": jobs}


def time_cli(path: Path, policy: str, out: Path, timeout_s: float) -> tuple[float, float, str]:
    """Wall and CPU seconds of one ``fairshare simulate`` (CPU: the child's user + system
    time, which a busy shared machine does not inflate the way it does wall time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "fairshare", "simulate", str(path), "--policy", policy,
                               "--out", str(out), "--seed", "1"], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, float("nan"), f"stopped after {timeout_s:g} s (--timeout)"
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{policy}: exit {proc.returncode}\n{proc.stderr}")
    return elapsed, cpu, proc.stdout.strip().splitlines()[0]


def profile(doc: dict, policy: str) -> None:
    from fairshare.model import parse_scenario
    from fairshare.policies import make_policy
    from fairshare.sim import SimOptions, Simulator

    sc = parse_scenario(doc, "<alibaba-like>")
    sim = Simulator(sc, make_policy(policy), SimOptions(seed=1))
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    result = sim.run()
    prof.disable()
    print(f"{policy}: run {time.perf_counter() - t0:.1f} s, {result.tasks_launched} launches, "
          f"{result.decisions} decisions")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--pods", type=int, default=8152)
    ap.add_argument("--span", type=float, default=3_600.0, help="arrivals spread over this many seconds")
    ap.add_argument("--timeout", type=float, default=600.0, help="stop one policy's run after this many seconds")
    ap.add_argument("--profile", metavar="POLICY", help="profile one policy's run in-process instead")
    args = ap.parse_args()
    doc = alibaba_like(args.pods, args.span)
    if args.profile:
        profile(doc, args.profile)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "alibaba_like.json"
        path.write_text(json.dumps(doc))
        print(f"scenario: {args.pods} pods, 1523 nodes, arrivals over {args.span:g} s "
              f"({os.cpu_count()} cpus here)")
        print(f"{'policy':<10} {'wall s':>7} {'cpu s':>7}  summary")
        for policy in args.policies.split(","):
            elapsed, cpu, line = time_cli(path, policy, Path(tmp) / policy, args.timeout)
            print(f"{policy:<10} {elapsed:7.1f} {cpu:7.1f}  {line}", flush=True)


if __name__ == "__main__":
    main()
