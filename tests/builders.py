"""Builders for test scenarios: keep each test to "build, allocate, compare".

``scenario(capacity, jobs, queues, nodes)`` takes jobs built by ``job(name, demand,
queue, ...)`` and queues as nested ``q(name, weight, ...)``. They are the conformance
checks' builders (``fairshare.conformance.workloads``), so the package's checks and the
tests build their scenarios one way.
"""

from __future__ import annotations

from fairshare.conformance.workloads import job, q, scenario

__all__ = ["job", "q", "scenario"]
