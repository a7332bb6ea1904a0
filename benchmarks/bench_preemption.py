"""Decisions per second with fair-share preemption off and on, in one run.

The saturated steady state of ``bench_decisions.py`` (``generate.hierarchy_scenario``: 1,000
jobs in a 3-level hierarchy on 1,000 nodes; each event finishes one running task and
re-fills the freed space), run twice from the same filled state: without preemption, and
with a ``Preemptor`` consulted after every decision round (and its preemptions applied).
The jobs all arrive at once, so after the fill no queue stays starved for long and the
difference is what preemption costs when it has little to do: the check every round
(fair shares recomputed only when the set of demanding jobs changes). A second workload
(``--late``) submits the jobs of the first top-level queue (a quarter of them) after the
fill, so that queue is starved and preemption works; its decisions/s counts launches of
both kinds.

Run: ``.venv/bin/python benchmarks/bench_preemption.py [--jobs N --nodes K --policy hdrf]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import random
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from generate import hierarchy_scenario  # noqa: E402

from fairshare.engine import Scheduler  # noqa: E402
from fairshare.engine.preemption import Preemptor  # noqa: E402
from fairshare.model.scenario import PreemptionConfig  # noqa: E402
from fairshare.policies import make_policy  # noqa: E402


def build(sc, policy: str, jobs) -> Scheduler:
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
    for job in jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)
    return sched


def steady(sched: Scheduler, events: int, seed: int, preemptor: Preemptor | None, late=()) -> tuple[int, int, float]:
    """``events`` completions (seeded choice), each followed by a decision round and, with
    a preemptor, a preemption round; ``late`` jobs arrive with the first event. Returns
    (decisions, victims, CPU seconds)."""
    rng = random.Random(seed)
    decisions = victims = 0
    t0 = time.process_time()
    for k in range(events):
        now = float(k + 1)
        if not sched.tasks:
            break
        if k == 0:
            for job in late:
                sched.submit(dataclasses.replace(job, submit_s=now), now)
        task_id = rng.choice(list(sched.tasks)) if len(sched.tasks) < 64 else next(iter(sched.tasks))
        sched.finish(task_id, now)
        decisions += len(sched.schedule(now))
        if preemptor is not None:
            planned = preemptor.round(sched, now)
            for p in planned:
                _stopped, launch = sched.preempt(p.victims, p.job, p.class_index, p.node, now)
                victims += len(p.victims)
                decisions += launch is not None
            if planned:
                decisions += len(sched.schedule(now))
                preemptor.round(sched, now, plan_now=False)
    return decisions, victims, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--policy", default="hdrf")
    ap.add_argument("--events", type=int, default=3000)
    ap.add_argument("--after", type=float, default=30.0, help="preemption timeout, in events (1 event = 1 s)")
    ap.add_argument("--late", action="store_true", help="a tenth of the jobs arrive after the fill")
    args = ap.parse_args()
    sc = hierarchy_scenario(jobs=args.jobs, levels=3, fanout=4, nodes=args.nodes, seed=0)
    jobs = list(sc.jobs)
    first = sc.queues.paths[0]
    late = [j for j in jobs if j.queue == first or j.queue.startswith(first + ".")] if args.late else []
    early = [j for j in jobs if j not in late] if late else jobs
    config = PreemptionConfig(after=args.after, tolerance=0.02, max_per_round=4)
    print(f"{args.policy}: {len(jobs)} jobs ({len(late)} late), {len(sc.cluster.nodes)} nodes, "
          f"{args.events} completions; preemption after {args.after:g} s")
    for label, pre in (("off", None), ("on", Preemptor(config, make_policy(args.policy), sc.resources)),
                       ("off", None)):
        sched = build(sc, args.policy, early)
        n, v, secs = steady(sched, args.events, 1, pre, late)
        print(f"  preemption {label:3s}: {n:7d} decisions, {v:5d} victims in {secs:6.2f} s CPU = "
              f"{n / secs:9.0f} decisions/s")


if __name__ == "__main__":
    main()
