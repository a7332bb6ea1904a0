"""Incremental flat sorters: a lazy heap over the jobs for the flat policies whose share
depends on the job alone (``drf``, ``asset``, ``cpu``); an arrival-order scan for
``fifo`` (:class:`FifoSorter`).

The policy hands :class:`FlatSorter` its share function ``share(usage, capacity, weight)``
(``drf.drf_share``, ``asset.asset_share``, ``cpu.single_resource_share``), and hands the
reference sorter the same function through :class:`FlatShareRule`, so both compare jobs
by one formula. A task start or finish re-keys one job: O(m + log n). A capacity change
re-keys every job (O(n)). The saturated set changes nothing (these shares have no Y).
Decisions are identical to :class:`~fairshare.policies.machinery.reference.ReferenceSorter`
(tests/test_online_parity.py): the demanding jobs by the tie rule (``machinery/ties.py``:
share rounded to ``DIGITS`` digits, running tasks, arrival), the first runnable one. The
heap is lazy (an entry is valid while its version is the job's current one) and
compacted when stale entries pile up. Within a ``schedule`` call, jobs the engine found
unable to run are parked outside the heap without a runnable check until the call ends.

**One heap per shape** (docs/performance.md, "Shape-indexed descents"). Without decay
each job's entry lives in the heap of the shape the engine filed it under
(``file_shape``; unfiled jobs under -1), and a pick merges the heads of the heaps
of the shapes that may fit (``only_shapes`` less ``exclude_shape``; every shape until
the engine restricts them): a small heap of (head entry, shape), lowest first, a shape's
next head put in when its head is popped. A shape that cannot fit is never looked at,
where one heap for all jobs walked past (popped and parked) every job of it. Why it is
the same pick: the single heap's walk asks ``runnable``, in entry order, every current
entry whose job is not excluded and whose shape may fit, and takes the first that can
run. Each job has exactly one current entry (its latest version; moving a job to
another shape re-pushes it at a new version, so the old entry goes stale), in the heap
of its current shape, with the same key tuple as before (share rounded to ``DIGITS``,
running tasks, arrival: ``machinery/ties.py``, then version and name). The merge of
sorted sequences is the sorted union, so the merge over the live shapes' heaps yields
exactly the single heap's entries restricted to those shapes, in the same order; the
entries of other shapes are the ones the walk parked without asking. So the same jobs
are asked, in the same order, and the same one is taken. A shape excluded during the
walk (``exclude_shape`` from inside ``runnable``) is dropped from the merge when its
head next comes up, as the walk parked it then.

Without decay the engine never asks ``pick_among`` (``among_cost`` is infinite then): it
names the candidates' shapes (``only_shapes``) and ``pick`` merges the heads of just their
heaps. The same pick: ``pick_among`` sorts the candidates by (rounded share, running,
arrival), which is their heap entries' order (arrival is unique, so version and name never
decide), and the candidates are every job of those shapes; excluded jobs and dead shapes,
skipped by the merge, are ones ``runnable`` refuses for the rest of the call.

With the shapes named, the merge's first steps need no heap of heads: each takes the
lowest head of the list by one ``min`` pass (the heap's first item: the items are
distinct, so ``min`` and a heap agree), and does to it what the merge's step does (drop it
if stale; else ask ``runnable``, park or set it aside if refused); only after a refusal
is the list made a heap, and the merge goes on from there over the same items. A job's
entry goes stale when it is re-keyed; the entry of the job just picked is its shape's head
then, and leaves that heap at once (``_drop_picked``, its shape's next head joining
``_heads``), which is what the merge does with a stale head when it meets one.

With decay the keys move with time and the base is fed lazily (below); that path keeps
one heap for all jobs and parks the jobs of shapes that cannot fit, as before.

With decayed usage (``set_half_life``, docs/policies.md "Fairness with memory") a job's
key is the share of its allocation plus its decayed average past allocation
(``machinery/decay.py``); keys move as time passes, so the demanding jobs are re-keyed
once per new instant (``_advance``), in one vectorized pass (the policy's share function
carries its many-rows form as ``share.many``, ``drf.drf_shares``): their names sorted by
the new keys become the *base*, and the heap holds only the jobs re-keyed since. The
base is fed into the heap lazily, lowest first (``_feed``), so that the heap's head is
always the lowest entry of the two: a pick reads only the head of the base, and the
decisions are those of the heap with every job re-keyed (the tie rule's rounding is
monotone, so the base in raw key order is in rounded key order, and every base entry
whose rounded key ties the heap's head is fed before the head is read, where the heap
orders the tie). Without decay none of that runs.

``collapsed`` (``policies/collapsed.py``) subclasses :class:`FlatSorter` with weights
that change when the set of demanding jobs does (:meth:`FlatSorter._weight`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

import numpy as np

from fairshare.model.queues import QueueTree
from fairshare.model.resources import Vector
from fairshare.policies.machinery.decay import DecayLedger
from fairshare.policies.machinery.reference import ShareRule
from fairshare.policies.machinery.ties import DIGITS
from fairshare.policies.online import OnlineSorter, Runnable

#: a flat policy's share of one job: ``share(usage, capacity, weight)``
JobShare = Callable[[Sequence[float], Vector, float], float]


class FlatShareRule(ShareRule):
    """The reference sorter's rule for a flat policy: jobs directly under the root, each
    measured by the policy's own share function (``fifo=True``: the earliest demanding
    job that can run, whatever the shares)."""

    flat = True

    def __init__(self, share: JobShare, *, fifo: bool = False):
        self.job_share = share
        self.fifo = fifo

    def leaf_share(self, sorter, job, state):
        return self.job_share(job.usage, sorter.capacity, job.weight)


class FlatSorter(OnlineSorter):
    #: these shares have no Y (module docstring): the engine need not work out the
    #: saturated set before each decision (``Scheduler._decide``)
    reads_saturated = False

    # Comparing a candidate is one key, about 1/30 of passing a job that cannot run (its
    # heap pop, push and runnable test), so the candidate list pays off far beyond the
    # tree sorters' 48 (steady state, 2,000 jobs: 2.7-3.0k decisions/s at 1/16-1/64
    # against 0.8k with the tree sorters' rule; 1.7k comparing every list: sorting a long
    # list costs more than the short walk it replaces). ``among_cost``, ``OnlineSorter``.
    among_max = 1 << 30

    @property
    def among_cost(self) -> float:
        """With decay, 1/32 (above). Without, never :meth:`pick_among`: the engine then
        names the candidates' shapes (``only_shapes``) and :meth:`pick` merges the heads
        of just their heaps, which costs a heap item per shape where the candidate list
        costs a rounded key per job and a sort (the same pick: the module docstring, "One
        heap per shape"; and ``pick_among``'s order is the heap's)."""
        return 1 / 32 if self.decay is not None else math.inf

    def __init__(self, share: JobShare, resources: int, queues: QueueTree, capacity: Vector):
        super().__init__(resources, queues, capacity)
        self.job_share = share
        # the share at the current capacity, ``share(usage, weight)`` (``_share_at``), and
        # whether a subclass weighs jobs its own way (``_weight``; else the job's weight)
        self._share_now = self._share_at(self.capacity)
        self._own_weights = type(self)._weight is not FlatSorter._weight
        self.share: dict[str, float] = {}
        self.version: dict[str, int] = {}
        # with decay, every entry: (round(share, DIGITS), running, arrival, version, name);
        # without, the entries by the job's filed shape (module docstring), and how many
        # were pushed since the heaps were last compacted
        self.heap: list[tuple] = []
        self._heaps: dict[int, list[tuple]] = {}
        self._pushed = 0
        # (head entry, shape) for every shape's head (and stale items, dropped when met),
        # and those of shapes found to fit nowhere, set aside until the call ends
        self._heads: list[tuple] = []
        self._parked_heads: list[tuple] = []
        # jobs the engine found unable to run in this ``schedule`` call (``exclude``), and
        # their heap entries, taken out until the call ends (``reset_excluded``)
        self._excluded: set[str] = set()
        self._parked: list[tuple] = []
        # each job's shape number as the engine filed it (``file_shape``) and, within a
        # ``schedule`` call, the shapes that may fit (None: every shape) less those found
        # to fit nowhere; a job of another shape cannot run, so ``pick`` parks its entry
        # without asking (exact for the reason ``machinery.descent.ShapeIndex`` gives)
        self._shape_of: dict[str, int] = {}
        self._alive: set[int] | None = None
        # without decay: the head entry and shape of the job the last pick returned, until
        # that job is re-keyed (``_drop_picked``)
        self._picked: tuple | None = None
        self._dead: set[int] = set()
        # decayed usage (``set_half_life``; None: the instantaneous policy) and the latest
        # instant the keys were computed at
        self.decay: DecayLedger | None = None
        self._keyed_at = 0.0
        # with decay: the demanding jobs at the last new instant, by their keys then, fed
        # into the heap from ``_cursor`` on (``_feed``); the jobs re-keyed since are in
        # ``_fresh`` (their base entries are stale)
        self._base: list[str] = []
        self._base_share: list[float] = []
        self._cursor = 0
        self._fresh: set[str] = set()

    def set_half_life(self, half_life: float, ledger: DecayLedger | None = None) -> None:
        """Order by decayed usage (docs/policies.md, "Fairness with memory"): each job's
        key is the share of its allocation plus its decayed average past allocation
        (``machinery/decay.py``), each job's decaying with its queue's half-life
        (``QueueTree.half_life_of``; ``half_life`` where no queue sets one). ``ledger``:
        the history to continue (a sorter built again for a new queue tree)."""
        self.decay = ledger if ledger is not None else DecayLedger(half_life, self.m)
        for name, job in self.jobs.items():
            self.decay.enrol(name, self.queues.half_life_of(job.queue, self.decay.half_life))
        self._rekey_all()

    def _advance(self, now: float) -> None:
        """With decay, time moving changes every key: re-key the demanding jobs once per
        new instant, not per task (``_rekey_all``)."""
        if now > self._keyed_at:
            self._keyed_at = now
            self._rekey_all()

    def _rekey_all(self) -> None:
        """Every demanding job's key at ``_keyed_at``, in one vectorized pass (the
        ledger's rows, the share's ``many`` form), sorted into the base; the heap starts
        empty (the parked entries too: the excluded jobs are parked again when the base
        reaches them). Non-demanding jobs keep their keys, as a single re-key does."""
        jobs, rows = self.jobs, self.decay.rows
        names = [name for name, job in jobs.items() if job.demanding]
        effective = self.decay.effective_rows(np.array([rows[name] for name in names], dtype=np.intp),
                                              self._keyed_at)
        weights = np.array([self._weight(jobs[name]) for name in names], dtype=float)
        many = getattr(self.job_share, "many", None)
        if many is not None:
            keys = many(effective, self.capacity, weights)
        else:  # (a share function without its many-rows form: one call per job)
            keys = np.array([self.job_share(row, self.capacity, w) for row, w in zip(effective.tolist(), weights)])
        order = np.argsort(keys, kind="stable").tolist()
        shares = keys.tolist()
        self._base = [names[i] for i in order]
        self._base_share = [shares[i] for i in order]
        self.share.update(zip(names, shares))
        self._cursor = 0
        self._fresh = set()
        self.heap = []
        self._heaps = {}
        self._heads = []
        self._parked_heads.clear()
        self._parked.clear()

    def _feed(self) -> None:
        """Move base entries into the heap until the next one's rounded key is above the
        heap's head (module docstring): from then on the heap's head is the lowest entry,
        until it is popped."""
        base, heap, jobs, fresh = self._base, self.heap, self.jobs, self._fresh
        while self._cursor < len(base):
            name = base[self._cursor]
            job = jobs.get(name)
            if job is None or not job.demanding or name in fresh:  # (stale: re-keyed since, or gone)
                self._cursor += 1
                continue
            key = round(self._base_share[self._cursor], DIGITS)
            if heap and heap[0][0] < key:
                return
            heapq.heappush(heap, (key, job.running, job.order, self.version[name], name))
            self._cursor += 1

    # --- events -------------------------------------------------------------------------------
    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, demand)
        self.version[name] = 0
        if self.decay is not None:
            self.decay.enrol(name, self.queues.half_life_of(queue, self.decay.half_life))
        self._rekey(name)

    def remove_job(self, name):
        super().remove_job(name)
        self._shape_of.pop(name, None)
        del self.version[name]  # its heap entries go stale
        self.share.pop(name, None)
        if self.decay is not None:
            self.decay.forget(name)  # (flat over jobs: a job's history ends with it)

    def allocated(self, name, demand, now=0.0):
        OnlineSorter.allocated(self, name, demand, now)  # (no ``super()`` object per task)
        if self.decay is not None:
            self._charge(name, now)
        self._rekey(name)

    def released(self, name, demand, now=0.0):
        OnlineSorter.released(self, name, demand, now)
        if self.decay is not None:
            self._charge(name, now)
        self._rekey(name)

    def set_demanding(self, name, demanding):
        if self.jobs[name].demanding != demanding:
            super().set_demanding(name, demanding)
            self._rekey(name)

    def set_capacity(self, capacity):
        if tuple(capacity) != self.capacity:
            super().set_capacity(capacity)
            self._share_now = self._share_at(self.capacity)
            for name in self.jobs:
                self._rekey(name)
            if self.decay is not None:
                self._rekey_all()

    # --- shares ---------------------------------------------------------------------------------
    def _weight(self, job) -> float:
        """The weight the share divides by: the job's own (collapsed: its leaf weight)."""
        return job.weight

    def _share_at(self, capacity: Vector) -> Callable[[Sequence[float], float], float]:
        """The policy's share with ``capacity`` fixed, ``share(usage, weight)``: its own
        form for a fixed capacity where it has one (``share.at``, ``drf.drf_share_at``:
        the same float, computed with less per call), else the share function itself."""
        at = getattr(self.job_share, "at", None)
        if at is not None:
            return at(capacity)
        share = self.job_share
        return lambda usage, weight: share(usage, capacity, weight)

    def _charge(self, name: str, now: float) -> None:
        self._advance(now)
        self.decay.charge(name, now, self.jobs[name].usage)

    def _rekey(self, name: str) -> None:
        job = self.jobs[name]
        weight = self._weight(job) if self._own_weights else job.weight
        if self.decay is not None:
            share = self.job_share(self.decay.effective(name, job.usage, self._keyed_at), self.capacity, weight)
            self._fresh.add(name)
            self.share[name] = share
            version = self.version[name] = self.version[name] + 1
            if job.demanding:
                self._push((round(share, DIGITS), job.running, job.order, version, name))
            return
        share = self._share_now(job.usage, weight)
        if self._picked is not None:
            self._drop_picked(name)
        self.share[name] = share
        version = self.version[name] = self.version[name] + 1
        if job.demanding:
            entry = (round(share, DIGITS), job.running, job.order, version, name)
            shape = self._shape_of.get(name, -1)
            heap = self._heaps.get(shape)
            if heap is None or self._pushed >= 4 * len(self.jobs) + 16:
                self._push(entry)  # (its shape's first entry, or the heaps are due a compaction)
            else:  # (``_push``'s usual step, inlined: every task start and end re-keys a job)
                heapq.heappush(heap, entry)
                if heap[0] is entry:
                    heapq.heappush(self._heads, (entry, shape))
                self._pushed += 1

    def _push(self, entry: tuple) -> None:
        """Put a job's current entry into its heap: the one heap with decay, else its
        shape's; compact the heaps once stale entries pile up."""
        if self.decay is not None:
            heapq.heappush(self.heap, entry)
            if len(self.heap) > 4 * len(self.jobs) + 16:
                self.heap = [e for e in self.heap if self._valid(e)]
                heapq.heapify(self.heap)
            return
        shape = self._shape_of.get(entry[4], -1)  # (-1: unfiled, a number no shape has)
        heap = self._heaps.get(shape)
        if heap is None:
            heap = self._heaps[shape] = []
        heapq.heappush(heap, entry)
        if heap[0] is entry:  # (a new head for its shape)
            heapq.heappush(self._heads, (entry, shape))
        self._pushed += 1
        if self._pushed > 4 * len(self.jobs) + 16:
            self._pushed = 0
            compacted = {}
            version, jobs = self.version, self.jobs
            for shape, heap in self._heaps.items():
                # (``_valid`` inlined: a call per entry was most of the compaction)
                kept = [e for e in heap if version.get(e[4]) == e[3] and jobs[e[4]].demanding]
                if kept:
                    heapq.heapify(kept)
                    compacted[shape] = kept
            self._heaps = compacted
            self._heads = [(heap[0], shape) for shape, heap in compacted.items()]
            heapq.heapify(self._heads)

    def _drop_picked(self, name: str) -> None:
        """The job :meth:`pick` returned last was re-keyed (it was launched): its old entry,
        stale now and still its shape's head, leaves that heap at once (the next pick
        would drop it on meeting it, as every stale entry), and the shape's next head
        joins ``_heads``, as when a pick drops a stale head."""
        entry, shape = self._picked
        self._picked = None
        if entry[4] == name:
            heap = self._heaps.get(shape)
            if heap and heap[0] is entry:
                heapq.heappop(heap)
                if heap:
                    heapq.heappush(self._heads, (heap[0], shape))

    def _valid(self, entry: tuple) -> bool:
        name = entry[4]
        return self.version.get(name) == entry[3] and self.jobs[name].demanding

    # --- decisions ------------------------------------------------------------------------------
    def exclude(self, name: str) -> None:
        self._excluded.add(name)

    def file_shape(self, name: str, shape: int | None) -> None:
        if self._shape_of.get(name) == shape:
            return
        if shape is None:
            self._shape_of.pop(name, None)
        else:
            self._shape_of[name] = shape
        if self.decay is None and name in self.version:
            # (its entry moves to the new shape's heap: a new version, the same key)
            self.version[name] += 1
            job = self.jobs[name]
            if job.demanding:
                self._push((round(self.share[name], DIGITS), job.running, job.order, self.version[name], name))

    def only_shapes(self, shapes) -> None:
        self._alive = set(shapes)

    def exclude_shape(self, shape: int, names) -> None:
        self._dead.add(shape)

    def reset_excluded(self) -> None:
        self._excluded.clear()
        self._alive = None
        self._dead.clear()
        if self._parked:
            if self.decay is not None:
                heap = self.heap
                for entry in self._parked:
                    heapq.heappush(heap, entry)
            else:  # (a current entry goes back to its shape's heap: its shape is unchanged)
                for entry in self._parked:
                    if self._valid(entry):
                        self._push(entry)
            self._parked.clear()
        if self._parked_heads:
            for item in self._parked_heads:
                heapq.heappush(self._heads, item)
            self._parked_heads.clear()

    def _may_fit(self, shape: int | None) -> bool:
        """Whether a job of this shape may run in this call (``only_shapes``,
        ``exclude_shape``; always, until the engine restricts the shapes)."""
        if shape in self._dead:
            return False
        return self._alive is None or shape in self._alive

    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        """The lowest current entry whose job can run. Without decay, the merge of the
        per-shape heaps (``_pick_by_shape``). With decay, a walk of the one lazy heap, lowest
        first, dropping stale entries and putting back the ones tried. The
        entries of jobs the engine excluded in this call are parked outside the heap
        until the call ends, instead of being popped and pushed back at every decision:
        on a filling cluster the jobs whose task fits nowhere gather at the head of the
        heap (their shares stop growing), and each decision walked past all of them."""
        if self.decay is None:
            return self._pick_by_shape(runnable)
        self._advance(now)
        feed = self._feed
        heap, excluded, parked = self.heap, self._excluded, self._parked
        shape_of, dead = self._shape_of, self._dead
        heappop = heapq.heappop
        tried: list[tuple] = []
        found = None
        while True:
            if feed is not None:
                feed()
            if not heap:
                break
            entry = heap[0]
            if not self._valid(entry):
                heappop(heap)
                continue
            name = entry[4]
            if name in excluded or ((self._alive is not None or dead) and not self._may_fit(shape_of.get(name))):
                parked.append(heappop(heap))
                continue
            if runnable(name):
                found = name
                break
            tried.append(heappop(heap))
        for entry in tried:
            if entry[4] in excluded or not self._may_fit(shape_of.get(entry[4])):
                # (``runnable`` excluded it, or its shape, on the way)
                parked.append(entry)
            else:
                heapq.heappush(heap, entry)
        return found

    def _pick_by_shape(self, runnable: Runnable) -> str | None:
        """``pick`` without decay: the merge of the heads of the heaps of the shapes that
        may fit, lowest first (module docstring: the same jobs asked in the same order
        as one heap's walk). With every shape possible the merge is the kept heap of
        heads (``_heads``: an item is current while its entry is its shape's head);
        with ``only_shapes`` it is built for the few shapes named."""
        heaps, excluded, parked, dead = self._heaps, self._excluded, self._parked, self._dead
        heappop, heappush, heapreplace = heapq.heappop, heapq.heappush, heapq.heapreplace
        kept = self._alive is None
        all_heads = self._heads
        version, jobs = self.version, self.jobs  # (``_valid`` inlined below: a test per head)
        tried: list[tuple] = []
        found = None
        if kept:
            heads = self._heads
        else:
            alive = self._alive
            if dead:
                alive = [shape for shape in alive if shape not in dead]
            heads = [(heap[0], shape) for shape, heap in zip(alive, map(heaps.get, alive)) if heap]
            # the loop's first steps below, each on the lowest head found by one pass
            # (``min``): a stale head is dropped, and the first current one usually runs,
            # so the heap of heads is built only after a head is refused; from there the
            # loop goes on over the same heads, as it would have
            while heads:
                item = min(heads)
                head, shape = item
                refused = version.get(head[4]) == head[3] and jobs[head[4]].demanding
                if refused:
                    name = head[4]
                    if name not in excluded and runnable(name):
                        self._picked = item
                        return name  # (nothing tried: nothing to put back)
                heap = heaps[shape]
                at = heads.index(item)
                if refused:
                    (parked if name in excluded else tried).append(heappop(heap))
                else:
                    heappop(heap)
                if heap:
                    new_head = (heap[0], shape)
                    heads[at] = new_head
                    heappush(all_heads, new_head)
                else:
                    heads[at] = heads[-1]
                    heads.pop()
                if refused:
                    break
            heapq.heapify(heads)
        while heads:
            head, shape = heads[0]
            heap = heaps.get(shape)
            if kept and (not heap or heap[0] is not head):  # (stale: its shape's head moved)
                heappop(heads)
                continue
            if shape in dead:  # (found to fit nowhere in this call: its jobs cannot run)
                if kept:
                    self._parked_heads.append(heappop(heads))
                else:
                    heappop(heads)
                continue
            name = head[4]
            if version.get(name) == head[3] and jobs[name].demanding:
                if name not in excluded and runnable(name):
                    found = name
                    self._picked = (head, shape)
                    break
                if name in excluded:
                    parked.append(heappop(heap))
                else:
                    tried.append(heappop(heap))
            else:
                heappop(heap)
            if heap:
                new_head = (heap[0], shape)
                heapreplace(heads, new_head)
                if not kept:
                    heappush(all_heads, new_head)
            else:
                heappop(heads)
        for entry in tried:
            if entry[4] in excluded:  # (``runnable`` excluded it on the way)
                parked.append(entry)
            else:
                self._push(entry)
        return found

    def pick_among(self, names, runnable: Runnable, now: float = 0.0) -> str | None:
        # the heap's order (its current entries' keys) restricted to the candidates
        if self.decay is not None:
            self._advance(now)
        jobs, share = self.jobs, self.share
        keyed = sorted((round(share[name], DIGITS), jobs[name].running, jobs[name].order, name)
                       for name in names if jobs[name].demanding)
        for *_key, name in keyed:
            if runnable(name):
                return name
        return None

    def shares(self) -> dict[str, float]:
        return dict(self.share)


class FifoSorter(OnlineSorter):
    """``fifo`` online: the earliest submitted demanding job that can run.

    The jobs dict keeps arrival order (jobs are added as they arrive and removed when they
    complete), so a pick scans from the oldest job and stops at the first that can run:
    O(jobs ahead of it) with nothing recomputed, where the reference sorts and scores every
    present job per decision. Same decisions as the reference (tests/test_online_parity.py).
    """

    reads_saturated = False  # (arrival order alone)

    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        for job in self.jobs.values():
            if job.demanding and runnable(job.name):
                return job.name
        return None

    def pick_among(self, names, runnable: Runnable, now: float = 0.0) -> str | None:
        jobs = self.jobs
        for name in sorted((name for name in names if jobs[name].demanding), key=lambda name: jobs[name].order):
            if runnable(name):
                return name
        return None
