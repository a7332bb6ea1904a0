"""Fair-share preemption: which running tasks to stop so that a starved queue gets its
fair share back, without ever preempting in a loop.

A pure planner: given what every job holds and is entitled to (its *fair share*: the
policy's exact static allocation of the jobs in the system, guarantees and limits
included, ``policies/bounds.py``), the running tasks and the nodes' free capacity, it
returns the preemptions to make now. The engine applies them (stop the victims, start
the preemptor's task in the room they leave) and the runtimes carry them out; nothing
here reads a clock or keeps state between calls except what it is given.

Rules (docs/policies.md, "Fair-share preemption"):

* **Who may preempt.** A queue whose dominant share has been below its fair share's by
  more than ``tolerance`` for at least ``after`` seconds (the caller tracks since when),
  through one of its jobs that is below its own fair share and has a pending task.
* **Victims.** Only tasks of jobs above their fair share; most over-share job first
  (largest ``share / fair share``), then the most recently started task (least work
  lost), then the highest task id.
* **Never too many.** After the move, every victim job keeps at least its fair share and
  at least the preemptor job's share (both as ratios to their fair shares): the rule
  that makes Kueue's ``LessThanOrEqualToFinalShare`` loop-free, in ratios so that weights
  and guarantees count.
* **Placement-aware.** Victims are taken on one node only, the one where the fewest (then
  the least work lost, then the first node) make the preemptor's task fit; a node where
  freeing tasks cannot make it fit (a GPU task and a node without GPUs) is never touched.
* **Budget.** At most ``max_per_round`` victims per call.

**Why it cannot loop.** Let ``rho_j = share_j / fair_j`` for every job (``inf`` for a job
holding something with a fair share of 0), and let ``Phi`` be the vector of all ``rho_j``
sorted ascending. A preemption raises the preemptor's ``rho_p`` (it gains a task) from
``rho_p < 1`` and lowers each victim's ``rho_v`` from above 1 to a value ``>= max(1,
rho_p')``, where ``rho_p'`` is the preemptor's new ratio; every other job is unchanged.
Every changed entry ends above the preemptor's old ``rho_p``, and every entry below
``rho_p`` is untouched, so ``Phi`` increases strictly in lexicographic order. Between two
changes of the fair shares (a job arriving or leaving, demand changing, a node lost)
allocations take finitely many values, so preemptions stop: no task is preempted back
and forth. :func:`potential` computes ``Phi``; ``tests/test_preemption.py`` checks the
increase on every preemption of random workloads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fairshare.model.resources import Vector, dominant_share, fits


@dataclass(frozen=True)
class PreemptionConfig:
    """The scenario's / config's ``preemption:`` section."""

    #: seconds a queue must stay starved before it may preempt
    after: float = 30.0
    #: a queue is starved when its dominant share is below its fair share's by more
    #: than this (in dominant-share points: 0.05 is 5% of the cluster)
    tolerance: float = 0.05
    #: most victims per decision round
    max_per_round: int = 4


@dataclass(frozen=True, slots=True)
class RunningTaskView:
    task_id: int
    job: str
    node: str
    demand: Vector
    started_at: float


@dataclass(frozen=True, slots=True)
class Claimant:
    """A job that may preempt: below its fair share, in a starved queue, with a pending
    task of ``demand`` that may run on the nodes ``eligible`` accepts."""

    job: str
    class_index: int
    demand: Vector
    eligible: Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class Preemption:
    """Stop ``victims`` (task ids, in the order chosen) on ``node`` and start a task of
    ``job``'s class ``class_index`` there."""

    job: str
    class_index: int
    node: str
    victims: tuple[int, ...]


def ratio(usage: Vector, fair: Vector, capacity: Vector) -> float:
    """``share / fair share`` by dominant shares; 1 when both are 0, ``inf`` when only
    the fair share is."""
    share = dominant_share(usage, capacity)
    entitled = dominant_share(fair, capacity)
    if entitled <= 0:
        return 1.0 if share <= 0 else math.inf
    return share / entitled


def potential(job_usage: Mapping[str, Vector], job_fair: Mapping[str, Vector], capacity: Vector) -> tuple[float, ...]:
    """``Phi``: every job's ``share / fair share``, sorted ascending (module docstring)."""
    return tuple(sorted(ratio(u, job_fair.get(name, (0.0,) * len(capacity)), capacity)
                        for name, u in job_usage.items()))


def plan(claimants: Sequence[Claimant], running: Sequence[RunningTaskView], *,
         job_usage: Mapping[str, Vector], job_fair: Mapping[str, Vector], capacity: Vector,
         node_free: Mapping[str, Vector], node_order: Sequence[str], max_victims: int) -> list[Preemption]:
    """The preemptions to make now, for ``claimants`` in the order given (the caller puts
    the most starved first), within ``max_victims`` victims in all.

    ``job_usage`` and ``job_fair`` hold every job's allocation and fair share;
    ``node_free`` each node's free capacity (as placement sees it); ``node_order`` the
    nodes in the order placement scans them (the tie rule). Each preemption is planned
    on the state the earlier ones leave."""
    m = len(capacity)
    zero = (0.0,) * m
    usage = {name: tuple(u) for name, u in job_usage.items()}
    free = {name: list(f) for name, f in node_free.items()}
    taken: set[int] = set()
    out: list[Preemption] = []
    budget = max_victims
    by_node: dict[str, list[RunningTaskView]] = {}
    for task in running:
        by_node.setdefault(task.node, []).append(task)

    def rho(name: str, u: Vector | None = None) -> float:
        return ratio(usage.get(name, zero) if u is None else u, job_fair.get(name, zero), capacity)

    for claim in claimants:
        if budget <= 0:
            break
        if rho(claim.job) >= 1.0:
            continue  # (an earlier preemption of this call may have lifted it)
        after_p = _plus(usage.get(claim.job, zero), claim.demand)
        rho_p_after = rho(claim.job, after_p)
        best: tuple | None = None
        for position, node in enumerate(node_order):
            if not claim.eligible(node) or node not in free:
                continue
            if fits(claim.demand, free[node]):
                continue  # it fits without preempting: the scheduler will place it
            candidates = [t for t in by_node.get(node, ()) if t.task_id not in taken and t.job != claim.job
                          and rho(t.job) > 1.0]
            # most over-share job first, then the most recently started, then highest id
            candidates.sort(key=lambda t: (-rho(t.job), -t.started_at, -t.task_id))
            chosen: list[RunningTaskView] = []
            room = list(free[node])
            trial = dict()
            for task in candidates:
                if len(chosen) >= budget:
                    break
                left = _minus(trial.get(task.job, usage[task.job]), task.demand)
                # the victim keeps its fair share and the preemptor's (new) ratio
                if rho(task.job, left) < max(1.0, rho_p_after) * (1 - 1e-12):
                    continue
                trial[task.job] = left
                chosen.append(task)
                room = [a + b for a, b in zip(room, task.demand)]
                if fits(claim.demand, room):
                    break
            if not chosen or not fits(claim.demand, room):
                continue
            lost = sum(-t.started_at for t in chosen)  # (later starts lose less work)
            key = (len(chosen), lost, position)
            if best is None or key < best[0]:
                best = (key, node, chosen, trial, room)
        if best is None:
            continue
        _key, node, chosen, trial, room = best
        for task in chosen:
            taken.add(task.task_id)
        usage.update(trial)
        usage[claim.job] = after_p
        free[node] = _minus(room, claim.demand)
        budget -= len(chosen)
        out.append(Preemption(claim.job, claim.class_index, node, tuple(t.task_id for t in chosen)))
    return out


def _plus(a: Vector, b: Vector) -> Vector:
    return tuple(x + y for x, y in zip(a, b))


def _minus(a: Sequence[float], b: Vector) -> Vector:
    return tuple(max(0.0, x - y) for x, y in zip(a, b))
