"""The kueue config importer on Kueue's own published examples (tests/data/peers/kueue/,
Apache-2.0, each file's header names its source): import, load, allocate, and the
numbers the examples state. Units: cpu in cores, memory in GiB (``importers.quantities``)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from import_helpers import peer_file, round_trip, unsupported_paths

from fairshare.importers import KINDS, ClusterSize, ImportError_
from fairshare.importers import kueue
from fairshare.importers.quantities import parse_quantity, scenario_resource

CPU30 = ClusterSize({"cpu": 30, "memory": 64})


def read(*names: str, cluster: ClusterSize = CPU30):
    return kueue.read([peer_file("kueue", n) for n in names], cluster)


def test_registered_with_its_baseline():
    assert KINDS["kueue"] is kueue
    assert kueue.POLICY == "kueue"


@pytest.mark.parametrize(("raw", "expected"), [
    (9, Fraction(9)),
    ("500m", Fraction(1, 2)),                 # milli
    ("36Gi", Fraction(36 * 2 ** 30)),         # binary: 36 * 1024^3 bytes
    ("1G", Fraction(10 ** 9)),                # decimal SI
    ("0.75", Fraction(3, 4)),                 # a fair-sharing weight as Kueue's docs write it
    (0.75, Fraction(3, 4)),                   # the same, as a YAML float
    ("2e3", Fraction(2000)),                  # decimal exponent
])
def test_quantities_are_parsed_exactly(raw, expected):
    assert parse_quantity(raw, "f: x") == expected


@pytest.mark.parametrize("raw", ["9 cores", "-1", "1Gb", True, None, ""])
def test_bad_quantities_name_the_field(raw):
    with pytest.raises(ImportError_, match=r"^f: x: must be"):
        parse_quantity(raw, "f: x")


def test_resource_names():
    assert [scenario_resource(r) for r in ("cpu", "memory", "nvidia.com/gpu", "vcore", "example.com/fpga.x")] == \
        ["cpu", "memory", "gpu", "cpu", "fpga_x"]


def test_single_clusterqueue_setup():
    imported = read("single-clusterqueue-setup.yaml")
    # nominalQuota cpu 9 -> 9 cores; memory 36Gi -> 36 GiB. No cohort: it cannot borrow,
    # so the limit is the nominal quota too.
    assert imported.queues == [{"name": "cluster-queue", "order": "fifo",
                                "guarantee": {"cpu": 9.0, "memory": 36.0}, "limit": {"cpu": 9.0, "memory": 36.0}}]
    assert imported.queue_paths["default/user-queue"] == "cluster-queue"
    assert imported.peers == {"kueue": {"cluster_queues": ["cluster-queue"]}}
    assert imported.unsupported == []  # namespaceSelector {} is "match all": nothing lost
    # one job of (1 cpu, 2 GiB) tasks on a 30-cpu cluster: 9 tasks (cpu limit) -> 9 cpu, 18 GiB
    alloc = round_trip(imported, CPU30, {"cluster-queue": {"cpu": 1, "memory": 2}})
    assert alloc["cluster-queue"] == pytest.approx({"cpu": 9.0, "memory": 18.0})


def test_borrowing_limit_example():
    imported = read("borrowing-limit.yaml")
    a, b = "team-ab.team-a-cq", "team-ab.team-b-cq"
    assert imported.peers["kueue"]["borrowing_limit"] == {a: {"cpu": 1.0}}
    # the doc: team-a-cq with team-b-cq idle "can admit ... 9+1=10 CPUs"
    assert round_trip(imported, CPU30, {a: {"cpu": 1}})[a]["cpu"] == pytest.approx(10)
    # team-b-cq (no borrowingLimit) "can borrow 12+9" = 21 CPUs, though the cluster has 30:
    # the cohort's quota (9 + 12) bounds it
    assert round_trip(imported, CPU30, {b: {"cpu": 1}})[b]["cpu"] == pytest.approx(21)
    # both busy: each holds its nominal quota, 9 and 12 (the cohort's 21 all used)
    both = round_trip(imported, CPU30, {a: {"cpu": 1}, b: {"cpu": 1}})
    assert (both[a]["cpu"], both[b]["cpu"]) == pytest.approx((9, 12))
    # the example's flavor is not defined in it: said, with the place that names it
    assert "ClusterQueue/team-a-cq.spec.resourceGroups[0].flavors[0]" in unsupported_paths(imported)


def test_cohort_quota_example():
    imported = read("cohort-quota.yaml")
    # the cohort's own 12 cpu + the ClusterQueue's 0: the doc's "may access the 12 shared CPUs"
    assert imported.queues[0]["guarantee"] == {"cpu": 12.0}
    path = "hello-cohort.my-cluster-queue"
    assert round_trip(imported, CPU30, {path: {"cpu": 1}})[path]["cpu"] == pytest.approx(12)


def test_hierarchical_cohorts_share_by_weight(tmp_path):
    # Kueue's example has the three cohorts only; our ClusterQueues (written here, not
    # Kueue's) put one queue in each org, with no quota of their own, and a pool of 20 cpu
    # owned by a ClusterQueue directly in root-cohort
    ours = tmp_path / "queues.yaml"
    ours.write_text("\n---\n".join(
        f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {{name: {name}}}\n"
        f"spec:\n  cohort: {cohort}\n  resourceGroups:\n  - coveredResources: [cpu]\n"
        f"    flavors: [{{name: default-flavor, resources: [{{name: cpu, nominalQuota: {quota}}}]}}]\n"
        for name, cohort, quota in (("a", "important-org", 0), ("b", "regular-org", 0),
                                    ("pool", "root-cohort", 20))))
    imported = kueue.read([peer_file("kueue", "hierarchical-cohorts.yaml"), str(ours)], CPU30)
    [root] = imported.queues
    weights = {c["name"]: c.get("weight", 1.0) for c in root["children"]}
    assert weights == {"important-org": 0.75, "regular-org": 0.25, "pool": 1.0}
    # the doc: the important org "will trend towards using 75% of common resources, the
    # regular org towards 25%": of the pool's 20 cpu, 20 * 0.75 = 15 and 20 * 0.25 = 5
    alloc = round_trip(imported, CPU30, {"root-cohort.important-org.a": {"cpu": 1},
                                         "root-cohort.regular-org.b": {"cpu": 1}})
    assert alloc["root-cohort.important-org"]["cpu"] == pytest.approx(15)
    assert alloc["root-cohort.regular-org"]["cpu"] == pytest.approx(5)


def test_flavors_are_pooled_and_said():
    nodes = [{"name": "od", "count": 2, "capacity": {"cpu": 8, "memory": 32}, "attributes": {"node-type": "on-demand"}},
             {"name": "sp", "count": 1, "capacity": {"cpu": 8, "memory": 32}, "attributes": {"node-type": "spot"}}]
    cluster = ClusterSize({"cpu": 24, "memory": 96}, nodes)
    imported = read("shared-quota-setup.yaml", cluster=cluster)
    # on-demand 9 + spot 9 = 18 cpu, no cohort: guarantee = limit = 18; memory uncovered: 0
    assert imported.queues[0]["guarantee"] == {"cpu": 18.0}
    assert imported.queues[0]["limit"] == {"cpu": 18.0, "memory": 0.0}
    by_path = {u.path: u.message for u in imported.unsupported}
    assert "ClusterQueue/team-cluster-queue.spec.resourceGroups (cpu)" in by_path        # two flavors pooled
    assert "od" in by_path["ResourceFlavor/on-demand.spec.nodeLabels"]                  # the matching nodes
    assert "sp" in by_path["ResourceFlavor/spot.spec.nodeLabels"]
    assert "ClusterQueue/team-cluster-queue.spec.resourceGroups.cpu_credits" in by_path  # no such resource
    alloc = round_trip(imported, cluster, {"team-cluster-queue": {"cpu": 1}})
    assert alloc["team-cluster-queue"]["cpu"] == pytest.approx(18)


SETTINGS = """
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing: {enable: true}
---
apiVersion: batch/v1
kind: Job
metadata: {name: sample}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: all
  fairSharing: {weight: 2}
  queueingStrategy: StrictFIFO
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 8, lendingLimit: 4}
      - {name: nvidia.com/gpu, nominalQuota: 2}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec: {cohort: all, resourceGroups: [{coveredResources: [cpu],
       flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: 8}]}]}]}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: ns, name: lost}
spec: {clusterQueue: nowhere}
"""


def test_settings_go_to_peers_and_preemption(tmp_path):
    f = tmp_path / "settings.yaml"
    f.write_text(SETTINGS)
    imported = kueue.read([str(f)], ClusterSize({"cpu": 16, "memory": 64, "gpu": 2}))
    peer = imported.peers["kueue"]
    assert peer["cluster_queues"] == ["all.team-a", "all.team-b"]
    assert peer["lending_limit"] == {"all.team-a": {"cpu": 4.0}}
    assert peer["queueing_strategy"] == {"all.team-a": "StrictFIFO"}
    assert peer["fair_sharing"] is True
    assert peer["preemption"] == {"all.team-a": {
        "within_cluster_queue": "LowerPriority", "reclaim_within_cohort": "Any",
        "borrow_within_cohort": {"policy": "LowerPriority", "max_priority_threshold": 100}}}
    team_a = imported.queues[0]["children"][0]
    assert team_a["weight"] == 2.0 and team_a["guarantee"] == {"cpu": 8.0, "gpu": 2.0}
    # team-b covers no GPU: Kueue cannot admit a GPU workload there
    assert imported.queues[0]["children"][1]["limit"] == {"gpu": 0.0, "memory": 0.0}
    assert imported.preemption == {"after": 0, "within_queue": True}
    paths = unsupported_paths(imported)
    for expected in ("ClusterQueue/team-a.spec.flavorFungibility", "LocalQueue/ns/lost.spec.clusterQueue",
                     "ClusterQueue/team-b.spec.preemption"):  # (team-b does not preempt in Kueue)
        assert expected in paths
    assert any(p.endswith("(Job/sample)") for p in paths)


@pytest.mark.parametrize(("text", "where"), [
    ("kind: ClusterQueue\napiVersion: kueue.x-k8s.io/v1beta1\nmetadata: {name: q}\nspec:\n  resourceGroups:\n"
     "  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 9 cores}]}]\n",
     "ClusterQueue/q.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: must be a quantity"),
    ("kind: ClusterQueue\napiVersion: kueue.x-k8s.io/v1beta1\nmetadata: {name: q}\nspec:\n  resourceGroups:\n"
     "  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: memory, nominalQuota: 1}]}]\n",
     "ClusterQueue/q.spec.resourceGroups[0].flavors[0].resources[0].name: must be one of the group's"),
    ("kind: ClusterQueue\napiVersion: kueue.x-k8s.io/v1beta1\nmetadata: {name: q}\n"
     "spec: {preemption: {reclaimWithinCohort: Sometimes}}\n",
     "ClusterQueue/q.spec.preemption.reclaimWithinCohort: must be one of Never, LowerPriority, Any"),
    ("kind: Cohort\napiVersion: kueue.x-k8s.io/v1alpha1\nmetadata: {name: x}\nspec: {parent: y}\n---\n"
     "kind: Cohort\napiVersion: kueue.x-k8s.io/v1alpha1\nmetadata: {name: y}\nspec: {parent: x}\n---\n"
     "kind: ClusterQueue\napiVersion: kueue.x-k8s.io/v1beta1\nmetadata: {name: q}\nspec: {cohort: x}\n",
     "Cohort/x.spec.parent: cohorts form a cycle: x -> y -> x"),
    ("kind: Cohort\napiVersion: kueue.x-k8s.io/v1alpha1\nmetadata: {name: x}\n",
     "no ClusterQueue"),
    ("kind: ClusterQueue\napiVersion: kueue.x-k8s.io/v1beta1\nmetadata: {name: q}\nspec: [\n",
     "line 5: not valid YAML"),  # (the unclosed [ meets the end of the file)
])
def test_bad_input_names_file_field_and_reason(tmp_path, text, where):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ImportError_) as err:
        kueue.read([str(f)], CPU30)
    assert str(err.value).startswith(str(f)) and where in str(err.value)


def test_quotas_larger_than_the_cluster_are_refused():
    with pytest.raises(ImportError_, match=r"single-clusterqueue-setup.yaml: the top-level nominal quotas add up to "
                                           r"9 cpu, more than the cluster's 4"):
        read("single-clusterqueue-setup.yaml", cluster=ClusterSize({"cpu": 4, "memory": 64}))


def test_kubectl_list_reads_like_the_documents(tmp_path):
    import yaml

    docs = [d for d in yaml.safe_load_all(open(peer_file("kueue", "borrowing-limit.yaml"))) if d]
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    assert kueue.read([str(listed)], CPU30).queues == read("borrowing-limit.yaml").queues


def test_an_object_in_two_files_is_refused():
    twice = peer_file("kueue", "single-clusterqueue-setup.yaml")
    with pytest.raises(ImportError_, match=r"ResourceFlavor/default-flavor: defined twice \(also in .*single-clusterqueue-setup.yaml"):
        kueue.read([twice, twice], CPU30)
