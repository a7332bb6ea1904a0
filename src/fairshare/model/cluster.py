"""The cluster: one pooled capacity (the papers' divisible setting) or discrete nodes."""

from __future__ import annotations

from dataclasses import dataclass, field

from fairshare.model.resources import Vector


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

    @property
    def m(self) -> int:
        return len(self.capacity)
