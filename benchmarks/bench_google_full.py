"""How long would the full Google 2011 trace take to simulate? Measure a fraction of it.

Generates the first ``--fraction`` of a full-size Google 2011 workload from the three
task_events parts at hand (``fairshare.traces.google_full``: the parts' jobs bootstrapped
at the full trace's arrival rate, on the 12,583-machine mix) and streams it into the
simulator with ``--policy`` (``Simulator(arrivals=, sink=)``: jobs generated as they
arrive, forgotten when they finish; ``summary.json`` from running accumulators into a
temporary directory, and the timeline too with ``--timeline``). Prints one JSON line:
sizes, wall and CPU times (templates, a counting pass over the generator, simulation)
and peak memory (``resource.getrusage`` ``ru_maxrss`` of this process: the templates,
the generator and the simulator together). Run each fraction in its own process: the
peak is per process. ``--materialize`` runs the earlier way instead: every job built into
a ``Scenario`` first and ``fairshare.sim.simulate`` on it (timeline rows kept in memory).
``--offload`` runs the streaming sink in a second process (``sim.offload.OffloadedSink``:
the same files; ``simulate_cpu_s`` is then this process's CPU only, the child's peak memory
``peak_mb_sink_process``); ``--offload-recorder`` moves the timeline recorder there too
(the parent ships each instant's ``Moved``, the child makes the rows).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_google_full.py --fraction 0.001 --policy hdrf
    ... --profile out.prof    # cProfile the simulation; the top functions go to stderr
    ... --profile out.prof --profile-from 0.8    # only from 80% of the runs on (the late trace)

``--report RUNS.jsonl --plot FILE.svg`` reads the JSON lines of several runs, fits CPU
time and peak memory against the task runs per policy (least squares, ``a + b * runs``
over the finished runs), prints the extrapolation to the full size and draws both.

``--progress S`` prints a line to stderr every S seconds of wall time (runs done, the
simulated time, CPU seconds, runs per CPU second, peak memory, load average, and what
grows with the backlog: ``Backlog``'s counts; default 60, 0 for none, and 0 for timing:
the counters cost a call per sorter call); the result's ``load_average_mean`` is the mean of the load averages those
lines read (a full-size run outlives the 1-minute average read at its end).

``--timeout S`` stops the simulation after S seconds of this process's CPU time (a
progress callback raises), reporting how far it got (simulated seconds, tasks completed),
so a too-large fraction still yields a rate. CPU time (``simulate_cpu_s``) is reported
next to wall time because the machine is shared: under load, wall time measures the
neighbours too; on an idle machine the two agree (the simulation is single-threaded).
Needs ../shared/traces/google-2011 (or --traces).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class _OutOfTime(Exception):
    pass


class Backlog:
    """What grows with the jobs waiting at once, for the ``--progress`` lines: the jobs in
    the system and those demanding, the sorter's node slots, and per task run since the
    previous line the decisions, the descents and candidate comparisons, the views'
    catch-ups (with their mean pending leaves) and rebuilds, the pick-entry renewals (a
    heap's, as a descent reads it) (with their mean renewed nodes). The sorter's entry
    points are wrapped on the instance (a call each: well under 1% of a decision),
    counted only, their results untouched."""

    COUNTED = ("pick", "pick_among", "catch_up", "rebuild", "flush")

    def __init__(self, simulator) -> None:
        self.simulator = simulator
        self.calls = dict.fromkeys(self.COUNTED, 0)
        # candidates compared, leaves replayed, pick entries renewed
        self.items = {"pick_among": 0, "catch_up": 0, "flush": 0}
        self.previous = (0, 0, dict(self.calls), dict(self.items))  # (completed, decisions, ...)
        sorter = simulator.scheduler.sorter
        self._count(sorter, "pick", "pick")
        self._count(sorter, "pick_among", "pick_among", sized=0)
        views = getattr(sorter, "views", None)
        if views is not None and hasattr(views, "_replay"):
            self._count(views, "_replay", "catch_up", sized=1)
            self._count(views, "_rebuild", "rebuild")
        if hasattr(sorter, "_renew_deferred"):  # (H-DRF, DFF: a heap's re-keyed children as a descent reads it)
            self._count(sorter, "_renew_deferred", "flush", sized=lambda view, nodes: len(nodes))

    def _count(self, owner, attribute: str, name: str, sized=None) -> None:
        calls, items, inner = self.calls, self.items, getattr(owner, attribute)
        if sized is None:
            def counted(*args, **kwargs):
                calls[name] += 1
                return inner(*args, **kwargs)
        elif sized == 0:  # (the first argument is the candidates)
            def counted(names, *args, **kwargs):
                calls[name] += 1
                items[name] += len(names)
                return inner(names, *args, **kwargs)
        elif sized == 1:  # (the second argument is the batch of leaves)
            def counted(view, leaves):
                calls[name] += 1
                items[name] += len(leaves)
                return inner(view, leaves)
        else:
            def counted(view, *rest):
                calls[name] += 1
                items[name] += sized(view, *rest)
                return inner(view, *rest)
        setattr(owner, attribute, counted)

    def line(self, completed: int) -> str:
        """``, 1,234 jobs in the system (567 demanding), ...`` since the previous line."""
        sim = self.simulator
        scheduler = sim.scheduler
        sorter = scheduler.sorter
        done0, decisions0, calls0, items0 = self.previous
        runs = max(completed - done0, 1)
        decisions = scheduler.decisions
        per_run = {k: (self.calls[k] - calls0[k]) / runs for k in self.COUNTED}
        slots = f", {len(sorter.key):,} sorter slots" if hasattr(sorter, "key") else ""  # (the tree sorters' table)
        text = (f", {len(sim._in_system):,} jobs in the system ({scheduler._filed:,} demanding{slots}), per run: "
                f"{(decisions - decisions0) / runs:.2f} decisions, {per_run['pick']:.2f} descents, "
                f"{per_run['pick_among']:.2f} comparisons "
                f"({(self.items['pick_among'] - items0['pick_among']) / max(self.calls['pick_among'] - calls0['pick_among'], 1):.1f} candidates)")
        catch_ups = self.calls["catch_up"] - calls0["catch_up"]
        if catch_ups or self.calls["rebuild"]:
            text += (f", {per_run['catch_up']:.2f} catch-ups ("
                     f"{(self.items['catch_up'] - items0['catch_up']) / max(catch_ups, 1):.1f} leaves), "
                     f"{per_run['rebuild']:.3f} view rebuilds")
        flushes = self.calls["flush"] - calls0["flush"]
        if flushes:
            text += (f", {per_run['flush']:.2f} pick flushes "
                     f"({(self.items['flush'] - items0['flush']) / flushes:.1f} entries)")
        self.previous = (completed, decisions, dict(self.calls), dict(self.items))
        return text


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fraction", type=float, help="of the full trace's 29 days, in (0, 1]")
    ap.add_argument("--policy", default="hdrf")
    ap.add_argument("--seed", type=int, default=0, help="the generator's and the simulation's seed")
    ap.add_argument("--traces", type=Path, default=REPO.parent / "shared" / "traces")
    ap.add_argument("--timeout", type=float, default=None, metavar="S", help="stop the simulation after S s")
    ap.add_argument("--profile", type=Path, default=None, metavar="FILE", help="cProfile the simulation into FILE")
    ap.add_argument("--profile-from", type=float, default=0.0, metavar="SHARE",
                    help="with --profile: start profiling once this share of the runs is done (a late stretch)")
    ap.add_argument("--materialize", action="store_true",
                    help="build the whole scenario first and simulate it up front (the non-streaming path)")
    ap.add_argument("--timeline", action="store_true",
                    help="streaming: write timeline.csv too (into the temporary directory; GBs at full size)")
    ap.add_argument("--offload", action="store_true",
                    help="streaming: run the output sink in a second process (sim.offload.OffloadedSink)")
    ap.add_argument("--offload-recorder", action="store_true",
                    help="streaming: --offload, and the child makes the timeline rows too (OffloadedSink(records=True))")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="streaming: keep summary.json (and timeline.csv) in DIR instead of a temporary directory")
    ap.add_argument("--progress", type=float, default=60.0, metavar="S",
                    help="print how far the simulation is to stderr every S seconds of wall time (0: never)")
    ap.add_argument("--report", type=Path, default=None, metavar="RUNS.jsonl", help="fit and plot earlier runs")
    ap.add_argument("--plot", type=Path, default=None, metavar="FILE", help="with --report: the plot to write")
    args = ap.parse_args(argv)
    args.offload = args.offload or args.offload_recorder
    if args.report:
        return report(args.report, args.plot)
    if args.fraction is None:  # (``make bench`` runs every benchmark without arguments)
        args.fraction = 0.0005
        print("no --fraction given: the smallest of the documented runs, 0.0005", file=sys.stderr)

    import tempfile
    from dataclasses import replace

    from fairshare.policies import make_policy
    from fairshare.sim import SimOptions, Simulator, simulate
    from fairshare.sim.stream import StreamingOutput
    from fairshare.traces import google_full

    directory = args.traces / "google-2011"
    if not directory.is_dir():
        print(f"no Google 2011 parts under {directory} (give --traces)", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    templates = google_full.templates_from_parts(directory)
    t1 = time.monotonic()
    scenario = None
    if args.materialize:
        scenario = google_full.materialize(templates, google_full.generate(templates, args.fraction, args.seed))
        jobs = len(scenario.jobs)
        runs = sum(j.total_count or 0 for j in scenario.jobs)
    else:  # one counting pass (nothing kept): the workload's size, whatever the timeout
        jobs = runs = 0
        for job in google_full.generate(templates, args.fraction, args.seed):
            jobs += 1
            runs += job.total_count or 0
    t2 = time.monotonic()
    memory_before_sim = peak_mb()

    c2 = time.process_time()
    deadline = None if args.timeout is None else c2 + args.timeout
    reached = {"now": 0.0, "completed": 0}
    w2 = time.monotonic()
    # the load average sampled at every progress line: its mean goes into the result (a
    # long run outlives the 1-minute average read at its end)
    loads: list[float] = []
    backlog: list[Backlog] = []  # (the streamed run's, once its simulator exists)
    next_line = w2 + args.progress if args.progress > 0 else math.inf

    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    profile_from = args.profile_from * runs if profiler is not None and args.profile_from > 0 else None

    def progress(now: float, completed: int) -> None:
        nonlocal next_line, profile_from
        reached["now"], reached["completed"] = now, completed
        if profile_from is not None and completed >= profile_from:
            profile_from = None
            print(f"[{args.policy} {args.fraction:g}] profiling from {completed:,} runs", file=sys.stderr, flush=True)
            profiler.enable()
        if deadline is not None and time.process_time() > deadline:
            raise _OutOfTime
        wall = time.monotonic()
        if wall >= next_line:
            next_line = wall + args.progress
            loads.append(os.getloadavg()[0])
            cpu = time.process_time() - c2
            print(f"[{args.policy} {args.fraction:g}] {completed:,} of {runs:,} runs ({completed / max(runs, 1):.1%}), "
                  f"simulated {now / 3600:.1f} h (arrivals over the first {google_full.span_of(args.fraction) / 3600:.1f} h), "
                  f"{cpu:.0f} s CPU, {completed / max(cpu, 1e-9):,.0f} runs/s, peak {peak_mb():.0f} MB, "
                  f"load {loads[-1]:.1f}{backlog[0].line(completed) if backlog else ''}",
                  file=sys.stderr, flush=True)

    if profiler is not None and profile_from is None:
        profiler.enable()
    finished = True
    result = None
    sink = None
    rows = None
    scratch = None
    try:
        if args.materialize:
            result = simulate(scenario, args.policy, SimOptions(seed=args.seed), progress=progress)
            rows = len(result.rows)
        else:
            out_dir = args.out
            if out_dir is None:
                scratch = tempfile.TemporaryDirectory(prefix="bench-google-full-")
                out_dir = Path(scratch.name)
            empty = replace(templates.base, jobs=(), source="google2011 full-size generator")
            if args.offload:  # (built in the child: the same sink, the same calls, another core)
                from functools import partial

                from fairshare.sim.offload import OffloadedSink

                sink = OffloadedSink(partial(StreamingOutput, empty, out_dir, timeline=args.timeline),
                                     records=args.offload_recorder)
            else:
                sink = StreamingOutput(empty, out_dir, timeline=args.timeline)
            sim = Simulator(empty, make_policy(args.policy), SimOptions(seed=args.seed), progress,
                            arrivals=google_full.generate(templates, args.fraction, args.seed), sink=sink)
            if args.progress > 0:
                backlog.append(Backlog(sim))
            result = sim.run()
            sink.finish(result)
            rows = sink.rows_written
    except _OutOfTime:
        finished = False
        result = None
    finally:
        if args.offload and sink is not None:
            sink.close()  # (a stopped run's child too)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        if scratch is not None:
            scratch.cleanup()
    t3 = time.monotonic()
    c3 = time.process_time()
    out = {
        "fraction": args.fraction, "policy": args.policy, "seed": args.seed,
        "mode": "materialized" if args.materialize else (("streamed+timeline" if args.timeline else "streamed")
                                                          + ("+offload" if args.offload else "")
                                                          + ("-recorder" if args.offload_recorder else "")),
        "span_s": google_full.span_of(args.fraction), "jobs": jobs, "task_runs": runs,
        "machines": len(templates.base.cluster.nodes),
        "full_task_runs": round(google_full.expected_size(templates, 1.0)["task runs"]),
        "templates_s": round(t1 - t0, 2), "generate_s": round(t2 - t1, 2), "simulate_s": round(t3 - t2, 2),
        "simulate_cpu_s": round(c3 - c2, 2), "load_average": round(os.getloadavg()[0], 1),
        "load_average_mean": round(sum(loads) / len(loads), 1) if loads else None,
        "finished": finished,
        "tasks_completed": result.tasks_completed if result else reached["completed"],
        "simulated_s": result.end_time if result else reached["now"],
        "timeline_rows": rows,
        "peak_mb_before_simulate": round(memory_before_sim), "peak_mb": round(peak_mb()),
    }
    if args.offload:  # (the sink's process: ended by now, so RUSAGE_CHILDREN holds its peak)
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        out["peak_mb_sink_process"] = round(child.ru_maxrss / 1024)
        out["sink_process_cpu_s"] = round(child.ru_utime + child.ru_stime, 2)
    print(json.dumps(out), flush=True)
    if profiler is not None:
        import pstats

        pstats.Stats(str(args.profile), stream=sys.stderr).sort_stats("tottime").print_stats(15)
    return 0


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares ``y = a + b x``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def report(path: Path, plot_path: Path | None) -> int:
    from fairshare.traces.google_full import FULL_JOBS

    runs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for r in runs:  # (lines from before streaming have no mode: they were materialized)
        r.setdefault("mode", "materialized")
    full_runs = runs[0]["full_task_runs"]  # the generator's expectation at fraction 1
    # one series per policy and mode (streamed and materialized runs cost differently)
    series = sorted({(r["policy"], r["mode"]) for r in runs})
    print(f"full size: {FULL_JOBS:,} jobs, {full_runs:,} task runs (expected)")
    for policy, mode in series:
        done = sorted((r for r in runs if (r["policy"], r["mode"]) == (policy, mode) and r["finished"]),
                      key=lambda r: r["task_runs"])
        if len(done) < 2:
            continue
        xs = [r["task_runs"] for r in done]
        a_t, b_t = fit_line(xs, [r["simulate_cpu_s"] for r in done])
        a_m, b_m = fit_line(xs, [r["peak_mb"] for r in done])
        # the marginal rate between the two largest finished runs (the fit's slope weighs the small ones)
        last, prev = done[-1], done[-2]
        marginal = (last["simulate_cpu_s"] - prev["simulate_cpu_s"]) / (last["task_runs"] - prev["task_runs"])
        by_marginal = last["simulate_cpu_s"] + marginal * (full_runs - last["task_runs"])
        # the growth exponent between the two largest runs (1: linear), carried to the full size
        k = math.log(last["simulate_cpu_s"] / prev["simulate_cpu_s"]) / math.log(last["task_runs"] / prev["task_runs"])
        by_power = last["simulate_cpu_s"] * (full_runs / last["task_runs"]) ** k
        print(f"{policy} ({mode}): CPU time = {a_t:.1f} s + {b_t * 1e6:.1f} s per million runs -> full size "
              f"{(a_t + b_t * full_runs) / 3600:.1f} h (marginal between the two largest runs: "
              f"{marginal * 1e6:.1f} s per million -> {by_marginal / 3600:.1f} h; growth exponent there "
              f"{k:.2f} -> {by_power / 3600:.1f} h); "
              f"memory = {a_m:.0f} MB + {b_m * 1e6:.0f} MB per million runs -> {(a_m + b_m * full_runs) / 1024:.1f} GB")
    if plot_path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 3.8))
        for policy, mode in series:
            mine = sorted((r for r in runs if (r["policy"], r["mode"]) == (policy, mode)),
                          key=lambda r: r["task_runs"])
            xs = [r["task_runs"] / 1e6 for r in mine]
            style = "o--" if mode == "materialized" else "s-"
            label = f"{policy} ({mode})"
            line, = ax_t.plot(xs, [r["simulate_cpu_s"] for r in mine], style, label=label)
            ax_m.plot(xs, [r["peak_mb"] for r in mine], style, color=line.get_color(), label=label)
            for r in mine:
                if not r["finished"]:
                    ax_t.annotate("stopped", (r["task_runs"] / 1e6, r["simulate_cpu_s"]), fontsize=7)
        for ax in (ax_t, ax_m):
            ax.set_xlabel("task runs in the workload (millions; full size ~23.5)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        ax_t.set_ylabel("simulate CPU time (s)")
        ax_m.set_ylabel("peak resident memory (MB)")
        fig.suptitle("Google 2011 full-size generator: first fractions of the 29 days")
        fig.tight_layout()
        plot_path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(plot_path)
        print(f"wrote {plot_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
