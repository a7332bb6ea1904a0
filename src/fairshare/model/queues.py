"""The queue tree: dotted paths, weights at every level, FIFO or fair ordering.

Queues are the internal nodes of the H-DRF hierarchy (H-DRF Sec. 2.1); jobs are its
leaves and live in ``Scenario.jobs``. The implicit root has the path ``""`` (``ROOT``).
Cycles cannot be written in the nested format; duplicate sibling names are rejected by
the loader and by ``QueueTree.build``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

ROOT = ""


@dataclass(frozen=True)
class QueueNode:
    path: str  # dotted path, e.g. "ads.prod"; ROOT for the root
    weight: float
    order: str = "fair"  # "fair" (by the policy) or "fifo" (jobs in submit order)
    children: tuple[str, ...] = ()  # child queue paths, in file order

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def parent(self) -> str | None:
        if self.path == ROOT:
            return None
        return self.path.rsplit(".", 1)[0] if "." in self.path else ROOT


class QueueTree:
    """Immutable queue hierarchy keyed by dotted path."""

    def __init__(self, nodes: dict[str, QueueNode]):
        if ROOT not in nodes:
            raise ValueError("queue tree needs a root")
        self._nodes = dict(nodes)

    @classmethod
    def build(cls, entries: Iterable[tuple[str, float, str]], root_order: str = "fair") -> QueueTree:
        """Build from ``(path, weight, order)`` triples, parents before children."""
        children: dict[str, list[str]] = {ROOT: []}
        spec: dict[str, tuple[float, str]] = {}
        for path, weight, order in entries:
            if path in spec or path == ROOT:
                raise ValueError(f"duplicate queue {path!r}")
            parent = path.rsplit(".", 1)[0] if "." in path else ROOT
            if parent not in children:
                raise ValueError(f"queue {path!r} has no parent queue {parent!r}")
            children[parent].append(path)
            children[path] = []
            spec[path] = (weight, order)
        nodes = {ROOT: QueueNode(ROOT, 1.0, root_order, tuple(children[ROOT]))}
        for path, (weight, order) in spec.items():
            nodes[path] = QueueNode(path, weight, order, tuple(children[path]))
        return cls(nodes)

    def __contains__(self, path: object) -> bool:
        return path in self._nodes

    def __getitem__(self, path: str) -> QueueNode:
        return self._nodes[path]

    def __iter__(self) -> Iterator[QueueNode]:
        """Pre-order, root first, children in file order."""
        stack = [ROOT]
        while stack:
            path = stack.pop()
            node = self._nodes[path]
            yield node
            stack.extend(reversed(node.children))

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def paths(self) -> list[str]:
        """Every queue path except the root, pre-order."""
        return [n.path for n in self if n.path != ROOT]

    def ancestors(self, path: str) -> list[str]:
        """``path`` and its ancestors up to (and including) the root, leaf first."""
        out = [path]
        while path != ROOT:
            path = self._nodes[path].parent  # type: ignore[assignment]
            out.append(path)
        return out

    def depth(self, path: str) -> int:
        return 0 if path == ROOT else path.count(".") + 1


def share_guarantees(queues: QueueTree, jobs) -> tuple[dict[str, float], dict[str, float]]:
    """H-DRF Sec. 2.1's hierarchical share guarantee of every queue and job:
    ``(queue path -> fraction, job name -> fraction)``.

    A node's fraction is its parent's times ``w / sum(w of demanding siblings)``; a queue
    demands when one of ``jobs`` (objects with ``name``, ``queue``, ``weight``: the
    demanding jobs) is below it. Queues without such jobs are left out. The job fractions
    are also the collapsed hierarchy's leaf weights (H-DRF Sec. 3.2).
    """
    jobs = list(jobs)
    has_jobs: set[str] = set()
    for job in jobs:
        has_jobs.update(queues.ancestors(job.queue))
    totals: dict[str, float] = {}
    for path in queues.paths:
        if path in has_jobs:
            parent = queues[path].parent
            totals[parent] = totals.get(parent, 0.0) + queues[path].weight
    for job in jobs:
        totals[job.queue] = totals.get(job.queue, 0.0) + job.weight
    queue_g: dict[str, float] = {ROOT: 1.0}
    for path in queues.paths:  # pre-order: parents first
        if path in has_jobs:
            node = queues[path]
            queue_g[path] = queue_g[node.parent] * node.weight / totals[node.parent]
    job_g = {job.name: queue_g[job.queue] * job.weight / totals[job.queue] for job in jobs}
    queue_g.pop(ROOT)
    return queue_g, job_g
