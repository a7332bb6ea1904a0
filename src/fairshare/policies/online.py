"""Online policies: which job's next task runs, decided whenever resources free up.

The engine tells an :class:`OnlineSorter` about every change (job added or removed, task
started or finished, demand status, capacity, saturated resources) and asks
:meth:`OnlineSorter.pick` for the next job among those whose next task can run now. The
sorter never reads a clock or draws random numbers: ``now`` is passed in.

:class:`ReferenceSorter` is the straightforward implementation: every ``pick`` recomputes
every node's share from scratch, exactly as the papers' pseudo-code does per decision.
It serves every online policy and is the reference the incremental sorters are tested
against (same decisions) and benchmarked against (speed ratio, docs/performance.md).

Per policy, the share a sibling is compared by (lowest first):

* ``drf`` (DRF Alg. 1): ``max_r U_r / (w R_r)``, flat over jobs.
* ``asset``: ``sum_r U_r / (w R_r)``; ``cpu``: ``U_k / (w R_k)`` for the one resource k.
* ``collapsed`` (H-DRF Sec. 3.2): DRF with each job's weight the product along its path
  of ``w / sum(w of demanding siblings)``, recomputed as demand changes.
* ``hdrf`` (H-DRF Alg. 2-4): a leaf's share is ``max_{r in Y} U_r / R_r`` over the
  non-saturated resources Y; an internal node rescales its demanding non-blocked
  children's usage vectors to the smallest of their (weighted) shares and adds its blocked
  children's vectors unscaled (Alg. 3), then takes its share over Y. A leaf is blocked
  when it is not demanding or needs a saturated resource. ``rescale=False`` adds the
  children's vectors as they are; ``ignore_blocked=False`` rescales to the smallest
  demanding child whether blocked or not and counts every resource.
* ``hdrf-naive`` (Sec. 3.3): internal usage is the plain sum, every resource counts.
* ``capacity`` (Sec. 5.2, C.S-Current): naive, and nothing is allocated while any
  resource is saturated.
* ``dff`` (DFF Alg. 1-3): fairness ``max_r U_r / FR_r`` with Alg. 2's override; Fair
  Resource recomputed when jobs arrive or leave.
* ``slots``: hierarchical max-min on running tasks (one slot each).
* ``fifo``: the earliest submitted job that can run.

In a queue with ``order: fifo`` only its earliest job that can run competes.

Ties (written rule, all policies): lower share (compared rounded to 12 digits, so float
noise cannot decide), then fewer running tasks in the subtree, then listed first (queues in file order, jobs by arrival order).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.resources import Vector
from fairshare.policies.ties import tie_key

Runnable = Callable[[str], bool]


def first_in_heap(heap: list, valid: Callable[[tuple], bool], attempt: Callable[[tuple], str | None]) -> str | None:
    """Walk a lazy min-heap lowest first: drop stale entries (``valid`` false), return the
    first non-None ``attempt(entry)``, and put back every entry tried, so the heap is
    unchanged except for the dropped stale ones. The incremental sorters all decide this
    way: their heaps order candidates by the written tie rule."""
    tried: list = []
    found = None
    while heap:
        entry = heap[0]
        if not valid(entry):
            heapq.heappop(heap)
            continue
        found = attempt(entry)
        if found is not None:
            break
        tried.append(heapq.heappop(heap))
    for entry in tried:
        heapq.heappush(heap, entry)
    return found


def descend_tree(v: int, heaps: list[list], *, is_job: list[bool], key: list[str], live: list[int],
                 fifo_jobs: Callable[[int], list[int] | None], version: list[int], present: list,
                 runnable: Runnable, excluded: list[int] | None = None) -> str | None:
    """H-DRF Alg. 4 / DFF Alg. 3's descent, shared by the tree sorters: from node ``v``,
    take the lowest child in ``heaps[v]`` (entries ``(share, running, position, version,
    child)``, ordered by the tie rule) that has a runnable job below it. An entry is
    current while its version is the child's, the child has demanding jobs below
    (``live``) and is still there (``present``); others are stale and dropped. In a FIFO
    queue (``fifo_jobs(v)`` gives its jobs by arrival) only the earliest demanding runnable
    job competes with the sub-queues.

    ``excluded[c]``, when given, counts the demanding jobs below ``c`` known not to be
    runnable (:meth:`OnlineSorter.exclude`): a child whose demanding jobs are all excluded
    is passed over without descending. The heap walk is :func:`first_in_heap`'s, inlined
    (this runs once per decision)."""
    heappop, heappush = heapq.heappop, heapq.heappush

    def descend(v: int) -> str | None:
        if is_job[v]:
            name = key[v]
            return name if runnable(name) else None
        fifo_job = -1
        waiting = fifo_jobs(v)
        if waiting is not None:
            fifo_job = next((c for c in waiting if live[c] > (0 if excluded is None else excluded[c])
                             and runnable(key[c])), -2)
        heap = heaps[v]
        tried: list = []
        found = None
        while heap:
            entry = heap[0]
            c = entry[4]
            if entry[3] != version[c] or live[c] <= 0 or not present[c]:
                heappop(heap)
                continue
            if (excluded is None or live[c] > excluded[c]) and (fifo_job == -1 or not is_job[c] or c == fifo_job):
                # (a FIFO queue's later jobs wait)
                if is_job[c]:
                    found = key[c] if runnable(key[c]) else None
                else:
                    found = descend(c)
                if found is not None:
                    break
            tried.append(heappop(heap))
        for entry in tried:
            heappush(heap, entry)
        return found

    return descend(v)


def pick_among_tree(names, *, index: dict[str, int], parent: list[int], live: list[int],
                    node_key: Callable[[int], tuple], fifo_jobs: Callable[[int], list[int] | None],
                    runnable: Runnable) -> str | None:
    """:func:`descend_tree`'s answer from the root when only ``names`` can be runnable.
    The descent takes, level by level, the lowest child (``node_key(v)``: v's key in its
    parent's heap, by the tie rule) that has a runnable job below, so the job it returns
    is the runnable one whose path of keys from the root is lowest: sort the candidates'
    paths and try them in order. In a FIFO queue only its earliest demanding runnable job
    competes, as in the descent (the others are not runnable, so the earliest runnable
    job is a candidate). O(candidates x depth) instead of a walk past every job that
    cannot run."""
    candidates = {index[name]: name for name in names}
    paths: list[tuple[list[tuple], str]] = []
    keys: dict[int, tuple] = {}
    fifo_first: dict[int, int | None] = {}
    for v, name in candidates.items():
        if not live[v]:
            continue
        q = parent[v]
        waiting = fifo_jobs(q)
        if waiting is not None:
            if q not in fifo_first:
                fifo_first[q] = next((c for c in waiting
                                      if c in candidates and live[c] > 0 and runnable(candidates[c])), None)
            if fifo_first[q] != v:
                continue
        path = []
        while v > 0:
            k = keys.get(v)
            if k is None:
                k = keys[v] = node_key(v)  # (candidates share most of their ancestors)
            path.append(k)
            v = parent[v]
        path.reverse()
        paths.append((path, name))
    paths.sort()
    for _path, name in paths:
        if runnable(name):
            return name
    return None


class TreeExclusion:
    """:meth:`OnlineSorter.exclude` for the tree sorters (H-DRF, DFF): per node, how many
    of the demanding jobs below are excluded (``excluded``, compared with ``live`` by
    :func:`descend_tree`), kept along the jobs' paths and undone at the next call. Needs
    the sorter's ``index``, ``parent`` and ``live`` tables; ``_grow_excluded`` per node."""

    index: dict[str, int]
    parent: list[int]
    live: list[int]

    def _init_excluded(self) -> None:
        self.excluded: list[int] = []
        self._excluded_jobs: list[int] = []

    def _grow_excluded(self) -> None:
        self.excluded.append(0)

    def exclude(self, name: str) -> None:
        idx = self.index.get(name)
        # only a demanding job not yet excluded (the counts are compared with ``live``)
        if idx is None or not self.live[idx] or self.excluded[idx]:
            return
        self._excluded_jobs.append(idx)
        parent, excluded = self.parent, self.excluded
        while idx >= 0:
            excluded[idx] += 1
            idx = parent[idx]

    def reset_excluded(self) -> None:
        parent, excluded = self.parent, self.excluded
        for idx in self._excluded_jobs:
            while idx >= 0:
                excluded[idx] -= 1
                idx = parent[idx]
        self._excluded_jobs.clear()

    def _excluded_counts(self) -> list[int] | None:
        """What :func:`descend_tree` takes: None when nothing is excluded (no checks)."""
        return self.excluded if self._excluded_jobs else None


@dataclass
class OnlineJob:
    name: str
    queue: str
    weight: float
    demand: Vector  # composite per-task demand: what the job needs (DFF's "needs", blocking)
    order: int  # arrival order, for ties and FIFO
    usage: list[float] = field(default_factory=list)
    running: int = 0
    demanding: bool = True


class OnlineSorter:
    """Interface + shared bookkeeping; subclasses implement :meth:`pick`."""

    def __init__(self, resources: int, queues: QueueTree, capacity: Vector):
        self.m = resources
        self.queues = queues
        self.capacity: Vector = tuple(capacity)
        self.saturated: frozenset[int] = frozenset()
        self.jobs: dict[str, OnlineJob] = {}
        self._arrivals = 0

    # --- events -------------------------------------------------------------------------
    def add_job(self, name: str, queue: str, weight: float, demand: Vector) -> None:
        self.jobs[name] = OnlineJob(name, queue, weight, tuple(demand), self._arrivals, [0.0] * self.m)
        self._arrivals += 1

    def remove_job(self, name: str) -> None:
        del self.jobs[name]

    def allocated(self, name: str, demand: Vector, now: float = 0.0) -> None:
        job = self.jobs[name]
        for r, d in enumerate(demand):
            job.usage[r] += d
        job.running += 1

    def released(self, name: str, demand: Vector, now: float = 0.0) -> None:
        job = self.jobs[name]
        for r, d in enumerate(demand):
            job.usage[r] = max(0.0, job.usage[r] - d)
        job.running -= 1

    def set_demanding(self, name: str, demanding: bool) -> None:
        self.jobs[name].demanding = demanding

    def set_capacity(self, capacity: Vector) -> None:
        self.capacity = tuple(capacity)

    def set_saturated(self, resources: frozenset[int]) -> None:
        self.saturated = frozenset(resources)

    def shares(self) -> dict[str, float]:
        """Each job's and queue's current share as this policy measures it (for reports)."""
        return {}

    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        raise NotImplementedError

    def exclude(self, name: str) -> None:
        """The scheduler found ``name`` not runnable, and it stays so until
        :meth:`reset_excluded` (the next ``schedule`` call: within one, free capacity
        only shrinks). A sorter may pass it over without asking; the default ignores it."""

    def reset_excluded(self) -> None:
        """Forget :meth:`exclude` (a new ``schedule`` call)."""

    def pick_among(self, names, runnable: Runnable, now: float = 0.0) -> str | None:
        """:meth:`pick`, told that only the jobs in ``names`` can be runnable (the
        scheduler knows when few jobs' next tasks fit anywhere). Must return what ``pick``
        would; sorters that can use the list to skip the rest override this."""
        allowed = set(names)
        return self.pick(lambda name: name in allowed and runnable(name), now)


class ReferenceSorter(OnlineSorter):
    """Recomputes the whole tree for every decision (the papers' per-decision algorithm)."""

    FLAT = {"drf", "asset", "cpu", "collapsed", "fifo"}

    def __init__(self, kind: str, resources: int, queues: QueueTree, capacity: Vector, *,
                 rescale: bool = True, ignore_blocked: bool = True, resource_index: int = 0,
                 slots_total: int = 1):
        super().__init__(resources, queues, capacity)
        self.kind = kind
        self.rescale = rescale
        self.ignore_blocked = ignore_blocked
        self.resource_index = resource_index
        self.slots_total = max(1, slots_total)
        self._fr: dict[str, Vector] | None = None

    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, demand)
        self._fr = None  # DFF Alg. 3: UpdateFR when a job is submitted...

    def remove_job(self, name):
        super().remove_job(name)
        self._fr = None  # ... or finishes

    def set_capacity(self, capacity):
        super().set_capacity(capacity)
        self._fr = None

    # --- tree -------------------------------------------------------------------------------
    def _children(self) -> dict[str, list[tuple[str, bool]]]:
        """key -> [(child key, is_job)], queues in file order then jobs by arrival."""
        kids: dict[str, list[tuple[str, bool]]] = {}
        if self.kind in self.FLAT:
            kids[ROOT] = [(j.name, True) for j in sorted(self.jobs.values(), key=lambda j: j.order)]
            return kids
        for node in self.queues:
            kids[node.path] = [(c, False) for c in node.children]
        for job in sorted(self.jobs.values(), key=lambda j: j.order):
            kids.setdefault(job.queue, []).append((job.name, True))
        return kids

    def _weight(self, key: str, is_job: bool) -> float:
        return self.jobs[key].weight if is_job else self.queues[key].weight

    # --- shares ----------------------------------------------------------------------------
    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        if self.kind == "capacity" and self.saturated:
            return None  # C.S-Current stops once any resource is fully used
        kids = self._children()
        m, cap = self.m, self.capacity
        usage: dict[str, list[float]] = {}
        share: dict[str, float] = {}
        running: dict[str, int] = {}
        demanding: dict[str, bool] = {}
        blocked: dict[str, bool] = {}
        order_key: dict[str, int] = {}
        sat = self.saturated
        count_res = [r for r in range(m) if cap[r] > 0 and (r not in sat or not self._ignores_saturated())]
        weights = self._collapsed_weights(kids) if self.kind == "collapsed" else None
        fr = self._fair_resources(kids) if self.kind == "dff" else None

        def leaf_share(job: OnlineJob, u: list[float]) -> float:
            w = weights[job.name] if weights is not None else job.weight
            if self.kind == "asset":
                return sum(u[r] / cap[r] for r in range(m) if cap[r] > 0) / w
            if self.kind == "cpu":
                k = self.resource_index
                return u[k] / cap[k] / w if cap[k] > 0 else 0.0
            if self.kind == "slots":
                return job.running / self.slots_total / w
            if self.kind == "dff":
                f = fr.get(job.name, ())
                return max((u[r] / f[r] for r in range(m) if f and f[r] > 0), default=0.0)
            return max((u[r] / cap[r] for r in count_res), default=0.0) / w

        def visit(key: str, is_job: bool, pos: int) -> None:
            order_key[key] = pos
            if is_job:
                job = self.jobs[key]
                u = list(job.usage)
                usage[key] = u
                running[key] = job.running
                demanding[key] = job.demanding
                blocked[key] = (not job.demanding) or any(job.demand[r] > 0 for r in sat)
                share[key] = leaf_share(job, u)
                return
            children = kids.get(key, [])
            for i, (c, cj) in enumerate(children):
                visit(c, cj, i)
            running[key] = sum(running[c] for c, _ in children)
            demanding[key] = any(demanding[c] for c, _ in children)
            blocked[key] = all(blocked[c] for c, _ in children)
            total = [0.0] * m
            if self.kind == "hdrf" and self.rescale:
                # Alg. 3: rescale the demanding (non-blocked) children to the smallest share
                pool = [c for c, _ in children if demanding[c] and (not self.ignore_blocked or not blocked[c])]
                wt = {c: self._weight(c, cj) for c, cj in children}
                low = min((share[c] for c in pool), default=None)
                for c, _ in children:
                    factor = 1.0
                    if c in pool and low is not None:
                        # rescale so the child's weighted share becomes the smallest one
                        factor = (low / share[c]) if share[c] > 0 else 0.0
                    for r in range(m):
                        total[r] += usage[c][r] * factor
            else:
                for c, _ in children:
                    for r in range(m):
                        total[r] += usage[c][r]
            usage[key] = total
            if key == ROOT:
                return
            w = self._weight(key, False)
            if self.kind == "slots":
                share[key] = running[key] / self.slots_total / w
            elif self.kind == "dff":
                f = fr.get(key, ())
                raw = max((total[r] / f[r] for r in range(m) if f and f[r] > 0), default=0.0)
                live = [share[c] for c, _ in children if demanding[c] and not blocked[c]]
                if raw > 1.0 and live and min(live) < raw:  # Alg. 2 line 9
                    raw = min(live)
                share[key] = raw
            else:
                share[key] = max((total[r] / cap[r] for r in count_res), default=0.0) / w

        visit(ROOT, False, 0)
        self._last_shares = share

        if self.kind == "fifo":
            for key, _ in kids.get(ROOT, []):
                if demanding[key] and runnable(key):
                    return key
            return None

        def descend(key: str) -> str | None:
            if key in self.jobs:
                return key if demanding[key] and runnable(key) else None
            children = kids.get(key, [])
            if key != ROOT and key in self.queues and self.queues[key].order == "fifo":
                # FIFO queue: its jobs run one after another, in arrival order; only the
                # earliest that can run competes with the queue's sub-queues.
                jobs_here = [c for c, cj in children if cj and demanding[c] and runnable(c)]
                children = [(c, cj) for c, cj in children if not cj or c in jobs_here[:1]]
            cands = [(*tie_key(share[c], running[c], order_key[c]), c) for c, _ in children if demanding[c]]
            for *_k, c in sorted(cands):
                found = descend(c)
                if found is not None:
                    return found
            return None

        return descend(ROOT)

    def shares(self) -> dict[str, float]:
        return dict(getattr(self, "_last_shares", {}))

    def _ignores_saturated(self) -> bool:
        return self.kind == "hdrf" and self.ignore_blocked

    def _collapsed_weights(self, kids) -> dict[str, float]:
        """H-DRF Sec. 3.2 weights among the jobs demanding now; a job that is not
        demanding keeps its own weight (it is never picked)."""
        from fairshare.policies.collapsed import collapsed_weights

        weights = collapsed_weights(self.queues, (j for j in self.jobs.values() if j.demanding))
        return {name: weights.get(name, job.weight) for name, job in self.jobs.items()}

    def _fair_resources(self, kids) -> dict[str, Vector]:
        """DFF Alg. 1 (UpdateFR) over the jobs present; cached until a job arrives or leaves."""
        if self._fr is not None:
            return self._fr
        m = self.m
        needs: dict[str, list[bool]] = {}
        tree_kids: dict[str, list[tuple[str, float]]] = {}
        for node in self.queues:
            tree_kids[node.path] = [(c, self.queues[c].weight) for c in node.children]
        for job in sorted(self.jobs.values(), key=lambda j: j.order):
            flags = [d > 0 for d in job.demand]
            needs[job.name] = flags
            for path in self.queues.ancestors(job.queue):
                acc = needs.setdefault(path, [False] * m)
                for r in range(m):
                    acc[r] = acc[r] or flags[r]
            tree_kids.setdefault(job.queue, []).append((job.name, job.weight))
        fr: dict[str, Vector] = {ROOT: tuple(self.capacity)}
        stack = [ROOT]
        while stack:
            key = stack.pop()
            live = [(c, w) for c, w in tree_kids.get(key, []) if c in needs]
            for c, w in live:
                fr[c] = tuple(fr[key][r] * w / sum(wk for k, wk in live if needs[k][r]) if needs[c][r] else 0.0
                              for r in range(m))
                stack.append(c)
        self._fr = fr
        return fr
