"""The /metrics page, parsed as Prometheus parses it (``prometheus_client``'s own parser,
what ``promtool check metrics`` reads): the histograms' arithmetic, thread safety, and,
against a service that scheduled, ran, failed and cancelled jobs, every family's type and
labels and every value checked against what the API answers (``GET /v1/status``,
``/v1/queues``, ``/v1/jobs``), not against numbers written here."""

from __future__ import annotations

import math
import threading

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import fairshare
from fairshare.live import metrics as metrics_module
from fairshare.live.api import create_app
from fairshare.live.config import parse_config
from fairshare.live.metrics import CONTENT_TYPE, DEFAULT_DECISION_LATENCY_BUCKETS_S, Metrics, render
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from live_helpers import ADMIN, ALICE, BOB, ManualExecutor, config_doc, job, make_config


def samples(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a page, via Prometheus' parser."""
    out = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def page_of(metrics: Metrics) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    return render(registry)


# ------------------------------------------------------------------ the histograms

# Buckets 1 ms, 10 ms, 100 ms. A value equal to a bound counts in that bound's bucket
# (Prometheus' le = "less than or equal"); buckets are cumulative.
BUCKET_CASES = [
    # (observations, expected cumulative counts for le=0.001, 0.01, 0.1, then +Inf)
    ([], (0, 0, 0, 0)),
    ([0.0], (1, 1, 1, 1)),
    ([0.001], (1, 1, 1, 1)),                      # on the bound: in it
    ([0.0010001], (0, 1, 1, 1)),                  # just above: the next one
    ([0.0005, 0.001, 0.002, 0.01, 0.5], (2, 4, 4, 5)),  # 2 <= 1 ms; +2 <= 10 ms; 0.5 s only in +Inf
    ([5.0, 7.0], (0, 0, 0, 2)),
]


@pytest.mark.parametrize("observations, expected", BUCKET_CASES)
def test_histogram_buckets_are_cumulative_with_le(observations, expected):
    metrics = Metrics(latency_buckets_s=(0.001, 0.01, 0.1), wait_buckets_s=(0.001, 0.01, 0.1))
    for value in observations:
        metrics.observe_decision(value)
        metrics.observe_admission_wait(value)
    parsed = samples(page_of(metrics))
    for name in ("fairshare_decision_latency_seconds", "fairshare_admission_wait_seconds"):
        for bound, count in zip(("0.001", "0.01", "0.1", "+Inf"), expected):
            assert parsed[(f"{name}_bucket", (("le", bound),))] == count, (name, bound)
        assert parsed[(f"{name}_count", ())] == len(observations)
        assert parsed[(f"{name}_sum", ())] == pytest.approx(sum(observations))
    assert parsed[("fairshare_decisions_total", ())] == len(observations)


def test_default_decision_buckets_span_microseconds_to_a_second():
    parsed = samples(page_of(Metrics()))
    bounds = sorted(float(dict(labels)["le"]) for name, labels in parsed
                    if name == "fairshare_decision_latency_seconds_bucket")
    assert bounds == [*DEFAULT_DECISION_LATENCY_BUCKETS_S, math.inf]
    assert bounds[0] == 1e-5 and bounds[-2] == 1.0


@pytest.mark.parametrize("field", ["latency_buckets_s", "wait_buckets_s"])
@pytest.mark.parametrize("buckets, index", [
    ((0.1, 0.1), 1),            # not strictly increasing
    ((0.5, 0.1), 1),
    ((0.0, 1.0), 0),            # not positive
    ((0.1, math.inf), 1),       # +Inf is implicit, not a bound
    ((math.nan,), 0),
])
def test_bad_buckets_name_the_field_and_index(field, buckets, index):
    with pytest.raises(ValueError, match=rf"{field}\[{index}\]"):
        Metrics(**{field: buckets})


@pytest.mark.parametrize("value", [-0.001, math.nan, math.inf])
def test_bad_durations_are_refused_and_not_recorded(value):
    metrics = Metrics()
    with pytest.raises(ValueError, match="latency_seconds"):
        metrics.observe_decision(value)
    with pytest.raises(ValueError, match="wait_seconds"):
        metrics.observe_admission_wait(value)
    parsed = samples(page_of(metrics))
    assert parsed[("fairshare_decisions_total", ())] == 0
    assert parsed[("fairshare_decision_latency_seconds_count", ())] == 0
    assert parsed[("fairshare_admission_wait_seconds_count", ())] == 0


def test_a_job_state_that_is_not_final_is_refused():
    with pytest.raises(ValueError, match="state: must be one of succeeded, failed, cancelled, got 'running'"):
        Metrics().job_finished("running")


def test_observations_from_many_threads_are_all_counted():
    metrics = Metrics(latency_buckets_s=(0.1, 1.0))
    threads, per_thread = 8, 5_000
    # 0.25 s is exact in binary, so the sum is exact in any order: 8 * 5000 * 0.25 = 10000.
    workers = [threading.Thread(target=lambda: [metrics.observe_decision(0.25) for _ in range(per_thread)])
               for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    parsed = samples(page_of(metrics))
    assert parsed[("fairshare_decisions_total", ())] == threads * per_thread == 40_000
    assert parsed[("fairshare_decision_latency_seconds_sum", ())] == 10_000.0
    assert parsed[("fairshare_decision_latency_seconds_bucket", (("le", "0.1"),))] == 0  # 0.25 > 0.1
    assert parsed[("fairshare_decision_latency_seconds_bucket", (("le", "1.0"),))] == 40_000


def test_no_created_series():
    # the library's ``_created`` timestamps would be a gauge family of their own per counter
    page = page_of(Metrics())
    assert "_created" not in page


# ------------------------------------------------------------------ the route, on the real app
# The real FastAPI app around a real LiveService; ManualExecutor (live_helpers) stands in
# for Ray, so the decisions are the service's own and the test ends tasks by hand.

#: dev has a guarantee and a limit (the other queues none)
DEV_BOUNDS = {"guarantee": {"cpu": 2}, "limit": {"cpu": 6, "gpu": 1}}


@pytest.fixture
def live(tmp_path):
    doc = config_doc()
    doc["queues"][1].update(DEV_BOUNDS)
    config = parse_config(doc, "test-config")
    # max_attempts=1: a failed task is final, so its job fails
    service = LiveService(config, Store(tmp_path / "fs.db"), ManualExecutor(config.nodes), policy="hdrf",
                          max_attempts=1)
    service.recover()
    with TestClient(create_app(service)) as client:
        yield service, client


def admin_get(client, path: str):
    response = client.get(path, headers={"Authorization": f"Bearer {ADMIN}"})
    assert response.status_code == 200, response.text
    return response


def test_route_needs_a_known_token(live):
    _, client = live
    for headers in ({}, {"Authorization": "Bearer nobody-has-this"}, {"Authorization": f"Basic {ALICE}"}):
        response = client.get("/metrics", headers=headers)
        assert response.status_code == 401, headers
        assert response.json()["error"]["field"] == "Authorization"
    for token in (ADMIN, ALICE, BOB):  # the admin's or any tenant's
        response = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200
        assert response.headers["content-type"] == CONTENT_TYPE


def run_a_workload(service) -> None:
    """Jobs that end in every final state, one still running with tasks pending: "done"
    succeeds, "fails" fails (max_attempts 1), "dropped" is cancelled, "big" and "steady"
    go on."""
    alice, bob = service.auth.authenticate(ALICE), service.auth.authenticate(BOB)
    executor = service.executor
    (done,) = service.submit(alice, {"jobs": [job("done", "ads.prod", 2, {"cpu": 1, "memory": 1})]})
    service.submit(alice, {"jobs": [job("big", "ads.test", 10, {"cpu": 1})]})
    (fails,) = service.submit(bob, {"jobs": [job("fails", "dev", 1, {"cpu": 1, "memory": 2})]})
    (dropped,) = service.submit(bob, {"jobs": [job("dropped", "dev", 6, {"cpu": 1})]})
    service.submit(bob, {"jobs": [job("steady", "dev", 2, {"cpu": 1, "memory": 2})]})
    service.step()
    service.cancel(bob, dropped)
    for _ in range(4):  # the ends of "done" and "fails" as their tasks start
        for task_id, launch in list(executor.running.items()):
            if launch.job in (str(done), str(fails)):
                executor.finish(task_id, ok=launch.job == str(done))
        service.step()
    jobs = {j["name"]: j["state"] for j in service.list_jobs(None)}
    assert jobs == {"done": "succeeded", "big": "running", "fails": "failed", "dropped": "cancelled",
                    "steady": "running"}


#: every family: (type as the parser names it, label names of its samples besides le)
FAMILIES = {
    "fairshare_build_info": ("gauge", {"version", "policy"}),
    "fairshare_decisions": ("counter", set()),
    "fairshare_decision_latency_seconds": ("histogram", set()),
    "fairshare_admission_wait_seconds": ("histogram", set()),
    "fairshare_jobs_finished": ("counter", {"state"}),
    "fairshare_preemptions": ("counter", set()),
    "fairshare_queue_dominant_share_ratio": ("gauge", {"queue", "kind"}),
    "fairshare_queue_weight": ("gauge", {"queue"}),
    "fairshare_queue_pending_tasks": ("gauge", {"queue"}),
    "fairshare_queue_running_tasks": ("gauge", {"queue"}),
    "fairshare_queue_allocated": ("gauge", {"queue", "resource"}),
    "fairshare_queue_fair_share": ("gauge", {"queue", "resource"}),
    "fairshare_queue_guarantee": ("gauge", {"queue", "resource"}),
    "fairshare_queue_limit": ("gauge", {"queue", "resource"}),
    "fairshare_pending_tasks": ("gauge", set()),
    "fairshare_running_tasks": ("gauge", set()),
    "fairshare_utilization_ratio": ("gauge", {"resource"}),
    "fairshare_capacity": ("gauge", {"resource"}),
    "fairshare_node_up": ("gauge", {"node"}),
    "fairshare_task_attempts": ("counter", set()),
    "fairshare_tasks_requeued": ("counter", {"reason"}),
    "fairshare_service_starts": ("counter", set()),
    "fairshare_pending_jobs": ("gauge", {"reason"}),
}


def test_families_have_their_types_and_labels(live):
    service, client = live
    run_a_workload(service)
    families = list(text_string_to_metric_families(admin_get(client, "/metrics").text))
    assert [f.name for f in families] == list(FAMILIES)  # (ManualExecutor: no Ray families)
    for family in families:
        kind, labels = FAMILIES[family.name]
        assert family.type == kind, family.name
        assert family.samples, family.name
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == labels, (family.name, sample)


def test_values_agree_with_the_api(live):
    service, client = live
    run_a_workload(service)
    page = admin_get(client, "/metrics").text
    parsed = samples(page)
    status = admin_get(client, "/v1/status").json()
    queues = admin_get(client, "/v1/queues").json()
    jobs = admin_get(client, "/v1/jobs").json()

    assert parsed[("fairshare_build_info", (("policy", status["policy"]), ("version", fairshare.__version__)))] == 1
    assert parsed[("fairshare_decisions_total", ())] == status["decisions_total"] > 0
    assert parsed[("fairshare_decision_latency_seconds_count", ())] == status["decisions_total"]
    assert parsed[("fairshare_preemptions_total", ())] == 0  # (preemption is off: null in the status)
    assert parsed[("fairshare_running_tasks", ())] == status["running_tasks"] > 0
    assert parsed[("fairshare_pending_tasks", ())] == status["pending_tasks"] > 0
    for resource in status["resources"]:
        assert parsed[("fairshare_utilization_ratio", (("resource", resource),))] == \
            pytest.approx(status["utilization"][resource])
        assert parsed[("fairshare_capacity", (("resource", resource),))] == status["capacity"][resource]
    for node in status["nodes"]:
        assert parsed[("fairshare_node_up", (("node", node["name"]),))] == int(node["alive"])

    assert queues == status["queues"]
    for path, queue in queues.items():
        q = (("queue", path),)
        assert parsed[("fairshare_queue_weight", q)] == queue["weight"]
        assert parsed[("fairshare_queue_pending_tasks", q)] == queue["pending_tasks"]
        assert parsed[("fairshare_queue_running_tasks", q)] == queue["running_tasks"]
        for kind in ("current", "fair"):
            assert parsed[("fairshare_queue_dominant_share_ratio", (("kind", kind), ("queue", path)))] == \
                pytest.approx(queue[f"{kind}_dominant_share"])
        for key in ("allocated", "fair_share", "guarantee", "limit"):
            shown = {dict(labels)["resource"]: value for (name, labels), value in parsed.items()
                     if name == f"fairshare_queue_{key}" and dict(labels)["queue"] == path}
            assert shown == pytest.approx(queue[key]), (path, key)
    # what the running tasks hold, per queue: their demands, from the jobs' own answers
    assert queues["dev"]["guarantee"] == DEV_BOUNDS["guarantee"] and queues["ads"]["guarantee"] == {}
    for path in ("ads", "dev"):
        running = sum(j["tasks_running"] for j in jobs if j["queue"].startswith(path))  # (1 cpu each)
        assert parsed[("fairshare_queue_allocated", (("queue", path), ("resource", "cpu")))] == running > 0

    # jobs finished, by the state the API gives them
    for state in ("succeeded", "failed", "cancelled"):
        assert parsed[("fairshare_jobs_finished_total", (("state", state),))] == \
            sum(j["state"] == state for j in jobs) == 1

    # the admission waits: one per task started, its start minus its job's submission
    waits = []
    for j in jobs:
        for task in admin_get(client, f"/v1/jobs/{j['id']}").json()["tasks"]:
            if task["started_at"] is not None:
                assert task["attempts"] == 1  # (no re-run: started_at is the first start)
                waits.append(task["started_at"] - j["submitted_at"])
    assert parsed[("fairshare_admission_wait_seconds_count", ())] == len(waits) == \
        parsed[("fairshare_task_attempts_total", ())]
    assert parsed[("fairshare_admission_wait_seconds_sum", ())] == pytest.approx(sum(waits))
    for (name, labels), value in parsed.items():
        if name == "fairshare_admission_wait_seconds_bucket":
            bound = float(dict(labels)["le"])
            assert value == sum(w <= bound for w in waits), bound


def test_two_scrapes_of_one_state_are_identical_and_the_global_registry_stays_empty(live):
    service, client = live
    run_a_workload(service)
    assert admin_get(client, "/metrics").text == admin_get(client, "/metrics").text
    # a second app on the same service: a registry of its own, the same page
    with TestClient(create_app(service)) as other:
        assert admin_get(other, "/metrics").text == admin_get(client, "/metrics").text
    assert not [name for name in REGISTRY._names_to_collectors if name.startswith("fairshare_")]


def test_jobs_ended_at_a_restart_are_counted(tmp_path):
    config = make_config()
    store = Store(tmp_path / "fs.db")
    first = LiveService(config, store, ManualExecutor(config.nodes), policy="hdrf")
    first.recover()
    bob = first.auth.authenticate(BOB)
    (job_id,) = first.submit(bob, {"jobs": [job("b", "dev", 2, {"cpu": 1})]})
    first.store.cancel_job(job_id, 0.0)  # cancelled, then the service stopped before its pass
    again = LiveService(config, store, ManualExecutor(config.nodes), policy="hdrf")
    again.recover()  # ends the cancelled job
    page = samples(render(metrics_module.registry_for(again)))
    assert again.list_jobs(None)[0]["state"] == "cancelled"
    assert page[("fairshare_jobs_finished_total", (("state", "cancelled"),))] == 1
    assert page[("fairshare_jobs_finished_total", (("state", "failed"),))] == 0


def test_install_without_an_authorizer_checks_the_services_tokens(live):
    service, _ = live
    app = FastAPI()
    metrics_module.install(app, service)  # no authorize: falls back to service.auth
    client = TestClient(app)
    refused = client.get("/metrics", headers={"Authorization": "Bearer nobody-has-this"})
    assert refused.status_code == 401
    assert "unknown token" in refused.json()["detail"]
    assert client.get("/metrics", headers={"Authorization": f"Bearer {BOB}"}).status_code == 200
