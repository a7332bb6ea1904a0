"""Base class for the policies defined by progressive filling, divisible and discrete.

A :class:`FillingPolicy` names a tree shape and a level rule; this module turns them
into the exact divisible allocation (:func:`~fairshare.policies.machinery.filling.fill`) and the
whole-task allocation on the nodes.

Whole tasks (``--discrete``) follow DRF Sec. 6.2 (Theorem 7): repeatedly give the
lowest-level demanding job one task, on the first node where it fits, until no job's
next task fits anywhere. The descent is Alg. 1 of H-DRF with tasks instead of slivers.
Written tie rule (``machinery/ties.py``, the online sorters' too): among siblings with
equal level (rounded to ``ties.DIGITS`` digits), the one with fewer tasks placed in its
subtree, then the one listed first (queue order in the file, jobs by submit time then
file order); among a job's classes, the least placed for its mix, then the first listed. Each node keeps its children in a heap keyed that way, and a
placement re-keys only the nodes on the path it changed (as the Mesos sorter does).
Free capacity only shrinks, so first-fit keeps one pointer per demand vector and never
looks at a node twice for it.

A gang (``Job.gang``) is indivisible: its "next task" is the whole gang, every task
placed at once (:func:`place_gang_whole`, ``pack`` honoured), given when the descent
reaches it (it has the lowest level, 0 while it waits) and the placement succeeds;
either way the gang is then blocked, at all of its tasks or at 0.
"""

from __future__ import annotations

import heapq
import math

from fairshare.model.allocation import Allocation, build_allocation
from fairshare.model.cluster import satisfies
from fairshare.model.jobs import PACK_NODE, Job
from fairshare.model.resources import fits, within
from fairshare.model.scenario import Scenario
from fairshare.policies.base import Policy, refuse_usage
from fairshare.policies.machinery.bounds import Phase, bounded_fill, phases
from fairshare.policies.machinery.filling import FillTree, LevelRule, fill
from fairshare.policies.machinery.ties import share_key, tie_key
from fairshare.policies.machinery.tree import add_history, per_class


class FillingPolicy(Policy):
    """A policy whose static allocation is a progressive filling of some tree."""

    rule: LevelRule = LevelRule()
    honours_queue_bounds = True
    #: C.S-Current: stop the whole allocation at the first saturated resource
    stop_at_first_saturation: bool = False

    def build_tree(self, scenario: Scenario, respect_counts: bool) -> FillTree:
        raise NotImplementedError

    def tree_with_history(self, scenario: Scenario, respect_counts: bool) -> FillTree:
        """:meth:`build_tree` with the scenario's past usage in its nodes (``add_history``;
        refused by the policies without memory)."""
        tree = self.build_tree(scenario, respect_counts)
        refuse_usage(scenario, self)
        add_history(tree, scenario)
        return tree

    def allocate(self, scenario: Scenario, *, respect_counts: bool = False) -> Allocation:
        tree = self.tree_with_history(scenario, respect_counts)
        if scenario.queues.bounded:  # guarantees and limits: a chain of fills (policies/machinery/bounds.py)
            result = bounded_fill(tree, self.rule, scenario, stop_at_first_saturation=self.stop_at_first_saturation)
        else:
            result = fill(tree, self.rule, stop_at_first_saturation=self.stop_at_first_saturation)
        notes = constraint_note(scenario) + history_note(scenario, tree, self.name)
        return build_allocation(scenario, self.name, "divisible", per_class(scenario, result.tasks), notes=notes)

    def allocate_discrete(self, scenario: Scenario, *, respect_counts: bool = False) -> Allocation:
        tree = self.tree_with_history(scenario, respect_counts)
        by_class, placement = place_whole_tasks(scenario, tree, self.rule, respect_counts=respect_counts,
                                                stop_at_first_block=self.stop_at_first_saturation,
                                                phases=phases(scenario, tree) if scenario.queues.bounded else None)
        # the entitlement each queue's whole tasks approximate (allocate JSON: fair_share)
        divisible = self.allocate(scenario, respect_counts=respect_counts)
        fair = {path: qa.allocation for path, qa in divisible.queues.items()}
        return build_allocation(scenario, self.name, "discrete", by_class, placement=placement, fair_shares=fair)


def constraint_note(scenario: Scenario) -> tuple[str, ...]:
    """Divisible mode pools the cluster into one machine, where placement constraints
    have no meaning; say so instead of silently dropping them."""
    if any(cls.constraints for job in scenario.jobs for cls in job.classes):
        return ("placement constraints are ignored on the pooled capacity; use --discrete to honour them",)
    return ()


def history_note(scenario: Scenario, tree: FillTree, policy: str) -> tuple[str, ...]:
    """A flat tree has no queue nodes for ``usage.queues`` to go to: say it was not used."""
    usage = scenario.usage
    if usage is None or not any(any(v) for v in usage.queues.values()):
        return ()
    if any(not tree.is_leaf[v] for v in range(1, len(tree.keys))):
        return ()
    return (f"usage.queues is ignored: policy {policy!r} orders jobs, not queues (only usage.jobs counts)",)


def place_whole_tasks(scenario: Scenario, tree: FillTree, rule: LevelRule, *, respect_counts: bool,
                      stop_at_first_block: bool = False, phases: list[Phase] | None = None):
    """Greedy whole-task allocation on the scenario's nodes (DRF Sec. 6.2).

    ``phases`` (guarantees and limits, ``policies/machinery/bounds.py``): the greedy runs once per
    phase, only the phase's eligible jobs receiving, and a task is placed only if every
    group (queue) of its job stays within its cap with it; a job whose next task would
    cross a cap is blocked for the phase, as one whose task fits on no node."""
    m = scenario.m
    n = len(tree.keys)
    jobs = {job.name: job for job in scenario.jobs}
    nodes = scenario.cluster.nodes
    free = [list(node.capacity) for node in nodes]
    node_attrs = [dict(node.attributes) for node in nodes]
    first_fit_ptr: dict[tuple, int] = {}

    def find_node(demand: tuple[float, ...], constraints) -> int | None:
        """First node (in order) where the task fits and its constraints allow it."""
        key = (demand, constraints)
        k = first_fit_ptr.get(key, 0)
        while k < len(nodes):
            f = free[k]
            attrs = node_attrs[k]
            if satisfies(attrs, constraints) and fits(demand, f):
                first_fit_ptr[key] = k
                return k
            k += 1
        first_fit_ptr[key] = k
        return None

    # (usage only sets levels here, so a node's history starts in it: FillTree.history)
    usage = [list(tree.history.get(v, (0.0,) * m)) for v in range(n)]
    subtree_tasks = [0] * n
    blocked = [False] * n
    live_children = [0] * n
    level = [0.0] * n
    version = [0] * n
    heaps: list[list[tuple[float, int, int, int, int]]] = [[] for _ in range(n)]
    position = {v: i for i, v in enumerate(range(n))}

    def raw_level(v: int) -> float:
        u = usage[v]
        ref = tree.ref[v]
        if rule.kind == "sum":
            return sum(u[r] / ref[r] for r in range(m) if ref[r] > 0)
        return max((u[r] / ref[r] for r in range(m) if ref[r] > 0), default=0.0)

    def best_child(v: int) -> int | None:
        if tree.fifo[v]:
            candidates = []
            first_leaf_seen = False
            for c in tree.children[v]:
                if blocked[c]:
                    continue
                if tree.is_leaf[c]:
                    if first_leaf_seen:
                        continue
                    first_leaf_seen = True
                candidates.append(c)
            if not candidates:
                return None
            return min(candidates, key=lambda c: tie_key(level[c], subtree_tasks[c], position[c]))
        heap = heaps[v]
        while heap:
            _lvl, _tasks, _pos, ver, c = heap[0]
            if blocked[c] or ver != version[c]:
                heapq.heappop(heap)
                continue
            return c
        return None

    def push(v: int) -> None:
        p = tree.parent[v]
        if p < 0:
            return
        version[v] += 1
        heapq.heappush(heaps[p], (*tie_key(level[v], subtree_tasks[v], position[v]), version[v], v))

    def refresh_level(v: int) -> None:
        lvl = raw_level(v)
        if rule.dff_override and not tree.is_leaf[v] and lvl > 1.0:
            c = best_child(v)
            if c is not None and level[c] < lvl:
                lvl = level[c]
        level[v] = lvl

    def open_phase(eligible: frozenset[int] | None) -> None:
        """Unblock every node, then block the internal nodes without children (they can
        never receive) and the leaves not eligible; fresh heaps."""
        for v in range(n):
            blocked[v] = False
            live_children[v] = 0 if tree.is_leaf[v] else len(tree.children[v])
            heaps[v] = []
        for v in range(n - 1, -1, -1):
            if (not tree.is_leaf[v] and live_children[v] == 0) or \
                    (eligible is not None and tree.is_leaf[v] and v not in eligible):
                _block(v, tree, blocked, live_children)
        for v in range(n):
            push(v)

    counts: dict[str, list[int]] = {job.name: [0] * len(job.classes) for job in scenario.jobs}
    placement: dict[str, dict[str, dict[str, int]]] = {}

    def next_class(job_name: str) -> int | None:
        job = jobs[job_name]
        mix = job.class_mix()
        placed = counts[job_name]
        best, best_key = None, math.inf
        for j, (cls, f) in enumerate(zip(job.classes, mix)):
            if f <= 0:
                continue
            if respect_counts and cls.count is not None and placed[j] >= cls.count:
                continue
            key = share_key(placed[j] / f)  # (the tie rule: the first listed among equals)
            if key < best_key:
                best, best_key = j, key
        return best

    def refresh_path(path: list[int]) -> None:
        for v in reversed(path):
            refresh_level(v)
            push(v)

    # groups (queues with a cap) of every phase, by leaf; their usage is shared by the
    # phases (a queue's guarantee group and its limit group are different entries)
    group_use: dict[tuple, list[float]] = {}

    def within_caps(leaf: int, demand, groups_of: dict[int, list[tuple]]) -> bool:
        for key in groups_of.get(leaf, ()):
            use = group_use[key]
            for r, c in key[1]:
                d = demand[r]
                if d > 0 and not within(use[r], d, c):
                    return False
        return True

    def take(leaf: int, path: list[int], groups_of: dict[int, list[tuple]], j: int, k: int) -> None:
        """Place one task of class ``j`` of ``leaf``'s job on node ``k``: the node, the
        groups, the counts, the placement and the usage up ``path``."""
        name = tree.keys[leaf]
        cls = jobs[name].classes[j]
        for r, d in enumerate(cls.demand):
            free[k][r] -= d
        for key in groups_of.get(leaf, ()):
            use = group_use[key]
            for r, d in enumerate(cls.demand):
                use[r] += d
        counts[name][j] += 1
        node_name = nodes[k].name
        slot = placement.setdefault(node_name, {}).setdefault(name, {})
        slot[cls.name] = slot.get(cls.name, 0) + 1
        for p in path:
            u = usage[p]
            for r, d in enumerate(cls.demand):
                u[r] += d
            subtree_tasks[p] += 1

    def place_gang(leaf: int, path: list[int], groups_of: dict[int, list[tuple]]) -> bool:
        """The gang's one decision: all of its tasks, if they fit together (nodes and caps),
        else none; then it is blocked. False when it found no room (an earlier phase's
        gang, already whole, is only blocked)."""
        job = jobs[tree.keys[leaf]]
        done = any(counts[job.name])
        nodes_of = None
        if not done and (not groups_of or within_caps(leaf, job.gang_demand(), groups_of)):
            nodes_of = place_gang_whole(job, free, node_attrs)
        for j, k in nodes_of or ():
            take(leaf, path, groups_of, j, k)
        _block(leaf, tree, blocked, live_children)
        refresh_path(path if nodes_of else path[:-1])
        return done or nodes_of is not None

    def run_phase(groups_of: dict[int, list[tuple]], stop_at_first_block: bool) -> None:
        while not blocked[0]:
            v = 0
            path = [0]
            stuck = False
            while not tree.is_leaf[v]:
                c = best_child(v)
                if c is None:  # every child blocked: close this subtree and start over
                    _block(v, tree, blocked, live_children)
                    refresh_path(path[:-1])
                    stuck = True
                    break
                v = c
                path.append(v)
            if stuck:
                continue
            leaf = v
            name = tree.keys[leaf]
            if jobs[name].gang:
                if not place_gang(leaf, path, groups_of) and stop_at_first_block:
                    break
                continue
            j = next_class(name)
            k = None
            if j is not None and (not groups_of or within_caps(leaf, jobs[name].classes[j].demand, groups_of)):
                k = find_node(jobs[name].classes[j].demand, jobs[name].classes[j].constraints)
            if j is None or k is None:
                _block(leaf, tree, blocked, live_children)
                if stop_at_first_block and j is not None:
                    break
                refresh_path(path[:-1])
                continue
            take(leaf, path, groups_of, j, k)
            refresh_path(path)

    if phases is None:
        open_phase(None)
        run_phase({}, stop_at_first_block)
    for phase in phases or ():
        groups_of: dict[int, list[tuple]] = {}
        for leaves, cap in phase.groups:
            # key: the leaves and the finite caps; one usage per distinct group
            key = (tuple(leaves), tuple((r, c) for r, c in enumerate(cap) if c < math.inf))
            if key not in group_use:  # what the earlier phases placed for the group's jobs
                use = [0.0] * m
                for i in leaves:
                    name = tree.keys[i]
                    for cls, placed in zip(jobs[name].classes, counts[name]):
                        for r, d in enumerate(cls.demand):
                            use[r] += placed * d
                group_use[key] = use
            for i in leaves:
                groups_of.setdefault(i, []).append(key)
        open_phase(phase.eligible)
        run_phase(groups_of, stop_at_first_block and phase.last)

    by_class = {name: tuple(float(x) for x in c) for name, c in counts.items()}
    return by_class, placement


def place_gang_whole(job: Job, free: list[list[float]], node_attrs: list[dict]) -> list[tuple[int, int]] | None:
    """A node for every task of gang ``job`` at once, as ``(class index, node index)``
    pairs, or None when they cannot all be placed. A trial on copies of ``free`` (left as
    it was): tasks in class order, each on the first node of the group where it fits and
    its constraints allow it, the groups being, by ``pack``, all nodes (None), each node
    alone (``node``) or the nodes of one attribute value in the order of their first node
    (``{attribute: A}``; nodes without A never used), as the engine's ``place_gang`` does."""
    everything = range(len(free))
    if job.pack is None:
        groups = [list(everything)]
    elif job.pack == PACK_NODE:
        groups = [[k] for k in everything]
    else:
        by_value: dict[str, list[int]] = {}
        for k in everything:
            value = node_attrs[k].get(job.pack[1])
            if value is not None:
                by_value.setdefault(value, []).append(k)
        groups = list(by_value.values())
    members = [j for j, cls in enumerate(job.classes) for _ in range(cls.count or 0)]
    for group in groups:
        trial = {k: list(free[k]) for k in group}
        chosen: list[tuple[int, int]] = []
        for j in members:
            cls = job.classes[j]
            k = next((k for k in group if satisfies(node_attrs[k], cls.constraints) and fits(cls.demand, trial[k])),
                     None)
            if k is None:
                break
            for r, d in enumerate(cls.demand):
                trial[k][r] -= d
            chosen.append((j, k))
        else:
            return chosen
    return None


def _block(v: int, tree: FillTree, blocked: list[bool], live_children: list[int]) -> None:
    """Mark ``v`` blocked and close every ancestor left without a live child."""
    while v >= 0 and not blocked[v]:
        blocked[v] = True
        p = tree.parent[v]
        if p < 0:
            return
        live_children[p] -= 1
        if live_children[p] > 0:
            return
        v = p
