"""The /metrics page: decision histogram arithmetic, thread safety, the exposition format
(parsed back with prometheus_client's own parser) and label escaping."""

from __future__ import annotations

import math
import threading

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from fairshare.live import metrics as metrics_module
from fairshare.live.api import create_app
from fairshare.live.metrics import (
    CONTENT_TYPE,
    DEFAULT_DECISION_LATENCY_BUCKETS_S,
    Metrics,
    escape_label_value,
    format_value,
    render,
)
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from live_helpers import ADMIN, ALICE, BOB, ManualExecutor, job, make_config


def samples(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a page, via Prometheus' parser."""
    out = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def families(page: str) -> dict[str, str]:
    return {family.name: family.type for family in text_string_to_metric_families(page)}


def status(**overrides):
    base = {
        "time": 12.5,
        "policy": "hdrf",
        "resources": ["cpu", "memory"],
        "capacity": {"cpu": 8, "memory": 32},
        "utilization": {"cpu": 0.75, "memory": 0.5},
        "queues": {
            "ads": {"weight": 3, "current_dominant_share": 0.5, "fair_dominant_share": 0.75,
                    "running_tasks": 4, "pending_tasks": 2},
            "ads.prod": {"weight": 1, "current_dominant_share": 0.5, "fair_dominant_share": 0.75,
                         "running_tasks": 4, "pending_tasks": 2},
            "dev": {"weight": 1, "current_dominant_share": 0.25, "fair_dominant_share": 0.25,
                    "running_tasks": 2, "pending_tasks": 0},
        },
        "pending_tasks": 2,
        "running_tasks": 6,
        "decisions_total": 6,
        "nodes": [{"name": "n1", "alive": True, "capacity": {"cpu": 8, "memory": 32},
                   "used": {"cpu": 6, "memory": 16}},
                  {"name": "n0", "alive": False, "capacity": {}, "used": {}}],
    }
    base.update(overrides)
    return base


# ------------------------------------------------------------------ the histogram

# Buckets 1 ms, 10 ms, 100 ms. A latency equal to a bound counts in that bound's bucket
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
    metrics = Metrics(latency_buckets_s=(0.001, 0.01, 0.1))
    for latency in observations:
        metrics.observe_decision(latency)
    snap = metrics.snapshot()
    assert snap.cumulative_counts + (snap.decisions_total,) == expected
    assert snap.latency_sum_s == pytest.approx(sum(observations))

    page = render(snap, status())
    parsed = samples(page)
    for bound, count in zip(("0.001", "0.01", "0.1", "+Inf"), expected):
        assert parsed[("fairshare_decision_latency_seconds_bucket", (("le", bound),))] == count
    assert parsed[("fairshare_decision_latency_seconds_count", ())] == len(observations)
    assert parsed[("fairshare_decision_latency_seconds_sum", ())] == pytest.approx(sum(observations))
    assert parsed[("fairshare_decisions_total", ())] == len(observations)


def test_default_buckets_span_microseconds_to_a_second():
    bounds = Metrics().upper_bounds_s
    assert bounds == DEFAULT_DECISION_LATENCY_BUCKETS_S
    assert bounds[0] == 1e-5 and bounds[-1] == 1.0
    assert all(a < b for a, b in zip(bounds, bounds[1:]))


@pytest.mark.parametrize("buckets, index", [
    ((0.1, 0.1), 1),            # not strictly increasing
    ((0.5, 0.1), 1),
    ((0.0, 1.0), 0),            # not positive
    ((0.1, math.inf), 1),       # +Inf is implicit, not a bound
    ((math.nan,), 0),
])
def test_bad_buckets_name_the_index(buckets, index):
    with pytest.raises(ValueError, match=rf"latency_buckets_s\[{index}\]"):
        Metrics(latency_buckets_s=buckets)


@pytest.mark.parametrize("latency", [-0.001, math.nan, math.inf])
def test_bad_latency_is_refused_and_not_recorded(latency):
    metrics = Metrics()
    with pytest.raises(ValueError, match="latency_seconds"):
        metrics.observe_decision(latency)
    assert metrics.snapshot().decisions_total == 0


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
    snap = metrics.snapshot()
    assert snap.decisions_total == threads * per_thread == 40_000
    assert snap.latency_sum_s == 10_000.0
    assert snap.cumulative_counts == (0, 40_000)  # 0.25 > 0.1, <= 1.0


# ------------------------------------------------------------------ the gauges


def test_gauges_come_from_the_status():
    page = render(Metrics().snapshot(), status())
    parsed = samples(page)
    expected = {
        ("fairshare_queue_dominant_share", (("kind", "current"), ("queue", "ads"))): 0.5,
        ("fairshare_queue_dominant_share", (("kind", "fair"), ("queue", "ads"))): 0.75,
        ("fairshare_queue_dominant_share", (("kind", "current"), ("queue", "dev"))): 0.25,
        ("fairshare_queue_dominant_share", (("kind", "fair"), ("queue", "ads.prod"))): 0.75,
        ("fairshare_queue_weight", (("queue", "ads"),)): 3,
        ("fairshare_pending_tasks", (("queue", "ads.prod"),)): 2,
        ("fairshare_pending_tasks", (("queue", "dev"),)): 0,
        ("fairshare_queue_running_tasks", (("queue", "dev"),)): 2,
        ("fairshare_running_tasks", ()): 6,
        ("fairshare_utilization", (("resource", "cpu"),)): 0.75,
        ("fairshare_utilization", (("resource", "memory"),)): 0.5,
        ("fairshare_capacity", (("resource", "memory"),)): 32,
        ("fairshare_node_up", (("node", "n0"),)): 0,
        ("fairshare_node_up", (("node", "n1"),)): 1,
    }
    for key, value in expected.items():
        assert parsed[key] == value, key
    kinds = families(page)
    # prometheus_client names a counter family without its _total suffix.
    assert kinds["fairshare_decisions"] == "counter"
    assert kinds["fairshare_decision_latency_seconds"] == "histogram"
    assert kinds["fairshare_queue_dominant_share"] == "gauge"


def test_page_is_deterministic_and_sorted():
    first = render(Metrics().snapshot(), status())
    # Same state with the queues and nodes given in another order: same bytes.
    shuffled = status(queues=dict(reversed(list(status()["queues"].items()))),
                      nodes=list(reversed(status()["nodes"])))
    assert render(Metrics().snapshot(), shuffled) == first
    lines = [line for line in first.splitlines() if line.startswith("fairshare_pending_tasks{")]
    assert lines == ['fairshare_pending_tasks{queue="ads"} 2',
                     'fairshare_pending_tasks{queue="ads.prod"} 2',
                     'fairshare_pending_tasks{queue="dev"} 0']


def test_missing_status_fields_become_nan_not_an_error():
    page = render(Metrics().snapshot(), {"queues": {"q": {}}, "resources": ["cpu"]})
    parsed = samples(page)
    assert math.isnan(parsed[("fairshare_queue_dominant_share", (("kind", "current"), ("queue", "q")))])
    assert math.isnan(parsed[("fairshare_utilization", (("resource", "cpu"),))])
    assert math.isnan(parsed[("fairshare_running_tasks", ())])


@pytest.mark.parametrize("raw, escaped", [
    ("plain", "plain"),
    ('say "hi"', 'say \\"hi\\"'),
    ("back\\slash", "back\\\\slash"),
    ("two\nlines", "two\\nlines"),
    ('\\"', '\\\\\\"'),  # backslash first, then the quote: \" -> \\\"
])
def test_label_values_are_escaped_and_parse_back(raw, escaped):
    assert escape_label_value(raw) == escaped
    queue = {"weight": 1, "current_dominant_share": 0.125, "fair_dominant_share": 0.25,
             "running_tasks": 1, "pending_tasks": 3}
    parsed = samples(render(Metrics().snapshot(), status(queues={raw: queue})))
    assert parsed[("fairshare_pending_tasks", (("queue", raw),))] == 3


@pytest.mark.parametrize("value, text", [
    (3, "3"), (0.5, "0.5"), (1e-05, "1e-05"), (True, "1"), (math.inf, "+Inf"),
    (-math.inf, "-Inf"), (math.nan, "NaN"),
])
def test_value_format(value, text):
    assert format_value(value) == text


def test_content_type_is_the_text_format():
    assert CONTENT_TYPE.startswith("text/plain; version=0.0.4")


# ------------------------------------------------------------------ the route, on the real app
# The real FastAPI app around a real LiveService; ManualExecutor (live_helpers) stands in
# for Ray, so the decisions are the service's own and nothing runs.


@pytest.fixture
def live(tmp_path):
    config = make_config()
    service = LiveService(config, Store(tmp_path / "fs.db"), ManualExecutor(config.nodes), policy="hdrf")
    service.recover()
    with TestClient(create_app(service)) as client:
        yield service, client


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


def test_route_reports_the_services_decisions(live):
    service, client = live
    alice, bob = service.auth.authenticate(ALICE), service.auth.authenticate(BOB)
    service.submit(alice, {"jobs": [job("a", "ads.prod", 10, {"cpu": 1})]})
    service.submit(bob, {"jobs": [job("b", "dev", 10, {"cpu": 1})]})
    service.step()
    parsed = samples(client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text)
    # 8 CPUs (4 + 2 + 2), queues ads and dev 1:1: 4 tasks each start, 8 decisions, 6 + 6 wait
    assert parsed[("fairshare_decisions_total", ())] == 8
    assert parsed[("fairshare_decision_latency_seconds_count", ())] == 8
    assert parsed[("fairshare_running_tasks", ())] == 8
    assert parsed[("fairshare_pending_tasks", (("queue", "ads"),))] == 10 - 4
    assert parsed[("fairshare_pending_tasks", (("queue", "dev"),))] == 10 - 4
    assert parsed[("fairshare_queue_dominant_share", (("kind", "current"), ("queue", "ads")))] == pytest.approx(4 / 8)
    assert parsed[("fairshare_utilization", (("resource", "cpu"),))] == pytest.approx(8 / 8)
    assert parsed[("fairshare_utilization", (("resource", "gpu"),))] == 0


def test_install_without_an_authorizer_checks_the_services_tokens(live):
    service, _ = live
    app = FastAPI()
    metrics_module.install(app, service)  # no authorize: falls back to service.auth
    client = TestClient(app)
    refused = client.get("/metrics", headers={"Authorization": "Bearer nobody-has-this"})
    assert refused.status_code == 401
    assert "unknown token" in refused.json()["detail"]
    assert client.get("/metrics", headers={"Authorization": f"Bearer {BOB}"}).status_code == 200
