"""Trace scale: conversion time and peak memory, then simulation time per policy (issue 4, part 3).

Targets: the full Alibaba 2023 pod list (8,152 pods, 7,255 that ran) on its 1,523 nodes
simulates under each main policy in under 2 minutes; the three Google 2011 task_events
parts (~690,000 events) convert and simulate in under 10 minutes.

Each step is a separate ``python -m fairshare`` process (what a user runs), so its wall
time includes start-up, loading and writing, and its peak memory (``ru_maxrss`` from
``os.wait4``) is that step's alone. Simulations run with ``--no-fairness-gap`` (the gap
computes one static allocation per distinct set of demanding jobs, a cost of the metric,
not of the simulation; docs/simulation.md) unless ``--fairness-gap``.

Needs ``../shared/traces`` next to the repository (skips with a message otherwise).
Run: ``.venv/bin/python benchmarks/bench_traces.py [--only alibaba|google]
[--policies drf,hdrf,...] [--fairness-gap]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
MAIN_POLICIES = "drf,hdrf,dff,timefair,capacity,fifo"


TIMEOUT_S = 900.0
STEP_TIMEOUT = {"s": TIMEOUT_S}  # set from --timeout


def run(argv: list[str], label: str, rows: list[tuple[str, float, float, int]]) -> int:
    """Run ``python -m fairshare ARGV``; record (label, wall s, peak MB, status).

    A step still running after ``--timeout`` seconds is stopped (its own process only) and
    recorded with status "timeout" (-9).
    """
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen([sys.executable, "-m", "fairshare", *argv], stdout=log, stderr=subprocess.STDOUT,
                                text=True)
        timer = threading.Timer(STEP_TIMEOUT["s"], proc.kill)
        timer.start()
        _pid, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read()
    wall = time.monotonic() - start
    peak_mb = usage.ru_maxrss / 1024  # KiB on Linux
    rows.append((label, wall, peak_mb, proc.returncode))
    print(f"{label:<44} {wall:8.1f} s {peak_mb:8.0f} MB  exit {proc.returncode}", flush=True)
    if proc.returncode != 0:
        print(output[-2000:], file=sys.stderr)
    return proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("alibaba", "google"), default=None)
    ap.add_argument("--policies", default=MAIN_POLICIES)
    ap.add_argument("--fairness-gap", action="store_true", help="also compute the fairness gap")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per step before it is stopped (900)")
    args = ap.parse_args()
    STEP_TIMEOUT["s"] = args.timeout
    if not TRACES.is_dir():
        print(f"skipped: the shared traces are not at {TRACES}")
        return
    policies = args.policies.split(",")
    gap = [] if args.fairness_gap else ["--no-fairness-gap"]
    rows: list[tuple[str, float, float, int]] = []
    print(f"{'step':<44} {'wall':>10} {'peak':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if args.only in (None, "alibaba"):
            scenario = out / "alibaba.json"
            run(["trace", "convert", "alibaba-gpu2023", str(TRACES / "alibaba-gpu-2023"), "-o", str(scenario),
                 "--quiet"], "alibaba-gpu2023: convert (check on)", rows)
            run(["trace", "convert", "alibaba-gpu2023", str(TRACES / "alibaba-gpu-2023"), "-o", str(scenario),
                 "--quiet", "--no-check"], "alibaba-gpu2023: convert (--no-check)", rows)
            for p in policies:
                run(["simulate", str(scenario), "--policy", p, "--out", str(out / f"ali-{p}"), *gap],
                    f"alibaba-gpu2023: simulate {p}", rows)
        if args.only in (None, "google"):
            scenario = out / "google.json"
            run(["trace", "convert", "google2011", str(TRACES / "google-2011"), "-o", str(scenario), "--quiet",
                 "--no-check"], "google2011 (3 parts): convert (--no-check)", rows)
            one = out / "google-part0.json"
            run(["trace", "convert", "google2011", str(TRACES / "google-2011" / "task_events-part-00000-of-00500.csv.gz"),
                 "-o", str(one), "--quiet", "--no-check"], "google2011 (part 0 only): convert", rows)
            for p in policies:
                run(["simulate", str(scenario), "--policy", p, "--out", str(out / f"g-{p}"), *gap],
                    f"google2011 (3 parts): simulate {p}", rows)
    print()
    print("| step | wall (s) | peak memory (MB) | exit |")
    print("|---|---:|---:|---:|")
    for label, wall, peak, status in rows:
        print(f"| {label} | {wall:.1f} | {peak:.0f} | {'timeout' if status == -9 else status} |")


if __name__ == "__main__":
    main()
