"""Why a job waits: its reasons, in the numbers the engine decides on, and what would
start it now, each checked by deciding again.

Read-only over a :class:`~fairshare.engine.scheduler.Scheduler` (the simulator's and
serve's alike): nothing here changes the state it explains; every "what if" runs on a
deep copy. Nothing is computed unless asked (``fairshare explain``), so a run that does
not ask pays nothing.

A job is explained at a *quiet point*, after ``Scheduler.schedule(now)`` returned: the
round started every job the policy would pick that could run, so a job still pending
there is blocked by a rule of the engine (docs/policies.md, "Why a job waits"):

* ``priority_held``: a job of higher ``priority`` in its queue demands (the scheduler's
  strict priorities: the sorter does not see it at all);
* ``queue_limit``: one more task would push its queue, or a queue above it, past a
  limit (``engine/bounds.py``; a gang: its summed demand);
* ``gang_incomplete``: a gang for which ``engine/gangs.py`` finds no room for every
  pending task at once;
* ``no_node_fits``: its next task fits on no eligible node now (placement's own fit
  test: headroom, devices, ``max_per_node``); the best node's shortfall per resource and
  whether the free capacity summed over the eligible nodes would hold it (fragmentation).

When the blocker is capacity (the last two), the room it needs goes, as it frees, to
the jobs the engine serves first: it asks the policy's own sorter for its order (a probe
that declines every job, on a copy), after the jobs of queues owed their guarantee
(``engine/bounds.py``: the round asks among those first). Each job ahead becomes
``guarantee_owed`` (it is owed and this job is not) or ``behind_fair_share`` at the
level of the queue tree where the two part: the two siblings (queues, or jobs of one
queue), their dominant shares, weights and dominant resources from the jobs' real
usage, and the share the policy itself measures when its sorter reports one
(``OnlineSorter.shares``). The order is the policy's, so the reason is true for every
policy; the numbers say why only for the dominant-share policies (drf, hdrf, ...): for
fifo the order is arrival, for dff, timefair and slowdown their own measure
(``policy_share``).

``preempted`` comes first when the job's tasks are back in the queue because fair-share
preemption stopped them (``engine/preemption.py``): who took them, when, under which
rule, and the two ratios (share / fair share) that rule compared for the victim job and
the claimant, as the planner saw them at that moment (the loop-free rule: the victim
from above 1 to at least ``max(1, claimant_ratio)``, the claimant from below 1; within a
queue, the two priorities). The scheduler keeps the last such record per job until its
re-queued tasks have started again; what blocks them now follows it.

``reserved_for``: capacity is held for an overdue gang (``gangs: {reserve_after}``,
``engine/reserve.py``) and the job's next task would fit on some eligible node if that
hold were free: the gang, the capacity held per resource, the nodes held, and the
gang's planned start when the runtime knows durations (the simulator). It is tried
before the room tests, since the hold is taken before the policy decides.

Counterfactuals (``would_start_if``): the smallest change of the blocking quantity,
applied to a copy with :func:`apply_change`; a change is reported only if a new
decision round on that copy starts the job (``starts``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from fairshare.engine.gangs import gang_members, place_gang
from fairshare.engine.scheduler import JobRuntime, Scheduler
from fairshare.model.cluster import satisfies
from fairshare.model.queues import ROOT
from fairshare.model.resources import Vector, fit_limit, fits, to_mapping

#: the jobs ahead reported at most (the nearest in the engine's order)
AHEAD_MAX = 3
#: the nodes tried for an "if these tasks had ended" change
NODES_TRIED = 8


@dataclass(frozen=True)
class Explanation:
    """The contract's ``explain`` document, less ``estimated_start`` (the runtime's)."""

    job: str
    state: str  # pending, running, finished, cancelled, unknown
    reasons: tuple[dict, ...] = ()
    would_start_if: tuple[dict, ...] = ()

    def to_json(self, estimated_start: float | None = None) -> dict:
        return {"job": self.job, "state": self.state, "reasons": [dict(r) for r in self.reasons],
                "would_start_if": [dict(c) for c in self.would_start_if], "estimated_start": estimated_start}


def explain(sch: Scheduler, name: str, now: float) -> Explanation:
    """Why job ``name`` waits at a quiet point of ``sch`` (module docstring)."""
    rt = sch.jobs.get(name)
    if rt is None:
        return Explanation(name, "unknown")
    if rt.finished_at is not None:
        return Explanation(name, "finished")
    if rt.cancelled:
        return Explanation(name, "cancelled")
    if not rt.demanding:
        return Explanation(name, "running")
    state = "running" if rt.running else "pending"
    blocked: list[dict] = []
    for blocker in BLOCKERS:
        found = blocker(sch, rt)
        if found:
            blocked.extend(found)
            break
    if blocked and blocked[0]["kind"] in CAPACITY_KINDS:
        blocked.extend(ahead_reasons(sch, name, now))
    # (first: it is why its tasks are back in the queue; what blocks them follows)
    reasons = _preempted(rt) + blocked
    changes = []
    for alternatives in counterfactuals(sch, rt, blocked):
        change = next((c for c in alternatives if starts(sch, name, c, now)), None)
        if change is not None:
            changes.append(change)
    return Explanation(name, state, tuple(reasons), tuple(changes))


def blocking_kind(sch: Scheduler, rt: JobRuntime, fits: dict | None = None) -> str | None:
    """The kind of the first reason :func:`explain` gives a demanding job at a quiet point
    (its blocker), without the jobs ahead or the counterfactuals: what the simulator's
    ``--reasons`` and serve's ``fairshare_pending_jobs{reason}`` count. None: no blocker
    (the job is not demanding, or would start at the next round). ``fits``: whether a
    task of each shape fits on some node, filled as found (one state, many jobs)."""
    if not rt.demanding or rt.finished_at is not None or rt.cancelled:
        return None
    if rt.preempted_by is not None:  # (explain's first reason when present)
        return "preempted"
    for blocker in BLOCKERS:
        if blocker is _no_node:  # (the test alone, not the reason's numbers)
            if not rt.job.gang and rt.shape_class is not None and not _next_task_fits(sch, rt, fits):
                return "no_node_fits"
            continue
        found = blocker(sch, rt)
        if found:
            return found[0]["kind"]
    return None


def blocking_kinds(sch: Scheduler) -> dict[str, str]:
    """Every job with tasks waiting at a quiet point of ``sch`` -> its blocker's kind
    (:func:`blocking_kind`), in name order."""
    out = {}
    fits: dict = {}
    for name in sorted(sch.jobs):
        kind = blocking_kind(sch, sch.jobs[name], fits)
        if kind is not None:
            out[name] = kind
    return out


def _next_task_fits(sch: Scheduler, rt: JobRuntime, fits: dict | None = None) -> bool:
    """Placement's own test for the job's next task (``max_per_node`` included); the
    answer for a shape is kept in ``fits`` when the task has no ``max_per_node``."""
    j = rt.shape_class
    cls = rt.job.classes[j]
    if cls.max_per_node is None:
        if fits is not None and rt.shape_key in fits:
            return fits[rt.shape_key]
        found = sch.pool.place(cls.demand, cls.constraints, None) is not None
        if fits is not None:
            fits[rt.shape_key] = found
        return found
    return sch.pool.place(cls.demand, cls.constraints, sch._under_limit(rt.job.name, j, cls.max_per_node)) is not None


# --- blockers ------------------------------------------------------------------------------------

def _preempted(rt: JobRuntime) -> list[dict]:
    """``preempted``: the last preemption that re-queued tasks of the job, while some of
    them wait (``Scheduler._note_preempted`` records it when it happens), with how many
    still wait."""
    if rt.preempted_by is None:
        return []
    return [{**rt.preempted_by, "waiting": rt.preempted_waiting}]


def _held(sch: Scheduler, rt: JobRuntime) -> list[dict]:
    if not rt.held:
        return []
    higher = [other for other, ort in sch.jobs.items()
              if ort.job.queue == rt.job.queue and ort.ranked and ort.job.priority > rt.job.priority]
    return [{"kind": "priority_held", "queue": rt.job.queue, "priority": rt.job.priority,
             "higher": sorted(higher, key=lambda n: (-sch.jobs[n].job.priority, n))}]


def next_demand(rt: JobRuntime) -> tuple[Vector, int | None]:
    """What the job's next start needs: its next task's demand (and class), or a gang's
    every pending task summed (class None)."""
    job = rt.job
    if job.gang:
        members = gang_members(job.classes, rt.pending)
        return tuple(sum(job.classes[j].demand[r] for j in members) for r in range(len(job.classes[0].demand))), None
    j = rt.shape_class
    return job.classes[j].demand, j


def _limits(sch: Scheduler, rt: JobRuntime) -> list[dict]:
    bounds = sch.bounds
    if bounds is None or rt.shape_class is None and not rt.job.gang:
        return []
    demand, _j = next_demand(rt)
    out = []
    for path in bounds.chain(rt.job.queue):
        limit = sch.queues[path].limit_vector(sch.resources) if path != ROOT else ()
        usage = bounds.current(path) if path in bounds._moving else bounds.usage[path]
        for r, widened in bounds.limit_fit.get(path, ()):
            if demand[r] > 0 and usage[r] + demand[r] > widened:
                out.append({"kind": "queue_limit", "queue": path, "resource": sch.resources[r],
                            "usage": usage[r], "demand": demand[r], "limit": limit[r]})
    return out


def _gang(sch: Scheduler, rt: JobRuntime) -> list[dict]:
    job = rt.job
    if not job.gang:
        return []
    members = gang_members(job.classes, rt.pending)
    demand, _ = next_demand(rt)
    per_node = sch._per_node
    nodes = place_gang(sch.pool, job.classes, members, demand, job.pack,
                       lambda j, node: per_node.get((job.name, j), {}).get(node, 0))
    if nodes is not None:
        return []
    free = _free_total(sch, _eligible(sch, ()))
    return [{"kind": "gang_incomplete", "tasks": len(members), "demand": _named(sch, demand),
             "free": _named(sch, free), "fits_in_total": fits(demand, free), "pack": _pack(job.pack)}]


def _no_node(sch: Scheduler, rt: JobRuntime) -> list[dict]:
    if rt.job.gang or rt.shape_class is None:
        return []
    j = rt.shape_class
    cls = rt.job.classes[j]
    if _next_task_fits(sch, rt):
        return []
    allowed = None if cls.max_per_node is None else sch._under_limit(rt.job.name, j, cls.max_per_node)
    nodes = [n for n in _eligible(sch, cls.constraints) if allowed is None or allowed(n)]
    need = _task_need(sch, cls)
    best = best_nodes(sch, need, nodes)
    free = _free_total(sch, nodes)
    reason = {"kind": "no_node_fits", "demand": _named(sch, cls.demand), "eligible_nodes": len(nodes),
              "free": _named(sch, free), "fits_in_total": fits(need, free)}
    if best:
        node, short = best[0]
        reason["best_node"] = sch.pool.name(node)
        reason["node_free"] = _named(sch, _free(sch, node))
        reason["shortfall"] = _named(sch, short)
    return [reason]


def _reserved(sch: Scheduler, rt: JobRuntime) -> list[dict]:
    reserve = sch.reserve
    if reserve is None or reserve.gang is None or reserve.gang == rt.job.name or rt.job.gang \
            or rt.shape_class is None:
        return []
    held_on = reserve.held_by_node()
    if not held_on or _next_task_fits(sch, rt):
        return []
    cls = rt.job.classes[rt.shape_class]
    need = _task_need(sch, cls)
    nodes = set(_eligible(sch, cls.constraints))
    unblocked = [n for n, held in sorted(held_on.items())
                 if n in nodes and fits(need, tuple(f + h for f, h in zip(_free(sch, n), held)))]
    if not unblocked:
        return []
    held_total = tuple(sum(held[r] for held in held_on.values()) for r in range(sch.m))
    return [{"kind": "reserved_for", "gang": reserve.gang, "demand": _named(sch, cls.demand),
             "held": _named(sch, held_total), "held_nodes": [sch.pool.name(n) for n in sorted(held_on)],
             "would_fit_on": [sch.pool.name(n) for n in unblocked], "gang_start": reserve.shadow}]


#: the blockers, tried in this order (the engine's: a held job is not seen at all; the
#: limit test comes before placement; a reservation holds capacity before the policy
#: decides)
BLOCKERS: tuple[Callable[[Scheduler, JobRuntime], list[dict]], ...] = (_held, _limits, _reserved, _gang,
                                                                      _no_node)
#: the kinds the blockers give (what ``blocking_kind`` returns), in their order
#: (``preempted`` first when present, then the blockers')
BLOCKER_KINDS = ("preempted", "priority_held", "queue_limit", "reserved_for", "gang_incomplete", "no_node_fits")
#: the reasons that mean "not enough room now": who is served first then counts
CAPACITY_KINDS = frozenset({"no_node_fits", "gang_incomplete"})


# --- the jobs ahead ------------------------------------------------------------------------------

def engine_order(sch: Scheduler, now: float) -> tuple[list[str], list[str]]:
    """The order in which the next round would ask for the demanding jobs, as if nothing
    were saturated: the owed jobs by the policy's order, then every job by it. Probed
    on a copy (the sorter is asked with a test that declines every job)."""
    probe = copy.deepcopy(sch)
    sorter = probe.sorter
    sorter.reset_excluded()
    sorter.set_saturated(frozenset())
    bounds = probe.bounds
    owed: list[str] = []
    if bounds is not None and bounds.has_guarantees:
        def owed_job(name: str) -> bool:
            rt = probe.jobs[name]
            if rt.shape_class is not None and bounds.owed(rt.job.queue, rt.job.classes[rt.shape_class].demand):
                owed.append(name)
            return False

        sorter.pick(owed_job, now)
    order: list[str] = []

    def record(name: str) -> bool:
        order.append(name)
        return False

    sorter.pick(record, now)
    return list(dict.fromkeys(owed)), list(dict.fromkeys(order))


def ahead_reasons(sch: Scheduler, name: str, now: float) -> list[dict]:
    """``guarantee_owed`` and ``behind_fair_share``: the nearest jobs the engine serves
    before ``name`` (module docstring), one reason per queue (or job) it is behind."""
    owed, order = engine_order(sch, now)
    if name in owed:
        ahead = [(other, True) for other in owed[:owed.index(name)]]
    else:
        ahead = [(other, True) for other in owed] + \
                [(other, False) for other in order[:order.index(name) if name in order else len(order)]
                 if other not in owed]
    out, seen = [], set()
    mine = sch.jobs[name].job
    shares = sch.sorter.shares()
    for other, is_owed in ahead:
        if len(out) >= AHEAD_MAX:
            break
        ort = sch.jobs[other]
        if is_owed:
            reason = _owed(sch, ort)
        else:
            if sch.policy.hierarchical:
                level, me, them = _parting(sch, mine.queue, name, ort.job.queue, other)
            else:  # (a flat policy orders the jobs themselves, whatever their queues)
                level, me, them = ROOT, name, other
            reason = {"kind": "behind_fair_share", "level": level,
                      "behind": me, **_side(sch, me, shares, "", mine.queue),
                      "ahead": them, **_side(sch, them, shares, "ahead_", ort.job.queue), "ahead_job": other}
            if me == name:  # two jobs: their arrival (FIFO's order, and every policy's tie rule)
                reason["submitted"] = sch.jobs[name].submitted_at
                reason["ahead_submitted"] = ort.submitted_at
        key = (reason["kind"], reason.get("ahead", reason.get("queue")), reason.get("behind"))
        if key not in seen:
            seen.add(key)
            out.append(reason)
    return out


def _owed(sch: Scheduler, rt: JobRuntime) -> dict:
    """The guaranteed queue at or above ``rt``'s that its next task is within."""
    bounds = sch.bounds
    demand = rt.job.classes[rt.shape_class].demand
    for path in bounds.chain(rt.job.queue):
        pairs = bounds.guarantee_fit.get(path, ())
        usage = bounds.current(path) if path in bounds._moving else bounds.usage[path]
        used = [r for r, _g in pairs if demand[r] > 0]
        if used and all(usage[r] + demand[r] <= g for r, g in pairs if demand[r] > 0):
            guarantee = sch.queues[path].guarantee_vector(sch.resources)
            return {"kind": "guarantee_owed", "queue": path, "job": rt.job.name,
                    "usage": {sch.resources[r]: usage[r] for r in used},
                    "guarantee": {sch.resources[r]: guarantee[r] for r in used}}
    raise AssertionError(f"job {rt.job.name!r} was asked among the owed but no queue owes it")


def _parting(sch: Scheduler, queue: str, name: str, other_queue: str, other: str) -> tuple[str, str, str]:
    """Where two jobs part in the tree: the parent, and the two children under it (queue
    paths, or the job names when they share a queue)."""
    if queue == other_queue:
        return queue, name, other
    mine = list(reversed(sch.queues.ancestors(queue)))  # root first
    theirs = list(reversed(sch.queues.ancestors(other_queue)))
    k = 0
    while k < min(len(mine), len(theirs)) and mine[k] == theirs[k]:
        k += 1
    me = mine[k] if k < len(mine) else name
    them = theirs[k] if k < len(theirs) else other
    return mine[k - 1], me, them


def _side(sch: Scheduler, key: str, shares: dict, prefix: str, queue: str) -> dict:
    """The dominant share (usage over capacity, max over resources), weight and dominant
    resource of a queue path or a job; the policy's own share when it reports one."""
    if key in sch.jobs and (key != queue or key not in sch.queues):
        usage, weight = sch.usage(key), sch.jobs[key].job.weight
    else:
        usage = [0.0] * sch.m
        for rt in sch.jobs.values():
            if rt.finished_at is None and (rt.job.queue == key or rt.job.queue.startswith(key + ".")):
                for r, u in enumerate(sch.usage(rt.job.name)):
                    usage[r] += u
        weight = sch.queues[key].weight
    capacity = sch.pool.total_capacity
    ratios = [u / c if c > 0 else 0.0 for u, c in zip(usage, capacity)]
    r = max(range(sch.m), key=lambda i: (ratios[i], -i))
    return {f"{prefix}dominant_share": ratios[r], f"{prefix}weight": weight,
            f"{prefix}dominant_resource": sch.resources[r], f"{prefix}policy_share": shares.get(key)}


# --- counterfactuals -----------------------------------------------------------------------------

def counterfactuals(sch: Scheduler, rt: JobRuntime, reasons: list[dict]) -> list[list[dict]]:
    """Candidate changes for the blocking reason, in groups of alternatives, smallest
    first: the first of a group that starts the job is reported (each still to be
    checked)."""
    if not reasons:
        return []
    kind = reasons[0]["kind"]
    if kind == "queue_limit":
        raised = {}
        for reason in reasons:
            if reason["kind"] == "queue_limit":
                raised.setdefault(reason["queue"], {})[reason["resource"]] = reason["usage"] + reason["demand"]
        # (every blocking limit at once: raising one alone leaves the job blocked)
        return [[{"kind": "limit_raised", "limits": raised}]]
    if kind == "no_node_fits":
        return [_smaller_demand(sch, rt), _tasks_ended(sch, rt)]
    if kind == "gang_incomplete":
        return [_smaller_gang(rt)]
    return []


def _smaller_demand(sch: Scheduler, rt: JobRuntime) -> list[dict]:
    """The job's next task asking for what the best node has free of each resource it
    is short of (no more than it asks)."""
    cls = rt.job.classes[rt.shape_class]
    nodes = _eligible(sch, cls.constraints)
    best = best_nodes(sch, cls.demand, nodes)
    out = []
    for node, _short in best[:1]:
        free = _free(sch, node)
        asked = tuple(min(d, max(f, 0.0)) for d, f in zip(cls.demand, free))
        # (a task asking for none of a resource it needs is no answer)
        if all(a > 0 for a, d in zip(asked, cls.demand) if d > 0) and asked != cls.demand:
            out.append({"kind": "smaller_demand", "task_class": cls.name, "demand": _named(sch, asked),
                        "instead_of": _named(sch, cls.demand)})
    return out


def _tasks_ended(sch: Scheduler, rt: JobRuntime) -> list[dict]:
    """On the nodes closest to holding the task: running tasks (most recent first) whose
    end would make room, with the usage each queue would give up; on each node, from the
    fewest that make room to all of them (the room may go to a job ahead first)."""
    cls = rt.job.classes[rt.shape_class]
    need = _task_need(sch, cls)
    out = []
    for node, _short in best_nodes(sch, need, _eligible(sch, cls.constraints))[:NODES_TRIED]:
        free = list(_free(sch, node))
        running = sorted((t for t in sch.tasks.values() if t.node_index == node and t.job != rt.job.name),
                         key=lambda t: (-t.started_at, -t.task_id))
        chosen = []
        for task in running:
            chosen.append(task)
            for r, d in enumerate(task.demand):
                free[r] += d
            if not fits(need, tuple(free)):
                continue
            freed: dict[str, dict[str, float]] = {}
            for task in chosen:
                by_queue = freed.setdefault(sch.jobs[task.job].job.queue, {})
                for r, d in enumerate(task.demand):
                    if d > 0:
                        by_queue[sch.resources[r]] = by_queue.get(sch.resources[r], 0.0) + d
            out.append({"kind": "tasks_ended", "node": sch.pool.name(node),
                        "tasks": [t.task_id for t in chosen], "jobs": sorted({t.job for t in chosen}),
                        "freed": freed})
    out.sort(key=lambda c: len(c["tasks"]))  # (stable: the closest node first among equals)
    return out


def _smaller_gang(rt: JobRuntime) -> list[dict]:
    """The gang with fewer tasks (its last class's count lowered), largest first."""
    members = gang_members(rt.job.classes, rt.pending)
    return [{"kind": "smaller_gang", "tasks": k, "instead_of": len(members)} for k in range(len(members) - 1, 0, -1)]


def apply_change(sch: Scheduler, name: str, change: dict, now: float) -> None:
    """Make ``change`` (a counterfactual) on ``sch``, a copy."""
    rt = sch.jobs[name]
    kind = change["kind"]
    if kind == "limit_raised":
        bounds = sch.bounds
        index = {r: i for i, r in enumerate(sch.resources)}
        for queue, limits in change["limits"].items():
            fitted = dict(bounds.limit_fit[queue])
            for resource, value in limits.items():
                fitted[index[resource]] = fit_limit(value)
            bounds.limit_fit[queue] = tuple(sorted(fitted.items()))
    elif kind == "smaller_demand":
        j = rt.shape_class
        asked = tuple(change["demand"].get(r, 0.0) for r in sch.resources)
        old = rt.job.classes[j]
        classes = list(rt.job.classes)
        classes[j] = replace(old, demand=asked)
        sch.shapes.track(old, -1)
        rt.job = replace(rt.job, classes=tuple(classes))
        sch.shapes.track(classes[j], +1)
        sch._set_factor(rt)
        sch._refile(rt)
        sch.sorter.jobs[name].demand = rt.job.composite_demand()
    elif kind == "tasks_ended":
        for task_id in change["tasks"]:
            sch.finish(task_id, now)
    elif kind == "smaller_gang":
        drop = len(gang_members(rt.job.classes, rt.pending)) - change["tasks"]
        for j in reversed(range(len(rt.pending))):
            taken = min(drop, int(rt.pending[j]))
            rt.pending[j] -= taken
            drop -= taken
    else:
        raise ValueError(f"unknown change kind {kind!r}")
    sch._quiet_mark = None  # (what fits where is searched again)


def starts(sch: Scheduler, name: str, change: dict, now: float) -> bool:
    """Whether a decision round on a copy of ``sch`` with ``change`` made starts ``name``."""
    trial = copy.deepcopy(sch)
    apply_change(trial, name, change, now)
    return any(launch.job == name for launch in trial.schedule(now))


# --- nodes ---------------------------------------------------------------------------------------

def _task_need(sch: Scheduler, cls) -> Vector:
    """What one task of ``cls`` takes from a node: with headroom its effective demand; on
    a cluster with devices its demand as given (devices are whole)."""
    return sch.pool._effective(cls.demand) if not sch.pool.devices else cls.demand


def _eligible(sch: Scheduler, constraints: tuple) -> list[int]:
    pool = sch.pool
    return [n for n in range(len(pool.states)) if pool.alive(n) and satisfies(pool.states[n].attrs, constraints)]


def _free(sch: Scheduler, node: int) -> Vector:
    return tuple(sch.pool.states[node].free)


def _free_total(sch: Scheduler, nodes: list[int]) -> Vector:
    return tuple(sum(sch.pool.states[n].free[r] for n in nodes) for r in range(sch.m))


def best_nodes(sch: Scheduler, need: Vector, nodes: list[int]) -> list[tuple[int, Vector]]:
    """``nodes`` with their shortfall for ``need`` (per resource, what is missing), the
    closest first: the smallest shortfall summed in fractions of the cluster's capacity,
    then cluster order."""
    capacity = sch.pool.total_capacity
    out = []
    for n in nodes:
        short = tuple(max(0.0, d - f) for d, f in zip(need, _free(sch, n)))
        out.append((sum(s / c for s, c in zip(short, capacity) if c > 0), n, short))
    out.sort(key=lambda x: (x[0], x[1]))
    return [(n, short) for _k, n, short in out]


def _named(sch: Scheduler, vector: Vector) -> dict[str, float]:
    return {r: (v if math.isfinite(v) else None) for r, v in to_mapping(vector, sch.resources).items()}


def _pack(pack) -> str | None:
    return None if pack is None else (pack[0] if pack[1] is None else f"{pack[0]}:{pack[1]}")
