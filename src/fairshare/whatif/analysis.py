"""The numbers of a what-if: per queue waits, share against entitlement, preemptions; who gains.

Definitions (docs/whatif.md, "What the report measures"):

* **wait** of a job: its first task's start minus its submit. Percentiles (p50, p95) are
  over the jobs below the queue that started; jobs that never started within the run are
  counted apart (``not_started``), never given a made-up wait.
* **entitlement** of a queue at time t: the hierarchical share guarantee of H-DRF
  (Bhattacharya et al., Sec. 3) among the nodes demanding at t: the root's is 1, and a
  demanding child of a node gets the node's entitlement times its weight over the sum of
  the weights of the node's demanding children (queues and jobs alike: jobs are leaves
  below their queue). It depends on the weights and on who demands, not on the policy, so
  every variant is measured against the same line. (Guarantees and limits move a queue
  away from it by design; the report shows both.)
* **share** of a queue at t: its dominant share in the run's timeline (the simulator's
  ``queue`` rows). **Short of entitlement**: seconds during which the queue had pending
  tasks (was demanding) and its share was below its entitlement by more than 1% of the
  cluster: time it waited while the weights said it should have had more.
* **preemptions** and **work lost**: tasks of the queue's jobs preempted, and the
  task-seconds they had run (summary.json's per job numbers, summed).

A queue's numbers include every job below it (a parent queue's are its subtree's).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from fairshare.model.queues import ROOT
from fairshare.model.scenario import Scenario
from fairshare.sim.metrics import percentile
from fairshare.sim.result import SimResult

#: a share below the entitlement by at most this (a fraction of the cluster) is not "short"
SHORT_TOLERANCE = 0.01


@dataclass
class QueueNumbers:
    path: str
    jobs: int = 0
    started: int = 0
    not_started: int = 0
    wait_p50: float | None = None
    wait_p95: float | None = None
    wait_mean: float | None = None
    mean_share: float = 0.0  # time average of the dominant share over the run
    share_while_demanding: float | None = None  # time average over the seconds it demanded
    entitlement_while_demanding: float | None = None
    demanding_s: float = 0.0
    short_s: float = 0.0  # demanding and below its entitlement (module docstring)
    preempted_tasks: int = 0
    work_lost_s: float = 0.0
    #: step functions for the plots: (times, values)
    share_series: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    entitlement_series: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))

    def to_json(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs, "started": self.started, "not_started": self.not_started,
            "wait_p50": self.wait_p50, "wait_p95": self.wait_p95, "wait_mean": self.wait_mean,
            "mean_share": self.mean_share, "share_while_demanding": self.share_while_demanding,
            "entitlement_while_demanding": self.entitlement_while_demanding,
            "demanding_s": self.demanding_s, "short_of_entitlement_s": self.short_s,
            "preempted_tasks": self.preempted_tasks, "work_lost_s": self.work_lost_s,
        }


def queue_paths(scenario: Scenario) -> list[str]:
    """Every queue of the tree (not the root), parents before children, in tree order."""
    return scenario.queues.paths


def _ancestors(path: str) -> list[str]:
    """``a.b.c`` -> ``[a, a.b, a.b.c]``."""
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _step_to(series: tuple[list[float], list[float]], t: float, value: float) -> None:
    """Extend a step function with ``value`` from ``t`` on (a later change at the same
    instant replaces the earlier one; an unchanged value adds no step)."""
    times, values = series
    if values[-1] == value:
        return
    if times[-1] == t:
        values[-1] = value
    else:
        times.append(t)
        values.append(value)


def entitlement_steps(scenario: Scenario, result: SimResult) -> dict[str, tuple[list[float], list[float]]]:
    """Per queue, its entitlement over time as a step function (module docstring)."""
    tree = scenario.queues
    weight = {p: tree[p].weight for p in tree.paths}
    parent = {p: tree[p].parent for p in tree.paths}
    job_queue = {j.name: (j.queue or ROOT) for j in scenario.jobs}
    job_weight = {j.name: j.weight for j in scenario.jobs}
    demanding_jobs: dict[str, bool] = {}
    paths = queue_paths(scenario)
    steps: dict[str, tuple[list[float], list[float]]] = {p: ([0.0], [0.0]) for p in paths}

    def recompute(t: float) -> None:
        # demanding count per node (queues) from the demanding jobs
        active_children: dict[str, list[tuple[str, float]]] = defaultdict(list)
        demanding_q: set[str] = set()
        for job, on in demanding_jobs.items():
            if not on:
                continue
            q = job_queue[job]
            active_children[q].append(("job:" + job, job_weight[job]))
            node = q
            while node != ROOT and node not in demanding_q:
                demanding_q.add(node)
                active_children[parent[node]].append((node, weight[node]))
                node = parent[node]
        ent: dict[str, float] = {ROOT: 1.0}
        for p in [ROOT] + paths:  # parents before children
            share = ent.get(p)
            if share is None:
                continue
            kids = active_children.get(p, [])
            total = sum(w for _, w in kids)
            for name, w in kids:
                if not name.startswith("job:"):
                    ent[name] = share * w / total
        for p in paths:
            _step_to(steps[p], t, ent.get(p, 0.0))

    last_t = None
    for t, job, on in result.demand_changes:
        if job not in job_queue:
            continue
        if last_t is not None and t != last_t:
            recompute(last_t)
        demanding_jobs[job] = on
        last_t = t
    if last_t is not None:
        recompute(last_t)
    return steps


def share_steps(result: SimResult) -> dict[str, tuple[list[float], list[float]]]:
    """Per queue, its dominant share over time (the timeline's queue rows)."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for t, kind, entity, _running, share, _alloc in result.rows:
        if kind != "queue":
            continue
        times, values = out.setdefault(entity, ([], []))
        if times and times[-1] == t:
            values[-1] = share
        else:
            times.append(t)
            values.append(share)
    return out


def _value_at(series: tuple[list[float], list[float]], k: int) -> float:
    return series[1][k] if k >= 0 else 0.0


def _integrate(share, ent, demand, end: float) -> tuple[float, float, float, float, float]:
    """Over [0, end]: integral of the share; and while demanding: seconds, integral of the
    share, of the entitlement, and seconds short of the entitlement."""
    times = sorted(set(share[0]) | set(ent[0]) | set(demand[0]) | {0.0})
    times = [t for t in times if t < end] + [end]
    i = j = d = -1
    total = dem_s = dem_share = dem_ent = short = 0.0
    for a, b in zip(times, times[1:]):
        while i + 1 < len(share[0]) and share[0][i + 1] <= a:
            i += 1
        while j + 1 < len(ent[0]) and ent[0][j + 1] <= a:
            j += 1
        while d + 1 < len(demand[0]) and demand[0][d + 1] <= a:
            d += 1
        dt = b - a
        s, e, on = _value_at(share, i), _value_at(ent, j), _value_at(demand, d)
        total += s * dt
        if on:
            dem_s += dt
            dem_share += s * dt
            dem_ent += e * dt
            if s < e - SHORT_TOLERANCE:
                short += dt
    return total, dem_s, dem_share, dem_ent, short


def demand_steps(scenario: Scenario, result: SimResult) -> dict[str, tuple[list[float], list[float]]]:
    """Per queue, 1 while some job below it has pending tasks, else 0, over time."""
    job_queue = {j.name: (j.queue or ROOT) for j in scenario.jobs}
    count: dict[str, int] = defaultdict(int)
    state: dict[str, bool] = {}
    out: dict[str, tuple[list[float], list[float]]] = {p: ([0.0], [0.0]) for p in queue_paths(scenario)}
    for t, job, on in result.demand_changes:
        q = job_queue.get(job)
        if q is None or q == ROOT or state.get(job, False) == on:
            continue
        state[job] = on
        for p in _ancestors(q):
            count[p] += 1 if on else -1
            _step_to(out[p], t, 1.0 if count[p] > 0 else 0.0)
    return out


def queue_numbers(result: SimResult) -> dict[str, QueueNumbers]:
    """Per queue (every level), the numbers of the module docstring."""
    scenario = result.scenario
    paths = queue_paths(scenario)
    out = {p: QueueNumbers(p) for p in paths}
    waits: dict[str, list[float]] = defaultdict(list)
    for job in scenario.jobs:
        outcome = result.jobs.get(job.name)
        if not job.queue or outcome is None or not outcome.submitted:  # (under the root: no queue)
            continue
        for p in _ancestors(job.queue):
            n = out[p]
            n.jobs += 1
            if outcome.start is None:
                n.not_started += 1
            else:
                n.started += 1
                waits[p].append(outcome.start - outcome.submit)
            n.preempted_tasks += result.tasks_preempted.get(job.name, 0)
            n.work_lost_s += result.work_lost.get(job.name, 0.0)
    shares = share_steps(result)
    ents = entitlement_steps(scenario, result)
    demands = demand_steps(scenario, result)
    end = result.end_time
    for p, n in out.items():
        w = waits.get(p, [])
        if w:
            n.wait_p50, n.wait_p95 = percentile(w, 50), percentile(w, 95)
            n.wait_mean = math.fsum(w) / len(w)
        share = shares.get(p, ([], []))
        n.share_series, n.entitlement_series = share, ents[p]
        if end > 0:
            total, dem_s, dem_share, dem_ent, short = _integrate(share, ents[p], demands[p], end)
            n.mean_share = total / end
            n.demanding_s, n.short_s = dem_s, short
            if dem_s > 0:
                n.share_while_demanding = dem_share / dem_s
                n.entitlement_while_demanding = dem_ent / dem_s
    return out


@dataclass(frozen=True)
class Change:
    """One queue's change from the base variant to another, on one measure."""

    queue: str
    measure: str  # "wait_p95" ...
    before: float
    after: float

    @property
    def ratio(self) -> float | None:
        return None if self.before <= 0 else self.after / self.before

    @property
    def gains(self) -> bool:
        """True when the queue is better off (shorter waits, less time short, more share)."""
        return self.after > self.before if self.measure == "share_while_demanding" else self.after < self.before


#: what the first page compares, in the order that decides a queue's verdict, with the
#: smallest difference it calls a change (seconds, or a share of the cluster); a change
#: must also be at least ``RELATIVE`` of the value before (a 3,550 s -> 3,540 s move is not one)
MEASURES = {"wait_p95": 1.0, "wait_p50": 1.0, "share_while_demanding": 0.01, "short_of_entitlement_s": 1.0}
RELATIVE = 0.05
WORDS = {"wait_p50": "median wait", "wait_p95": "p95 wait", "short_of_entitlement_s": "time short of entitlement",
         "share_while_demanding": "share while demanding"}


def changes(base: dict[str, QueueNumbers], other: dict[str, QueueNumbers], queues: list[str]) -> list[Change]:
    """Every (queue, measure) that moved by more than its thresholds, in queue order, then
    measure order."""
    out = []
    for q in queues:
        a, b = base.get(q), other.get(q)
        if a is None or b is None:
            continue
        ja, jb = a.to_json(), b.to_json()
        for measure, threshold in MEASURES.items():
            x, y = ja[measure], jb[measure]
            if x is None or y is None:
                continue
            delta = abs(y - x)
            if delta <= threshold or (x != 0 and delta < RELATIVE * abs(x)):
                continue
            out.append(Change(q, measure, float(x), float(y)))
    return out


def queue_verdicts(moved: list[Change]) -> dict[str, bool]:
    """Per queue that moved: True if it gains. A queue's verdict is that of its first
    measure in ``MEASURES`` order that moved (its p95 wait, if that moved; ...)."""
    out: dict[str, bool] = {}
    for c in moved:
        out.setdefault(c.queue, c.gains)
    return out


def _how(c: Change) -> str:
    if c.measure == "share_while_demanding":
        return f"{WORDS[c.measure]} {100 * c.before:.1f}% -> {100 * c.after:.1f}% of the cluster"
    how = f"{WORDS[c.measure]} {c.before:,.0f} s -> {c.after:,.0f} s"
    return how + (f" ({(c.ratio - 1) * 100:+.0f}%)" if c.ratio is not None else "")


def verdict_lines(base_label: str, label: str, moved: list[Change], limit: int = 12) -> list[str]:
    """The first page's sentences: who gains and who loses, by how much, if you switch:
    the queues that gain, then those that lose, each by its largest relative change first."""
    verdicts = queue_verdicts(moved)
    gain = [q for q, g in verdicts.items() if g]
    lose = [q for q, g in verdicts.items() if not g]
    lines = [f"Switching from {base_label} to {label}: {len(gain)} queue(s) gain, {len(lose)} lose, "
             f"the others do not move."]
    by_queue: dict[str, list[Change]] = {}
    for c in moved:
        by_queue.setdefault(c.queue, []).append(c)

    def size(q: str) -> float:
        first = by_queue[q][0]
        return -abs(first.after - first.before) / max(abs(first.before), 1e-9)

    for word, group in (("gains", gain), ("loses", lose)):
        for q in sorted(group, key=lambda q: (size(q), q))[:limit]:
            lines.append(f"  {q} {word}: " + "; ".join(_how(c) for c in by_queue[q]))
    return lines
