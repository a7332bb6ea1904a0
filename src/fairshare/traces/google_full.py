"""A full-size Google 2011 workload, generated from the three task_events parts at hand.

Only parts 0-2 of the trace's 500 are available (its first ~4.2 hours: 7,039 jobs,
271,022 task runs). The full trace is 29 days, ~672,000 jobs (Reiss et al., SoCC'12)
on 12,583 machines. This module builds a workload of that size with the parts'
statistics, to measure what a full-size replay would cost (benchmarks/bench_google_full.py,
docs/traces.md#full-size-google-2011). Why a bootstrap and not a fitted model: the parts'
jobs carry the joint distribution of queue (priority band, user), per-task demand, task
count and durations as it is, correlations included, which no small set of fitted
marginals would keep.

- **Templates**: the parts converted by the ``google2011`` converter (default options:
  the full machine mix, band-user queues) and loaded. Jobs submitted at 0 (running when
  the trace starts: 3,974 jobs, 164,119 runs) are the *initial* population; the others
  (3,065 jobs, 34.9 runs each on average) are the *arrival* templates.
- **Generated workload at fraction f**: the first ``f`` of the 29 days. At 0 the initial
  population, once (it is the cluster's state when the trace starts, not a rate); their
  runs censored at the parts' end (a run lasting the whole ~4.2 h window: a service) are
  extended to the end of the generated span, the others keep their durations. Then
  arrivals: a Poisson process at the full trace's mean rate, ``(672,074 - initial jobs)
  / 29 days`` = 0.267 jobs/s (the parts' own rate after the start is 0.204/s), each a
  copy of a uniformly drawn arrival template (its queue, demand, count and durations;
  durations censored at the parts' end stay lower bounds). Full size (f = 1): ~668,000
  arrivals, ~23.3 million task runs plus the initial 164,119.
- **Streaming**: :func:`generate` yields jobs lazily in submit order; each generated job
  shares its template's task classes (only the name and submit time are its own), so the
  generator's memory is the templates', whatever the size. The simulator consumes it as
  it goes (``Simulator(replace(t.base, jobs=()), policy, options, arrivals=generate(...),
  sink=sim.stream.StreamingOutput(...))``, what the benchmark runs); :func:`materialize`
  builds the whole ``Scenario`` instead, for an up-front run.

Randomness: one ``random.Random(seed)`` (arrival gaps, template draws); the same seed and
fraction give the same jobs.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from fairshare.model import parse_scenario
from fairshare.model.jobs import Duration, Job, TaskClass
from fairshare.model.scenario import Scenario
from fairshare.traces import convert
from fairshare.traces.common import TraceError

#: the full trace: Reiss et al., "Heterogeneity and dynamicity of clouds at scale", SoCC 2012
FULL_JOBS = 672_074
FULL_SPAN_S = 29 * 86_400.0
PARTS = tuple(f"task_events-part-0000{i}-of-00500.csv.gz" for i in range(3))
#: a run is taken as censored at the parts' end when it lasts the whole window (to this tolerance, s)
CENSORED_TOLERANCE_S = 1e-3


@dataclass(frozen=True)
class Templates:
    """The parts as generator input: the cluster and queues, and the two job populations."""

    base: Scenario  # cluster, queues and resources of the parts; its jobs are the parts' own
    initial: tuple[Job, ...]  # submitted at 0: running when the trace starts
    arriving: tuple[Job, ...]  # submitted later: the arrival templates
    window_s: float  # the parts' window length (s): runs this long are censored there

    @property
    def arrival_runs_mean(self) -> float:
        return sum(j.total_count or 0 for j in self.arriving) / len(self.arriving)

    @property
    def initial_runs(self) -> int:
        return sum(j.total_count or 0 for j in self.initial)


def templates_from_parts(directory: Path, parts: Iterable[str] = PARTS) -> Templates:
    """Convert and load the parts; raise :class:`TraceError` if they are missing or empty."""
    paths = [Path(directory) / p for p in parts]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise TraceError(f"Google 2011 parts not found: {', '.join(missing)}")
    result = convert("google2011", paths)
    base = parse_scenario(result.scenario, "google2011 parts")
    start, _, end = str(result.stats["window (trace s)"]).partition(" .. ")
    window_s = float(end) - float(start)
    initial = tuple(j for j in base.jobs if j.submit_s == 0)
    arriving = tuple(j for j in base.jobs if j.submit_s > 0)
    if not arriving:
        raise TraceError("the parts hold no job submitted after the trace start: nothing to draw arrivals from")
    return Templates(base, initial, arriving, window_s)


def _extended(job: Job, window_s: float, span_s: float) -> Job:
    """``job`` with its runs that last the whole parts' window lasting until ``span_s``."""
    classes = []
    for cls in job.classes:
        params = dict(cls.duration.params)
        if cls.duration.kind == "list":
            values = tuple(span_s if v >= window_s - CENSORED_TOLERANCE_S else v for v in params["values"])
            cls = replace(cls, duration=Duration("list", (("values", values),)))
        elif cls.duration.kind == "fixed" and float(params["value"]) >= window_s - CENSORED_TOLERANCE_S:
            cls = replace(cls, duration=Duration("fixed", (("value", span_s),)))
        classes.append(cls)
    return replace(job, classes=tuple(classes))


def span_of(fraction: float, span_s: float = FULL_SPAN_S) -> float:
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return fraction * span_s


def generate(t: Templates, fraction: float, seed: int = 0, *, full_jobs: int = FULL_JOBS,
             span_s: float = FULL_SPAN_S) -> Iterator[Job]:
    """The jobs of the first ``fraction`` of the full-size workload, lazily, in submit order."""
    end = span_of(fraction, span_s)
    rng = random.Random(seed)
    for job in t.initial:
        yield replace(_extended(job, t.window_s, max(end, t.window_s)), name=f"i-{job.name}")
    rate = (full_jobs - len(t.initial)) / span_s
    now = 0.0
    k = 0
    while True:
        now += rng.expovariate(rate)
        if now >= end:
            return
        template = t.arriving[rng.randrange(len(t.arriving))]
        yield replace(template, name=f"a{k}-{template.name}", submit_s=now)
        k += 1


def expected_size(t: Templates, fraction: float, *, full_jobs: int = FULL_JOBS) -> dict[str, float]:
    """Mean jobs and task runs of a generated workload (the arrivals' expectation)."""
    arrivals = fraction * (full_jobs - len(t.initial))
    return {"jobs": len(t.initial) + arrivals, "task runs": t.initial_runs + arrivals * t.arrival_runs_mean}


def materialize(t: Templates, jobs: Iterable[Job]) -> Scenario:
    """A Scenario holding ``jobs`` on the parts' cluster and queues (what today's simulator takes).

    The jobs are the templates' own, renamed and re-timed, so the loader's checks of the
    parts (demands, queues, something can hold each task) hold for them unchanged.
    """
    return replace(t.base, jobs=tuple(jobs), source="google2011 full-size generator")


def task_classes(jobs: Iterable[Job]) -> Iterator[TaskClass]:
    for job in jobs:
        yield from job.classes
