"""The queue tree: dotted paths, weights at every level, FIFO or fair ordering.

Queues are the internal nodes of the H-DRF hierarchy (H-DRF Sec. 2.1); jobs are its
leaves and live in ``Scenario.jobs``. The implicit root has the path ``""`` (``ROOT``).
Cycles cannot be written in the nested format; duplicate sibling names are rejected by
the loader and by ``QueueTree.build``.

A queue may carry a *guarantee* (it may always use at least this much of each listed
resource while it has demand) and a *limit* (it never uses more, even on an idle
cluster): resource name -> amount, in the scenario's units (docs/policies.md,
"Guarantees and limits"). :func:`bound_claims_problems` checks that they can be honoured
together.

A queue may also set its own *half-life* (``fairness: {half_life: S}``), which its jobs
and the queues below it use instead of the scenario's (docs/policies.md, "Fairness with
memory"): :meth:`QueueTree.half_life_of`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from fairshare.model.resources import fit_limit

ROOT = ""

#: a queue's guarantee or limit: (resource name, amount) pairs, sorted by name
Bounds = tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class QueueNode:
    path: str  # dotted path, e.g. "ads.prod"; ROOT for the root
    weight: float
    order: str = "fair"  # "fair" (by the policy) or "fifo" (jobs in submit order)
    children: tuple[str, ...] = ()  # child queue paths, in file order
    guarantee: Bounds = ()  # at least this much while demanding (listed resources only)
    limit: Bounds = ()  # never more than this (listed resources only)
    half_life: float | None = None  # its own decay half-life in seconds (None: its parent's)

    def guarantee_vector(self, resources: Sequence[str]) -> tuple[float, ...]:
        """The guarantee per resource, 0 where none is listed."""
        g = dict(self.guarantee)
        return tuple(g.get(r, 0.0) for r in resources)

    def limit_vector(self, resources: Sequence[str]) -> tuple[float, ...]:
        """The limit per resource, ``inf`` where none is listed."""
        lim = dict(self.limit)
        return tuple(lim.get(r, math.inf) for r in resources)

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
    def build(cls, entries: Iterable[tuple[str, float, str]], root_order: str = "fair",
              bounds: Mapping[str, tuple[Mapping[str, float], Mapping[str, float]]] | None = None,
              half_lives: Mapping[str, float] | None = None) -> QueueTree:
        """Build from ``(path, weight, order)`` triples, parents before children;
        ``bounds`` maps a queue path to its ``(guarantee, limit)`` mappings, ``half_lives``
        a queue path to its own half-life."""
        bounds = bounds or {}
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
            guarantee, limit = bounds.get(path, ({}, {}))
            nodes[path] = QueueNode(path, weight, order, tuple(children[path]),
                                    tuple(sorted(guarantee.items())), tuple(sorted(limit.items())),
                                    (half_lives or {}).get(path))
        unknown = sorted((set(bounds) | set(half_lives or {})) - set(spec))
        if unknown:
            raise ValueError(f"bounds or half-lives for unknown queue(s) {', '.join(map(repr, unknown))}")
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

    def half_life_of(self, path: str, default: float) -> float:
        """The half-life ``path``'s jobs decay with: its own, else its nearest ancestor's
        that sets one, else ``default`` (the scenario's ``fairness.half_life``)."""
        for queue in self.ancestors(path):
            own = self._nodes[queue].half_life
            if own is not None:
                return own
        return default

    def remembers(self, default: float) -> bool:
        """Whether any queue decays usage (a half-life above 0, its own or ``default``):
        whether the sorters need decayed usage at all."""
        return default > 0 or any(node.half_life for node in self)

    @property
    def bounded(self) -> bool:
        """Whether any queue has a guarantee or a limit."""
        return any(node.guarantee or node.limit for node in self)

    def changed(self, change: QueueChange) -> QueueTree:
        """The tree after ``change`` (``QueueChange``); this one is left as it is. Raises
        ``ValueError`` with the reason when the change cannot apply (the root, an unknown
        parent, removing an unknown queue). Whether jobs still use a removed queue is the
        caller's to check: the tree does not know its jobs."""
        path = change.path
        if not path or any(not part for part in path.split(".")):
            raise ValueError(f"must be a dotted queue path, got {path!r}")
        nodes = dict(self._nodes)
        if change.remove:
            if path not in nodes:
                raise ValueError(f"cannot remove queue {path!r}: there is no such queue")
            parent = nodes[path].parent
            nodes[parent] = replace(nodes[parent], children=tuple(c for c in nodes[parent].children if c != path))
            for gone in [p for p in nodes if p == path or p.startswith(path + ".")]:
                del nodes[gone]
            return QueueTree(nodes)
        node = nodes.get(path)
        if node is None:
            parent = path.rsplit(".", 1)[0] if "." in path else ROOT
            if parent not in nodes:
                raise ValueError(f"cannot add queue {path!r}: its parent queue {parent!r} does not exist")
            nodes[parent] = replace(nodes[parent], children=nodes[parent].children + (path,))
            node = QueueNode(path, 1.0)
        if change.weight is not None:
            if not (change.weight > 0 and math.isfinite(change.weight)):
                raise ValueError(f"weight must be a positive number, got {change.weight!r}")
            node = replace(node, weight=float(change.weight))
        if change.order is not None:
            node = replace(node, order=change.order)
        if change.guarantee is not None:
            node = replace(node, guarantee=tuple(sorted(change.guarantee)))
        if change.limit is not None:
            node = replace(node, limit=tuple(sorted(change.limit)))
        if change.half_life is not None:
            node = replace(node, half_life=change.half_life)
        nodes[path] = node
        return QueueTree(nodes)


@dataclass(frozen=True)
class QueueChange:
    """One queue's change at run time (a scenario's ``events: [{time, queue: {...}}]``, the
    live service's ``PUT /v1/queues``): fields left None keep the queue's value.

    An existing ``path`` gets the given ``weight``, ``order``, ``guarantee``, ``limit``
    and ``half_life`` (a bound of ``()`` removes it; a half-life can be set, not removed); a new ``path`` is added under its dotted parent
    (weight 1, order fair unless given), after its siblings; ``remove`` removes a queue
    (and its subtree) that no job uses. :meth:`QueueTree.changed` applies it.
    """

    path: str
    weight: float | None = None
    order: str | None = None
    guarantee: Bounds | None = None
    limit: Bounds | None = None
    remove: bool = False
    half_life: float | None = None  # its own decay half-life (docs/policies.md, "Fairness with memory")


def bound_claims_problems(queues: QueueTree, resources: Sequence[str],
                          capacity: Sequence[float]) -> list[tuple[str, str, str]]:
    """Why the guarantees and limits cannot all be honoured: ``(queue path, "guarantee"
    or "limit", reason)`` for each problem, [] when they can.

    A queue's *claim* on resource r is its guarantee of r when it lists one, otherwise
    the sum of its children's claims (a queue without its own guarantee passes its
    children's up). Three rules:

    * unknown resource names are refused;
    * a queue's guarantee of r must not exceed its own limit of r, and no queue's claim
      may exceed its limit (a child's guarantee cannot be honoured past an ancestor's
      limit);
    * the children's claims on r must fit in their parent's guarantee of r when it lists
      one, and the top-level queues' claims in the cluster's capacity of r.

    "Exceed" and "fit" allow the fit test's tolerance (``model.resources.fit_limit``), as
    the engine's limit and guarantee tests do.
    """
    problems: list[tuple[str, str, str]] = []
    known = set(resources)
    for node in queues:
        for kind, pairs in (("guarantee", node.guarantee), ("limit", node.limit)):
            for name, _amount in pairs:
                if name not in known:
                    problems.append((node.path, f"{kind}.{name}",
                                     f"unknown resource {name!r} (resources: {', '.join(resources)})"))
    claims: dict[str, list[float]] = {}
    m = len(resources)

    def claim(path: str) -> list[float]:
        node = queues[path]
        kids = [claim(c) for c in node.children]
        total = [sum(k[r] for k in kids) for r in range(m)]
        own = dict(node.guarantee)
        label = "the root" if path == ROOT else repr(path)
        for r, name in enumerate(resources):
            if name in own and total[r] > fit_limit(own[name]):
                problems.append((path, f"guarantee.{name}",
                                 f"the guarantees of the queues below {label} add up to {total[r]:g} {name}, "
                                 f"more than its own guarantee of {own[name]:g}"))
        out = [own.get(name, total[r]) for r, name in enumerate(resources)]
        limits = dict(node.limit)
        for r, name in enumerate(resources):
            if name in limits and out[r] > fit_limit(limits[name]):
                what = (f"its guarantee of {out[r]:g} {name} exceeds" if name in own else
                        f"the guarantees of the queues below it add up to {out[r]:g} {name}, more than")
                problems.append((path, f"limit.{name}", f"{what} its limit of {limits[name]:g}"))
        claims[path] = out
        return out

    top = claim(ROOT)
    for r, name in enumerate(resources):
        if top[r] > fit_limit(capacity[r]):
            problems.append((ROOT, f"guarantee.{name}",
                             f"the top-level queues' guarantees add up to {top[r]:g} {name}, more than the "
                             f"cluster's {capacity[r]:g}"))
    return problems


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
