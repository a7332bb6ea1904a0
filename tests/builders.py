"""Builders for test scenarios: keep each test to "build, allocate, compare".

``scenario(capacity, jobs, queues)`` takes jobs as ``(name, queue, demand)`` or
``(name, queue, demand, options)`` tuples and queues as nested ``q(name, weight, ...)``.
"""

from __future__ import annotations

from fairshare.model import parse_scenario


def q(name: str, weight: float = 1, *children: dict, order: str | None = None) -> dict:
    d: dict = {"name": name, "weight": weight}
    if children:
        d["children"] = list(children)
    if order:
        d["order"] = order
    return d


def job(name: str, demand: dict, queue: str | None = None, *, weight: float = 1, count: int | None = None,
        classes: list[dict] | None = None, submit: float = 0) -> dict:
    d: dict = {"name": name, "weight": weight, "submit": submit}
    if queue:
        d["queue"] = queue
    if classes is not None:
        d["tasks"] = classes
    else:
        task: dict = {"demand": demand}
        if count is not None:
            task["count"] = count
        d["tasks"] = [task]
    return d


def scenario(capacity: dict | None = None, jobs: list[dict] = (), queues: list[dict] | None = None,
             nodes: list[dict] | None = None):
    data: dict = {"cluster": {"capacity": capacity} if nodes is None else {"nodes": nodes}, "jobs": list(jobs)}
    if queues:
        data["queues"] = queues
    return parse_scenario(data, "<test>")
