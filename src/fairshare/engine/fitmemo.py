"""Where a task of a given shape fits now, remembered between decisions.

``Scheduler.schedule`` asks, for a job's next task, "which node would placement choose?"
many times per decision, and most answers do not change between decisions: only the
nodes freed since (``NodePool.freed_mark``/``freed_since``) gained room. ``FitMemo``
keeps those answers per shape ``(demand, constraints)`` and updates them from the freed
nodes alone (``locate``), and after a quiet point finds the shapes that can fit at all
by one vectorized test of the pending shapes per freed node (``candidate_shapes``; by
node, with the shapes' needs kept: ``scan_freed``), and after a launch on one of those
nodes tests again only the shapes found there (``still_fitting``). The vectorized test
is ``fits_on``'s own comparison, ``not any(need > limit)``, on the same floats: the
pending shapes' needs are the columns of one matrix per constraint set
(``PendingShapes.matrix``), so a node's test reduces across a few contiguous rows.
Every answer is the one a fresh ``NodePool.place`` would give
(``tests/test_candidates.py``, ``tests/test_placement_fast.py``,
``tests/test_predicates.py``).

The scan also gives each fitting shape's number as the engine filed it with the sorter
(``Scheduler._refile``; -1: pending but no job's next task), from a column of numbers kept
beside each matrix (``shape_filed`` updates it as numbers are given and taken back), so a
candidate shape's number is an array read, not a hash of its key. The vectorized test is
written ``~logical_or.reduce(need > limit, axis=0)``: ``any(axis=0)``'s own reduction,
without its Python wrapper.

Scan and re-check share one step, :func:`restrict_reference` (a node's fitting columns
and their keys, needs and numbers), which is compiled where the engine's kernel is built
(``engine/_fit_kernel.pyx``, ``restrict``: the same comparisons on the same doubles, in
one call where NumPy takes eleven array operations; ``FAIRSHARE_PURE_PYTHON=1`` or no
compiler: this NumPy form, the reference).

From those numbers the scheduler lists the one freed node's candidate jobs
(:func:`candidate_jobs_reference`, compiled as ``_fit_kernel.candidate_jobs``: the same
list, and none built once the count passes the sorter's ``among_max``).
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from fairshare.engine.placement import NodePool
from fairshare.engine.shapes import PendingShapes
from fairshare.model.resources import Vector
from fairshare.policies.machinery.compiled import forced_pure_python

try:
    from fairshare.engine._fit_kernel import candidate_jobs as compiled_candidate_jobs
    from fairshare.engine._fit_kernel import restrict as compiled_restrict
except ImportError:  # not built (setup.py; as the sorter core: the NumPy form runs)
    compiled_restrict = compiled_candidate_jobs = None

#: most shapes remembered by placement memos (a memo is cleared when it is full)
_NOFIT_MAX = 100_000
#: longest candidate list a first-fit memo keeps (longer: "unknown beyond the first")
_CANDIDATES_MAX = 64

#: shapes that fit on a node, their needs as the columns of a matrix and their filed
#: numbers, one per column (-1: not filed) (``scan_freed``)
NodeFits = tuple[list[tuple], np.ndarray, np.ndarray]

#: ``any(axis=0)`` of a boolean matrix, its reduction called directly
_any_down = np.logical_or.reduce


#: the sha256 (first 16 hex digits) of :func:`restrict_reference`'s source as
#: ``_fit_kernel.restrict`` ports it: a change to one must be mirrored in the other, then
#: this renewed (``tests/test_predicates.py`` compares them, compiler or not)
RESTRICT_PORTED_FROM = "3b8ff0182aaac45e"


def restrict_reference(keys: list[tuple], needs: np.ndarray, numbers: np.ndarray, limits: tuple[float, ...],
                       whole: NodeFits | None) -> NodeFits:
    """The shapes ``keys`` (their needs the columns of ``needs``, their filed numbers
    ``numbers``) whose task fits under a node's ``limits`` (``NodePool.fit_limits``):
    ``fits_on``'s ``not any(need > limit)``, vectorized, NaN included; ``whole`` (when not
    None) is returned as is when every shape fits. The reference of
    ``_fit_kernel.restrict``, and what runs where it is not built."""
    columns = (~_any_down(needs > np.array(limits, dtype=float)[:, None], axis=0)).nonzero()[0]
    if whole is not None and len(columns) == len(keys):
        return whole
    return [keys[i] for i in columns.tolist()], needs[:, columns], numbers[columns]


#: the sha256 (first 16 hex digits) of :func:`candidate_jobs_reference`'s source as
#: ``_fit_kernel.candidate_jobs`` ports it (``tests/test_candidates.py`` compares them)
CANDIDATES_PORTED_FROM = "a0d10d3ce61d2246"


def candidate_jobs_reference(numbers: np.ndarray, groups_by_number: dict[int, dict[str, None]], among_max: int,
                             among_cost: float, filed: int) -> list[str] | None:
    """The jobs whose next task has one of the shapes numbered ``numbers`` (a freed
    node's fitting shapes as the scan numbered them, -1: no job), shape by shape in that
    order, each shape's jobs in its group's order (``groups_by_number``: number -> its
    jobs); None when they are more than ``among_max`` or ``n * n * among_cost > filed``
    (``Scheduler._decide``'s test of whether comparing them beats the descent). The
    reference of ``_fit_kernel.candidate_jobs``, which stops counting as soon as the
    count passes ``among_max`` (the count only grows: the list is None whatever follows),
    and what runs where it is not built."""
    groups = list(filter(None, map(groups_by_number.get, numbers.tolist())))
    n = sum(map(len, groups))
    if n > among_max or n * n * among_cost > filed:
        return None
    return list(chain.from_iterable(groups))


class FitMemo:
    def __init__(self, pool: NodePool, shapes: PendingShapes, shape_ids: dict[tuple, int] | None = None):
        self.pool = pool
        self.shapes = shapes
        # the engine's shape key -> filed number (read, never written here), and per
        # constraint set the numbers of its matrix's columns: (the matrix's key list,
        # key -> column, the numbers), rebuilt with the matrix
        self.shape_ids: dict[tuple, int] = {} if shape_ids is None else shape_ids
        self._id_columns: dict[tuple, tuple[list[tuple], dict[tuple, int], np.ndarray]] = {}
        #: best-fit / packing: shape key -> ``pool.freed_mark()`` when it last fit nowhere
        self.nofit: dict[tuple, int] = {}
        #: first-fit: shape key -> (first-fit node or None, freed mark then, candidates)
        self.memo: dict[tuple, tuple[int | None, int, list[int] | None]] = {}
        #: first-fit, within one ``schedule`` call: the keys of its ``fit`` cache found on
        #: each node (a launch there drops them; ``Scheduler.schedule`` resets it)
        self.fit_keys_on: dict[int, list[tuple]] = {}
        # which nodes each constraint set admits
        self._eligible_sets: dict[tuple, frozenset[int]] = {}
        # a node's fitting shapes (``restrict_reference``, or its compiled form)
        self.restrict = restrict_reference if compiled_restrict is None or forced_pure_python() else compiled_restrict
        # the one freed node's candidate jobs (``candidate_jobs_reference``, or its compiled form)
        self.candidate_jobs = candidate_jobs_reference if compiled_candidate_jobs is None or forced_pure_python() \
            else compiled_candidate_jobs

    def nodes_changed(self) -> None:
        """A node was added: the index may be rebuilt (new node, other attributes)."""
        self.memo.clear()
        self.nofit.clear()
        self._eligible_sets.clear()

    def headroom_changed(self) -> None:
        """The headroom changes what fits."""
        self.nofit.clear()
        self.memo.clear()

    def candidate_shapes(self, mark: int | None, scan_max: int) -> tuple[dict[tuple, set[int]], list[tuple] | None]:
        """The pending shapes that may fit somewhere now, when a quiet point makes that
        cheap to know: those that fit on a node freed since (``scan_freed``; returned with
        those nodes, where alone they fit) and those that appeared since (to be searched
        for). ``({}, None)``: unknown (no quiet point, or too many nodes freed). The two
        are disjoint."""
        local: dict[tuple, set[int]] = {}
        scan = self.scan_freed(mark, scan_max)
        if scan is None:
            return local, None
        fitting_on, found = scan
        for node, (keys, _needs, _ids) in fitting_on.items():
            for key in keys:
                local.setdefault(key, set()).add(node)
        return local, found

    def scan_freed(self, mark: int | None, scan_max: int) -> tuple[dict[int, NodeFits], list[tuple]] | None:
        """``candidate_shapes`` by node: each node freed since ``mark`` (cluster order)
        with the pending shapes, not new since, that fit on it and their needs (one
        vectorized test of all pending shapes per freed node and constraint set), and the
        shapes new since. None: unknown (no quiet point, or too many nodes freed)."""
        if mark is None:
            return None
        freed = self.pool.freed_since(mark, scan_max)
        if freed is None:
            return None
        shapes = self.shapes
        new = shapes.new
        found = [key for key in new if key in shapes.keys] if new else []
        fitting_on: dict[int, NodeFits] = {}
        if not freed:
            return fitting_on, found
        fit_limits, restrict = self.pool.fit_limits, self.restrict
        eligible_sets = self._eligible_sets
        for constraints in shapes.by_constraints:
            keys, needs = shapes.matrix(constraints, self.pool.effective_need)
            numbers = self._numbers(constraints, keys)
            eligible = eligible_sets.get(constraints) or self.eligible_set(constraints)
            for node in freed:
                if node not in eligible:
                    continue
                # fits_on, vectorized: no entry of the need above the node's limit (written
                # as fits_on's ``not any(need > limit)``, NaN included; a copy: the kept
                # column of numbers changes as numbers are given)
                fitting = restrict(keys, needs, numbers, fit_limits(node), None)
                if not fitting[0]:
                    continue
                if new:  # a new shape may fit elsewhere too: searched
                    columns = [i for i, key in enumerate(fitting[0]) if key not in new]
                    if not columns:
                        continue
                    fitting = ([fitting[0][i] for i in columns], fitting[1][:, columns], fitting[2][columns])
                got = fitting_on.get(node)
                if got is not None:  # (another constraint set's shapes fit there too)
                    fitting = (got[0] + fitting[0], np.concatenate((got[1], fitting[1]), axis=1),
                               np.concatenate((got[2], fitting[2])))
                fitting_on[node] = fitting
        return fitting_on, found

    def _numbers(self, constraints: tuple, keys: list[tuple]) -> np.ndarray:
        """The filed number of each column of the constraint set's matrix (``keys``: its
        columns), kept until the matrix is rebuilt (a new key list)."""
        got = self._id_columns.get(constraints)
        if got is None or got[0] is not keys:
            ids = self.shape_ids
            got = self._id_columns[constraints] = (
                keys, {key: i for i, key in enumerate(keys)},
                np.array([ids.get(key, -1) for key in keys], dtype=np.intp))
        return got[2]

    def shape_filed(self, key: tuple, number: int | None) -> None:
        """The engine gave shape ``key`` the number ``number`` (None: took it back): the
        column of numbers of its matrix, if built, follows."""
        got = self._id_columns.get(key[1])
        if got is not None:
            column = got[1].get(key)
            if column is not None:
                got[2][column] = -1 if number is None else number

    def still_fitting(self, node: int, fitting: NodeFits) -> NodeFits:
        """Those of the shapes ``fitting`` (as :meth:`scan_freed` gives them for ``node``)
        whose task fits on ``node`` now: the same vectorized test with its limits now."""
        keys, needs, numbers = fitting
        return self.restrict(keys, needs, numbers, self.pool.fit_limits(node), fitting)

    def eligible_set(self, constraints: tuple) -> frozenset[int]:
        got = self._eligible_sets.get(constraints)
        if got is None:
            got = self._eligible_sets[constraints] = frozenset(self.pool.eligible(constraints))
        return got

    def fits_now(self, key: tuple, fit: dict) -> bool:
        """Whether a task of this shape fits somewhere now."""
        demand, constraints = key
        return self.locate(key, demand, constraints, None, fit) is not None

    def locate(self, key: tuple, demand: Vector, constraints: tuple, allowed, fit: dict) -> int | None:
        """The node for a task of shape ``key`` now (``pool.place``'s answer), through memos.

        first-fit: ``memo[key] = (node, mark, cands)``: ``node`` was the first fit (None:
        none) when the pool's freed-nodes log stood at ``mark``; ``cands``, when known,
        lists every node that fit then (None: unknown beyond ``node``). Since the mark
        only the nodes freed since have gained capacity, so now the first fit is: with
        ``cands`` known, the first of those candidates and freed nodes that still fit;
        otherwise the first freed node that fits if it comes before ``node``, else
        ``node`` if it still fits, else the first fit after it (``place_after``). The
        same answer as a fresh search, which on a fragmented, full cluster can visit most
        of the index. Within one ``schedule`` call nothing is freed, so between launches
        this is the per-call cache the loop always had.

        best-fit, packing: the best node moves with every launch, so it is searched each
        time; only "fits nowhere" is remembered, per call (``fit``) and across calls
        (``nofit`` with ``pool.place_since``).
        """
        pool = self.pool
        if pool.strategy != "first-fit":
            if key in fit and fit[key] is None:
                return None
            if key in fit:
                node = pool.place(demand, constraints, allowed)
            else:
                node = self.place_fresh(key, demand, constraints, allowed)
            fit[key] = node
            if node is None:
                self.nofit[key] = pool.freed_mark()
            return node
        if key in fit:  # found in this call, and no launch has touched that node since
            return fit[key]
        mark_now = pool._freed_base + len(pool._freed)  # (``pool.freed_mark()``, without its call)
        memo = self.memo.get(key)
        cands: list[int] | None = None
        if memo is not None:
            node, mark, cands = memo
            freed = [] if mark == mark_now else pool.freed_fits(demand, constraints, mark, allowed)
        if memo is None or freed is None:  # unseen, or the log was trimmed past the mark
            node = pool.place(demand, constraints, allowed)
            cands = [] if node is None else None
        elif cands is not None:
            # every node that fit at the mark was in cands: they and the freed ones are all
            live = [c for c in cands if pool.fits_on(c, demand) and (allowed is None or allowed(c))]
            merged = sorted(set(live).union(freed)) if freed else live
            node = merged[0] if merged else None
            cands = merged if len(merged) <= _CANDIDATES_MAX else None
        elif freed and freed[0] < node:
            node = freed[0]
        elif not (pool.fits_on(node, demand) and (allowed is None or allowed(node))):
            node = pool.place_after(demand, constraints, node, allowed)
            if node is None:
                cands = []
        if len(self.memo) >= _NOFIT_MAX and key not in self.memo:
            self.memo.clear()
        self.memo[key] = (node, mark_now, cands)
        fit[key] = node
        if node is not None:
            self.fit_keys_on.setdefault(node, []).append(key)
        return node

    def place_fresh(self, key: tuple, demand: Vector, constraints: tuple, allowed=None) -> int | None:
        """best-fit / packing: a shape's first placement in a ``schedule`` call. A shape
        that fit nowhere is remembered with the pool's freed-nodes mark, so later calls
        only look at the nodes freed since (``NodePool.place_since``: the same answer)."""
        mark = self.nofit.get(key)
        if mark is None:
            node = self.pool.place(demand, constraints, allowed)
        else:
            node = self.pool.place_since(demand, constraints, mark, allowed)
        if node is None:
            if len(self.nofit) >= _NOFIT_MAX:
                self.nofit.clear()
            self.nofit[key] = self.pool.freed_mark()
        elif mark is not None:
            del self.nofit[key]
        return node
