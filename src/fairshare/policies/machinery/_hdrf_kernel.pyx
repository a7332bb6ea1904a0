# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
"""The compiled H-DRF view maintenance: ``HDRFSorter._propagate``, ``_repost``,
``_recompute``, ``_compact_pool`` and ``_rebuild`` (``policies/hdrf_online.py``), statement for statement;
and the tree sorters' candidate comparison and pick-entry renewal
(``descent.pick_among_tree``, ``renew_pick_entries``).

The pure-Python methods are the reference and the fallback (``machinery/compiled.py``
chooses); this port runs the same operations in the same order on the same data: a
view's per-node state is typed arrays in both (``hdrf_online._View``: shares, pool
minima and their flags, usage and contribution vectors as rows of one flat
``array("d")``, counters as ``array("q")``; a queue's running sums an ``array("d")``
each, its pool heap a pair of arrays, ``hdrf_online.pool_heap``), read and written here
through their buffers, so every float is the one the reference computes: each ``/``,
``*``, ``+`` and ``-`` is one IEEE double operation as in CPython, never reassociated or
fused (setup.py compiles with ``-ffp-contract=off``: a fused multiply-add in
``low * a + b`` would round once where Python rounds twice); the reference's array
``!=`` (item by item by ``==``) is a loop over the doubles, and the pool heaps are sifted
by ``heapq``'s algorithm in both (``typed_push``, ``typed_pop``, ``typed_heapify``; entries
compared as the tuples ``(share, version, child)`` are), so the same layout. What it
saves is the interpreter and the objects: no float, tuple or int object per node
update, no frames for the per-node helpers. A pool heap's compaction is ported too
(``_Batch.compact_pool``: on a full cluster a queue's heap passes its bound every few
dozen reposts); the rare periodic exact re-sum calls back into the sorter's
``_resum``. The pick heaps
stay lists of tuples (``descent``'s readers), sifted here with Python's tuple
comparison (``first_unequal``: the same object or ``==``, then ``<``; floats and ints
compared as C values, anything else by Python; ``heap_push``: ``heapq``'s, so the same
lists).

Three shortcuts, each exact (the same picks; see the functions): ``hdrf.hdrf_share``
computed here rather than called (its operations in its order, ``_Batch.leaf_share``);
``round(share, DIGITS)`` as the nearest integer of ``share * 10**12`` over ``10**12`` where
that is certain (``rounded_share``: else Python's own ``round``); and a pick heap given
many entries at once filled by one ``heapify`` (``renew_pick_entries``: the same set of
current entries, so the same pops).
A batch replay first asks for the cache lines its leaves will touch (``prefetch_leaves``,
``prefetch``: a compiler hint that reads and writes nothing, so it changes no value).
The pick-heap tuples it makes are untracked by the cyclic garbage collector at once
(``atomic``: they hold only numbers, so no cycle can pass through them); that changes
what the collector walks, never a value.

Its parity with the reference is tested decision by decision
(``tests/test_compiled_core.py``).
"""

from heapq import heapify

from cpython cimport array
from cpython.float cimport PyFloat_AS_DOUBLE

import array


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)
    # (the interpreter's own depth check, as a Python call makes it: RecursionError past
    # ``sys.getrecursionlimit()``)
    int Py_EnterRecursiveCall(const char *where) except -1
    void Py_LeaveRecursiveCall()


cdef extern from *:
    """
    /* a hint to start loading the cache line holding p (gcc, clang); elsewhere nothing */
    #if defined(__GNUC__) || defined(__clang__)
    #define FAIRSHARE_PREFETCH(p) __builtin_prefetch((const void *)(p), 1, 3)
    #else
    #define FAIRSHARE_PREFETCH(p) ((void)(p))
    #endif
    """
    void prefetch "FAIRSHARE_PREFETCH"(const void *p) noexcept nogil
    # (a list's item as an address, without a new reference: only prefetched)
    void *list_item_address "PyList_GET_ITEM"(object op, Py_ssize_t i) noexcept
    ctypedef struct PyObject
    # (a list's array of item pointers)
    PyObject **list_items "PySequence_Fast_ITEMS"(object op) noexcept
    int tuple_check "PyTuple_Check"(PyObject *o) noexcept
    Py_ssize_t tuple_size "PyTuple_GET_SIZE"(PyObject *o) noexcept
    PyObject *tuple_item "PyTuple_GET_ITEM"(PyObject *o, Py_ssize_t i) noexcept


#: whether a call of ``among_by_marks`` (below) holds its scratch arrays (``_among``):
#: set and read with the GIL held, no Python code between the test and the set, so one
#: call at a time holds them
cdef bint _among_busy = False


cdef inline tuple atomic(tuple t):
    """``t`` (floats, ints, bools, or tuples made here) taken off the cyclic garbage
    collector's lists. Such a tuple can be in no reference cycle, and CPython itself
    untracks it at the first collection that meets it (``_PyTuple_MaybeUntrack``); doing it
    at once keeps the view's many short-lived tuples (a usage vector, a contribution, a heap
    entry per node update) out of the young generation, which each collection walks, and
    out of the old one, whose growth sets off a full collection (at 10,000 jobs, about a
    million objects walked). Values and identities are unchanged: no decision can differ."""
    PyObject_GC_UnTrack(<void*>t)
    return t

from fairshare.policies.machinery.descent import first_runnable_by_key as reference_jobs_walk
from fairshare.policies.machinery.descent import first_runnable_child as reference_children_walk
from fairshare.policies.machinery.descent import first_runnable_filed as reference_filed_walk
from fairshare.policies.machinery.descent import try_by_paths
from fairshare.policies.machinery.ties import DIGITS
from fairshare.policies.machinery.views import every_child



# --- the catch-up's per-node objects, without the interpreter's generic paths ----------------
# (each gives the value or the order the Python expression it replaces gives)

cdef Py_ssize_t first_unequal(tuple a, tuple b) except -1:
    """Where Python's comparison of two tuples stops: the first index whose items are not
    the same object and not ``==`` (two floats: their doubles' ``==``, what
    ``float.__eq__`` computes; two ints: as C integers, theirs far from the 64-bit bounds;
    anything else: Python's ``!=``), or the shorter length when there is none."""
    cdef Py_ssize_t r, n = min(len(a), len(b))
    for r in range(n):
        x = a[r]
        y = b[r]
        if x is y:
            continue
        if type(x) is float and type(y) is float:
            if PyFloat_AS_DOUBLE(x) != PyFloat_AS_DOUBLE(y):
                return r
        elif type(x) is int and type(y) is int:
            if <long long>x != <long long>y:
                return r
        elif x != y:
            return r
    return n


cdef bint entry_less(tuple a, tuple b) except -1:
    """``a < b`` for two pick-heap entries ``(share, running, position, version, node)``
    as Python compares the tuples: the
    first unequal items decide by ``<`` (floats as C doubles, ints as C integers, anything
    else by Python); equal up to the shorter, the shorter is less."""
    cdef Py_ssize_t k = first_unequal(a, b)
    if k == min(len(a), len(b)):
        return len(a) < len(b)
    x = a[k]
    y = b[k]
    if type(x) is float and type(y) is float:
        return PyFloat_AS_DOUBLE(x) < PyFloat_AS_DOUBLE(y)
    if type(x) is int and type(y) is int:
        return <long long>x < <long long>y
    return x < y


cdef int heap_push(list heap, tuple entry) except -1:
    """``heapq.heappush(heap, entry)`` for pick entries: ``heapq``'s sift
    (``_siftdown``) with the comparisons Python makes (``entry_less``), so the same list."""
    heap.append(entry)
    return heap_siftdown(heap, 0, len(heap) - 1)


cdef int heap_siftdown(list heap, Py_ssize_t start, Py_ssize_t pos) except -1:
    """``heapq._siftdown`` on pick entries: the entry at ``pos`` moved up past the parents
    it is less than (``entry_less``: tuple ``<``), no higher than ``start``."""
    cdef Py_ssize_t up
    entry = heap[pos]
    while pos > start:
        up = (pos - 1) >> 1
        parent = heap[up]
        if entry_less(<tuple>entry, <tuple>parent):
            heap[pos] = parent
            pos = up
            continue
        break
    heap[pos] = entry
    return 0


cdef enum:
    HEAPIFY_OWN_MAX = 2500


cdef int heap_heapify(list heap) except -1:
    """``heapq.heapify(heap)`` for pick entries: heapq's algorithm (``_siftup`` from the
    last parent to the top: the smaller child moved up to a leaf, then the entry sifted
    down) with the comparisons Python makes (``entry_less``), so the same list. (heapq's C
    ``heapify`` takes the same steps below 2,500 entries; above, a cache-friendly order of
    them, so larger lists go to heapq itself.)"""
    cdef Py_ssize_t n = len(heap), i
    if n > HEAPIFY_OWN_MAX:
        heapify(heap)
        return 0
    for i in reversed(range(n // 2)):
        heap_siftup(heap, i, n)
    return 0


cdef int heap_siftup(list heap, Py_ssize_t pos, Py_ssize_t end) except -1:
    """``heapq._siftup`` on pick entries (``entry_less``: tuple ``<``)."""
    cdef Py_ssize_t start = pos, child = 2 * pos + 1, right
    entry = heap[pos]
    while child < end:
        right = child + 1
        if right < end and not entry_less(<tuple>heap[child], <tuple>heap[right]):
            child = right
        heap[pos] = heap[child]
        pos = child
        child = 2 * pos + 1
    heap[pos] = entry
    return heap_siftdown(heap, start, pos)


# --- a queue's pool heap as typed arrays (``hdrf_online.pool_heap``: ``(keys, ids)``) -------

cdef inline bint pool_less(double share_a, long long version_a, long long child_a,
                           double share_b, long long version_b, long long child_b):
    """``(share_a, version_a, child_a) < (share_b, version_b, child_b)`` as Python compares
    the tuples: the first unequal item decides (no share is a NaN)."""
    if share_a != share_b:
        return share_a < share_b
    if version_a != version_b:
        return version_a < version_b
    return child_a < child_b


cdef void pool_sift_down(double *keys, long long *ids, Py_ssize_t start, Py_ssize_t pos) noexcept:
    """``heapq._siftdown`` (``hdrf_online._pool_sift_down``): the entry at ``pos`` moved up
    past the greater parents."""
    cdef double share = keys[pos]
    cdef long long version = ids[2 * pos], child = ids[2 * pos + 1]
    cdef Py_ssize_t up
    while pos > start:
        up = (pos - 1) >> 1
        if pool_less(share, version, child, keys[up], ids[2 * up], ids[2 * up + 1]):
            keys[pos] = keys[up]
            ids[2 * pos] = ids[2 * up]
            ids[2 * pos + 1] = ids[2 * up + 1]
            pos = up
            continue
        break
    keys[pos] = share
    ids[2 * pos] = version
    ids[2 * pos + 1] = child


cdef void pool_sift_up(double *keys, long long *ids, Py_ssize_t end, Py_ssize_t pos) noexcept:
    """``heapq._siftup`` (``hdrf_online._pool_sift_up``): the entry at ``pos`` down to a
    leaf by the smaller child, then up."""
    cdef Py_ssize_t start = pos, child = 2 * pos + 1, right
    cdef double share = keys[pos]
    cdef long long version = ids[2 * pos], node = ids[2 * pos + 1]
    while child < end:
        right = child + 1
        if right < end and not pool_less(keys[child], ids[2 * child], ids[2 * child + 1],
                                         keys[right], ids[2 * right], ids[2 * right + 1]):
            child = right
        keys[pos] = keys[child]
        ids[2 * pos] = ids[2 * child]
        ids[2 * pos + 1] = ids[2 * child + 1]
        pos = child
        child = 2 * pos + 1
    keys[pos] = share
    ids[2 * pos] = version
    ids[2 * pos + 1] = node
    pool_sift_down(keys, ids, start, pos)


cdef int typed_push(tuple heap, double share, long long version, long long child) except -1:
    """``hdrf_online.pool_push``: the entry appended to the arrays, then sifted in C."""
    cdef array.array keys = <array.array>heap[0], ids = <array.array>heap[1]
    cdef Py_ssize_t n = len(keys)
    array.resize_smart(keys, n + 1)
    array.resize_smart(ids, 2 * n + 2)
    keys.data.as_doubles[n] = share
    ids.data.as_longlongs[2 * n] = version
    ids.data.as_longlongs[2 * n + 1] = child
    pool_sift_down(keys.data.as_doubles, ids.data.as_longlongs, 0, n)
    return 0


cdef int typed_pop(tuple heap) except -1:
    """``hdrf_online.pool_pop``: the lowest entry dropped, the last moved to the top and
    sifted."""
    cdef array.array keys = <array.array>heap[0], ids = <array.array>heap[1]
    cdef Py_ssize_t n = len(keys) - 1
    cdef double share = keys.data.as_doubles[n]
    cdef long long version = ids.data.as_longlongs[2 * n], child = ids.data.as_longlongs[2 * n + 1]
    array.resize_smart(keys, n)
    array.resize_smart(ids, 2 * n)
    if n:
        keys.data.as_doubles[0] = share
        ids.data.as_longlongs[0] = version
        ids.data.as_longlongs[1] = child
        pool_sift_up(keys.data.as_doubles, ids.data.as_longlongs, n, 0)
    return 0


cdef int typed_heapify(tuple heap) except -1:
    """``heapq.heapify`` on the arrays (its sifts, from the last parent to the top)."""
    cdef array.array keys = <array.array>heap[0], ids = <array.array>heap[1]
    cdef Py_ssize_t n = len(keys), i
    for i in range(n // 2 - 1, -1, -1):
        pool_sift_up(keys.data.as_doubles, ids.data.as_longlongs, n, i)
    return 0


cdef object _hdrf_share = None
#: a queue's running sums are ``array("d")`` (``hdrf_online.zero_sums``): made by cloning this
cdef array.array _DOUBLES = array.array("d")
cdef array.array _INDICES = array.array("q")


cdef object the_hdrf_share():
    """``hdrf.hdrf_share`` (imported at first use: ``policies.hdrf`` imports the sorter)."""
    global _hdrf_share
    if _hdrf_share is None:
        from fairshare.policies.hdrf import hdrf_share
        _hdrf_share = hdrf_share
    return _hdrf_share


cdef inline double *doubles_in(array.array table):
    return table.data.as_doubles


cdef inline signed char *flags_in(array.array table):
    return table.data.as_schars


cdef inline long long *counters_in(array.array table):
    return table.data.as_longlongs


cdef class _Batch:
    """A view's tables and its sorter's, read once (kept on the view: ``batch_of``).

    The view's per-node state is typed arrays (``hdrf_online._View``: ``doubles``,
    ``flags``, ``counters``), read and written here through their buffers, no Python
    object per value; the buffers are taken afresh at each call (``refresh``): a job added
    grows the arrays and ``_compact`` squeezes them, in place, which may move a buffer."""
    cdef object sorter, view, node_share, capacity, blocking
    cdef bint small_masks
    cdef long long blocking_bits
    cdef list key, parent, depth, leaf_usage, live, needs, weight
    cdef list s1, s2, pool_heap, kids, counted
    cdef dict deferred
    cdef int pool_rule
    cdef Py_ssize_t m, n_counted
    cdef long rebuild_every
    cdef long every_child_min
    # the sorter's node_share is hdrf.hdrf_share, computed here (``leaf_share``)
    cdef bint inline_share
    # the buffers (``refresh``): node v's vectors at [v*m, (v+1)*m)
    cdef double *usage
    cdef double *share
    cdef double *low
    cdef signed char *low_set
    cdef signed char *contrib_in
    cdef double *contrib_vec
    cdef long long *unblocked
    cdef long long *pool_version
    cdef long long *updates
    # the counted resources and the capacity as C values, and one row a new contribution
    # is built in before it is compared with the stored one (``repost``)
    cdef array.array counted_of, cap_of, scratch_of
    cdef object counted_made, capacity_made  # (the lists they were made from)
    cdef long long *counted_r
    cdef double *cap
    cdef double *scratch

    def __init__(self, sorter, view, long rebuild_every):
        self.sorter = sorter
        self.view = view
        self.rebuild_every = rebuild_every
        self.key = sorter.key
        self.parent = sorter.parent
        self.depth = sorter.depth
        self.leaf_usage = sorter.leaf_usage
        self.live = sorter.live
        self.needs = sorter.needs
        self.weight = sorter.weight
        self.kids = sorter.kids
        self.node_share = sorter.node_share
        self.capacity = sorter.capacity
        self.pool_rule = sorter._pool_rule
        self.every_child_min = sorter.every_child_min
        self.m = sorter.m
        self.counted = view.counted
        self.s1 = view.s1
        self.s2 = view.s2
        self.pool_heap = view.pool_heap
        self.deferred = view.deferred
        # _leaf_blocked, inlined: not demanding, or (with ignore_blocked) needs a saturated resource
        self.blocking = view.saturated_mask if sorter.ignore_blocked else 0
        # (the masks as C integers where every resource's bit fits in one)
        self.small_masks = self.m <= 62
        self.blocking_bits = self.blocking if self.small_masks else 0
        self.inline_share = self.node_share is the_hdrf_share()
        self.scratch_of = array.clone(_DOUBLES, max(self.m, 1), True)
        self.scratch = self.scratch_of.data.as_doubles

    def __reduce__(self):
        """A copy of the view (``copy.deepcopy`` of a scheduler: ``explain``, ``forecast``)
        or a pickle holds no batch (its buffers are the original view's): ``batch_of``
        makes the copy its own at its first catch-up."""
        return _no_batch, ()

    cdef int refresh(self) except -1:
        """Take the view's buffers, the counted resources and the capacity afresh."""
        view = self.view
        self.usage, self.share, self.low, self.contrib_vec = (
            doubles_in(view.usage), doubles_in(view.share), doubles_in(view.low), doubles_in(view.contrib_vec))
        self.low_set, self.contrib_in = flags_in(view.low_set), flags_in(view.contrib_in)
        self.unblocked, self.pool_version, self.updates = (
            counters_in(view.unblocked), counters_in(view.pool_version), counters_in(view.updates))
        # (remade only when a rebuild made a new ``counted`` or the capacity changed:
        # both are replaced, never mutated)
        if self.counted is not self.counted_made:
            self.counted_of = array.array("q", self.counted)
            self.n_counted = len(self.counted)
            self.counted_r = self.counted_of.data.as_longlongs
            self.counted_made = self.counted
        if self.capacity is not self.capacity_made:
            self.cap_of = array.array("d", self.capacity)
            self.cap = self.cap_of.data.as_doubles
            self.capacity_made = self.capacity
        return 0

    cdef double counted_share(self, double *u, double weight):
        """``hdrf.hdrf_share`` on the row ``u``: ``max_r u[r] / cap[r]`` over the counted
        resources by ``>`` from 0.0, then ``/ weight``, its operations in its order (the
        reference's ``_recompute`` inlines it the same way)."""
        cdef double best = 0.0, x
        cdef Py_ssize_t k, r
        for k in range(self.n_counted):
            r = self.counted_r[k]
            x = u[r] / self.cap[r]
            if x > best:
                best = x
        return best / weight

    cdef double leaf_share(self, tuple u, Py_ssize_t idx) except? -1.0:
        """``node_share(u, capacity, counted, weight[idx])``, with u already in the leaf's
        usage row; ``hdrf.hdrf_share`` itself computed here (``counted_share``): the call
        costs more than the arithmetic."""
        if not self.inline_share:
            return self.node_share(u, self.capacity, self.counted, self.weight[idx])
        return self.counted_share(self.usage + idx * self.m, <double>self.weight[idx])

    cdef long leaf_unblocked(self, Py_ssize_t idx) except -1:
        """A present leaf's blocked flag as the reference's: 1 when demanding and needing
        no saturated resource (``live[idx] and not needs[idx] & blocking``), else 0."""
        if not self.live[idx]:
            return 0
        if self.small_masks:
            return 0 if <long long>self.needs[idx] & self.blocking_bits else 1
        return 0 if self.needs[idx] & self.blocking else 1

    cdef int set_leaf(self, Py_ssize_t idx) except -1:
        """A leaf's usage row from the sorter's ``leaf_usage`` (the reference's
        ``array("d", u)``: each item as its double), and its share."""
        cdef tuple u = <tuple>self.leaf_usage[idx]
        cdef double *row = self.usage + idx * self.m
        cdef Py_ssize_t r
        for r in range(self.m):
            row[r] = <double>u[r]
        if self.key[idx]:
            self.share[idx] = self.leaf_share(u, idx)
        return 0

    cdef int prefetch_leaves(self, leaves) except -1:
        """Ask for the cache lines a batch of leaves will touch, before the first is
        replayed: each leaf's usage and contribution rows, share, blocked count, pool flag
        and pool version in this view; its slots in the sorter's ``live``, ``needs`` and
        ``parent``, its usage tuple and its key; then the tuple's first and last float.
        The replay is a chain of reads that mostly miss the caches at 10,000 jobs (issue
        24, round 12): asked all at once, the loads overlap instead of each waiting out a
        memory latency in turn. A hint only: nothing is read or written through it, so no
        value and no decision can change."""
        cdef list leaf_usage = self.leaf_usage, key = self.key
        cdef Py_ssize_t idx, m = self.m, size
        cdef Py_ssize_t n = min(len(leaf_usage), len(key), len(self.live), len(self.needs), len(self.parent))
        cdef PyObject **live_slots = list_items(self.live)
        cdef PyObject **needs_slots = list_items(self.needs)
        cdef PyObject **parent_slots = list_items(self.parent)
        cdef PyObject *u
        for leaf in leaves:
            idx = leaf
            if idx < 0 or idx >= n:
                continue  # (not a leaf's slot: the replay itself raises)
            prefetch(self.usage + idx * m)
            prefetch(self.contrib_vec + idx * m)
            prefetch(self.share + idx)
            prefetch(self.unblocked + idx)
            prefetch(self.contrib_in + idx)
            prefetch(self.pool_version + idx)
            prefetch(live_slots + idx)
            prefetch(needs_slots + idx)
            prefetch(parent_slots + idx)
            prefetch(list_item_address(leaf_usage, idx))
            prefetch(list_item_address(key, idx))
        # then the usage tuples' floats, whose addresses are in the tuples asked for above
        # (which have had the first pass to arrive)
        for leaf in leaves:
            idx = leaf
            if idx < 0 or idx >= n:
                continue
            u = <PyObject *>list_item_address(leaf_usage, idx)
            if tuple_check(u):
                size = tuple_size(u)
                if size:
                    prefetch(tuple_item(u, 0))
                    prefetch(tuple_item(u, size - 1))
        return 0

    cdef bint pool_member(self, Py_ssize_t v) except -1:
        """Whether child ``v`` is in its parent's pool: Alg. 3's rule (``_pool_rule``: 1
        an unblocked demanding job below, 2 a demanding one, 0 no pool); a removed job
        (its key the empty tombstone) never is."""
        if not self.key[v]:
            return False
        if self.pool_rule == 1:
            return self.unblocked[v] > 0
        return self.pool_rule == 2 and <long>self.live[v] > 0

    cdef int contribution(self, Py_ssize_t v, bint in_pool, double *out) except -1:
        """v's contribution to its parent's sums, into ``out``: U_v / s_v in the pool (into
        S1; zeros when s_v is not positive), else U_v (into S2), each one IEEE operation
        as the reference's ``x / sv``."""
        cdef double *u = self.usage + v * self.m
        cdef double sv
        cdef Py_ssize_t r
        if in_pool:
            sv = self.share[v]
            if sv > 0:
                for r in range(self.m):
                    out[r] = u[r] / sv
            else:
                for r in range(self.m):
                    out[r] = 0.0
        else:
            for r in range(self.m):
                out[r] = u[r]
        return 0

    cdef int compact_pool(self, tuple heap) except -1:
        """``HDRFSorter._compact_pool``: the heap's current entries (their version the
        child's, the child in the pool), kept in their order, then heapified
        (``typed_heapify``: ``heapq.heapify``), in place: the layout the reference's
        filtered list and ``heapify`` give."""
        cdef array.array keys = <array.array>heap[0], ids = <array.array>heap[1]
        cdef double *share = keys.data.as_doubles
        cdef long long *entry = ids.data.as_longlongs
        cdef Py_ssize_t i, kept = 0, n = len(keys), c
        for i in range(n):
            c = entry[2 * i + 1]
            if entry[2 * i] == self.pool_version[c] and self.contrib_in[c]:
                share[kept] = share[i]
                entry[2 * kept] = entry[2 * i]
                entry[2 * kept + 1] = c
                kept += 1
        array.resize_smart(keys, kept)
        array.resize_smart(ids, 2 * kept)
        typed_heapify(heap)
        return 0

    cdef bint repost(self, Py_ssize_t v, Py_ssize_t p, bint same=False) except -1:
        """``HDRFSorter._repost``: child ``v`` of ``p`` changed; whether p's sums moved.
        The new contribution is built in ``scratch`` and compared with the stored row
        double by double (the reference's arrays' ``!=``: item by item by ``==``)."""
        cdef bint in_old, in_new, moved
        cdef tuple heap
        cdef array.array s_old, s_new
        cdef double *old_sums
        cdef double *new_sums
        cdef double *vec_old
        cdef double *vec_new = self.scratch
        cdef Py_ssize_t r, m = self.m
        cdef long long pool_ver, updates
        later = self.deferred.get(p)  # (v's pick entry, renewed when p's heap is read)
        cdef long kids_p
        if later is None:
            self.deferred[p] = {v: None}
        elif type(later) is dict:  # (else they stand for every child of p: v is marked)
            (<dict>later)[v] = None
            kids_p = self.kids[p]
            if len(<dict>later) >= kids_p >= self.every_child_min:
                self.deferred[p] = every_child(p, later)
        if not p:
            return False
        in_old = self.contrib_in[v] != 0
        vec_old = self.contrib_vec + v * m
        in_new = self.pool_member(v)
        if same and in_new == in_old:
            return False
        self.contribution(v, in_new, vec_new)
        moved = in_new != in_old
        if not moved:
            for r in range(m):
                if vec_new[r] != vec_old[r]:
                    moved = True
                    break
        if moved:
            s_old = <array.array>(self.s1[p] if in_old else self.s2[p])
            s_new = <array.array>(self.s1[p] if in_new else self.s2[p])
            old_sums = s_old.data.as_doubles
            new_sums = s_new.data.as_doubles
            for r in range(m):  # (the reference's ``-=`` and ``+=``, in place on the doubles)
                old_sums[r] = old_sums[r] - vec_old[r]
                new_sums[r] = new_sums[r] + vec_new[r]
            for r in range(m):
                vec_old[r] = vec_new[r]
            self.contrib_in[v] = in_new
        pool_ver = self.pool_version[v] + 1
        self.pool_version[v] = pool_ver
        if in_new:
            heap = <tuple>self.pool_heap[p]
            typed_push(heap, self.share[v], pool_ver, v)
            if len(<array.array>heap[0]) > 4 * <long>self.kids[p] + 16:
                self.compact_pool(heap)
        updates = self.updates[p] + 1
        self.updates[p] = updates
        if updates % self.rebuild_every == 0:
            self.sorter._resum(self.view, p)
            return True
        return moved

    cdef bint recompute(self, Py_ssize_t p, bint sums_moved=True) except -1:
        """``HDRFSorter._recompute``: p's usage (its pool rescaled to its lowest share) and
        share; False when unchanged and so not recomputed. The pool minimum is a double
        and a flag (``low_set``: the reference's None when false)."""
        cdef tuple heap = <tuple>self.pool_heap[p]
        cdef array.array keys = <array.array>heap[0], ids = <array.array>heap[1]
        cdef array.array s1, s2
        cdef bint has_low = False
        cdef double lo = 0.0
        cdef double *a
        cdef double *b
        cdef double *u
        cdef Py_ssize_t c, r, m = self.m
        while len(keys):  # the pool's minimum share: its lowest current entry
            c = ids.data.as_longlongs[1]
            if ids.data.as_longlongs[0] == self.pool_version[c] and self.contrib_in[c]:
                lo = keys.data.as_doubles[0]
                has_low = True
                break
            typed_pop(heap)
        # (``low == view.low[p]`` of the reference: both None, or both floats and ``==``)
        if not sums_moved and has_low == (self.low_set[p] != 0) and (not has_low or lo == self.low[p]):
            return False
        self.low_set[p] = has_low
        self.low[p] = lo if has_low else 0.0
        s1 = <array.array>self.s1[p]
        s2 = <array.array>self.s2[p]
        a = s1.data.as_doubles
        b = s2.data.as_doubles
        u = self.usage + p * m
        if not has_low or lo <= 0:
            for r in range(m):
                u[r] = b[r]
        else:
            for r in range(m):
                u[r] = lo * a[r] + b[r]
        if p:
            self.share[p] = self.counted_share(u, <double>self.weight[p])
        return True


def _no_batch():
    """What a view's copy holds for its batch (``_Batch.__reduce__``): none."""
    return None


cdef _Batch batch_of(sorter, view, long rebuild_every):
    """The view's tables (a ``_Batch``), made at its first catch-up and kept on it: every
    list is the sorter's or the view's own for their lifetime (appended to, never
    replaced), but for ``counted`` (a rebuild's new list) and the sorter's capacity
    (``set_capacity``), read again at each call, with the typed arrays' buffers
    (``refresh``)."""
    cdef _Batch b = getattr(view, "_kernel_batch", None)
    if b is None or b.sorter is not sorter:
        b = _Batch(sorter, view, rebuild_every)
        view._kernel_batch = b
    else:
        b.counted = view.counted
        b.capacity = sorter.capacity
        b.rebuild_every = rebuild_every
    b.refresh()
    return b


#: per node, during a batch: 0 when not among the nodes to recompute, else 1 + whether a
#: child's contribution moved (the reference's per-depth dicts' values); all 0 between calls
cdef array.array _queued = array.array("B")
#: whether a call of ``propagate`` holds ``_queued`` (as ``_among_busy``: a batch calls
#: Python code, a share function or ``views.every_child``, during which another thread's
#: batch, a live service's forecast on a copy of the engine, can begin; that one takes
#: scratch of its own)
cdef bint _queued_busy = False


def propagate(sorter, view, leaves, long rebuild_every):
    """``HDRFSorter._propagate``: bring ``view`` up to date after the given leaves
    changed, each ancestor recomputed once, deepest first.

    The reference's per-depth dicts ``{node: moved}`` are a list per depth, the nodes in
    the order the dict first saw them (a dict keeps a key's first position when its
    value is set again), and the values in ``_queued``: ``level[p] = repost(...) or
    level.get(p, False)`` is the repost, then the node listed if new and its flag or'ed;
    a depth is read only after every insertion into it (leaves first, then the depth
    below it), as the reference iterates its dict."""
    global _queued, _queued_busy
    cdef _Batch b = batch_of(sorter, view, rebuild_every)
    cdef list key = b.key, parent = b.parent, depth = b.depth
    cdef long long *unblocked = b.unblocked
    cdef bint batch = len(leaves) != 1
    cdef bint same, moved
    cdef list levels = [[] for _ in range(<long>sorter.max_depth + 1)] if batch else []
    cdef list level
    cdef unsigned char *queued
    cdef array.array scratch = _queued
    cdef bint holds = False  # (this call holds the module's scratch)
    if batch:
        if _queued_busy:
            scratch = array.clone(_queued, len(key), True)
        else:
            if len(_queued) < len(key):
                _queued = array.clone(_queued, 2 * len(key), True)
            scratch = _queued
            _queued_busy = holds = True
    queued = <unsigned char *>scratch.data.as_uchars
    cdef Py_ssize_t idx, p, a, v, d, k
    cdef long now, d_unblocked
    try:
        if batch:
            b.prefetch_leaves(leaves)
        for leaf in leaves:
            idx = leaf
            b.set_leaf(idx)
            now = 0
            if key[idx]:
                now = b.leaf_unblocked(idx)
            d_unblocked = now - unblocked[idx]
            unblocked[idx] = now
            p = parent[idx]
            if d_unblocked:
                a = p
                while a >= 0:
                    unblocked[a] = unblocked[a] + d_unblocked
                    a = parent[a]
            if not batch:  # one leaf: its path, bottom up (the root is not recomputed: repost)
                v, same = idx, False
                while p > 0:
                    same = not b.recompute(p, b.repost(v, p, same))
                    v, p = p, parent[p]
                if p == 0:
                    b.repost(v, 0)
                return
            if p >= 0:
                moved = b.repost(idx, p)
                if not queued[p]:
                    (<list>levels[<long>depth[p]]).append(p)
                queued[p] = 2 if moved or queued[p] == 2 else 1
        for d in range(<long>sorter.max_depth, 0, -1):
            level = <list>levels[d]
            for k in range(len(level)):
                p = level[k]
                moved = queued[p] == 2
                queued[p] = 0
                same = not b.recompute(p, moved)
                a = parent[p]
                if a >= 0:
                    moved = b.repost(p, a, same)
                    if not queued[a]:
                        (<list>levels[d - 1]).append(a)
                    queued[a] = 2 if moved or queued[a] == 2 else 1
    finally:  # (after an error, the marks still set)
        for level in levels:
            for node in level:
                queued[<Py_ssize_t>node] = 0
        if holds:
            _queued_busy = False


def rebuild(sorter, view, long rebuild_every):
    """``HDRFSorter._rebuild``, statement for statement: recompute a view bottom-up, the
    queues in ``queues_bottom_up``, each queue's jobs as its loop meets them."""
    view.pending.clear()
    view.deferred.clear()  # (every queue's heap is emptied, its demanding children marked below)
    cap = sorter.capacity
    cdef Py_ssize_t m = sorter.m
    saturated = view.saturated
    view.counted = [r for r in range(m) if cap[r] > 0 and r not in saturated]
    cdef _Batch b = batch_of(sorter, view, rebuild_every)
    cdef list children = sorter.children
    cdef list order = sorter.queues_bottom_up  # (each queue after its sub-queues)
    cdef double *share = b.share
    cdef double *contrib_vec = b.contrib_vec
    cdef signed char *contrib_in = b.contrib_in
    cdef long long *unblocked = b.unblocked
    cdef long long *pool_version = b.pool_version
    cdef list s1_of = b.s1, s2_of = b.s2, pool_heap_of = b.pool_heap
    cdef list pick_heap_of = view.pick_heap
    cdef dict deferred = b.deferred
    cdef dict marked
    cdef list is_job = sorter.is_job, live = b.live
    cdef Py_ssize_t idx, c, r, k
    cdef long long total, version
    cdef bint in_pool
    cdef tuple pool_heap
    cdef array.array s1, s2, keys, ids
    cdef Py_ssize_t n
    cdef double *target
    cdef double *vec
    cdef dict kids
    for k in range(len(order)):
        idx = order[k]
        kids = <dict>children[idx]
        total = 0
        s1 = array.clone(_DOUBLES, m, True)  # (``zero_sums``)
        s2 = array.clone(_DOUBLES, m, True)
        keys = array.clone(_DOUBLES, len(kids), False)  # (``pool_heap``, at most a child each)
        ids = array.clone(_INDICES, 2 * len(kids), False)
        n = 0
        marked = {}
        for child in kids:
            c = child
            if is_job[c]:  # (a job as its queue's loop meets it)
                b.set_leaf(c)
                unblocked[c] = b.leaf_unblocked(c)
            total += unblocked[c]
            in_pool = b.pool_member(c)
            vec = contrib_vec + c * m
            b.contribution(c, in_pool, vec)
            target = s1.data.as_doubles if in_pool else s2.data.as_doubles
            contrib_in[c] = in_pool
            for r in range(m):
                target[r] = target[r] + vec[r]
            version = pool_version[c] + 1
            pool_version[c] = version
            if in_pool:  # (the reference's entries list, in its order)
                keys.data.as_doubles[n] = share[c]
                ids.data.as_longlongs[2 * n] = version
                ids.data.as_longlongs[2 * n + 1] = c
                n += 1
            if <long>live[c] > 0:
                marked[child] = None
        unblocked[idx] = total
        if marked:
            deferred[idx] = marked
        array.resize_smart(keys, n)
        array.resize_smart(ids, 2 * n)
        pool_heap = (keys, ids)
        typed_heapify(pool_heap)  # (``heapq.heapify`` of the reference's list)
        # the pick entries are made when a descent reads this heap (``_renew_deferred``)
        s1_of[idx], s2_of[idx], pool_heap_of[idx], pick_heap_of[idx] = s1, s2, pool_heap, []
        b.recompute(idx)


# --- the candidates' comparison and the pick-heap renewal (``machinery/descent.py``) ----------

# ``round(share, DIGITS)`` without Python's decimal round trip where the answer is certain.
# Python's ``round(x, 12)`` is the double nearest the decimal number x rounded half-even to
# 12 places (an exact conversion to decimal and back: about 1.5 us a call, the largest cost
# of renewing pick entries and comparing keys). For 0 <= x < 1000, y = x * 10**12 as a
# double is within half an ulp of the exact product P, at most y * 2**-53 away; allow eight
# times that (``ROUND_MARGIN``). When y's fraction is farther than the margin from one half,
# P lies on the same side of the half-point and within half of the same two integers, so it
# rounds to the integer N that y rounds to, with no tie; N (below 2**53) over 10**12 as an
# IEEE division is the double nearest N / 10**12, which is what Python's conversion back
# from the decimal string gives. Otherwise (a fraction within the margin of a half, x
# negative, too large, or not a number) Python's own ``round`` answers.
cdef extern from "math.h":
    double floor(double x) nogil
    double fabs(double x) nogil
    bint isfinite(double x) nogil
    const double INFINITY

cdef double ROUND_SCALE = 1e12          # 10 ** DIGITS, exact as a double (checked at import)
cdef double ROUND_LIMIT = 1e3           # x below this: y below 1e15 < 2 ** 50
cdef double ROUND_MARGIN = 2.0 ** -50   # per unit of y: 8 x the product's error bound (2 ** -53)

if DIGITS != 12 or float(10 ** DIGITS) != ROUND_SCALE:
    raise ImportError("the kernel's rounding assumes DIGITS == 12 (machinery/ties.py)")


cdef double rounded_share(double x) except? -1.0:
    """``round(x, DIGITS)`` as a double, the same value (see the comment above: the integer
    nearest x * 10**12 when certain, else Python's own ``round``)."""
    cdef double y, whole, fraction
    if 0.0 <= x < ROUND_LIMIT:
        y = x * ROUND_SCALE
        whole = floor(y)
        fraction = y - whole  # (exact: whole <= y < whole + 1 <= 2 * whole, or whole == 0)
        if fabs(fraction - 0.5) > y * ROUND_MARGIN:
            if fraction > 0.5:
                whole += 1.0
            return whole / ROUND_SCALE
    return round(x, DIGITS)


cdef double *doubles_of(object table):
    """The buffer of a table of shares when it is an ``array("d")`` (an H-DRF view's,
    ``hdrf_online.doubles``), else NULL (a list: DFF's, the tests'), read as Python items."""
    cdef array.array doubles
    if type(table) is array.array:
        doubles = table
        if doubles.ob_descr.typecode == b"d":  # (the array's own descriptor: no attribute lookup)
            return doubles.data.as_doubles
    return NULL


cdef inline double share_at(object table, double *doubles, Py_ssize_t v) except? -1.0:
    """``table[v]`` as a double, from the buffer when there is one (``doubles_of``)."""
    if doubles != NULL:
        return doubles[v]
    return table[v]


cdef inline bint _key_less(double share_a, long long running_a, long long position_a,
                           double share_b, long long running_b, long long position_b):
    """``(share_a, running_a, position_a) < (share_b, running_b, position_b)`` as Python
    compares the tuples: the first element that differs (``==``) decides (``<``)."""
    if share_a != share_b:
        return share_a < share_b
    if running_a != running_b:
        return running_a < running_b
    return position_a < position_b


def pick_among_tree(names, *, dict index, list parent, list live, node_key, fifo_jobs, runnable,
                    tables=None):
    """``descent.pick_among_tree``, statement for statement, with the keys of the greedy
    walk computed here from ``tables`` (``(share, running, position, ready)``: the key of
    v is ``(round(share[v], DIGITS), running[v], position[v])``, what ``node_key(v)``
    returns, read after ``ready()``, called once before the first key as ``node_key``'s
    own catch-up would run). The rounding gives Python's ``round``'s value
    (``rounded_share``); the comparison is the tuples' (``_key_less``) and the scan
    ``min``'s (the first lowest key wins). The rare path (the lowest candidate not runnable) is the reference's own
    (``descent.try_by_paths``, on ``node_key``). Without FIFO queues (``fifo_jobs`` an
    empty dict's ``get``, as the sorters pass it) the paths are kept in per-node marks
    instead of a dict of lists (``among_by_marks``: the same walk, no object per
    candidate)."""
    if tables is not None:
        owner = getattr(fifo_jobs, "__self__", None)
        # no FIFO queue: every live candidate competes. Not while another call holds the
        # marks (``_among_busy``: the candidates' walk calls back ``ready``, Python code, so
        # another thread, say a live service's forecast on a copy, or a nested call can
        # come in): that one takes the walk below, the same answer
        if type(owner) is dict and not owner and not _among_busy:
            return among_by_marks(names, index, parent, live, node_key, runnable, tables)
    cdef dict candidates = {}
    cdef dict fifo_first = {}
    cdef dict below = {}
    cdef list competing = []
    cdef list kids
    cdef Py_ssize_t v, u, p, k, n, best
    cdef double share_best, share_c
    cdef long long running_best, running_c, position_best, position_c
    cdef bint readied = False
    cdef list running, position
    cdef double *shares = NULL
    for name in names:
        candidates[index[name]] = name
    for cand, name in candidates.items():
        v = cand
        if not live[v]:
            continue
        q = parent[v]
        waiting = fifo_jobs(q)
        if waiting is not None:
            if q not in fifo_first:
                first = None
                for c in waiting:
                    if c in candidates and live[c] > 0 and runnable(candidates[c]):
                        first = c
                        break
                fifo_first[q] = first
            if fifo_first[q] != cand:
                continue
        competing.append(cand)
        u = v
        while u:  # up to the first node already on another candidate's path
            p = parent[u]
            kids = below.get(p)
            if kids is None:
                below[p] = [u]
                u = p
            else:
                kids.append(u)
                break
    if not below:
        return None
    if tables is not None:
        share, running, position, ready = tables
        shares = doubles_of(share)
    v = 0
    while True:
        kids = below.get(v)
        if kids is None:
            break  # a candidate job
        n = len(kids)
        if n == 1:
            v = kids[0]
        elif tables is None:
            v = min(kids, key=node_key)
        else:
            if not readied:
                ready()
                readied = True
            best = kids[0]
            share_best = rounded_share(share_at(share, shares, best))
            running_best = running[best]
            position_best = position[best]
            for k in range(1, n):
                c = kids[k]
                share_c = rounded_share(share_at(share, shares, c))
                running_c = running[c]
                position_c = position[c]
                if _key_less(share_c, running_c, position_c, share_best, running_best, position_best):
                    best = c
                    share_best, running_best, position_best = share_c, running_c, position_c
            v = best
    best_name = candidates[v]
    if runnable(best_name):
        return best_name
    return try_by_paths(competing, candidates, v, parent=parent, node_key=node_key, runnable=runnable)


#: ``among_by_marks``' per-node scratch, all zero between calls: at node v, 1 + the first of
#: its children on a candidate's path (``head``, 0: none), at a child u, 1 + its next
#: sibling there (``after``), at a candidate job, 1 + its slot in the names (``slot``)
cdef array.array _among = array.array("q")
#: the nodes ``among_by_marks`` marked, to zero them again
cdef array.array _among_touched = array.array("q")


cdef object among_by_marks(names, dict index, list parent, list live, node_key, runnable, tuple tables):
    """``pick_among_tree`` when no queue is FIFO (every live candidate competes), the same
    answer with the tree of the candidates' paths kept in per-node C counters
    (``_among``: each node's children on the paths as a linked list) instead of a dict of
    lists, and each candidate's name by its slot, so no Python object is made per
    candidate: at 10,000 jobs a call has about a hundred candidates.

    Why the same pick: the same nodes are linked under the same parents (a candidate's
    path up to the first node already on another's, as the reference's ``below``), the
    same candidates once each in the order first seen (a repeated name is the same job:
    the reference's dict keeps its first place), and the walk takes at each node the
    first lowest key in the reference's list order: the links hold a node's children
    newest first, and the scan keeps a later-met child whose key is lower or equal, so
    among equal keys the one listed first wins, as ``min`` (keys are distinct among
    siblings anyway, by position). The catch-up (``ready``) runs before the first key
    is read, where a node first has two children on the paths, as the reference's first
    ``node_key`` call; the rare path (the lowest job not runnable) is the reference's
    ``try_by_paths`` on the same competing candidates and names."""
    global _among, _among_touched, _among_busy
    cdef Py_ssize_t n_nodes = len(parent), v, u, p, c, best, n_touched = 0, k
    if len(_among) < 3 * n_nodes:
        _among = array.clone(_among, 6 * n_nodes, True)
    if len(_among_touched) < n_nodes:
        _among_touched = array.clone(_among_touched, 2 * n_nodes, True)
    cdef long long *head = _among.data.as_longlongs
    cdef long long *after = head + n_nodes
    cdef long long *slot = head + 2 * n_nodes
    cdef long long *touched = _among_touched.data.as_longlongs
    cdef list named = []  # each candidate's name once, in the order first seen
    cdef list competing = []  # the live ones' names
    cdef bint readied = False
    cdef double share_best, share_c
    cdef long long running_best, running_c, position_best, position_c
    cdef double *shares
    share, running, position, ready = tables
    _among_busy = True
    try:
        for name in names:
            v = index[name]
            if slot[v]:
                continue  # (a name met before: the same job)
            named.append(name)
            slot[v] = len(named)
            touched[n_touched] = v
            n_touched += 1
            if not live[v]:
                continue
            competing.append(name)
            u = v
            while u:  # up to the first node already on another candidate's path
                p = parent[u]
                if head[p]:
                    after[u] = head[p]
                    head[p] = u + 1
                    break
                head[p] = u + 1
                touched[n_touched] = p
                n_touched += 1
                u = p
        if not competing:
            return None
        shares = doubles_of(share)
        v = 0
        while head[v]:
            c = head[v] - 1
            if not after[c]:
                v = c
                continue
            if not readied:
                ready()
                readied = True
            best = c
            share_best = rounded_share(share_at(share, shares, best))
            running_best = running[best]
            position_best = position[best]
            while after[c]:
                c = after[c] - 1
                share_c = rounded_share(share_at(share, shares, c))
                running_c = running[c]
                position_c = position[c]
                # (newest first: a lower or equal key is listed before the best so far)
                if not _key_less(share_best, running_best, position_best, share_c, running_c, position_c):
                    best = c
                    share_best, running_best, position_best = share_c, running_c, position_c
            v = best
        best_name = named[slot[v] - 1]
    finally:  # (every node marked is in ``touched``: a candidate, or a parent first linked)
        for k in range(n_touched):
            u = touched[k]
            head[u] = 0
            after[u] = 0
            slot[u] = 0
        _among_busy = False
    if runnable(best_name):
        return best_name
    cdef dict candidates = {}
    cdef list jobs = []
    for name in competing:
        candidates[index[name]] = name
        jobs.append(index[name])
    return try_by_paths(jobs, candidates, v, parent=parent, node_key=node_key, runnable=runnable)


def first_runnable_by_key(list jobs, *, list live, excluded, list shape_mask, list alive, list key, runnable,
                          node_key, tables=None):
    """``descent.first_runnable_by_key``: ``jobs`` tried lowest key first, the first
    demanding, not excluded, of a live shape and runnable. With ``tables`` (``(share,
    running, position)``: the key of c is ``(round(share[c], DIGITS), running[c],
    position[c])``, what ``node_key(c)`` returns) the keys are computed here and popped
    from a heap of them (``walk_by_key``; keys are distinct, by position among siblings, so
    the pops meet the jobs in the sorted order; the conditions are read at each job in that
    order, as the reference reads them). Usually the first is runnable: one pass over the
    keys to build the heap, where selecting the lowest untried key at each step had cost a
    pass per job tried. Without ``tables``, the reference."""
    if tables is None:
        return reference_jobs_walk(jobs, live=live, excluded=excluded, shape_mask=shape_mask, alive=alive, key=key,
                                   runnable=runnable, node_key=node_key)
    return walk_by_key(jobs, tables, None, None, live, excluded, None, shape_mask, alive, key, runnable)


def renew_pick_entries(dict repick, list heaps, *, list version, share, list running, list position,
                       list live, present, list parent, list kids, list lazy=None, dict deferred=None):
    """``descent.renew_pick_entries``: each node in ``repick`` gets a new version and,
    while demanding and present, the entry ``(round(share, DIGITS), running, position,
    version, node)`` in its parent's heap; a heap grown past ``4 x children + 16``
    entries drops its stale ones.

    One difference, in the heaps' layout only: a heap given many new entries at once
    (at least a quarter of its length: after a view's rebuild, every live child of every
    queue) takes them in one ``heapify`` instead of a push each, and is compacted after
    them rather than between pushes. Why the descent is unchanged: entries are distinct
    (siblings differ by position, a node's entries by version), so the heap's pops
    follow the order of its set of entries whatever its layout; the set of current
    entries is the reference's (compaction drops only stale ones, which the descent
    drops anyway when it meets them).

    ``lazy`` and ``deferred`` as in the reference: a node whose parent's heap is read
    only through ``deferred`` (``lazy[p]``) is put there instead, renewed when a descent
    reads that heap."""
    cdef Py_ssize_t v, p, k
    cdef long ver
    cdef list heap, fresh
    cdef dict new_entries = {}
    cdef dict later
    cdef double *shares = doubles_of(share)
    for node in repick:
        v = node
        if lazy is not None:
            p = parent[v]
            if lazy[p]:
                later = deferred.get(p)
                if later is None:
                    deferred[p] = {node: None}
                else:
                    later[node] = None
                continue
        ver = <long>version[v] + 1
        version[v] = ver
        if <long>live[v] > 0 and present[v]:
            p = parent[v]
            entry = atomic((rounded_share(share_at(share, shares, v)), running[v], position[v], ver, node))
            fresh = new_entries.get(p)
            if fresh is None:
                new_entries[p] = [entry]
            else:
                fresh.append(entry)
    repick.clear()
    for q, entries in new_entries.items():
        p = q
        fresh = <list>entries
        heap = <list>heaps[p]
        if 4 * len(fresh) >= len(heap):
            heap.extend(fresh)
            heap_heapify(heap)
        else:
            for k in range(len(fresh)):
                heap_push(heap, <tuple>fresh[k])
        if len(heap) > 4 * <long>kids[p] + 16:
            heap = [e for e in heap if e[3] == version[e[4]] and live[e[4]] > 0 and present[e[4]]]
            heap_heapify(heap)
            heaps[p] = heap


def share_key(share):
    """``round(share, DIGITS)`` as the kernel computes it (``rounded_share``), for the tests."""
    return rounded_share(share)


def pick_heap_push(list heap, list entries):
    """Push ``entries`` onto a pick heap with the kernel's sift (``heap_push``), for the
    tests: the list is left as ``heapq.heappush`` would leave it."""
    for entry in entries:
        heap_push(heap, <tuple>entry)


def pick_heap_heapify(list heap):
    """Heapify a list of pick entries with the kernel's sifts (``heap_heapify``), for the
    tests: the list is left as ``heapq.heapify`` would leave it."""
    heap_heapify(heap)


def pool_heap_ops(tuple heap, list ops):
    """Apply ``ops`` to a pool heap (``hdrf_online.pool_heap``) with the kernel's sifts,
    for the tests: an entry ``(share, version, child)`` is pushed (``typed_push``), None
    pops the lowest (``typed_pop``), ``"heapify"`` heapifies (``typed_heapify``)."""
    for op in ops:
        if op is None:
            typed_pop(heap)
        elif op == "heapify":
            typed_heapify(heap)
        else:
            typed_push(heap, op[0], op[1], op[2])


# --- the shape-restricted descent's children by key (``descent.first_runnable_child``) -------

from cpython.mem cimport PyMem_Free, PyMem_Malloc


cdef struct _Keyed:
    # a child's key in its parent's pick heap, ``(round(share, DIGITS), running, position)``
    double share
    long long running
    long long position
    Py_ssize_t child


cdef inline bint _keyed_less(_Keyed *a, _Keyed *b) noexcept:
    return _key_less(a.share, a.running, a.position, b.share, b.running, b.position)


cdef void _keyed_sift_down(_Keyed *heap, Py_ssize_t n, Py_ssize_t pos) noexcept:
    """Move ``heap[pos]`` down to its place among ``heap[:n]`` (a binary min-heap)."""
    cdef _Keyed item = heap[pos]
    cdef Py_ssize_t low
    while True:
        low = 2 * pos + 1
        if low >= n:
            break
        if low + 1 < n and _keyed_less(&heap[low + 1], &heap[low]):
            low += 1
        if not _keyed_less(&heap[low], &item):
            break
        heap[pos] = heap[low]
        pos = low
    heap[pos] = item


cdef _Keyed *keyed_heap(list nodes, share, running, position) except NULL:
    """The keys of ``nodes`` (``(round(share[c], DIGITS), running[c], position[c])``,
    ``node_key``'s, the rounding ``rounded_share``'s) as a binary min-heap: the caller pops
    with ``keyed_pop`` and frees it (``PyMem_Free``). Keys are distinct (by position among
    siblings), so the pops meet the nodes in the order ``sorted(nodes, key=node_key)`` does,
    whatever the heap's layout; O(n) to build, O(log n) a pop, where a walk that usually
    stops at its first or second node would pay for sorting them all."""
    cdef Py_ssize_t n = len(nodes), k
    cdef double *shares = doubles_of(share)
    cdef _Keyed *heap = <_Keyed *>PyMem_Malloc((n if n else 1) * sizeof(_Keyed))
    if heap == NULL:
        raise MemoryError()
    try:
        for k in range(n):
            key_into(&heap[k], nodes[k], share, shares, running, position)
    except BaseException:
        PyMem_Free(heap)
        raise
    keyed_heapify(heap, n)
    return heap


cdef int key_into(_Keyed *slot, Py_ssize_t c, share, double *shares, running, position) except -1:
    """Node ``c``'s key into ``slot`` (``node_key(c)``'s, the rounding ``rounded_share``'s)."""
    slot.share = rounded_share(share_at(share, shares, c))
    slot.running = running[c]
    slot.position = position[c]
    slot.child = c
    return 0


cdef void keyed_heapify(_Keyed *heap, Py_ssize_t n) noexcept:
    cdef Py_ssize_t k
    for k in range(n // 2 - 1, -1, -1):
        _keyed_sift_down(heap, n, k)


cdef inline Py_ssize_t keyed_pop(_Keyed *heap, Py_ssize_t n) noexcept:
    """The node of the lowest key among ``heap[:n]``, removed (the heap is then ``heap[:n - 1]``)."""
    cdef Py_ssize_t c = heap[0].child
    if n > 1:
        heap[0] = heap[n - 1]
        _keyed_sift_down(heap, n - 1, 0)
    return c


cdef object walk_by_key(list nodes, tuple tables, descend, is_job, list live, excluded, present,
                        list shape_mask, list alive, list key, runnable):
    """``first_runnable_by_key`` (``descend`` None: ``nodes`` are jobs, all present) and
    ``first_runnable_child``'s walk with the key tables: ``nodes`` popped lowest key first
    from ``keyed_heap`` (``walk_heap``)."""
    cdef Py_ssize_t n = len(nodes)
    if n == 0:
        return None
    share, running, position = tables
    return walk_heap(keyed_heap(nodes, share, running, position), n, descend, is_job, live, excluded, present,
                     shape_mask, alive, key, runnable)


cdef object walk_heap(_Keyed *heap, Py_ssize_t n, descend, is_job, list live, excluded, present, list shape_mask,
                      list alive, list key, runnable):
    """The nodes of ``heap[:n]`` (which this frees) lowest key first, the first that is
    demanding, not all excluded, present (``descend`` None: jobs, all present), of a live
    shape (``alive[0]``, read at each) and, a job, runnable or, a queue, with a runnable
    job below (``descend``)."""
    cdef Py_ssize_t c
    try:
        while n:
            c = keyed_pop(heap, n)
            n -= 1
            if live[c] > (0 if excluded is None else excluded[c]) and (descend is None or present[c]) \
                    and shape_mask[c] & alive[0]:
                if descend is None or is_job[c]:
                    if runnable(key[c]):
                        return key[c]
                else:
                    found = descend(c)
                    if found is not None:
                        return found
        return None
    finally:
        PyMem_Free(heap)


def first_runnable_child(list children, *, descend, is_job, list live, excluded, present, list shape_mask,
                         list alive, list key, runnable, node_key, tables=None):
    """``descent.first_runnable_child``: ``children`` tried lowest key first, the first
    demanding, not all excluded, still there, of a live shape (read at each) and, a job,
    runnable, or, a queue, with a runnable job below (``descend``). With ``tables``
    (``(share, running, position)``: the key of c is ``(round(share[c], DIGITS),
    running[c], position[c])``, what ``node_key(c)`` returns) the keys are computed here
    and popped from a heap of them (``walk_by_key``: the sorted order, as keys are
    distinct) instead of sorting them all; the conditions are read at each child in that
    order, as the reference reads them. Without ``tables``, the reference."""
    if tables is None:
        return reference_children_walk(children, descend=descend, is_job=is_job, live=live, excluded=excluded,
                                       present=present, shape_mask=shape_mask, alive=alive, key=key,
                                       runnable=runnable, node_key=node_key)
    return walk_by_key(children, tables, descend, is_job, live, excluded, present, shape_mask, alive, key, runnable)


def first_runnable_filed(dict filed, bits, *, list live, excluded, list shape_mask, list alive, list key, runnable,
                         node_key, tables=None):
    """``descent.first_runnable_filed``: a jobs-only queue's jobs filed under the shapes
    set in ``bits`` (``filed``: shape -> its jobs there) tried lowest key first, the first
    demanding, not excluded, of a live shape (read at each) and runnable. With ``tables``
    the first pop is found by one scan (``lowest_filed``) and tried alone; past it, the
    keys are read straight from ``filed``'s groups into the heap of keys (``walk_heap``:
    the sorted order, as keys are distinct) instead of making the list of jobs first
    (``descent.filed_under``: the groups of the shapes in ``bits``, lowest shape first; the
    heap's order does not depend on that order). Without ``tables``, the reference."""
    if bits < 0:  # (the reference's loop would not end: ``bits ^= bits & -bits`` stays negative)
        raise ValueError(f"bits must be a mask of shapes, not negative: {bits}")
    if tables is None or not filed:
        return reference_filed_walk(filed, bits, live=live, excluded=excluded, shape_mask=shape_mask, alive=alive,
                                    key=key, runnable=runnable, node_key=node_key, tables=tables)
    return filed_walk(filed, bits, tables, live, excluded, shape_mask, alive, key, runnable)


# --- the descent itself (``descent.descend_tree``) -------------------------------------------

cimport cython
from heapq import heappop, heappush

from fairshare.policies.machinery import descent as reference_descent


cdef object filed_walk(dict filed, bits, tuple tables, list live, excluded, list shape_mask, list alive, list key,
                       runnable):
    """``first_runnable_filed``'s walk with the key tables (``filed`` not empty): the jobs
    of the shapes in ``bits`` read from ``filed``'s groups into a heap of keys."""
    cdef list groups = []
    cdef Py_ssize_t n = 0, k = 0, i, nbytes
    cdef unsigned int byte
    cdef bytes raw
    cdef const unsigned char *raw_bytes
    # (as ``descent.filed_under``, lowest shape first: the set bits read from the int's
    # bytes, where ``bits & -bits`` and ``^=`` made two ints per shape, of up to 624 bits
    # at 10,000 jobs; ``bits`` is not negative, ``first_runnable_filed`` sees to it)
    nbytes = (bits.bit_length() + 7) >> 3
    raw = bits.to_bytes(nbytes, "little")
    raw_bytes = raw
    for i in range(nbytes):
        byte = raw_bytes[i]
        k = 0
        while byte:
            if byte & 1:
                found = filed.get(8 * i + k)
                if found:
                    groups.append(found)
                    n += len(<dict>found)
            byte >>= 1
            k += 1
    k = 0
    if n == 0:
        return None
    share, running, position = tables
    cdef double *shares = doubles_of(share)
    # The heap's first pop, found by a scan that rounds only the shares near the lowest:
    # the heap walk usually stops at its first job (every walk of bench_scaling's steady
    # state did, at 1,000 and 10,000 jobs), so keying and heapifying every job is left to
    # the walks that go past it (issue 24, round 11).
    cdef Py_ssize_t tried = -1, first = lowest_filed(groups, share, shares, running, position)
    if first >= 0:
        # (the heap walk's first pop and checks, nothing read in between)
        if live[first] > (0 if excluded is None else excluded[first]) and shape_mask[first] & alive[0]:
            if runnable(key[first]):
                return key[first]
            tried = first  # (asked: the walk of the others goes on without it)
            n -= 1
            if n == 0:
                return None
    cdef _Keyed *heap = <_Keyed *>PyMem_Malloc(n * sizeof(_Keyed))
    if heap == NULL:
        raise MemoryError()
    try:
        for group in groups:
            for job in <dict>group:
                if <Py_ssize_t>job != tried:
                    key_into(&heap[k], job, share, shares, running, position)
                    k += 1
    except BaseException:
        PyMem_Free(heap)
        raise
    keyed_heapify(heap, n)
    return walk_heap(heap, n, None, None, live, excluded, None, shape_mask, alive, key, runnable)


cdef Py_ssize_t lowest_filed(list groups, share, double *shares, running, position) except -2:
    """The job of the lowest key (``node_key``'s ``(round(share, DIGITS), running,
    position)``) among ``groups``' jobs, the one the heap of their keys pops first, or -1
    when a share is not finite (the caller builds the heap). Only the shares within
    ``1e-9 * (1 + |m|)`` of the lowest share seen so far (``m``) are rounded and keyed:
    rounding to 12 digits is monotone, so a share beyond that band (by far more than the
    12-digit grid's step and the doubles' spacing there) rounds strictly above ``m``'s
    rounding, and its key is above that of ``m``'s job, which was keyed (a share that
    lowers ``m`` is within the band of the ``m`` before it). Keys are distinct (by
    position), so the lowest is one job."""
    cdef Py_ssize_t best = -1, c
    cdef double m = INFINITY, s, share_best = 0.0, share_c
    cdef long long running_best = 0, position_best = 0, running_c, position_c
    for group in groups:
        for job in <dict>group:
            c = job
            s = share_at(share, shares, c)
            if not isfinite(s):
                return -1
            if s > m + 1e-9 * (1.0 + fabs(m)):
                continue
            if s < m:
                m = s
            share_c = rounded_share(s)
            running_c = running[c]
            position_c = position[c]
            if best < 0 or _key_less(share_c, running_c, position_c, share_best, running_best, position_best):
                best = c
                share_best, running_best, position_best = share_c, running_c, position_c
    return best


@cython.no_gc
@cython.final
cdef class _Descent:
    """One call of :func:`descend_tree`: its arguments, read by the recursive walk
    (``walk``) without a closure. Not tracked by the cyclic garbage collector: nothing it
    holds refers back to it (it is passed to ``first_child`` as the ``descend`` callable,
    held only by that call's frame), so no cycle can pass through it, and reference
    counting frees it when the descent returns."""
    cdef list heaps, key, live, version, shape_mask, alive
    cdef object is_job, fifo_jobs, present, runnable, excluded, shapes, node_key, renew
    cdef object first_runnable, first_child, tables, has_queues
    cdef dict deferred
    cdef bint own_filed, own_child
    cdef Py_ssize_t heap_tries
    # the shape index's tables, read here where ``shapes`` is a ``ShapeIndex`` whose three
    # readers below are its own (``own_index``): the same reads without a Python call each
    cdef bint own_index
    cdef dict queue_kids, shape_jobs_under
    cdef Py_ssize_t few_queues_max

    cdef object jobs_by_shape(self, Py_ssize_t v):
        """``shapes.jobs_by_shape(v)`` (``ShapeIndex``'s: v's job children per shape)."""
        if not self.own_index:
            return self.shapes.jobs_by_shape(v)
        return self.shape_jobs_under.get(v)

    cdef bint few_queues(self, Py_ssize_t v) except -1:
        """``shapes.few_queues(v)`` (``ShapeIndex``'s, statement for statement)."""
        if not self.own_index:
            return self.shapes.few_queues(v)
        kids = self.queue_kids.get(v)
        return kids is not None and len(kids) <= self.few_queues_max and not self.shape_jobs_under.get(v)

    cdef object alive_queues_under(self, Py_ssize_t v):
        """``shapes.alive_queues_under(v)`` (``ShapeIndex``'s: its port, ``queues_meeting``)."""
        if not self.own_index:
            return self.shapes.alive_queues_under(v)
        return meeting(self.queue_kids.get(v, ()), self.shape_mask, self.alive[0])

    def __call__(self, v):
        return self.walk(v)

    cdef object walk(self, Py_ssize_t v):
        """``descend_tree``'s inner ``descend(v)``, one level deeper: counted against the
        interpreter's recursion limit as the reference's Python call is, so a tree deeper
        than the limit raises the same RecursionError instead of overrunning the C stack."""
        Py_EnterRecursiveCall(" in the compiled descent")
        try:
            return self.walk_level(v)
        finally:
            Py_LeaveRecursiveCall()

    cdef object walk_level(self, Py_ssize_t v):
        """``descend_tree``'s inner ``descend(v)``, statement for statement."""
        cdef list live = self.live, key = self.key, shape_mask = self.shape_mask, alive = self.alive
        cdef list version = self.version, heap, tried
        cdef Py_ssize_t fifo_job = -1, c
        cdef bint rest = False
        excluded, runnable, is_job, present = self.excluded, self.runnable, self.is_job, self.present
        if is_job[v]:
            name = key[v]
            return name if runnable(name) else None
        waiting = self.fifo_jobs(v)
        if waiting is not None:
            fifo_job = -2
            for w in waiting:
                c = w
                if live[c] > (0 if excluded is None else excluded[c]) \
                        and (alive[0] == -1 or shape_mask[c] & alive[0]) and runnable(key[c]):
                    fifo_job = c
                    break
        elif alive[0] != -1 and v not in self.has_queues and self.node_key is not None:
            # jobs only, shapes restricted: the live shapes' jobs here, lowest key first
            filed = self.jobs_by_shape(v)
            if self.own_filed and self.tables is not None:
                if not filed:
                    return None
                return filed_walk(filed, shape_mask[v] & alive[0], self.tables, live, excluded, shape_mask, alive,
                                  key, runnable)
            return self.first_runnable(filed, shape_mask[v] & alive[0], live=live, excluded=excluded,
                                       shape_mask=shape_mask, alive=alive, key=key, runnable=runnable,
                                       node_key=self.node_key, tables=self.tables)
        elif alive[0] != -1 and self.node_key is not None and self.few_queues(v):
            # a few sub-queues, no job of its own, shapes restricted: its sub-queues with a
            # live shape, lowest key first, without the heap or its renewal
            children = self.alive_queues_under(v)
            if self.own_child and self.tables is not None:
                return walk_by_key(children, self.tables, self, is_job, live, excluded, present, shape_mask, alive,
                                   key, runnable)
            return self.first_child(children, descend=self, is_job=is_job, live=live, excluded=excluded,
                                    present=present, shape_mask=shape_mask, alive=alive, key=key,
                                    runnable=runnable, node_key=self.node_key, tables=self.tables)
        deferred = self.deferred
        if deferred and v in deferred:
            self.renew(deferred.pop(v))
        heap = self.heaps[v]
        tried = []
        found = None
        while heap:
            entry = heap[0]
            c = (<tuple>entry)[4]
            if (<tuple>entry)[3] != version[c] or live[c] <= 0 or not present[c]:
                heappop(heap)
                continue
            if (excluded is None or live[c] > excluded[c]) and (fifo_job == -1 or not is_job[c] or c == fifo_job) \
                    and (alive[0] == -1 or shape_mask[c] & alive[0]):
                # (a FIFO queue's later jobs wait)
                if is_job[c]:
                    found = key[c] if runnable(key[c]) else None
                else:
                    found = self.walk(c)
                if found is not None:
                    break
            tried.append(heappop(heap))
            if len(tried) >= self.heap_tries and alive[0] != -1 and self.node_key is not None:
                rest = True
                break
        for entry in tried:
            heappush(heap, entry)
        if rest:
            # shapes restricted, the first children tried in vain: the others with a live
            # shape, lowest key first (``first_runnable_child``)
            passed = {(<tuple>entry)[4] for entry in tried}
            children = [q for q in self.alive_queues_under(v) if q not in passed]
            if fifo_job >= 0:
                if fifo_job not in passed:
                    children.append(fifo_job)  # (a FIFO queue's other jobs wait)
            elif fifo_job == -1:
                children += [j for j in self.shapes.alive_jobs_under(v) if j not in passed]
            if self.own_child and self.tables is not None:
                found = walk_by_key(children, self.tables, self, is_job, live, excluded, present, shape_mask, alive,
                                    key, runnable)
            else:
                found = self.first_child(children, descend=self, is_job=is_job, live=live, excluded=excluded,
                                         present=present, shape_mask=shape_mask, alive=alive, key=key,
                                         runnable=runnable, node_key=self.node_key, tables=self.tables)
        return found


def descend_tree(Py_ssize_t v, list heaps, *, is_job, list key, list live, fifo_jobs, list version, present,
                 runnable, excluded=None, shapes=None, node_key=None, dict deferred=None, renew=None,
                 first_runnable=None, first_child=None, tables=None):
    """``descent.descend_tree``, statement for statement: the same heap walk (``heapq``'s
    own pops and pushes on the same lists, so the same layouts), the same conditions read
    in the same order at each child, so the same ``runnable`` calls in the same order and
    the same pick; the same switch to the index past ``descent.HEAP_TRIES`` children tried
    in vain (read at each call, as the reference reads it). What it saves is the
    interpreter: the recursion is a C call (``_Descent.walk``) instead of a closure's
    frame, and with ``tables`` the jobs-only and the children's walks are this module's
    own (``first_runnable_filed``, ``first_runnable_child``: called as C functions when
    ``first_runnable`` / ``first_child`` are this module's, else the given ones)."""
    cdef _Descent walk = _Descent.__new__(_Descent)
    walk.heaps, walk.key, walk.live, walk.version = heaps, key, live, version
    walk.is_job, walk.fifo_jobs, walk.present, walk.runnable = is_job, fifo_jobs, present, runnable
    walk.excluded, walk.shapes, walk.node_key, walk.deferred, walk.renew = excluded, shapes, node_key, deferred, renew
    walk.first_runnable = reference_descent.first_runnable_filed if first_runnable is None else first_runnable
    walk.first_child = reference_descent.first_runnable_child if first_child is None else first_child
    walk.own_filed = first_runnable is first_runnable_filed
    walk.own_child = first_child is first_runnable_child
    walk.tables = tables
    walk.heap_tries = reference_descent.HEAP_TRIES
    if shapes is None:
        walk.alive, walk.shape_mask, walk.has_queues = [-1], [], ()
    else:
        walk.alive, walk.shape_mask, walk.has_queues = shapes.alive_shapes, shapes.shape_mask, shapes.has_queues
        walk.own_index = own_shape_index(shapes)
        if walk.own_index:
            walk.queue_kids, walk.shape_jobs_under = shapes._queue_kids, shapes._shape_jobs_under
            walk.few_queues_max = reference_descent.FEW_QUEUES
    return walk.walk(v)


cdef bint own_shape_index(shapes) except -1:
    """Whether the descent may read ``shapes``' tables itself: its class's
    ``jobs_by_shape``, ``few_queues`` and ``alive_queues_under`` are ``ShapeIndex``'s own
    (``descent.SHAPE_INDEX_READERS``: not overridden, not replaced on the class), its port
    is this module's ``queues_meeting``, and its tables are dicts. Anything else is
    called as the reference calls it."""
    cls = type(shapes)
    jobs_by_shape, few_queues, alive_queues_under = reference_descent.SHAPE_INDEX_READERS
    return (getattr(cls, "jobs_by_shape", None) is jobs_by_shape
            and getattr(cls, "few_queues", None) is few_queues
            and getattr(cls, "alive_queues_under", None) is alive_queues_under
            and getattr(shapes, "_queues_meeting", None) is queues_meeting
            and type(getattr(shapes, "_queue_kids", None)) is dict
            and type(getattr(shapes, "_shape_jobs_under", None)) is dict)


def shape_bits(shapes):
    """``descent.shape_bits``: the mask of the shape numbers ``shapes`` (bit s set for each
    s listed), the same int. The bits are set in a C integer while every number is below
    63, else in a byte buffer read as one little-endian int (``int.from_bytes``), where the
    reference makes an int per shape. A negative number raises ``ValueError``, as
    ``1 << s`` does."""
    cdef list numbers = shapes if type(shapes) is list else list(shapes)
    cdef Py_ssize_t s, top = -1
    cdef unsigned long long small = 0
    cdef bytearray buffer
    cdef unsigned char *bytes_of
    for number in numbers:
        s = number
        if s < 0:
            raise ValueError("negative shift count")
        if s > top:
            top = s
    if top < 63:
        for number in numbers:
            s = number
            small |= 1ULL << s
        return small
    buffer = bytearray((top >> 3) + 1)
    bytes_of = buffer
    for number in numbers:
        s = number
        bytes_of[s >> 3] |= <unsigned char>(1 << (s & 7))
    return int.from_bytes(buffer, "little")


from cpython.long cimport PyLong_AsUnsignedLongLongMask


def queues_meeting(queues, list shape_mask, alive):
    """``meeting``, for Python callers."""
    return meeting(queues, shape_mask, alive)


cdef list meeting(queues, list shape_mask, alive):
    """``descent.queues_meeting``: the nodes of ``queues`` whose mask meets ``alive``, in
    their order. While ``alive`` is below 2**63 (>= 0) each mask is tested by its low 64
    bits as a C integer (``PyLong_AsUnsignedLongLongMask``, the int modulo 2**64): the bits
    of ``mask & alive`` above the 63rd are those of ``alive``, all clear, so the two tests
    agree; a larger ``alive`` is tested by Python's ``&``, as in the reference."""
    cdef list out = []
    cdef Py_ssize_t q
    cdef unsigned long long low_alive
    if 0 <= alive < (1 << 63):
        low_alive = alive
        for node in queues:
            q = node
            if PyLong_AsUnsignedLongLongMask(shape_mask[q]) & low_alive:
                out.append(node)
        return out
    for node in queues:
        if shape_mask[<Py_ssize_t>node] & alive:
            out.append(node)
    return out
