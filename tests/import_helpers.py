"""Round trips for the config importers' tests: import, build the scenario, load it, allocate."""

from __future__ import annotations

from pathlib import Path

from builders import job

from fairshare.api import allocate
from fairshare.importers import ImportedConfig, build_scenario
from fairshare.importers.base import ClusterSize
from fairshare.model import parse_scenario

PEERS = Path(__file__).parent / "data" / "peers"


def peer_file(peer: str, name: str) -> str:
    return str(PEERS / peer / name)


def round_trip(imported: ImportedConfig, cluster: ClusterSize, demands: dict[str, dict[str, float]],
               policy: str = "hdrf") -> dict[str, dict[str, float]]:
    """Each queue's static allocation (resource -> amount) when the queue named in
    ``demands`` has one job of unbounded tasks of that demand, through the scenario loader
    exactly as ``fairshare allocate`` reads an imported file."""
    jobs = [job(f"j-{path.replace('.', '_')}", demand, path) for path, demand in demands.items()]
    scenario = parse_scenario(build_scenario(imported, cluster, jobs), "<imported>")
    result = allocate(scenario, policy)
    return {path: dict(zip(result.resources, q.allocation)) for path, q in result.queues.items()}


def unsupported_paths(imported: ImportedConfig) -> list[str]:
    return [u.path for u in imported.unsupported]
