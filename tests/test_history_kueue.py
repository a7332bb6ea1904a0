"""Kueue Workload histories (traces/kueue_workloads.py) on Kueue's documented Workloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_helpers import bytes_before_first

from fairshare.traces import convert
from fairshare.traces.common import BadData
from fairshare.traces.history import quantity
from fairshare.traces.kueue_workloads import Options, iter_items, pod_demand

WORKLOADS = Path(__file__).parent / "data" / "peers" / "kueue" / "workloads_troubleshooting.json"


def test_the_documented_workloads():
    result = convert("kueue-workloads", [WORKLOADS])
    (job,) = result.scenario["jobs"]
    assert job["name"] == "my-namespace-job-my-job-19797"
    assert job["queue"] == "cluster-queue"  # status.admission.clusterQueue
    # created 20:49:07 (time 0); Admitted 20:49:17, Finished 20:49:47: 30 s per pod
    assert job["submit"] == 0
    # sample-job.yaml: 3 pods of cpu 1, memory 200Mi = 200/1024 GiB = 0.1953125; together the
    # admission's resourceUsage, cpu "3" and memory 600Mi
    assert job["tasks"] == [{"demand": {"cpu": 1, "memory": 0.1953125}, "count": 3, "duration": 30}]
    # the pending (QuotaReserved False) and the preempted (Admitted False) Workloads never
    # ran: their 3 + 3 pods are counted, not converted
    assert result.stats["tasks never started (skipped)"] == 6
    assert result.bad.total == 0
    # the derived cluster holds the 3 pods at once: 3 nodes of one pod's size
    assert result.scenario["cluster"]["nodes"] == [{"name": "node", "count": 3,
                                                    "capacity": {"cpu": 1, "memory": 0.1953125}}]


def test_local_queues_and_a_queue_map(tmp_path):
    local = convert("kueue-workloads", [WORKLOADS], options=Options(queue="localqueue"))
    assert local.scenario["jobs"][0]["queue"] == "my-namespace.user-queue"  # namespace/localqueue, dotted
    queue_map = tmp_path / "map.yaml"
    queue_map.write_text("my-namespace/user-queue: team-a.research\n")
    mapped = convert("kueue-workloads", [WORKLOADS], options=Options(queue="localqueue", queue_map=str(queue_map)))
    assert mapped.scenario["jobs"][0]["queue"] == "team-a.research"
    assert mapped.scenario["queues"] == [{"name": "team-a", "children": [{"name": "research"}]}]


def workload(name: str, created: str, admitted: str | None, finished: str | None, cpu: str = "500m",
             gpus: int = 0) -> dict:
    requests = {"cpu": cpu, "memory": "1Gi"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    conditions = [{"type": t, "status": "True", "lastTransitionTime": at}
                  for t, at in (("Admitted", admitted), ("Finished", finished)) if at]
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": requests}}]}}}]},
            "status": {"admission": {"clusterQueue": "cq"}, "conditions": conditions}}


def test_running_workloads_are_censored_and_bad_items_counted_with_their_line(tmp_path):
    items = [workload("a", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:11:00Z", gpus=1),
             workload("b", "2026-01-01T00:02:00Z", "2026-01-01T00:05:00Z", None),
             workload("c", "2026-01-01T00:03:00Z", "2026-01-01T00:04:00Z", "2026-01-01T00:06:00Z", cpu="lots")]
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4)
    path = tmp_path / "w.json"
    path.write_text(text)
    result = convert("kueue-workloads", [path])
    jobs = {j["name"]: j for j in result.scenario["jobs"]}
    # a: 500m cpu, 1Gi, 1 GPU per pod; 00:01 -> 00:11 = 600 s
    assert jobs["ns-a"]["tasks"] == [{"demand": {"cpu": 0.5, "memory": 1, "gpu": 1}, "count": 2, "duration": 600}]
    # b: admitted 00:05 and not finished: censored at the history's last time, 00:11: 360 s
    assert jobs["ns-b"]["submit"] == 120 and jobs["ns-b"]["tasks"][0]["duration"] == 360
    assert result.stats["runs censored at the history's end"] == 2  # its two pods
    # c: cpu "lots" does not parse; reported at the line of the item's opening "{"
    assert result.bad.counts == {"unparsable field": 1}
    item_lines = [k + 1 for k, line in enumerate(text.splitlines()) if line == "        {"]
    line_of_c = item_lines[2]
    assert result.bad.examples["unparsable field"][0].startswith(f"{path}:{line_of_c}:")
    assert "spec.podSets[0]" in result.bad.examples["unparsable field"][0]


def test_items_are_cut_out_one_at_a_time(tmp_path, monkeypatch):
    """Streaming: the first Workload comes out after a block of the List, not all of it."""
    path = tmp_path / "big.json"
    one = workload("w", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z")
    with open(path, "w") as out:
        out.write('{"apiVersion": "v1", "kind": "List", "items": [\n')
        out.write(",\n".join(json.dumps(one, indent=4) for _ in range(15_000)))
        out.write('\n], "metadata": {"resourceVersion": ""}}\n')
    taken = bytes_before_first(monkeypatch, path, lambda: iter_items(path, BadData()))
    assert path.stat().st_size > 10 * 2**20
    assert 0 < taken <= 2 * 2**20


def test_one_item_per_line_and_a_plain_array(tmp_path):
    one = workload("w", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z")
    lines = tmp_path / "lines.json"
    lines.write_text("\n".join(json.dumps(one | {"metadata": one["metadata"] | {"name": f"w{k}"}})
                               for k in range(3)) + "\n")
    array = tmp_path / "array.json"
    array.write_text(json.dumps([one, one]))
    assert [o["metadata"]["name"] for _l, o in iter_items(lines, BadData())] == ["w0", "w1", "w2"]
    assert len(list(iter_items(array, BadData()))) == 2


def test_a_truncated_list_keeps_what_was_read(tmp_path):
    one = workload("w", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z")
    text = json.dumps({"kind": "List", "items": [one, one]}, indent=2)
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) - 200])
    bad = BadData()
    assert len(list(iter_items(path, bad))) == 1
    assert bad.counts == {"truncated or corrupt file": 1}


def test_quantities_and_pod_demand():
    assert quantity("500m") == 0.5
    assert quantity("600Mi") == 600 * 2**20
    assert quantity("1G") == 1e9
    assert quantity("2") == 2
    with pytest.raises(ValueError):
        quantity("-1")
    template = {"spec": {"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}},
        {"name": "b", "resources": {"limits": {"cpu": "2", "amd.com/gpu": "1"}}}]}}
    # b has limits only: Kubernetes makes them its requests
    assert pod_demand(template) == {"cpu": 3, "memory": 0.5, "gpu": 1}
