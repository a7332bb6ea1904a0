"""Gang reservations: no gang starves (``gangs: {reserve_after: S}``; issue 20, item 2).

A gang starts only when room for all of its tasks is free at once (``engine.gangs``).
Small jobs that keep arriving take every piece of capacity as it frees up, so that
moment may never come (Kueue #534, Volcano #3670). After a gang has waited
``reserve_after`` seconds, this module reserves nodes for it as they free up: the
reserved capacity is *held* (taken from the pool, so nothing else is placed there)
until the whole gang fits, and then the gang starts there, before any other decision.

Which gang. One reservation at a time, cluster-wide. Among the gangs that have waited
``reserve_after`` seconds or more (demanding since their submit, or since a failure sent
them back to pending; not held by a higher priority in their queue; not over their
queue's limit), the reserved one is the one the policy's sorter would pick first if
they all fitted (``sorter.pick`` restricted to them): the head of the policy's order
among the overdue gangs, with the sorter's written tie rules. The reservation stays
with that gang until it starts, is cancelled, or becomes held; then the next overdue
gang is chosen the same way. Sticky on purpose: a reservation that moved with the
order would give up what it had gathered (docs/policies.md says why that bounds the wait).

Where. When a reservation is made, the gang's placement is planned on a copy of the
pool where the running tasks end one group at a time, in the order they are known to
end (``task_ends``: the simulator knows each end; serve does not, and then the order is
their start, oldest first; ties: task id); the first state where ``engine.gangs``
places the whole gang gives the *plan* (a node for each member) and, when every end
was known, the *shadow time* T*: when the gang can start at the latest. Every
``schedule`` call then gives back what was held, starts the gang if it fits anywhere
now (any placement, not only the plan's), and otherwise holds, on each node of the
plan, the free capacity up to what the plan's members need there (a device resource:
whole free devices). Holding happens before the policy's decisions, so capacity freed
on a planned node goes to the reservation first.

Backfill. With T* known and the duration of the next task of each job known
(``next_duration``: the simulator's, sampled ahead; serve knows none, so serve never
backfills into a reservation), a task that ends by T* may use held capacity: after the
policy's decisions the holds are given back, the sorter is asked (in its order) for jobs
whose next task fits now and ends by T*, those start, and the rest is held again. A
backfilled task is gone before T*, so the gang still starts by T*.

Cost. ``reserved_idle``: per resource, the integral over time of the held capacity,
resource-seconds reserved but unused (a backfilled task's share is used, not idle).
Without ``gangs: {reserve_after:}`` the scheduler has no ``GangReserve`` at all; with
one, a ``schedule`` call pays only a check while no gang is waiting.

Fair-share preemption (``engine.preemption``) sees held capacity as used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fairshare.engine.gangs import gang_members, place_gang
from fairshare.engine.placement import DeviceAssignment, NodePool
from fairshare.model.resources import Vector

#: ``task_ends()``: running task id -> when it ends, for the tasks whose end is known
TaskEnds = Callable[[], dict[int, float]]
#: ``next_duration(job, class index)``: how long the job's next task of that class will
#: run once started, None when not known
NextDuration = Callable[[str, int], float | None]


class GangReserve:
    """One scheduler's gang reservation (module docstring). ``scheduler``: the
    ``engine.scheduler.Scheduler`` that owns it (not imported here: it imports this)."""

    def __init__(self, scheduler, reserve_after: float, *, task_ends: TaskEnds | None = None,
                 next_duration: NextDuration | None = None):
        if not reserve_after >= 0:
            raise ValueError(f"reserve_after must be >= 0, got {reserve_after}")
        self.scheduler = scheduler
        self.reserve_after = float(reserve_after)
        self.task_ends = task_ends
        self.next_duration = next_duration
        #: gangs demanding and not started: name -> since when (submit, or back to pending)
        self.waiting: dict[str, float] = {}
        #: the reserved gang, its plan (class index, node index) per member and the
        #: shadow time T* (None: not known)
        self.gang: str | None = None
        self.plan: list[tuple[int, int]] = []
        self.shadow: float | None = None
        self._replan = False
        #: per node of the plan, what its members need there (resource mode) or how many
        #: members go there (slot mode)
        self._need: dict[int, list[float]] = {}
        #: what is held now: (node, amount, devices)
        self._holds: list[tuple[int, Vector, DeviceAssignment]] = []
        self._held_total = [0.0] * scheduler.m
        self._held_since = 0.0
        #: resource-seconds held so far (up to ``_held_since``)
        self.idle = [0.0] * scheduler.m
        #: (gang, reserved at, shadow time) of every reservation made, in order
        self.history: list[tuple[str, float, float | None]] = []

    # --- the scheduler's hooks -------------------------------------------------------------------
    def gang_waits(self, name: str, now: float) -> None:
        """A gang starts demanding with nothing running (arrival, or back to pending)."""
        self.waiting.setdefault(name, now)

    def before(self, now: float) -> list:
        """Start of a ``schedule`` call: give back the holds; start the reserved gang if it
        fits (then reserve for the next overdue gang, if any); else hold again."""
        self._release(now)
        launches: list = []
        while True:
            if self.gang is not None and not self._still_valid(self.gang):
                self._drop()
            if self.gang is not None and self._replan:  # (``_set_plan``)
                name, at, _shadow = self.history[-1]
                self._set_plan(self.gang)
                self._replan = False
                self.history[-1] = (name, at, self.shadow)
            if self.gang is None and not self._choose(now):
                return launches
            started = self._start(self.gang, now)
            if started is None:
                self._hold()
                return launches
            launches.extend(started)
            self.waiting.pop(self.gang, None)
            self._drop()

    def after(self, now: float, launches: list) -> None:
        """End of a ``schedule`` call: backfill into the held capacity (module docstring)."""
        if not self._holds or self.shadow is None or self.next_duration is None:
            return
        self._release(now)
        sch = self.scheduler
        sorter, jobs, pool, shadow = sch.sorter, sch.jobs, sch.pool, self.shadow
        sorter.reset_excluded()
        chosen: dict[str, tuple[int, int]] = {}

        def ends_in_time(name: str) -> bool:
            rt = jobs[name]
            j = rt.shape_class
            if j is None or rt.job.gang:  # (a gang's start is not a task's: none backfills)
                return False
            cls = rt.job.classes[j]
            duration = self.next_duration(name, j)
            node = None
            if duration is not None and now + duration <= shadow and \
                    (sch.bounds is None or not sch.bounds.over_limit(rt.job.queue, cls.demand)):
                limit = cls.max_per_node
                node = pool.place(cls.demand, cls.constraints,
                                  None if limit is None else sch._under_limit(name, j, limit))
            if node is None:
                sorter.exclude(name)  # (free capacity only shrinks, and its next task stays the same)
                return False
            chosen[name] = (j, node)
            return True

        while (name := sorter.pick(ends_in_time, now)) is not None:
            j, node = chosen[name]
            launches.append(sch._launch(name, j, node, now))
        self._hold()

    def reserved_idle(self, now: float) -> Vector:
        """Resource-seconds held and unused from the start until ``now``."""
        span = max(0.0, now - self._held_since)
        return tuple(i + h * span for i, h in zip(self.idle, self._held_total))

    def held_by_node(self) -> dict[int, Vector]:
        """What is held now, per node (``engine.explain``'s ``reserved_for``)."""
        out: dict[int, list[float]] = {}
        for node, amount, _devices in self._holds:
            total = out.setdefault(node, [0.0] * len(amount))
            for r, a in enumerate(amount):
                total[r] += a
        return {node: tuple(total) for node, total in out.items()}

    @property
    def active(self) -> bool:
        """A ``schedule`` call has work here: a gang waits (or holds a reservation)."""
        return bool(self.waiting) or self.gang is not None

    # --- choosing --------------------------------------------------------------------------------
    def _still_valid(self, name: str) -> bool:
        rt = self.scheduler.jobs.get(name)
        if rt is None or not rt.demanding or rt.held or rt.running:
            return False
        bounds = self.scheduler.bounds
        if bounds is not None and bounds.over_limit(rt.job.queue, rt.job.gang_demand()):
            return False  # (its queue's limit stops it: the capacity goes back to others)
        pool = self.scheduler.pool
        return all(pool.alive(node) for _j, node in self.plan)

    def _overdue(self, now: float) -> set[str]:
        jobs, bounds = self.scheduler.jobs, self.scheduler.bounds
        out = set()
        for name, since in list(self.waiting.items()):
            rt = jobs.get(name)
            if rt is None or not rt.demanding or rt.running:
                del self.waiting[name]  # (started, cancelled or finished: waits no more)
                continue
            if since + self.reserve_after > now or rt.held or rt.shape_class is None:
                continue
            if bounds is not None and bounds.over_limit(rt.job.queue, rt.job.gang_demand()):
                continue
            out.add(name)
        return out

    def _choose(self, now: float) -> bool:
        """Reserve for the head of the policy's order among the overdue gangs, if any."""
        overdue = self._overdue(now)
        if not overdue:
            return False
        sorter = self.scheduler.sorter
        sorter.reset_excluded()
        name = sorter.pick(overdue.__contains__, now)
        if name is None:
            return False
        self.gang = name
        self._set_plan(name)
        self.history.append((name, now, self.shadow))
        return True

    def _set_plan(self, name: str) -> None:
        """The plan, the shadow time and each planned node's need. Tasks launched in this
        round have no known end yet (the runtime starts them after the round): then the
        plan is made again at the next round, before anything has freed since."""
        self.plan, self.shadow = self._plan(name)
        self._replan = self.shadow is None and self.task_ends is not None
        need: dict[int, list[float]] = {}
        classes = self.scheduler.jobs[name].job.classes
        slots = self.scheduler.pool.slots_per_node is not None
        for j, node in self.plan:
            got = need.setdefault(node, [0.0] * self.scheduler.m)
            if slots:
                got[0] += 1
            else:
                for r, d in enumerate(classes[j].demand):
                    got[r] += d
        self._need = need

    def _plan(self, name: str) -> tuple[list[tuple[int, int]], float | None]:
        """The gang's placement once enough running tasks have ended, and when that is
        (None: some end was not known), on a copy of the pool (module docstring)."""
        sch = self.scheduler
        rt = sch.jobs[name]
        job = rt.job
        members = gang_members(job.classes, rt.pending)
        demand = job.gang_demand()
        trial = self._copy_pool()
        ends = self.task_ends() if self.task_ends is not None else {}
        if self.next_duration is not None:
            self._add_fresh_gang_ends(ends)
        order = sorted(sch.tasks.values(), key=lambda t: (t.task_id not in ends, ends.get(t.task_id, 0.0),
                                                          t.started_at, t.task_id))
        held = {t.task_id: trial.take(t.node_index, t.demand) for t in order}

        def placed() -> list[int] | None:
            return place_gang(trial, job.classes, members, demand, job.pack, lambda _j, _node: 0)

        nodes = placed()
        shadow: float | None = None
        known = True  # every task released so far had a known end
        k = 0
        while nodes is None and k < len(order):
            # one group: every task ending at the same known time (an unknown end: alone)
            first = order[k]
            key = ends.get(first.task_id)
            while k < len(order) and (order[k] is first or (key is not None and ends.get(order[k].task_id) == key)):
                task = order[k]
                trial.give_back(task.node_index, task.demand, held[task.task_id])
                k += 1
            known = known and key is not None
            shadow = key
            nodes = placed()
        if nodes is None:  # (the loader admits only gangs that fit the whole cluster)
            raise AssertionError(f"gang {name!r} fits nowhere even with every task ended")
        return list(zip(members, nodes)), shadow if known else None

    def _add_fresh_gang_ends(self, ends: dict[int, float]) -> None:
        """A gang started in this round (the reservation before, just now) has no end in
        the runtime yet: its tasks end together, after the duration its first task will
        draw (the simulator's ``start``; the first is the lowest task id)."""
        sch = self.scheduler
        fresh: dict[str, list] = {}
        for task in sch.tasks.values():
            if task.task_id not in ends and sch.jobs[task.job].job.gang:
                fresh.setdefault(task.job, []).append(task)
        for job, tasks in fresh.items():
            first = min(tasks, key=lambda t: t.task_id)
            if any(t.started_at != first.started_at for t in tasks):
                continue
            duration = self.next_duration(job, first.class_index)
            if duration is not None:
                for task in tasks:
                    ends[task.task_id] = first.started_at + duration

    def _copy_pool(self) -> NodePool:
        pool = self.scheduler.pool
        trial = NodePool([st.node for st in pool.states], pool.m, strategy=pool.strategy,
                         slots_per_node=pool.slots_per_node, devices=pool.devices)
        trial.headroom = pool.headroom
        for idx, st in enumerate(pool.states):
            if not st.alive:
                trial.remove_node(st.node.name)
        return trial

    # --- starting and holding --------------------------------------------------------------------
    def _start(self, name: str, now: float) -> list | None:
        """Start every member of the reserved gang if it fits now: where placement puts
        it, else on the plan's nodes (greedy placement can miss an arrangement the plan
        found; the plan is what the wait bound counts on). None: it does not fit yet."""
        sch = self.scheduler
        chosen: dict = {}
        if sch._gang_runnable(sch.jobs[name], chosen, lambda _name: None):
            members = chosen[name][1]
        elif self._plan_fits():
            members = self.plan
        else:
            return None
        return [sch._launch(name, j, node, now) for j, node in members]

    def _plan_fits(self) -> bool:
        """Every member of the plan fits on its node now (a trial, given back)."""
        pool, classes = self.scheduler.pool, self.scheduler.jobs[self.gang].job.classes
        taken = []
        try:
            for j, node in self.plan:
                if not pool.fits_on(node, classes[j].demand):
                    return False
                taken.append((node, classes[j].demand, pool.take(node, classes[j].demand)))
            return True
        finally:
            for node, demand, held in reversed(taken):
                pool.give_back(node, demand, held)

    def _hold(self) -> None:
        """Hold, on each planned node, its free capacity up to what the plan needs there."""
        pool = self.scheduler.pool
        slots = pool.slots_per_node
        for node in sorted(self._need):
            if not pool.alive(node):
                continue
            st = pool.states[node]
            need = self._need[node]
            if slots is not None:
                for _ in range(min(int(need[0]), slots - st.tasks)):
                    self._holds.append((node, (0.0,) * pool.m, pool.take(node, (0.0,) * pool.m)))
                continue
            amount = [max(0.0, min(f, n)) for f, n in zip(st.free, need)]
            for k, r in enumerate(pool.devices):  # whole free devices only
                whole = sum(1 for f in st.device_free[k] if f >= 1.0 - 1e-9)
                amount[r] = float(min(whole, math.ceil(need[r] - 1e-9)))
            if any(a > 0 for a in amount):
                held = tuple(amount)
                self._holds.append((node, held, pool.take(node, held)))
                for r, a in enumerate(held):
                    self._held_total[r] += a

    def _release(self, now: float) -> None:
        """Give back every hold; count the time it was held."""
        span = max(0.0, now - self._held_since)
        for r, h in enumerate(self._held_total):
            self.idle[r] += h * span
        self._held_since = now
        if not self._holds:
            return
        pool = self.scheduler.pool
        for node, amount, devices in reversed(self._holds):
            pool.give_back(node, amount, devices)
        self._holds = []
        self._held_total = [0.0] * len(self._held_total)

    def _drop(self) -> None:
        self.gang, self.plan, self.shadow, self._need, self._replan = None, [], None, {}, False
