"""Online policies: which job's next task runs, decided whenever resources free up.

The engine tells an :class:`OnlineSorter` about every change (job added or removed, task
started or finished, demand status, capacity, saturated resources) and asks
:meth:`OnlineSorter.pick` for the next job among those whose next task can run now. The
sorter never reads a clock or draws random numbers: ``now`` is passed in.

:class:`ReferenceSorter` is the straightforward implementation: every ``pick`` recomputes
every node's share from scratch, exactly as the papers' pseudo-code does per decision.
It serves every online policy and is the reference the incremental sorters are tested
against (same decisions) and benchmarked against (speed ratio, docs/performance.md).
It holds no policy's formula: the policy hands it a :class:`ShareRule`
(``Policy.share_rule``) that says how leaves and queues are measured (the tree shape,
which resources count, how a queue's usage combines its children's, the shares), and
each rule lives in its policy's module next to that policy's incremental sorter's
formulas (docs/policies.md lists them).

In a queue with ``order: fifo`` only its earliest job that can run competes.

Ties: the written rule of ``policies/ties.py`` (share rounded to ``DIGITS`` digits, then
fewer running tasks in the subtree, then listed first: queues in file order, jobs by
arrival order), for every policy.
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


class DecisionState:
    """One :class:`ReferenceSorter` decision's tree, filled bottom-up: per node key its
    usage vector, share, running tasks, demanding and blocked flags; ``kids`` maps a node
    to its ``(child key, is_job)`` list and ``counted`` lists the resources shares count."""

    def __init__(self, kids: dict[str, list[tuple[str, bool]]], counted: list[int]):
        self.kids = kids
        self.counted = counted
        self.usage: dict[str, list[float]] = {}
        self.share: dict[str, float] = {}
        self.running: dict[str, int] = {}
        self.demanding: dict[str, bool] = {}
        self.blocked: dict[str, bool] = {}


class ShareRule:
    """How a policy measures shares, told to :class:`ReferenceSorter` by the policy
    (:meth:`Policy.share_rule <fairshare.policies.base.Policy.share_rule>`): the reference
    holds the per-decision recomputation and the written tie rule, each policy's rule the
    formulas, so a new policy adds a rule, never a branch here.

    The defaults are the usage-over-capacity dominant share (DRF Sec. 4.3, H-DRF Sec.
    3.1): a node's share is ``max_r U_r / R_r`` over the counted resources, divided by its
    weight, and a queue's usage is the plain sum of its children's.
    """

    #: the queue tree is ignored: every job sits directly under the root
    flat: bool = False
    #: the root is a FIFO queue: the earliest demanding job that can run is picked
    fifo: bool = False
    #: shares count only the non-saturated resources (H-DRF Alg. 3's Y)
    ignores_saturated: bool = False
    #: nothing is picked while any resource is saturated (C.S-Current)
    stop_when_saturated: bool = False

    def jobs_changed(self) -> None:
        """A job arrived or left, or the capacity changed (drop what depends on them)."""

    def begin(self, sorter: ReferenceSorter) -> None:
        """A decision starts (compute what every share of it reads)."""

    def share(self, usage, capacity: Vector, counted: list[int], weight: float) -> float:
        """``max_r usage_r / capacity_r`` over ``counted``, divided by ``weight``."""
        return max((usage[r] / capacity[r] for r in counted), default=0.0) / weight

    def leaf_share(self, sorter: ReferenceSorter, job: OnlineJob, state: DecisionState) -> float:
        return self.share(job.usage, sorter.capacity, state.counted, job.weight)

    def combine(self, sorter: ReferenceSorter, key: str, state: DecisionState) -> list[float]:
        """A queue's usage vector from its children's (already in ``state``)."""
        total = [0.0] * sorter.m
        usage = state.usage
        for c, _ in state.kids.get(key, []):
            for r in range(sorter.m):
                total[r] += usage[c][r]
        return total

    def node_share(self, sorter: ReferenceSorter, key: str, state: DecisionState) -> float:
        return self.share(state.usage[key], sorter.capacity, state.counted, sorter.queues[key].weight)


class ReferenceSorter(OnlineSorter):
    """Recomputes the whole tree for every decision (the papers' per-decision algorithm),
    measuring shares by the policy's :class:`ShareRule`."""

    def __init__(self, rule: ShareRule, resources: int, queues: QueueTree, capacity: Vector):
        super().__init__(resources, queues, capacity)
        self.rule = rule
        self._last_shares: dict[str, float] = {}

    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, demand)
        self.rule.jobs_changed()

    def remove_job(self, name):
        super().remove_job(name)
        self.rule.jobs_changed()

    def set_capacity(self, capacity):
        super().set_capacity(capacity)
        self.rule.jobs_changed()

    # --- tree -------------------------------------------------------------------------------
    def _children(self) -> dict[str, list[tuple[str, bool]]]:
        """key -> [(child key, is_job)], queues in file order then jobs by arrival."""
        kids: dict[str, list[tuple[str, bool]]] = {}
        if self.rule.flat:
            kids[ROOT] = [(j.name, True) for j in sorted(self.jobs.values(), key=lambda j: j.order)]
            return kids
        for node in self.queues:
            kids[node.path] = [(c, False) for c in node.children]
        for job in sorted(self.jobs.values(), key=lambda j: j.order):
            kids.setdefault(job.queue, []).append((job.name, True))
        return kids

    # --- shares ----------------------------------------------------------------------------
    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        rule = self.rule
        if rule.stop_when_saturated and self.saturated:
            return None  # C.S-Current stops once any resource is fully used
        m, cap, sat = self.m, self.capacity, self.saturated
        state = DecisionState(self._children(), [r for r in range(m) if cap[r] > 0
                                                 and (r not in sat or not rule.ignores_saturated)])
        kids = state.kids
        order_key: dict[str, int] = {}
        rule.begin(self)

        def visit(key: str, is_job: bool, pos: int) -> None:
            order_key[key] = pos
            if is_job:
                job = self.jobs[key]
                state.usage[key] = list(job.usage)
                state.running[key] = job.running
                state.demanding[key] = job.demanding
                state.blocked[key] = (not job.demanding) or any(job.demand[r] > 0 for r in sat)
                state.share[key] = rule.leaf_share(self, job, state)
                return
            children = kids.get(key, [])
            for i, (c, cj) in enumerate(children):
                visit(c, cj, i)
            state.running[key] = sum(state.running[c] for c, _ in children)
            state.demanding[key] = any(state.demanding[c] for c, _ in children)
            state.blocked[key] = all(state.blocked[c] for c, _ in children)
            state.usage[key] = rule.combine(self, key, state)
            if key != ROOT:
                state.share[key] = rule.node_share(self, key, state)

        visit(ROOT, False, 0)
        self._last_shares = state.share
        share, running, demanding = state.share, state.running, state.demanding

        def descend(key: str) -> str | None:
            if key in self.jobs:
                return key if demanding[key] and runnable(key) else None
            children = kids.get(key, [])
            fifo = rule.fifo if key == ROOT else (key in self.queues and self.queues[key].order == "fifo")
            if fifo:
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
        return dict(self._last_shares)
