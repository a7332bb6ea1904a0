"""Incremental dynamic DFF: the online sorter for ``dff``.

Wang et al., IEICE 2016, Alg. 1-3, computed incrementally. Alg. 3 calls ``UpdateF(n_r)``
(Alg. 2, every node's fairness from scratch) after every allocation; here a task start or
finish touches only the job's path. Decisions are identical to
:class:`~fairshare.policies.machinery.reference.ReferenceSorter` with ``dff.DFFRule``
(tests/test_online_parity.py holds them equal on random workloads). Fair Resource (Alg. 1)
and fairness (Def. 2) are the policy's own functions (``dff.update_fr``, ``dff.child_fr``,
``dff.fairness``), handed to the sorter by ``DFF.online``: one formula for the static
allocation, the reference and this sorter.

What each node keeps, and what changes it:

* ``usage[v]`` (Alg. 2 line 7, ``U_i = sum U_k``): a leaf's usage is its job's; a queue's
  is the plain sum of its children's, kept as running sums updated along the changed path
  between arrivals and departures. At the first decision after an arrival or departure
  the queues whose sums ran (``drifted``), or that gained or lost a job with usage, are
  summed again from scratch in the reference's order, so every queue's sum is then
  bit-identical to a rebuild's; the others already are (nothing below them changed since
  their last sum). A sum from scratch (``_resum``) leaves out the jobs without usage (each
  adds +0.0 to a sum that starts at +0.0, so is never -0.0: no change) and resumes each
  resource's fold from kept partial sums (``used_sums``) after the last row unchanged
  since: a prefix of the same rows in the same order folds to the same float, so only the
  rows from the first changed one on are added again, not every job of the queue.
* ``fr[v]`` (Def. 1, Alg. 1 UpdateFR) and ``raw[v] = max_r U_r / FR_r`` (Def. 2, Eq. 6,
  over resources with ``FR_r > 0``). FR depends only on which jobs are present, their
  needs and weights, and the capacity (Alg. 3 lines 10-11). Alg. 1's inputs are kept as
  counts (present jobs below each node, and per resource those needing it) and per-queue
  totals (the weight of the children needing each resource), updated along the job's
  path on arrival and departure. At the next decision (``_catch_up``) FR is recomputed
  top-down only below the highest node whose total changed, with ``dff.child_fr``, the
  step ``dff.update_fr`` uses: the same floats, because with integer or dyadic weights the
  totals are exact in any order. A job's FR is computed from its queue's when needed, once
  per (queue, weight, needs) in a pass (``_job_fr_cache``: the same call with the same
  arguments), and kept (``_job_frs``) until its queue's FR or totals or its counts change
  (emptied where they do), so a task starting or ending re-reads it without the call.
  An arrival changes every sibling's FR, but only a demanding
  job's fairness is ever read by a decision (pick and pool entries exist only for
  demanding children, and ``pick_among`` passes over candidates that do not demand), and
  a job without usage has fairness 0 whatever its FR: only the demanding siblings with
  usage (``used_demanding``) are re-evaluated, not every job, nor every running one. A job
  that stops demanding keeps its last ``raw`` until it demands again (``set_demanding``
  recomputes it first, or the catch-up does) or :meth:`~DFFSorter.shares` reports it
  (computed there). A weight
  that does not sum exactly turns this off (``exact``): then every arrival or departure
  rebuilds everything from scratch (``_refresh``, O(nodes x resources)), as the capacity
  changing always does; rebuilds are lazy, so a burst of arrivals pays once.
* Alg. 2 line 9, the override: a queue's fairness is ``raw``, unless ``raw > 1`` and its
  lowest *schedulable* child (demanding and not needing a saturated resource, i.e. with
  an unblocked job below it) is lower, in which case it takes that child's fairness. The
  lowest schedulable child comes from a lazy min-heap per node (``pool_heap``, a
  :class:`PoolHeap` of typed arrays the compiled catch-up sifts in C).

Only the override depends on the saturated set (leaf fairness does not: DFF has no Y of
resources). Like the H-DRF sorter (``hdrf_online.py``), the sorter keeps one *view* per
recently seen saturated set (schedulable counts, override, heaps) and decides with the
current one: on a full cluster the set flips on almost every event. Events update the
current view at once; the others record the changed nodes and, when their set comes
back, replay them in one batch, each changed ancestor re-keyed once (``_replay``; a view
holds no running sums, so the batch gives what one walk per node would). An arrival or departure re-keys the nodes whose fairness changed
(the job, queues, demanding siblings with usage) the same way; a view is dropped only on a rebuild,
or when more than a quarter of the nodes changed. Views have no time to live (only the
least recently used beyond ``views.MAX_VIEWS`` goes): a set back after a while replays what
changed instead of a rebuild, and a view is exact whichever way it is brought up to date. A set
first seen starts from a copy of the current view, the jobs blocked under one of the two
sets and not the other added to its pending nodes (``_new_view``: a view depends on its set
only through those flags), not from a rebuild over every node; a batched replay pushes no
pool entry that would not change (``_replay``: a pool is read only for its lowest current
entry's share). Where the compiled core is built
(``machinery/_dff_kernel.pyx``, chosen by ``machinery/compiled.py``) the replay runs
compiled: it only compares and moves floats, so it leaves the view this module's
``_replay`` would (tests/test_dff_kernel.py holds them equal entry by entry). So does a
task's start or end (``allocated``, ``released`` and ``_leaf_changed``:
``_dff_kernel.task_changed``, when the fairness is ``dff.fairness``; with decayed usage,
or before a catch-up, it calls ``_leaf_changed``): the same list edits and the same float
subtractions, additions and divisions on the same doubles (IEEE arithmetic is Python's),
in the same order, so the same usage sums, raw fairness and filed jobs.

Decayed usage (``set_half_life``, docs/policies.md "Fairness with memory"): each job leaf
holds its effective vector (allocation plus decayed average past allocation,
``machinery/decay.py``) as its usage, and a finished job's history moves to a hidden,
never demanding leaf of its queue (``machinery/history.py``), which adds to the queue's
sum and takes no Fair Resource (it is no job for Alg. 1). Time moving changes every
effective vector, so the leaves are re-charged once per new instant (``_advance``: one
vectorized pass over the ledger's rows) and restated as leaves changed between an
arrival and the next decision (``_restate``): the catch-up sums their queues from
scratch and recomputes their fairness. For a queue with a history leaf Alg. 2 line 9's
override is tested without the history and adds it back (``_fairness_with_history``).

The descent (Alg. 3 lines 1-5) takes, at each node, the lowest demanding child by the
tie rule (``machinery/ties.py``: fairness, running tasks in the subtree, position) that
has a runnable job below it; in a queue with ``order: fifo`` only its earliest runnable job
competes with its sub-queues (found by a scan of that queue's jobs, as the reference does).
Heaps are lazy: an entry is valid while its version is the child's current one; a heap
holding many stale entries is compacted. A re-keyed node's pick entry is renewed only
when a descent is about to read its parent's heap (``_View.deferred``, filled by
``_push``, ``_replay`` and ``_rebuild``; ``_renew_deferred``; exact,
``descent.renew_pick_entries``' ``lazy``), as in the H-DRF sorter: on a full cluster most
decisions compare the candidates' paths of keys (``pick_among``) and never read the pick
heaps, the shape-indexed descent sorts a jobs-only queue's fitting jobs by key instead of
reading its heap (below), and a descent reads the heaps on its path only (at 10,000 jobs
a renewal of every re-keyed node before each descent, ``_flush_picks`` until issue 24's
round 9, renewed about 52 entries a descent).

Shape-indexed descents (issue 24, item 1; ``machinery.descent.ShapeIndex``, as in the
H-DRF sorter): each node keeps, as a bit mask, the shapes of the next tasks of the jobs
below it (the engine files each job's shape number, ``file_shape``), and within a
``schedule`` call the engine says which shapes may still fit (``only_shapes``,
``exclude_shape``). The descent passes over a child whose mask meets none of them, and
in a queue whose children are all jobs it tries only the jobs of those shapes, by their
pick keys. Why the pick is the same: a job is runnable only if its next task's shape fits
on some node, so a skipped child has no runnable job below it, and the descent would have
passed it anyway after asking; the children it does enter are tried in the same order
(lowest pick key first, the keys being those of the caught-up view, which the heaps'
renewed entries carry), and ``runnable`` still has the last word on the job reached. A FIFO
queue keeps its scan (its earliest runnable job, the shapes only filtering jobs that
cannot run). A queue's hidden history leaf (``machinery/history.py``) is added as a job
but is never filed with a shape (the engine files only its jobs, by name), so no mask
counts it; it never demands, so the descent never enters it either way.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from functools import reduce
from math import copysign
from operator import add

import numpy as np

from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.resources import Vector
from fairshare.policies.machinery import compiled
from fairshare.policies.machinery.descent import TREE_AMONG_COST, TREE_AMONG_MAX, ShapeIndex, TreeExclusion
from fairshare.policies.machinery.history import HISTORY, QueueHistory
from fairshare.policies.machinery.ties import DIGITS
from fairshare.policies.machinery.views import SaturatedView, ViewCache, counters
from fairshare.policies.online import OnlineSorter, Runnable

#: DFF Alg. 1 (``dff.update_fr``): (capacity, root, children, weight, jobs, ancestors) -> FR per node
UpdateFR = Callable[..., dict]
#: DFF Alg. 1's step for one child (``dff.child_fr``): (parent FR, weight, totals, needs) -> FR
ChildFR = Callable[[Sequence[float], float, Sequence[float], Sequence], Vector]
#: DFF Def. 2 (``dff.fairness``): (usage, FR) -> fairness
Fairness = Callable[[Sequence[float], Sequence[float] | None], float]

#: sums of multiples of 2**-16 below 2**36 are exact in a float (53-bit mantissa), so
#: running sums of such weights equal sums from scratch in any order
_EXACT_LIMIT = 2.0 ** 36


def _same_float(a: float, b: float) -> bool:
    """``a`` and ``b`` are the same float, zeros' signs included (a view's replay keeps a
    pool entry holding ``a`` in place of one holding ``b``)."""
    return a == b and (a != 0.0 or copysign(1.0, a) == copysign(1.0, b))


def _defer_pick(deferred: dict[int, dict[int, None]], p: int, c: int) -> None:
    """Mark child ``c`` of ``p`` for a new pick entry when a descent next reads ``p``'s
    heap (``_View.deferred``)."""
    later = deferred.get(p)
    if later is None:
        deferred[p] = {c: None}
    else:
        later[c] = None


def fold_on(start: float, column: array, done: int) -> bytes:
    """The running sums of ``column[done:]`` (doubles) continued from ``start``, as the
    doubles' bytes: ``start + column[done]``, that ``+ column[done + 1]``, and so on, each
    one IEEE addition in that order, what ``itertools.accumulate(column[done:], add,
    initial=start)`` gives after ``start`` (NumPy's ``add.accumulate`` adds element after
    element, not pairwise as its sums do; ``tests/test_dff_online_incremental.py`` holds
    the two equal bit for bit). ``_resum``'s fold over a queue's jobs, thousands of rows on
    a saturating arrival stream, without a float object per row."""
    folded = np.empty(len(column) - done + 1)
    folded[0] = start
    folded[1:] = np.frombuffer(column, dtype=np.float64, offset=8 * done)
    return np.add.accumulate(folded)[1:].tobytes()


def _exactly_summable(x: float) -> bool:
    """``x`` is a non-negative multiple of 2**-16 below :data:`_EXACT_LIMIT`."""
    x = float(x)
    return 0.0 <= x < _EXACT_LIMIT and (x * 65536.0).is_integer()


class PoolHeap:
    """A queue's pool in one view (Alg. 2 line 9's lowest schedulable child): a min-heap
    of the entries ``(share, version, child)``, held as three parallel typed arrays
    (``share`` doubles, ``version`` and ``child`` 64-bit ints), so the compiled catch-up
    (``_dff_kernel``) pushes, pops and compares entries in C without a tuple or a boxed
    value per entry. The order is the tuples' (lexicographic; a share is never NaN) and
    the moves are ``heapq``'s (``_siftdown``/``_siftup``, CPython's ``Lib/heapq.py``), so
    the arrays hold the entries a ``heapq`` list of tuples would, in the same layout: an
    array stores the same double and the same int the tuple held."""

    __slots__ = ("share", "version", "child")

    def __init__(self, entries: list[tuple[float, int, int]] = ()):
        """The heap of ``entries``, already in heap order (``heapq.heapify``'s)."""
        self.share = array("d", [e[0] for e in entries])
        self.version = array("q", [e[1] for e in entries])
        self.child = array("q", [e[2] for e in entries])

    def __len__(self) -> int:
        return len(self.share)

    def entry(self, i: int) -> tuple[float, int, int]:
        return self.share[i], self.version[i], self.child[i]

    def entries(self) -> list[tuple[float, int, int]]:
        """The entries in heap order."""
        return list(zip(self.share, self.version, self.child))

    def copy(self) -> PoolHeap:
        pool = PoolHeap.__new__(PoolHeap)
        pool.share, pool.version, pool.child = self.share[:], self.version[:], self.child[:]
        return pool

    def push(self, share: float, version: int, child: int) -> None:
        """``heapq.heappush``."""
        self.share.append(share)
        self.version.append(version)
        self.child.append(child)
        self._sift_down(0, len(self.share) - 1)

    def pop(self) -> None:
        """``heapq.heappop``, the lowest entry dropped."""
        share, version, child = self.share, self.version, self.child
        last = (share.pop(), version.pop(), child.pop())
        if share:
            share[0], version[0], child[0] = last
            self._sift_up(0)

    def _sift_down(self, startpos: int, pos: int) -> None:
        """``heapq._siftdown``: the entry at ``pos`` moved up while lower than its parent."""
        share, version, child = self.share, self.version, self.child
        new = (share[pos], version[pos], child[pos])
        while pos > startpos:
            parentpos = (pos - 1) >> 1
            parent = (share[parentpos], version[parentpos], child[parentpos])
            if new < parent:
                share[pos], version[pos], child[pos] = parent
                pos = parentpos
                continue
            break
        share[pos], version[pos], child[pos] = new

    def _sift_up(self, pos: int) -> None:
        """``heapq._siftup``: the lower child moved up until a leaf, then the entry at
        ``pos`` down into place."""
        share, version, child = self.share, self.version, self.child
        endpos, startpos, new = len(share), pos, (share[pos], version[pos], child[pos])
        childpos = 2 * pos + 1
        while childpos < endpos:
            rightpos = childpos + 1
            if rightpos < endpos and not ((share[childpos], version[childpos], child[childpos])
                                          < (share[rightpos], version[rightpos], child[rightpos])):
                childpos = rightpos
            share[pos], version[pos], child[pos] = share[childpos], version[childpos], child[childpos]
            pos = childpos
            childpos = 2 * pos + 1
        share[pos], version[pos], child[pos] = new
        self._sift_down(startpos, pos)


class _View(SaturatedView):
    """What depends on the saturated set: schedulable counts, override, heaps."""

    def __init__(self, saturated: frozenset[int], n: int, queues: int):
        super().__init__(saturated)
        self.unblocked = counters(n)  # unblocked (schedulable) jobs in the subtree
        self.share = [0.0] * n  # fairness after Alg. 2 line 9
        self.version = counters(n)  # of each node's pool entry
        self.pick_version = [0] * n  # of its pick entry
        #: per queue, its children whose pick entries are out of date (re-keyed by a
        #: catch-up, ``DFFSorter._replay`` and ``_push``, or all its demanding children
        #: after ``_rebuild``), renewed just before a descent reads that queue's heap
        #: (``descend_tree``'s ``deferred``): most decisions on a full cluster compare the
        #: candidates' paths (``pick_among``) and never read the pick heaps, and a descent
        #: reads only the heaps on its way
        self.deferred: dict[int, dict[int, None]] = {}
        #: the saturated set as a bit mask (``_leaf_blocked``)
        self.saturated_mask = sum(1 << r for r in saturated)
        # heaps only for the queues (indices below ``queues``: jobs are never parents), so
        # building a view does not allocate a list per job ever seen
        self.pick_heap: list[list] = [[] for _ in range(queues)]  # demanding children
        self.pool_heap: list[PoolHeap] = [PoolHeap() for _ in range(queues)]  # schedulable children, by fairness
        #: a copy of another set's view whose differences wait in ``pending``
        #: (``DFFSorter._new_view``), until the view cache's first build call
        self.derived = False
        #: the compiled catch-up's hold on this view's tables (``_dff_kernel.replay``)
        self.kernel = None

    def derive(self, saturated: frozenset[int]) -> _View:
        """A copy of this view for the set ``saturated`` (``DFFSorter._new_view``): every
        table, heap and pending node copied (the pick heaps' tuples are shared: they are
        never changed in place), marked ``derived`` until the sorter's build callback sees it."""
        view = _View.__new__(_View)
        SaturatedView.__init__(view, saturated)
        view.pending = dict(self.pending)
        view.unblocked = self.unblocked[:]
        view.share = self.share[:]
        view.version = self.version[:]
        view.pick_version = self.pick_version[:]
        view.deferred = {q: dict(nodes) for q, nodes in self.deferred.items()}
        view.saturated_mask = sum(1 << r for r in saturated)
        view.pick_heap = [heap[:] for heap in self.pick_heap]
        view.pool_heap = [pool.copy() for pool in self.pool_heap]
        view.derived = True
        view.kernel = None  # (its tables are the copies)
        return view

    def grow(self) -> None:
        """A job node was appended to the sorter's table."""
        self.unblocked.append(0)
        self.share.append(0.0)
        self.version.append(0)
        self.pick_version.append(0)


class DFFSorter(QueueHistory, ShapeIndex, TreeExclusion, OnlineSorter):
    # when the candidate list is used instead of the descent (machinery/descent.py)
    among_max = TREE_AMONG_MAX
    among_cost = TREE_AMONG_COST

    def __init__(self, resources: int, queues: QueueTree, capacity: Vector, *, update_fr: UpdateFR,
                 child_fr: ChildFR, fairness: Fairness):
        super().__init__(resources, queues, capacity)
        # the policy's formulas (``dff.update_fr``, ``dff.child_fr``, ``dff.fairness``),
        # shared with the static allocation and the reference sorter's rule
        self.compute_fr = update_fr
        self.child_fr = child_fr
        self.raw_fairness = fairness
        # node table; queues first (pre-order, so a parent precedes its children and
        # siblings keep file order), jobs appended as they arrive. Sorting siblings by
        # index therefore gives the reference's child order.
        self.key: list[str] = []
        self.alive: list[bool] = []
        # the alive nodes in index order (parents before children; jobs are appended as
        # they arrive), so rebuilds cost O(present nodes), not O(every job ever seen)
        self.alive_nodes: dict[int, None] = {}
        self.parent: list[int] = []
        self.weight: list[float] = []
        self.is_job: list[bool] = []
        self.position: list[int] = []
        self.fifo: list[bool] = []
        self.job_kids: list[list[int]] = []  # jobs of each queue, by arrival (fifo scan)
        self.index: dict[str, int] = {}
        self.kids: list[int] = []  # children ever added (positions; heap compaction bound)
        self.depth: list[int] = []  # the root is at 0 (batched replays go deepest first)
        self.max_depth = 0
        self.needs: list[int] = []  # a job's resources with demand > 0, as a bit mask
        self.usage: list[list[float]] = []
        self.fr: list[Vector | None] = []
        self.raw: list[float] = []
        self.running: list[int] = []
        self.live: list[int] = []  # demanding jobs in the subtree
        # Alg. 1's inputs, kept as counts so an arrival or departure updates them along its
        # path: present jobs in the subtree (a node has an FR iff > 0), per resource the
        # present jobs below needing it, and per queue the weight of its present children
        # needing it (Alg. 1's denominator)
        self.present: list[int] = []
        self.need_count: list[list[int]] = []
        self.total: list[list[float]] = []
        self.queue_kids: list[list[int]] = []  # sub-queues of each queue (FR's top-down pass)
        self.used: list[list[int]] = []  # each queue's jobs with non-zero usage, in index order
        # each queue's jobs with non-zero usage that are demanding: the only jobs whose
        # fairness a decision reads and an FR change can change (``_catch_up``)
        self.used_demanding: list[dict[int, None]] = []
        # each job's Fair Resource as ``_job_fr`` last computed it, while no FR, total or
        # count it reads has changed since (emptied wherever one changes): a task starting or
        # finishing re-reads its job's FR, which an allocation does not change
        self._job_frs: dict[int, Vector] = {}
        # True while every weight seen is exactly summable, so the totals kept by adding and
        # subtracting equal ``update_fr``'s sums in any order: arrivals and departures are
        # then incremental (module docstring). Once False, they rebuild from scratch.
        self.exact = True
        # queues whose usage is a running sum (a task started or finished below them) since
        # it was last summed from scratch: an arrival or departure re-sums just these
        self.drifted: dict[int, None] = {}
        # arrivals and departures since the last decision, as (job, top): like a rebuild,
        # their update waits for the next decision (``_catch_up``), and so do the leaves
        # that change meanwhile (``stale_leaves``)
        self.stale = False
        self.pending: list[tuple[int, int]] = []
        self.stale_leaves: dict[int, None] = {}
        # views catch up with the compiled _replay where it is built, else with the method
        # below (the reference; the same view: machinery/compiled.py, _dff_kernel.pyx)
        replay = compiled.dff_replay(self) or self._replay
        self._renew_pick_entries = compiled.tree_renew_pick_entries()
        # a task's start or end (``allocated``, ``released`` and their ``_leaf_changed``),
        # compiled (None: the methods below, the reference)
        self._task_changed = compiled.dff_task_changed(self)
        # the candidates' comparison, compiled (``_hdrf_kernel``: the keys have the form it
        # computes from ``tables``) or the reference
        self._pick_among_tree = compiled.tree_pick_among()
        # a jobs-only queue's jobs, and a node's children with a live shape, tried by key in
        # the descent, compiled or the reference
        self._first_runnable = compiled.tree_first_runnable()
        self._first_child = compiled.tree_first_child()
        self._descend_tree = compiled.tree_descend()  # (the descent itself, compiled or the reference)
        # views kept until more than MAX_VIEWS sets are seen (no time to live: a set back
        # after a while replays what changed since, at most a quarter of the nodes, where a
        # dropped view was rebuilt over all of them; at 10,000 jobs 9% of the steady state)
        # (a set first seen starts from a copy of the current view: ``_new_view``)
        self.views: ViewCache[_View] = ViewCache(self._new_view, self._build_view, replay, lambda: len(self.key),
                                                 ttl=None)
        self.dirty = True  # FR (and so every fairness) must be recomputed before deciding
        self._init_excluded()
        self._init_shapes(compiled.tree_shape_bits(), compiled.tree_queues_meeting())
        self._add_node(ROOT, -1, 1.0, False, False)
        for node in queues:
            if node.path != ROOT:
                idx = self._add_node(node.path, self.index[node.parent], node.weight, False, node.order == "fifo")
                self.queue_kids[self.parent[idx]].append(idx)
                self.exact = self.exact and _exactly_summable(node.weight)
        # queues take indices 0 .. queue_count - 1; jobs come after, and are never parents
        self.queue_count = len(self.key)
        # the FIFO queues' jobs by arrival (``job_kids``' own lists, changed in place), what
        # the descent and the candidates' walk ask of each queue on their way (``.get``: None
        # for the root and the fair queues; a dict's lookup, not a method call per candidate)
        self._fifo_jobs = {v: self.job_kids[v] for v in range(1, self.queue_count) if self.fifo[v]}
        # per queue and resource, the partial sums of its usage sum from scratch (``_resum``):
        # entry 0 the sub-queues' sum, entry i + 1 that plus ``used[q][0..i]``; entries
        # past ``used_sums_valid[q]`` are stale (a job's row at that position changed)
        # (doubles, ``array("d")``: ``_resum`` folds them with NumPy's ``add.accumulate``
        # over the buffers, one IEEE addition after another in their order, the same
        # floats as ``itertools.accumulate``'s, without a float object per row)
        self.used_sums: list[list[array]] = [[array("d") for _ in range(self.m)] for _ in range(self.queue_count)]
        self.used_sums_valid: list[int] = [0] * self.queue_count
        # per queue and resource, the usage of the jobs in ``used[q]``, in that order (the
        # rows ``_resum`` folds, kept by column, as doubles: a usage that is an int is the
        # double Python's ``float + int`` would convert it to)
        self.used_columns: list[list[array]] = [[array("d") for _ in range(self.m)] for _ in range(self.queue_count)]
        self._init_history()  # decayed usage (``machinery/history.py``)

    def _add_node(self, key: str, parent: int, weight: float, is_job: bool, fifo: bool = False) -> int:
        idx = len(self.key)
        self.key.append(key)
        self.alive.append(True)
        self.alive_nodes[len(self.alive) - 1] = None
        self.parent.append(parent)
        self.weight.append(weight)
        self.is_job.append(is_job)
        self.fifo.append(fifo)
        self.job_kids.append([])
        pos = 0
        if parent >= 0:
            pos = self.kids[parent]
            self.kids[parent] += 1
            if is_job:
                self.job_kids[parent].append(idx)
        self.position.append(pos)
        self.depth.append(self.depth[parent] + 1 if parent >= 0 else 0)
        self.max_depth = max(self.max_depth, self.depth[-1])
        self.index[key] = idx
        self.kids.append(0)
        self.needs.append(0)
        self.usage.append([0.0] * self.m)
        self.fr.append(None)
        self.raw.append(0.0)
        self.running.append(0)
        self.live.append(0)
        self.present.append(0)
        self.need_count.append([0] * self.m)
        self.total.append([] if is_job else [0.0] * self.m)
        self.queue_kids.append([])
        self.used.append([])
        self.used_demanding.append({})
        for view in self.views:
            view.grow()
        self._grow_excluded()
        # (a history leaf is added as a job but is never filed with a shape: the engine
        # files only the jobs it runs, by name)
        self._grow_shapes(parent, is_job)
        return idx

    # --- decayed usage (docs/policies.md, "Fairness with memory") ----------------------------
    def _recharge(self) -> None:
        """Time moved: every leaf (jobs and history leaves) has a new effective vector,
        computed in one vectorized pass (``QueueHistory._effective_leaves``); the changed ones
        are restated (:meth:`_restate`), so the next decision sums their queues once and
        re-keys the views in one batch (in practice a rebuild of the view in use)."""
        self.views.tick()
        usage = self.usage
        for idx, vector in zip(*self._effective_leaves()):
            if vector != usage[idx]:
                self._restate(idx, vector)

    def _restate(self, idx: int, vector: list[float]) -> None:
        """Leaf ``idx`` holds ``vector`` with no task starting or ending (time moved, or a
        finished job's history joined a history leaf): as a leaf changed between an
        arrival and the next decision (``_leaf_changed``), its queues are summed from
        scratch and a job's fairness recomputed at the next decision (``_catch_up``). A
        history leaf has no Fair Resource (fairness 0, never demanding): only its queues'
        sums change."""
        self.usage[idx] = vector
        is_job = self.key[idx] in self.jobs
        # (a history leaf is filed too: its queue's sum from scratch folds it in index order
        # among the jobs, as the rebuild's does; it is never live, so never re-evaluated)
        self._file_usage(idx)
        if self.dirty:  # (every sum and fairness is rebuilt before the next decision)
            return
        if is_job:
            self.stale_leaves[idx] = None
        self.stale = True
        parent, drifted = self.parent, self.drifted
        p = parent[idx]
        while p >= 0 and p not in drifted:  # (a drifted queue's ancestors are drifted too)
            drifted[p] = None
            p = parent[p]

    def _set_history(self, idx: int, vector: list[float]) -> None:
        if vector != self.usage[idx]:
            self._restate(idx, vector)

    # --- events -------------------------------------------------------------------------------
    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, demand)
        if self.decay is not None:
            self.decay.enrol(name, self._half_life(queue))
        idx = self._add_node(name, self.index[queue], weight, True, False)
        self.needs[idx] = sum(1 << r for r, d in enumerate(self.jobs[name].demand) if d > 0)
        self._walk_counts(idx, d_live=1)
        if self.exact and not _exactly_summable(weight):  # (its demand only gives its needs)
            self.exact = False
        if not self.exact:
            self._invalidate()  # Alg. 3 line 10: UpdateFR when a job is submitted...
            return
        self._defer(idx, self._count_presence(idx, 1))

    def remove_job(self, name):
        if self.decay is not None:
            self._retire(name)
        idx = self.index.pop(name)
        self._unfile_shape(idx)
        self._walk_counts(idx, d_live=-self.live[idx], d_running=-self.running[idx])
        top = self._count_presence(idx, -1) if self.exact else 0
        super().remove_job(name)
        self.alive[idx] = False  # tombstone: never reused; its heap entries go stale
        del self.alive_nodes[idx]
        self.job_kids[self.parent[idx]].remove(idx)
        self._file_usage(idx, leaving=True)
        if not self.exact:
            self._invalidate()  # ... or finishes (its usage leaves the sums at the rebuild)
            return
        self._defer(idx, top)

    def set_capacity(self, capacity):
        if tuple(capacity) != self.capacity:
            super().set_capacity(capacity)
            self._invalidate()  # FR_root = R

    def allocated(self, name, demand, now=0.0):
        if self._task_changed is not None:  # (this method and ``_leaf_changed``, compiled)
            self._task_changed(name, demand, 1, now)
            return
        job = self.jobs[name]
        before = list(job.usage)
        super().allocated(name, demand, now)
        self._leaf_changed(self.index[name], before, d_running=1, now=now)

    def released(self, name, demand, now=0.0):
        if self._task_changed is not None:
            self._task_changed(name, demand, -1, now)
            return
        job = self.jobs[name]
        before = list(job.usage)
        super().released(name, demand, now)
        self._leaf_changed(self.index[name], before, d_running=-1, now=now)

    def set_demanding(self, name, demanding):
        job = self.jobs[name]
        if job.demanding == demanding:
            return
        job.demanding = demanding
        idx = self.index[name]
        self._walk_counts(idx, d_live=1 if demanding else -1)
        self._file_demanding(idx)
        self.views.tick()
        if self.stale:
            self.stale_leaves[idx] = None
        elif not self.dirty:
            if demanding and self.exact:
                # its fairness was not kept while it was not demanding (``_catch_up``)
                self.raw[idx] = self.raw_fairness(self.usage[idx], self._job_fr(idx))
            self._touch(idx)

    def set_saturated(self, resources):
        super().set_saturated(frozenset(resources))
        if not self.dirty and not self.stale:
            self.views.select(self.saturated)

    # --- shared state ---------------------------------------------------------------------------
    def _invalidate(self) -> None:
        self.dirty = True
        self._job_frs.clear()
        self.stale = False
        self.pending.clear()
        self.stale_leaves.clear()
        self.views.clear()

    def _defer(self, idx: int, top: int) -> None:
        """Job ``idx`` arrived or left (counts and totals updated; FR changes below
        ``top``): Alg. 3 lines 10-11's UpdateFR, done at the next decision as the rebuild
        it replaces was, so the usage sums are from scratch at the same moment."""
        if not self.dirty:
            self.stale = True
            self.pending.append((idx, top))

    def _decide_ready(self) -> None:
        if self.dirty:
            self._refresh()
        elif self.stale:
            self._catch_up()
        current = self.views.current
        if current.pending:  # the events since it was last used (``_touch``)
            self.views.catch_up(current)

    def _walk_counts(self, idx: int, *, d_live: int = 0, d_running: int = 0) -> None:
        v = idx
        while v >= 0:
            self.live[v] += d_live
            self.running[v] += d_running
            v = self.parent[v]

    def _add_usage(self, idx: int, delta: list[float]) -> None:
        """Add ``delta`` to the ancestors' summed usage and refresh their raw fairness."""
        parent, usage, raw, fr, fairness = self.parent, self.usage, self.raw, self.fr, self.raw_fairness
        drifted = self.drifted
        p = parent[idx]
        while p >= 0:
            drifted[p] = None
            u = usage[p]
            for r, d in enumerate(delta):
                if d:
                    u[r] += d
            raw[p] = fairness(u, fr[p])
            p = parent[p]

    def _leaf_changed(self, idx: int, before: list[float], d_running: int, now: float = 0.0) -> None:
        after = self.jobs[self.key[idx]].usage
        if self.decay is not None:  # the leaf holds its effective vector, charged now
            after = self._charged(self.key[idx], now)
            before = self.usage[idx]  # (after _charged: time moving may have re-charged it)
        self.usage[idx] = list(after)
        self._file_usage(idx)
        self._walk_counts(idx, d_running=d_running)
        self.views.tick()
        if self.dirty:  # shares are rebuilt from scratch before the next decision
            return
        if self.stale:  # as if dirty: its queues are summed from scratch at the catch-up
            self.stale_leaves[idx] = None
            p = self.parent[idx]
            while p >= 0:
                self.drifted[p] = None
                p = self.parent[p]
            return
        self.raw[idx] = self.raw_fairness(self.usage[idx], self._job_fr(idx))
        self._add_usage(idx, [a - b for a, b in zip(after, before)])
        self._touch(idx)

    def _file_usage(self, idx: int, *, leaving: bool = False) -> None:
        """Job ``idx``'s usage changed, or it leaves: file it under its queue's ``used``
        and ``used_demanding``, or take it out, and mark the queue's partial sums
        (``used_sums``) stale from its row on."""
        q = self.parent[idx]
        row = self.usage[idx]
        has = not leaving and any(row)
        used = self.used[q]
        pos = bisect_left(used, idx)
        listed = pos < len(used) and used[pos] == idx
        if has and not listed:
            used.insert(pos, idx)
            for column, x in zip(self.used_columns[q], row):
                column.insert(pos, x)
        elif listed and not has:
            del used[pos]
            for column in self.used_columns[q]:
                del column[pos]
        elif has:
            for column, x in zip(self.used_columns[q], row):
                column[pos] = x
        if (has or listed) and pos < self.used_sums_valid[q]:
            self.used_sums_valid[q] = pos
        self._file_demanding(idx, has)

    def _file_demanding(self, idx: int, has_usage: bool | None = None) -> None:
        """Job ``idx``'s usage or demanding flag changed: in ``used_demanding`` or not."""
        if has_usage is None:
            has_usage = any(self.usage[idx])
        if has_usage and self.live[idx] > 0:
            self.used_demanding[self.parent[idx]][idx] = None
        else:
            self.used_demanding[self.parent[idx]].pop(idx, None)

    def _resum(self, q: int) -> list[float]:
        """Queue ``q``'s usage summed from scratch in the rebuild's order (sub-queues, then
        jobs by index; a job without usage adds +0.0 to a sum that is never -0.0, so it is
        left out), resuming each resource's running fold where its kept partial sums end:
        every entry kept is the fold of the same rows in the same order, so the same float."""
        usage, sums, valid = self.usage, self.used_sums[q], self.used_sums_valid[q]
        for partial in sums:
            del partial[valid + 1:]
        kids = self.queue_kids[q]
        start = [reduce(add, column, 0.0) for column in zip(*[usage[c] for c in kids])] if kids else [0.0] * self.m
        if any(not partial or partial[0] != x for partial, x in zip(sums, start)):
            for partial, x in zip(sums, start):  # the sub-queues' sum changed: from the first job
                partial[:] = array("d", [x])
        done = len(sums[0]) - 1  # the jobs already folded
        if done < len(self.used[q]):
            for partial, column in zip(sums, self.used_columns[q]):
                partial.frombytes(fold_on(partial[-1], column, done))
        self.used_sums_valid[q] = len(self.used[q])
        return [partial[-1] for partial in sums]

    def _job_fr(self, idx: int) -> Vector | None:
        """A job's Fair Resource. Kept exact, it is computed from its queue's FR and totals
        (an arrival changes every sibling's FR: only the ones whose fairness depends on it
        are recomputed, ``_catch_up``); otherwise the last rebuild's."""
        if not self.exact:
            return self.fr[idx]
        fr = self._job_frs.get(idx)
        if fr is None:  # (the same call with the same arguments as when it was kept otherwise)
            p = self.parent[idx]
            fr = self._job_frs[idx] = self.child_fr(self.fr[p], self.weight[idx], self.total[p],
                                                    self.need_count[idx])
        return fr

    def _job_fr_cache(self) -> Callable[[int], Vector | None]:
        """:meth:`_job_fr` for a pass over many jobs while no FR or total changes: a job's
        FR is ``child_fr`` of its queue's FR and totals, its weight and its needs, so the
        jobs of one queue with the same weight and needs share one (the same call with
        the same arguments, so the same floats)."""
        if not self.exact:
            return self._job_fr
        parent, weight, needs, known = self.parent, self.weight, self.needs, {}

        def job_fr(idx: int) -> Vector | None:
            group = (parent[idx], weight[idx], needs[idx])
            fr = known.get(group)
            if fr is None:
                fr = known[group] = self._job_fr(idx)
            return fr

        return job_fr

    def _count_presence(self, idx: int, sign: int) -> int:
        """Job ``idx`` arrives (``sign`` 1) or leaves (-1): update the present and needing
        counts along its path and the totals (Alg. 1's denominators) that change. Returns
        the highest node whose total changed, or whose child appeared or vanished: only
        the FRs below it change (the root when nothing did, a no-op pass)."""
        m, parent, present, need_count, total = self.m, self.parent, self.present, self.need_count, self.total
        self._job_frs.clear()  # (counts and totals change below)
        flags = [d > 0 for d in self.jobs[self.key[idx]].demand]
        top = 0
        c = idx
        while c >= 0:
            counts = need_count[c]
            was_present = present[c] > 0
            was = [was_present and counts[r] > 0 for r in range(m)]
            present[c] += sign
            for r in range(m):
                if flags[r]:
                    counts[r] += sign
            p = parent[c]
            if p < 0:
                break
            now_present = present[c] > 0
            changed = was_present != now_present
            w = self.weight[c]
            for r in range(m):
                now = now_present and counts[r] > 0
                if now != was[r]:
                    total[p][r] += w if now else -w
                    changed = True
                    if not total[p][r] < _EXACT_LIMIT:
                        self.exact = False
            if changed:
                top = p
            c = p
        if not self.exact:
            self._invalidate()
        return top

    def _catch_up(self) -> None:
        """The arrivals and departures since the last decision (counts and totals updated),
        brought to what a rebuild from scratch (:meth:`_refresh`) would give, touching only
        what can differ from it: Alg. 1's FR top-down below each one's ``top`` (the same
        formula, and the totals being exact, the same floats as :func:`dff.update_fr`);
        the usage of the queues whose running sums drifted, or that gained or lost a job
        with usage, summed from scratch in the rebuild's order (``_resum``); the raw
        fairness of those queues, of the jobs whose usage changed meanwhile and of every
        demanding job with usage below a queue whose FR or total changed (a job without
        usage has fairness 0 whatever its FR; one that does not demand is read by no
        decision: module docstring); then the views re-keyed from the nodes whose fairness
        changed. Why this is exact: the module docstring and docs/performance.md ("DFF at
        trace speed", "DFF Fair Resource catch-up")."""
        parent, fr, raw, usage, fairness = self.parent, self.fr, self.raw, self.usage, self.raw_fairness
        rekey: dict[int, None] = {}  # queues whose jobs' FRs may have changed
        queues: dict[int, None] = {}  # queues whose raw fairness may have changed

        def depth(v: int) -> int:
            d = 0
            while v > 0:
                v, d = parent[v], d + 1
            return d

        # highest top first, so a parent's FR is final before its children's are computed
        for idx, top in sorted(self.pending, key=lambda pending: depth(pending[1])):
            on_path = set()  # the path from the job's queue up to top: their totals may have changed
            v = parent[idx]
            while v >= 0:
                on_path.add(v)
                if v == top:
                    break
                v = parent[v]
            if any(usage[idx]):  # its queues' sums lose or gain it: re-summed below
                v = parent[idx]
                while v >= 0:
                    self.drifted[v] = None
                    v = parent[v]
            rekey.update(dict.fromkeys(on_path))
            stack = [top]
            while stack:
                p = stack.pop()
                pf, tot = fr[p], self.total[p]
                for c in self.queue_kids[p]:
                    f = self.child_fr(pf, self.weight[c], tot, self.need_count[c]) \
                        if self.present[c] > 0 and pf is not None else None
                    if f != fr[c]:
                        fr[c] = f
                        rekey[c] = None
                        queues[c] = None
                        stack.append(c)
                    elif c in on_path:
                        stack.append(c)
        # the rebuild's sums (``_resum``), children before parents (a sub-queue's index is
        # above its parent's)
        for q in sorted(self.drifted, reverse=True):
            usage[q] = self._resum(q)
            queues[q] = None
        self.drifted.clear()
        self._job_frs.clear()  # (FRs changed above)
        job_fr = self._job_fr_cache()
        touched = [idx for idx, _ in self.pending]
        for j in self.stale_leaves:
            touched.append(j)
            if self.alive[j]:
                raw[j] = fairness(usage[j], job_fr(j))
        self.pending.clear()
        self.stale_leaves.clear()
        self.stale = False
        for q in queues:
            share = fairness(usage[q], fr[q])
            if share != raw[q]:
                raw[q] = share
                if q:
                    touched.append(q)
        for q in rekey:
            for j in self.used_demanding[q]:
                share = fairness(usage[j], job_fr(j))
                if share != raw[j]:
                    raw[j] = share
                    touched.append(j)
        self.views.tick()
        if len(touched) * 4 > len(self.alive_nodes):
            self.views.clear()  # cheaper from scratch
            self.views.select(self.saturated)
            return
        self.views.select(self.saturated)  # (set_saturated waited too)
        for v in touched:
            self._touch(v)

    def _children(self) -> list[list[int]]:
        """The present children of each queue (only queues have children: O(present nodes),
        not O(every job ever seen))."""
        children: list[list[int]] = [[] for _ in range(self.queue_count)]
        for c in self.alive_nodes:
            if c:
                children[self.parent[c]].append(c)
        return children

    def _refresh(self) -> None:
        """FR changed: Alg. 1 over the present jobs, then every node's usage sum and raw
        fairness from scratch, in the reference's order; O(nodes x resources)."""
        m, n = self.m, len(self.key)
        children = self._children()
        parent, jobs, key = self.parent, self.jobs, self.key

        def ancestors(v: int):
            p = parent[v]
            while p >= 0:
                yield p
                p = parent[p]

        present = list(self.alive_nodes)  # parents precede children in index order
        # (a history leaf is no job: it needs nothing and takes no Fair Resource)
        fr = self.compute_fr(self.capacity, 0, children, self.weight,
                             ((v, jobs[key[v]].demand) for v in present if self.is_job[v] and key[v] in jobs),
                             ancestors)
        self.fr = [None] * n
        self._job_frs.clear()
        for v, f in fr.items():
            self.fr[v] = f
        fairness = self.raw_fairness
        for v in reversed(present):  # children have larger indices than their parent
            if self.is_job[v]:
                if self.decay is None:  # (with decay the leaf holds its effective vector already)
                    self.usage[v] = list(self.jobs[self.key[v]].usage)
            else:
                total = [0.0] * m
                for c in children[v]:
                    uc = self.usage[c]
                    for r in range(m):
                        total[r] += uc[r]
                self.usage[v] = total
            self.raw[v] = fairness(self.usage[v], self.fr[v])
        self.dirty = False
        self.drifted.clear()
        self.views.clear()
        self.views.select(self.saturated)

    # --- views ----------------------------------------------------------------------------------
    def _touch(self, idx: int) -> None:
        """Node ``idx`` changed: every view records it, the current one included, and each
        catches up in one batch (:meth:`_replay`) before it is next used (``_decide_ready``,
        ``views.ViewCache``): on a full cluster the saturated set changes before most
        decisions, so an event applied to the current view at once would be applied
        alone, while in a batch its ancestors are shared with the other nodes'. Views
        hold no running sums (usage and raw fairness are shared), so the replay is exact."""
        for view in self.views.views:
            view.pending[idx] = None

    def _replay(self, view: _View, nodes) -> None:
        """Bring ``view`` up to date after ``nodes`` changed (jobs whose usage, demand or
        blocking changed, and queues whose raw fairness changed), each ancestor re-keyed
        once: first every job's blocked flag and share, its schedulable count along its
        path and its entry in its queue's pool; then, deepest level first, each changed
        queue's fairness (Alg. 2 line 9, from its children's final entries) and its entry
        in its parent's pool. What a view holds is a function of the shared state (no
        running sums), so this gives what one walk per node would.

        Every node re-keyed is marked for a new pick entry in its parent's ``deferred``
        (``_defer_pick``), renewed when a descent reads that heap.

        A node whose pool entry would not change (schedulable before and after, the same
        share to the bit; or unschedulable before and after) is not pushed again, only
        marked for a new pick entry (its running count may have changed): its current pool
        entry, ``(share, version, node)``, stays valid (a push leaves one for every
        schedulable child, and only invalid entries are ever popped or compacted away), and
        a pool is read only for its lowest valid entry's share (``_pool_min``), the same
        float either way; an unschedulable node has no valid entry either way. Only heap
        layouts and versions differ, which no decision reads. A single node takes the same
        path (a third of the catch-ups on a full cluster: one event between two reads of
        the set): walking it up alone re-pushed every ancestor whether or not its entry
        changed, growing the pools with entries to pop and compact later."""
        parent, depth, is_job, unblocked, share = self.parent, self.depth, self.is_job, view.unblocked, view.share
        deferred = view.deferred
        levels: list[dict[int, None]] = [{} for _ in range(self.max_depth + 1)]
        counted: dict[int, int] = {}  # the queues' schedulable counts before this batch moved them
        for idx in nodes:
            if not is_job[idx]:
                if idx:
                    levels[depth[idx]][idx] = None
                else:
                    share[0] = self.raw[0]  # (the root has no override, no parent)
                continue
            now = 0 if self._leaf_blocked(view, idx) else 1
            delta = now - unblocked[idx]
            unblocked[idx] = now
            before = share[idx]
            share[idx] = self.raw[idx]
            p = parent[idx]
            if delta:
                a = p
                while a >= 0:
                    if a not in counted:
                        counted[a] = unblocked[a]
                    unblocked[a] += delta
                    a = parent[a]
                self._push(view, p, idx)
            elif now and not _same_float(before, share[idx]):
                self._push(view, p, idx)
            else:
                _defer_pick(deferred, p, idx)  # (its pool entry stands)
            levels[depth[p]][p] = None
        for d in range(self.max_depth, 0, -1):
            for q in levels[d]:
                before = share[q]
                share[q] = self._fairness(view, q)
                p = parent[q]
                was = counted.get(q, unblocked[q]) > 0
                if was != (unblocked[q] > 0) or (was and not _same_float(before, share[q])):
                    self._push(view, p, q)
                else:
                    _defer_pick(deferred, p, q)  # (its pool entry stands)
                levels[d - 1][p] = None

    def _leaf_blocked(self, view: _View, idx: int) -> bool:
        if not self.live[idx]:
            return True
        return bool(self.needs[idx] & view.saturated_mask)  # needs a saturated resource

    def _pool_min(self, view: _View, p: int) -> float | None:
        pool = view.pool_heap[p]
        while pool:
            share, ver, c = pool.entry(0)
            if ver == view.version[c] and view.unblocked[c] > 0 and self.alive[c]:
                return share
            pool.pop()
        return None

    def _fairness(self, view: _View, p: int) -> float:
        raw = self.raw[p]
        if p in self._history:  # (only with decayed usage)
            return self._fairness_with_history(view, p)
        if raw > 1.0:  # Alg. 2 line 9 (strict, as the pseudo-code)
            low = self._pool_min(view, p)
            if low is not None and low < raw:
                return low
        return raw

    def _fairness_with_history(self, view: _View, p: int) -> float:
        """Alg. 2 line 9 for a queue with a history leaf (docs/policies.md, "Fairness with
        memory"): the override is about what the queue's children hold *now* beyond their
        Fair Resource, so it is tested on the queue's usage without its history, and the
        history, the queue's own past, is added to the child's fairness that replaces
        it: ``min(raw, low + fairness(H, FR))``. Without history this is the override."""
        raw, fr, history = self.raw[p], self.fr[p], self.usage[self._history[p]]
        now = [u - h for u, h in zip(self.usage[p], history)]
        if self.raw_fairness(now, fr) > 1.0:
            low = self._pool_min(view, p)
            if low is not None:
                low += self.raw_fairness(history, fr)
                if low < raw:
                    return low
        return raw

    def _push(self, view: _View, p: int, c: int) -> None:
        """Re-key child ``c`` of ``p``: its pool entry now (the override reads the pool's
        minimum on the way up), its pick entry when a descent next reads p's heap
        (``deferred``)."""
        ver = view.version[c] + 1
        view.version[c] = ver
        if view.unblocked[c] > 0:
            view.pool_heap[p].push(view.share[c], ver, c)
        _defer_pick(view.deferred, p, c)
        if len(view.pool_heap[p]) > 4 * self.kids[p] + 16:
            self._compact_pool(view, p)

    def _compact_pool(self, view: _View, p: int) -> None:
        """Drop the stale entries of ``p``'s pool heap (grown past ``4 x children + 16``:
        stale for good, a re-keyed child has a new version), so heaps stay O(children)."""
        heap = [e for e in view.pool_heap[p].entries()
                if e[1] == view.version[e[2]] and view.unblocked[e[2]] > 0 and self.alive[e[2]]]
        heapq.heapify(heap)
        view.pool_heap[p] = PoolHeap(heap)

    def _renew_deferred(self, view: _View, nodes: dict[int, None]) -> None:
        """Renew the pick entries of ``nodes``, children of one queue marked since its heap
        was last read (``_View.deferred``), just before a descent reads it
        (``machinery.descent.renew_pick_entries``, or its compiled port; a removed job is
        not ``present``: no entry). Why the descent's pops are those of a renewal of every
        re-keyed node before each descent (``_flush_picks`` until issue 24's round 9): a
        pick key (``round(share, DIGITS)``, running count, position) and a node's demand
        change only with a task event, an arrival or departure, a demand or a saturated
        set change, each of which puts the node in the views' ``pending`` (or rebuilds
        them), and a descent reads the current view caught up (``pick``), whose catch-up
        re-keys every pending node and each of its ancestors and marks it here again. So
        the entries pushed when a heap is read carry the keys the eager renewal before
        this descent would have read, and the entries left behind carry an old version,
        stale, dropped when met, as before (``renew_pick_entries``' ``lazy``)."""
        self._renew_pick_entries(nodes, view.pick_heap, version=view.pick_version, share=view.share,
                                 running=self.running, position=self.position, live=self.live, present=self.alive,
                                 parent=self.parent, kids=self.kids)

    def _new_view(self, saturated: frozenset[int]) -> _View:
        """The view of a set with none kept: a copy of the current view (``_View.derive``)
        whose pending nodes are the current view's plus the demanding jobs blocked under
        one set and not under the other, or an empty view (rebuilt) when there is no
        current one. Why it is the view a rebuild would give: a view depends on its set only
        through its jobs' blocked flags (``_leaf_blocked``: demanding and needing a
        saturated resource), and every other entry is a function of the shared state and
        of those flags (the schedulable counts their sums, a queue's override the lowest
        schedulable child's fairness). The copy is the current view as it stands, with the
        nodes changed since it was caught up in ``pending``; the jobs whose flag differs
        are changed nodes as well, as one whose demand started or stopped is. So the copy,
        caught up (``_replay``: each listed job's flag, count and entry recomputed, each
        ancestor re-keyed deepest first), is what a view of this set kept since the current
        one was last caught up would be, which the view cache already holds to equal a
        rebuild (its batch threshold: more than a quarter of the nodes changed rebuilds it
        then). Heap layouts may differ, but a decision reads only each heap's lowest
        current entry. On a full cluster each of the up to 2^m sets appears once: a rebuild
        walked every node, at 10,000 jobs 15% of a 2,000-completion steady state."""
        source = self.views.current
        if source is None:
            return _View(saturated, len(self.key), self.queue_count)
        view = source.derive(saturated)
        was, now = source.saturated_mask, view.saturated_mask
        if was != now:
            is_job, live, needs, pending = self.is_job, self.live, self.needs, view.pending
            for v in self.alive_nodes:
                if is_job[v] and live[v] and (not needs[v] & was) != (not needs[v] & now):
                    pending[v] = None
        return view

    def _build_view(self, view: _View) -> None:
        """The view cache's build call: a copied view (``_new_view``) is left for its
        catch-up, any other rebuilt."""
        if view.derived:
            view.derived = False
            return
        self._rebuild(view)

    def _rebuild(self, view: _View) -> None:
        """A view from scratch, bottom-up: O(nodes x resources)."""
        view.pending.clear()
        view.deferred.clear()  # (every queue's pick heap is emptied, its demanding children marked below)
        children = self._children()
        for v in reversed(list(self.alive_nodes)):
            if self.is_job[v]:
                view.unblocked[v] = 0 if self._leaf_blocked(view, v) else 1
                view.share[v] = self.raw[v]
                continue
            view.unblocked[v] = sum(view.unblocked[c] for c in children[v])
            pool = []
            later = {}
            for c in children[v]:
                view.version[c] += 1
                view.pick_version[c] += 1
                if view.unblocked[c] > 0:
                    pool.append((view.share[c], view.version[c], c))
                if self.live[c] > 0:
                    later[c] = None
            if later:
                view.deferred[v] = later
            heapq.heapify(pool)
            # the pick entries are made when a descent reads this heap (``_renew_deferred``):
            # most decisions compare candidates' paths without reading it
            view.pool_heap[v], view.pick_heap[v] = PoolHeap(pool), []
            if v:
                view.share[v] = self._fairness(view, v)

    # --- decisions ------------------------------------------------------------------------------
    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        if self.decay is not None:
            self._advance(now)
        self._decide_ready()
        view = self.views.current
        share, running, position = view.share, self.running, self.position
        return self._descend_tree(0, view.pick_heap, is_job=self.is_job, key=self.key, live=self.live,
                                  fifo_jobs=self._fifo_jobs.get, version=view.pick_version, present=self.alive,
                                  runnable=runnable, excluded=self._excluded_counts(), shapes=self,
                                  node_key=lambda v: (round(share[v], DIGITS), running[v], position[v]),
                                  deferred=view.deferred, renew=lambda nodes: self._renew_deferred(view, nodes),
                                  first_runnable=self._first_runnable, first_child=self._first_child,
                                  tables=(share, running, position))

    def pick_among(self, names, runnable: Runnable, now: float = 0.0) -> str | None:
        if self.decay is not None:
            self._advance(now)
        if self.dirty or self.stale:
            self._decide_ready()  # (the shared state is brought up to date at every decision)
        # the current view is caught up only if a key is read: one candidate, or one below
        # each node on the candidates' paths, needs none (``ViewCache.select``)
        view, catch_up = self.views.current, self.views.catch_up
        share, running, position = view.share, self.running, self.position

        def ready() -> None:
            if view.pending:
                catch_up(view)

        def node_key(v: int) -> tuple:  # as in the pick heaps (_push)
            if view.pending:
                catch_up(view)
            return (round(share[v], DIGITS), running[v], position[v])

        # (``tables``: what node_key reads, for the compiled walk; the catch-up updates
        # ``view.share`` in place, as the H-DRF sorter's does)
        return self._pick_among_tree(names, index=self.index, parent=self.parent, live=self.live,
                                     node_key=node_key, fifo_jobs=self._fifo_jobs.get, runnable=runnable,
                                     tables=(share, running, position, ready))

    def shares(self) -> dict[str, float]:
        self._decide_ready()
        view = self.views.current
        shares = {self.key[v]: view.share[v] for v in self.alive_nodes if v and not self.key[v].startswith(HISTORY)}
        # the jobs whose fairness is not kept while they are not demanding (``_catch_up``)
        job_fr = self._job_fr_cache()
        for q in range(self.queue_count):
            for j in self.used[q]:
                if not self.live[j] and not self.key[j].startswith(HISTORY):
                    shares[self.key[j]] = self.raw_fairness(self.usage[j], job_fr(j))
        return shares
