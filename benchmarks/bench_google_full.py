"""How long would the full Google 2011 trace take to simulate? Measure a fraction of it.

Generates the first ``--fraction`` of a full-size Google 2011 workload from the three
task_events parts at hand (``fairshare.traces.google_full``: the parts' jobs bootstrapped
at the full trace's arrival rate, on the 12,583-machine mix), then runs
``fairshare.sim.simulate`` on it with ``--policy``, and prints one JSON line: sizes, wall
times (templates, generation, simulation) and peak memory (``resource.getrusage``
``ru_maxrss`` of this process: the generator, the materialized scenario and the
simulator together). Run each fraction in its own process: the peak is per process.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_google_full.py --fraction 0.001 --policy hdrf
    ... --profile out.prof    # cProfile the simulation; the top functions go to stderr

``--timeout S`` stops the simulation after S seconds of wall time (a progress callback
raises), reporting how far it got (simulated seconds, tasks completed), so a too-large
fraction still yields a rate. Needs ../shared/traces/google-2011 (or --traces).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class _OutOfTime(Exception):
    pass


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fraction", type=float, required=True, help="of the full trace's 29 days, in (0, 1]")
    ap.add_argument("--policy", default="hdrf")
    ap.add_argument("--seed", type=int, default=0, help="the generator's and the simulation's seed")
    ap.add_argument("--traces", type=Path, default=REPO.parent / "shared" / "traces")
    ap.add_argument("--timeout", type=float, default=None, metavar="S", help="stop the simulation after S s")
    ap.add_argument("--profile", type=Path, default=None, metavar="FILE", help="cProfile the simulation into FILE")
    args = ap.parse_args(argv)

    from fairshare.sim import SimOptions, simulate
    from fairshare.traces import google_full

    directory = args.traces / "google-2011"
    if not directory.is_dir():
        print(f"no Google 2011 parts under {directory} (give --traces)", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    templates = google_full.templates_from_parts(directory)
    t1 = time.monotonic()
    scenario = google_full.materialize(templates, google_full.generate(templates, args.fraction, args.seed))
    t2 = time.monotonic()
    runs = sum(j.total_count or 0 for j in scenario.jobs)
    memory_before_sim = peak_mb()

    deadline = None if args.timeout is None else t2 + args.timeout
    reached = {"now": 0.0, "completed": 0}

    def progress(now: float, completed: int) -> None:
        reached["now"], reached["completed"] = now, completed
        if deadline is not None and time.monotonic() > deadline:
            raise _OutOfTime

    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    finished = True
    result = None
    try:
        result = simulate(scenario, args.policy, SimOptions(seed=args.seed), progress=progress)
    except _OutOfTime:
        finished = False
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
    t3 = time.monotonic()
    out = {
        "fraction": args.fraction, "policy": args.policy, "seed": args.seed,
        "span_s": google_full.span_of(args.fraction), "jobs": len(scenario.jobs), "task_runs": runs,
        "machines": len(scenario.cluster.nodes),
        "templates_s": round(t1 - t0, 2), "generate_s": round(t2 - t1, 2), "simulate_s": round(t3 - t2, 2),
        "finished": finished,
        "tasks_completed": result.tasks_completed if result else reached["completed"],
        "simulated_s": result.end_time if result else reached["now"],
        "timeline_rows": len(result.rows) if result else None,
        "peak_mb_before_simulate": round(memory_before_sim), "peak_mb": round(peak_mb()),
    }
    print(json.dumps(out), flush=True)
    if profiler is not None:
        import pstats

        pstats.Stats(str(args.profile), stream=sys.stderr).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
