"""Placement: which node a chosen task runs on (fairness chooses the job, this the node).

Strategies (``Placement(strategy=...)``):

* ``first-fit``: the first node, in cluster order, where the task fits (DRF Sec. 6.2's
  "one machine at a time"). Found through a segment tree over the nodes holding each
  resource's maximum free amount, so a search costs O(log nodes) when a fit exists.
* ``best-fit``: the feasible node with the least free capacity left afterwards (sum of
  normalised leftovers); ties by cluster order.
* ``packing``: the feasible node whose free vector is best aligned with the demand
  (largest ``model.resources.packing_score``: dot product of normalised demand and free;
  Tetris-style packing, the choice Tan et al. Sec. 5 leave to "bin-packing algorithms");
  ties by cluster order.

The fit test and its tolerance are ``model.resources.fits`` / ``fit_limits`` (one rule for
the loader, placement, the static whole-task greedy and the audits); the searches compare
demands with precomputed ``fit_limits`` rows, the same float expression.

Constraints: a task class with ``constraints`` runs only on nodes whose attributes satisfy
them (``model.cluster.satisfies``); each distinct constraint set gets its own index over
its eligible nodes.

Headroom (H-DRF Sec. 5: "H-DRF maintains a headroom equal to the size of the largest
task on each server, to ensure that large tasks do not get starved out"): with
``headroom`` set to a vector H (the largest demand of each resource among active jobs),
a task must leave H_r free of every resource r it uses in a smaller amount than H_r
(0 < d_r < H_r); in a resource where it is as large as the largest task it may take the
last of it, and resources it does not use are not constrained. That keeps room for a
largest task on every node without blocking the large tasks themselves.

Devices (``Cluster.devices``, e.g. GPUs): each unit of a device resource on a node is one
physical device. A task demanding d < 1 of it needs *one* device with at least d free
(several such tasks share a device: Alibaba's ``gpu_milli``); a task demanding a whole k
>= 1 needs k devices with nothing on them. The node keeps each device's free fraction,
and the index sees two numbers per device resource instead of the summed free amount:
the count of entirely free devices (in the resource's own column, matched against a
whole demand k) and the largest free fraction of one device (an extra column, matched
against a fractional d). Both tests are exact, so the segment tree's first fit needs no
second pass, and without devices the index vector is the plain free vector. Within a
node a fractional task goes to the device with the least free fraction that holds it
(best fit, so whole devices stay free for whole-device tasks; ties: lowest device), a
whole-device task to the lowest-numbered free devices. Headroom does not apply to device
resources (a device cannot be kept "partly free" for a larger task).

Per-node limits (``max_per_node``, DLRM's ``max_instance_per_node``): ``place`` and
``place_after`` take an ``allowed(node)`` predicate from the scheduler, which counts each
job's running tasks per node; the first fit skips nodes it rejects.

Slots (the slot scheduler, DRF Sec. 7.2 / H-DRF Sec. 5.3): with ``slots_per_node`` set,
a node holds that many tasks whatever their size: resources are not checked, and an
over-subscribed node is reported by :meth:`NodePool.oversubscription` so the executor can
slow its tasks down.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import gt

import numpy as np

from fairshare.model.cluster import Node, satisfies
from fairshare.model.resources import FIT_TOLERANCE, Vector, fit_limits, packing_score
from fairshare.policies.machinery.compiled import forced_pure_python

try:
    from fairshare.engine._fit_kernel import first_fit as compiled_first_fit
    from fairshare.engine._fit_kernel import free_row as compiled_free_row
    from fairshare.engine._fit_kernel import give_back_plain as compiled_give_back_plain
    from fairshare.engine._fit_kernel import given_back as compiled_given_back
    from fairshare.engine._fit_kernel import pull_levels as compiled_pull_levels
    from fairshare.engine._fit_kernel import take_plain as compiled_take_plain
    from fairshare.engine._fit_kernel import taken as compiled_taken
except ImportError:  # not built (setup.py): the Python forms below run
    compiled_first_fit = compiled_pull_levels = compiled_free_row = compiled_taken = compiled_given_back = None
    compiled_take_plain = compiled_give_back_plain = None

STRATEGIES = ("first-fit", "best-fit", "packing")
#: device fractions (each in [0, 1], where the fit test's tolerance is absolute) are
#: compared with the fit test's tolerance
_EPS = FIT_TOLERANCE
_FREED_LOG = 8192  # entries kept in the freed-nodes log before its older half is dropped
#: ``freed_fits`` tests longer logs than this with one NumPy comparison (shorter: a loop)
_FREED_SCAN_VECTOR = 64

#: which devices a task holds on its node: per device resource index, the device numbers
DeviceAssignment = tuple[tuple[int, tuple[int, ...]], ...]


class _MaxTree:
    """Segment tree over a subset of nodes: per resource, the max free amount below.

    Heap layout: node k has children 2k and 2k+1, the root is 1 and member position p is
    leaf ``size + p`` (positions from ``len(members)`` on are padding, free -1.0). Each
    tree node keeps two rows: ``tree[k]``, the per-column maxima, and ``limit[k]``, their
    ``model.resources.fit_limits``, which is what the searches test (``not any(map(gt,
    need, limit[k]))`` is ``fits(need, tree[k])``). A leaf's rows are the node's index vector and its
    limits (``NodePool._fit_row``); an inner node's limit row takes, column by column,
    the limit of the child whose maximum it took, so it never re-evaluates the tolerance.

    Updated lazily: a change on a node only marks its leaf dirty (``NodePool._touch``);
    the next query (``flush``) refreshes the dirty leaves and then their ancestors level
    by level, stopping on a path as soon as a node's maximum did not change. A cluster
    has one tree per distinct constraint set, most of them queried far less often than
    their nodes change, so a change costs a set insertion per tree instead of a path.

    The climb and the first-fit walk run compiled where the engine's kernel is built
    (``_fit_kernel.pull_levels``, ``first_fit``: the same rows read in place, every
    comparison CPython's, the same number objects chosen); :func:`pull_levels_reference`
    and :func:`first_fit_reference` are the reference and the fallback
    (``FAIRSHARE_PURE_PYTHON=1``, no compiler), compared in ``tests/test_placement_fast.py``.
    """

    def __init__(self, members: list[int], pool: NodePool):
        self.members = members  # node indices, in cluster order
        self.pool = pool
        size = 1
        while size < max(1, len(members)):
            size *= 2
        self.size = size
        # all padding (free -1.0) is a consistent tree; every member's leaf starts dirty
        padding = [-1.0] * pool.width
        self.tree: list[Sequence[float]] = [padding] * (2 * size)  # rows are replaced, never mutated
        self.limit: list[Sequence[float]] = [fit_limits(padding)] * (2 * size)
        self.position = {node: k for k, node in enumerate(members)}
        self.dirty: set[int] = set(range(len(members)))  # member positions whose leaf is stale
        self.flush()

    def update(self, node: int) -> None:
        k = self.position.get(node)
        if k is not None:
            self.dirty.add(k)

    def flush(self) -> None:
        """Bring the dirty leaves and their ancestors up to date (all leaves sit at one
        depth, so the ancestors are refreshed one level at a time)."""
        if not self.dirty:
            return
        tree, limit, size, members = self.tree, self.limit, self.size, self.members
        fit_row, rows = self.pool._fit_row, self.pool._rows
        level: set[int] = set()
        for k in self.dirty:
            node = members[k]
            # (``fit_row``'s cache read here: most leaves' rows are fresh, read by a fit test)
            tree[size + k], limit[size + k] = rows[node] or fit_row(node)
            level.add((size + k) >> 1)
        self.dirty.clear()
        pull_levels(tree, limit, level)

    def first_fit(self, need: Vector, start: int = 0) -> int | None:
        """First member at position >= ``start`` where ``need`` fits.

        That is the leftmost leaf at or after ``start`` whose row and all its ancestors'
        rows pass the test (a leaf's row is its node's index vector, fresh after the
        flush). The per-resource maxima may come from different nodes, so a subtree that
        passes can still hold no fit: the walk then moves on to the next subtree to the
        right. Iterative (no recursion, no stack).

        From ``start`` > 0 the walk begins at that leaf, not at the root (a finger
        search): the subtrees to the right of it are visited in order, each tested at its
        top before it is descended, so an answer ``d`` positions away costs about
        ``2 log d`` tests instead of a walk down from the root and back. First-fit asks
        mostly for the node after the one that just filled up (``NodePool.place_after``).
        A subtree is entered only when it passes, so every ancestor of the leaf returned
        passes too (its rows hold maxima over that subtree and more).
        """
        if self.dirty:
            self.flush()
        n = len(self.members)
        p = tree_first_fit(self.limit, self.size, n, need, start)
        return None if p < 0 else self.members[p]

    def feasible(self, need: Vector) -> list[int]:
        """Every member where ``need`` fits, in cluster order (depth first, left first)."""
        if self.dirty:
            self.flush()
        out: list[int] = []
        limit, size, members = self.limit, self.size, self.members
        n = len(members)
        stack = [1]
        while stack:
            k = stack.pop()
            if any(map(gt, need, limit[k])):
                continue
            if k >= size:
                if k - size < n:
                    out.append(members[k - size])
            else:
                stack.append(2 * k + 1)  # popped after the whole left subtree
                stack.append(2 * k)
        return out


#: the sha256 (first 16 hex digits) of :func:`pull_levels_reference` and
#: :func:`first_fit_reference`'s sources as ``_fit_kernel`` ports them: a change to one
#: must be mirrored in the other, then this renewed (``tests/test_placement_fast.py``)
TREE_PORTED_FROM = "93bca1ef6385516e"


def pull_levels_reference(tree: list, limit: list, level: set[int]) -> None:
    """``_MaxTree.flush``'s climb: the inner nodes ``level`` (one depth) recomputed from
    their children, then their parents, and so on, a path stopping where a node's maxima
    did not change. The reference of ``_fit_kernel.pull_levels``, and what runs where it is
    not built."""
    while level:
        above: set[int] = set()
        for k in level:
            a, b = tree[2 * k], tree[2 * k + 1]
            new = [x if x > y else y for x, y in zip(a, b)]
            if new == tree[k]:
                continue
            tree[k] = new
            limit[k] = [s if x > y else t for x, y, s, t in zip(a, b, limit[2 * k], limit[2 * k + 1])]
            if k > 1:
                above.add(k >> 1)
        level = above


def first_fit_reference(limit: list, size: int, n: int, need: Vector, start: int) -> int:
    """``_MaxTree.first_fit``'s walk over the limit rows ``limit`` (heap layout, ``size``
    leaves, ``n`` members): the first member position >= ``start`` whose leaf and
    ancestors pass ``not any(map(gt, need, row))``; -1: none. The reference of
    ``_fit_kernel.first_fit``, and what runs where it is not built."""
    if not 0 <= start < n:  # (no position there)
        return -1
    if start == 0:
        if any(map(gt, need, limit[1])):
            return -1
        k = 1
    else:
        # the leaf itself, then the next subtrees to the right: climb while k is a right
        # child (its parent's subtree starts before start), step to the right sibling
        k = size + start
        while any(map(gt, need, limit[k])):
            while k & 1:
                k >>= 1
                if k == 1:
                    return -1
            k += 1
    # k passes: descend to its leftmost passing leaf, moving right on a failure
    while True:
        if k >= size:  # a leaf that passed
            # a padding leaf passing means no member is left to the right either
            p = k - size
            return p if p < n else -1
        k <<= 1
        if not any(map(gt, need, limit[k])):
            continue  # descend into the left child
        k += 1  # the right child
        if not any(map(gt, need, limit[k])):
            continue
        # both children fail: the next subtree to the right of k
        while True:
            while k & 1:
                k >>= 1
                if k == 1:
                    return -1
            k += 1
            if not any(map(gt, need, limit[k])):
                break


#: the sha256 (first 16 hex digits) of ``model.resources.fit_limit``'s source
#: and :func:`free_row_reference`'s as ``_fit_kernel.free_row`` ports them: a change to one must
#: be mirrored there, then this renewed (``tests/test_placement_fast.py``)
LIMITS_PORTED_FROM = "5e5cce4fac3ed5ae"


def free_row_reference(free: Sequence[float]) -> tuple[Vector, tuple[float, ...]]:
    """An alive node's row (``NodePool._fit_row`` without devices or slots): its free
    vector as a tuple and that vector's ``fit_limits``. The reference of
    ``_fit_kernel.free_row`` (one call for the two, the tolerance computed in C on the
    same doubles: every task start and end makes a node's row stale), and what runs where
    it is not built."""
    vec = tuple(free)
    return vec, fit_limits(vec)


if compiled_first_fit is None or forced_pure_python():
    pull_levels, tree_first_fit = pull_levels_reference, first_fit_reference
else:
    pull_levels, tree_first_fit = compiled_pull_levels, compiled_first_fit
free_row = free_row_reference if compiled_free_row is None or forced_pure_python() else compiled_free_row


#: the sha256 (first 16 hex digits) of :func:`taken_reference` and
#: :func:`given_back_reference`'s sources as ``_fit_kernel.taken``/``given_back`` port
#: them: a change to one must be mirrored there, then this renewed
#: (``tests/test_placement_fast.py``)
ACCOUNTS_PORTED_FROM = "316303b6dcbd129c"


def taken_reference(free: list[float], demand: Vector, total: list[float]) -> list[float]:
    """A task of ``demand`` starts on a node: its new free list (per resource ``free[r] -
    d``) and the pool's ``total`` moved in place (``total[r] - d``), as comprehensions (a
    demand has the pool's m entries). The reference of ``_fit_kernel.taken`` (the same
    subtractions in one call), and what runs where it is not built."""
    total[:] = [t - d for t, d in zip(total, demand)]
    return [f - d for f, d in zip(free, demand)]


def given_back_reference(free: list[float], demand: Vector, capacity: Vector,
                         total: list[float]) -> list[float]:
    """A task of ``demand`` ends on a node: its new free list, per resource the free amount
    plus the demand, at most the capacity (``min(cap, free + d)``, NaN and signed zeros
    alike: not below it, the capacity), and the pool's ``total`` moved in place by what the
    free amount moved. The reference of ``_fit_kernel.given_back``, and what runs where it
    is not built."""
    new = [x if (x := f + d) < cap else cap for f, d, cap in zip(free, demand, capacity)]
    total[:] = [t + (x - f) for t, x, f in zip(total, new, free)]
    return new


if compiled_taken is None or forced_pure_python():
    taken, given_back = taken_reference, given_back_reference
else:
    taken, given_back = compiled_taken, compiled_given_back


#: the sha256 (first 16 hex digits) of :func:`take_plain_reference` and
#: :func:`give_back_plain_reference`'s sources as ``_fit_kernel.take_plain``/``give_back_plain``
#: port them: a change to one must be mirrored there, then this renewed
#: (``tests/test_placement_fast.py``)
NODE_PORTED_FROM = "d214f915e1da6259"


def take_plain_reference(pool: NodePool, idx: int, demand: Vector) -> DeviceAssignment:
    """:meth:`NodePool.take` on a pool without devices or slots (``pool.plain``): the free
    amounts and the pool's total moved (:func:`taken`), the node's row made at once (what
    ``_fit_row`` would make from the same free list: the engine reads it right after, to
    test what still fits there), the row matrix and the trees told (``_touch``'s work, no
    call for it); no devices held. The reference of ``_fit_kernel.take_plain`` (the same
    steps in one call, per launch), and what runs where it is not built."""
    st = pool.states[idx]
    st.free = free = taken(st.free, demand, pool.total_free)
    st.tasks += 1
    pool._rows[idx] = free_row(free) if st.alive else None
    if pool._limits_np is not None:
        pool._np_stale.add(idx)
    for tree, k in pool._member_of.get(idx, ()):
        tree.dirty.add(k)
    return ()


def give_back_plain_reference(pool: NodePool, idx: int, demand: Vector) -> None:
    """:meth:`NodePool.give_back` on a pool without devices or slots: the free amounts and
    the pool's total moved back (:func:`given_back`), the row made at once (the next
    ``schedule`` call scans this freed node), ``_touch``'s work, and the node logged as
    freed (``_freed_node``'s, inlined; a node beyond the log's array, or a full log, takes
    its growing and trimming path). The reference of ``_fit_kernel.give_back_plain``, and
    what runs where it is not built."""
    st = pool.states[idx]
    if not st.alive:
        return
    st.free = free = given_back(st.free, demand, st.node.capacity, pool.total_free)
    st.tasks -= 1
    pool._rows[idx] = free_row(free)
    if pool._limits_np is not None:
        pool._np_stale.add(idx)
    for tree, k in pool._member_of.get(idx, ()):
        tree.dirty.add(k)
    last, freed = pool._last_freed, pool._freed
    if idx >= len(last) or len(freed) >= _FREED_LOG:
        pool._freed_node(idx)
    else:
        last[idx] = pool._freed_base + len(freed)
        freed.append(idx)


if compiled_take_plain is None or forced_pure_python():
    take_plain, give_back_plain = take_plain_reference, give_back_plain_reference
else:
    take_plain, give_back_plain = compiled_take_plain, compiled_give_back_plain



@dataclass
class _NodeState:
    node: Node
    free: list[float]
    alive: bool = True
    tasks: int = 0
    #: per device resource (``NodePool.devices`` order), each device's free fraction
    device_free: list[list[float]] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)  # node.attributes as a mapping

    def __post_init__(self) -> None:
        self.attrs = dict(self.node.attributes)


class NodePool:
    """Free capacity of every node, and where a task may go. Node indices are stable:
    a node lost and added again keeps its index; new nodes are appended."""

    def __init__(self, nodes: Sequence[Node], m: int, *, strategy: str = "first-fit",
                 headroom: Vector | None = None, slots_per_node: int | None = None,
                 devices: Sequence[int] = ()):
        if strategy not in STRATEGIES:
            raise ValueError(f"placement strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        self.m = m
        self.devices = tuple(devices)  # resource indices counted in physical devices
        self.width = m + len(self.devices)  # columns of the index vector
        self.strategy = strategy
        self.headroom = tuple(headroom) if headroom is not None else None
        self.slots_per_node = slots_per_node
        #: no devices, no slots (both fixed here): a task's start and end are
        #: :func:`take_plain` and :func:`give_back_plain`, one call each
        self.plain = not self.devices and slots_per_node is None
        self.states: list[_NodeState] = []
        self.index_of: dict[str, int] = {}
        self._trees: dict[tuple, _MaxTree] = {}
        self._member_of: dict[int, list[tuple[_MaxTree, int]]] = {}  # node -> (tree, position)
        # per node, (index vector, its fit_limits), computed on first use after a change
        # (_touch drops it): shared by the trees' leaves, fits_on and freed_fits
        self._rows: list[tuple[Vector, tuple[float, ...]] | None] = []
        # the rows' limits as one matrix, for long scans of freed nodes (freed_fits), and
        # the nodes whose row in it is stale (None: not built, or a node was added)
        self._limits_np: np.ndarray | None = None
        self._np_stale: set[int] = set()
        # nodes whose free capacity grew, in order (for place_since); _freed[0] is at
        # absolute position _freed_base
        self._freed: list[int] = []
        self._freed_base = 0
        # per node, the absolute log position of its latest entry (-1: none; grown as
        # nodes are freed): the distinct nodes freed since a mark, in cluster order, are
        # those at or after it (``freed_fits``' long scan)
        self._last_freed = np.full(0, -1, dtype=np.intp)
        self.total_free = [0.0] * m  # sum of free over alive nodes
        self._total: Vector | None = None
        for node in nodes:
            self._append(node)

    # --- nodes --------------------------------------------------------------------------
    def _append(self, node: Node) -> int:
        self._total = None
        idx = len(self.states)
        self.states.append(_NodeState(node, list(node.capacity), device_free=self._fresh_devices(node)))
        self.index_of[node.name] = idx
        self._rows.append(None)
        self._limits_np = None
        for r, c in enumerate(node.capacity):
            self.total_free[r] += c
        return idx

    def add_node(self, node: Node) -> int:
        idx = self._add_node(node)
        self._freed_node(idx)
        return idx

    def _add_node(self, node: Node) -> int:
        idx = self.index_of.get(node.name)
        if idx is None:
            idx = self._append(node)
            self._trees.clear()  # membership changed: rebuild indexes lazily
            self._member_of = {}
        else:
            st = self.states[idx]
            if st.alive:
                raise ValueError(f"node {node.name!r} is already in the cluster")
            relabelled = st.node.attributes != node.attributes
            st.node, st.free, st.alive, st.tasks = node, list(node.capacity), True, 0
            st.device_free = self._fresh_devices(node)
            st.attrs = dict(node.attributes)
            self._total = None
            for r, c in enumerate(node.capacity):
                self.total_free[r] += c
            if relabelled:  # back with other attributes: constraint sets' members change
                self._trees.clear()
                self._member_of = {}
            self._touch(idx)
        return idx

    def remove_node(self, name: str) -> int:
        idx = self.index_of[name]
        st = self.states[idx]
        if not st.alive:
            raise ValueError(f"node {name!r} is not in the cluster")
        for r, f in enumerate(st.free):
            self.total_free[r] -= f
        self._total = None
        st.alive = False
        st.free = [0.0] * self.m
        st.tasks = 0
        st.device_free = [[] for _ in self.devices]
        self._touch(idx)
        return idx

    @property
    def total_capacity(self) -> Vector:
        """Summed capacity of the alive nodes (cached; nodes change rarely)."""
        if self._total is None:
            tot = [0.0] * self.m
            for st in self.states:
                if st.alive:
                    for r, c in enumerate(st.node.capacity):
                        tot[r] += c
            self._total = tuple(tot)
        return self._total

    def _fresh_devices(self, node: Node) -> list[list[float]]:
        return [[1.0] * int(node.capacity[r]) for r in self.devices]

    def name(self, idx: int) -> str:
        return self.states[idx].node.name

    def alive(self, idx: int) -> bool:
        return self.states[idx].alive

    # --- capacity accounting ------------------------------------------------------------
    def available(self, idx: int) -> Vector:
        """What a task may use on this node (free capacity; infinite for slots)."""
        st = self.states[idx]
        if not st.alive:
            return (-1.0,) * self.m
        if self.slots_per_node is not None:
            return (float("inf"),) * self.m if st.tasks < self.slots_per_node else (-1.0,) * self.m
        return tuple(st.free)

    def index_vector(self, idx: int) -> Vector:
        """What the index matches a task's :meth:`need` against: :meth:`available`, and
        with device resources, per device resource the number of entirely free devices
        (in its own column) and the largest free fraction of one device (appended)."""
        if not self.devices:
            return self.available(idx)
        st = self.states[idx]
        if not st.alive or self.slots_per_node is not None:
            fill = self.available(idx)[0]
            return (fill,) * self.width
        out = list(st.free)
        for k, r in enumerate(self.devices):
            fractions = st.device_free[k]
            out[r] = float(sum(1 for f in fractions if f >= 1.0 - _EPS))
            out.append(max(fractions, default=0.0))
        return tuple(out)

    def need(self, demand: Vector) -> Vector:
        """A demand in index-vector terms (identity without device resources): a whole
        device demand k is matched against the free-device count, a fraction against the
        largest free fraction."""
        if not self.devices:
            return demand
        out = list(demand)
        for r in self.devices:
            d = demand[r]
            out.append(d if d < 1.0 else 0.0)
            if d < 1.0:
                out[r] = 0.0
        return tuple(out)

    def take(self, idx: int, demand: Vector) -> DeviceAssignment:
        """Use ``demand`` on the node; returns the devices the task holds (give them back
        with :meth:`give_back`). The caller has checked that it fits. The free amounts and
        the pool's total move by :func:`taken_reference` (compiled where the engine's kernel
        is built: the same subtractions). Without devices or slots: :func:`take_plain`."""
        if self.plain:
            return take_plain(self, idx, demand)
        st = self.states[idx]
        st.free = taken(st.free, demand, self.total_free)
        st.tasks += 1
        held: DeviceAssignment = ()
        if self.devices and self.slots_per_node is None:
            held = tuple((r, self._take_devices(st.device_free[k], demand[r]))
                         for k, r in enumerate(self.devices) if demand[r] > 0)
        self._touch(idx)
        return held

    @staticmethod
    def _take_devices(fractions: list[float], d: float) -> tuple[int, ...]:
        if d < 1.0:
            # best fit among the devices that hold d; ties: lowest device
            best = None
            for i, f in enumerate(fractions):
                if f >= d - _EPS and (best is None or f < fractions[best]):
                    best = i
            if best is None:
                raise AssertionError(f"no device with {d} free: {fractions}")
            left = fractions[best] - d
            fractions[best] = 0.0 if left < _EPS else left
            return (best,)
        whole = [i for i, f in enumerate(fractions) if f >= 1.0 - _EPS][:int(d)]
        if len(whole) < int(d):
            raise AssertionError(f"{int(d)} free devices wanted: {fractions}")
        for i in whole:
            fractions[i] = 0.0
        return tuple(whole)

    def give_back(self, idx: int, demand: Vector, devices: DeviceAssignment = ()) -> None:
        """A task of ``demand`` on the node ended: its free amounts and the pool's total
        move back by :func:`given_back_reference` (compiled where the kernel is built), its
        devices are freed, and the node joins the freed-nodes log. Without devices or slots:
        :func:`give_back_plain`."""
        if self.plain:
            give_back_plain(self, idx, demand)
            return
        st = self.states[idx]
        if not st.alive:
            return
        st.free = given_back(st.free, demand, st.node.capacity, self.total_free)
        for r, held in devices:
            fractions = st.device_free[self.devices.index(r)]
            share = demand[r] if demand[r] < 1.0 else 1.0
            for i in held:
                back = fractions[i] + share
                # snap float noise so a device whose tasks all left counts as entirely free
                fractions[i] = 1.0 if back > 1.0 - _EPS else back
        st.tasks -= 1
        self._touch(idx)
        self._freed_node(idx)

    def oversubscription(self, idx: int) -> float:
        """max_r used_r / capacity_r over the resources the node has (above 1 only under
        slot scheduling, which ignores sizes; a resource the node lacks cannot thrash)."""
        st = self.states[idx]
        worst = 0.0
        for r, cap in enumerate(st.node.capacity):
            if cap > 0:
                worst = max(worst, (cap - st.free[r]) / cap)
        return worst

    def max_free(self) -> Vector:
        """Per resource, the largest free amount on any alive node (for a device resource:
        the most entirely free devices on one node)."""
        tree = self._tree(())
        tree.flush()
        return tuple(tree.tree[1][:self.m])

    def _touch(self, idx: int) -> None:
        """The node changed (every change to a node's state comes through here)."""
        self._rows[idx] = None
        if self._limits_np is not None:
            self._np_stale.add(idx)
        # only the trees the node belongs to (a node is in few of the constraint sets' trees)
        for tree, k in self._member_of.get(idx, ()):
            tree.dirty.add(k)

    def _fit_row(self, idx: int) -> tuple[Vector, tuple[float, ...]]:
        """The node's :meth:`index_vector` and its ``model.resources.fit_limits`` (cached
        until it changes)."""
        row = self._rows[idx]
        if row is None:
            if self.devices or self.slots_per_node is not None:
                vec = self.index_vector(idx)
                row = self._rows[idx] = (vec, fit_limits(vec))
            else:  # (``index_vector`` is ``available``, the free vector of an alive node)
                st = self.states[idx]
                if st.alive:
                    row = self._rows[idx] = free_row(st.free)
                else:
                    vec = (-1.0,) * self.m
                    row = self._rows[idx] = (vec, fit_limits(vec))
        return row

    def _tree(self, constraints: tuple) -> _MaxTree:
        tree = self._trees.get(constraints)
        if tree is None:
            members = [i for i, st in enumerate(self.states) if satisfies(st.attrs, constraints)]
            tree = self._trees[constraints] = _MaxTree(members, self)
            for k, node in enumerate(members):
                self._member_of.setdefault(node, []).append((tree, k))
        return tree

    # --- placement ------------------------------------------------------------------------
    def _effective(self, demand: Vector) -> Vector:
        """Demand plus the headroom it must leave, in the resources where it is smaller
        than the largest task."""
        h = self.headroom
        if h is None or self.slots_per_node is not None:
            return self.need(demand) if self.devices else demand  # need() is the identity then
        dev = self.devices
        return self.need(tuple(d + x if 0 < d < x and r not in dev else d
                               for r, (d, x) in enumerate(zip(demand, h))))

    def place(self, demand: Vector, constraints: tuple = (),
              allowed: Callable[[int], bool] | None = None) -> int | None:
        """The node for one task of ``demand``, or None when it fits nowhere (among the
        nodes ``allowed`` accepts, when given)."""
        need = self._effective(demand)
        tree = self._tree(constraints)
        if self.strategy == "first-fit":
            node = tree.first_fit(need)
            while node is not None and allowed is not None and not allowed(node):
                node = tree.first_fit(need, tree.position[node] + 1)
            return node
        candidates = tree.feasible(need)
        if allowed is not None:
            candidates = [i for i in candidates if allowed(i)]
        return self._choose(candidates, demand)

    def _choose(self, candidates: list[int], demand: Vector) -> int | None:
        """best-fit / packing among feasible nodes (given in cluster order)."""
        if not candidates:
            return None
        cap = self.total_capacity
        scale = [1.0 / c if c > 0 else 0.0 for c in cap]
        if self.strategy == "best-fit":
            return min(candidates, key=lambda i: (sum((f - d) * s for f, d, s in
                                                      zip(self.states[i].free, demand, scale)), i))
        return max(candidates, key=lambda i: (packing_score(demand, self.states[i].free, cap), -i))

    def freed_mark(self) -> int:
        """A position in the log of nodes whose free capacity grew (a task left, a node
        joined): pass it to :meth:`place_since` later."""
        return self._freed_base + len(self._freed)

    def freed_since(self, mark: int, limit: int) -> list[int] | None:
        """The distinct nodes freed since ``mark`` (cluster order), or None when there
        are more than ``limit`` log entries since or the log no longer reaches back."""
        start = mark - self._freed_base
        if start < 0 or len(self._freed) - start > limit:
            return None
        return sorted(set(self._freed[start:]))

    def effective_need(self, demand: Vector) -> Vector:
        """What :meth:`fits_on` matches against a node's :meth:`fit_limits` for a task
        of ``demand`` (its need in index terms, plus headroom)."""
        return self._effective(demand)

    def fit_limits(self, node: int) -> tuple[float, ...]:
        """The node's index vector widened by the fit tolerance: a task fits on the node
        when no entry of its :meth:`effective_need` exceeds these (:meth:`fits_on`)."""
        return (self._rows[node] or self._fit_row(node))[1]

    def freed_fits(self, demand: Vector, constraints: tuple, mark: int,
                   allowed: Callable[[int], bool] | None = None) -> list[int] | None:
        """The nodes freed since ``mark`` (eligible, ``allowed``) where ``demand`` fits now,
        in cluster order; None when the log no longer reaches back to ``mark``."""
        start = mark - self._freed_base
        if start < 0:
            return None
        if start >= len(self._freed):
            return []
        tree = self._trees.get(constraints) or self._tree(constraints)
        position = tree.position
        need = self._effective(demand)
        if len(self._freed) - start > _FREED_SCAN_VECTOR:
            # a long log (first-fit memos of shapes not asked about for a while): one
            # vectorized test of the distinct nodes, the loop's own test (``not any(map(gt,
            # need, limit))``, NaN included), then the filters
            limits = self._limit_matrix()
            # the distinct nodes of ``freed``, ascending (``np.unique``'s answer): a node is
            # in the log from ``mark`` on exactly when its latest entry is, and positions
            # only grow
            nodes = (self._last_freed >= mark).nonzero()[0]
            fitting = nodes[~(np.asarray(need, dtype=float) > limits[nodes]).any(axis=1)].tolist()
            return [i for i in fitting if i in position and (allowed is None or allowed(i))]
        freed = self._freed[start:]
        if len(freed) > 1:
            freed = sorted(set(freed))
        rows = self._rows
        out = []
        for i in freed:
            if i in position:
                row = rows[i] or self._fit_row(i)
                if not any(map(gt, need, row[1])) and (allowed is None or allowed(i)):
                    out.append(i)
        return out

    def _limit_matrix(self) -> np.ndarray:
        """Every node's fit limits (``_fit_row``) as rows of one matrix, brought up to date
        with the nodes changed since it was last read."""
        limits = self._limits_np
        if limits is None:
            n = len(self.states)
            limits = self._limits_np = np.array([self._fit_row(i)[1] for i in range(n)],
                                                dtype=float).reshape(n, self.width)
            self._np_stale.clear()
        elif self._np_stale:
            fit_row = self._fit_row
            for i in self._np_stale:
                limits[i] = fit_row(i)[1]
            self._np_stale.clear()
        return limits

    def place_since(self, demand: Vector, constraints: tuple, mark: int,
                    allowed: Callable[[int], bool] | None = None) -> int | None:
        """:meth:`place` for a task that fit nowhere at ``mark``: every other node has only
        lost free capacity since, so only the nodes freed since can hold it now, and the
        one :meth:`place` would choose is among them. On a full cluster a failed search
        of the index can visit much of the tree (per-resource maxima from different nodes
        keep passing the test); this costs one check per node freed since instead.
        Falls back to :meth:`place` when the log no longer reaches back to ``mark``."""
        fitting = self.freed_fits(demand, constraints, mark, allowed)
        if fitting is None:
            return self.place(demand, constraints, allowed)
        if self.strategy == "first-fit":
            return fitting[0] if fitting else None
        return self._choose(fitting, demand)

    def _freed_node(self, idx: int) -> None:
        last = self._last_freed
        if idx >= len(last):  # (a node not freed before beyond the array: grow it to every node)
            last = self._last_freed = np.concatenate(
                (last, np.full(max(len(self.states), idx + 1) - len(last), -1, dtype=np.intp)))
        last[idx] = self._freed_base + len(self._freed)
        self._freed.append(idx)
        if len(self._freed) > _FREED_LOG:  # keep the newer half; older marks fall back to place()
            half = len(self._freed) // 2
            del self._freed[:half]
            self._freed_base += half

    def place_after(self, demand: Vector, constraints: tuple, node: int,
                    allowed: Callable[[int], bool] | None = None) -> int | None:
        """First-fit only: the first node after ``node`` (in its eligible set) that fits."""
        # (``_tree`` and ``_effective`` read without a call where they would return at once:
        # first-fit asks this after most launches)
        tree = self._trees.get(constraints) or self._tree(constraints)
        need = demand if self.headroom is None and not self.devices else self._effective(demand)
        start = tree.position[node] + 1
        if start < len(tree.members):
            # the next node first: as first-fit fills the cluster in order, it is usually
            # the answer, and then one comparison replaces a search of the index
            nxt = tree.members[start]
            if (allowed is None or allowed(nxt)) and not any(map(gt, need, (self._rows[nxt] or self._fit_row(nxt))[1])):
                return nxt
        found = tree.first_fit(need, start)
        while found is not None and allowed is not None and not allowed(found):
            found = tree.first_fit(need, tree.position[found] + 1)
        return found

    def fits_on(self, node: int, demand: Vector) -> bool:
        # (without headroom or devices ``_effective`` is the demand itself; the row as
        # ``_fit_row`` keeps it: the engine asks this several times per decision)
        need = demand if self.headroom is None and not self.devices else self._effective(demand)
        return not any(map(gt, need, (self._rows[node] or self._fit_row(node))[1]))

    def eligible(self, constraints: tuple) -> list[int]:
        """The nodes (alive or not) whose attributes satisfy ``constraints``, in cluster order."""
        return self._tree(constraints).members
