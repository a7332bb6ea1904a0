"""The OpenAPI document of ``fairshare serve``: every operation has an operationId and
tags, and lists the refusals its route can answer, each of which a request here provokes
(so the list is neither the same everywhere nor a wish list). Schemathesis
(tests/test_live_schema.py) checks the other way round: no answer outside the list."""

from __future__ import annotations

import re
import warnings

import pytest

from fairshare.live.api import create_app
from fairshare.live.config import MAX_BODY_BYTES, parse_config
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from live_helpers import ADMIN, ALICE, BOB, ManualExecutor, config_doc, job

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

#: (method, path) -> operationId, for every route of this module's tables
OPERATION_IDS = {
    ("post", "/v1/jobs"): "submitJobs",
    ("get", "/v1/jobs"): "listJobs",
    ("get", "/v1/jobs/{job_id}"): "getJob",
    ("post", "/v1/jobs/{job_id}/cancel"): "cancelJob",
    ("get", "/v1/queues"): "getQueues",
    ("put", "/v1/queues"): "updateQueues",
    ("get", "/v1/status"): "getStatus",
    ("get", "/v1/history"): "getHistory",
    ("get", "/healthz"): "getHealth",
    ("get", "/metrics"): "getMetrics",
    ("get", "/v1/jobs/{job_id}/logs"): "listJobLogs",
    ("get", "/v1/jobs/{job_id}/explain"): "explainJob",
    ("get", "/v1/jobs/{job_id}/tasks/{task_id}/logs"): "getTaskLog",
}


def H(token: str | None) -> dict:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


NOT_JSON = b'{"jobs": ['
TOO_LARGE = b" " * (MAX_BODY_BYTES + 1)
A_JOB = {"jobs": [job("j", "ads.prod", 1, {"cpu": 1})]}

#: (operationId, status) -> a request that gets that refusal: (method, path, token, other
#: keyword arguments of the client's request); job 1 is alice's, submitted by the fixture
PROVOKE = {
    ("submitJobs", 400): ("post", "/v1/jobs", ALICE, {"content": NOT_JSON}),
    ("submitJobs", 401): ("post", "/v1/jobs", None, {"json": A_JOB}),
    ("submitJobs", 403): ("post", "/v1/jobs", ALICE, {"json": {"jobs": [job("j", "dev", 1, {"cpu": 1})]}}),
    ("submitJobs", 413): ("post", "/v1/jobs", ALICE, {"content": TOO_LARGE}),
    ("submitJobs", 422): ("post", "/v1/jobs", ALICE, {"json": {"jobs": []}}),
    # bob may send one request (burst 1, then one every 1000 s): the fixture sent it
    ("submitJobs", 429): ("post", "/v1/jobs", BOB, {"json": {"jobs": [job("j", "dev", 1, {"cpu": 1})]}}),
    ("listJobs", 401): ("get", "/v1/jobs", None, {}),
    ("listJobs", 422): ("get", "/v1/jobs?limit=0", ALICE, {}),
    ("getJob", 401): ("get", "/v1/jobs/1", None, {}),
    ("getJob", 404): ("get", "/v1/jobs/1", BOB, {}),  # alice's job: not revealed to bob
    ("getJob", 422): ("get", "/v1/jobs/0", ALICE, {}),
    ("cancelJob", 401): ("post", "/v1/jobs/1/cancel", None, {}),
    ("cancelJob", 404): ("post", "/v1/jobs/99/cancel", ADMIN, {}),
    ("cancelJob", 422): ("post", "/v1/jobs/not-a-number/cancel", ADMIN, {}),
    ("listJobLogs", 401): ("get", "/v1/jobs/1/logs", None, {}),
    ("listJobLogs", 404): ("get", "/v1/jobs/1/logs", BOB, {}),
    ("listJobLogs", 422): ("get", "/v1/jobs/0/logs", ALICE, {}),
    ("explainJob", 401): ("get", "/v1/jobs/1/explain", None, {}),
    ("explainJob", 404): ("get", "/v1/jobs/1/explain", BOB, {}),  # alice's job: not revealed to bob
    ("explainJob", 422): ("get", "/v1/jobs/0/explain", ALICE, {}),
    ("getTaskLog", 401): ("get", "/v1/jobs/1/tasks/1/logs", None, {}),
    ("getTaskLog", 404): ("get", "/v1/jobs/1/tasks/99/logs", ALICE, {}),  # not a task of the job
    ("getTaskLog", 422): ("get", "/v1/jobs/1/tasks/1/logs?offset=-1", ALICE, {}),
    ("getQueues", 401): ("get", "/v1/queues", None, {}),
    ("updateQueues", 400): ("put", "/v1/queues", ADMIN, {"content": NOT_JSON}),
    ("updateQueues", 401): ("put", "/v1/queues", None, {"json": {"weights": {"dev": 2}}}),
    ("updateQueues", 403): ("put", "/v1/queues", ALICE, {"json": {"weights": {"dev": 2}}}),
    ("updateQueues", 413): ("put", "/v1/queues", ADMIN, {"content": TOO_LARGE}),
    ("updateQueues", 422): ("put", "/v1/queues", ADMIN, {"json": {"weights": {"dev": -1}}}),
    ("getStatus", 401): ("get", "/v1/status", None, {}),
    ("getHistory", 401): ("get", "/v1/history", None, {}),
    ("getMetrics", 401): ("get", "/metrics", "not-anybodys-token", {}),
    ("getHealth", 503): ("get", "/healthz", None, {}),  # (the fixture stopped the scheduling loop)
}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    doc = config_doc()
    doc["auth"]["tenants"][1]["limits"] = {"submit_rate": 0.001, "submit_burst": 1}  # bob
    config = parse_config(doc, "test-config")
    service = LiveService(config, Store(tmp_path_factory.mktemp("openapi") / "fs.db"),
                          ManualExecutor(config.nodes), policy="hdrf")
    service.recover()
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        assert client.post("/v1/jobs", json=A_JOB, headers=H(ALICE)).json() == {"ids": [1]}
        first = client.post("/v1/jobs", json={"jobs": [job("b", "dev", 1, {"cpu": 1})]}, headers=H(BOB))
        assert first.status_code == 201, first.text  # bob's one request
        service.loop_error = RuntimeError("stopped for the test")  # /healthz: 503
        yield client


@pytest.fixture(scope="module")
def document(client):
    return client.get("/openapi.json").json()


def operations(document):
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield method, path, operation


def test_every_operation_has_an_operation_id_and_tags(document):
    ids = []
    for method, path, operation in operations(document):
        where = f"{method.upper()} {path}"
        assert re.fullmatch(r"[a-z]+(?:[A-Z][a-z]*)*", operation.get("operationId", "")), where
        assert operation.get("tags"), where
        ids.append(operation["operationId"])
    assert len(ids) == len(set(ids))  # unique, as OpenAPI requires
    found = {(method, path): operation["operationId"] for method, path, operation in operations(document)}
    assert {key: found.get(key) for key in OPERATION_IDS} == OPERATION_IDS


def test_each_route_lists_its_own_refusals(document):
    """The document's refusals of each route are those a request below provokes."""
    for method, path, operation in operations(document):
        operation_id = operation["operationId"]
        if operation_id not in OPERATION_IDS.values():
            continue  # (a route this module does not know yet)
        listed = {int(status) for status in operation["responses"] if int(status) >= 400}
        provoked = {status for op, status in PROVOKE if op == operation_id}
        assert listed == provoked, operation_id
    # not the same list everywhere: the reads take a token and nothing else
    assert {int(s) for s in document["paths"]["/v1/status"]["get"]["responses"]} == {200, 401}


@pytest.mark.parametrize("operation_id, status", list(PROVOKE), ids=[f"{op}-{s}" for op, s in PROVOKE])
def test_each_listed_refusal_is_reachable(client, operation_id, status):
    method, path, token, kwargs = PROVOKE[operation_id, status]
    response = client.request(method, path, headers=H(token), **kwargs)
    assert response.status_code == status, response.text
    if status == 429:
        assert int(response.headers["Retry-After"]) >= 1
    if status != 503:
        assert set(response.json()) == {"error", "errors"}  # the API's own refusal document
