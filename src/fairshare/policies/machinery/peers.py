"""What the peer baselines (``yarn-fair``, ``kueue``, ``slurm-fairtree``) share: reading
their ``peers:`` settings, and a sorter that ranks the queue tree per decision.

:class:`PeerSettings` reads one peer's section of the scenario's ``peers:`` (kept as
written by the loader, ``model/loader.py`` ``parse_peers``) and reports every problem at
once as a :class:`~fairshare.model.errors.ScenarioError` whose paths are
``peers.<peer>.<key>[...]`` (the loader's style). A key left out takes the peer's
documented default (each policy's docstring names it).

:class:`RankedTreeSorter` is the online seam for a policy that, like its peer, compares
queues with a comparator rather than a share that one heap can keep: it keeps each
queue's usage and demanding jobs as the events come, and for every decision lets the
policy sort each queue's demanding children (:meth:`RankedTreeSorter.order`) on its way
down, depth-first, to the first job that can run, as FairScheduler's
``FSParentQueue.assignContainer`` does. The peers sort per scheduling pass too; these
baselines favour being read against the peer's code over speed (docs/policies.md,
"Peer baselines").
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


class RankedTreeSorter(OnlineSorter):
    """Per decision a depth-first descent in the order :meth:`order` gives each queue's
    demanding children (queue paths and job names), to the first job that can run
    (module docstring). Each queue's usage and demanding jobs are kept as the events
    come (O(depth x m) per task start or end), so a decision costs the sorting of the
    queues it descends through."""

    def __init__(self, resources: int, queues: QueueTree, capacity: Vector):
        super().__init__(resources, queues, capacity)
        #: every queue's usage: what the jobs of its subtree hold
        self.usage: dict[str, list[float]] = {node.path: [0.0] * resources for node in queues}
        #: every queue's demanding jobs in its subtree
        self.demanding_below: dict[str, int] = {node.path: 0 for node in queues}
        #: every queue's own demanding jobs, in arrival order
        self.waiting: dict[str, dict[str, OnlineJob]] = {node.path: {} for node in queues}

    def _path_up(self, queue: str):
        path: str | None = queue
        while path is not None:
            yield path
            path = self.queues[path].parent

    def _demand(self, job: OnlineJob, sign: int) -> None:
        for path in self._path_up(job.queue):
            self.demanding_below[path] += sign
        mine = self.waiting[job.queue]
        if sign < 0:
            del mine[job.name]
            return
        last = next(reversed(mine), None)
        mine[job.name] = job
        if last is not None and mine[last].order > job.order:  # (demands again: back to its place)
            self.waiting[job.queue] = dict(sorted(mine.items(), key=lambda kv: kv[1].order))

    def _use(self, job: OnlineJob, demand: Vector, sign: float) -> None:
        for path in self._path_up(job.queue):
            row = self.usage[path]
            for r, d in enumerate(demand):
                row[r] = max(0.0, row[r] + sign * d)

    def add_job(self, name, queue, weight, demand):
        super().add_job(name, queue, weight, demand)
        self._demand(self.jobs[name], +1)

    def remove_job(self, name):
        job = self.jobs[name]
        if job.demanding:
            self._demand(job, -1)
        self._use(job, job.usage, -1.0)
        super().remove_job(name)

    def allocated(self, name, demand, now=0.0):
        super().allocated(name, demand, now)
        self._use(self.jobs[name], demand, +1.0)

    def released(self, name, demand, now=0.0):
        super().released(name, demand, now)
        self._use(self.jobs[name], demand, -1.0)

    def set_demanding(self, name, demanding):
        job = self.jobs[name]
        if job.demanding != demanding:
            super().set_demanding(name, demanding)
            self._demand(job, +1 if demanding else -1)

    def order(self, parent: str, queues: list[str], jobs: list[OnlineJob]) -> list[str]:
        """``parent``'s demanding children, queues and jobs, best first."""
        raise NotImplementedError

    def pick(self, runnable: Runnable, now: float = 0.0) -> str | None:
        demanding, waiting = self.demanding_below, self.waiting

        def descend(path: str) -> str | None:
            kids = [c for c in self.queues[path].children if demanding[c]]
            for key in self.order(path, kids, list(waiting[path].values())):
                if key in self.jobs:
                    if runnable(key):
                        return key
                    continue
                found = descend(key)
                if found is not None:
                    return found
            return None

        return descend(ROOT) if demanding[ROOT] else None
