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
* Ties: as for every filling policy (see ``filling.py``): tied siblings grow together;
  siblings whose fairness cannot grow split the flow equally.
"""

from __future__ import annotations

from fairshare.model.queues import ROOT
from fairshare.model.resources import Vector
from fairshare.model.scenario import Scenario
from fairshare.policies._tree import hierarchical_tree
from fairshare.policies.filling import LevelRule
from fairshare.policies.progressive import FillingPolicy


def fair_resources(scenario: Scenario) -> dict[str, Vector]:
    """DFF Alg. 1 (UpdateFR) for every queue path and job name; the root is ``""``."""
    m = scenario.m
    needs: dict[str, list[bool]] = {}

    def mark(key: str, demand: Vector) -> None:
        flags = needs.setdefault(key, [False] * m)
        for r in range(m):
            if demand[r] > 0:
                flags[r] = True

    children: dict[str, list[tuple[str, float]]] = {}
    for node in scenario.queues:
        children[node.path] = [(c, scenario.queues[c].weight) for c in node.children]
    for job in scenario.jobs:
        d = job.composite_demand()
        mark(job.name, d)
        for path in scenario.queues.ancestors(job.queue):
            mark(path, d)
        children.setdefault(job.queue, []).append((job.name, job.weight))

    fr: dict[str, Vector] = {ROOT: tuple(scenario.capacity)}

    def visit(key: str) -> None:
        kids = [(c, w) for c, w in children.get(key, []) if c in needs]
        for c, w in kids:
            vec = []
            for r in range(m):
                demanding = sum(wk for k, wk in kids if needs[k][r])
                vec.append(fr[key][r] * w / demanding if needs[c][r] else 0.0)
            fr[c] = tuple(vec)
            visit(c)
        for c, _w in children.get(key, []):
            if c not in needs:  # a queue with no jobs below it gets nothing
                fr[c] = (0.0,) * m
                visit(c)

    visit(ROOT)
    return fr


class DFF(FillingPolicy):
    name = "dff"
    share_is_usage_over_capacity = True
    citation = "Wang et al. IEICE'16, Def. 1-2, Alg. 1 (UpdateFR), Alg. 2 (UpdateF), Alg. 3 (dynamic DFF)"
    hierarchical = True
    rule = LevelRule(kind="dominant", dff_override=True)

    def build_tree(self, scenario, respect_counts):
        fr = fair_resources(scenario)
        return hierarchical_tree(scenario, respect_counts, ref_of=lambda key, _w: fr[key])[0]

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        """Dynamic DFF, Alg. 1-3, incremental (``policies/dff_online.py``)."""
        from fairshare.policies.dff_online import DFFSorter

        return DFFSorter(len(resources), queues, capacity)
