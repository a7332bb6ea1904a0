"""Placement: which node a chosen task runs on (fairness chooses the job, this the node).

Strategies (``Placement(strategy=...)``):

* ``first-fit``: the first node, in cluster order, where the task fits (DRF Sec. 6.2's
  "one machine at a time"). Found through a segment tree over the nodes holding each
  resource's maximum free amount, so a search costs O(log nodes) when a fit exists.
* ``best-fit``: the feasible node with the least free capacity left afterwards (sum of
  normalised leftovers); ties by cluster order.
* ``packing``: the feasible node whose free vector is best aligned with the demand
  (largest dot product of normalised demand and free; Tetris-style packing, the choice
  Tan et al. Sec. 5 leave to "bin-packing algorithms"); ties by cluster order.

Constraints: a task class with ``constraints`` runs only on nodes whose attributes match;
each distinct constraint set gets its own index over its eligible nodes.

Headroom (H-DRF Sec. 5: "H-DRF maintains a headroom equal to the size of the largest
task on each server, to ensure that large tasks do not get starved out"): with
``headroom`` set to a vector H (the largest demand of each resource among active jobs),
a task must leave H_r free of every resource r it uses in a smaller amount than H_r
(0 < d_r < H_r); in a resource where it is as large as the largest task it may take the
last of it, and resources it does not use are not constrained. That keeps room for a
largest task on every node without blocking the large tasks themselves.

Slots (the slot scheduler, DRF Sec. 7.2 / H-DRF Sec. 5.3): with ``slots_per_node`` set,
a node holds that many tasks whatever their size: resources are not checked, and an
over-subscribed node is reported by :meth:`NodePool.oversubscription` so the executor can
slow its tasks down.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fairshare.model.cluster import Node
from fairshare.model.resources import Vector

STRATEGIES = ("first-fit", "best-fit", "packing")
_EPS = 1e-9


def _fits(demand: Sequence[float], free: Sequence[float]) -> bool:
    for d, f in zip(demand, free):
        if d > f + _EPS * max(1.0, abs(f)):
            return False
    return True


class _MaxTree:
    """Segment tree over a subset of nodes: per resource, the max free amount below."""

    def __init__(self, members: list[int], pool: NodePool):
        self.members = members  # node indices, in cluster order
        self.pool = pool
        size = 1
        while size < max(1, len(members)):
            size *= 2
        self.size = size
        m = pool.m
        self.tree = [[-1.0] * m for _ in range(2 * size)]
        self.position = {node: k for k, node in enumerate(members)}
        for k, node in enumerate(members):
            self.tree[size + k] = list(pool.available(node))
        for k in range(size - 1, 0, -1):
            a, b = self.tree[2 * k], self.tree[2 * k + 1]
            self.tree[k] = [x if x > y else y for x, y in zip(a, b)]

    def update(self, node: int) -> None:
        k = self.position.get(node)
        if k is None:
            return
        k += self.size
        self.tree[k] = list(self.pool.available(node))
        k //= 2
        while k:
            a, b = self.tree[2 * k], self.tree[2 * k + 1]
            self.tree[k] = [x if x > y else y for x, y in zip(a, b)]
            k //= 2

    def first_fit(self, demand: Vector, start: int = 0) -> int | None:
        """First member at position >= ``start`` where ``demand`` fits."""
        if not _fits(demand, self.tree[1]):
            return None
        return self._descend(1, 0, self.size, demand, start)

    def _descend(self, k: int, lo: int, hi: int, demand: Vector, start: int) -> int | None:
        # The per-resource maxima may come from different nodes, so a subtree that passes
        # the test can still hold no fit: backtrack then. Subtrees left of ``start`` are skipped.
        if hi <= start:
            return None
        if k >= self.size:
            if lo >= len(self.members):
                return None
            node = self.members[lo]
            return node if _fits(demand, self.pool.available(node)) else None
        mid = (lo + hi) // 2
        if _fits(demand, self.tree[2 * k]):
            found = self._descend(2 * k, lo, mid, demand, start)
            if found is not None:
                return found
        if _fits(demand, self.tree[2 * k + 1]):
            return self._descend(2 * k + 1, mid, hi, demand, start)
        return None

    def feasible(self, demand: Vector) -> list[int]:
        out: list[int] = []
        self._collect(1, demand, out)
        return out

    def _collect(self, k: int, demand: Vector, out: list[int]) -> None:
        if not _fits(demand, self.tree[k]):
            return
        if k >= self.size:
            idx = k - self.size
            if idx < len(self.members):
                node = self.members[idx]
                if _fits(demand, self.pool.available(node)):
                    out.append(node)
            return
        self._collect(2 * k, demand, out)
        self._collect(2 * k + 1, demand, out)


@dataclass
class _NodeState:
    node: Node
    free: list[float]
    alive: bool = True
    tasks: int = 0


class NodePool:
    """Free capacity of every node, and where a task may go. Node indices are stable:
    a node lost and added again keeps its index; new nodes are appended."""

    def __init__(self, nodes: Sequence[Node], m: int, *, strategy: str = "first-fit",
                 headroom: Vector | None = None, slots_per_node: int | None = None):
        if strategy not in STRATEGIES:
            raise ValueError(f"placement strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        self.m = m
        self.strategy = strategy
        self.headroom = tuple(headroom) if headroom is not None else None
        self.slots_per_node = slots_per_node
        self.states: list[_NodeState] = []
        self.index_of: dict[str, int] = {}
        self._trees: dict[tuple, _MaxTree] = {}
        self.total_free = [0.0] * m  # sum of free over alive nodes
        self._total: Vector | None = None
        for node in nodes:
            self._append(node)

    # --- nodes --------------------------------------------------------------------------
    def _append(self, node: Node) -> int:
        self._total = None
        idx = len(self.states)
        self.states.append(_NodeState(node, list(node.capacity)))
        self.index_of[node.name] = idx
        for r, c in enumerate(node.capacity):
            self.total_free[r] += c
        return idx

    def add_node(self, node: Node) -> int:
        idx = self.index_of.get(node.name)
        if idx is None:
            idx = self._append(node)
            self._trees.clear()  # membership changed: rebuild indexes lazily
        else:
            st = self.states[idx]
            if st.alive:
                raise ValueError(f"node {node.name!r} is already in the cluster")
            st.node, st.free, st.alive, st.tasks = node, list(node.capacity), True, 0
            self._total = None
            for r, c in enumerate(node.capacity):
                self.total_free[r] += c
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

    def take(self, idx: int, demand: Vector) -> None:
        st = self.states[idx]
        for r, d in enumerate(demand):
            st.free[r] -= d
            self.total_free[r] -= d
        st.tasks += 1
        self._touch(idx)

    def give_back(self, idx: int, demand: Vector) -> None:
        st = self.states[idx]
        if not st.alive:
            return
        for r, d in enumerate(demand):
            new = min(st.node.capacity[r], st.free[r] + d)
            self.total_free[r] += new - st.free[r]
            st.free[r] = new
        st.tasks -= 1
        self._touch(idx)

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
        """Per resource, the largest free amount on any alive node."""
        return tuple(self._tree(()).tree[1])

    def _touch(self, idx: int) -> None:
        for tree in self._trees.values():
            tree.update(idx)

    def _tree(self, constraints: tuple) -> _MaxTree:
        tree = self._trees.get(constraints)
        if tree is None:
            members = [i for i, st in enumerate(self.states)
                       if all(dict(st.node.attributes).get(k) in allowed for k, allowed in constraints)]
            tree = self._trees[constraints] = _MaxTree(members, self)
        return tree

    # --- placement ------------------------------------------------------------------------
    def _effective(self, demand: Vector) -> Vector:
        """Demand plus the headroom it must leave, in the resources where it is smaller
        than the largest task."""
        h = self.headroom
        if h is None or self.slots_per_node is not None:
            return demand
        return tuple(d + x if 0 < d < x else d for d, x in zip(demand, h))

    def place(self, demand: Vector, constraints: tuple = ()) -> int | None:
        """The node for one task of ``demand``, or None when it fits nowhere."""
        need = self._effective(demand)
        tree = self._tree(constraints)
        if self.strategy == "first-fit":
            return tree.first_fit(need)
        candidates = tree.feasible(need)
        if not candidates:
            return None
        cap = self.total_capacity
        scale = [1.0 / c if c > 0 else 0.0 for c in cap]
        if self.strategy == "best-fit":
            return min(candidates, key=lambda i: (sum((f - d) * s for f, d, s in
                                                      zip(self.states[i].free, demand, scale)), i))
        return max(candidates, key=lambda i: (sum(d * f * s * s for f, d, s in
                                                  zip(self.states[i].free, demand, scale)), -i))

    def place_after(self, demand: Vector, constraints: tuple, node: int) -> int | None:
        """First-fit only: the first node after ``node`` (in its eligible set) that fits."""
        tree = self._tree(constraints)
        return tree.first_fit(self._effective(demand), tree.position[node] + 1)

    def fits_on(self, node: int, demand: Vector) -> bool:
        return _fits(self._effective(demand), self.available(node))

    def fits_somewhere(self, demand: Vector, constraints: tuple = ()) -> bool:
        return self._tree(constraints).first_fit(self._effective(demand)) is not None
