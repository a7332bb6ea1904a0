"""How fairshare resources map onto Ray's, from ``ray.nodes()`` records (no Ray needed)."""

from __future__ import annotations

from fairshare.live.ray_executor import GIB, discover_nodes, resource_mapping
from fairshare.model.cluster import Node

RES = ("cpu", "memory", "mic", "gpu")


def ray_node(node_id: str, resources: dict, alive: bool = True, address: str = "10.0.0.5") -> dict:
    return {"NodeID": node_id, "Alive": alive, "Resources": resources, "NodeManagerAddress": address}


# a cluster started by fairshare (or with fs_ resources by hand)
FS_NODES = [
    ray_node("b" * 56, {"CPU": 1.0, "fs_cpu": 2.0, "fs_memory": 8.0, "fs_mic": 1.0, "fs_node_mic-node": 1.0,
                        "memory": 1e10}),
    ray_node("a" * 56, {"CPU": 1.0, "fs_cpu": 4.0, "fs_memory": 8.0, "fs_node_cpu-node": 1.0, "memory": 1e10}),
    ray_node("c" * 56, {"CPU": 1.0, "fs_cpu": 2.0, "fs_node_dead": 1.0}, alive=False),
]
# a cluster started without them: Ray's native CPU, GPU, memory (bytes), custom mic
NATIVE_NODES = [
    ray_node("d" * 56, {"CPU": 8.0, "GPU": 2.0, "memory": 16 * GIB, "mic": 3.0}),
]


def test_fs_resources_win_when_present():
    assert resource_mapping(RES, FS_NODES) == {"cpu": ("fs_cpu", 1.0), "memory": ("fs_memory", 1.0),
                                               "mic": ("fs_mic", 1.0), "gpu": ("fs_gpu", 1.0)}


def test_native_names_without_fs_resources():
    assert resource_mapping(RES, NATIVE_NODES) == {"cpu": ("CPU", 1.0), "memory": ("memory", GIB),
                                                   "mic": ("mic", 1.0), "gpu": ("GPU", 1.0)}


def test_discovered_nodes_named_by_their_mark_in_config_order_dead_ones_left_out():
    configured = {"cpu-node": Node("cpu-node", (4.0, 8.0, 0.0, 0.0), "cpu-node", (("zone", "a"),)),
                  "mic-node": Node("mic-node", (2.0, 8.0, 1.0, 0.0), "mic-node")}
    found = discover_nodes(FS_NODES, RES, resource_mapping(RES, FS_NODES), configured)
    assert [(name, node_id[0], node.capacity, node.attributes) for name, node_id, node in found] == [
        ("cpu-node", "a", (4.0, 8.0, 0.0, 0.0), (("zone", "a"),)),  # config order, attributes kept
        ("mic-node", "b", (2.0, 8.0, 1.0, 0.0), ()),
    ]


def test_unmarked_node_named_by_address_and_id_with_native_capacity():
    found = discover_nodes(NATIVE_NODES, RES, resource_mapping(RES, NATIVE_NODES), {})
    # memory 16 GiB in bytes / 2**30 = 16
    assert [(name, node.capacity) for name, _, node in found] == [("10.0.0.5-dddddd", (8.0, 16.0, 3.0, 2.0))]
