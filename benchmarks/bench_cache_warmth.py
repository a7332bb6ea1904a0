"""How much of a decision's cost is the memory it reads: each sampled decision of the
saturated steady state timed three ways (issue 24, round 12).

On ``bench_scaling.py``'s workload (its ``SteadyState``: the 3-level hierarchy, ``n`` jobs
on ``n`` nodes, after ``--warmup`` untimed completions), every ``--every``-th call of the
sorter's ``pick`` (the descent) and of its ``pick_among`` (the candidates' comparison) is
timed:

* **in flow**: the call the engine makes, less the time inside the engine's ``runnable``
  checks (the engine's work, not the sorter's). For a sorter whose ``view`` property
  catches its view up (the H-DRF sorter), a ``pick``'s catch-up is timed apart, first
  (``pick`` begins with it anyway: the same work in the same order);
* **warm**: the same call again at once, with a ``runnable`` that answers as the engine's
  did (true for the job the call returned) and does nothing else: the same walk, its data
  now in the caches, nothing left to catch up;
* **cold** (with ``--evict-mb N``, in a run of its own): the same again after writing N
  MiB (more than the last-level cache), so that the walk reads its data from memory. A
  run that evicts reports no in-flow times: the caches an eviction empties stay colder
  than the steady state's for the calls after it.

The repeats walk what the first call walked and leave what it left (stale heap entries
were dropped, marks renewed, by the first), so the run's decisions are those of the run
without them: the launch digest printed is the same with ``--every 0`` (no probe;
``tests/test_bench_cache_warmth.py`` checks it). A repeat that returns another job is
counted (``mismatches``), not timed.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_cache_warmth.py --policy hdrf --sizes 1000,10000
    PYTHONPATH=src .venv/bin/python benchmarks/bench_cache_warmth.py --policy hdrf --sizes 1000,10000 --evict-mb 64

Prints one JSON object per size: the medians (and means) in microseconds per call, by
the wall clock (``perf_counter_ns``; on a shared machine another tenant's burst shows in
a call's time, which is why the three timings of a call are read against each other),
and the run's CPU seconds.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from bench_scaling import SteadyState  # noqa: E402

NS = time.perf_counter_ns


class Probe:
    """Wraps a sorter's ``pick`` and ``pick_among`` and times every ``every``-th call."""

    def __init__(self, sorter, every: int, evict_mb: int):
        self.sorter = sorter
        self.every = every
        self.calls = {"pick": 0, "pick_among": 0}
        self.samples: dict[str, dict[str, list[float]]] = {
            kind: {"sampled": [], "in_flow": [], "catch_up": [], "warm": [], "cold": [], "candidates": []}
            for kind in self.calls}
        self.mismatches = 0
        self._evict = bytearray(evict_mb << 20)  # (empty: no cold repeat)
        self._fill = b"\x01" * len(self._evict)
        self._pick, self._pick_among = sorter.pick, sorter.pick_among
        view = getattr(type(sorter), "view", None)
        self._catches_up = isinstance(view, property)
        sorter.pick = self.pick
        sorter.pick_among = self.pick_among

    def _timed(self, kind: str, call, runnable, extra: dict) -> str | None:
        self.calls[kind] += 1
        if not self.every or self.calls[kind] % self.every:
            return call(runnable)
        samples = self.samples[kind]
        in_flow = not self._evict
        if kind == "pick" and self._catches_up:
            t0 = NS()
            _ = self.sorter.view  # (the catch-up ``pick`` begins with)
            if in_flow:
                samples["catch_up"].append((NS() - t0) / 1e3)
        inside = [0]

        def engine_runnable(name: str) -> bool:
            t = NS()
            try:
                return runnable(name)
            finally:
                inside[0] += NS() - t

        t0 = NS()
        answer = call(engine_runnable)
        if in_flow:
            samples["in_flow"].append((NS() - t0 - inside[0]) / 1e3)
        samples["sampled"].append(1)
        for name, value in extra.items():
            samples[name].append(value)
        if answer is None:
            return answer

        def as_before(name: str) -> bool:
            return name == answer

        t0 = NS()
        again = call(as_before)
        warm = (NS() - t0) / 1e3
        cold, cold_again = None, answer
        if self._evict:
            self._evict[:] = self._fill
            t0 = NS()
            cold_again = call(as_before)
            cold = (NS() - t0) / 1e3
        if again != answer or cold_again != answer:
            self.mismatches += 1
        else:
            samples["warm"].append(warm)
            if cold is not None:
                samples["cold"].append(cold)
        return answer

    def pick(self, runnable, now: float = 0.0):
        return self._timed("pick", lambda r: self._pick(r, now), runnable, {})

    def pick_among(self, names, runnable, now: float = 0.0):
        names = list(names)  # (the sorter may keep or change what it gets: each call its own copy)
        return self._timed("pick_among", lambda r: self._pick_among(list(names), r, now), runnable,
                           {"candidates": len(names)})

    def summary(self) -> dict:
        out: dict = {"calls": dict(self.calls), "mismatches": self.mismatches}
        for kind, samples in self.samples.items():
            row: dict = {"sampled": len(samples["sampled"])}
            for name, values in samples.items():
                if values and name != "sampled":
                    row[f"{name}_median"] = round(statistics.median(values), 2)
                    row[f"{name}_mean"] = round(statistics.fmean(values), 2)
            out[kind] = row
        return out


def measure(policy: str, size: int, warmup: int, events: int, every: int, evict_mb: int) -> dict:
    point = SteadyState(policy, size, fill_budget=600.0)
    point.warm(warmup)
    gc.collect()
    probe = Probe(point.sched.sorter, every, evict_mb)
    digest = hashlib.sha256()
    decisions = 0
    t0 = time.process_time()
    for _ in range(events):
        if not point.sched.tasks:
            break
        decisions += point.complete(digest)
    seconds = time.process_time() - t0
    return {"policy": policy, "size": size, "warmup": warmup, "events": events, "every": every,
            "evict_mb": evict_mb, "decisions": decisions, "cpu_s": round(seconds, 3),
            "launch_digest": digest.hexdigest()[:16], **probe.summary()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="hdrf", help="an online policy (default hdrf)")
    ap.add_argument("--sizes", default="1000,10000", help="comma-separated jobs = nodes (default 1000,10000)")
    ap.add_argument("--warmup", type=int, default=2000, help="untimed completions first (default 2000)")
    ap.add_argument("--events", type=int, default=2000, help="completions probed (default 2000)")
    ap.add_argument("--every", type=int, default=5,
                    help="time every K-th call of each kind (default 5; 0: none, the digest alone)")
    ap.add_argument("--evict-mb", type=int, default=0,
                    help="MiB written before a cold repeat of each sampled call (default 0: none, in-flow times)")
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes: comma-separated integers, not {args.sizes!r}")
    if any(s <= 0 for s in sizes):
        ap.error(f"--sizes: positive, not {args.sizes!r}")
    for flag in ("every", "evict_mb", "events", "warmup"):
        if getattr(args, flag) < 0:
            ap.error(f"--{flag.replace('_', '-')}: not negative, not {getattr(args, flag)}")
    for size in sizes:
        print(json.dumps(measure(args.policy, size, args.warmup, args.events, args.every, args.evict_mb)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
