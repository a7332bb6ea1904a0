"""How good is the estimated start (issue 21, item 3)? Every job asked at its submission,
on a real trace.

One simulation of SCENARIO (a converted trace: docs/traces.md) under POLICY; right after
each instant's decision, every job submitted at that instant that has not started is
asked when it will start, by serve's forecast (``engine.forecast.forecast_start``: a
forward simulation of that state), with the durations serve would know:

* ``unknown``: as serve without a user estimate: each task lasts the median of its queue's
  last 100 finished tasks that ran longer than it has so far (``RecentDurations``, fed as
  the run's tasks finish), else every queue's; no forecast while no task has finished;
* ``known``: each task lasts its class's mean duration (a user's estimate that is right
  on average; the SWIM trace's durations are fixed per class, so exact there).

The forecast runs on a copy, so the run is the full run: each job's real start is its
start in it. The error is ``|estimate - real start|``; a job that starts at its
submission is not asked (serve would say it runs). Jobs still waiting on more tasks are
not affected: the question is the job's first start, as ``estimated_start`` answers.
What the forecast cannot know, in both: jobs submitted after the question (they may pass
ahead by the policy's order).

Run (the SWIM slice of docs/traces.md):

    fairshare trace convert swim ../shared/traces/swim-facebook/FB-2009_samples_24_times_1hr_0.tsv \\
        --window 7200:14400 --machines 10 -o swim.json
    .venv/bin/python benchmarks/bench_forecast.py swim.json --policy drf
"""

from __future__ import annotations

import argparse
import statistics
import time

from fairshare.engine.events import TaskFinished
from fairshare.engine.forecast import RecentDurations, expected_seconds, forecast_start
from fairshare.model.loader import load_scenario
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, Simulator


def quantile(values: list[float], q: float) -> float:
    """The q-quantile, by linear interpolation between the closest ranks."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def run(scenario_path: str, policy: str, seed: int) -> dict:
    sc = load_scenario(scenario_path)
    sim = Simulator(sc, make_policy(policy), SimOptions(seed=seed))
    sch = sim.scheduler
    recent = RecentDurations()
    classes = {job.name: job.classes for job in sc.jobs}
    asked: dict[str, dict[str, float | None]] = {}  # job -> mode -> estimate
    step = sim.engine.step
    seconds_forecasting = 0.0

    def unknown(job: str, class_index: int, ran: float) -> float | None:
        return recent.expected(sch.jobs[job].job.queue, ran)

    def known(job: str, class_index: int, ran: float) -> float | None:
        return expected_seconds(classes[job][class_index].duration)

    def step_and_ask(t, events, commit=None):
        nonlocal seconds_forecasting
        for event in events:  # (a task's run time, known once it ends)
            if isinstance(event, TaskFinished) and event.ok and event.task_id in sch.tasks:
                task = sch.tasks[event.task_id]
                recent.add(sch.jobs[task.job].job.queue, t - task.started_at)
        instant = step(t, events, commit)
        t0 = time.perf_counter()
        for name, rt in sch.jobs.items():
            if rt.submitted_at == t and rt.first_start is None and name not in asked:
                asked[name] = {"unknown": forecast_start(sch, name, t, unknown),
                               "known": forecast_start(sch, name, t, known)}
        seconds_forecasting += time.perf_counter() - t0
        return instant

    sim.engine.step = step_and_ask
    result = sim.run()
    out = {"jobs": len(sc.jobs), "asked": len(asked), "seconds_forecasting": seconds_forecasting}
    for mode in ("unknown", "known"):
        errors = [abs(est[mode] - result.jobs[name].start) for name, est in asked.items()
                  if est[mode] is not None and result.jobs[name].start is not None]
        waits = [result.jobs[name].start - result.jobs[name].submit for name in asked
                 if result.jobs[name].start is not None]
        out[mode] = {"answered": len(errors), "median_error_s": statistics.median(errors) if errors else None,
                     "p90_error_s": quantile(errors, 0.9) if errors else None,
                     "within_1s": sum(e <= 1.0 for e in errors),
                     # (the error of saying "it starts now": the wait itself)
                     "median_wait_s": statistics.median(waits) if waits else None,
                     "p90_wait_s": quantile(waits, 0.9) if waits else None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario")
    ap.add_argument("--policy", default="drf")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    got = run(args.scenario, args.policy, args.seed)
    print(f"{args.scenario}, policy {args.policy}: {got['jobs']} jobs, {got['asked']} waiting at their submission "
          f"(forecasts took {got['seconds_forecasting']:.1f} s)")
    for mode, label in (("unknown", "durations unknown (queue's recent median)"),
                        ("known", "durations known (class mean)")):
        m = got[mode]
        if m["answered"]:
            print(f"  {label:40s} answered {m['answered']:4d}: median |error| {m['median_error_s']:6.1f} s, "
                  f"p90 {m['p90_error_s']:6.1f} s, within 1 s {m['within_1s']:4d} (the wait itself: median "
                  f"{m['median_wait_s']:.1f} s, p90 {m['p90_wait_s']:.1f} s)")
        else:
            print(f"  {label:40s} answered none")


if __name__ == "__main__":
    main()
