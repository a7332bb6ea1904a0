"""The YARN config importers on Hadoop's own example files (tests/data/peers/hadoop/, each
with its source and licence in a header comment): a round trip (import, load, allocate)
gives the guarantees, limits and weights the examples state; every setting fairshare
cannot express is reported by its path; a bad file is refused naming file, path, reason.

Units are the scenario's, as every importer and trace converter writes them: vcores are
``cpu`` in cores, YARN's memory-mb is ``memory`` in GiB (YARN's MB are mebibytes: MB / 1024,
as traces/sls.py converts a container). Expected numbers show their arithmetic.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import job

from fairshare.api import allocate
from fairshare.importers import KINDS, ClusterSize, ImportError_, build_scenario
from fairshare.model import parse_scenario
from fairshare.traces import convert as convert_trace

HADOOP = Path(__file__).parent / "data" / "peers" / "hadoop"
DOCS_EXAMPLE = HADOOP / "fair-scheduler-docs-example.xml"  # FairScheduler.md's example allocation file
PERCENTAGE = HADOOP / "fair-scheduler-max-resources-percentage.xml"  # Hadoop's fs2cs test input
CS_CONF = HADOOP / "capacity-scheduler-conf.xml"  # Hadoop's shipped conf/capacity-scheduler.xml
CS_WEBSERVICES = HADOOP / "capacity-scheduler-webservices-test.xml"  # TestRMWebServicesCapacitySched's queues
TRACES_SAMPLE = Path(__file__).parent / "data" / "sls_sample.json"  # YARN SLS's job format (test_traces.py)


#: YARN's memory-mb is in mebibytes: 1 GiB = 1024 MB
MB_PER_GIB = 1024


def imported(kind: str, path: Path, **total: float):
    return KINDS[kind].read([str(path)], ClusterSize(total=dict(total)))


def queue(result, path: str) -> dict:
    """The imported queue entry at a dotted path."""
    entries = result.queues
    entry: dict = {}
    for name in path.split("."):
        entry = next(q for q in entries if q["name"] == name)
        entries = entry.get("children") or []
    return entry


def round_trip(result, cluster: dict, jobs: list[dict], policy: str) -> dict[str, dict[str, float]]:
    """Import -> scenario document -> the loader -> allocate: each queue's allocation."""
    scenario = parse_scenario(build_scenario(result, ClusterSize(total=cluster), jobs), "<imported>")
    alloc = allocate(scenario, policy)
    return {path: dict(zip(alloc.resources, qa.allocation)) for path, qa in alloc.queues.items()}


def near(got: dict[str, float], expected: dict[str, float]) -> bool:
    return all(got.get(r, 0.0) == pytest.approx(a, rel=1e-9, abs=1e-9) for r, a in expected.items())


# --- yarn-fair: FairScheduler.md's example allocation file -----------------------------------------

def test_docs_example_imports_its_queues_weights_guarantees_and_limits():
    result = imported("yarn-fair", DOCS_EXAMPLE, cpu=100, memory=400)
    # <minResources>10000 mb,0vcores</minResources>, <maxResources>90000 mb,0vcores</maxResources>, weight 2.0
    assert queue(result, "sample_queue")["weight"] == 2.0
    assert queue(result, "sample_queue")["guarantee"] == {"memory": 9.765625, "cpu": 0}  # 10000 / 1024 GiB
    assert queue(result, "sample_queue")["limit"] == {"memory": 87.890625, "cpu": 0}  # 90000 / 1024
    # sample_sub_queue: minResources 5000 mb; no maxResources -> queueMaxResourcesDefault 40000 mb,0vcores
    assert queue(result, "sample_queue.sample_sub_queue")["guarantee"] == {"memory": 4.8828125, "cpu": 0}  # 5000 / 1024
    assert queue(result, "sample_queue.sample_sub_queue")["limit"] == {"memory": 39.0625, "cpu": 0}  # 40000 / 1024
    assert queue(result, "sample_queue.sample_reservable_queue")["limit"] == {"memory": 39.0625, "cpu": 0}
    assert queue(result, "secondary_group_queue")["weight"] == 3.0
    assert queue(result, "secondary_group_queue")["limit"] == {"memory": 39.0625, "cpu": 0}
    # schedulingPolicy fair everywhere (sample_queue's own, YARN's default elsewhere)
    assert result.peers == {"yarn-fair": {"default_policy": "fair"}}
    assert result.preemption is None  # no preemption timeout: YARN's Long.MAX_VALUE, never
    assert result.policy == "yarn-fair"
    # the 0vcores limits are imported as written, and said
    assert any(n.startswith("root.sample_queue: its limit on cpu is 0") for n in result.notes)


def test_docs_example_reports_every_setting_it_cannot_express_by_path():
    result = imported("yarn-fair", DOCS_EXAMPLE, cpu=100, memory=400)
    assert [u.path for u in result.unsupported] == [
        "queueMaxAMShareDefault", "user.sample_user", "userMaxAppsDefault", "queuePlacementPolicy",
        "root.sample_queue.maxRunningApps", "root.sample_queue.maxAMShare",
        "root.sample_queue.sample_sub_queue.aclSubmitApps",
        "root.sample_queue.sample_reservable_queue.reservation",
        "root.secondary_group_queue.maxChildResources", "root.secondary_group_queue[type=parent]",
    ]


# Memory-only tasks (the example's limits allow 0 vcores), one job per leaf, hdrf's static
# allocation (guarantees first, then weighted shares, within the limits). The cases count
# in the example's MB; the cluster, the tasks and the expected amounts are those / 1024 GiB.
LEAVES = ("sample_queue.sample_sub_queue", "sample_queue.sample_reservable_queue", "secondary_group_queue")


@pytest.mark.parametrize("memory, expected", [
    # weights: 50000 MB, sample_queue 2 : secondary 3 -> 20000 : 30000 (under every limit and
    # above the guarantees); sample_queue's two leaves, weight 1 each: 10000 and 10000
    (50000, {"sample_queue.sample_sub_queue": 10000, "sample_queue.sample_reservable_queue": 10000,
             "secondary_group_queue": 30000}),
    # limits: 100000 MB, weighted 40000 : 60000, but secondary stops at its 40000 limit
    # (queueMaxResourcesDefault) and sample_queue takes the rest, 60000 (< its 90000 limit): 30000 each leaf
    (100000, {"sample_queue.sample_sub_queue": 30000, "sample_queue.sample_reservable_queue": 30000,
              "secondary_group_queue": 40000}),
    # guarantees: 20000 MB, weighted 8000 : 12000, but sample_queue is owed 10000 (and its
    # sub queue 5000 of it): sample 10000 (5000 + 5000), secondary the other 10000
    (20000, {"sample_queue.sample_sub_queue": 5000, "sample_queue.sample_reservable_queue": 5000,
             "secondary_group_queue": 10000}),
])
def test_docs_example_round_trip_allocates_by_its_weights_guarantees_and_limits(memory, expected):
    cluster = {"cpu": 100, "memory": memory / MB_PER_GIB}
    result = imported("yarn-fair", DOCS_EXAMPLE, **cluster)
    jobs = [job(f"j{i}", {"memory": 1000 / MB_PER_GIB}, leaf) for i, leaf in enumerate(LEAVES)]
    got = round_trip(result, cluster, jobs, "hdrf")
    for leaf, mem in expected.items():
        assert near(got[leaf], {"memory": mem / MB_PER_GIB}), (leaf, got[leaf])


# --- yarn-fair: the fs2cs converter's test input (root queue, drf, percentages, defaults) -------------

def test_percentages_are_of_the_cluster_and_the_defaults_go_to_preemption_and_peers():
    result = imported("yarn-fair", PERCENTAGE, cpu=100, memory=400)
    # <maxResources>memory-mb=50.0%, vcores=50.0%</maxResources>: half of 400 GiB and of 100 vcores
    assert queue(result, "users.joe")["limit"] == {"memory": 200, "cpu": 50}
    assert queue(result, "users.joe")["weight"] == 3.0
    assert queue(result, "admins.alice")["limit"] == {"memory": 16, "cpu": 4}  # memory-mb=16384: / 1024 GiB
    assert queue(result, "admins.bob")["limit"] == {"memory": 8, "cpu": 2}  # memory-mb=8192: / 1024
    assert "limit" not in queue(result, "users.john")  # no maxResources, no queueMaxResourcesDefault
    # <queue name="root"> is the root: its children are the top level
    assert [q["name"] for q in result.queues] == ["default", "users", "admins"]
    assert result.preemption == {"after": 23}  # defaultFairSharePreemptionTimeout
    peer = result.peers["yarn-fair"]
    # root's schedulingPolicy drf overrides defaultQueueSchedulingPolicy fair at the root, and
    # every queue sets drf: none differs
    assert peer["default_policy"] == "drf" and "queue_policies" not in peer
    every = ["default", "users", "users.john", "users.joe", "admins", "admins.alice", "admins.bob"]
    assert peer["preemption_threshold"] == {p: 0.12 for p in every}  # defaultFairSharePreemptionThreshold
    assert peer["min_share_preemption_timeout"] == {p: 24 for p in every}  # defaultMinSharePreemptionTimeout


def test_percentage_file_round_trip_gives_its_weights_and_limits():
    cluster = {"cpu": 100, "memory": 400}  # 409600 MB / 1024
    result = imported("yarn-fair", PERCENTAGE, **cluster)
    leaves = ["default", "users.john", "users.joe", "admins.alice", "admins.bob"]
    jobs = [job(f"j{i}", {"cpu": 1, "memory": 4}, leaf) for i, leaf in enumerate(leaves)]
    got = round_trip(result, cluster, jobs, "hdrf")
    # a task is 1% of each resource (1 of 100 vcores, 4 of 400 GiB). admins' leaves stop at
    # their limits: alice 4 vcores (and 16 GiB), bob 2 -> admins 6; default and users split
    # the other 94 equally: 47 each; in users john 1 : joe 3 -> 11.75 and 35.25 (joe's limit is 50)
    for leaf, cpu in {"admins.alice": 4, "admins.bob": 2, "default": 47, "users.john": 11.75,
                      "users.joe": 35.25}.items():
        assert near(got[leaf], {"cpu": cpu, "memory": cpu * 4}), (leaf, got[leaf])


def test_percentage_file_reports_acls_container_caps_and_placement_by_path():
    paths = {u.path for u in imported("yarn-fair", PERCENTAGE, cpu=100, memory=400).unsupported}
    assert {"root.aclSubmitApps", "root.users.john.maxContainerAllocation", "root.users.joe.allowPreemptionFrom",
            "root.admins.maxChildResources", "root.admins.alice.maxRunningApps", "root.admins.alice.reservation",
            "root.admins.bob.maxAMShare", "queueMaxAppsDefault", "queueMaxAMShareDefault",
            "queuePlacementPolicy"} <= paths
    assert not any(p.endswith((".weight", ".schedulingPolicy", ".maxResources")) for p in paths)


# --- yarn-fair: the formats and rules the docs list, on small inputs --------------------------------

def fair_xml(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fair-scheduler.xml"
    path.write_text(f"<?xml version=\"1.0\"?>\n<allocations>\n{body}\n</allocations>\n")
    return path


# on a cluster of 8 vcores, 4 GiB (4096 MB) and 4 GPUs: MB are / 1024 GiB, percentages of the cluster
@pytest.mark.parametrize("text, expected", [
    ("8192 mb, 4 vcores", {"memory": 8, "cpu": 4}),  # 8192 / 1024
    ("50% memory, 25% cpu", {"memory": 2, "cpu": 2}),  # of 4 GiB and 8 vcores
    ("25%", {"memory": 1, "cpu": 2, "gpu": 1}),  # one percentage: of every resource
    ("vcores=3, memory-mb=1000", {"cpu": 3, "memory": 0.9765625}),  # 1000 / 1024
    ("vcores=50%, memory-mb=25%", {"cpu": 4, "memory": 1}),
    ("memory-mb=2048, vcores=2, yarn.io/gpu=1", {"memory": 2, "cpu": 2, "gpu": 1}),  # custom resource, in devices
])
def test_every_resource_format_the_docs_list(tmp_path, text, expected):
    path = fair_xml(tmp_path, f"<queue name=\"a\"><maxResources>{text}</maxResources></queue>")
    result = imported("yarn-fair", path, cpu=8, memory=4, gpu=4)
    assert queue(result, "a")["limit"] == expected


def test_memory_is_counted_as_yarns_own_trace_converter_counts_it(tmp_path):
    # SLS's sample job_1 (tests/data/sls_sample.json) runs a 2048 MB, 2 vcore reduce in
    # root.analytics.daily; a maxResources of the same size is the same amount in the
    # scenario, so a replay of the SLS history under the imported file compares like units
    sls_demand = convert_trace("sls", [TRACES_SAMPLE]).scenario["jobs"][0]["tasks"][1]["demand"]
    path = fair_xml(tmp_path, "<queue name=\"analytics\"><queue name=\"daily\">"
                              "<maxResources>memory-mb=2048, vcores=2</maxResources></queue></queue>")
    limit = queue(imported("yarn-fair", path, cpu=8, memory=4), "analytics.daily")["limit"]
    assert limit == sls_demand == {"cpu": 2, "memory": 2}  # 2048 MB / 1024 GiB, both


def test_policies_preemption_inheritance_and_pools(tmp_path):
    path = fair_xml(tmp_path, """
      <defaultQueueSchedulingPolicy>drf</defaultQueueSchedulingPolicy>
      <pool name="a">
        <fairSharePreemptionTimeout>60</fairSharePreemptionTimeout>
        <fairSharePreemptionThreshold>0.8</fairSharePreemptionThreshold>
        <queue name="x"><schedulingPolicy>fifo</schedulingPolicy></queue>
        <queue name="y"><minSharePreemptionTimeout>5</minSharePreemptionTimeout></queue>
      </pool>
      <queue name="b"><weight>0</weight><fairSharePreemptionTimeout>30</fairSharePreemptionTimeout>
        <schedulingPolicy>fair</schedulingPolicy></queue>""")
    result = imported("yarn-fair", path, cpu=8, memory=4)
    peer = result.peers["yarn-fair"]
    assert peer["default_policy"] == "drf"  # the root's: defaultQueueSchedulingPolicy
    assert peer["queue_policies"] == {"a.x": "fifo", "b": "fair"}  # a and a.y take the default, drf
    assert queue(result, "a.x")["order"] == "fifo" and "order" not in queue(result, "a.y")
    # a's threshold 0.8 is inherited by x and y; y's own min-share timeout
    assert peer["preemption_threshold"] == {"a": 0.8, "a.x": 0.8, "a.y": 0.8}
    assert peer["min_share_preemption_timeout"] == {"a.y": 5}
    # no root timeout: the smallest a queue sets, 30; a's 60 is reported
    assert result.preemption == {"after": 30}
    assert [u.path for u in result.unsupported] == ["root.b.weight", "root.a.fairSharePreemptionTimeout"]
    assert queue(result, "b")["weight"] > 0


@pytest.mark.parametrize("body, where", [
    ("<queue name=\"a\"><schedulingPolicy>lottery</schedulingPolicy></queue>", "root.a.schedulingPolicy"),
    ("<queue name=\"a.b\"/>", "root.a.b"),
    ("<queue><weight>1</weight></queue>", "root.<queue>"),
    ("<queue name=\"a\"/><queue name=\"a\"/>", "root.a"),
    ("<queue name=\"a\"><weight>heavy</weight></queue>", "root.a.weight"),
    ("<queue name=\"a\"><minResources>4096 mb</minResources></queue>", "root.a.minResources"),
    ("<queue name=\"a\"><maxResources>vcores=2, gpu=10%</maxResources></queue>", "root.a.maxResources.gpu"),
    ("<queue name=\"a\"><maxResources>vcores 2</maxResources></queue>", "root.a.maxResources"),
    # FairScheduler's own refusals: fifo on a parent, drf under a fair parent
    ("<queue name=\"a\"><schedulingPolicy>fifo</schedulingPolicy><queue name=\"b\"/></queue>",
     "root.a.schedulingPolicy"),
    ("<defaultQueueSchedulingPolicy>fifo</defaultQueueSchedulingPolicy><queue name=\"a\"/>",
     "defaultQueueSchedulingPolicy"),
    ("<queue name=\"a\"><schedulingPolicy>drf</schedulingPolicy></queue>", "root.a.schedulingPolicy"),
])
def test_a_bad_allocation_file_names_the_file_and_the_field(tmp_path, body, where):
    path = fair_xml(tmp_path, body)
    with pytest.raises(ImportError_) as info:
        imported("yarn-fair", path, cpu=8, memory=4)
    assert str(info.value).startswith(f"{path}: {where}")


def test_not_xml_or_not_an_allocation_file_is_refused(tmp_path):
    broken = tmp_path / "broken.xml"
    broken.write_text("<allocations><queue name='a'></allocations>")
    with pytest.raises(ImportError_, match="broken.xml: not well-formed XML"):
        imported("yarn-fair", broken, cpu=1)
    with pytest.raises(ImportError_, match="configuration: the document's root element must be <allocations>"):
        imported("yarn-fair", CS_CONF, cpu=1)
    with pytest.raises(ImportError_, match="reads one file, got 2"):
        KINDS["yarn-fair"].read([str(DOCS_EXAMPLE)] * 2, ClusterSize(total={"cpu": 1}))


# --- yarn-capacity ------------------------------------------------------------------------------

def test_shipped_conf_is_one_queue_with_the_whole_cluster():
    result = imported("yarn-capacity", CS_CONF, cpu=100, memory=400)
    # root.default.capacity 100, maximum-capacity 100: a guarantee of everything, no limit;
    # no ordering-policy: CapacityScheduler's default for a leaf, fifo
    assert result.queues == [{"name": "default", "weight": 100.0, "guarantee": {"cpu": 100, "memory": 400},
                              "order": "fifo"}]
    assert result.policy == "capacity"
    assert [u.path for u in result.unsupported] == [
        "maximum-applications", "maximum-am-resource-percent", "resource-calculator",
        "root.default.user-limit-factor", "root.default.acl_submit_applications",
        "root.default.acl_administer_queue", "root.default.acl_application_max_priority",
        "node-locality-delay", "queue-mappings-override.enable",
        "per-node-heartbeat.maximum-offswitch-assignments"]  # (queue-mappings is empty: no setting)


# TestRMWebServicesCapacitySched's queues on 1000 vcores and 1000 GiB (1024000 MB / 1024; 1 GiB a vcore):
# guarantee = the product of the capacities down the path, limit = the product of the
# maximum-capacities (absent: 100% of the parent's), both times the cluster: the rule that
# test itself asserts (verifySubQueueGeneric: absoluteCapacity = parentAbsCapacity *
# capacity/100, absoluteMaxCapacity = parentAbsMaxCapacity * maxCapacity/100).
CS_EXPECTED = {
    "a": (10.5, 105.0, 500.0),  # 10.5% ; max 50%
    "a.a1": (30, 31.5, 250.0),  # 10.5% x 30% = 3.15% ; 50% x 50% = 25%
    "a.a1.a1a": (65, 20.475, 250.0),  # 3.15% x 65% = 2.0475% ; 25% (inherited)
    "a.a1.a1b": (15, 4.725, 250.0),  # 3.15% x 15%
    "a.a1.a1c": (20, 6.3, 250.0),  # 3.15% x 20%
    "a.a2": (70, 73.5, 500.0),  # 10.5% x 70% = 7.35% ; 50%
    "b": (79.5, 795.0, None),  # 79.5% ; 100%: no limit
    "b.b1": (60, 477.0, None),  # 79.5% x 60%
    "b.b2": (39.5, 314.025, None),  # 79.5% x 39.5%
    "b.b3": (0.5, 3.975, None),  # 79.5% x 0.5%
    "c": (10, 100.0, None),
}
CLUSTER = {"cpu": 1000, "memory": 1000}


@pytest.mark.parametrize("path", list(CS_EXPECTED))
def test_capacities_multiply_down_the_tree(path):
    weight, guaranteed_cpu, limit_cpu = CS_EXPECTED[path]
    entry = queue(imported("yarn-capacity", CS_WEBSERVICES, **CLUSTER), path)
    assert entry["weight"] == weight
    assert near(entry["guarantee"], {"cpu": guaranteed_cpu, "memory": guaranteed_cpu})  # 1 GiB a vcore
    if limit_cpu is None:
        assert "limit" not in entry
    else:
        assert near(entry["limit"], {"cpu": limit_cpu, "memory": limit_cpu})


def test_capacity_round_trip_gives_each_queue_its_capacity_when_all_demand():
    result = imported("yarn-capacity", CS_WEBSERVICES, **CLUSTER)
    leaves = [p for p in CS_EXPECTED if not queue(result, p).get("children")]
    jobs = [job(f"j{i}", {"cpu": 1, "memory": 1}, leaf) for i, leaf in enumerate(leaves)]
    got = round_trip(result, CLUSTER, jobs, result.policy)
    # the weights are the capacities, so with every leaf demanding each queue gets exactly
    # its guarantee (they add up to the cluster: 105 + 795 + 100 = 1000)
    for path, (_w, cpu, _limit) in CS_EXPECTED.items():
        assert near(got[path], {"cpu": cpu, "memory": cpu}), (path, got[path])


def test_capacity_round_trip_stops_a_lone_queue_at_its_maximum_capacity():
    result = imported("yarn-capacity", CS_WEBSERVICES, **CLUSTER)
    got = round_trip(result, CLUSTER, [job("alone", {"cpu": 1, "memory": 1}, "a.a1.a1a")], result.policy)
    # a1a alone may grow past its 2.0475% up to a1's maximum, 50% of a's 50%: 250 vcores (and 250 GiB)
    assert near(got["a.a1.a1a"], {"cpu": 250, "memory": 250})


def test_capacity_reports_user_limits_lifetimes_and_auto_created_queues_by_path():
    paths = [u.path for u in imported("yarn-capacity", CS_WEBSERVICES, **CLUSTER).unsupported]
    assert paths == [
        "root.a.max-parallel-app", "root.a.a1.user-limit-factor", "root.a.a2.maximum-application-lifetime",
        "root.a.a2.default-application-lifetime", "root.a.a2.user-limit-factor", "root.b.b1.user-limit-factor",
        "root.b.b2.user-limit-factor", "root.b.b3.user-limit-factor", "root.a.a1.a1c.auto-create-child-queue.enabled",
        "root.a.a1.a1c.leaf-queue-template.capacity"]


def cs_xml(tmp_path: Path, props: dict[str, str]) -> Path:
    path = tmp_path / "capacity-scheduler.xml"
    body = "".join(f"<property><name>yarn.scheduler.capacity.{k}</name><value>{v}</value></property>\n"
                   for k, v in props.items())
    path.write_text(f"<configuration>\n{body}</configuration>\n")
    return path


def test_weights_and_absolute_modes(tmp_path):
    # weights 3w, 1w: 75% and 25%; under x absolute resources; fair ordering; a stopped queue
    path = cs_xml(tmp_path, {"root.queues": "x, y", "root.x.capacity": "3w", "root.y.capacity": "1w",
                             "root.x.queues": "p, q", "root.x.p.capacity": "[memory=2048,vcores=2]",
                             "root.x.q.capacity": "[memory=1024,vcores=4]",
                             "root.x.q.maximum-capacity": "[memory=4096,vcores=5]",
                             "root.y.ordering-policy": "fair", "root.y.state": "STOPPED"})
    result = imported("yarn-capacity", path, cpu=16, memory=8)  # 8 GiB = 8192 MB
    # 3w of 4w = 75%: 12 vcores, 6 GiB; 1w = 25%: 4 vcores, 2 GiB
    assert queue(result, "x")["weight"] == 3 and queue(result, "x")["guarantee"] == {"cpu": 12, "memory": 6}
    assert queue(result, "y")["guarantee"] == {"cpu": 4, "memory": 2} and queue(result, "y")["order"] == "fair"
    assert queue(result, "x.p")["guarantee"] == {"memory": 2, "cpu": 2}  # memory=2048 MB / 1024
    # weight of an absolute queue: its dominant share of the parent's guarantee, in percent:
    # p max(2/6 GiB, 2/12) = 1/3; q max(1/6 GiB, 4/12) = 1/3
    assert queue(result, "x.p")["weight"] == pytest.approx(100 / 3)
    assert queue(result, "x.q")["weight"] == pytest.approx(100 / 3)
    assert queue(result, "x.q")["limit"] == {"cpu": 5, "memory": 4}  # [memory=4096,vcores=5]: 4096 / 1024 GiB
    assert [u.path for u in result.unsupported] == ["root.y.state"]


def test_capacities_below_100_percent_are_noted(tmp_path):
    path = cs_xml(tmp_path, {"root.queues": "a, b", "root.a.capacity": "30", "root.b.capacity": "20"})
    result = imported("yarn-capacity", path, cpu=10)
    assert result.notes == ["root: its children's capacities add up to 50%, less than 100%"]
    assert queue(result, "a")["guarantee"] == {"cpu": 3} and queue(result, "b")["guarantee"] == {"cpu": 2}


@pytest.mark.parametrize("props, where", [
    ({"root.queues": "a, b", "root.a.capacity": "50", "root.b.capacity": "2w"}, "root.*.capacity"),
    ({"root.queues": "a, b", "root.a.capacity": "60", "root.b.capacity": "50"}, "root.*.capacity"),  # 110%
    ({"root.queues": "a", "root.a.capacity": "lots"}, "root.a.capacity"),
    ({"root.queues": "a", "root.a.capacity": "100", "root.a.maximum-capacity": "150"}, "root.a.maximum-capacity"),
    ({"root.queues": "a, a"}, "root.queues"),
    ({"maximum-applications": "10"}, "root.queues"),  # no queue at all
    ({"root.queues": "a", "root.a.capacity": "100", "root.a.state": "PAUSED"}, "root.a.state"),
    ({"root.queues": "a", "root.a.capacity": "[memory=10,gpu=1]"}, "root.a.capacity.gpu"),
])
def test_a_bad_capacity_file_names_the_file_and_the_property(tmp_path, props, where):
    path = cs_xml(tmp_path, props)
    with pytest.raises(ImportError_) as info:
        imported("yarn-capacity", path, cpu=8, memory=4)
    assert str(info.value).startswith(f"{path}: {where}")
