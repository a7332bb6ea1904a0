"""The tree sorters' shared decision machinery: the descent, the candidates' shortcut
and the exclusion counts (H-DRF Alg. 4, DFF Alg. 3).

Every tree sorter keeps, per node, a lazy min-heap of its children keyed by the tie rule
(``machinery/ties.py``); these functions decide with those heaps, so the H-DRF and DFF
sorters walk them one way (the flat sorters walk their one heap the same way,
``machinery/flat.py``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from fairshare.policies.machinery.ties import DIGITS
from fairshare.policies.online import Runnable

#: The tree sorters' candidate-path thresholds (``OnlineSorter.among_max`` and
#: ``among_cost``): the engine asks :func:`pick_among_tree` instead of the descent for c
#: candidates when c <= 100 and c * c * 0.1 <= demanding jobs. Comparing a candidate costs
#: a parent walk and, only for the children met on the greedy walk, a heap key, about a
#: tenth of passing one job that cannot run in the descent (a heap pop, a runnable check,
#: and the pick-heap renewal before it). First chosen (200, 0.1) from an alternating sweep
#: of (48, 0.5), (100, 0.2), (200, 0.1), (400, 0.05) on bench_scaling's workload at 300,
#: 1,000 and 3,000 jobs (docs/performance.md, "The saturated steady state", second pass).
#: The cap lowered to 100 in issue 24's round 9, when the descent had become shape-indexed
#: and compiled and passes few jobs that cannot run: a sweep of the cap (32, 64, 100, 200,
#: 400; cost 0.1) at 1,000, 3,000 and 10,000 jobs, hdrf and dff, two alternated rounds
#: after 2,000 untimed completions (docs/performance.md, "The candidate cap at 100"):
#: at 10,000 jobs hdrf 19,602 decisions/s at 100 against 17,556 at 200, dff 16,941
#: against 16,934; at 3,000 within 3%; at 1,000 the cap does not bind (the square rule
#: stops the list at 100 there). A lower cap sends more decisions to the descent, dearer
#: for them (32: 3-9% slower at 3,000 jobs).
TREE_AMONG_MAX = 100
TREE_AMONG_COST = 0.1

#: While the engine restricts the shapes, :func:`descend_tree` walks a node's pick heap for
#: this many children tried in vain, then the rest of its children with a live shape by the
#: index (``ShapeIndex.alive_queues_under``): the heap walk pays a pop and a push back per
#: child passed, the index a key per live child listed, so the heap first while a runnable
#: child usually comes first (bench_scaling's fill and steady state: the index from the
#: first child made the 1k hdrf fill 1.8x slower), the index past a few (the Google 2011
#: trace's bands of hundreds of user queues, most without a live shape).
HEAP_TRIES = 8

#: While the engine restricts the shapes, a queue with at most this many sub-queues and no
#: job of its own filed under a shape is walked by the index from its first
#: child (``ShapeIndex.few_queues``): its sub-queues with a live shape by their keys read
#: then, without its heap, so without renewing its pick entries. In a tree of a few levels
#: of a few queues each (bench_scaling's, 4 per queue), a descent renewed the heaps of every
#: queue on its way, about seven entries: most of its cost at 10,000 jobs; keys of a few
#: children cost less. Their marks wait in ``deferred`` for a heap walk.
FEW_QUEUES = HEAP_TRIES


def renew_pick_entries(repick, heaps: list[list], *, version: list[int], share: list[float], running: list[int],
                       position: list[int], live: list[int], present: list, parent: list[int],
                       kids: list[int], lazy: list[bool] | None = None,
                       deferred: dict[int, dict[int, None]] | None = None) -> None:
    """Renew the pick entries of the nodes in ``repick`` (re-keyed since the last
    descent), shared by the H-DRF and DFF sorters: each gets a new version (its old
    entries go stale) and, while it has demanding jobs below and is still there
    (``present``), an entry ``(share, running, position, version, node)`` in its parent's
    heap. The heaps then order the children by their current keys, as if each change had
    been pushed at once (the descent reads only the lowest current entries; keys are
    distinct by position among siblings, so the order of pushes does not matter). A heap
    grown past ``4 x children + 16`` entries drops its stale ones (stale for good: a
    changed node gets a new version), so heaps stay O(children). ``repick`` is emptied.

    ``lazy`` and ``deferred``, when given: a node whose parent ``p`` has ``lazy[p]`` (a
    queue whose heap the shape-indexed descent does not read, see :func:`descend_tree`) is
    not renewed here but added to ``deferred[p]``, renewed (by this function, without
    ``lazy``) only when a descent is about to read ``heaps[p]``. Why the pops are the same:
    the descent renews ``deferred[p]`` first, and no key changes between the last renewal
    and that read without its node being marked again (every change re-marks it, and the
    sorter renews before every descent), so the entries pushed then are the ones the
    eager renewal would have pushed, with the keys it would have read; the stale entries
    the delay leaves in the heap carry an old version and are dropped when met, as before."""
    heappush = heapq.heappush
    for v in repick:
        if lazy is not None and lazy[parent[v]]:
            later = deferred.get(parent[v])
            if later is None:
                deferred[parent[v]] = {v: None}
            else:
                later[v] = None
            continue
        ver = version[v] + 1
        version[v] = ver
        if live[v] > 0 and present[v]:
            p = parent[v]
            heap = heaps[p]
            heappush(heap, (round(share[v], DIGITS), running[v], position[v], ver, v))
            if len(heap) > 4 * kids[p] + 16:
                heap = [e for e in heap if e[3] == version[e[4]] and live[e[4]] > 0 and present[e[4]]]
                heapq.heapify(heap)
                heaps[p] = heap
    repick.clear()


def descend_tree(v: int, heaps: list[list], *, is_job: list[bool], key: list[str], live: list[int],
                 fifo_jobs: Callable[[int], list[int] | None], version: list[int], present: list,
                 runnable: Runnable, excluded: list[int] | None = None, shapes: ShapeIndex | None = None,
                 node_key: Callable[[int], tuple] | None = None, deferred: dict[int, dict[int, None]] | None = None,
                 renew: Callable[[dict[int, None]], None] | None = None,
                 first_runnable: Callable[..., str | None] | None = None,
                 first_child: Callable[..., str | None] | None = None, tables: tuple | None = None) -> str | None:
    """H-DRF Alg. 4 / DFF Alg. 3's descent, shared by the tree sorters: from node ``v``,
    take the lowest child in ``heaps[v]`` (entries ``(share, running, position, version,
    child)``, ordered by the tie rule) that has a runnable job below it. An entry is
    current while its version is the child's, the child has demanding jobs below
    (``live``) and is still there (``present``); others are stale and dropped. In a FIFO
    queue (``fifo_jobs(v)`` gives its jobs by arrival) only the earliest demanding runnable
    job competes with the sub-queues.

    ``excluded[c]``, when given, counts the demanding jobs below ``c`` known not to be
    runnable (:meth:`OnlineSorter.exclude`): a child whose demanding jobs are all excluded
    is passed over without descending. ``shapes`` (:class:`ShapeIndex`), when given, holds
    the shapes filed below each node and the shapes that may fit in this call, as bit
    masks: while the engine restricts them, a child whose mask does not meet them is passed
    over too (the live set is read at every child: a runnable check may clear a shape's bit
    on the way), and in a fair queue with only jobs as children the jobs of the live shapes
    are taken from the index (``ShapeIndex.jobs_by_shape``) and tried in the order of
    their keys (``node_key(c)``: the heap's key, current after the pick entries' renewal),
    instead of walking the queue's heap past the others. All of this only passes over
    children with no runnable job below, so the descent's answer is unchanged. The heap
    walk (lowest first, stale entries dropped, the ones tried put back) is inlined (this
    runs once per decision).

    ``deferred`` (``renew_pick_entries``' ``lazy`` renewal): the children of a node whose
    pick entries were left to renew until its heap is read; ``renew(deferred.pop(v))``
    renews them just before the walk reads ``heaps[v]``.

    While the shapes are restricted, a node with queues among its children (or a FIFO
    queue) whose heap walk has tried :data:`HEAP_TRIES` children in vain goes on by the
    index (issue 24, round 8): its other children with a live shape (queues from
    ``ShapeIndex.alive_queues_under``, jobs from ``alive_jobs_under``; in a FIFO queue only
    its earliest demanding runnable job) are tried lowest key first, each queue descended
    into, until one gives a runnable job, without popping the others
    (:func:`first_runnable_child`). Why it gives the heap walk's pick, with the same
    ``runnable`` calls in the same order: after the renewal the heap's current entries are
    exactly the children with demanding jobs that are still there, keyed by ``node_key``,
    and the heap walk pops them in that order (keys are distinct among siblings, by
    position), so the children it has not yet met are those not in ``tried``, in key
    order. The ones it would enter are those not all excluded, of a FIFO queue's jobs only
    the earliest runnable one, and with a live shape at the moment they are met; live bits
    are only cleared during a walk, never set, so a child without a live shape at the
    switch is never entered later, and those the index lists are checked again, in the
    same key order, at the moment they are met. A child it does not list has no live
    shape, so no runnable job below: the heap walk would have popped it and put it back.
    The heap walk goes first because its first child usually gives a runnable job (a
    fill, a steady state with room): a peek then, where listing the live children and
    their keys costs a pass over them. Except in a queue of at most :data:`FEW_QUEUES`
    sub-queues and no job of its own filed under a shape
    (``ShapeIndex.few_queues``; issue 24, round 10): the walk by the index from its first
    child, for the same reason with nothing tried yet (a job not filed under a shape has
    no live shape, so the heap walk would enter no job there), with no heap read and so
    no renewal of its pick entries (their marks wait in ``deferred`` for the next heap
    walk there, which renews them first; a heap not read gets no entries).

    ``first_runnable`` (default :func:`first_runnable_filed`, or its compiled port) tries
    a jobs-only queue's jobs by key, ``first_child`` (default :func:`first_runnable_child`,
    or its compiled port) the children of a node with queues below; ``tables`` is what
    they may read for the keys (``(share, running, position)``, as
    :func:`pick_among_tree`'s).

    This is the reference: the sorters call its compiled port (``_hdrf_kernel.descend_tree``,
    ``compiled.tree_descend``; issue 24, round 9) where it is built, which repeats it
    statement for statement with the recursion a C call (a change here is mirrored there:
    ``compiled.PORTED_FROM``)."""
    heappop, heappush = heapq.heappop, heapq.heappush
    if first_runnable is None:
        first_runnable = first_runnable_filed
    if first_child is None:
        first_child = first_runnable_child
    if shapes is None:
        alive, shape_mask, has_queues = [-1], [], ()
    else:
        alive, shape_mask, has_queues = shapes.alive_shapes, shapes.shape_mask, shapes.has_queues

    def descend(v: int) -> str | None:
        if is_job[v]:
            name = key[v]
            return name if runnable(name) else None
        fifo_job = -1
        waiting = fifo_jobs(v)
        if waiting is not None:
            fifo_job = next((c for c in waiting if live[c] > (0 if excluded is None else excluded[c])
                             and (alive[0] == -1 or shape_mask[c] & alive[0]) and runnable(key[c])), -2)
        elif alive[0] != -1 and v not in has_queues and node_key is not None:
            # jobs only, shapes restricted: the live shapes' jobs here, lowest key first
            return first_runnable(shapes.jobs_by_shape(v), shape_mask[v] & alive[0], live=live, excluded=excluded,
                                  shape_mask=shape_mask, alive=alive, key=key, runnable=runnable, node_key=node_key,
                                  tables=tables)
        elif alive[0] != -1 and node_key is not None and shapes.few_queues(v):
            # a few sub-queues, no job of its own, shapes restricted: its sub-queues with a
            # live shape, lowest key first, as past HEAP_TRIES below (the same children in
            # the same order: see the docstring), without the heap or its renewal
            return first_child(shapes.alive_queues_under(v), descend=descend, is_job=is_job, live=live,
                               excluded=excluded, present=present, shape_mask=shape_mask, alive=alive, key=key,
                               runnable=runnable, node_key=node_key, tables=tables)
        if deferred and v in deferred:
            renew(deferred.pop(v))
        heap = heaps[v]
        tried: list = []
        found = None
        rest = False  # (switched to the rest by the index)
        while heap:
            entry = heap[0]
            c = entry[4]
            if entry[3] != version[c] or live[c] <= 0 or not present[c]:
                heappop(heap)
                continue
            if (excluded is None or live[c] > excluded[c]) and (fifo_job == -1 or not is_job[c] or c == fifo_job) \
                    and (alive[0] == -1 or shape_mask[c] & alive[0]):
                # (a FIFO queue's later jobs wait)
                if is_job[c]:
                    found = key[c] if runnable(key[c]) else None
                else:
                    found = descend(c)
                if found is not None:
                    break
            tried.append(heappop(heap))
            if len(tried) >= HEAP_TRIES and alive[0] != -1 and node_key is not None:
                rest = True
                break
        for entry in tried:
            heappush(heap, entry)
        if rest:
            # shapes restricted, the first children tried in vain: the others with a live
            # shape, lowest key first, without walking the heap past the rest
            # (``first_runnable_child``)
            passed = {entry[4] for entry in tried}
            children = [c for c in shapes.alive_queues_under(v) if c not in passed]
            if fifo_job >= 0:
                if fifo_job not in passed:
                    children.append(fifo_job)  # (a FIFO queue's other jobs wait)
            elif fifo_job == -1:
                children += [c for c in shapes.alive_jobs_under(v) if c not in passed]
            found = first_child(children, descend=descend, is_job=is_job, live=live, excluded=excluded,
                                present=present, shape_mask=shape_mask, alive=alive, key=key, runnable=runnable,
                                node_key=node_key, tables=tables)
        return found

    try:
        return descend(v)
    finally:
        # ``descend`` refers to itself (its recursion), a reference cycle that only the
        # cyclic garbage collector would free: one per descent, about 20 closure cells each,
        # most of what set off its collections in the steady state. Emptying the cell
        # breaks the cycle, so reference counting frees them at once
        del descend


def first_runnable_by_key(jobs: list[int], *, live: list[int], excluded: list[int] | None, shape_mask: list[int],
                          alive: list[int], key: list[str], runnable: Runnable, node_key: Callable[[int], tuple],
                          tables: tuple | None = None) -> str | None:
    """:func:`descend_tree`'s walk of a queue whose children are all jobs, while the
    engine restricts the shapes: ``jobs`` (its jobs of the live shapes) tried lowest key
    first (``node_key``; keys are distinct, by position), the first demanding, not
    excluded, of a still live shape (``alive[0]``, read at each: a runnable check may clear
    a bit) and runnable. ``tables`` (``(share, running, position)``, what ``node_key``
    reads) is for the compiled port (``_hdrf_kernel``), which selects the lowest key
    without sorting them all; this one, the reference, sorts by ``node_key``."""
    for c in sorted(jobs, key=node_key):
        if live[c] > (0 if excluded is None else excluded[c]) and shape_mask[c] & alive[0] and runnable(key[c]):
            return key[c]
    return None


def first_runnable_filed(filed: dict[int, dict[int, None]] | None, bits: int, *, live: list[int],
                         excluded: list[int] | None, shape_mask: list[int], alive: list[int], key: list[str],
                         runnable: Runnable, node_key: Callable[[int], tuple], tables: tuple | None = None) -> str | None:
    """:func:`descend_tree`'s walk of a queue whose children are all jobs, while the
    engine restricts the shapes: its jobs filed under the shapes set in ``bits`` (its
    shapes that may fit when the walk starts; ``filed``: its job children per shape,
    ``ShapeIndex.jobs_by_shape``) tried by key (:func:`first_runnable_by_key`). The
    compiled port (``_hdrf_kernel``) reads ``filed`` into its heap of keys without making
    the list of jobs first."""
    return first_runnable_by_key(filed_under(filed, bits), live=live, excluded=excluded, shape_mask=shape_mask,
                                 alive=alive, key=key, runnable=runnable, node_key=node_key, tables=tables)


def first_runnable_child(children: list[int], *, descend: Callable[[int], str | None], is_job: list[bool],
                         live: list[int], excluded: list[int] | None, present: list, shape_mask: list[int],
                         alive: list[int], key: list[str], runnable: Runnable, node_key: Callable[[int], tuple],
                         tables: tuple | None = None) -> str | None:
    """:func:`descend_tree`'s walk of a node with queues among its children, while the
    engine restricts the shapes: ``children`` (those with a live shape: queues and jobs,
    each once) tried lowest key first (``node_key``; distinct among siblings, by position),
    the first that is demanding and not all excluded, still there (``present``), of a still
    live shape (``alive[0]``, read at each: a runnable check may clear a bit) and, a job,
    runnable, or, a queue, with a runnable job below (``descend``, which walks it the same
    way). ``tables`` (``(share, running, position)``, what ``node_key`` reads) is for the
    compiled port (``_hdrf_kernel``), which pops the lowest key from a heap of the
    children's keys instead of sorting them all; this one, the reference, sorts by
    ``node_key``."""
    for c in sorted(children, key=node_key):
        if live[c] > (0 if excluded is None else excluded[c]) and present[c] and shape_mask[c] & alive[0]:
            if is_job[c]:
                if runnable(key[c]):
                    return key[c]
            else:
                found = descend(c)
                if found is not None:
                    return found
    return None


def pick_among_tree(names, *, index: dict[str, int], parent: list[int], live: list[int],
                    node_key: Callable[[int], tuple], fifo_jobs: Callable[[int], list[int] | None],
                    runnable: Runnable, tables: tuple | None = None) -> str | None:
    """:func:`descend_tree`'s answer from the root when only ``names`` can be runnable.
    The descent takes, level by level, the lowest child (``node_key(v)``: v's key in its
    parent's heap, by the tie rule) that has a runnable job below, so the job it returns
    is the runnable one whose path of keys from the root is lowest. In a FIFO queue only
    its earliest demanding runnable job competes, as in the descent (the others are not
    runnable, so the earliest runnable job is a candidate). O(candidates x depth) instead
    of a walk past every job that cannot run.

    The lowest path is found greedily: from the root, the lowest child (by its key) among
    those with a candidate below, and so on down (keys are distinct among siblings, by
    position, so the lexicographic minimum of the paths is exactly this walk). Only the
    keys of the children met on that walk are computed (on the 1,000-job benchmark's
    steady state, 32,462 keys where building every path read 207,601: docs/performance.md,
    "The saturated steady state"). When that job is not runnable, every competing
    candidate's path is built and they are tried in order, as before.

    ``tables``, when given, is ``(share, running, position, ready)``, the tables
    ``node_key`` reads (``node_key(v) == (round(share[v], DIGITS), running[v],
    position[v])`` once ``ready()`` has run): the compiled walk (``_hdrf_kernel``,
    ``compiled.tree_pick_among``) computes the keys from them instead of calling
    ``node_key``; this one, the reference, calls ``node_key`` and ignores them."""
    candidates = {index[name]: name for name in names}
    fifo_first: dict[int, int | None] = {}
    # the tree of the competing candidates' paths: each node's children on them
    below: dict[int, list[int]] = {}
    competing: list[int] = []
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
        competing.append(v)
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
    v = 0
    while True:
        kids = below.get(v)
        if kids is None:
            break  # a candidate job
        v = kids[0] if len(kids) == 1 else min(kids, key=node_key)
    best = candidates[v]
    if runnable(best):
        return best
    return try_by_paths(competing, candidates, v, parent=parent, node_key=node_key, runnable=runnable)


def try_by_paths(competing: list[int], candidates: dict[int, str], lowest: int, *, parent: list[int],
                 node_key: Callable[[int], tuple], runnable: Runnable) -> str | None:
    """:func:`pick_among_tree`'s rare path (also the compiled walk's), when the
    candidate ``lowest`` it found is not runnable: build every other competing
    candidate's path of keys from the root and try them in that order."""
    memo: dict[int, tuple] = {0: ()}

    def path_of(v: int) -> tuple:
        chain = []
        while v not in memo:
            chain.append(v)
            v = parent[v]
        path = memo[v]
        for u in reversed(chain):
            path = memo[u] = path + (node_key(u),)
        return path

    for _path, name in sorted((path_of(c), candidates[c]) for c in competing if c != lowest):
        if runnable(name):
            return name
    return None


class TreeExclusion:
    """:meth:`OnlineSorter.exclude` for the tree sorters (H-DRF, DFF): per node, how many
    of the demanding jobs below are excluded (``excluded``, compared with ``live`` by
    :func:`descend_tree`), kept along the jobs' paths and undone at the next call. Needs
    the sorter's ``index``, ``parent`` and ``live`` tables; ``_grow_excluded`` per node.

    The counts are walked up only when a descent is about to read them
    (:meth:`_excluded_counts`): on a full cluster most decisions compare candidates'
    paths (``pick_among``), which do not use them, while the scheduler excludes every job
    whose shape it finds fitting nowhere. Exclusion only lets the descent skip jobs that
    cannot run, so when the counts are walked does not change a decision."""

    index: dict[str, int]
    parent: list[int]
    live: list[int]

    def _init_excluded(self) -> None:
        self.excluded: list[int] = []
        self._excluded_jobs: list[int] = []  # counted along their paths
        self._to_exclude: list[int] = []  # told, not yet counted

    def _grow_excluded(self) -> None:
        self.excluded.append(0)

    def exclude(self, name: str) -> None:
        idx = self.index.get(name)
        if idx is not None:
            self._to_exclude.append(idx)

    def reset_excluded(self) -> None:
        parent, excluded = self.parent, self.excluded
        for idx in self._excluded_jobs:
            while idx >= 0:
                excluded[idx] -= 1
                idx = parent[idx]
        self._excluded_jobs.clear()
        self._to_exclude.clear()

    def _excluded_counts(self) -> list[int] | None:
        """What :func:`descend_tree` takes (None when nothing is excluded: no checks),
        after counting the jobs excluded since the last call along their paths."""
        if self._to_exclude:
            parent, excluded, live = self.parent, self.excluded, self.live
            for idx in self._to_exclude:
                # only a demanding job not yet excluded (the counts are compared with ``live``)
                if not live[idx] or excluded[idx]:
                    continue
                self._excluded_jobs.append(idx)
                while idx >= 0:
                    excluded[idx] += 1
                    idx = parent[idx]
            self._to_exclude.clear()
        return self.excluded if self._excluded_jobs else None


def shape_bits(shapes: Iterable[int]) -> int:
    """The bit mask of ``shapes`` (shape numbers >= 0): bit s set for each s listed
    (:meth:`ShapeIndex.only_shapes`). The compiled port (``_hdrf_kernel.shape_bits``) sets
    the bits in a buffer and makes one int of it, where this makes an int per shape (at
    10,000 jobs of 624 shapes, ints of up to 624 bits, a few dozen per decision)."""
    mask = 0
    for shape in shapes:
        mask |= 1 << shape
    return mask


def queues_meeting(queues: list[int], shape_mask: list[int], alive: int) -> list[int]:
    """The nodes of ``queues`` whose mask (``shape_mask``) meets ``alive`` (a mask of the
    shapes that may fit, >= 0), in their order (:meth:`ShapeIndex.alive_queues_under`).
    The compiled port (``_hdrf_kernel.queues_meeting``) tests the masks as C integers when
    ``alive`` is below 2**63."""
    return [q for q in queues if shape_mask[q] & alive]


def filed_under(groups: dict[int, dict[int, None]] | None, bits: int) -> list[int]:
    """The nodes of ``groups`` (shape -> nodes filed under it) of the shapes set in ``bits`` (>= 0)."""
    if bits < 0:  # (``bits ^= bits & -bits`` would stay negative: the loop would not end)
        raise ValueError(f"bits must be a mask of shapes, not negative: {bits}")
    out: list[int] = []
    if groups:
        while bits:
            low = bits & -bits
            group = groups.get(low.bit_length() - 1)
            if group:
                out.extend(group)
            bits ^= low
    return out


class ShapeIndex:
    """Shape-indexed descents for the tree sorters (issue 24, item 1): per node, which task
    shapes the jobs below it have, so a descent enters only subtrees holding a job whose
    shape may fit (:meth:`OnlineSorter.file_shape`, ``only_shapes``, ``exclude_shape``).

    The engine numbers the distinct shapes of the jobs' next tasks (demand vector and
    constraints: few, next to the jobs) and files each job under its shape's number as it
    changes (``Scheduler._refile``: at arrival, and when a job's next task changes shape,
    O(depth) here). Each node counts its jobs per shape (``_shape_count``) and keeps the
    shapes with a count as a bit mask (``shape_mask``). Within one ``schedule`` call the
    engine tells which shapes may fit: after a quiet point, those that fit the freed nodes
    (one comparison per shape and freed node, ``engine.fitmemo``), or every shape less
    the ones found to fit nowhere (``exclude_shape``: one bit cleared, where per-job
    exclusion counted every job of the shape along its path and undid it at the next
    call). :func:`descend_tree` passes over a child whose mask does not meet that set.

    Why it is exact (the same pick as the reference sorter): a job is runnable only if its
    next task's shape fits on some node, so every runnable job is filed under a shape the
    engine still holds possible, and a child whose mask misses every such shape has no
    runnable job below. The descent's order among the children that do is unchanged: it
    tries them lowest first as before and still asks ``runnable`` of the job it reaches, so
    constraints on nodes, per-node limits, gangs, queue limits and reservations keep the
    last word (the index is a filter that never drops a child that could run). Until the
    engine restricts the shapes (``alive`` is -1: every shape, also for every other caller
    of ``pick`` after ``reset_excluded``) the masks are not read at all, so a job the engine
    has not filed is never skipped outside its own decisions. Needs the sorter's ``index``
    and ``parent`` tables; ``_grow_shapes`` per node, ``_unfile_shape`` when a job leaves.

    In a queue whose children are all jobs, the descent takes the jobs of the live shapes
    from the index (per node, its job children per shape) and tries them lowest key first,
    which is the order its heap walk would meet them in, without the others: at 10,000
    jobs in 64 leaf queues it had passed about 120 heap entries per descent. At a node with
    queues among its children, past a few children tried in vain, the descent takes its
    other children with a live shape (``alive_queues_under``: its queue children whose
    mask meets the live shapes) the same way: in the Google 2011 trace's priority bands of
    hundreds of user queues, most with no job of a shape that may fit, the heap walk had
    popped and pushed back each of them (issue 24, round 8)."""

    index: dict[str, int]
    parent: list[int]

    def _init_shapes(self, shape_bits_port: Callable[[Iterable[int]], int] | None = None,
                     queues_meeting_port: Callable[[list[int], list[int], int], list[int]] | None = None) -> None:
        """The ports: :func:`shape_bits` and :func:`queues_meeting` compiled, where the
        sorter has them (``compiled.tree_shape_bits()``, ``tree_queues_meeting()``; given
        by the sorter, as this module is below ``compiled`` in the imports), else these."""
        self.shape_mask: list[int] = []  # per node: bit s while some job below is filed under shape s
        self._shape_count: list[dict[int, int]] = []  # per node: shape -> its jobs below
        self._job_shape: dict[int, int] = {}  # job node -> the shape it is filed under
        # per node: its own job children per shape (what ``alive_jobs_under`` reads)
        self._shape_jobs_under: dict[int, dict[int, dict[int, None]]] = {}
        # per node: its queue children (``alive_queues_under`` reads their masks)
        self._queue_kids: dict[int, list[int]] = {}
        #: nodes with a queue among their children (the descent's jobs-only shortcut skips them)
        self.has_queues: set[int] = set()
        #: the shapes that may fit in this ``schedule`` call, a bit mask in a one-element
        #: list (the descent reads it as runnable checks clear bits); -1: every shape
        self.alive_shapes: list[int] = [-1]
        #: ``shape_bits`` for ``only_shapes``, compiled or the reference
        self._shape_bits: Callable[[Iterable[int]], int] = shape_bits_port or shape_bits
        #: ``queues_meeting`` for ``alive_queues_under``, compiled or the reference
        self._queues_meeting: Callable[[list[int], list[int], int], list[int]] = \
            queues_meeting_port or queues_meeting

    def _grow_shapes(self, parent: int, is_job: bool) -> None:
        self.shape_mask.append(0)
        self._shape_count.append({})
        if not is_job and parent >= 0:
            self.has_queues.add(parent)
            self._queue_kids.setdefault(parent, []).append(len(self.shape_mask) - 1)

    def alive_jobs_under(self, v: int) -> list[int]:
        """The jobs directly under ``v`` filed under a shape that may fit (read while the
        engine restricts the shapes): per live shape present under v, its jobs here."""
        return filed_under(self._shape_jobs_under.get(v), self.shape_mask[v] & self.alive_shapes[0])

    def jobs_by_shape(self, v: int) -> dict[int, dict[int, None]] | None:
        """The jobs directly under ``v`` per shape they are filed under (None: none)."""
        return self._shape_jobs_under.get(v)

    def few_queues(self, v: int) -> bool:
        """Whether ``v`` has queues among its children, at most :data:`FEW_QUEUES` of
        them, and no job child filed under a shape (so none the descent could enter while
        the shapes are restricted): the descent's walk by the index from the first child
        (``descend_tree``)."""
        kids = self._queue_kids.get(v)
        return kids is not None and len(kids) <= FEW_QUEUES and not self._shape_jobs_under.get(v)

    def alive_queues_under(self, v: int) -> list[int]:
        """The queues directly under ``v`` with a job below filed under a shape that may
        fit (read while the engine restricts the shapes): a test of each one's mask, as
        the heap walk makes for the children it pops. (Not an index per shape, as for the
        jobs: the queues' per-shape entries, a dict per node and shape, were tens of
        thousands of long-lived objects at 10,000 jobs of many shapes, and a full garbage
        collection more in bench_scaling's steady state; a queue's children are few next
        to the jobs, and this runs only past ``HEAP_TRIES`` children tried in vain.)"""
        return self._queues_meeting(self._queue_kids.get(v, ()), self.shape_mask, self.alive_shapes[0])

    def file_shape(self, name: str, shape: int | None) -> None:
        idx = self.index.get(name)
        if idx is None:
            return
        old = self._job_shape.get(idx)
        if old == shape:
            return
        if old is not None:
            del self._job_shape[idx]
            self._count_shape(idx, old, -1)
        if shape is not None:
            self._job_shape[idx] = shape
            self._count_shape(idx, shape, 1)

    def _unfile_shape(self, idx: int) -> None:
        """Job node ``idx`` leaves the tree: its shape no longer counts above it."""
        old = self._job_shape.pop(idx, None)
        if old is not None:
            self._count_shape(idx, old, -1)

    def _count_shape(self, idx: int, shape: int, delta: int) -> None:
        here = self._shape_jobs_under.setdefault(self.parent[idx], {})
        if delta > 0:
            here.setdefault(shape, {})[idx] = None
        else:
            jobs = here[shape]
            del jobs[idx]
            if not jobs:
                del here[shape]
        bit = 1 << shape
        parent, counts, mask = self.parent, self._shape_count, self.shape_mask
        v = idx
        while v >= 0:
            per_shape = counts[v]
            n = per_shape.get(shape, 0) + delta
            if n:
                per_shape[shape] = n
                mask[v] |= bit
            else:
                del per_shape[shape]
                mask[v] &= ~bit
            v = parent[v]

    def only_shapes(self, shapes) -> None:
        self.alive_shapes[0] = self._shape_bits(shapes)

    def exclude_shape(self, shape: int, names) -> None:
        self.alive_shapes[0] &= ~(1 << shape)

    def reset_excluded(self) -> None:
        self.alive_shapes[0] = -1
        super().reset_excluded()


#: ``ShapeIndex``'s own readers of its tables, as defined here: the compiled descent reads
#: the tables itself only for an index whose class still has these (``_hdrf_kernel``'s
#: ``own_shape_index``), so an override, or a replacement on the class, is called
SHAPE_INDEX_READERS = (ShapeIndex.jobs_by_shape, ShapeIndex.few_queues, ShapeIndex.alive_queues_under)
