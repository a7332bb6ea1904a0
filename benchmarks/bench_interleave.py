"""Before and after on a shared machine: two source trees' steady states timed in
alternating short windows, and whether they decide the same (issue 24, round 13).

On this project's 2-core shared machines the rate of the same code moves by 2x from one
window to the next for tens of seconds (another tenant's memory traffic; a minute-apart
process pair, ``bench_scaling.py`` run twice, cannot tell a 5% change from that). Here
each tree (``--before DIR``, ``--after DIR``: checkouts, their kernels built in place) and
each size (``--sizes``) gets one worker process holding ``bench_scaling.py``'s
``SteadyState`` (the 3-level hierarchy, ``n`` jobs on ``n`` nodes), built and filled one
after another, then ``--warmup`` untimed completions and one full collection. Then
``--rounds`` rounds: in each, for each size, the two trees' windows run back to back
(``--window`` completions each, after ``--rewarm`` untimed ones that bring the state back
into the caches), one worker at a time, their order alternated from round to round (and
the sizes' order with it). Two windows a fraction of a second apart see about the same
machine, so each pair gives a ratio after/before, and each tree's two sizes in one round
give a growth exponent ``k = log10(rate small / rate large) / log10(large / small)``; the
run reports their medians and quartiles.

**Same decisions.** Both trees start from the same scenario and finish the same tasks in
the same order, so a change that keeps every decision makes the same launches: each
window's launch digest (job, node, task of every launch, in order) must be the same in
both trees, window by window. A difference is reported (``digests_differ``, the first
window where it happened) and the exit status is 1.

Times are each worker's CPU time (``time.process_time``), as in ``bench_scaling.py``.
(``ab_decisions.py`` alternates two trees too, but a process per round, each filling its
cluster again: at 10,000 jobs the two sides of a pair run minutes apart.)

    .venv/bin/python benchmarks/bench_interleave.py --before /path/to/old/checkout --after . \\
        --policy hdrf --sizes 1000,10000

Prints one JSON object; ``--out FILE`` appends it to FILE as a line as well.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


# --- the worker: one tree, one size ------------------------------------------------------------

def serve(policy: str, size: int, warmup: int, fill_budget: float) -> int:
    """Build the steady state, say so, then answer ``window E B R`` lines (R untimed
    completions, then a window of at most E completions or B CPU seconds) with a JSON
    line each, until the input ends."""
    import gc

    sys.path.insert(0, str(HERE))
    from bench_scaling import SteadyState

    point = SteadyState(policy, size, fill_budget)
    point.warm(warmup)
    gc.collect()
    from fairshare.policies.machinery import compiled

    print(json.dumps({"ready": True, "fill_complete": not point.stopped, "running": len(point.sched.tasks),
                      "compiled": compiled.describe()}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        events, budget, rewarm = int(words[1]), float(words[2]), int(words[3])
        point.warm(rewarm)
        digest = hashlib.sha256()
        measured = point.window(events, budget, digest)
        print(json.dumps({**measured, "digest": digest.hexdigest()[:16]}), flush=True)
    return 0


class Worker:
    """A worker process: ``tree``'s ``src`` first on its path."""

    def __init__(self, tree: pathlib.Path, label: str, policy: str, size: int, warmup: int, fill_budget: float):
        self.label, self.size = label, size
        env = dict(os.environ, PYTHONPATH=str(tree / "src"))
        self.proc = subprocess.Popen(
            [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", "--policy", policy,
             "--size", str(size), "--warmup", str(warmup), "--fill-budget", str(fill_budget)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(tree))
        self.ready = self._answer()

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise RuntimeError(f"the {self.label} worker at {self.size} stopped (exit status {code}): "
                               f"its error is above")
        return json.loads(line)

    def window(self, events: int, budget: float, rewarm: int) -> dict:
        self.proc.stdin.write(f"window {events} {budget} {rewarm}\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def quartiles(values: list[float]) -> dict:
    """Median and quartiles (``statistics.quantiles``, exclusive method), rounded."""
    if not values:
        return {"n": 0}
    if len(values) == 1:
        return {"n": 1, "median": round(values[0], 4)}
    q1, _, q3 = statistics.quantiles(values, n=4)
    return {"n": len(values), "median": round(statistics.median(values), 4), "q1": round(q1, 4), "q3": round(q3, 4)}


def rate(window: dict) -> float:
    return window["decisions"] / window["s"] if window["s"] > 0 and window["decisions"] else 0.0


def compare(before: pathlib.Path, after: pathlib.Path, policy: str, sizes: list[int], warmup: int, window: int,
            rounds: int, rewarm: int, budget: float, fill_budget: float, progress) -> dict:
    trees = {"before": before, "after": after}
    workers: dict[tuple[str, int], Worker] = {}
    try:
        for size in sizes:  # (built one at a time: a build alone on the machine)
            for label, tree in trees.items():
                progress(f"building {label} at {size} ...")
                workers[label, size] = Worker(tree, label, policy, size, warmup, fill_budget)
        windows: dict[str, dict[str, list[dict]]] = {label: {str(s): [] for s in sizes} for label in trees}
        differ = None
        for round_ in range(rounds):
            labels = ("before", "after") if round_ % 2 == 0 else ("after", "before")
            for size in (sizes if round_ % 2 == 0 else sizes[::-1]):
                got = {label: workers[label, size].window(window, budget, rewarm) for label in labels}
                for label in labels:
                    windows[label][str(size)].append(got[label])
                if differ is None and got["before"]["digest"] != got["after"]["digest"]:
                    differ = {"round": round_, "size": size}
            progress(f"round {round_ + 1}/{rounds}")
        ready = {f"{label}@{size}": w.ready for (label, size), w in workers.items()}
    finally:
        for w in workers.values():
            w.close()
    out: dict = {"policy": policy, "sizes": sizes, "window": window, "rounds": rounds, "rewarm": rewarm,
                 "warmup": warmup, "before": str(before), "after": str(after), "workers": ready,
                 "digests_differ": differ}
    for size in sizes:
        pairs = list(zip(windows["before"][str(size)], windows["after"][str(size)]))
        ratios = [rate(a) / rate(b) for b, a in pairs if rate(a) and rate(b)]
        out[f"after_over_before_{size}"] = quartiles(ratios)
        for label in trees:
            rates = [rate(w) for w in windows[label][str(size)]]
            out[f"{label}_{size}_decisions_per_s"] = quartiles(rates) | {"best": round(max(rates, default=0.0))}
            out[f"{label}_{size}_completions_per_s"] = quartiles(
                [w["events"] / w["s"] for w in windows[label][str(size)] if w["s"] > 0])
    if len(sizes) == 2:
        small, large = sorted(sizes)
        for label in trees:
            ks = [math.log10(rate(a) / rate(b)) / math.log10(large / small)
                  for a, b in zip(windows[label][str(small)], windows[label][str(large)]) if rate(a) and rate(b)]
            out[f"{label}_k"] = quartiles(ks)
    out["windows"] = windows
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=pathlib.Path, help="a checkout: its src/ is imported by the before workers")
    ap.add_argument("--after", type=pathlib.Path, help="a checkout: its src/ is imported by the after workers")
    ap.add_argument("--policy", default="hdrf", help="an online policy (default hdrf)")
    ap.add_argument("--sizes", default="1000,10000", help="comma-separated jobs = nodes (default 1000,10000)")
    ap.add_argument("--warmup", type=int, default=2000, help="untimed completions after the fill (default 2000)")
    ap.add_argument("--window", type=int, default=500, help="completions per timed window (default 500)")
    ap.add_argument("--rounds", type=int, default=20, help="rounds of windows (default 20)")
    ap.add_argument("--rewarm", type=int, default=100, help="untimed completions before each window (default 100)")
    ap.add_argument("--budget", type=float, default=20.0, help="CPU seconds a window may take at most (default 20)")
    ap.add_argument("--fill-budget", type=float, default=300.0, help="CPU seconds a fill may take (default 300)")
    ap.add_argument("--out", type=pathlib.Path, help="append the JSON result to this file as a line")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on standard error")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return serve(args.policy, args.size, args.warmup, args.fill_budget)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes: comma-separated integers, not {args.sizes!r}")
    if not sizes or any(s <= 0 for s in sizes) or len(set(sizes)) != len(sizes):
        ap.error(f"--sizes: distinct positive integers, not {args.sizes!r}")
    for flag in ("before", "after"):
        tree = getattr(args, flag)
        if tree is None:
            ap.error(f"--{flag}: a checkout is required")
        if not (tree / "src" / "fairshare" / "__init__.py").is_file():
            ap.error(f"--{flag}: {str(tree)!r} is not a fairshare checkout (no src/fairshare/__init__.py)")
    for flag in ("window", "rounds"):
        if getattr(args, flag) < 1:
            ap.error(f"--{flag}: at least 1, not {getattr(args, flag)}")
    for flag in ("warmup", "rewarm"):
        if getattr(args, flag) < 0:
            ap.error(f"--{flag}: not negative, not {getattr(args, flag)}")
    for flag in ("budget", "fill_budget"):
        if not getattr(args, flag) > 0:
            ap.error(f"--{flag.replace('_', '-')}: positive, not {getattr(args, flag)}")

    def progress(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    try:
        result = compare(args.before.resolve(), args.after.resolve(), args.policy, sizes, args.warmup, args.window,
                         args.rounds, args.rewarm, args.budget, args.fill_budget, progress)
    except RuntimeError as e:  # (a worker that stopped: its own error went to standard error)
        print(f"bench_interleave: {e}", file=sys.stderr)
        return 2
    line = json.dumps(result)
    print(line)
    if args.out:
        with args.out.open("a") as f:
            f.write(line + "\n")
    return 1 if result["digests_differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
