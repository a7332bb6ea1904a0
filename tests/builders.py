"""Builders for test scenarios: keep each test to "build, allocate, compare".

``scenario(capacity, jobs, queues, nodes)`` takes jobs built by ``job(name, demand,
queue, ...)`` and queues as nested ``q(name, weight, ...)``. They are the conformance
checks' builders (``fairshare.conformance.workloads``), so the package's checks and the
tests build their scenarios one way.
"""

from __future__ import annotations

import copy
from typing import Any

from fairshare.conformance.workloads import job, q, scenario

__all__ = ["DELETE", "changed", "job", "q", "scenario"]

#: ``changed``'s value that removes the field
DELETE = object()


def changed(doc: Any, path: tuple | list, value: Any) -> Any:
    """A copy of a parsed document with the field at ``path`` (keys and list indices) set
    to ``value``, or removed (``DELETE``): one bad field at a time."""
    out = copy.deepcopy(doc)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out
