"""Seeded generator of large scenarios for the benchmarks (not part of the package API)."""

from __future__ import annotations

import random

from fairshare.model import parse_scenario

RESOURCES = ("cpu", "memory", "gpu", "disk")


def hierarchy_scenario(jobs: int = 1000, levels: int = 4, fanout: int = 4, resources: int = 4,
                       nodes: int = 100, seed: int = 0, counts: bool = False, shapes: int | None = None):
    """``levels`` levels of queues (fan-out ``fanout``), jobs spread over the leaf queues,
    random weights and demands, ``nodes`` equal nodes. With ``shapes``, every job's task
    is one of that many demand vectors (a catalogue of task sizes, as clusters with a few
    instance types have); without, each job draws its own (up to 625 distinct shapes)."""
    rng = random.Random(seed)
    res = RESOURCES[:resources]
    leaf_paths: list[str] = []

    def grow(prefix: str, depth: int) -> list[dict]:
        out = []
        for k in range(fanout):
            path = f"{prefix}.q{k}" if prefix else f"q{k}"
            node = {"name": f"q{k}", "weight": rng.choice([1, 1, 2, 3])}
            if depth < levels:
                node["children"] = grow(path, depth + 1)
            else:
                leaf_paths.append(path)
            out.append(node)
        return out

    queues = grow("", 1)
    def draw_demand() -> dict:
        # each resource unused with probability 0.3 (at least one used), so jobs block at
        # different saturations and dominant resources differ across the tree
        demand = {r: (0 if rng.random() < 0.3 else rng.choice([0.5, 1, 2, 4])) for r in res}
        if not any(demand.values()):
            demand[rng.choice(res)] = 1
        return demand

    catalogue = [draw_demand() for _ in range(shapes)] if shapes else None
    job_list = []
    for i in range(jobs):
        demand = dict(rng.choice(catalogue)) if catalogue else draw_demand()
        task = {"demand": demand}
        if counts:
            task["count"] = rng.randint(1, 200)
        job_list.append({"name": f"job{i}", "queue": rng.choice(leaf_paths), "weight": rng.choice([1, 1, 2]),
                         "tasks": [task]})
    node_cap = {r: 64 for r in res}
    data = {"resources": list(res), "cluster": {"nodes": [{"name": "n", "count": nodes, "capacity": node_cap}]},
            "queues": queues, "jobs": job_list}
    return parse_scenario(data, f"<generated jobs={jobs} levels={levels}>")
