"""What the live service shows: ``/v1/status``, ``/v1/queues``, ``/v1/history``.

Everything here is read from the engine's snapshot (``engine.snapshot``: per job, queue
and node usage, rolled up the queue tree by the engine) plus the fair shares, which are
the policy's static allocation of the jobs in the system. Nothing here changes the
scheduler. Both throttled parts are read under the service's lock: the history is
sampled by the scheduling thread after a pass, the fair shares are recomputed when
``/v1/status``, ``/v1/queues`` or ``/metrics`` asks for them (``FairShares``).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import replace

from fairshare.engine.scheduler import Scheduler
from fairshare.engine.snapshot import Snapshot
from fairshare.engine.step import Engine
from fairshare.live.decay import effective_share, half_life_json
from fairshare.model.cluster import Cluster
from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT
from fairshare.model.scenario import Scenario
from fairshare.policies import Policy

log = logging.getLogger(__name__)

HISTORY_SAMPLES = 1200  # at one sample per 0.5 s: the last 10 minutes
HISTORY_EVERY_S = 0.5
FAIR_SHARE_EVERY_S = 0.5
#: the fair-share view is recomputed at most every this many times its last cost (FairShares)
FAIR_SHARE_COST_FACTOR = 10


def status_doc(snapshot: Snapshot, scheduler: Scheduler, fair: dict[str, float], *, policy: str,
               wall: float, decisions_total: int, fair_allocations: dict[str, tuple[float, ...]] | None = None,
               time_below: dict[str, float] | None = None, preemptions_total: int | None = None,
               decayed: dict[str, tuple[float, ...]] | None = None) -> dict:
    """The ``/v1/status`` document. Per queue: its ``guarantee`` and ``limit`` (resource ->
    amount, {} when none), its ``allocated`` (what its running tasks hold, resource ->
    amount), its ``fair_share`` (the allocation behind
    ``fair_dominant_share``, resource -> amount) and ``time_below_fair_share`` (seconds,
    from the preemptor; None when preemption is off). ``preemptions_total``: attempts
    preempted since the start (None when preemption is off). With decayed usage
    (``decayed``: ``live.decay.queue_usage``), per queue ``decayed_usage`` (resource ->
    the decayed average allocation ``U / W``, in the resource's unit) and
    ``effective_dominant_share`` (the dominant share of ``allocated + decayed_usage``,
    what the order is by); both null without (half-life 0). ``fairness.half_life``:
    seconds, ``"inf"``, or 0."""
    resources = scheduler.resources
    capacity = snapshot.capacity
    tree = scheduler.queues
    fair_allocations = fair_allocations or {}
    zero = (0.0,) * len(resources)
    queues = {}
    for path, q in snapshot.queues.items():
        node = tree[path]
        queues[path] = {"weight": node.weight, "current_dominant_share": q.dominant_share,
                        "fair_dominant_share": fair.get(path, 0.0),
                        "running_tasks": q.running, "pending_tasks": snapshot.pending_queues[path],
                        "allocated": dict(zip(resources, q.usage)),
                        "guarantee": dict(node.guarantee), "limit": dict(node.limit),
                        "fair_share": dict(zip(resources, fair_allocations.get(path, zero))),
                        "time_below_fair_share": None if time_below is None else time_below.get(path, 0.0)}
        average = None if decayed is None else decayed.get(path, zero)
        queues[path]["decayed_usage"] = None if average is None else dict(zip(resources, average))
        queues[path]["effective_dominant_share"] = None if average is None else \
            effective_share(q.usage, average, capacity)
    nodes = [{"name": n.name, "alive": n.alive, "capacity": dict(zip(resources, n.capacity)),
              "used": dict(zip(resources, n.used))} for n in snapshot.nodes]
    cluster = snapshot.cluster
    return {
        "time": wall,
        "policy": policy,
        "resources": list(resources),
        "capacity": dict(zip(resources, capacity)),
        "utilization": utilization(resources, cluster.usage, capacity),
        "queues": queues,
        "pending_tasks": snapshot.pending,
        "running_tasks": cluster.running,
        "decisions_total": decisions_total,
        "preemptions_total": preemptions_total,
        "fairness": {"half_life": half_life_json(scheduler.half_life)},
        "nodes": nodes,
    }


class FairShares:
    """The policy's static (divisible) allocation of the jobs in the system, each capped
    at the tasks it still has to run: the share each queue is entitled to now, by the
    same policy code that schedules.

    Recomputed when read (``refresh``, from ``LiveService.status``) after a change
    (``invalidate``: a pass applied a job's arrival or cancellation, a task's end, a node
    or queue-tree change), at most every ``FAIR_SHARE_EVERY_S`` and, when the
    computation is slow, at most every ``FAIR_SHARE_COST_FACTOR`` times what the last one
    took: the policy allocates every job in the system (a quarter of a second of CPU at
    6,400 pending jobs on two cores) while holding the interpreter lock the HTTP server
    needs, so this view takes at most about a tenth of the time whatever the backlog,
    and nothing while nobody reads it. Noticing a change costs nothing per pass (the
    pass says whether it applied anything), not a walk over every job. A reader within
    the throttle gets the last computed shares."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.shares: dict[str, float] = {}
        #: the allocation behind each share (queue path -> amount per resource)
        self.allocations: dict[str, tuple[float, ...]] = {}
        self.stale = True  # something changed since the last computation
        self.at = -math.inf  # when last computed (service clock)
        self.cost = 0.0  # seconds the last computation took (wall clock)

    def invalidate(self) -> None:
        self.stale = True

    def due(self, now: float) -> bool:
        """A change waits to be shown and the throttle lets it be computed now."""
        return self.stale and now - self.at >= max(FAIR_SHARE_EVERY_S, FAIR_SHARE_COST_FACTOR * self.cost)

    def refresh(self, scheduler: Scheduler, now: float) -> None:
        if not self.due(now):
            return
        t = time.perf_counter()
        # the jobs in the system and what each still has to run (pending + running tasks)
        active = tuple(sorted((name, tuple(int(p) + n for p, n in zip(rt.pending, rt.running_per_class)))
                              for name, rt in scheduler.jobs.items() if rt.finished_at is None and not rt.cancelled))
        self.shares, self.allocations = self._compute(scheduler, active)
        self.stale = False
        self.at = now
        self.cost = time.perf_counter() - t

    def _compute(self, sch: Scheduler, active: tuple[tuple[str, tuple[int, ...]], ...]
                 ) -> tuple[dict[str, float], dict[str, tuple[float, ...]]]:
        if not active:
            return {}, {}
        capacity = sch.pool.total_capacity
        nodes = tuple(st.node for st in sch.pool.states if st.alive)
        jobs = []
        for name, remaining in active:
            job = sch.jobs[name].job
            # (gang and pack kept: a static allocation gives a gang all of its demand or none)
            jobs.append(replace(job, submit_s=0.0,
                                classes=tuple(replace(c, count=n) for c, n in zip(job.classes, remaining))))
        scenario = Scenario(sch.resources, Cluster(capacity, nodes, False, sch.resources), sch.queues,
                            tuple(jobs), "live")
        try:
            alloc = self.policy.allocate(scenario, respect_counts=True)
        except Exception as exc:  # noqa: BLE001 - a view must not stop scheduling
            log.warning("fair shares not computed: %s", exc)
            return {}, {}
        queues = {path: qa for path, qa in alloc.queues.items() if path != ROOT}
        return ({path: qa.dominant_share for path, qa in queues.items()},
                {path: tuple(qa.allocation) for path, qa in queues.items()})


class History:
    """Utilization and queue shares sampled every ``HISTORY_EVERY_S`` (``/v1/history``)."""

    def __init__(self) -> None:
        self.samples: deque[dict] = deque(maxlen=HISTORY_SAMPLES)
        self.at = -math.inf

    def due(self, now: float, busy: bool) -> bool:
        """A sample is due (only while tasks run, and once at the start)."""
        return now - self.at >= HISTORY_EVERY_S and (busy or self.at < 0)

    def record(self, engine: Engine, wall: float, now: float) -> None:
        """One sample: what ``/v1/status`` says of utilization and each queue's current
        dominant share, from the engine's running totals (``Engine.totals``, not the full
        snapshot: a sample costs the same whatever the number of jobs)."""
        capacity, queues, cluster = engine.totals()
        resources = engine.scheduler.resources
        self.at = now
        self.samples.append({"time": wall, "utilization": utilization(resources, cluster.usage, capacity),
                             "queues": {p: q.dominant_share for p, q in queues.items()}})


def utilization(resources: tuple[str, ...], usage: tuple[float, ...], capacity: tuple[float, ...]) -> dict:
    """resource -> used / capacity (0 for a resource of no capacity)."""
    return {r: (u / c if c > 0 else 0.0) for r, u, c in zip(resources, usage, capacity)}
