# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
"""The compiled DFF view catch-up: ``DFFSorter._replay`` with the methods it calls per
node (``_leaf_blocked``, ``_fairness``, ``_pool_min``, ``_push``, ``_compact_pool``;
``policies/dff_online.py``), statement for statement.

The pure-Python methods are the reference and the fallback (``machinery/compiled.py``
chooses). A view's catch-up does no float arithmetic: Alg. 2 line 9's override only
compares a queue's raw fairness with 1 and with its lowest schedulable child's, and
moves floats (the shared ``raw``, the view's ``share`` and pool entries). The reference
and this port share one layout of what a replay writes (issue 24, round 7): a view's
schedulable counts and pool-entry versions are ``array('q')`` (``views.counters``),
each queue's pool heap three parallel typed arrays (``dff_online.PoolHeap``: shares as
doubles, versions and children as 64-bit ints). The reference moves them with
``heapq``'s algorithm on ``(share, version, child)`` tuples built from the arrays; this
port reads and writes the same buffers through C pointers (``pool_push``, ``pool_pop``,
``_Replay.compact_pool``: the same sift moves, the same comparisons in the same order,
an entry compared with another as its tuple is, lexicographically, on C doubles and
integers; a share is never NaN, so ``==`` then ``<`` on the first differing field is the
tuple's order), so each pool holds the same entries in the same layout, and renews the
same versions: the view it leaves is the reference's, entry for entry, with no tuple,
boxed version or boxed share per pool entry. ``share`` stays a list of the shared float
objects (the pick side's walks read it as a list); an override's share is read from the
pool's array, a new float of the same double in both. The one rare path left (a queue
with a history leaf) calls back into the sorter's Python method.

A view's tables are read once per view, not once per catch-up (``_Replay`` kept on the
view, ``view.kernel``; rebuilt if the sorter is another, which a copied view's is not:
``_View.derive`` clears it); the counters' buffers are read at each replay
(``_Replay.load``: an appended job may have moved them).

Its parity with the reference is tested decision by decision
(``tests/test_dff_kernel.py``).
"""

from cpython cimport array
from libc.math cimport signbit


cdef inline bint entry_lt(double x, long long u, long long a, double y, long long w, long long b):
    """``(x, u, a) < (y, w, b)`` for two pool entries ``(share, version, child)``, as
    tuples compare: the first field that differs (``==``) decides (``<``). Shares are
    doubles, never NaN (a NaN would make the tuple order differ)."""
    if x != y:
        return x < y
    if u != w:
        return u < w
    return a < b


cdef void sift_down(double *share, long long *version, long long *child, Py_ssize_t startpos,
                    Py_ssize_t pos):
    """``heapq``'s ``_siftdown`` on a pool's arrays (``PoolHeap._sift_down``): the entry
    at ``pos`` moved up towards ``startpos`` while it is lower than its parent."""
    cdef double s = share[pos]
    cdef long long v = version[pos], c = child[pos]
    cdef Py_ssize_t parentpos
    while pos > startpos:
        parentpos = (pos - 1) >> 1
        if not entry_lt(s, v, c, share[parentpos], version[parentpos], child[parentpos]):
            break
        share[pos], version[pos], child[pos] = share[parentpos], version[parentpos], child[parentpos]
        pos = parentpos
    share[pos], version[pos], child[pos] = s, v, c


cdef void sift_up(double *share, long long *version, long long *child, Py_ssize_t endpos, Py_ssize_t pos):
    """``heapq``'s ``_siftup`` (``PoolHeap._sift_up``): the lower child moved up until a
    leaf, then the entry at ``pos`` down into place with :func:`sift_down`."""
    cdef Py_ssize_t startpos = pos, childpos = 2 * pos + 1, rightpos
    cdef double s = share[pos]
    cdef long long v = version[pos], c = child[pos]
    while childpos < endpos:
        rightpos = childpos + 1
        if rightpos < endpos and not entry_lt(share[childpos], version[childpos], child[childpos],
                                              share[rightpos], version[rightpos], child[rightpos]):
            childpos = rightpos
        share[pos], version[pos], child[pos] = share[childpos], version[childpos], child[childpos]
        pos = childpos
        childpos = 2 * pos + 1
    share[pos], version[pos], child[pos] = s, v, c
    sift_down(share, version, child, startpos, pos)


cdef class _PoolArrays:
    """A ``PoolHeap``'s three arrays held as C fields (``_Replay.arrays_of``): read without
    an attribute lookup per heap operation. The arrays are the pool's own (pushed and
    popped in place); ``source`` is the pool they are of."""
    cdef object source
    cdef array.array share, version, child

    def __init__(self, pool):
        self.source = pool
        self.share, self.version, self.child = pool.share, pool.version, pool.child


cdef int pool_push(_PoolArrays pool, double s, long long v, long long c) except -1:
    """``PoolHeap.push``: the entry appended to the three arrays (grown as ``array``
    grows, ``resize_smart``), then sifted in C."""
    cdef Py_ssize_t n = len(pool.share)
    array.resize_smart(pool.share, n + 1)
    array.resize_smart(pool.version, n + 1)
    array.resize_smart(pool.child, n + 1)
    pool.share.data.as_doubles[n] = s
    pool.version.data.as_longlongs[n] = v
    pool.child.data.as_longlongs[n] = c
    sift_down(pool.share.data.as_doubles, pool.version.data.as_longlongs, pool.child.data.as_longlongs, 0, n)
    return 0


cdef int pool_pop(_PoolArrays pool) except -1:
    """``PoolHeap.pop``: the last entry moved to the top, the arrays shortened, the top
    sifted in C."""
    cdef Py_ssize_t n = len(pool.share) - 1
    cdef double *s = pool.share.data.as_doubles
    cdef long long *v = pool.version.data.as_longlongs
    cdef long long *c = pool.child.data.as_longlongs
    if n > 0:
        s[0], v[0], c[0] = s[n], v[n], c[n]
    array.resize_smart(pool.share, n)
    array.resize_smart(pool.version, n)
    array.resize_smart(pool.child, n)
    if n > 1:
        sift_up(pool.share.data.as_doubles, pool.version.data.as_longlongs, pool.child.data.as_longlongs, n, 0)
    return 0


def pool_heap_ops(pool, list ops):
    """Apply ``ops`` to a ``PoolHeap`` with the kernel's sifts, for the tests: an entry
    ``(share, version, child)`` is pushed (``pool_push``), None pops the lowest
    (``pool_pop``)."""
    cdef _PoolArrays arrays = _PoolArrays(pool)
    for entry in ops:
        if entry is None:
            pool_pop(arrays)
        else:
            pool_push(arrays, entry[0], entry[1], entry[2])


cdef inline int defer_pick(dict deferred, object p, object c) except -1:
    """``dff_online._defer_pick``: mark child ``c`` of ``p`` for a new pick entry when a
    descent next reads ``p``'s heap (``view.deferred``)."""
    cdef object later = deferred.get(p)
    if later is None:
        deferred[p] = {c: None}
    else:
        (<dict>later)[c] = None
    return 0


cdef inline bint _same_float(object a, object b):
    """``dff_online._same_float``: the same double, zeros' signs included."""
    cdef double x = a, y = b
    return x == y and (x != 0.0 or signbit(x) == signbit(y))


cdef class _Replay:
    """A view's state for ``replay``: the sorter's and the view's tables, read once (the
    tables are the same lists and arrays for the sorter's life: nodes are appended in
    place), and the counters' buffers, read at each replay (:meth:`load`: an appended node
    may have moved them)."""
    cdef object sorter, view, saturated_mask
    cdef long long mask
    cdef bint small_masks
    cdef list levels
    cdef list parent, depth, is_job, raw, alive, kids, live, needs
    cdef list share, pool_heap, pools
    cdef array.array unblocked_of, version_of
    cdef long long *unblocked
    cdef long long *version
    cdef dict deferred, history

    def __init__(self, sorter, view):
        self.sorter = sorter
        self.view = view
        self.parent = sorter.parent
        self.depth = sorter.depth
        self.is_job = sorter.is_job
        self.raw = sorter.raw
        self.alive = sorter.alive
        self.kids = sorter.kids
        self.live = sorter.live
        self.needs = sorter.needs
        self.history = sorter._history
        self.unblocked_of = view.unblocked
        self.share = view.share
        self.version_of = view.version
        self.pool_heap = view.pool_heap
        self.deferred = view.deferred
        self.saturated_mask = view.saturated_mask
        # the masks as C integers when every resource's bit fits in one (``needs`` has a
        # bit per resource): the same ``&``
        self.small_masks = <long>sorter.m <= 62
        self.mask = view.saturated_mask if self.small_masks else 0
        self.levels = []
        self.pools = []

    def __reduce__(self):
        """A copy of the view (``copy.deepcopy`` of a scheduler: ``explain``, ``forecast``)
        or a pickle holds no ``_Replay`` (its C pointers are into the original view's
        buffers): ``replay`` makes the copy its own at its first catch-up."""
        return _no_replay, ()

    cdef _PoolArrays arrays_of(self, Py_ssize_t p):
        """Queue ``p``'s pool arrays, kept per queue while its ``PoolHeap`` is the same
        object (a rebuild or the reference's compaction puts a new one in its place)."""
        cdef object pool = self.pool_heap[p]
        cdef _PoolArrays arrays
        if p >= len(self.pools):
            self.pools.extend([None] * (len(self.pool_heap) - len(self.pools)))
        arrays = <_PoolArrays>self.pools[p]
        if arrays is None or arrays.source is not pool:
            arrays = _PoolArrays(pool)
            self.pools[p] = arrays
        return arrays

    cdef inline void load(self):
        """The counters' buffers as they are now (no node is appended during a replay)."""
        self.unblocked = self.unblocked_of.data.as_longlongs
        self.version = self.version_of.data.as_longlongs

    cdef inline bint leaf_blocked(self, Py_ssize_t idx) except -1:
        """``DFFSorter._leaf_blocked``."""
        if not self.live[idx]:
            return True
        if self.small_masks:
            return (<long long>self.needs[idx] & self.mask) != 0
        return bool(self.needs[idx] & self.saturated_mask)  # needs a saturated resource

    cdef bint pool_min(self, Py_ssize_t p, double *low) except -1:
        """``DFFSorter._pool_min``: whether ``p``'s pool has a current schedulable entry,
        its share in ``low`` (the stale entries above it popped)."""
        cdef _PoolArrays pool = self.arrays_of(p)
        cdef list alive = self.alive
        cdef Py_ssize_t c
        while len(pool.share):
            c = pool.child.data.as_longlongs[0]
            if pool.version.data.as_longlongs[0] == self.version[c] and self.unblocked[c] > 0 and alive[c]:
                low[0] = pool.share.data.as_doubles[0]
                return True
            pool_pop(pool)
        return False

    cdef object fairness(self, Py_ssize_t p):
        """``DFFSorter._fairness``: Alg. 2 line 9 (strict, as the pseudo-code). The
        pool's share is read from its array as the reference reads it (a new float of
        the same double)."""
        cdef double low
        raw = self.raw[p]
        if p in self.history:  # (only with decayed usage)
            return self.sorter._fairness_with_history(self.view, p)
        if <double>raw > 1.0:
            if self.pool_min(p, &low) and low < <double>raw:
                return low
        return raw

    cdef int push(self, object up, object node) except -1:
        """``DFFSorter._push``: re-key child ``node`` of ``up`` (both as the int objects
        the tables hold, the keys ``deferred`` takes: no int made per push)."""
        cdef Py_ssize_t p = up
        cdef Py_ssize_t c = node
        cdef long long ver = self.version[c] + 1
        cdef _PoolArrays pool = self.arrays_of(p)
        self.version[c] = ver
        if self.unblocked[c] > 0:
            pool_push(pool, <double>self.share[c], ver, c)
        defer_pick(self.deferred, up, node)
        if len(pool.share) > 4 * <long>self.kids[p] + 16:
            self.compact_pool(pool)
        return 0

    cdef int compact_pool(self, _PoolArrays pool) except -1:
        """``DFFSorter._compact_pool``, in place: the current schedulable entries kept in
        heap order (the reference's filter), then ``heapq.heapify``'s loop (``siftup``
        from the last parent to the root; CPython's cache-friendly order for lists past
        2,500 entries sifts every node after its children's subtrees too, and a sift
        touches only its subtree, so it gives the same layout)."""
        cdef array.array share_of = pool.share, version_of = pool.version, child_of = pool.child
        cdef double *share = share_of.data.as_doubles
        cdef long long *version = version_of.data.as_longlongs
        cdef long long *child = child_of.data.as_longlongs
        cdef list alive = self.alive
        cdef Py_ssize_t n = len(share_of), i, k = 0, c
        for i in range(n):
            c = child[i]
            if version[i] == self.version[c] and self.unblocked[c] > 0 and alive[c]:
                share[k], version[k], child[k] = share[i], version[i], child[i]
                k += 1
        array.resize_smart(share_of, k)
        array.resize_smart(version_of, k)
        array.resize_smart(child_of, k)
        for i in range((k >> 1) - 1, -1, -1):
            sift_up(share_of.data.as_doubles, version_of.data.as_longlongs, child_of.data.as_longlongs, k, i)
        return 0

    cdef long rekey_job(self, object node, dict counted) except? -1:
        """``DFFSorter._replay``'s first pass for job ``idx``: its blocked flag, share and
        the schedulable counts along its path (each queue's count before the batch moved
        it kept in ``counted``, when given), then its pool entry pushed, or kept and the
        job only marked for a new pick entry. Returns the change of its count. (Dict keys
        are the int objects of the tables, ``node`` and ``parent``'s items.)"""
        cdef list parent = self.parent, share = self.share
        cdef long long *unblocked = self.unblocked
        cdef Py_ssize_t idx = node, a
        queue = parent[idx]
        cdef long now = 0 if self.leaf_blocked(idx) else 1
        cdef long delta = now - unblocked[idx]
        unblocked[idx] = now
        before = share[idx]
        share[idx] = self.raw[idx]
        if delta:
            up = parent[idx]
            a = up
            while a >= 0:
                if counted is not None and up not in counted:
                    counted[up] = unblocked[a]
                unblocked[a] += delta
                up = parent[a]
                a = up
            self.push(queue, node)
        elif now and not _same_float(before, share[idx]):
            self.push(queue, node)
        else:
            defer_pick(self.deferred, queue, node)  # (its pool entry stands)
        return delta


cdef int replay_one(_Replay b, object node) except -1:
    """:func:`replay` of one node without the batch's per-level dicts: its levels then
    hold one node each, the node's queue (or the queue itself) and its ancestors, so the
    batch's loop, deepest level first, is this walk up (to the root, which is at level 0
    and never re-keyed), with the same pushes and marks in the same order; a queue's
    count before the walk moved it (``counted``) is its count less the job's change."""
    cdef list parent = b.parent, share = b.share, raw = b.raw
    cdef long long *unblocked = b.unblocked
    cdef dict deferred = b.deferred
    cdef Py_ssize_t idx = node, q
    cdef long delta = 0
    cdef bint was
    if not b.is_job[idx]:
        if not idx:
            share[0] = raw[0]  # (the root has no override, no parent)
            return 0
        up = node
    else:
        delta = b.rekey_job(node, None)
        up = parent[idx]
    q = up
    while q:  # (every node but the root, 0, is at level 1 or deeper)
        before = share[q]
        share[q] = b.fairness(q)
        above = parent[q]
        was = unblocked[q] - delta > 0
        if was != (unblocked[q] > 0) or (was and not _same_float(before, share[q])):
            b.push(above, up)
        else:
            defer_pick(deferred, above, up)  # (its pool entry stands)
        up = above
        q = above
    return 0


def _no_replay():
    """What a view's copy holds for its ``_Replay`` (``_Replay.__reduce__``): none."""
    return None


def replay(sorter, view, nodes):
    """``DFFSorter._replay``: bring ``view`` up to date after ``nodes`` changed, each
    ancestor re-keyed once, deepest level first; a node whose pool entry would not change
    is only marked for a new pick entry (the reference's docstring says why)."""
    cdef _Replay b = view.kernel
    if b is None or b.sorter is not sorter:
        b = _Replay(sorter, view)
        view.kernel = b
    b.load()
    cdef list parent = b.parent, depth = b.depth, is_job = b.is_job, raw = b.raw
    cdef list share = b.share, levels
    cdef long long *unblocked = b.unblocked
    cdef dict deferred = b.deferred, counted = {}
    cdef Py_ssize_t idx, a, q, d
    cdef long now, delta
    cdef bint was
    cdef dict level
    if len(nodes) == 1:
        for node in nodes:
            replay_one(b, node)
        return
    # the per-level dicts kept on the view's ``_Replay`` between batches (emptied here)
    levels = b.levels
    if len(levels) != <long>sorter.max_depth + 1:
        levels = b.levels = [{} for _ in range(<long>sorter.max_depth + 1)]
    else:
        for level in levels:
            level.clear()
    # (dict keys are the int objects of ``nodes`` and ``parent``: none made per node)
    for node in nodes:
        idx = node
        if not is_job[idx]:
            if idx:
                (<dict>levels[<long>depth[idx]])[node] = None
            else:
                share[0] = raw[0]  # (the root has no override, no parent)
            continue
        b.rekey_job(node, counted)
        up = parent[idx]
        (<dict>levels[<long>depth[up]])[up] = None
    for d in range(<long>sorter.max_depth, 0, -1):
        level = <dict>levels[d - 1]
        for node in <dict>levels[d]:
            q = node
            before = share[q]
            share[q] = b.fairness(q)
            up = parent[q]
            kept = counted.get(node)
            was = (unblocked[q] if kept is None else <long>kept) > 0
            if was != (unblocked[q] > 0) or (was and not _same_float(before, share[q])):
                b.push(up, node)
            else:
                defer_pick(deferred, up, node)  # (its pool entry stands)
            level[up] = None


def push_entries(sorter, view, Py_ssize_t p, children):
    """Re-key each of ``children`` of queue ``p`` in ``view`` in turn with the kernel's
    push (``_Replay.push``, its pool compacted when grown past its bound), for the tests:
    ``DFFSorter._push`` on each gives the same pool."""
    cdef _Replay b = _Replay(sorter, view)
    b.load()
    for c in children:
        b.push(p, c)


# --- a task start or end: ``DFFSorter._leaf_changed`` -------------------------------------------
cdef object _raw_fairness(list usage, object fr):
    """``dff.fairness`` (Def. 2, Eq. 6): ``max_r U_r / FR_r`` over ``FR_r > 0``, 0.0 when
    there is none. The same IEEE division and comparisons on the same doubles (a usage
    entry is a float; an FR entry a float, or an int of the capacity, converted as
    Python's ``float / int`` converts it), so the same float."""
    cdef double x, best = 0.0, f
    cdef bint found = False
    cdef Py_ssize_t r
    if not fr:
        return 0.0
    for r in range(len(fr)):
        f = fr[r]
        if f > 0:
            x = <double>usage[r] / f
            if not found or x > best:
                best = x
                found = True
    return best if found else 0.0


cdef Py_ssize_t _bisect_left(list a, Py_ssize_t x):
    """``bisect.bisect_left`` over a list of ints."""
    cdef Py_ssize_t lo = 0, hi = len(a), mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if <Py_ssize_t>a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def leaf_changed(sorter, Py_ssize_t idx, list before, long d_running, now=0.0):
    """``DFFSorter._leaf_changed``: job ``idx``'s task started (``d_running`` 1) or ended
    (-1) and its usage is now its ``OnlineJob``'s. Without decayed usage, while the
    shared state is neither dirty nor stale (every decision's usual case), the methods it
    calls run here statement for statement (``_file_usage``, ``_file_demanding``,
    ``_walk_counts``, ``_job_fr``'s kept FR, ``_add_usage`` with ``dff.fairness``,
    ``_touch``): the same edits of the lists and the columns of doubles, the same float
    subtractions, additions and divisions, so the same shared state. Otherwise (and for a
    job FR not kept) it calls the sorter's Python methods."""
    if sorter.decay is not None or sorter.dirty or sorter.stale:
        return sorter._leaf_changed(idx, before, d_running=d_running, now=now)
    cdef list parent = sorter.parent, usage = sorter.usage, raw = sorter.raw, fr = sorter.fr
    cdef list live = sorter.live, running = sorter.running
    cdef Py_ssize_t q = parent[idx], p, v, pos, r, m
    cdef list after = sorter.jobs[sorter.key[idx]].usage
    cdef list row = list(after), used, columns, u
    cdef dict drifted = sorter.drifted
    cdef bint has = False, listed
    cdef double d
    usage[idx] = row
    # _file_usage (not leaving)
    m = len(row)
    for r in range(m):
        if row[r]:
            has = True
            break
    used = sorter.used[q]
    pos = _bisect_left(used, idx)
    listed = pos < len(used) and <Py_ssize_t>used[pos] == idx
    columns = sorter.used_columns[q]
    if has and not listed:
        used.insert(pos, idx)
        for r in range(min(len(columns), m)):
            columns[r].insert(pos, row[r])
    elif listed and not has:
        del used[pos]
        for r in range(len(columns)):
            del columns[r][pos]
    elif has:
        for r in range(min(len(columns), m)):
            columns[r][pos] = row[r]
    if (has or listed) and pos < <Py_ssize_t>sorter.used_sums_valid[q]:
        sorter.used_sums_valid[q] = pos
    # _file_demanding
    if has and <long>live[idx] > 0:
        (<dict>sorter.used_demanding[q])[idx] = None
    else:
        (<dict>sorter.used_demanding[q]).pop(idx, None)
    # _walk_counts (d_live 0: live += 0 leaves each count as it is)
    v = idx
    while v >= 0:
        running[v] = <long>running[v] + d_running
        v = parent[v]
    sorter.views.tick()  # (drops old views at most: dirty and stale are as checked above)
    # raw fairness of the job, with its kept FR (``_job_fr``)
    job_fr = (<dict>sorter._job_frs).get(idx) if sorter.exact else None
    if job_fr is None:  # (not kept, or not exact: the method reads the last rebuild's)
        job_fr = sorter._job_fr(idx)
    raw[idx] = _raw_fairness(row, job_fr)
    # _add_usage, with delta = after - before
    cdef list delta = [<double>after[r] - <double>before[r] for r in range(len(after))]
    p = q
    while p >= 0:
        drifted[p] = None
        u = usage[p]
        for r in range(len(delta)):
            d = delta[r]
            if d:
                u[r] = <double>u[r] + d
        raw[p] = _raw_fairness(u, fr[p])
        p = parent[p]
    # _touch
    for view in sorter.views.views:
        (<dict>view.pending)[idx] = None


def task_changed(sorter, name, demand, long d_running, now=0.0):
    """``DFFSorter.allocated`` (``d_running`` 1: ``OnlineSorter.allocated`` adds the task's
    demand to the job's usage) and ``released`` (-1: subtracts it, floored at 0.0 by
    ``x if x > 0.0 else 0.0``), then :func:`leaf_changed`. The usage is updated with the
    same Python operations on the same objects (``+``, ``-``, ``>``), so the same floats."""
    job = sorter.jobs[name]
    cdef list usage = job.usage
    cdef list before = list(usage)
    cdef Py_ssize_t r = 0
    if d_running > 0:
        for d in demand:
            usage[r] += d
            r += 1
    else:
        for d in demand:
            left = usage[r] - d
            usage[r] = left if left > 0.0 else 0.0
            r += 1
    job.running += d_running
    leaf_changed(sorter, sorter.index[name], before, d_running, now)
