"""Hypothesis strategies: random clusters, queue hierarchies and jobs (valid scenarios)."""

from __future__ import annotations

from hypothesis import strategies as st

from fairshare.model import parse_scenario

RESOURCE_NAMES = ("cpu", "mem", "gpu", "disk")


@st.composite
def scenarios(draw, *, max_jobs: int = 6, max_depth: int = 3, hierarchical: bool = True,
              nodes: bool = False, counts: bool = False, gangs: bool = False):
    """``gangs``: some jobs are gangs (``gang: true``, a count that fits the cluster's
    total capacity, as the loader requires)."""
    m = draw(st.integers(2, 4))
    res = RESOURCE_NAMES[:m]
    capacity = {r: draw(st.integers(4, 40)) for r in res}
    queues: list[dict] = []
    paths: list[str] = [""]

    def grow(parent_list: list[dict], prefix: str, depth: int) -> None:
        for k in range(draw(st.integers(1, 3))):
            name = f"q{depth}{k}"
            node: dict = {"name": name, "weight": draw(st.sampled_from([1, 1, 2, 3]))}
            path = f"{prefix}.{name}" if prefix else name
            paths.append(path)
            parent_list.append(node)
            if depth < max_depth and draw(st.booleans()):
                node["children"] = []
                grow(node["children"], path, depth + 1)

    if hierarchical:
        grow(queues, "", 1)
    jobs = []
    for i in range(draw(st.integers(1, max_jobs))):
        demand = {r: draw(st.sampled_from([0, 0, 1, 2, 3])) for r in res}
        if not any(demand.values()):
            demand[draw(st.sampled_from(res))] = 1
        task: dict = {"demand": demand}
        if counts:
            task["count"] = draw(st.integers(0, 8))
        jobs.append({"name": f"j{i}", "queue": draw(st.sampled_from(paths)) if hierarchical else "",
                     "weight": draw(st.sampled_from([1, 1, 2])), "tasks": [task]})
        if gangs and draw(st.booleans()):
            jobs[-1]["gang"] = True
            task["count"] = draw(st.integers(1, 8))
    if nodes:
        k = draw(st.integers(1, 4))
        # every node can hold the largest task, so no demand is unreachable
        biggest = {r: max(j["tasks"][0]["demand"][r] for j in jobs) for r in res}
        per_node = {r: max(biggest[r], capacity[r] // k) for r in res}
        cluster = {"nodes": [{"name": "n", "count": k, "capacity": per_node}]}
    else:
        cluster = {"capacity": capacity}
    total = capacity if not nodes else {r: per_node[r] * k for r in res}
    for entry in jobs:
        if entry.get("gang"):  # every task of a gang must fit the empty cluster at once
            task = entry["tasks"][0]
            task["count"] = min([task["count"]] + [total[r] // d for r, d in task["demand"].items() if d > 0])
    data = {"resources": list(res), "cluster": cluster, "jobs": jobs}
    if queues:
        data["queues"] = queues
    return parse_scenario(data, "<hypothesis>")
