"""The straightforward reference: Alg. 1 of H-DRF run literally, epsilon by epsilon.

Bhattacharya et al., SoCC 2013, Alg. 1 (and DRF's progressive filling, Ghodsi et al.
App. A.1): at every step recompute every node's level from scratch, descend from the root
to the lowest non-blocked child, give that leaf a sliver raising its dominant share by
``epsilon``, repeat until nothing can be scheduled. It is slow (O(steps x nodes)) and
only approximate (error O(epsilon) per leaf), and that is the point: it shares no code
with :mod:`fairshare.policies.machinery.filling` beyond the tree, so tests can hold the exact
engine to it, and benchmarks can report the speed ratio.

Ties: the child with the fewest slivers in its subtree, then the first listed; over many
steps this hands tied siblings slivers in turn, which is the rule ``filling`` uses in the
limit (equal levels, or equal flow for siblings whose level cannot grow).
"""

from __future__ import annotations

from fairshare.policies.machinery.filling import FillTree, LevelRule
from fairshare.policies.machinery.ties import tie_key


def reference_fill(tree: FillTree, rule: LevelRule = LevelRule(), *, epsilon: float = 1e-3,
                   max_steps: int = 5_000_000) -> dict[str, float]:
    """Composite tasks per leaf key, by literal epsilon steps."""
    n, m, cap = len(tree.keys), tree.resources, tree.capacity
    leaves = [i for i in range(n) if tree.is_leaf[i]]
    unit: dict[int, tuple[float, ...]] = {}
    delta: dict[int, float] = {}
    for i in leaves:
        d = tree.demand[i]
        delta[i] = max(d[r] / cap[r] for r in range(m) if cap[r] > 0)
        unit[i] = tuple(x / delta[i] for x in d)  # usage of one unit of dominant share
    share = {i: 0.0 for i in leaves}
    steps_in = [0] * n
    used = [0.0] * m
    done = set()

    def usage(v: int) -> list[float]:
        if tree.is_leaf[v]:
            return [share[v] * x for x in unit[v]]
        total = [0.0] * m
        for c in tree.children[v]:
            for r, x in enumerate(usage(c)):
                total[r] += x
        return total

    def raw_level(v: int) -> float:
        u, ref = usage(v), tree.ref[v]
        past = tree.history.get(v)  # (past usage counts in the level: FillTree.history)
        if past is not None:
            u = [x + p for x, p in zip(u, past)]
        if rule.kind == "sum":
            return sum(u[r] / ref[r] for r in range(m) if ref[r] > 0)
        return max((u[r] / ref[r] for r in range(m) if ref[r] > 0), default=0.0)

    def live(v: int) -> bool:
        if tree.is_leaf[v]:
            return v not in done
        return any(live(c) for c in tree.children[v])

    def level(v: int) -> float:
        lvl = raw_level(v)
        if rule.dff_override and not tree.is_leaf[v] and lvl > 1.0:
            kids = [level(c) for c in tree.children[v] if live(c)]
            if kids and min(kids) < lvl:
                lvl = min(kids)
        return lvl

    def candidates(v: int) -> list[int]:
        kids = [c for c in tree.children[v] if live(c)]
        if tree.fifo[v]:
            first = next((c for c in kids if tree.is_leaf[c]), None)
            kids = [c for c in kids if not tree.is_leaf[c] or c == first]
        return kids

    for _ in range(max_steps):
        if not live(0):
            break
        v, path = 0, [0]
        while not tree.is_leaf[v]:
            kids = candidates(v)
            v = min(kids, key=lambda c: tie_key(level(c), steps_in[c], tree.children[path[-1]].index(c)))
            path.append(v)
        step = epsilon
        if tree.cap_tasks[v] is not None:
            step = min(step, tree.cap_tasks[v] * delta[v] - share[v])
        for r in range(m):
            if unit[v][r] > 0:
                step = min(step, (cap[r] - used[r]) / unit[v][r])
        if step <= 1e-15:
            done.add(v)
            continue
        share[v] += step
        for r in range(m):
            used[r] += step * unit[v][r]
        for p in path:
            steps_in[p] += 1
        if step < epsilon:
            done.add(v)  # reached its cap or a resource it needs is now saturated
        # A resource that filled up blocks every leaf that needs it (Alg. 1: "a task that
        # can be scheduled using the current free resources").
        for r in range(m):
            if cap[r] - used[r] <= 1e-12 * cap[r]:
                for i in leaves:
                    if unit[i][r] > 0:
                        done.add(i)
    return {tree.keys[i]: share[i] / delta[i] for i in leaves}
