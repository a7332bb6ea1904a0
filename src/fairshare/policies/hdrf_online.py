"""Incremental dynamic H-DRF: the online sorter for ``hdrf``, ``hdrf-naive`` and ``capacity``.

Bhattacharya et al., SoCC 2013, Sec. 3.4, Alg. 2-4, computed incrementally instead of
"recompute the rescaled dominant shares" (Alg. 2's ``UpdateS(n_r)``) for every decision,
which the paper itself lists as future work (Sec. 7: "H-DRF's allocation vector update
step may require recomputing the dominant shares of every other node in the
hierarchy"). Decisions are identical to
:class:`~fairshare.policies.machinery.reference.ReferenceSorter` (tests hold them equal
on random workloads; both compare shares by the one tie rule of ``machinery/ties.py``,
so float noise cannot flip a tie).

Alg. 3 for an internal node v: with P the children that are demanding (and, with
``ignore_blocked``, not blocked) and M the smallest (weighted) share in P, v's usage is

    U_v = sum_{c in P} U_c * M / s_c  +  sum_{c not in P} U_c  =  M * S1_v + S2_v

so each node keeps ``S1_v = sum_{c in P} U_c / s_c`` and ``S2_v`` as running sums, and M in
a lazy min-heap. When a task starts or finishes, only the nodes on the job's path change:
each updates its parent's sums by the difference of its old and new contribution and is
re-keyed in its parent's heap (the Mesos sorter's "walk up the tree"), O(depth x (m +
log fanout)). Running sums drift by float rounding, so a node's sums are rebuilt from its
children every ``REBUILD_EVERY`` updates.

Saturated resources. Alg. 3 counts only the non-saturated resources Y and treats jobs
needing a saturated one as blocked, so a change of the saturated set changes every share.
On a full cluster that set flips on almost every event (a finishing task frees some of a
resource, the next launch uses it up again: Alg. 2's "Y = nonzero resources in W"). So
the sorter keeps one complete incremental *view* per recently seen saturated set
(``machinery/views.py``'s ``ViewCache``, shared with the DFF sorter) and decides with the
view of the current set. Events are applied at once to the current view only; the others
record which leaves changed and replay them in one batch when their set comes back, each
changed ancestor recomputed once (a rebuild if more than a quarter of the nodes changed). Flipping between
sets costs the leaves that changed meanwhile and their ancestors, and only a set not
seen recently pays the O(nodes x m) rebuild.

Why the views are per set, and what a returning view costs. Under Alg. 3 a node's usage
is its pool rescaled to the pool's lowest share, where the pool (children with an
unblocked demanding job below) and every share (dominant share over the non-saturated
resources) depend on Y; so each queue's usage under Y is a function of every leaf below
it *under that Y*, and no per-node quantity computed for one set gives another's. A
view that comes back therefore replays each leaf changed meanwhile and each of their
ancestors once (``_propagate``'s batch: on the 1,000-job benchmark about 16 leaves and
27 queues per catch-up, docs/performance.md "The saturated steady state").

Decayed usage (``set_half_life``, docs/policies.md "Fairness with memory"): each leaf
holds its effective vector (allocation plus decayed average past allocation,
``machinery/decay.py``) instead of its allocation, and everything above is Alg. 3 as
is; a finished job's history moves to a hidden, never demanding leaf of its queue. Time
moving changes every effective vector, so the leaves are re-charged once per new instant
(``_advance``: one vectorized pass over the ledger's rows) and their ancestors recomputed
in one batch (in practice a rebuild of the view in use: every leaf changed).

Jobs come and go (a streamed trace: every job that ever arrived, at most the live ones
at a time). A removed job's slot becomes a tombstone, and once the tombstones added since
the last compaction outnumber the live slots the node table and every view drop them,
renumbering the other nodes in their order (``_compact``: a renaming, the same decisions
and floats); a queue's heaps drop their stale entries past four times its children in the
table (``kids``), not every child it ever had. So the tables, views and heaps stay
proportional to the jobs in the system, not to those that ever arrived.

The descent (Alg. 4) takes, at each node, the lowest child by the tie rule (share,
running tasks in the subtree, position) that has a runnable job below it. A re-keyed
node's pick entry is renewed only when a descent is about to read its parent's heap
(``_View.deferred``, filled by ``_repost`` and ``_rebuild``; exact,
``descent.renew_pick_entries``' ``lazy``): on a full cluster most decisions compare the
candidates' paths of keys, computed from the shares directly, and never read the heaps,
the shape-indexed descent sorts a jobs-only queue's fitting jobs instead of reading its
heap, and a descent reads the heaps on its path only (at 10,000 jobs a flush of every
re-keyed node before each descent renewed 49 entries a decision, 14 of them queues', for
about 4 read); once a queue's marks are as many as its children they stand for all of them
(``views.EveryChild``: a jobs-only queue's heap is seldom read, and its marks grew to every
job it has). In a
queue with ``order: fifo`` only its earliest runnable job competes with its sub-queues
(a scan of that queue's jobs, as the reference does). Children whose demanding jobs the
scheduler has all excluded in this call are passed over (``TreeExclusion``), and so are
children with no job whose next task's shape may fit in this call (``ShapeIndex``: per
node, the shapes of the jobs below; exact, see its docstring), and
``pick_among`` gives the descent's answer among a few candidates by comparing their
paths of keys (``machinery.descent.pick_among_tree``).
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Sequence

from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.resources import Vector
from fairshare.policies.machinery import compiled
from fairshare.policies.machinery.descent import TREE_AMONG_COST, TREE_AMONG_MAX, ShapeIndex, TreeExclusion
from fairshare.policies.machinery.history import HISTORY, QueueHistory
from fairshare.policies.machinery.ties import DIGITS
from fairshare.policies.machinery.views import EveryChild, SaturatedView, ViewCache, counters, every_child
from fairshare.policies.online import OnlineSorter, Runnable

REBUILD_EVERY = 4096
#: the fewest tombstones (removed jobs' slots) a compaction of the node table drops (``_compact``)
COMPACT_MIN = 1024
#: the fewest children of a queue whose deferred pick entries, once as many marks as it has
#: children, stand for all its children (``views.EveryChild``): such marks renew no more
#: entries than the marks would, but below this a queue's list of children made at the
#: renewal costs about what the marks saved (the benchmark's queues of queues have four)
EVERY_CHILD_MIN = 8
#: a node's share from its usage (``hdrf.hdrf_share``): (usage, capacity, counted, weight)
NodeShare = Callable[[Sequence[float], Vector, Sequence[int], float], float]


def zero_sums(m: int) -> array:
    """A queue's running sum (S1 or S2, Alg. 3) at zero: ``m`` C doubles. Python's float
    arithmetic on an item is the same IEEE double operation as on a list's float, and the
    compiled core (``_hdrf_kernel``) adds into the doubles in place, without a float
    object per resource and update."""
    return array("d", bytes(8 * m))


def doubles(n: int) -> array:
    """``n`` C doubles at zero: a view's per-node floats (``share``, ``low``) and its per-node
    vectors laid end to end (``usage``, ``contrib_vec``: node i's at ``[i*m, (i+1)*m)``).
    An item read is a Python float of the same double, an item written is stored as the
    double the float holds, so the reference computes what it computed on lists and tuples
    (the same IEEE operations in the same order), and the compiled core reads and writes
    the same doubles through the buffer, without a float object or a tuple per node."""
    return array("d", bytes(8 * n))


def flags(n: int) -> array:
    """``n`` false flags as C bytes (a view's ``contrib_in`` and ``low_set``)."""
    return array("b", bytes(n))


#: a queue's pool heap (Alg. 3's pool minimum M, lazily): its entries ``(share, version,
#: child)`` as typed arrays, the shares in one (``keys``, C doubles) and each entry's
#: version and child in the other (``ids``, two C integers an entry), in ``heapq``'s layout
PoolHeap = tuple[array, array]


def pool_heap(entries: Sequence[tuple[float, int, int]] = ()) -> PoolHeap:
    """A pool heap holding ``entries`` in their order (a list ``heapq`` keeps as a heap
    is the same heap here: ``pool_push``/``pool_pop`` are ``heapq``'s sifts)."""
    ids = array("q")
    for _share, version, child in entries:
        ids.append(version)
        ids.append(child)
    return array("d", [e[0] for e in entries]), ids


def pool_entries(heap: PoolHeap | None) -> list[tuple[float, int, int]]:
    """A pool heap's entries, ``(share, version, child)`` in its layout (none for None)."""
    if heap is None:
        return []
    keys, ids = heap
    return [(keys[i], ids[2 * i], ids[2 * i + 1]) for i in range(len(keys))]


def pool_push(heap: PoolHeap, share: float, version: int, child: int) -> None:
    """``heapq.heappush(entries, (share, version, child))`` on the typed arrays: its
    ``_siftdown``, entries compared as the tuples are (share by ``<``/``==`` on the
    doubles, no share is a NaN; then version, then child), so the same layout. The
    compiled core sifts the same arrays the same way (``_hdrf_kernel.typed_push``)."""
    keys, ids = heap
    keys.append(share)
    ids.append(version)
    ids.append(child)
    _pool_sift_down(keys, ids, 0, len(keys) - 1)


def pool_pop(heap: PoolHeap) -> None:
    """``heapq.heappop`` on the typed arrays, the lowest entry dropped: the last moved to
    the top and sifted as ``heapq._siftup`` does."""
    keys, ids = heap
    last = (keys.pop(), ids[-2], ids[-1])
    del ids[-2:]
    if keys:
        keys[0], ids[0], ids[1] = last
        _pool_sift_up(keys, ids, 0)


def _pool_sift_down(keys: array, ids: array, start: int, pos: int) -> None:
    """``heapq._siftdown``: the entry at ``pos`` moved up past the greater parents."""
    new = (keys[pos], ids[2 * pos], ids[2 * pos + 1])
    while pos > start:
        up = (pos - 1) >> 1
        parent = (keys[up], ids[2 * up], ids[2 * up + 1])
        if new < parent:
            keys[pos], ids[2 * pos], ids[2 * pos + 1] = parent
            pos = up
            continue
        break
    keys[pos], ids[2 * pos], ids[2 * pos + 1] = new


def _pool_sift_up(keys: array, ids: array, pos: int) -> None:
    """``heapq._siftup``: the entry at ``pos`` down to a leaf by the smaller child, then up."""
    end, start = len(keys), pos
    new = (keys[pos], ids[2 * pos], ids[2 * pos + 1])
    child = 2 * pos + 1
    while child < end:
        right = child + 1
        if right < end and not (keys[child], ids[2 * child], ids[2 * child + 1]) < \
                (keys[right], ids[2 * right], ids[2 * right + 1]):
            child = right
        keys[pos], ids[2 * pos], ids[2 * pos + 1] = keys[child], ids[2 * child], ids[2 * child + 1]
        pos = child
        child = 2 * pos + 1
    keys[pos], ids[2 * pos], ids[2 * pos + 1] = new
    _pool_sift_down(keys, ids, start, pos)


class _View(SaturatedView):
    """Everything that depends on the saturated set: shares, pools, sums, heaps.

    The per-node state the catch-up writes is in typed arrays (``doubles``, ``flags``,
    ``counters``) shared by the reference and the compiled core: a node's usage and its
    contribution to its parent's sums are rows of m doubles in one flat array, the pool
    minimum its usage was computed with a double and a flag (``low_set``: the reference's
    None when 0)."""

    def __init__(self, saturated: frozenset[int], n: int, m: int):
        super().__init__(saturated)
        self.m = m
        self.counted: list[int] = []
        self.usage = doubles(n * m)  # node v's vector at [v*m, (v+1)*m)
        self.share = doubles(n)
        # the pool minimum M each usage was computed with (``low_set`` false: none, no pool)
        self.low = doubles(n)
        self.low_set = flags(n)
        self.unblocked = counters(n)
        # a queue's running sums and heaps (Alg. 3; the descent's), set by the rebuild that
        # follows every new view (``ViewCache.select``); a job has none (None), so a new view
        # allocates O(queues) lists, not O(nodes) (on 10,000 jobs, a third of its build)
        self.s1: list[array | None] = [None] * n  # (``zero_sums``)
        self.s2: list[array | None] = [None] * n
        # each node's contribution to its parent's sums: whether in the pool (into S1), and
        # the vector it added (U_v / s_v into S1, else U_v into S2), node v's at [v*m, (v+1)*m)
        self.contrib_in = flags(n)
        self.contrib_vec = doubles(n * m)
        self.version = [0] * n  # of each node's pick entries (share, running, demand)
        self.pool_version = counters(n)  # of its pool entries (share, pool membership)
        self.pick_heap: list[list | None] = [None] * n
        self.pool_heap: list[PoolHeap | None] = [None] * n  # (``pool_heap``)
        self.updates = counters(n)
        #: per queue, its children whose pick entries are out of date (re-keyed by
        #: ``_repost``, or all its demanding children after ``_rebuild``), renewed just
        #: before a descent reads that queue's heap (``descend_tree``'s ``deferred``): most
        #: decisions on a full cluster compare the candidates' paths (``pick_among``) and
        #: never read the pick heaps, and a descent reads only the heaps on its way
        #: A queue's marks stand for every child (``views.EveryChild``) once a queue of at
        #: least ``EVERY_CHILD_MIN`` children has as many marks as children: a jobs-only
        #: queue's heap is seldom read (the shape-indexed descent sorts its fitting jobs
        #: instead), and at 10,000 jobs adding each re-keyed job to a mark set of a hundred
        #: and more cost a third of a catch-up
        self.deferred: dict[int, dict[int, None]] = {}
        #: the saturated set as a bit mask (a leaf needing one of them is blocked)
        self.saturated_mask = sum(1 << r for r in saturated)

    def grow(self, m: int) -> None:
        """A node added while the view exists: a job (the queues are all added before the
        first view is made), so no sums and no heaps."""
        self.usage.extend(doubles(m))
        self.share.append(0.0)
        self.low.append(0.0)
        self.low_set.append(0)
        self.unblocked.append(0)
        self.s1.append(None)
        self.s2.append(None)
        self.contrib_in.append(0)
        self.contrib_vec.extend(doubles(m))
        self.version.append(0)
        self.pool_version.append(0)
        self.pick_heap.append(None)
        self.pool_heap.append(None)
        self.updates.append(0)


class HDRFSorter(QueueHistory, ShapeIndex, TreeExclusion, OnlineSorter):
    # when the candidate list is used instead of the descent (machinery/descent.py)
    among_max = TREE_AMONG_MAX
    among_cost = TREE_AMONG_COST

    def __init__(self, resources: int, queues: QueueTree, capacity: Vector, *, share: NodeShare,
                 rescale: bool = True, ignore_blocked: bool = True, stop_when_saturated: bool = False):
        super().__init__(resources, queues, capacity)
        # the policy's share (``hdrf.hdrf_share``), shared with the reference sorter's rule
        self.node_share = share
        self.rescale = rescale
        self.ignore_blocked = ignore_blocked
        #: a queue's deferred marks stand for every child from this many children (``views.EveryChild``)
        self.every_child_min = EVERY_CHILD_MIN
        self.stop_when_saturated = stop_when_saturated
        # Alg. 3's pool rule (its set A) as a number, for _repost and _rebuild: 0 no pool (no
        # rescaling), 1 children with an unblocked demanding job below, 2 with a demanding one
        self._pool_rule = 0 if not rescale else 1 if ignore_blocked else 2
        # node table (shared by all views); queues first, jobs appended as they arrive
        self.key: list[str] = []
        self.parent: list[int] = []
        self.weight: list[float] = []
        self.is_job: list[bool] = []
        self.position: list[int] = []  # among siblings: queues in file order, then jobs by arrival
        self.index: dict[str, int] = {}
        # a leaf's usage vector: a tuple, replaced and never mutated (tuples of floats are
        # not traced by the garbage collector); each view copies it into its usage row
        # when it catches up (``_View.usage``)
        self.leaf_usage: list[tuple[float, ...]] = []
        self.running: list[int] = []
        self.live: list[int] = []  # demanding leaves below (1 for a demanding leaf)
        # per node, its children in the table (not removed): what bounds its heaps'
        # stale entries (``4 x kids + 16``, ``_repost`` and ``renew_pick_entries``); and
        # the children ever added, the next child's position among its siblings
        self.kids: list[int] = []
        self.added: list[int] = []
        # each node's children that are not tombstones, in index order (the order every
        # sum over them takes): the periodic exact re-sum (_resum) and a view's rebuild
        # read them instead of scanning every node ever added (on a streamed trace, every
        # job that ever arrived: the re-sums alone made the cost per event grow with them)
        self.children: list[dict[int, None]] = []
        self.depth: list[int] = []  # the root is at 0
        self.needs: list[int] = []  # a job's resources with demand > 0, as a bit mask
        self._init_excluded()
        self._init_shapes(compiled.tree_shape_bits(), compiled.tree_queues_meeting())
        self.max_depth = 0
        self._zero = (0.0,) * resources
        # Without ignore_blocked the saturated set changes nothing: one view serves all.
        # Views catch up with the compiled _propagate and _rebuild where it is built, else
        # with the methods below (the reference; the same floats: machinery/compiled.py)
        replay = compiled.hdrf_replay(self, REBUILD_EVERY) or self._propagate
        self._rebuild_view = compiled.hdrf_rebuild(self, REBUILD_EVERY) or self._rebuild
        # the candidates' comparison and the pick-heap renewal, compiled or the reference
        self._pick_among_tree = compiled.tree_pick_among()
        self._renew_pick_entries = compiled.tree_renew_pick_entries()
        # a jobs-only queue's jobs, and a node's children with a live shape, tried by key in
        # the descent, compiled or the reference
        self._first_runnable = compiled.tree_first_runnable()
        self._first_child = compiled.tree_first_child()
        self._descend_tree = compiled.tree_descend()  # (the descent itself, compiled or the reference)
        # removed jobs' slots (tombstones) still in the table, and the slots compactions
        # dropped (``_compact``): the views' batch threshold counts every slot ever added
        self.tombstones = 0
        self.dropped = 0
        self._kept_tombstones = 0  # the tombstones the last compaction had to keep
        self.views: ViewCache[_View] = ViewCache(lambda saturated: _View(saturated, len(self.key), self.m),
                                                 self._rebuild_view, replay, lambda: len(self.key) + self.dropped)
        self._add_node(ROOT, -1, 1.0, False)
        for node in queues:
            if node.path != ROOT:
                self._add_node(node.path, self.index[node.parent], node.weight, False)
        # FIFO queues (not the root, as in the reference): their jobs by arrival, for the scan
        self.fifo_jobs: dict[int, list[int]] = {self.index[node.path]: [] for node in queues
                                                if node.path != ROOT and node.order == "fifo"}
        #: the queues (the first nodes, never removed), deepest first: each after its
        #: sub-queues, the order a view's rebuild computes them in (``_rebuild``)
        self.queues_bottom_up = sorted(range(len(self.key)), key=lambda v: -self.depth[v])
        self.views.select(frozenset())
        self._init_history()  # decayed usage (``machinery/history.py``)

    # --- decayed usage (docs/policies.md, "Fairness with memory"; ``machinery/history.py``) ----
    def _recharge(self) -> None:
        """Time moved: every leaf (jobs and history leaves) has a new effective vector,
        computed in one vectorized pass, and the changed leaves' ancestors are recomputed
        once per view (``_propagate``'s batch, or the view's rebuild): one event for the
        views' ages (``ViewCache.tick``). Alg. 3 runs unchanged on these vectors (module
        docstring)."""
        self.views.tick()
        leaves, effective = self._effective_leaves()
        leaf_usage = self.leaf_usage
        changed: dict[int, None] = {}
        for idx, usage in zip(leaves, map(tuple, effective)):
            if usage != leaf_usage[idx]:
                leaf_usage[idx] = usage
                changed[idx] = None
        for view in self.views.views:  # (``_touch`` of each, at once)
            view.pending.update(changed)

    def _set_history(self, idx: int, vector: list[float]) -> None:
        usage = tuple(vector)
        if usage != self.leaf_usage[idx]:
            self.leaf_usage[idx] = usage
            self._touch(idx)

    @property
    def view(self) -> _View:
        """The current view, caught up with the events recorded since it was last used."""
        current = self.views.current
        if current.pending:
            self.views.catch_up(current)
        return current

    # --- node table -----------------------------------------------------------------------
    def _add_node(self, key: str, parent: int, weight: float, is_job: bool) -> int:
        idx = len(self.key)
        self.key.append(key)
        self.parent.append(parent)
        self.weight.append(weight)
        self.is_job.append(is_job)
        pos = 0
        if parent >= 0:
            pos = self.added[parent]
            self.added[parent] += 1
            self.kids[parent] += 1
        self.position.append(pos)
        self.depth.append(0 if parent < 0 else self.depth[parent] + 1)
        self._grow_excluded()
        self._grow_shapes(parent, is_job)
        self.max_depth = max(self.max_depth, self.depth[idx])
        self.index[key] = idx
        self.leaf_usage.append(self._zero)
        self.running.append(0)
        self.live.append(0)
        self.kids.append(0)
        self.added.append(0)
        self.children.append({})
        if parent >= 0:
            self.children[parent][idx] = None
        self.needs.append(0)
        for view in self.views:
            view.grow(self.m)
        return idx

    # --- events -------------------------------------------------------------------------------
    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, demand)
        if self.decay is not None:
            self.decay.enrol(name, self._half_life(queue))
        idx = self._add_node(name, self.index[queue], weight, True)
        self.needs[idx] = sum(1 << r for r, d in enumerate(self.jobs[name].demand) if d > 0)
        if self.parent[idx] in self.fifo_jobs:
            self.fifo_jobs[self.parent[idx]].append(idx)
        self.live[idx] = 1
        self._commit(idx, d_live=1)
        self._touch(idx)

    def remove_job(self, name):
        if self.decay is not None:
            self._retire(name)
        idx = self.index.pop(name)
        self._unfile_shape(idx)
        if self.parent[idx] in self.fifo_jobs:
            self.fifo_jobs[self.parent[idx]].remove(idx)
        d_live = -self.live[idx]
        run = self.running[idx]
        self.live[idx] = 0
        self.running[idx] = 0
        self.leaf_usage[idx] = self._zero
        super().remove_job(name)
        self._commit(idx, d_live=d_live, d_running=-run)
        self.key[idx] = ""  # tombstone: its heap entries go stale, ``_compact`` drops the slot
        del self.children[self.parent[idx]][idx]
        # (a smaller bound on its parent's heaps: the heaps drop stale entries sooner,
        # which changes no pick, ``renew_pick_entries``; on a streamed trace a bound by
        # the children ever added let a queue's heaps grow with every job it ever had)
        self.kids[self.parent[idx]] -= 1
        self._touch(idx)
        self.tombstones += 1
        if self.tombstones - self._kept_tombstones > max(COMPACT_MIN, len(self.key) - self.tombstones):
            self._compact()

    def _compact(self) -> None:
        """Drop the tombstones (removed jobs' slots) from the node table and from every
        view, renumbering the other nodes in their order: on a streamed trace the table
        otherwise holds every job that ever arrived, and with it each view's per-node
        lists, the heaps' stale entries and a new view's O(slots) allocation (the full
        Google 2011 replay under hdrf: peak memory and the cost per event growing with
        the trace time). Called when the tombstones added since the last compaction
        outnumber the live slots (and ``COMPACT_MIN``): O(slots) once per as many
        removals, amortized O(1) per removal.

        Why the decisions and the floats are the same: it is a renaming. The queues come
        first in the table and are never removed, so they keep their indices (every
        ``parent``, every running sum S1/S2 and its update count stay where they are);
        the jobs that stay keep their relative order (``new < new'`` iff ``old < old'``),
        so every sum taken in index order (``children``, a rebuild's, a re-sum's) adds
        the same vectors in the same order, every dict keeps its insertion order
        (``pending``, ``deferred``: a batch's replay order), and a heap entry
        compares with another as before (the node index is an entry's last field, so a
        monotone renaming keeps every comparison; entries of dropped slots are stale,
        dropped as a read would drop them, and the heaps re-heapified: only the lowest
        current entries are ever read). A position among siblings (the tie rule's last
        field) and a queue's child counts (``kids``, the heaps' size bound, and ``added``)
        are not indices and do not change. A tombstone still pending in some view (its
        contribution not yet taken out of that view's sums, ``_resum``) or counted in
        this call's exclusions is kept, a tombstone still, for a later compaction. The
        views' batch-or-rebuild threshold counts the dropped slots too (``dropped``), so
        a catch-up rebuilds exactly when it did before. Lists are changed in place: the
        compiled core keeps references to them (``_hdrf_kernel.batch_of``)."""
        key, is_job = self.key, self.is_job
        pinned: set[int] = set(self._excluded_jobs)
        pinned.update(self._to_exclude)
        for view in self.views.views:
            pinned.update(view.pending)
        keep = [v for v in range(len(key)) if key[v] or not is_job[v] or v in pinned]
        dead = len(key) - len(keep)
        if not dead:
            self._kept_tombstones = self.tombstones
            return
        new_of = dict(zip(keep, range(len(keep))))

        def squeeze(table: list | array) -> None:  # (an array takes an array: ``counters``)
            kept = [table[v] for v in keep]
            table[:] = array(table.typecode, kept) if isinstance(table, array) else kept

        for table in (key, self.parent, self.weight, is_job, self.position, self.leaf_usage, self.running,
                      self.live, self.kids, self.added, self.children, self.depth, self.needs, self.excluded,
                      self.shape_mask, self._shape_count):
            squeeze(table)
        queues = [v for v in range(len(key)) if not is_job[v]]
        assert all(new_of[q] == q for q in queues), "queues come first in the node table"
        for q in queues:
            self.children[q] = {new_of[c]: None for c in self.children[q]}
        for name, v in self.index.items():
            self.index[name] = new_of[v]
        for jobs in self.fifo_jobs.values():
            jobs[:] = [new_of[c] for c in jobs]
        for q, v in self._history.items():
            self._history[q] = new_of[v]
        for jobs in (self._excluded_jobs, self._to_exclude):
            jobs[:] = [new_of[c] for c in jobs]
        filed = list(self._job_shape.items())
        self._job_shape.clear()
        self._job_shape.update((new_of[v], shape) for v, shape in filed)
        for per_shape in self._shape_jobs_under.values():
            for jobs in per_shape.values():
                here = list(jobs)
                jobs.clear()
                jobs.update((new_of[c], None) for c in here)
        def squeeze_rows(table: array, m: int) -> None:  # (node v's row: [v*m, (v+1)*m))
            kept = array(table.typecode)
            for v in keep:
                kept.extend(table[v * m:(v + 1) * m])
            table[:] = kept

        for view in self.views.views:
            for table in (view.share, view.low, view.low_set, view.unblocked, view.s1, view.s2, view.contrib_in,
                          view.version, view.pool_version, view.pick_heap, view.pool_heap, view.updates):
                squeeze(table)
            for table in (view.usage, view.contrib_vec):
                squeeze_rows(table, self.m)
            for marks in (view.pending, *view.deferred.values()):
                here = list(marks)
                marks.clear()
                marks.update((new_of[c], None) for c in here if c in new_of)
            for q in queues:
                heap = view.pick_heap[q]
                if heap:
                    heap[:] = [(*e[:4], new_of[e[4]]) for e in heap if e[4] in new_of]
                    heapq.heapify(heap)
                heap = view.pool_heap[q]
                if heap is not None:
                    entries = [(e[0], e[1], new_of[e[2]]) for e in pool_entries(heap) if e[2] in new_of]
                    heapq.heapify(entries)
                    view.pool_heap[q] = pool_heap(entries)
        self.dropped += dead
        self.tombstones -= dead
        self._kept_tombstones = self.tombstones

    def allocated(self, name, demand, now=0.0):
        super().allocated(name, demand, now)
        idx = self.index[name]
        usage = self.jobs[name].usage  # (with decay: the effective vector, charged now)
        self.leaf_usage[idx] = tuple(usage) if self.decay is None else tuple(self._charged(name, now))
        self.running[idx] += 1
        self._commit(idx, d_running=1)
        self._touch(idx)

    def released(self, name, demand, now=0.0):
        super().released(name, demand, now)
        idx = self.index[name]
        usage = self.jobs[name].usage  # (with decay: the effective vector, charged now)
        self.leaf_usage[idx] = tuple(usage) if self.decay is None else tuple(self._charged(name, now))
        self.running[idx] -= 1
        self._commit(idx, d_running=-1)
        self._touch(idx)

    def set_demanding(self, name, demanding):
        job = self.jobs[name]
        if job.demanding == demanding:
            return
        idx = self.index[name]
        job.demanding = demanding
        self.live[idx] = 1 if demanding else 0
        self._commit(idx, d_live=1 if demanding else -1)
        self._touch(idx)

    def _commit(self, idx: int, *, d_live: int = 0, d_running: int = 0) -> None:
        """Apply the view-independent counters to the ancestors, once, before the views."""
        self.views.tick()
        if not d_live and not d_running:
            return
        p = self.parent[idx]
        while p >= 0:
            self.live[p] += d_live
            self.running[p] += d_running
            p = self.parent[p]

    def set_capacity(self, capacity):
        if tuple(capacity) != self.capacity:
            super().set_capacity(capacity)
            for view in self.views:
                self._rebuild_view(view)

    def _touch(self, idx: int) -> None:
        """Leaf ``idx`` changed: every view records it, the current one included, and each
        catches up in one batch before it is next used (``view``, ``views.ViewCache``).
        On a full cluster the saturated set changes before most decisions, so the current
        view would rarely decide with an event applied alone; in a batch the leaves'
        common ancestors are recomputed once. :meth:`_propagate` re-derives every node
        from its children's current contributions, so one batch gives the state one walk
        per leaf would, up to float sums."""
        for view in self.views.views:
            view.pending[idx] = None

    def set_saturated(self, resources):
        current = self.views.current
        if resources == self.saturated and current.saturated == (resources if self.ignore_blocked
                                                                  else frozenset()):
            current.last_used = self.views.events  # (the common case: no change)
            return
        super().set_saturated(frozenset(resources))
        # only with ignore_blocked do shares depend on it (Alg. 3's Y and blocked leaves)
        self.views.select(self.saturated if self.ignore_blocked else frozenset())

    # --- shares -----------------------------------------------------------------------------------
    def _propagate(self, view: _View, leaves) -> None:
        """Bring ``view`` up to date after the given leaves changed (the shared ``live``
        and ``running`` counters are already committed): each leaf's usage, share and
        blocked flag, then every ancestor's sums, heaps and share, deepest first, each
        ancestor once (:meth:`_repost` and :meth:`_recompute`, as the rebuild uses)."""
        key, parent, depth, m = self.key, self.parent, self.depth, self.m
        usage, share, unblocked = view.usage, view.share, view.unblocked
        leaf_usage, live, needs, weight, node_share = self.leaf_usage, self.live, self.needs, self.weight, self.node_share
        capacity, counted = self.capacity, view.counted
        # _leaf_blocked, inlined: not demanding, or (with ignore_blocked) needs a saturated resource
        blocking = view.saturated_mask if self.ignore_blocked else 0
        batch = len(leaves) != 1
        # per depth: the changed nodes, and whether any child's contribution moved
        levels: list[dict[int, bool]] = [{} for _ in range(self.max_depth + 1)] if batch else []
        for idx in leaves:
            u = leaf_usage[idx]
            usage[idx * m:(idx + 1) * m] = array("d", u)
            now = 0
            if key[idx]:
                share[idx] = node_share(u, capacity, counted, weight[idx])
                now = 1 if live[idx] and not needs[idx] & blocking else 0
            d_unblocked = now - unblocked[idx]
            unblocked[idx] = now
            p = parent[idx]
            if d_unblocked:
                a = p
                while a >= 0:
                    unblocked[a] += d_unblocked
                    a = parent[a]
            if not batch:  # one leaf: its path, bottom up (the root is not recomputed: _repost)
                v, same = idx, False
                while p > 0:
                    same = not self._recompute(view, p, self._repost(view, v, p, same))
                    v, p = p, parent[p]
                if p == 0:
                    self._repost(view, v, 0)
                return
            if p >= 0:
                level = levels[depth[p]]
                level[p] = self._repost(view, idx, p) or level.get(p, False)
        for d in range(self.max_depth, 0, -1):
            for p, moved in levels[d].items():
                same = not self._recompute(view, p, moved)
                a = parent[p]
                if a >= 0:
                    level = levels[d - 1]
                    level[a] = self._repost(view, p, a, same) or level.get(a, False)

    def _repost(self, view: _View, v: int, p: int, same: bool = False) -> bool:
        """Child ``v`` of ``p`` changed: move its contribution in p's running sums, re-key
        it in p's pool heap (a new version; the old entries go stale) and mark its pick
        entry for renewal (``deferred[p]``). Returns whether
        p's sums moved. ``same``: v's usage and share are as at its last repost (only its
        running count changed), so unless its pool membership changed, only its pick
        entry is renewed. Under the root only the pick heap matters: the root's own usage
        and share are never used (it has no parent), so its sums and pool are not kept."""
        # v's pick entry is out of date: renewed when a descent reads p's heap (deferred),
        # since on a full cluster most decisions compare candidates' paths (pick_among) and
        # never read the heaps, and a node re-keyed many times meanwhile is pushed once
        later = view.deferred.get(p)
        if later is None:
            view.deferred[p] = {v: None}
        elif type(later) is dict:  # (else they stand for every child of p: v is marked)
            later[v] = None
            if len(later) >= self.kids[p] >= self.every_child_min:
                view.deferred[p] = every_child(p, later)
        if not p:
            return False
        in_old = view.contrib_in[v] == 1
        # in the pool (the rule, _pool_rule) and the vector it adds: U_v / s_v into S1
        # when in the pool, else U_v into S2 (Alg. 3, module docstring)
        pool_rule = self._pool_rule
        in_new = bool(self.key[v]) and (view.unblocked[v] > 0 if pool_rule == 1 else
                                        pool_rule == 2 and self.live[v] > 0)
        if same and in_new == in_old:
            return False
        m = self.m
        row = slice(v * m, (v + 1) * m)  # (v's vectors in the flat tables, _View)
        vec_old = view.contrib_vec[row]
        if in_new:
            sv = view.share[v]
            vec_new = array("d", [x / sv for x in view.usage[row]]) if sv > 0 else doubles(m)
        else:
            vec_new = view.usage[row]
        # (two arrays of doubles compare item by item by ``==``, as the tuples did: no
        # usage is a NaN, the one double for which identity and ``==`` differ)
        moved = in_new != in_old or vec_new != vec_old
        if moved:
            # (a single-class job in the pool keeps U/s fixed as its tasks come and go,
            # and so, up the tree, do pools without blocked children: nothing to move)
            s_old = view.s1[p] if in_old else view.s2[p]
            s_new = view.s1[p] if in_new else view.s2[p]
            for r in range(m):
                s_old[r] -= vec_old[r]
                s_new[r] += vec_new[r]
            view.contrib_in[v] = in_new
            view.contrib_vec[row] = vec_new
        pool_ver = view.pool_version[v] + 1
        view.pool_version[v] = pool_ver
        if in_new:
            heap = view.pool_heap[p]
            pool_push(heap, view.share[v], pool_ver, v)
            if len(heap[0]) > 4 * self.kids[p] + 16:
                self._compact_pool(view, p)
        updates = view.updates[p] + 1
        view.updates[p] = updates
        if updates % REBUILD_EVERY == 0:
            self._resum(view, p)
            return True
        return moved

    def _renew_deferred(self, view: _View, nodes: dict[int, None]) -> None:
        """Renew the pick entries of ``nodes``, children of one queue marked since its heap
        was last read (``_View.deferred``), just before a descent reads it
        (``machinery.descent.renew_pick_entries``; a removed job is not ``present``: its key
        is the empty tombstone). Why the descent's pops are those of a renewal of every
        re-keyed node before each descent: no key changes without its node being marked
        again (every change of a share, running count or demand reposts the node), so the
        entries pushed here carry the keys an eager renewal would have read; the entries
        of nodes renewed later than they would have been carry an old version, stale, and
        are dropped when met, as before (``renew_pick_entries``' ``lazy``).

        Marks that stand for every child (``views.EveryChild``) renew every child still
        there: the children marked meanwhile are among them, and the others get an entry
        with the key their current one has (not re-keyed since, or they would be marked),
        so the heap's current entries carry the same keys, which are distinct among
        siblings: the same pops. A removed job left out is not ``present``: its entries
        are stale either way."""
        if type(nodes) is EveryChild:
            nodes = dict.fromkeys(self.children[nodes.queue])
        self._renew_pick_entries(nodes, view.pick_heap, version=view.version, share=view.share,
                                 running=self.running, position=self.position, live=self.live, present=self.key,
                                 parent=self.parent, kids=self.kids)

    def _compact_pool(self, view: _View, p: int) -> None:
        version, contrib_in = view.pool_version, view.contrib_in
        entries = [e for e in pool_entries(view.pool_heap[p]) if e[1] == version[e[2]] and contrib_in[e[2]]]
        heapq.heapify(entries)
        view.pool_heap[p] = pool_heap(entries)

    def _recompute(self, view: _View, p: int, sums_moved: bool = True) -> bool:
        """p's usage (Alg. 3: its pool rescaled to the lowest share in it) and share.
        Unchanged, and so not recomputed (returns False), when its sums did not move and
        the pool's minimum is the one it was computed with."""
        heap, version, contrib_in = view.pool_heap[p], view.pool_version, view.contrib_in
        keys, ids = heap
        low = None
        while keys:  # the pool's minimum share: its lowest current entry
            c = ids[1]
            if ids[0] == version[c] and contrib_in[c]:
                low = keys[0]
                break
            pool_pop(heap)
        if not sums_moved and low == (view.low[p] if view.low_set[p] else None):
            return False
        view.low_set[p] = low is not None
        view.low[p] = 0.0 if low is None else low
        if low is None or low <= 0:
            u = view.s2[p]
        else:
            u = array("d", [low * a + b for a, b in zip(view.s1[p], view.s2[p])])
        m = self.m
        view.usage[p * m:(p + 1) * m] = u
        if p:
            cap = self.capacity
            best = 0.0
            for r in view.counted:  # (hdrf.hdrf_share, inlined: the call costs ~5% here)
                x = u[r] / cap[r]
                if x > best:
                    best = x
            view.share[p] = best / self.weight[p]
        return True

    def _resum(self, view: _View, p: int) -> None:
        """Rebuild p's running sums exactly from its children's stored contributions.

        A job removed since ``view`` last caught up is a tombstone, no longer in
        ``children``, whose contribution is still in p's sums: it is taken out when its own
        repost comes in this batch (``_propagate``), maybe after this re-sum, so the re-sum
        counts it too (leaving it out, that repost took it out twice: a negative usage)."""
        s1 = zero_sums(self.m)
        s2 = zero_sums(self.m)
        key, parent = self.key, self.parent
        unposted = [c for c in view.pending if parent[c] == p and not key[c]]
        m = self.m
        for c in (*self.children[p], *unposted):
            vec = view.contrib_vec[c * m:(c + 1) * m]
            target = s1 if view.contrib_in[c] else s2
            for r in range(m):
                target[r] += vec[r]
        view.s1[p], view.s2[p] = s1, s2

    def _rebuild(self, view: _View) -> None:
        """Recompute a view bottom-up: O(nodes x resources). The queues in
        ``queues_bottom_up`` (each after its sub-queues), each queue's jobs as its loop
        meets them: no walk of the whole tree to order the nodes (at 10,000 jobs it was
        half of a rebuild). The same floats as a walk in any bottom-up order: a node's
        values are a function of its children's alone, each sum taken over ``children``
        in its order; every child's pool version still counts up once."""
        view.pending.clear()
        view.deferred.clear()  # (every queue's heap is emptied, its demanding children marked below)
        cap = self.capacity
        view.counted = [r for r in range(self.m) if cap[r] > 0 and r not in view.saturated]
        children = self.children
        # (the leaf rule of _propagate and the pool rule of _repost, inlined as there: with
        # decayed usage every leaf changes at each new instant, and the view in use is rebuilt)
        usage, share, unblocked, contrib_in, contrib_vec = (view.usage, view.share, view.unblocked, view.contrib_in,
                                                            view.contrib_vec)
        pool_version, deferred = view.pool_version, view.deferred
        is_job, key, live, needs, weight, running, position = (self.is_job, self.key, self.live, self.needs,
                                                              self.weight, self.running, self.position)
        leaf_usage, node_share, counted, m = self.leaf_usage, self.node_share, view.counted, self.m
        blocking = view.saturated_mask if self.ignore_blocked else 0
        pool_rule = self._pool_rule
        resources = range(m)
        for v in self.queues_bottom_up:
            s1 = zero_sums(self.m)
            s2 = zero_sums(self.m)
            entries = []
            marked: dict[int, None] = {}
            total = 0
            for c in children[v]:
                if is_job[c]:
                    u = leaf_usage[c]
                    usage[c * m:(c + 1) * m] = array("d", u)
                    share[c] = node_share(u, cap, counted, weight[c])
                    unblocked[c] = 1 if live[c] and not needs[c] & blocking else 0
                total += unblocked[c]
                in_pool = bool(key[c]) and (unblocked[c] > 0 if pool_rule == 1 else pool_rule == 2 and live[c] > 0)
                row = slice(c * m, (c + 1) * m)
                if in_pool:
                    sc = share[c]
                    vec = array("d", [x / sc for x in usage[row]]) if sc > 0 else doubles(m)
                    target = s1
                else:
                    vec = usage[row]
                    target = s2
                contrib_in[c] = in_pool
                contrib_vec[row] = vec
                for r in resources:
                    target[r] += vec[r]
                pool_version[c] += 1
                if in_pool:
                    entries.append((share[c], pool_version[c], c))
                if live[c] > 0:
                    marked[c] = None
            unblocked[v] = total
            if marked:
                deferred[v] = marked
            heapq.heapify(entries)  # (as ``pool_heap``'s arrays: the layout ``heapq`` gives)
            # the pick entries are made when a descent reads this heap (``_renew_deferred``,
            # which gives each a new version): with decay a view may be rebuilt at every
            # instant, and most decisions compare candidates' paths without reading them
            view.s1[v], view.s2[v], view.pool_heap[v], view.pick_heap[v] = s1, s2, pool_heap(entries), []
            self._recompute(view, v)

    # --- decisions ----------------------------------------------------------------------------------
    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        if self.stop_when_saturated and self.saturated:
            return None  # C.S-Current: nothing while any resource is fully used
        if self.decay is not None:
            self._advance(now)
        view = self.view
        share, running, position = view.share, self.running, self.position
        return self._descend_tree(0, view.pick_heap, is_job=self.is_job, key=self.key, live=self.live,
                                  fifo_jobs=self.fifo_jobs.get, version=view.version, present=self.key,
                                  runnable=runnable, excluded=self._excluded_counts(), shapes=self,
                                  node_key=lambda v: (round(share[v], DIGITS), running[v], position[v]),
                                  deferred=view.deferred, renew=lambda nodes: self._renew_deferred(view, nodes),
                                  first_runnable=self._first_runnable, first_child=self._first_child,
                                  tables=(share, running, position))

    def pick_among(self, names, runnable: Runnable, now: float = 0.0) -> str | None:
        if self.stop_when_saturated and self.saturated:
            return None
        if self.decay is not None:
            self._advance(now)
        # the view is caught up only if a key is read: one candidate, or one below each
        # node on the candidates' paths, needs none (``ViewCache.select``)
        view, catch_up = self.views.current, self.views.catch_up
        share, running, position = view.share, self.running, self.position

        def ready() -> None:
            if view.pending:
                catch_up(view)

        def node_key(v: int) -> tuple:  # as in the pick heaps (_repost)
            if view.pending:
                catch_up(view)
            return (round(share[v], DIGITS), running[v], position[v])

        return self._pick_among_tree(names, index=self.index, parent=self.parent, live=self.live,
                                     node_key=node_key, fifo_jobs=self.fifo_jobs.get, runnable=runnable,
                                     tables=(share, running, position, ready))

    def shares(self) -> dict[str, float]:
        view = self.view
        return {self.key[v]: view.share[v] for v in range(1, len(self.key))
                if self.key[v] and not self.key[v].startswith(HISTORY)}
