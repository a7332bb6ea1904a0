"""serve's local Ray cluster (``live.ray_local``) found again through its state file:
re-attached when its head lives and the config is the same (a worker node that died
meanwhile is started again), replaced when the config changed, and stopped with every
process of its nodes. No serve and no Ray driver here: only the ``ray start`` processes
and the state file."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("ray", reason="the live extra (ray) is not installed")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

from fairshare.live.ray_local import alive, load, start_or_attach  # noqa: E402
from fairshare.model.cluster import Node  # noqa: E402

RESOURCES = ("cpu",)


def nodes(cpus: float = 2.0) -> tuple[Node, ...]:
    return (Node("head", (cpus,), "head", ()), Node("worker", (cpus,), "worker", ()))


def test_reattach_restart_a_dead_worker_replace_on_a_new_config_and_stop(tmp_path):
    state = tmp_path / "fs.db.ray.json"
    first = start_or_attach(RESOURCES, nodes(), state_file=state)
    try:
        assert not first.attached and set(first.nodes) == {"head", "worker"}
        assert json.loads(state.read_text())["nodes"] == first.nodes
        # a later serve (another process: only the file) finds the same cluster
        again = start_or_attach(RESOURCES, nodes(), state_file=state)
        assert again.attached and (again.address, again.nodes) == (first.address, first.nodes)

        # the worker node dies while no serve is up: re-attaching starts it again
        old_worker = first.nodes["worker"]
        load(state).kill_node("worker")
        assert not alive(old_worker)
        third = start_or_attach(RESOURCES, nodes(), state_file=state)
        assert third.attached and third.address == first.address
        assert third.nodes["head"] == first.nodes["head"] and third.nodes["worker"] != old_worker
        assert alive(third.nodes["worker"])

        # another configuration (the nodes' capacities changed): a new cluster
        replaced = start_or_attach(RESOURCES, nodes(cpus=3.0), state_file=state)
        assert not replaced.attached and replaced.address != first.address
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in third.nodes.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(pid) for pid in third.nodes.values())  # the old one was stopped
    finally:
        if state.exists():
            last = load(state)
            pids = list(last.nodes.values())
            last.stop()
            assert not any(alive(pid) for pid in pids)
    assert not state.exists()  # a stop forgets the cluster
