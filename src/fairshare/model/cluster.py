"""The cluster: one pooled capacity (the papers' divisible setting) or discrete nodes."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from fairshare.model.resources import Vector


def satisfies(attributes: Mapping[str, str] | Iterable[tuple[str, str]],
              constraints: Iterable[tuple[str, Collection[str]]]) -> bool:
    """Whether a node with these ``attributes`` (a mapping, or ``Node.attributes``' pairs)
    may run a task with these ``constraints`` (``TaskClass.constraints``' pairs of attribute
    and allowed values, or a mapping's ``items()``): for every constrained attribute the node has
    one of the allowed values. A node without the attribute satisfies no constraint on it;
    no constraints, every node. Values are compared as given: the loader makes attributes
    and allowed values strings. The one eligibility rule of the loader, the trace
    converters, placement, the whole-task static greedy and the audits."""
    attrs = attributes if isinstance(attributes, Mapping) else dict(attributes)
    return all(attrs.get(key) in allowed for key, allowed in constraints)


@dataclass(frozen=True)
class Node:
    """One machine. ``group`` is the name of the node entry it was expanded from."""

    name: str
    capacity: Vector
    group: str = ""
    attributes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Cluster:
    """``capacity`` is the pooled total; ``nodes`` the machines (one for a pooled cluster).

    ``pooled`` is True when the scenario gave only a capacity: then ``nodes`` holds a
    single node named ``pool`` whose capacity is the whole cluster.
    """

    capacity: Vector
    nodes: tuple[Node, ...]
    pooled: bool = False
    resources: tuple[str, ...] = field(default=())
    #: indices (into ``resources``) of the *device* resources: each unit of such a
    #: resource on a node is one physical device (a GPU), which a task takes a fraction of
    #: (demand < 1: several tasks share one device) or whole (demand k >= 1: k devices with
    #: nothing else on them). Node capacities of a device resource are whole numbers.
    devices: tuple[int, ...] = ()

    @property
    def m(self) -> int:
        return len(self.capacity)
