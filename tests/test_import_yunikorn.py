"""The yunikorn config importer on YuniKorn's own published examples
(tests/data/peers/yunikorn/, Apache-2.0, each file's header names its source): import,
load, allocate, and the numbers the examples state. Units: vcore -> cpu in cores, memory
bytes -> GiB (1G = 10**9 bytes = 10**9 / 2**30 GiB)."""

from __future__ import annotations

import pytest
from import_helpers import peer_file, round_trip, unsupported_paths

from fairshare.importers import KINDS, ClusterSize, ImportError_
from fairshare.importers import yunikorn

GIB = 2 ** 30


def read(name: str, cluster: ClusterSize):
    return yunikorn.read([peer_file("yunikorn", name)], cluster)


def test_registered_with_a_baseline_that_exists():
    from fairshare.policies import REGISTRY

    assert KINDS["yunikorn"] is yunikorn
    assert yunikorn.POLICY in REGISTRY


def test_queue_config_example():
    cluster = ClusterSize({"cpu": 200, "memory": 20})
    imported = read("queue-config-namespaces.yaml", cluster)
    [namespaces] = imported.queues
    [level1] = namespaces["children"]
    # guaranteed {memory: 1G, vcore: 10}, max {memory: 10G, vcore: 100}
    assert namespaces["guarantee"] == pytest.approx({"memory": 1e9 / GIB, "cpu": 10})
    assert namespaces["limit"] == pytest.approx({"memory": 10e9 / GIB, "cpu": 100})
    # guaranteed {memory: 500M, vcore: 5}, max {memory: 5G, vcore: 50}; a leaf sorts fifo by default
    assert level1["guarantee"] == pytest.approx({"memory": 500e6 / GIB, "cpu": 5})
    assert level1["limit"] == pytest.approx({"memory": 5e9 / GIB, "cpu": 50})
    assert level1["order"] == "fifo"
    assert imported.queue_paths == {"root.namespaces": "namespaces", "root.namespaces.level1": "namespaces.level1"}
    assert unsupported_paths(imported) == ["root.namespaces.maxapplications", "root.namespaces.level1.maxapplications"]
    assert imported.preemption == {"after": 30.0}  # on by default, preemption.delay's default 30s
    # a cpu-only job in level1 stops at its max: 50 of the 200 cores
    assert round_trip(imported, cluster, {"namespaces.level1": {"cpu": 1}})["namespaces.level1"]["cpu"] == \
        pytest.approx(50)
    # (1 cpu, 0.5 GiB) tasks stop at the memory max: 5e9 B / 2^30 / 0.5 GiB = 9.3132 tasks
    alloc = round_trip(imported, cluster, {"namespaces.level1": {"cpu": 1, "memory": 0.5}})
    assert alloc["namespaces.level1"]["cpu"] == pytest.approx(5e9 / GIB / 0.5)


def test_core_example_and_what_it_cannot_say():
    # yunikorn-core's config/queues.yaml, read as YuniKorn >= 1.0 reads it: vcore 50000 is
    # 50000 cores (the file predates 1.0, when it meant millicores), memory 500000 bytes
    cluster = ClusterSize({"cpu": 120000, "memory": 1})
    imported = read("core-queues.yaml", cluster)
    assert [q["name"] for q in imported.queues] == ["advertisement", "search", "sandbox"]
    assert imported.queues[0]["guarantee"] == pytest.approx({"memory": 500000 / GIB, "cpu": 50000})
    assert imported.queues[0]["limit"] == pytest.approx({"memory": 800000 / GIB, "cpu": 80000})
    assert unsupported_paths(imported) == [
        "partitions[1] (gpu)", "partitions[0].nodesortpolicy", "partitions[0].placementrules",
        "partitions[0].limits", "root.sandbox.submitacl", "root.sandbox.parent"]
    # cpu-only jobs in advertisement and search on 120000 cores: guarantees first (50000,
    # 40000), then equal dominant shares: search catches up to 50000 (10000 more), both
    # grow to 60000 (20000 more), search reaches its max 60000 and the cluster is full:
    # 60000 + 60000 = 120000
    alloc = round_trip(imported, cluster, {"advertisement": {"cpu": 1}, "search": {"cpu": 1}})
    assert (alloc["advertisement"]["cpu"], alloc["search"]["cpu"]) == pytest.approx((60000, 60000))


def test_configmap_with_only_root():
    cluster = ClusterSize({"cpu": 8, "memory": 32})
    imported = read("k8shim-configmap.yaml", cluster)
    assert imported.queues == [] and imported.preemption is None
    assert unsupported_paths(imported) == ["partitions[0].placementrules", "root.submitacl", "partitions[0].queues"]
    assert round_trip(imported, cluster, {}) == {}  # a valid scenario: jobs under the root


OURS = """
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: a
            properties: {application.sort.policy: fair, preemption.delay: 1m30s, priority.offset: "5"}
            resources: {guaranteed: {vcore: 1500m, nvidia.com/gpu: 1}}
          - name: b
"""


def test_properties_units_and_delays(tmp_path):
    f = tmp_path / "queues.yaml"
    f.write_text(OURS)
    imported = yunikorn.read([str(f)], ClusterSize({"cpu": 8, "memory": 32, "gpu": 2}))
    a, b = imported.queues
    assert a == {"name": "a", "guarantee": {"cpu": 1.5, "gpu": 1.0}, "order": "fair"}  # 1500m = 1.5 cores
    assert b == {"name": "b", "order": "fifo"}
    # a's delay 1m30s = 90 s, b's default 30 s: one delay for all, the smallest, said
    assert imported.preemption == {"after": 30.0}
    assert set(unsupported_paths(imported)) == {"root.a.properties.priority.offset", "partitions[0] (preemption.delay)"}


@pytest.mark.parametrize(("text", "where"), [
    ("partitions: [{name: default, queues: [{name: a, resources: {guaranteed: {vcore: ten}}}]}]",
     "root.a.resources.guaranteed.vcore: must be a quantity"),
    ("partitions: [{name: default, queues: [{name: a, properties: {application.sort.policy: random}}]}]",
     "root.a.properties.application.sort.policy: must be one of fifo, fair, stateaware"),
    ("partitions: [{name: default, queues: [{name: root, resources: {max: {vcore: 1}}}]}]",
     "root.resources: the root queue cannot set resources"),
    ("partitions: [{name: default, queues: [{name: a, properties: {preemption.delay: soon}}]}]",
     "root.a.properties.preemption.delay: must be a duration"),
    ("partitions: []", "partitions: must list at least one partition"),
    ("queues: [{name: a}]", "partitions: is required"),
    ("partitions: {name: default}", "partitions: must be a list"),
])
def test_bad_input_names_file_field_and_reason(tmp_path, text, where):
    f = tmp_path / "queues.yaml"
    f.write_text(text)
    with pytest.raises(ImportError_) as err:
        yunikorn.read([str(f)], ClusterSize({"cpu": 8}))
    assert str(err.value).startswith(str(f)) and where in str(err.value)


def test_one_file_only():
    with pytest.raises(ImportError_, match="yunikorn reads one queues.yaml, got 2 files"):
        yunikorn.read(["a.yaml", "b.yaml"], ClusterSize({"cpu": 8}))


def test_guarantees_larger_than_the_cluster_are_refused():
    # advertisement 50000 + search 40000 + sandbox 10000 = 100000 cores guaranteed
    with pytest.raises(ImportError_, match="guaranteed resources add up to 100000 cpu, more than the cluster's 64"):
        read("core-queues.yaml", ClusterSize({"cpu": 64, "memory": 1}))
