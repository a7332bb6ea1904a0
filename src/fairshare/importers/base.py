"""What every config importer produces: a queue tree in the scenario format, and what it could not say.

A config importer (one module per peer format, registered in ``importers.KINDS``) reads a
peer scheduler's queue configuration and returns an :class:`ImportedConfig`: the
scenario's ``queues:`` entries (nested, weights, guarantees, limits, ``order``), an
optional ``preemption:`` section, the ``peers:`` section its baseline policy reads
(``model.schema.PEERS``), and one :class:`Unsupported` per setting of the format that
fairshare cannot express, named by its path in the input (``root.a.maxRunningApps``,
``ClusterQueue/team-a.spec.resourceGroups[0].flavors[1]``). Nothing is dropped silently.

Amounts are absolute: a format that states percentages of the cluster (capacity-scheduler)
resolves them against :class:`ClusterSize`, the cluster the user gave
(``fairshare import --nodes FILE`` or ``--cluster``). :func:`build_scenario` joins the
two into a scenario document (the contract's format) that ``fairshare allocate`` and
``simulate`` load as is.

Layering: imports ``model`` only; ``cli`` and ``whatif`` import it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

#: a node list in the scenario format: ``[{name, count, capacity: {RES: amount}, attributes?}]``
NodeList = list[dict[str, Any]]


class ImportError_(ValueError):
    """A file the importer cannot read at all: the message names the file, the field path
    and the reason (the CLI prints it and exits 2; nothing is written)."""


@dataclass(frozen=True)
class Unsupported:
    """A setting the input has and fairshare cannot express (or expresses differently)."""

    path: str  # where in the input: file-relative path of the setting
    message: str  # what it is and what fairshare does instead (ignored, approximated as ...)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class ClusterSize:
    """The cluster the imported queues share: the scenario's ``cluster:`` section.

    Either ``nodes`` (a node list, from ``--nodes FILE``) or ``capacity`` (one pooled
    capacity, from ``--cluster cpu=64,memory=256``); ``total`` is their pooled sum, the
    base of percentages."""

    total: dict[str, float]
    nodes: NodeList | None = None

    def section(self) -> dict[str, Any]:
        return {"nodes": self.nodes} if self.nodes is not None else {"capacity": dict(self.total)}


@dataclass
class ImportedConfig:
    """A converted queue configuration (everything but the cluster and the jobs)."""

    kind: str  # the importer (``yarn-fair`` ...)
    queues: list[dict[str, Any]]  # the scenario's ``queues:`` entries, nested by ``children``
    #: the baseline policy that behaves like the peer (``--policy current`` in whatif)
    policy: str
    preemption: dict[str, Any] | None = None  # the scenario's ``preemption:`` section
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)  # the ``peers:`` section
    fairness: dict[str, Any] | None = None  # the ``fairness:`` section (decayed usage)
    #: resources the config names that the cluster must have (for the summary's check)
    resources: list[str] = field(default_factory=list)
    unsupported: list[Unsupported] = field(default_factory=list)
    #: what the user should know about a setting that was imported as written (a limit of
    #: 0 on a resource, ...): shown by the summary, never an error with ``--strict``
    notes: list[str] = field(default_factory=list)
    #: queue path in the input (``root.a.b``) -> dotted path in the scenario (``a.b``)
    queue_paths: dict[str, str] = field(default_factory=dict)

    def warn(self, path: str, message: str) -> None:
        self.unsupported.append(Unsupported(path, message))


def queue_entries(queues: list[dict[str, Any]], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every entry of a scenario's ``queues:`` list with its dotted path, parents first
    (nested by ``children``; a dotted ``name`` is its own path below the prefix)."""
    for entry in queues or []:
        path = f"{prefix}{entry.get('name')}"
        yield path, entry
        yield from queue_entries(entry.get("children") or [], f"{path}.")


def build_scenario(imported: ImportedConfig, cluster: ClusterSize,
                   jobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The scenario document: the cluster, the imported sections, and ``jobs`` (``[]``:
    the queues only, for ``allocate`` with jobs added later, or ``whatif``'s history)."""
    doc: dict[str, Any] = {}
    if imported.resources:
        ordered = list(imported.resources) + [r for r in cluster.total if r not in imported.resources]
        doc["resources"] = [r for r in ordered if r in cluster.total]
    doc["cluster"] = cluster.section()
    doc["queues"] = imported.queues
    for key in ("preemption", "fairness"):
        value = getattr(imported, key)
        if value is not None:
            doc[key] = value
    if imported.peers:
        doc["peers"] = imported.peers
    doc["jobs"] = list(jobs or [])
    return doc
