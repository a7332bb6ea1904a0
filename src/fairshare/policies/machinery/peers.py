"""What the peer baselines (``yarn-fair``, ``kueue``, ``slurm-fairtree``) share: reading
their ``peers:`` settings, and a sorter that ranks the queue tree per decision.

:class:`PeerSettings` reads one peer's section of the scenario's ``peers:`` (kept as
written by the loader, ``model/loader.py`` ``parse_peers``) and reports every problem at
once as a :class:`~fairshare.model.errors.ScenarioError` whose paths are
``peers.<peer>.<key>[...]`` (the loader's style). A key left out takes the peer's
documented default (each policy's docstring names it).

:class:`RankedTreeSorter` is the online seam for a policy that, like its peer, compares
queues with a comparator rather than a share that one incremental structure can keep:
for every decision it sums each queue's usage from its jobs (O(jobs x depth)), lets the
policy order each queue's demanding children (:meth:`RankedTreeSorter.order`), and
descends depth-first to the first job that can run, as FairScheduler's
``FSParentQueue.assignContainer`` and Kueue's cohort tournament do. The peers recompute
their order per scheduling pass too; these baselines favour being read against the
peer's code over speed (docs/policies.md, "Peer baselines").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from fairshare.model.errors import FieldError, ScenarioError
from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.scenario import Scenario
from fairshare.model.resources import Vector
from fairshare.policies.online import OnlineJob, OnlineSorter, Runnable


class PeerBaseline:
    """What a peer baseline policy adds to ``Policy``: its settings, read from the
    scenario's ``peers:`` by :meth:`configured` (``Policy.configured``) with
    ``read_settings``; the peer's defaults (``settings_type()``) until then."""

    settings_type: ClassVar[type]
    #: ``read_settings(scenario)``: the checked settings (raises ``ScenarioError``)
    read_settings: ClassVar[Callable[[Scenario], Any]]

    def __init__(self) -> None:
        self.settings = self.settings_type()

    def configured(self, scenario: Scenario):
        policy = type(self)()
        policy.settings = type(self).read_settings(scenario)
        return policy


class PeerSettings:
    """One peer's ``peers.<peer>`` mapping, read key by key; :meth:`done` raises every
    problem found (unknown keys included) with its path."""

    def __init__(self, peer: str, raw: Mapping[str, Any] | None, known: Iterable[str]):
        self.peer = peer
        self.raw = dict(raw or {})
        self.errors: list[FieldError] = []
        for key in self.raw:
            if key not in known:
                self.error(key, f"unknown setting of the {peer} baseline; known: {', '.join(sorted(known))}")

    def path(self, key: str) -> str:
        return f"peers.{self.peer}.{key}"

    def error(self, key: str, reason: str) -> None:
        self.errors.append(FieldError(self.path(key), reason))

    def done(self) -> None:
        if self.errors:
            raise ScenarioError(self.errors)

    def choice(self, key: str, choices: Sequence[str], default: str) -> str:
        value = self.raw.get(key, default)
        if value not in choices:
            self.error(key, f"must be one of {', '.join(choices)}, got {value!r}")
            return default
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            self.error(key, f"must be true or false, got {value!r}")
            return default
        return value

    def number(self, key: str, default: float, *, minimum: float = 0.0, infinite_ok: bool = False) -> float:
        value = self.raw.get(key, default)
        if not _is_number(value) or value < minimum or (math.isinf(value) and not infinite_ok):
            self.error(key, f"must be a number >= {minimum:g}, got {value!r}")
            return default
        return float(value)

    def mapping(self, key: str) -> dict[Any, Any]:
        value = self.raw.get(key, {})
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.error(key, f"must be a mapping, got {value!r}")
            return {}
        return dict(value)

    def queue_map(self, key: str, queues: QueueTree, read: Callable[[str, Any], Any]) -> dict[str, Any]:
        """``key``: a mapping queue path -> value; each path must name a queue of the
        scenario, each value is ``read(path of the entry, value)`` (None: refused, and
        ``read`` has said why through :meth:`error`)."""
        out = {}
        for queue, value in self.mapping(key).items():
            where = f"{key}.{queue}"
            if not isinstance(queue, str) or queue not in queues or queue == ROOT:
                self.error(where, f"{queue!r} is not a queue of the scenario")
                continue
            got = read(where, value)
            if got is not None:
                out[queue] = got
        return out

    def amounts(self, where: str, value: Any, resources: Sequence[str], *,
                minimum: float = 0.0) -> dict[str, float] | None:
        """``{resource: amount}`` with scenario resources and amounts >= ``minimum``."""
        if not isinstance(value, Mapping):
            self.error(where, f"must be a mapping resource -> amount, got {value!r}")
            return None
        ok = True
        for resource, amount in value.items():
            if resource not in resources:
                self.error(f"{where}.{resource}", f"not a resource of the scenario ({', '.join(resources)})")
                ok = False
            elif not _is_number(amount) or amount < minimum or math.isnan(amount):
                self.error(f"{where}.{resource}", f"must be a number >= {minimum:g}, got {amount!r}")
                ok = False
        return {r: float(a) for r, a in value.items()} if ok else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def with_fifo(scenario: Scenario, fifo: Iterable[str]) -> Scenario:
    """``scenario`` with the queues ``fifo`` ordering their jobs by submission (``order:
    fifo``): a peer's FIFO queues, for the static fill (``machinery/tree.py``)."""
    from dataclasses import replace

    fifo = set(fifo)
    nodes = {node.path: replace(node, order="fifo") if node.path in fifo else node for node in scenario.queues}
    return replace(scenario, queues=QueueTree(nodes))


def subtree_usage(queues: QueueTree, jobs: Iterable[OnlineJob], m: int) -> dict[str, list[float]]:
    """Every queue's usage: the sum of what the jobs in its subtree hold."""
    usage = {node.path: [0.0] * m for node in queues}
    for job in jobs:
        path: str | None = job.queue
        while path is not None:
            row = usage[path]
            for r in range(m):
                row[r] += job.usage[r]
            path = queues[path].parent
    return usage


def subtree_demanding(queues: QueueTree, jobs: Iterable[OnlineJob]) -> set[str]:
    """The queues with a demanding job in their subtree."""
    out: set[str] = set()
    for job in jobs:
        if job.demanding:
            path: str | None = job.queue
            while path is not None and path not in out:
                out.add(path)
                path = queues[path].parent
    return out


class RankedTreeSorter(OnlineSorter):
    """Per decision: every queue's usage, then a depth-first descent in the order
    :meth:`order` gives each queue's demanding children (queue paths and job names),
    to the first job that can run (module docstring)."""

    def __init__(self, resources: int, queues: QueueTree, capacity: Vector):
        super().__init__(resources, queues, capacity)
        self.usage: dict[str, list[float]] = {}
        self._last: dict[str, float] = {}

    def order(self, parent: str, queues: list[str], jobs: list[OnlineJob]) -> list[str]:
        """``parent``'s demanding children, queues and jobs, best first."""
        raise NotImplementedError

    def admissible(self, job: OnlineJob) -> bool:
        """Whether the peer would start ``job``'s next task now, placement aside (Kueue's
        quota check); the default: always."""
        return True

    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        self.usage = subtree_usage(self.queues, self.jobs.values(), self.m)
        demanding = subtree_demanding(self.queues, self.jobs.values())
        jobs_in: dict[str, list[OnlineJob]] = {}
        for job in self.jobs.values():  # (arrival order)
            if job.demanding:
                jobs_in.setdefault(job.queue, []).append(job)

        def descend(path: str) -> str | None:
            kids = [c for c in self.queues[path].children if c in demanding]
            for key in self.order(path, kids, jobs_in.get(path, [])):
                if key in self.jobs:
                    job = self.jobs[key]
                    if self.admissible(job) and runnable(key):
                        return key
                    continue
                found = descend(key)
                if found is not None:
                    return found
            return None

        return descend(ROOT) if ROOT in demanding else None
