"""Build the :class:`~fairshare.policies.machinery.filling.FillTree` a policy fills from a scenario."""

from __future__ import annotations

from collections.abc import Callable

from fairshare.model.jobs import Job
from fairshare.model.queues import ROOT
from fairshare.model.resources import Vector
from fairshare.model.scenario import Scenario
from fairshare.policies.machinery.filling import FillTree


def job_cap(job: Job, respect_counts: bool) -> float | None:
    """A leaf's task cap: its total count with ``--respect-counts``, else unbounded. A
    gang's always: all of its demand is what it is admitted with (``FillTree.gang``)."""
    if job.gang or respect_counts:
        return float(job.total_count) if job.total_count is not None else None
    return None


def jobs_in_order(scenario: Scenario) -> list[Job]:
    """Jobs by submit time, then file order: the FIFO order and the report order."""
    indexed = list(enumerate(scenario.jobs))
    indexed.sort(key=lambda p: (p[1].submit_s, p[0]))
    return [job for _, job in indexed]


def weighted_capacity(scenario: Scenario, weight: float) -> Vector:
    """``weight * R``: dividing by it turns a usage into a weighted share (DRF Sec. 4.3)."""
    return tuple(weight * c for c in scenario.capacity)


def flat_tree(scenario: Scenario, respect_counts: bool, *, fifo: bool = False,
              leaf_ref: Callable[[Job], Vector] | None = None) -> FillTree:
    """Every job directly under the root (DRF, Asset, collapsed, CPU, FIFO)."""
    tree = FillTree(scenario.m, scenario.capacity)
    root = tree.add("", -1, ref=scenario.capacity, fifo=fifo)
    for job in jobs_in_order(scenario) if fifo else scenario.jobs:
        ref = leaf_ref(job) if leaf_ref else weighted_capacity(scenario, job.weight)
        tree.add(job.name, root, ref=ref, leaf=True, demand=job.composite_demand(),
                 cap_tasks=job_cap(job, respect_counts), gang=job.gang)
    return tree


def hierarchical_tree(scenario: Scenario, respect_counts: bool,
                      ref_of: Callable[[str, float], Vector] | None = None) -> tuple[FillTree, dict[str, int]]:
    """Root, queues, then jobs as leaves below their queue (H-DRF Sec. 2.1).

    ``ref_of(key, weight)`` gives a node's reference vector (default ``weight * R``).
    Returns the tree and a map from queue path / job name to node index.
    """
    ref_of = ref_of or (lambda _key, w: weighted_capacity(scenario, w))
    tree = FillTree(scenario.m, scenario.capacity)
    index: dict[str, int] = {}
    root_node = scenario.queues[ROOT]
    index[ROOT] = tree.add(ROOT, -1, ref=scenario.capacity, fifo=root_node.order == "fifo")
    by_queue: dict[str, list[Job]] = {}
    for job in jobs_in_order(scenario):
        by_queue.setdefault(job.queue, []).append(job)

    def visit(path: str) -> None:
        node = scenario.queues[path]
        for child in node.children:
            q = scenario.queues[child]
            index[child] = tree.add(child, index[path], ref=ref_of(child, q.weight), fifo=q.order == "fifo")
            visit(child)
        for job in by_queue.get(path, []):
            index[job.name] = tree.add(job.name, index[path], ref=ref_of(job.name, job.weight), leaf=True,
                                       demand=job.composite_demand(), cap_tasks=job_cap(job, respect_counts),
                                       gang=job.gang)

    visit(ROOT)
    return tree, index


def add_history(tree: FillTree, scenario: Scenario) -> None:
    """Give ``tree``'s nodes the scenario's past usage (``FillTree.history``): a leaf its
    job's, a queue node its subtree's (``PastUsage.queue_totals``: a queue remembers the
    jobs below it, as the online H-DRF sorter's hidden leaf does). Nodes without history
    get none, so all-zero usage leaves the filling as it was. Flat trees have no queue
    nodes: ``usage.queues`` has no node to go to there."""
    usage = scenario.usage
    if usage is None:
        return
    queues = usage.queue_totals(scenario.jobs, scenario.queues, scenario.m)
    for v in range(1, len(tree.keys)):  # (node 0, the root, holds the capacity's usage)
        key = tree.keys[v]
        past = usage.jobs.get(key) if tree.is_leaf[v] else queues.get(key)
        if past is not None and any(past):
            tree.history[v] = past


def per_class(scenario: Scenario, composite_tasks: dict[str, float]) -> dict[str, tuple[float, ...]]:
    """Split each job's composite tasks over its classes by its class mix."""
    out = {}
    for job in scenario.jobs:
        x = composite_tasks.get(job.name, 0.0)
        out[job.name] = tuple(x * f for f in job.class_mix())
    return out
