"""Fair-share preemption: which running tasks to stop so that a starved queue gets its
fair share back, without ever preempting in a loop.

A pure planner: given what every job holds and is entitled to (its *fair share*: the
policy's exact static allocation of the jobs in the system, guarantees and limits
included, ``policies/machinery/bounds.py``), the running tasks and the nodes' free capacity, it
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
* **Budget.** At most ``max_per_round`` victims per call. With ``round`` (seconds) the
  budget is a rate: :class:`Preemptor` plans at most once per ``round`` seconds, and
  while a queue stays starved past its deadline it asks to be woken every ``round``
  seconds (:meth:`Preemptor.wake_at`), so a starved queue gains ``max_per_round`` victims
  a round whether or not other tasks end meanwhile.
* **Gangs** (``Job.gang``) are one unit (docs/policies.md, "Gangs in preemption"): a
  gang's fair share is all or nothing (its divisible share rounded: its whole demand
  when the share covers it, else nothing); a victim gang loses all of its tasks (one
  victim against the budget); a gang claims all of its pending tasks at once, in one of
  its ``pack`` groups, or nothing. A gang's ratio moves only from 0 to 1 (claiming) or
  from inf to 1 (a victim), so the argument below holds as it is.
* **Within a queue** (``PreemptionConfig.within_queue``, off by default): a job of a
  queue's highest demanding priority, after ``after`` seconds of waiting beside running
  jobs of lower priority of its queue, takes their tasks (lowest priority first), the
  ratios aside. Priorities are a total order: the victim never claims back (it is held
  while a higher priority demands), docs/policies.md, "Priority preemption within a
  queue".

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
from dataclasses import dataclass, replace

from fairshare.engine.gangs import gang_members
from fairshare.model.cluster import Cluster, Node
from fairshare.model.jobs import PACK_NODE, Job
from fairshare.model.queues import QueueTree
from fairshare.model.resources import Vector, dominant_share, fits
from fairshare.model.scenario import PreemptionConfig, Scenario
from fairshare.policies import PolicyModeError


@dataclass(frozen=True, slots=True)
class RunningTaskView:
    task_id: int
    job: str
    node: str
    demand: Vector
    started_at: float
    gang: bool = False  # a gang's task: taken only with all of its gang's tasks


@dataclass(frozen=True, slots=True)
class Claimant:
    """A job that may preempt: below its fair share, in a starved queue, with a pending
    task of ``demand`` that may run on the nodes ``eligible`` accepts.

    A gang claims all of its pending tasks at once: ``members`` holds each one's demand
    and eligible nodes (``demand`` is their sum), ``groups`` the node groups its ``pack``
    allows (None: any nodes). ``victims``, for a claim within its queue (priorities):
    the jobs it may take from, each with its rank (lowest taken first); None for a
    fair-share claim."""

    job: str
    class_index: int
    demand: Vector
    eligible: Callable[[str], bool]
    pending: float = math.inf  # its pending tasks of that class: at most this many claims
    members: tuple[tuple[Vector, Callable[[str], bool]], ...] = ()
    groups: tuple[tuple[str, ...], ...] | None = None
    victims: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Legality:
    """What made a preemption legal, as its rule compared it at that moment (kept for
    ``fairshare explain``'s ``preempted``, docs/policies.md "Why a job waits").

    ``rule``: ``fair_share`` (the loop-free rule: each victim job goes from a ratio above
    1 to one ``>= max(1, claimant_ratio)``, the claimant from below 1), ``naive`` (the
    comparison rule: victims above their fair share, whatever they keep) or
    ``within_queue`` (priorities, the ratios aside: each victim's rank, the lowest taken
    first). The ratios are :func:`ratio`'s ``share / fair share``, before and after the
    move; ``victims``: ``(job, ratio before, ratio after, rank)`` per victim job, rank
    None for a fair-share claim."""

    rule: str
    claimant_ratio_before: float
    claimant_ratio: float
    victims: tuple[tuple[str, float, float, int | None], ...]


@dataclass(frozen=True, slots=True)
class Preemption:
    """Stop ``victims`` (task ids, in the order chosen) on ``node`` and start a task of
    ``job``'s class ``class_index`` there. For a gang's claim (``gang``) the whole gang
    starts instead, as placement finds room for it (``node``: where the planner's own
    trial put its first task). ``victim_gangs``: the gangs among the victims, each
    stopped whole (all of its task ids are in ``victims``)."""

    job: str
    class_index: int
    node: str
    victims: tuple[int, ...]
    gang: bool = False
    victim_gangs: tuple[str, ...] = ()
    legality: Legality | None = None


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


def gang_room(members: Sequence[tuple[Vector, Callable[[str], bool]]], groups: Sequence[Sequence[str]],
              free: Mapping[str, Sequence[float]]) -> list[str] | None:
    """A node for each member (first fit, members in order, each taking its demand before
    the next) within one of ``groups`` (tried in order), on the free capacities ``free``;
    None when no group holds them all. The planner's summed-amount view of
    ``engine.gangs.place_gang``: the engine places the gang for real afterwards."""
    for group in groups:
        room = {node: list(free[node]) for node in group if node in free}
        nodes = []
        for demand, eligible in members:
            node = next((n for n in room if eligible(n) and fits(demand, room[n])), None)
            if node is None:
                break
            room[node] = [a - b for a, b in zip(room[node], demand)]
            nodes.append(node)
        else:
            return nodes
    return None


def plan(claimants: Sequence[Claimant], running: Sequence[RunningTaskView], *,
         job_usage: Mapping[str, Vector], job_fair: Mapping[str, Vector], capacity: Vector,
         node_free: Mapping[str, Vector], node_order: Sequence[str], max_victims: int,
         rule: str = "loop-free") -> list[Preemption]:
    """The preemptions to make now, for ``claimants`` in the order given (the caller puts
    the most starved first), within ``max_victims`` victims in all (a gang counts as one).

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
    current: dict[str, float] = {}  # rho of each job's current usage (dropped when it moves)

    def rho(name: str, u: Vector | None = None) -> float:
        if u is not None:
            return ratio(u, job_fair.get(name, zero), capacity)
        got = current.get(name)
        if got is None:
            got = current[name] = ratio(usage.get(name, zero), job_fair.get(name, zero), capacity)
        return got

    # a gang's running tasks: a victim gang loses all of them at once
    gang_tasks: dict[str, list[RunningTaskView]] = {}
    for task in running:
        if task.gang:
            gang_tasks.setdefault(task.job, []).append(task)

    def unit_of(task: RunningTaskView) -> Sequence[RunningTaskView]:
        return gang_tasks[task.job] if task.gang else (task,)

    # per node, the tasks of jobs above their fair share, in victim order: most over-share
    # job first (as the round starts), then the most recently started, then highest id;
    # and the most room freeing all of them could make (nodes where even that is too
    # little are passed over at once)
    by_node: dict[str, list[RunningTaskView]] = {}
    for task in running:
        if rho(task.job) > 1.0:
            by_node.setdefault(task.node, []).append(task)
    most_room: dict[str, list[float]] = {}
    for node, tasks in by_node.items():
        tasks.sort(key=lambda t: (-rho(t.job), -t.started_at, -t.task_id))
        room = list(free.get(node, zero))
        for t in tasks:
            for r, d in enumerate(t.demand):
                room[r] += d
        most_room[node] = room

    loop_free = rule == "loop-free"

    def may_take(claim: Claimant, task: RunningTaskView, trial: dict[str, Vector], rho_p_after: float) -> Vector | None:
        """What ``task``'s job keeps if ``task`` (its whole gang, for a gang's task) goes
        for ``claim``, or None when the rules forbid it: a fair-share claim takes only
        from jobs above their fair share, each keeping at least ``max(1, rho_p')``
        (module docstring); a claim within its queue only from the jobs it names."""
        if task.task_id in taken or task.job == claim.job or (task.gang and task.job in trial):
            return None  # (a gang already chosen lost all of its tasks at once)
        if claim.victims is not None:
            if task.job not in claim.victims:
                return None
        elif rho(task.job) <= 1.0:
            return None
        left = trial.get(task.job, usage[task.job])
        for t in unit_of(task):
            left = _minus(left, t.demand)
        # the victim keeps its fair share and the preemptor's (new) ratio
        if claim.victims is None and loop_free and rho(task.job, left) < max(1.0, rho_p_after) * (1 - 1e-12):
            return None
        return left

    def legality(claim: Claimant, trial: dict[str, Vector], rho_p_after: float) -> Legality:
        """The ratios the rule compared for ``claim`` taking what ``trial`` leaves (read
        before :func:`apply` moves them; only when a preemption is made)."""
        rule = "within_queue" if claim.victims is not None else "fair_share" if loop_free else "naive"
        ranks = claim.victims or {}
        return Legality(rule, rho(claim.job), rho_p_after,
                        tuple((job, rho(job), rho(job, left), ranks.get(job)) for job, left in trial.items()))

    def apply(claim: Claimant, chosen: list[RunningTaskView], trial: dict[str, Vector]) -> tuple[str, ...]:
        """Take ``chosen`` and give ``claim`` its demand (the state as if done); the
        gangs among the victims, whose tasks elsewhere free their nodes."""
        taken.update(t.task_id for t in chosen)
        usage.update(trial)
        usage[claim.job] = _plus(usage.get(claim.job, zero), claim.demand)
        for name in (*trial, claim.job):
            current.pop(name, None)
        return tuple(dict.fromkeys(t.job for t in chosen if t.gang))

    def within_order(claim: Claimant) -> list[RunningTaskView]:
        ranks = claim.victims
        return sorted((t for t in running if t.job in ranks), key=lambda t: (ranks[t.job], -t.started_at, -t.task_id))

    def candidates_of(claim: Claimant) -> tuple[dict[str, list[RunningTaskView]], dict[str, list[float]]]:
        """Per node, the tasks ``claim`` may take in victim order, and the most room
        freeing them could make there."""
        if claim.victims is None:
            return by_node, most_room
        candidates: dict[str, list[RunningTaskView]] = {}  # (a claim within its queue: its own victims)
        for task in within_order(claim):
            candidates.setdefault(task.node, []).append(task)
        reach = {}
        for node, tasks in candidates.items():
            reach[node] = list(free.get(node, zero))
            for t in tasks:
                for unit_task in unit_of(t):
                    if unit_task.node == node:
                        reach[node] = [a + b for a, b in zip(reach[node], unit_task.demand)]
        return candidates, reach

    def victims_on(claim: Claimant, node: str, demand: Vector, room: list[float], tasks: Sequence[RunningTaskView],
                   trial: dict[str, Vector], units: int, rho_p_after: float):
        """Victims on ``node`` (in the order of ``tasks``) until ``demand`` fits in
        ``room`` (what is free there): ``(chosen, trial, room, units)`` with what the
        victims keep and the room made, or None when it cannot fit within the budget."""
        chosen: list[RunningTaskView] = []
        trial = dict(trial)
        for task in tasks:  # (in victim order; most nodes stop at the first)
            if task.task_id in taken or task.job == claim.job:
                continue
            if units >= budget:
                break
            left = may_take(claim, task, trial, rho_p_after)
            if left is None:
                continue
            trial[task.job] = left
            units += 1
            for t in unit_of(task):
                chosen.append(t)
                if t.node == node:
                    room = [a + b for a, b in zip(room, t.demand)]
            if fits(demand, room):
                break
        if not chosen or not fits(demand, room):
            return None
        return chosen, trial, room, units

    def claim_one(claim: Claimant) -> tuple[Preemption, int] | None:
        """One task for ``claim``: the node where the fewest victims (then the least work
        lost, then the first node) make it fit; the state updated as if done."""
        rho_p_after = rho(claim.job, _plus(usage.get(claim.job, zero), claim.demand))
        candidates, reach = candidates_of(claim)
        best: tuple | None = None
        for position, node in enumerate(node_order):
            if node not in reach or not fits(claim.demand, reach[node]) or not claim.eligible(node) \
                    or fits(claim.demand, free[node]):
                continue  # (where it fits already, the scheduler places it: no preemption)
            got = victims_on(claim, node, claim.demand, list(free[node]), candidates[node], {}, 0, rho_p_after)
            if got is None:
                continue
            chosen, trial, room, units = got
            key = (len(chosen), sum(-t.started_at for t in chosen), position)  # (later starts lose less)
            if best is None or key < best[0]:
                best = (key, node, chosen, trial, room, units)
        if best is None:
            return None
        _key, node, chosen, trial, room, units = best
        legal = legality(claim, trial, rho_p_after)
        gangs = apply(claim, chosen, trial)
        for t in chosen:
            if t.node != node:  # (the rest of a victim gang)
                free[t.node] = [a + b for a, b in zip(free[t.node], t.demand)]
        if node in most_room:
            most_room[node] = list(_minus(most_room[node], claim.demand))
        free[node] = list(_minus(room, claim.demand))
        return Preemption(claim.job, claim.class_index, node, tuple(t.task_id for t in chosen), False, gangs,
                          legal), units

    def claim_gang(claim: Claimant) -> tuple[Preemption, int] | None:
        """Room for all of gang ``claim`` at once, in one of its node groups: each member
        in turn goes where it fits, else on the node of the group where the fewest victims
        (as for one task) make it fit; the group needing the fewest victims in all (then
        the least work lost, then the first group) wins. None when no group can hold
        every member."""
        groups = claim.groups if claim.groups is not None else (tuple(node_order),)
        if gang_room(claim.members, groups, free) is not None:
            return None  # (it fits already: the scheduler places it)
        rho_p_after = rho(claim.job, _plus(usage.get(claim.job, zero), claim.demand))
        candidates, _reach = candidates_of(claim)
        best: tuple | None = None
        for position, group in enumerate(groups):
            room = {node: list(free[node]) for node in group if node in free}
            trial: dict[str, Vector] = {}
            chosen: list[RunningTaskView] = []
            placed: list[str] = []
            units = 0
            for demand, eligible in claim.members:
                node = next((n for n in room if eligible(n) and fits(demand, room[n])), None)
                if node is None:
                    pick = None
                    for spot, n in enumerate(room):
                        if not eligible(n) or n not in candidates:
                            continue
                        got = victims_on(claim, n, demand, room[n], [t for t in candidates[n] if t not in chosen],
                                         trial, units, rho_p_after)
                        if got is None:
                            continue
                        fewest = (len(got[0]), sum(-t.started_at for t in got[0]), spot)  # (as for one task)
                        if pick is None or fewest < pick[0]:
                            pick = (fewest, n, got)
                    if pick is None:
                        break
                    _fewest, node, (more, trial, room[node], units) = pick
                    chosen.extend(more)
                    for t in more:
                        if t.node != node and t.node in room:  # (the rest of a victim gang)
                            room[t.node] = [a + b for a, b in zip(room[t.node], t.demand)]
                room[node] = [a - b for a, b in zip(room[node], demand)]
                placed.append(node)
            if len(placed) < len(claim.members):
                continue
            key = (len(chosen), sum(-t.started_at for t in chosen), position)
            if best is None or key < best[0]:
                best = (key, chosen, trial, placed, units)
        if best is None:
            return None
        _key, chosen, trial, placed, units = best
        legal = legality(claim, trial, rho_p_after)
        gangs = apply(claim, chosen, trial)
        for t in chosen:
            free[t.node] = [a + b for a, b in zip(free[t.node], t.demand)]
        for (demand, _eligible), node in zip(claim.members, placed):
            free[node] = list(_minus(free[node], demand))
            if node in most_room:
                most_room[node] = list(_minus(most_room[node], demand))
        return Preemption(claim.job, claim.class_index, placed[0], tuple(t.task_id for t in chosen), True,
                          gangs, legal), units

    claims = {claim.job: 0 for claim in claimants}
    progress = True
    while progress and budget > 0:  # passes over the claimants, one task each per pass
        progress = False
        for claim in claimants:
            if budget <= 0:
                break
            if claims[claim.job] >= claim.pending or (claim.victims is None and rho(claim.job) >= 1.0):
                continue  # (earlier preemptions of this call may have lifted it)
            found = claim_gang(claim) if claim.members else claim_one(claim)
            if found is not None:
                got, units = found
                out.append(got)
                claims[claim.job] += 1
                budget -= units
                progress = True
    return out


def _plus(a: Vector, b: Vector) -> Vector:
    return tuple(x + y for x, y in zip(a, b))


def _minus(a: Sequence[float], b: Vector) -> Vector:
    return tuple(max(0.0, x - y) for x, y in zip(a, b))


class Preemptor:
    """The engine's side of preemption: after each decision round, which queues have been
    starved long enough, and what to preempt for them (:func:`plan`).

    Fair shares are the policy's exact static allocation (``Policy.allocate``, guarantees
    and limits included) of the jobs that still have pending tasks, each unbounded, on the
    capacity of the nodes that are up; recomputed only when that set of jobs or the
    capacity changes. A job with nothing pending is finishing: it is left out of the
    fair shares and is never a victim (its fair share is taken to be what it holds).
    """

    def __init__(self, config: PreemptionConfig, policy, resources: tuple[str, ...], *, observe_only: bool = False):
        probe = Scenario(resources, Cluster(tuple(1.0 for _ in resources), (Node("probe", tuple(1.0 for _ in resources)),),
                                            True, resources), QueueTree.build([]), ())
        try:
            policy.allocate(probe)
        except PolicyModeError as exc:
            raise PolicyModeError(f"preemption needs the policy's fair shares (its static allocation); "
                                  f"policy {policy.name!r} has none: {exc}") from None
        self.config = config
        self.policy = policy
        self.resources = resources
        self._key: tuple | None = None
        self.job_fair: dict[str, Vector] = {}
        self.queue_fair: dict[str, Vector] = {}
        #: queue path -> when it was first seen starved (cleared when it is not)
        self.starved_since: dict[str, float] = {}
        self.preempted = 0  # victim tasks so far
        self.gangs_preempted = 0  # victim gangs so far (each counted once, all its tasks in ``preempted``)
        #: priority preemption within a queue (``within_queue``): queue path -> when a job
        #: of its highest demanding priority was first seen waiting beside running jobs of
        #: lower priority (cleared when it is not)
        self.inverted_since: dict[str, float] = {}
        #: never plan: only measure (``time_below``), e.g. to compare a run without
        #: preemption with one with it
        self.observe_only = observe_only
        #: per queue, seconds spent below its fair share by more than the tolerance while
        #: it had demanding jobs (between decision rounds the state holds)
        self.time_below: dict[str, float] = {}
        self._below: set[str] = set()
        self._observed_at: float | None = None
        #: with ``config.round``: the ``now`` of the last round that planned (the next may
        #: plan ``round`` seconds later, not before)
        self._paced_at: float | None = None

    def _refresh_fair_shares(self, sch) -> None:
        """Recompute the fair shares when the set of demanding jobs or the capacity
        changed (``Scheduler.demand_version``): the policy's static allocation of the
        demanding jobs, each unbounded."""
        capacity = sch.pool.total_capacity
        key = (sch.demand_version, capacity)
        if key == self._key:
            return
        self._key = key
        demanding = [name for name, rt in sch.jobs.items() if rt.finished_at is None and rt.demanding]
        # a running gang has nothing pending (it started whole) but is not finishing: it
        # keeps its fair share, so that it may be a victim (whole)
        entitled = demanding + [name for name, rt in sch.jobs.items()
                                if rt.job.gang and rt.running and rt.finished_at is None and not rt.demanding]
        jobs = []
        for name in entitled:
            job = sch.jobs[name].job
            classes = job.classes if job.gang else tuple(_unbounded(c) for c in job.classes)
            # a gang goes in as a divisible job capped at its counts (not gang=True), and its
            # share is rounded below: the static allocations now keep a gang whole, which
            # would also move the others' shares (what a gang does not get is shared out);
            # preemption keeps the rounding it was built and checked with
            jobs.append(Job(name, job.queue, job.weight, 0.0, classes))
        nodes = tuple(st.node for st in sch.pool.states if st.alive)
        scenario = Scenario(self.resources, Cluster(capacity, nodes, False, self.resources), sch.queues, tuple(jobs),
                            "preemption")
        gangs = [name for name in entitled if sch.jobs[name].job.gang]
        alloc = None
        if jobs and any(c > 0 for c in capacity):  # (a gang wants its tasks, no more: its counts bind)
            alloc = self.policy.allocate(scenario, respect_counts=True) if gangs else self.policy.allocate(scenario)
        self.job_fair = {} if alloc is None else {name: ja.allocation for name, ja in alloc.jobs.items()}
        for name in gangs:  # (all or nothing: docs/policies.md, "Gangs in preemption")
            whole = sch.jobs[name].job.gang_demand()
            if name in self.job_fair and not fits(whole, self.job_fair[name]):
                self.job_fair[name] = (0.0,) * len(capacity)
        self.queue_fair = {} if alloc is None else {path: qa.allocation for path, qa in alloc.queues.items()}
        # the queues that may claim (some demanding job below), with those jobs
        self._demanding_below: dict[str, list[str]] = {}
        for name in demanding:
            for path in sch.queues.ancestors(sch.jobs[name].job.queue)[:-1]:  # (not the root)
                self._demanding_below.setdefault(path, []).append(name)

    def close(self, now: float) -> None:
        """Count the time since the last round for the queues that were below their fair
        share then (a run calls it at its end)."""
        if self._observed_at is not None and now > self._observed_at:
            for path in self._below:
                self.time_below[path] = self.time_below.get(path, 0.0) + (now - self._observed_at)
        self._observed_at = now if self._observed_at is None else max(now, self._observed_at)

    def wake_at(self) -> float | None:
        """When the earliest starved queue may preempt (None: none is waiting, or only
        observing): a runtime whose rounds happen only at events (the simulator) holds a
        round then. With ``config.round``, not before the next paced round: while a queue
        stays starved past its deadline, every ``round`` seconds after the last round that
        planned."""
        if self.observe_only:
            return None
        times = [since + self.config.after for since in (*self.starved_since.values(), *self.inverted_since.values())]
        if not times:
            return None
        if self.config.round is not None and self._paced_at is not None:
            return max(min(times), self._paced_at + self.config.round)
        return min(times)

    def round(self, sch, now: float, *, plan_now: bool = True) -> list[Preemption]:
        """The preemptions to make at ``now`` (after the round's launches). With
        ``plan_now`` False, only the starvation timers are brought up to date (a runtime
        does that after applying a round's preemptions and scheduling again, so that
        :meth:`wake_at` sees the queues those left starved).

        Cost per round when nothing is starved: one comparison per queue with demanding
        jobs (queue usage is kept by the scheduler, ``Scheduler.track_queue_usage``); the
        fair shares are recomputed only when the set of demanding jobs changes."""
        self.close(now)
        self._refresh_fair_shares(sch)
        if not self.job_fair:
            self.starved_since.clear()
            self._below = set()
            return []
        capacity = sch.pool.total_capacity
        zero = (0.0,) * len(capacity)
        queue_use = sch.track_queue_usage().current
        tol = self.config.tolerance
        starved: list[tuple[float, str]] = []
        below: set[str] = set()
        for path in self._demanding_below:
            share = dominant_share(queue_use(path), capacity)
            target = dominant_share(self.queue_fair.get(path, zero), capacity)
            if share < target - tol:
                below.add(path)
                since = self.starved_since.setdefault(path, now)
                if now - since >= self.config.after:
                    starved.append((share - target, path))
            else:
                self.starved_since.pop(path, None)
        self._below = below
        for path in [p for p in self.starved_since if p not in below]:
            del self.starved_since[path]
        inverted = self._inversions(sch, now) if self.config.within_queue else {}
        ready = [path for path in inverted if now - self.inverted_since[path] >= self.config.after]
        if not (starved or ready) or not plan_now or self.observe_only:
            return []
        pace = self.config.round
        if pace is not None:
            if self._paced_at is not None and now < self._paced_at + pace:
                return []  # (between paced rounds: the budget is a rate)
            self._paced_at = now
        starved.sort()
        usage: dict[str, Vector] = {}
        fair = self.job_fair

        def use(name: str) -> Vector:
            got = usage.get(name)
            if got is None:
                got = usage[name] = sch.usage(name)
            return got

        def rho(name: str) -> float:
            return ratio(use(name), fair[name], capacity)

        claimants: list[Claimant] = []
        seen: set[str] = set()
        pool = sch.pool
        for _gap, path in starved:
            for name in sorted(self._demanding_below[path], key=lambda n: (rho(n), sch.jobs[n].submitted_at, n)):
                if name in seen or rho(name) >= 1.0:
                    continue
                got = _claimant(pool, sch.jobs[name])
                if got is not None:
                    seen.add(name)
                    claimants.append(got)
        takes_from: set[str] = set()  # (the jobs a claim within its queue may take from)
        for path in sorted(ready):
            top, lower = inverted[path]
            for name in sorted(top, key=lambda n: (sch.jobs[n].submitted_at, n)):
                got = _claimant(pool, sch.jobs[name], lower)
                if got is not None:
                    seen.add(name)
                    takes_from.update(lower)
                    claimants.append(got)
        if not claimants:
            return []
        over: dict[str, bool] = {}
        running = []
        for t in sch.tasks.values():
            above = over.get(t.job)
            if above is None:
                above = over[t.job] = (t.job in fair and rho(t.job) > 1.0) or t.job in takes_from
            if above:
                running.append(RunningTaskView(t.task_id, t.job, pool.name(t.node_index), t.demand, t.started_at,
                                               sch.jobs[t.job].job.gang))
        job_usage = {name: use(name) for name in {t.job for t in running} | seen}
        alive = [i for i, st in enumerate(pool.states) if st.alive]
        got = plan(claimants, running, job_usage=job_usage, job_fair=fair, capacity=capacity,
                   node_free={pool.name(i): tuple(pool.states[i].free) for i in alive},
                   node_order=[pool.name(i) for i in alive], max_victims=self.config.max_per_round,
                   rule=self.config.rule)
        self.preempted += sum(len(p.victims) for p in got)
        self.gangs_preempted += sum(len(p.victim_gangs) for p in got)
        return got

    def _inversions(self, sch, now: float) -> dict[str, tuple[list[str], dict[str, int]]]:
        """Per leaf queue where jobs of its highest demanding priority wait while jobs of
        a lower priority run: those jobs, and the lower ones with their priorities (the
        victims' ranks: lowest priority taken first). Keeps ``inverted_since``."""
        lower_running: dict[str, dict[str, int]] = {}
        tops = {queue: max(ranks) for queue, ranks in sch._ranks.items() if ranks}
        for name, rt in sch.jobs.items():
            top = tops.get(rt.job.queue)
            if top is not None and rt.running and rt.finished_at is None and rt.job.priority < top:
                lower_running.setdefault(rt.job.queue, {})[name] = rt.job.priority
        out = {queue: (list(sch._ranks[queue][tops[queue]]), lower) for queue, lower in lower_running.items()}
        for queue in out:
            self.inverted_since.setdefault(queue, now)
        for queue in [q for q in self.inverted_since if q not in out]:
            del self.inverted_since[queue]
        return out


def _claimant(pool, rt, victims: Mapping[str, int] | None = None) -> Claimant | None:
    """``rt``'s claim: its next task, or for a gang all of its pending tasks with the node
    groups its ``pack`` allows; None when it wants nothing now (or is held)."""
    j = rt.shape_class
    if j is None:
        return None
    job = rt.job

    def eligible_for(constraints) -> Callable[[str], bool]:
        ok = set(pool.eligible(constraints))
        return lambda node: pool.index_of[node] in ok

    if not job.gang:
        cls = job.classes[j]
        return Claimant(job.name, j, cls.demand, eligible_for(cls.constraints), rt.pending[j], victims=victims)
    members = gang_members(job.classes, rt.pending)
    by_class = {k: eligible_for(job.classes[k].constraints) for k in set(members)}
    demand = tuple(sum(job.classes[k].demand[r] for k in members) for r in range(len(job.classes[0].demand)))
    alive = [i for i, st in enumerate(pool.states) if st.alive]
    groups = None
    if job.pack == PACK_NODE:
        groups = tuple((pool.name(i),) for i in alive)
    elif job.pack is not None:
        by_value: dict[str, list[str]] = {}
        for i in alive:
            value = pool.states[i].attrs.get(job.pack[1])
            if value is not None:
                by_value.setdefault(value, []).append(pool.name(i))
        groups = tuple(tuple(g) for g in by_value.values())
    return Claimant(job.name, members[0], demand, by_class[members[0]], 1,
                    tuple((job.classes[k].demand, by_class[k]) for k in members), groups, victims)


def _unbounded(cls):
    return replace(cls, count=None)
