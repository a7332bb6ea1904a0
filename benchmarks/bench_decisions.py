"""Online scheduling decisions per second: the incremental sorters against the
per-decision reference (every share recomputed per decision, as in the papers), in one run.

Workload: ``generate.hierarchy_scenario`` with 1,000 jobs in a 3-level hierarchy on 1,000
nodes (issue 3 target: hdrf >= 20,000 decisions/s). Two phases are timed:

* fill: ``schedule(0)`` on the empty cluster, every launch a decision;
* steady state: repeatedly finish one running task (chosen by a seeded RNG) and call
  ``schedule(now)``, which re-fills the freed space; decisions = launches.

The reference is timed on the same workload but stopped after ``--ref-decisions`` launches
(it is O(tree) per decision); its rate is decisions / time over the launches it made.

Run: ``.venv/bin/python benchmarks/bench_decisions.py [--jobs N --nodes K --policy hdrf]``.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from generate import hierarchy_scenario  # noqa: E402

from fairshare.engine import Scheduler  # noqa: E402
from fairshare.policies import make_policy  # noqa: E402


#: wall-clock by default; ``--cpu-time`` measures this process's CPU time instead, which
#: other processes on the machine disturb far less
CLOCK = time.perf_counter


def build(sc, policy: str, reference: bool, half_life: float = 0.0) -> Scheduler:
    if reference:
        capacity = tuple(sum(n.capacity[r] for n in sc.cluster.nodes) for r in range(sc.m))
        sorter = make_policy(policy).reference_sorter(sc.resources, sc.queues, capacity)
        sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy), sorter=sorter)
    elif half_life:  # decayed usage (docs/policies.md, "Fairness with memory")
        sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy), half_life=half_life)
    else:  # (ab_decisions.py also runs this against older sources)
        sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
    for job in sc.jobs:
        sched.submit(job, 0.0)
    return sched


def fill(sched: Scheduler, limit: int | None) -> tuple[int, float]:
    t0 = CLOCK()
    n = 0
    if limit is None:
        n = len(sched.schedule(0.0))
    else:  # one decision at a time, so the reference can be stopped early
        pick = sched.sorter.pick
        calls = 0

        def limited(runnable, now=0.0):
            nonlocal calls
            calls += 1
            return pick(runnable, now) if calls <= limit else None

        sched.sorter.pick = limited
        n = len(sched.schedule(0.0))
        sched.sorter.pick = pick
    return n, CLOCK() - t0


def steady(sched: Scheduler, events: int, seed: int) -> tuple[int, float]:
    rng = random.Random(seed)
    decisions = 0
    t0 = CLOCK()
    for k in range(events):
        if not sched.tasks:
            break
        task_id = rng.choice(list(sched.tasks)) if len(sched.tasks) < 64 else next(iter(sched.tasks))
        sched.finish(task_id, float(k + 1))
        decisions += len(sched.schedule(float(k + 1)))
    return decisions, CLOCK() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--levels", type=int, default=3)
    ap.add_argument("--policy", default="hdrf")
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--ref-decisions", type=int, default=300)
    ap.add_argument("--shapes", type=int, default=None,
                    help="draw every job's task from this many demand vectors (default: each job its own)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with process CPU time instead of wall-clock (for a busy machine)")
    ap.add_argument("--half-life", type=float, default=0.0,
                    help="decayed usage with this half-life in seconds (the steady phase's events are 1 s "
                         "apart, each a new instant: decay's worst case, every key renewed per event)")
    args = ap.parse_args()
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time

    sc = hierarchy_scenario(jobs=args.jobs, levels=args.levels, fanout=4, nodes=args.nodes, seed=0,
                            shapes=args.shapes)
    print(f"{args.policy}: {len(sc.jobs)} jobs, {len(sc.queues) - 1} queues in {args.levels} levels, "
          f"{len(sc.cluster.nodes)} nodes, {sc.m} resources, "
          f"{len({j.classes[0].demand for j in sc.jobs})} distinct task shapes")

    fast = build(sc, args.policy, reference=False, half_life=args.half_life)
    n, secs = fill(fast, None)
    fast_fill = n / secs
    print(f"  incremental  fill:   {n:7d} decisions in {secs:6.2f} s = {fast_fill:9.0f} decisions/s")
    n2, secs2 = steady(fast, args.events, seed=1)
    fast_steady = n2 / secs2 if secs2 else float("nan")
    # (decisions/s flatters a policy that launches several tasks per completion: hdrf and
    # dff refill a freed node with smaller tasks; completions/s is the work per CPU second)
    completions = args.events / secs2 if secs2 else float("nan")
    print(f"  incremental  steady: {n2:7d} decisions in {secs2:6.2f} s = {fast_steady:9.0f} decisions/s, "
          f"{completions:7.0f} completions/s ({args.events} task completions, "
          f"{n2 / args.events:.2f} launches each)")

    ref = build(sc, args.policy, reference=True)
    n3, secs3 = fill(ref, args.ref_decisions)
    ref_rate = n3 / secs3
    print(f"  reference    fill:   {n3:7d} decisions in {secs3:6.2f} s = {ref_rate:9.0f} decisions/s "
          f"(stopped after {args.ref_decisions})")
    print(f"  speed ratio (fill, incremental / reference): {fast_fill / ref_rate:.0f}x")


if __name__ == "__main__":
    main()
