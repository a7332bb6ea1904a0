"""Schemathesis against the service's own OpenAPI document: no request gets a 5xx, and
every answer conforms to the document (status code, content type, body schema).

The app is the real one (``fairshare.live.api.create_app``) around a real
``LiveService`` with its SQLite store and its scheduling thread running; only Ray is
replaced, by ``live_helpers.ManualExecutor`` (starts nothing, so submitted jobs stay
running or pending). Requests go in-process over ASGI. Every generated request is sent
with each of the tokens below: the admin's, a tenant's, an unknown one and none, so the
refusal paths (401, 403, 404) are fuzzed as much as the accepted ones.

Examples are bounded (``MAX_EXAMPLES`` per operation, no shrinking deadline) so the
module runs in well under a minute on two cores.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from fairshare.live.api import create_app
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from live_helpers import ADMIN, ALICE, ManualExecutor, job, make_config

MAX_EXAMPLES = 30
# (label, Authorization header or None)
TOKENS = [
    ("admin", f"Bearer {ADMIN}"),
    ("tenant", f"Bearer {ALICE}"),
    ("unknown", "Bearer not-anybodys-token"),
    ("none", None),
]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def live_app(tmp_path_factory):
    config = make_config()
    service = LiveService(config, Store(tmp_path_factory.mktemp("schema") / "fs.db"),
                          ManualExecutor(config.nodes), policy="hdrf")
    service.start()  # the loop must run: PUT /v1/queues waits for it to apply the change
    # one job of each tenant's, so the job routes have real ids to hit besides random ones
    service.submit(config.auth.authenticate(ALICE), {"jobs": [job("seed-a", "ads.prod", 3, {"cpu": 1})]})
    try:
        yield create_app(service)
    finally:
        service.stop()
        assert service.loop_error is None, f"the scheduling loop died: {service.loop_error!r}"


@pytest.fixture(scope="module")
def api_schema(live_app):
    return schemathesis.openapi.from_asgi("/openapi.json", live_app)


# Every route of the document (test_the_document_lists_every_route keeps this honest).
# schemathesis' own pytest plugin (``from_fixture``) reads a pytest-private attribute
# that pytest 9 removed, so each operation is driven through hypothesis directly.
OPERATIONS = [
    ("GET", "/healthz"), ("GET", "/metrics"),
    ("POST", "/v1/jobs"), ("GET", "/v1/jobs"), ("GET", "/v1/jobs/{job_id}"),
    ("POST", "/v1/jobs/{job_id}/cancel"),
    ("GET", "/v1/jobs/{job_id}/logs"), ("GET", "/v1/jobs/{job_id}/tasks/{task_id}/logs"),
    ("GET", "/v1/jobs/{job_id}/explain"),
    ("GET", "/v1/queues"), ("PUT", "/v1/queues"),
    ("GET", "/v1/status"), ("GET", "/v1/history"),
]
# Invalid input (negative mode) only where there is input: a body or a path parameter.
TAKES_INPUT = {("POST", "/v1/jobs"), ("GET", "/v1/jobs/{job_id}"), ("POST", "/v1/jobs/{job_id}/cancel"),
               ("GET", "/v1/jobs/{job_id}/logs"), ("GET", "/v1/jobs/{job_id}/tasks/{task_id}/logs"),
               ("GET", "/v1/jobs/{job_id}/explain"), ("PUT", "/v1/queues")}
CASES = [(method, path, GenerationMode.POSITIVE) for method, path in OPERATIONS] + \
        [(method, path, GenerationMode.NEGATIVE) for method, path in OPERATIONS if (method, path) in TAKES_INPUT]


def test_the_document_lists_every_route(api_schema):
    operations = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert operations == set(OPERATIONS)


@pytest.mark.parametrize("method, path, mode", CASES, ids=[f"{m} {p} {g.value}" for m, p, g in CASES])
def test_no_server_error_and_responses_conform(api_schema, method, path, mode):
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def run(case):
        for label, authorization in TOKENS:
            headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
            if authorization is not None:
                headers["Authorization"] = authorization
            response = case.call(headers=headers)
            where = f"{label} token: {case.method} {case.formatted_path}"
            assert response.status_code < 500, f"{where} -> {response.status_code}: {response.text[:500]}"
            case.validate_response(response, checks=CHECKS, headers=headers)
            if (authorization is None or label == "unknown") and path != "/healthz":
                # every route but /healthz needs a known token. A well-formed request is
                # refused for the token (401); a body FastAPI cannot even parse may be
                # refused for that first (400 not JSON, 422 wrong shape): never accepted.
                allowed = {401} if mode is GenerationMode.POSITIVE else {400, 401, 422}
                assert response.status_code in allowed, f"{where} -> {response.status_code}"

    run()
