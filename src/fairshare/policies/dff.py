"""Dominant Fairness Fairness (DFF) for heterogeneous clusters.

Wang et al., "Dominant Fairness Fairness: Hierarchical Scheduling for Multiple Resources
in Heterogeneous Datacenters", IEICE Trans. Inf. & Syst., 2016.

* Fair Resource (Def. 1, Eq. 3, Alg. 1 UpdateFR): ``FR_root = R``; a child gets
  ``fr_c,j = fr_parent,j * w_c / sum_{k in A_j} w_k`` where ``A_j`` are the siblings that
  need resource j, and 0 of a resource it does not need. A node "needs" j when a job
  below it demands a positive amount of j.
* Fairness (Def. 2, Eq. 6): ``f_i = max_j u_ij / fr_ij`` over the resources with
  ``fr_ij > 0``. Jobs, queues and the root all use it.
* Alg. 2 line 9, how we read it: after computing ``f_i`` of an internal node from its
  summed usage, if ``f_i > 1`` (it holds more than its Fair Resource of something) and
  its lowest *schedulable* demanding child has a lower fairness, the node takes that
  child's fairness, so a child that can still run is not held back by resources its
  blocked siblings took beyond their Fair Resource. ``f_i == 1`` exactly does not
  trigger it (the pseudo-code's strict ``>``), so a node whose only "full" resource sits
  exactly at its Fair Resource keeps that fairness; see docs/policies.md for the effect
  on the Table 1 workload.
* Alg. 3: descend from the root taking the schedulable child with the lowest fairness.
  The static allocation is the limit of this with infinitesimal tasks and a fixed set of
  jobs; FR is computed once (it only changes when jobs arrive or leave).
* Ties: as for every filling policy (see ``machinery/filling.py``): tied siblings grow together;
  siblings whose fairness cannot grow split the flow equally.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from fairshare.model.queues import ROOT
from fairshare.model.resources import Vector
from fairshare.model.scenario import Scenario
from fairshare.policies.dff_online import DFFSorter
from fairshare.policies.machinery.filling import LevelRule
from fairshare.policies.machinery.progressive import FillingPolicy
from fairshare.policies.machinery.reference import ShareRule
from fairshare.policies.machinery.tree import hierarchical_tree

K = TypeVar("K", bound=Hashable)


def update_fr(capacity: Vector, root: K, children: Mapping[K, Sequence[K]] | Sequence[Sequence[K]],
              weight: Mapping[K, float] | Sequence[float], jobs: Iterable[tuple[K, Vector]],
              ancestors: Callable[[K], Iterable[K]]) -> dict[K, Vector]:
    """DFF Alg. 1 (UpdateFR): every node's Fair Resource, for any node naming.

    ``jobs`` are the present jobs' nodes with their demands, ``ancestors(job)`` a job's
    queues up to the root, ``children[v]`` a node's children in order and ``weight[v]``
    its weight. A node needs resource r when a job below it demands a positive amount of
    r; ``FR_root = capacity`` and a child gets ``FR_parent,r * w_c / sum_{k needs r} w_k``
    (siblings in ``children`` order) of each resource it needs, 0 of the others. Nodes
    with no job below get no entry. Used by the static allocation, the reference sorter's
    rule and the incremental sorter alike, so all three compute the same floats.
    """
    m = len(capacity)
    needs: dict[K, list[bool]] = {}
    leaves: set[K] = set()
    for job, demand in jobs:
        flags = [d > 0 for d in demand]
        needs[job] = flags
        leaves.add(job)
        for a in ancestors(job):
            acc = needs.get(a)
            if acc is None:
                needs[a] = list(flags)
            else:
                for r in range(m):
                    acc[r] = acc[r] or flags[r]
    fr: dict[K, Vector] = {root: tuple(capacity)}
    stack = [root]
    while stack:
        v = stack.pop()
        live = [c for c in children[v] if c in needs]
        # per resource, the weight of the siblings that need it (Alg. 1's denominator)
        total = [sum(weight[k] for k in live if needs[k][r]) for r in range(m)]
        parent_fr = fr[v]
        for c in live:
            fr[c] = child_fr(parent_fr, weight[c], total, needs[c])
            if c not in leaves:
                stack.append(c)
    return fr


def child_fr(parent_fr: Sequence[float], weight: float, total: Sequence[float], needs: Sequence) -> Vector:
    """Alg. 1's step for one child: ``FR_parent,r * w / total_r`` of each resource it
    needs (``needs[r]`` true), 0 of the others; ``total_r`` is the weight of the siblings
    that need r. :func:`update_fr` and the incremental sorter both use it, so they compute
    the same floats from the same totals."""
    return tuple(parent_fr[r] * weight / total[r] if needs[r] else 0.0 for r in range(len(parent_fr)))


def fairness(usage: Sequence[float], fr: Sequence[float] | None) -> float:
    """Def. 2, Eq. 6: ``max_r U_r / FR_r`` over the resources with ``FR_r > 0`` (0 when
    there is none). A queue's fairness then takes Alg. 2 line 9's override (module
    docstring); a job's is this."""
    best = None
    if fr:
        for r in range(len(fr)):
            if fr[r] > 0:
                x = usage[r] / fr[r]
                if best is None or x > best:
                    best = x
    return 0.0 if best is None else best


def fair_resources(scenario: Scenario) -> dict[str, Vector]:
    """DFF Alg. 1 (UpdateFR) for every queue path and job name of a scenario (every job
    present); the root is ``""``, and a queue with no job below gets nothing (zeros)."""
    children: dict[str, list[str]] = {node.path: list(node.children) for node in scenario.queues}
    weight: dict[str, float] = {node.path: node.weight for node in scenario.queues}
    queue_of: dict[str, str] = {}
    for job in scenario.jobs:
        children.setdefault(job.queue, []).append(job.name)
        weight[job.name] = job.weight
        queue_of[job.name] = job.queue
    fr = update_fr(scenario.capacity, ROOT, children, weight,
                   ((job.name, job.composite_demand()) for job in scenario.jobs),
                   lambda name: scenario.queues.ancestors(queue_of[name]))
    for node in scenario.queues:
        fr.setdefault(node.path, (0.0,) * scenario.m)
    return fr


class DFFRule(ShareRule):
    """Dynamic DFF for the reference sorter (Alg. 1-3), per decision from scratch: a
    node's fairness over its Fair Resource, with Alg. 2 line 9's override for queues. FR
    is recomputed when a job arrives or leaves or the capacity changes (Alg. 3 lines
    10-11); ``dff_online.DFFSorter`` computes the same incrementally."""

    def __init__(self):
        self.fr: dict[str, Vector] | None = None

    def jobs_changed(self):
        self.fr = None

    def begin(self, sorter):
        if self.fr is not None:
            return
        jobs = sorted(sorter.jobs.values(), key=lambda j: j.order)
        children: dict[str, list[str]] = {node.path: list(node.children) for node in sorter.queues}
        weight: dict[str, float] = {node.path: node.weight for node in sorter.queues}
        for job in jobs:
            children.setdefault(job.queue, []).append(job.name)
            weight[job.name] = job.weight
        self.fr = update_fr(sorter.capacity, ROOT, children, weight, ((job.name, job.demand) for job in jobs),
                            lambda name: sorter.queues.ancestors(sorter.jobs[name].queue))

    def leaf_share(self, sorter, job, state):
        return fairness(job.usage, self.fr.get(job.name))

    def node_share(self, sorter, key, state):
        raw = fairness(state.usage[key], self.fr.get(key))
        live = [state.share[c] for c, _ in state.kids.get(key, []) if state.demanding[c] and not state.blocked[c]]
        if raw > 1.0 and live and min(live) < raw:  # Alg. 2 line 9
            raw = min(live)
        return raw


class DFF(FillingPolicy):
    name = "dff"
    share_is_usage_over_capacity = True
    citation = "Wang et al. IEICE'16, Def. 1-2, Alg. 1 (UpdateFR), Alg. 2 (UpdateF), Alg. 3 (dynamic DFF)"
    hierarchical = True
    rule = LevelRule(kind="dominant", dff_override=True)

    def build_tree(self, scenario, respect_counts):
        fr = fair_resources(scenario)
        return hierarchical_tree(scenario, respect_counts, ref_of=lambda key, _w: fr[key])[0]

    def share_rule(self, resources, *, slots_total=1):
        return DFFRule()

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Dynamic DFF, Alg. 1-3, incremental (``policies/dff_online.py``), with this
        module's Fair Resource and fairness."""
        return DFFSorter(len(resources), queues, capacity, update_fr=update_fr, child_fr=child_fr,
                         fairness=fairness)
