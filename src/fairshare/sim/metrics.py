"""Numbers derived from a simulation run (``SimResult``); definitions in docs/simulation.md.

Everything here is computed from the recorded step functions (the timeline rows, the
demand changes and the capacity changes), never from the clock:

* **mean over an active span**: ``integral of x(t) dt / span``. A job's span is
  ``[submit, finish]`` (``[submit, end]`` when unfinished); a queue's runs from the first
  submit to the last finish of the jobs below it.
* **utilization** of resource r: ``integral alloc_r dt / integral capacity_r dt`` over
  ``[0, makespan]``: the fraction of the resource-seconds that were up (nodes that failed
  count only while they were up) that tasks held.
* **starvation** of a job: the longest interval during which it was demanding (submitted,
  not finished, tasks pending) and ran zero tasks. Reported per job; the run's is the
  maximum over jobs, with the job.
* **fairness gap**: at time t let D(t) be the demanding jobs; the gap is the mean over
  D(t) of ``|dominant share of j at t - dominant share of j in the static allocation of
  the scenario restricted to D(t)|``, and the run's value is its time average over the
  instants where D(t) is not empty. The static allocation is the policy's own where it
  has one, else ``hdrf`` (hierarchical scenario) or ``drf`` (flat); it is computed once
  per distinct (D, capacity) and cached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fairshare.model.cluster import Cluster, Node
from fairshare.model.resources import Vector
from fairshare.model.scenario import Scenario
from fairshare.policies.base import PolicyModeError
from fairshare.sim.result import CLUSTER, PREEMPT, DecayRow, SimResult


@dataclass
class Integral:
    """Time integrals of one entity's step function up to the end of the run."""

    running: float
    allocation: list[float]
    dominant_share: float


def integrals(result: SimResult) -> dict[tuple[str, str], Integral]:
    """Per (kind, entity): integrals of running tasks, allocation and dominant share."""
    m = result.scenario.m
    end = result.end_time
    out: dict[tuple[str, str], Integral] = {}
    last: dict[tuple[str, str], tuple] = {}

    def close(key, row, until):
        dt = until - row[0]
        if dt <= 0:
            return
        acc = out.setdefault(key, Integral(0.0, [0.0] * m, 0.0))
        acc.running += row[3] * dt
        acc.dominant_share += row[4] * dt
        alloc = row[5]
        for r in range(m):
            acc.allocation[r] += alloc[r] * dt

    for row in result.rows:
        if row[1] == PREEMPT:
            continue  # (an event, not a state that holds until the next row)
        key = (row[1], row[2])
        prev = last.get(key)
        if prev is not None:
            close(key, prev, row[0])
        else:
            out.setdefault(key, Integral(0.0, [0.0] * m, 0.0))
        last[key] = row
    for key, row in last.items():
        close(key, row, end)
    return out


def capacity_integral(result: SimResult) -> list[float]:
    m = result.scenario.m
    total = [0.0] * m
    changes = result.capacity_changes
    for k, (t, cap) in enumerate(changes):
        t_next = changes[k + 1][0] if k + 1 < len(changes) else result.end_time
        dt = min(t_next, result.end_time) - t
        if dt > 0:
            for r in range(m):
                total[r] += cap[r] * dt
    return total


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def completion_times(result: SimResult) -> dict[str, float]:
    """Finish - submit for each finished job (scenario order)."""
    return {name: o.finish - o.submit for name, o in result.jobs.items() if o.finish is not None}


# --- starvation and fairness gap: one replay of the recorded state ----------------------------

@dataclass
class FairnessGap:
    value: float | None  # None when no job was ever demanding
    static_policy: str
    static_reason: str
    covered_s: float  # time with at least one demanding job (the average's denominator)
    static_allocations: int  # distinct demanding sets computed


@dataclass
class Replay:
    longest_starvation: dict[str, float]  # job -> longest starved interval (s)
    gap: FairnessGap | None


def reference_policy(scenario: Scenario) -> tuple[str, str]:
    """(name, kind) of the registered policy declaring itself the fairness reference for
    the scenario's kind (``Policy.fairness_reference``): hdrf with queues, drf without."""
    from fairshare.policies import REGISTRY

    kind = "hierarchical" if scenario.queues.paths else "flat"
    return next(cls.name for cls in REGISTRY.values() if cls.fairness_reference == kind), kind


def queue_fair_shares(scenario: Scenario, policy: str | None = None) -> tuple[str, dict[str, float]]:
    """(policy, queue path -> dominant share) in ``policy``'s static allocation of the whole
    scenario with every job demanding (task counts ignored, as for the fairness gap):
    the one yardstick a run's mean queue shares are read against, the same for every
    policy compared. ``policy`` defaults to :func:`reference_policy`'s."""
    from fairshare.policies import make_policy

    name = policy if policy is not None else reference_policy(scenario)[0]
    alloc = make_policy(name).allocate(replace(scenario, events=()), respect_counts=False)
    return name, {path: qa.dominant_share for path, qa in alloc.queues.items()}


class StaticShares:
    """Dominant shares in the static allocation of the scenario restricted to a set of
    jobs, cached by (set, capacity). Uses ``reference`` (a policy name, with its default
    options) when given: one yardstick shared by every run measured against it, with no
    fallback. Otherwise the run's own policy when it has a static allocation, else the
    registered policy declaring itself the reference for the scenario's kind
    (``Policy.fairness_reference``: hdrf with queues, drf without)."""

    def __init__(self, scenario: Scenario, policy: str, params: dict, reference: str | None = None):
        from fairshare.policies import make_policy

        self.scenario = scenario
        self.cache: dict[tuple[frozenset, Vector], dict[str, float] | None] = {}
        if reference is not None:
            self.policy = make_policy(reference)
            self.name = reference
            self.reason = "the common reference's static allocation, chosen for the run"
            self._fallback_done = True  # (a chosen reference that refuses is an error, not replaced)
            return
        self.policy = make_policy(policy, **params)
        self.name = policy
        self.reason = "the policy's own static allocation"
        self._fallback_done = False

    def _fallback(self, why: str) -> None:
        from fairshare.policies import make_policy

        self.name, kind = reference_policy(self.scenario)
        self.policy = make_policy(self.name)
        self.reason = f"{why}; using {self.name}, the reference for a {kind} scenario"
        self.cache.clear()
        self._fallback_done = True

    def shares(self, jobs: frozenset[str], capacity: Vector) -> dict[str, float] | None:
        key = (jobs, capacity)
        if key in self.cache:
            return self.cache[key]
        sc = self.scenario
        sub = replace(sc, jobs=tuple(j for j in sc.jobs if j.name in jobs), events=())
        if capacity != tuple(sc.capacity):
            if not any(c > 0 for c in capacity):
                self.cache[key] = None
                return None
            pooled = Node("pool", capacity, "pool")
            sub = replace(sub, cluster=Cluster(capacity, (pooled,), True, sc.resources))
        try:
            alloc = self.policy.allocate(sub, respect_counts=False)
        except PolicyModeError as exc:
            if self._fallback_done:
                raise
            self._fallback(f"{self.name} has no static allocation ({exc})")
            return self.shares(jobs, capacity)
        out = {name: ja.dominant_share for name, ja in alloc.jobs.items()}
        self.cache[key] = out
        return out


def replay(result: SimResult, *, fairness_gap: bool = True, reference: str | None = None) -> Replay:
    """Walk the run's job states in time order: starvation per job and the fairness gap
    (against ``reference``'s static allocation when given: see :class:`StaticShares`)."""
    sc = result.scenario
    end = result.end_time
    events: list[tuple[float, int, object]] = []
    # at one time: capacity, then demand flags, then allocations (all of one instant)
    events.extend((t, 0, cap) for t, cap in result.capacity_changes)
    events.extend((t, 1, (name, flag)) for t, name, flag in result.demand_changes)
    events.extend((row[0], 2, row) for row in result.rows if row[1] == "job")
    events.sort(key=lambda e: (e[0], e[1]))

    static = StaticShares(sc, result.policy, result.params, reference) if fairness_gap else None
    capacity: Vector = tuple(sc.capacity)
    demanding: set[str] = set()
    running: dict[str, int] = {}
    share: dict[str, float] = {}  # dominant share from the row (current capacity)
    term: dict[str, float] = {}  # |share - static share| of each demanding job
    targets: dict[str, float] | None = {}
    gap_sum = 0.0
    gap_integral = 0.0
    covered = 0.0
    starving_since: dict[str, float] = {}
    longest: dict[str, float] = {j.name: 0.0 for j in sc.jobs}
    prev_t = 0.0
    k, n = 0, len(events)
    while k < n:
        t = events[k][0]
        if fairness_gap and demanding and targets is not None and t > prev_t:
            gap_integral += gap_sum / len(demanding) * (t - prev_t)
            covered += t - prev_t
        set_changed = False
        touched: set[str] = set()
        while k < n and events[k][0] == t:
            _, kind, payload = events[k]
            k += 1
            if kind == 0:
                if payload != capacity:
                    capacity = payload  # type: ignore[assignment]
                    set_changed = True
            elif kind == 1:
                name, flag = payload  # type: ignore[misc]
                (demanding.add if flag else demanding.discard)(name)
                set_changed = True
                touched.add(name)
            else:
                row = payload
                name = row[2]  # type: ignore[index]
                running[name] = row[3]  # type: ignore[index]
                share[name] = row[4]  # type: ignore[index]
                touched.add(name)
        if fairness_gap:
            if set_changed:
                targets = static.shares(frozenset(demanding), capacity) if demanding else {}
                term = {}
                if targets is not None:
                    for name in demanding:
                        term[name] = abs(share.get(name, 0.0) - targets.get(name, 0.0))
                gap_sum = math.fsum(term.values())
            elif targets is not None:
                for name in sorted(touched):  # fixed order of float additions (see simulator)
                    if name in demanding:
                        new = abs(share.get(name, 0.0) - targets.get(name, 0.0))
                        gap_sum += new - term.get(name, 0.0)
                        term[name] = new
        for name in touched:
            starving = name in demanding and running.get(name, 0) == 0
            since = starving_since.get(name)
            if starving and since is None:
                starving_since[name] = t
            elif not starving and since is not None:
                longest[name] = max(longest[name], t - since)
                del starving_since[name]
        prev_t = t
    if fairness_gap and demanding and targets is not None and end > prev_t:
        gap_integral += gap_sum / len(demanding) * (end - prev_t)
        covered += end - prev_t
    for name, since in starving_since.items():
        longest[name] = max(longest[name], end - since)
    gap = None
    if fairness_gap:
        gap = FairnessGap(gap_integral / covered if covered > 0 else None, static.name, static.reason,
                          covered, len(static.cache))
    return Replay(longest, gap)


# --- the summary (contract: summary.json) ---------------------------------------------------

def summarize(result: SimResult, *, fairness_gap: bool = True, scenario_name: str | None = None,
              reference: str | None = None) -> dict:
    """The ``summary.json`` document: the contract's keys first, then extensions.

    ``fairness_gap=False`` skips the static allocations the gap needs (``null`` then).
    ``reference``: the policy whose static allocation the gap is measured against, the
    same for every run compared (recorded as ``fairness_reference_policy``); None: the
    run's own policy, with the fallback of :class:`StaticShares` (no key recorded, so a
    run without a chosen reference keeps the summary it always had).
    A streaming run's summary comes from ``sim.stream.StreamingOutput`` instead, with the
    same entries (``job_entry``, ``queue_entry``, ``document``)."""
    if result.streamed:
        raise ValueError("a streaming run keeps no rows: its summary comes from its sink "
                         "(sim.stream.StreamingOutput.finish)")
    sc = result.scenario
    names = sc.resources
    m = sc.m
    end = result.end_time
    ints = integrals(result)
    zero = Integral(0.0, [0.0] * m, 0.0)

    rep = replay(result, fairness_gap=fairness_gap, reference=reference)
    preempting = result.preemptions is not None
    jobs: dict[str, dict] = {}
    for job in sc.jobs:
        jobs[job.name] = job_entry(
            job.queue, result.jobs[job.name], ints.get(("job", job.name), zero), names, end,
            rep.longest_starvation.get(job.name, 0.0),
            result.tasks_preempted.get(job.name, 0) if preempting else None,
            result.work_lost.get(job.name, 0.0) if preempting else None, gang=job.gang)
        if result.pending_by_reason is not None:
            jobs[job.name]["pending_by_reason"] = dict(sorted(result.pending_by_reason.get(job.name, {}).items()))
    queues: dict[str, dict] = {}
    for path in sc.queues.paths:
        prefix = path + "."
        below = [job.name for job in sc.jobs if job.queue == path or job.queue.startswith(prefix)]
        live = [result.jobs[n] for n in below if result.jobs[n].submitted]
        starts = [o.submit for o in live]
        if starts:
            stop = max((o.finish if o.finish is not None else end) for o in live)
            span = stop - min(starts)
        else:
            span = 0.0
        queues[path] = queue_entry(ints.get(("queue", path), zero), span, names,
                                   None if result.time_below_fair_share is None
                                   else result.time_below_fair_share.get(path, 0.0),
                                   decayed=decayed_at_end(result, path))

    ct = completion_times(result)
    position = {job.name: i for i, job in enumerate(sc.jobs)}  # (ties: the first in the scenario)
    starved_job = max(rep.longest_starvation,
                      key=lambda n: (rep.longest_starvation[n], -position.get(n, len(sc.jobs))), default=None)
    starvation = {
        "max_s": rep.longest_starvation[starved_job] if starved_job is not None else 0.0,
        "job": starved_job if starved_job is not None and rep.longest_starvation[starved_job] > 0 else None,
    }
    return document(result, ints.get(("cluster", CLUSTER), zero), capacity_integral(result), jobs, queues,
                    list(ct.values()), len(sc.jobs), starvation, rep.gap, scenario_name,
                    math.fsum(result.work_lost.values()), reference=reference)


def job_entry(queue: str, o, it: Integral, names: tuple[str, ...], end: float, longest_starvation: float,
              tasks_preempted: int | None, work_lost: float | None, *, gang: bool = False) -> dict:
    """One job's ``summary.json`` entry (``o``: its ``JobOutcome``; ``it``: its integrals;
    the preemption figures None when preemption was off; ``gang_wait`` only for a gang:
    seconds from its submit to its start, None if it never started)."""
    span = ((o.finish if o.finish is not None else end) - o.submit) if o.submitted else 0.0
    entry = {
        "submit": o.submit,
        "start": o.start,
        "finish": o.finish,
        "completion_time": (o.finish - o.submit) if o.finish is not None else None,
        "tasks_completed": o.tasks_completed,
        "mean_running_tasks": it.running / span if span > 0 else 0.0,
        "mean_allocation": {res: (it.allocation[r] / span if span > 0 else 0.0) for r, res in enumerate(names)},
        # extensions
        "queue": queue or None,
        "tasks_total": o.tasks_total,
        "longest_starvation_s": longest_starvation,
    }
    if tasks_preempted is not None:
        entry["tasks_preempted"] = tasks_preempted
        entry["work_lost"] = work_lost
    if gang:
        entry["gang_wait"] = (o.start - o.submit) if o.start is not None else None
    return entry


def decayed_at_end(result: SimResult, path: str) -> DecayRow | None:
    """A queue's decayed usage at the end time (``sim.recorder.DecayedUsageRecorder``); a
    zero one for a queue with nothing below it; None when the run had no decayed usage."""
    if result.decayed_usage_end is None:
        return None
    zero = (result.end_time, path, 0.0, 0.0, (0.0,) * result.scenario.m)
    return result.decayed_usage_end.get(path, zero)


def queue_entry(it: Integral, span: float, names: tuple[str, ...], time_below: float | None, *,
                decayed: DecayRow | None = None) -> dict:
    """One queue's ``summary.json`` entry (``span``: first submit to last finish below it;
    ``decayed``: its decayed usage at the end, docs/simulation.md)."""
    entry = {
        "mean_allocation": {res: (it.allocation[r] / span if span > 0 else 0.0) for r, res in enumerate(names)},
        "mean_dominant_share": it.dominant_share / span if span > 0 else 0.0,
    }
    if time_below is not None:
        entry["time_below_fair_share"] = time_below
    if decayed is not None:
        _t, _path, decayed_share, _effective, usage = decayed
        entry["decayed_usage"] = dict(zip(names, usage))
        entry["decayed_share"] = decayed_share
    return entry


def document(result: SimResult, cluster: Integral, cap_int: list[float], jobs: dict, queues: dict,
             completion: list[float], n_jobs: int, starvation: dict, gap: FairnessGap | None,
             scenario_name: str | None, work_lost: float, *, reference: str | None = None) -> dict:
    """The whole ``summary.json`` from its parts (the contract's keys first; ``work_lost``:
    the total, read only when preemption was on; ``reference``: the chosen fairness
    reference, recorded only when one was chosen)."""
    sc = result.scenario
    utilization = {res: (cluster.allocation[r] / cap_int[r] if cap_int[r] > 0 else 0.0)
                   for r, res in enumerate(sc.resources)}
    summary = {
        "policy": result.policy,
        "makespan": result.end_time,
        "utilization": utilization,
        "jobs": jobs,
        "queues": queues,
        # --- extensions (not in the contract) ---
        "scenario": scenario_name if scenario_name is not None else sc.source,
        "seed": result.options.seed,
        "until": result.options.until,
        "params": result.params,
        "placement": result.options.placement,
        "headroom": result.options.headroom,
        "all_finished": result.all_finished,
        "completion_time": {
            "mean": (math.fsum(completion) / len(completion)) if completion else None,
            "p95": percentile(completion, 95.0),
            "finished_jobs": len(completion),
            "unfinished_jobs": n_jobs - len(completion),
        },
        "starvation": starvation,
        "fairness_gap": None if gap is None else {
            "value": gap.value,
            "static_policy": gap.static_policy,
            "static_policy_reason": gap.static_reason,
            "covered_s": gap.covered_s,
            "static_allocations": gap.static_allocations,
        },
        **({} if reference is None else {"fairness_reference_policy": reference}),
        "decisions": result.decisions,
        "tasks": {
            "launched": result.tasks_launched,
            "completed": result.tasks_completed,
            "lost_to_node_failures": result.tasks_lost,
            "stretched_by_oversubscription": result.tasks_stretched,
        },
        "notes": list(result.notes),
    }
    if result.preemptions is not None:  # (fair-share preemption was on)
        summary["preemptions"] = result.preemptions
        summary["work_lost"] = work_lost
    if result.reserved_idle is not None:  # (gang reservations were on: engine/reserve.py)
        summary["reserved_idle"] = dict(zip(sc.resources, result.reserved_idle))
    return summary
