"""Scaling curves of every online policy: decisions/s and events/s from 100 to 10,000 jobs
and nodes, and how the cost per decision grows (issue 13, item 3).

Workload: ``generate.hierarchy_scenario`` (the workload of ``bench_decisions.py``) with
``n`` jobs in a 3-level hierarchy (fan-out 4: 64 leaf queues) on ``n`` nodes of 64 units of
each of 4 resources, each job its own task shape (up to 625 distinct shapes) and an
unbounded number of tasks. For each policy and each ``n``, in a fresh process:

* **fill**: ``schedule(0)`` on the empty cluster; every launch is a decision
  (about 72 per node);
* **steady**: the saturated steady state: finish one running task (the oldest), then
  ``schedule(now)`` re-fills the freed room (after ``--warmup`` untimed completions,
  default 0). An *event* is one completion with the
  re-fill it triggers; events/s counts them, decisions/s counts the launches. It runs
  ``--events`` completions or until ``--budget`` CPU seconds, whichever comes first.

Times are this process's CPU time (``time.process_time``), which other processes on a
shared machine disturb far less than wall time.

Growth: between consecutive sizes the cost per decision ``t(n)`` is fitted as ``n^k``
(``k = log(t2/t1) / log(n2/n1)``), and over all sizes by least squares on log-log. ``k``
near 0 means the cost per decision does not grow with the size (constant or log n: a
log n cost gives k of about 0.1-0.2 over this range, since log 10,000 / log 100 = 2);
``k`` near 1 means linear in n.

Run one point::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_scaling.py --policy hdrf --size 1000

On a shared machine, ``--windows K`` times K windows back to back (read the run by their
median or best), and ``--paired 1000,10000 --windows K`` builds both sizes in one process
and times their windows in turn, K rounds, each after ``--rewarm`` untimed completions of
its size: a k per round from two windows seconds apart, and their median::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_scaling.py --policy hdrf --paired 1000,10000 \\
        --warmup 2000 --events 2000 --windows 9

all points (one process each, JSON lines appended to the output)::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_scaling.py --all --out benchmarks/scaling_runs.jsonl

and the table and plot from them (without arguments: every policy up to 1,000, and the
table)::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_scaling.py --report benchmarks/scaling_runs.jsonl \\
        --plot docs/img/scaling.svg
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from generate import hierarchy_scenario  # noqa: E402

from fairshare.engine import Scheduler  # noqa: E402
from fairshare.policies import REGISTRY, PolicyModeError, make_policy  # noqa: E402

SIZES = (100, 300, 1000, 3000, 10000)
CLOCK = time.process_time


def online_policies() -> list[str]:
    """The registry's policies that have an online mode (``ceei`` and ``slowdown`` have
    none: building a scheduler with them raises ``PolicyModeError``)."""
    sc = hierarchy_scenario(jobs=4, levels=1, nodes=1, seed=0)
    out = []
    for name in REGISTRY:
        try:
            Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(name))
        except PolicyModeError:
            continue
        out.append(name)
    return out


class SteadyState:
    """One point's scheduler: built and filled (at most ``fill_budget`` CPU seconds: the
    sorter then answers "nothing", and the steady state, which needs the full cluster, is
    not measured), then driven one completion at a time (:meth:`complete`), timed in
    windows (:meth:`window`) that count the full garbage collections inside them."""

    def __init__(self, policy: str, size: int, fill_budget: float):
        sc = hierarchy_scenario(jobs=size, levels=3, fanout=4, nodes=size, seed=0)
        self.jobs, self.nodes = len(sc.jobs), len(sc.cluster.nodes)
        t0 = CLOCK()
        sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
        for job in sc.jobs:
            sched.submit(job, 0.0)
        self.build_s = CLOCK() - t0
        self.sched = sched
        self.stopped = False
        self.events = 0  # completions so far (each at time ``events``)
        sorter = sched.sorter
        pick, pick_among = sorter.pick, sorter.pick_among
        t0 = CLOCK()

        def over() -> bool:
            self.stopped = self.stopped or CLOCK() - t0 > fill_budget
            return self.stopped

        sorter.pick = lambda runnable, now=0.0: None if over() else pick(runnable, now)
        sorter.pick_among = lambda names, runnable, now=0.0: None if over() else pick_among(names, runnable, now)
        self.fill = len(sched.schedule(0.0))
        self.fill_s = CLOCK() - t0
        sorter.pick, sorter.pick_among = pick, pick_among
        # full (oldest-generation) garbage collections inside a window: one costs a pass
        # over every live object (tenths of a second at 10,000 jobs), so whether one lands
        # in a short window moves its rate; reported (how many, and their CPU seconds) so
        # that a run can be read with it
        self.full_collections = 0
        self.full_collection_s = 0.0
        self._started = 0.0

    def count_full(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self.full_collections += 1
            self._started = CLOCK()
        else:
            self.full_collection_s += CLOCK() - self._started

    def complete(self, digest=None) -> int:
        """Finish the oldest running task (insertion order) and re-fill: its decisions.
        With ``digest`` (a ``hashlib`` object), each launch's job, node and task, in order,
        are added to it (``bench_interleave.py``, ``bench_cache_warmth.py``: two runs
        decided the same when their digests are)."""
        sched = self.sched
        self.events += 1
        sched.finish(next(iter(sched.tasks)), float(self.events))
        launches = sched.schedule(float(self.events))
        if digest is not None:
            for launch in launches:
                digest.update(f"{launch.job}|{launch.node}|{launch.task_id}\n".encode())
        return len(launches)

    def warm(self, completions: int) -> int:
        """Untimed completions (what happens once per run, a saturated set's view built
        the first time it is seen, out of the steady state): how many ran."""
        done = 0
        while not self.stopped and done < completions and self.sched.tasks:
            self.complete()
            done += 1
        return done

    def window(self, events: int, budget: float, digest=None) -> dict:
        """One timed window: up to ``events`` completions (or ``budget`` CPU seconds),
        each with the decisions it allows (their launches added to ``digest``, if given:
        :meth:`complete`)."""
        self.full_collections, self.full_collection_s = 0, 0.0
        gc.callbacks.append(self.count_full)
        try:
            done = decisions = 0
            t0 = CLOCK()
            while not self.stopped and done < events and self.sched.tasks:
                decisions += self.complete(digest)
                done += 1
                if done % 50 == 0 and CLOCK() - t0 > budget:
                    break
            seconds = CLOCK() - t0
        finally:
            gc.callbacks.remove(self.count_full)
        return {"events": done, "decisions": decisions, "s": round(seconds, 4),
                "full_collections": self.full_collections, "full_collection_s": round(self.full_collection_s, 4)}


def collect_set_up() -> None:
    """The set-up allocated the whole state at once (about a million objects at 10,000,
    most of them running tasks), and the collector's first full pass after it comes a few
    thousand allocations later, inside the window when nothing runs before it: one pass
    now, untimed, so the window holds the collections the steady state itself sets off."""
    gc.collect()


def measure(policy: str, size: int, events: int, budget: float, fill_budget: float, warmup: int = 0,
            collect_first: bool = False, windows: int = 1) -> dict:
    point = SteadyState(policy, size, fill_budget)
    warm = point.warm(warmup)
    if collect_first:
        collect_set_up()
    # ``windows`` > 1: more windows back to back after the first, each timed alone, so that
    # a run on a shared machine can be read by its best or median window (a burst of another
    # tenant's work slows one window, not all)
    measured = []
    for _ in range(max(1, windows)):
        measured.append(point.window(events, budget))
        if measured[-1]["events"] < events:
            break
    first = measured[0]
    return {
        "policy": policy, "size": size, "jobs": point.jobs, "nodes": point.nodes,
        "build_s": round(point.build_s, 4),
        "fill_decisions": point.fill, "fill_s": round(point.fill_s, 4), "fill_complete": not point.stopped,
        "warmup_events": warm,
        "steady_events": first["events"], "steady_decisions": first["decisions"], "steady_s": first["s"],
        "steady_full_collections": first["full_collections"],
        "steady_full_collection_s": first["full_collection_s"],
        "collected_first": collect_first,
        "load_avg": round(os.getloadavg()[0], 2),
        **({"windows": measured} if windows > 1 else {}),
    }


def measure_paired(policy: str, sizes: tuple[int, int], events: int, budget: float, fill_budget: float,
                   warmup: int, windows: int, rewarm: int) -> dict:
    """The growth exponent from windows of two sizes taken in turn in one process: both
    states built and filled, ``warmup`` untimed completions each, one full collection;
    then ``windows`` rounds, each a window of each size (smaller first in even rounds,
    larger first in odd ones) after ``rewarm`` untimed completions of that size (its state
    back in the caches the other size's window used). On a shared machine a burst of
    another tenant's work lasts seconds to minutes, so two windows a second apart see
    about the same machine, where two processes minutes apart may not: each round gives
    its own ``k = log10(rate small / rate large) / log10(large / small)``, and their
    median is the run's."""
    small, large = sorted(sizes)
    points = {size: SteadyState(policy, size, fill_budget) for size in (small, large)}
    for point in points.values():
        point.warm(warmup)
    collect_set_up()
    per_size: dict[int, list[dict]] = {small: [], large: []}
    ks = []
    for round_ in range(windows):
        order = (small, large) if round_ % 2 == 0 else (large, small)
        for size in order:
            points[size].warm(rewarm)
            per_size[size].append(points[size].window(events, budget))
        rates = [per_size[size][-1]["decisions"] / per_size[size][-1]["s"] if per_size[size][-1]["s"] > 0 else 0.0
                 for size in (small, large)]
        # (a window without a decision, the fill stopped or no task left, gives no k)
        ks.append(round(math.log10(rates[0] / rates[1]) / math.log10(large / small), 4) if min(rates) > 0
                  else math.nan)
    measured_ks = [k for k in ks if not math.isnan(k)]
    median_k = round(statistics.median(measured_ks), 4) if measured_ks else math.nan
    return {
        "policy": policy, "sizes": [small, large], "events": events, "warmup_events": warmup,
        "rewarm_events": rewarm,
        "fill_complete": all(not p.stopped for p in points.values()),
        "windows": {str(size): per_size[size] for size in (small, large)},
        "k_per_round": ks, "k_median": median_k,
        "load_avg": round(os.getloadavg()[0], 2),
    }


def run_all(args) -> int:
    policies = args.policies.split(",") if args.policies else online_policies()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(SIZES)
    for size in sizes:
        for policy in policies:
            cmd = [sys.executable, __file__, "--policy", policy, "--size", str(size),
                   "--events", str(args.events), "--warmup", str(args.warmup),
                   *(["--collect-first"] if args.collect_first else []), "--windows", str(args.windows),
                   "--budget", str(args.budget),
                   "--fill-budget", str(args.fill_budget)]
            print(f"{policy} n={size} ...", file=sys.stderr, flush=True)
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=False)
            except subprocess.TimeoutExpired:
                line = json.dumps({"policy": policy, "size": size, "error": f"timeout after {args.timeout} s"})
            else:
                if out.returncode != 0:
                    line = json.dumps({"policy": policy, "size": size,
                                       "error": (out.stderr.strip().splitlines() or ["?"])[-1][:300]})
                else:
                    line = out.stdout.strip().splitlines()[-1]
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(line + "\n")
    return 0


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of log y on log x."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def growth_words(k: float) -> str:
    if k != k:
        return "?"
    if k < 0.25:
        return "flat (constant to log n)"
    if k < 0.6:
        return "sublinear"
    if k < 1.2:
        return "about linear"
    return "superlinear"


def report(path: pathlib.Path, plot: pathlib.Path | None) -> int:
    runs: dict[tuple[str, int], dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            runs[(r["policy"], r["size"])] = r  # the last run of a point wins
    policies = list(dict.fromkeys(p for p, _ in runs))
    sizes = sorted({s for _, s in runs})
    print("| policy | " + " | ".join(f"n={s:,}" for s in sizes) + " | k fill | k steady | steady cost growth |")
    print("|---|" + "---:|" * len(sizes) + "---:|---:|---|")
    curves = {}
    for p in policies:
        cells, fill_pts, steady_pts = [], [], []
        for s in sizes:
            r = runs.get((p, s))
            if r is None:
                cells.append("not run")
            elif "error" in r:
                cells.append(r["error"][:40])
            else:
                fr = r["fill_decisions"] / r["fill_s"] if r["fill_s"] else float("nan")
                if r.get("fill_complete", True):
                    sr = r["steady_decisions"] / r["steady_s"] if r["steady_s"] else float("nan")
                    er = r["steady_events"] / r["steady_s"] if r["steady_s"] else float("nan")
                    cells.append(f"{fr:,.0f} / {sr:,.0f} / {er:,.0f}")
                else:
                    cells.append(f"{fr:,.0f}* / - / -")
                if r["fill_decisions"]:
                    fill_pts.append((s, r["fill_s"] / r["fill_decisions"]))
                if r["steady_decisions"] and r.get("fill_complete", True):
                    steady_pts.append((s, r["steady_s"] / r["steady_decisions"]))
        kf = slope(fill_pts) if len(fill_pts) > 1 else float("nan")
        ks = slope(steady_pts) if len(steady_pts) > 1 else float("nan")
        curves[p] = (fill_pts, steady_pts)
        print(f"| `{p}` | " + " | ".join(cells) + f" | {kf:.2f} | {ks:.2f} | {growth_words(ks)} |")
    print("\ncells: fill decisions/s / steady decisions/s / steady events/s (CPU time); *: the fill was "
          "stopped at its CPU budget (rate over the decisions made; no steady state); "
          "k: cost per decision ~ n^k (least squares over the sizes run)")
    if plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
        for ax, idx, title in ((axes[0], 0, "fill (empty cluster)"), (axes[1], 1, "saturated steady state")):
            for i, (p, pts) in enumerate(curves.items()):
                series = pts[idx]
                if series:  # (distinct colours and markers: eleven policies)
                    ax.plot([s for s, _ in series], [1.0 / t for _, t in series], label=p,
                            color=plt.get_cmap("tab20")(2 * i % 20 + (2 * i // 20)), marker="os^vD<>pX*h"[i % 11])
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("jobs = nodes (n)")
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("decisions per CPU second")
        axes[0].text(0.02, 0.02, "a fill stopped at its CPU budget is plotted at its rate so far", fontsize=7,
                     transform=axes[0].transAxes)
        axes[1].legend(fontsize=8, ncol=2)
        fig.suptitle("Online decisions/s vs size (3-level hierarchy, 4 resources; benchmarks/bench_scaling.py)")
        fig.tight_layout()
        fig.savefig(plot)
        print(f"wrote {plot}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", help="one point: this policy")
    ap.add_argument("--size", type=int, help="one point: jobs = nodes = this")
    ap.add_argument("--events", type=int, default=2000, help="steady-state completions (default 2000)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="untimed completions between the fill and the steady state's window (default 0)")
    ap.add_argument("--collect-first", action="store_true",
                    help="one full garbage collection, untimed, just before the window (the set-up's own)")
    ap.add_argument("--windows", type=int, default=1,
                    help="timed windows of --events completions back to back (default 1); with more, each "
                         "window's numbers are listed under \"windows\" (the steady_* fields stay the "
                         "first window's): read a shared machine's run by its best or median window")
    ap.add_argument("--paired", metavar="SMALL,LARGE",
                    help="the growth exponent from both sizes in one process, their windows taken in turn "
                         "(--windows rounds, --rewarm untimed completions before each window): k per round "
                         "and its median")
    ap.add_argument("--rewarm", type=int, default=200,
                    help="with --paired: untimed completions before each window (default 200)")
    ap.add_argument("--budget", type=float, default=5.0, help="steady-state CPU seconds at most (default 5)")
    ap.add_argument("--fill-budget", type=float, default=120.0,
                    help="stop the fill after this many CPU seconds (default 120; no steady state then)")
    ap.add_argument("--all", action="store_true", help="every online policy at every size, a process each")
    ap.add_argument("--policies", help="with --all: comma-separated policies (default: every online one)")
    ap.add_argument("--sizes", help="with --all: comma-separated sizes (default 100,300,1000,3000,10000)")
    ap.add_argument("--timeout", type=float, default=900, help="with --all: seconds per point (default 900)")
    ap.add_argument("--out", type=pathlib.Path, help="with --all: append the JSON lines here")
    ap.add_argument("--report", type=pathlib.Path, metavar="RUNS.jsonl", help="table (and --plot) from runs")
    ap.add_argument("--plot", type=pathlib.Path, help="with --report: write the plot here")
    args = ap.parse_args(argv)
    if args.windows < 1:
        ap.error(f"--windows must be at least 1 (got {args.windows})")
    if args.report:
        return report(args.report, args.plot)
    if args.paired:
        try:
            sizes = tuple(int(x) for x in args.paired.split(","))
        except ValueError:
            sizes = ()
        if len(sizes) != 2 or min(sizes) < 1 or sizes[0] == sizes[1]:
            ap.error(f"--paired takes two different sizes, SMALL,LARGE (got {args.paired!r})")
        if not args.policy:
            ap.error("--paired needs --policy")
        if args.rewarm < 0:
            ap.error(f"--rewarm must be at least 0 (got {args.rewarm})")
        print(json.dumps(measure_paired(args.policy, sizes, args.events, args.budget, args.fill_budget, args.warmup,
                                        args.windows, args.rewarm)))
        return 0
    if args.all:
        return run_all(args)
    if not args.policy and not args.size:  # no mode (``make bench``): a quick table up to 1,000
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            args.out, args.sizes = pathlib.Path(d) / "runs.jsonl", args.sizes or "100,300,1000"
            run_all(args)
            return report(args.out, None)
    if not args.policy or not args.size:
        ap.error("give --policy and --size (one point), --all, or --report")
    print(json.dumps(measure(args.policy, args.size, args.events, args.budget, args.fill_budget, args.warmup,
                             args.collect_first, args.windows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
