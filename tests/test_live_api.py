"""The HTTP API: tokens, grants, tenant isolation, admin, and bad input answered with a
4xx that names the field (never a 500). The service runs on ``ManualExecutor``; the
scheduling loop is stepped by hand where a test needs decisions."""

from __future__ import annotations

import json
import warnings

import pytest

from builders import DELETE, changed
from live_helpers import ADMIN, ALICE, BOB, ManualExecutor, config_doc, job, make_config, sha
from fairshare.live.auth import Principal, parse_auth, token_hash
from fairshare.live.config import MAX_BODY_BYTES, parse_config
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from fairshare.model.errors import ScenarioError

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from fairshare.live.api import SubmitRoute, create_app  # noqa: E402


def H(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def api(tmp_path):
    config = make_config()
    executor = ManualExecutor(config.nodes)
    svc = LiveService(config, Store(tmp_path / "fs.db"), executor, policy="hdrf")
    svc.recover()
    client = TestClient(create_app(svc), raise_server_exceptions=False)
    return client, svc, executor


def submit(client, token, *jobs):
    return client.post("/v1/jobs", json={"jobs": list(jobs)}, headers=H(token))


# --- tokens ----------------------------------------------------------------------------------------
def test_tokens_are_kept_only_as_hashes():
    doc = config_doc()
    doc["auth"]["tenants"][0] = {"name": "alice", "token": ALICE, "queues": ["ads"]}  # plain, hashed on load
    auth = parse_config(doc).auth
    assert auth.admin_hash == sha(ADMIN)
    assert [(name, h) for name, h, _ in auth.tenants] == [("alice", token_hash(ALICE)), ("bob", sha(BOB))]
    assert ALICE not in repr(auth)
    assert auth.authenticate(ALICE) == Principal("alice", queues=("ads",))
    assert auth.authenticate(ADMIN).admin


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer nope-nope-nope", f"Basic {ALICE}", ALICE])
def test_missing_or_unknown_token_is_401(api, header):
    client, _, _ = api
    headers = {} if header is None else {"Authorization": header}
    for method, path in [("get", "/v1/jobs"), ("get", "/v1/queues"), ("get", "/v1/status"), ("get", "/v1/history"),
                         ("get", "/v1/jobs/1"), ("post", "/v1/jobs/1/cancel")]:
        r = getattr(client, method)(path, headers=headers)
        assert r.status_code == 401, (method, path)
        assert r.json()["error"]["field"] == "Authorization"
    r = client.post("/v1/jobs", json={"jobs": [job("a", "ads", 1, {"cpu": 1})]}, headers=headers)
    assert r.status_code == 401


@pytest.mark.parametrize("granted, queue, allowed", [
    (("ads",), "ads", True),
    (("ads",), "ads.prod", True),  # below a granted queue
    (("ads",), "dev", False),
    (("ads",), "", False),  # the root is nobody's
    (("ads.prod",), "ads", False),  # a child grant does not cover the parent
    (("ads.prod",), "ads.test", False),
    (("ad",), "ads", False),  # a prefix of the name is not an ancestor
])
def test_grants_cover_the_queue_and_its_descendants(granted, queue, allowed):
    assert Principal("t", queues=granted).may_use_queue(queue) is allowed


def test_tenant_submits_only_to_granted_queues(api):
    client, _, _ = api
    r = submit(client, BOB, job("b", "dev", 1, {"cpu": 1}), job("b2", "ads.prod", 1, {"cpu": 1}))
    assert r.status_code == 403
    assert r.json()["error"]["field"] == "jobs[1].queue"
    assert client.get("/v1/jobs", headers=H(ADMIN)).json() == []  # nothing accepted from a refused request


def test_tenant_isolation(api):
    client, _, _ = api
    (a,) = submit(client, ALICE, job("a", "ads", 1, {"cpu": 1})).json()["ids"]
    (b,) = submit(client, BOB, job("b", "dev", 1, {"cpu": 1})).json()["ids"]
    assert [j["id"] for j in client.get("/v1/jobs", headers=H(ALICE)).json()] == [a]
    assert [j["id"] for j in client.get("/v1/jobs", headers=H(BOB)).json()] == [b]
    assert [j["id"] for j in client.get("/v1/jobs", headers=H(ADMIN)).json()] == [a, b]
    # another tenant's job does not exist for you: 404, and cancelling it changes nothing
    assert client.get(f"/v1/jobs/{a}", headers=H(BOB)).status_code == 404
    assert client.post(f"/v1/jobs/{a}/cancel", headers=H(BOB)).status_code == 404
    assert client.get(f"/v1/jobs/{a}", headers=H(ALICE)).json()["state"] == "pending"
    job_a = client.get(f"/v1/jobs/{a}", headers=H(ALICE)).json()
    assert job_a["tenant"] == "alice" and job_a["tasks"][0]["state"] == "pending"


def test_only_admin_changes_the_queue_tree(api):
    client, svc, _ = api
    change = {"weights": {"dev": 3}, "add": [{"path": "dev.batch", "weight": 2}]}
    r = client.put("/v1/queues", json=change, headers=H(ALICE))
    assert r.status_code == 403 and r.json()["error"]["field"] == "Authorization"
    svc.start()  # the loop applies the change
    try:
        r = client.put("/v1/queues", json=change, headers=H(ADMIN))
        assert r.status_code == 200, r.text
        assert r.json()["dev"]["weight"] == 3
        assert r.json()["dev.batch"]["weight"] == 2
        # a tenant granted `dev` may now use the new queue below it
        assert submit(client, BOB, job("b", "dev.batch", 1, {"cpu": 1})).status_code == 201
    finally:
        svc.stop()
    # kept in the store: a new service on the same database has the new tree
    again = LiveService(make_config(), svc.store, ManualExecutor(make_config().nodes), policy="hdrf")
    assert again.scheduler.queues["dev"].weight == 3 and "dev.batch" in again.scheduler.queues


# --- bad input: 4xx naming the field ----------------------------------------------------------------
def good() -> dict:
    return job("a", "ads.prod", 2, {"cpu": 1, "memory": 2})


def with_(path_value) -> dict:
    """``good()`` with one change: ``(["tasks", 0, "demand", "gpu"], -1)``; value DELETE removes."""
    keys, value = path_value
    doc = good()
    doc["name"] = "a2"  # job names are unique within one request (the scenario rule)
    return changed(doc, keys, value)

BAD_JOBS = [
    # (what is wrong, change, status, field)
    ("negative demand", (["tasks", 0, "demand", "gpu"], -1), 422, "jobs[0].tasks[0].demand.gpu"),
    ("demand not a number", (["tasks", 0, "demand", "cpu"], "two"), 422, "jobs[0].tasks[0].demand.cpu"),
    ("demand a bool", (["tasks", 0, "demand", "cpu"], True), 422, "jobs[0].tasks[0].demand.cpu"),
    ("unknown resource", (["tasks", 0, "demand", "tpu"], 1), 422, "jobs[0].tasks[0].demand.tpu"),
    ("no node can hold it", (["tasks", 0, "demand", "cpu"], 5), 422, "jobs[0].tasks[0].demand"),
    ("needs a MIC and a GPU (no node has both)", (["tasks", 0, "demand"], {"mic": 1, "gpu": 1}), 422,
     "jobs[0].tasks[0].demand"),
    ("demands nothing", (["tasks", 0, "demand"], {"cpu": 0}), 422, "jobs[0].tasks[0].demand"),
    ("no command", (["tasks", 0, "command"], DELETE), 422, "jobs[0].tasks[0].command"),
    ("empty command", (["tasks", 0, "command"], ""), 422, "jobs[0].tasks[0].command"),
    ("empty argv", (["tasks", 0, "command"], []), 422, "jobs[0].tasks[0].command"),
    ("unbalanced quote", (["tasks", 0, "command"], "echo 'oops"), 422, "jobs[0].tasks[0].command"),
    ("shell not a bool", (["tasks", 0, "shell"], "yes"), 422, "jobs[0].tasks[0].shell"),
    ("no count", (["tasks", 0, "count"], DELETE), 422, "jobs[0].tasks[0].count"),
    ("negative count", (["tasks", 0, "count"], -1), 422, "jobs[0].tasks[0].count"),
    ("fractional count", (["tasks", 0, "count"], 1.5), 422, "jobs[0].tasks[0].count"),
    ("huge count", (["tasks", 0, "count"], 10 ** 9), 422, "jobs[0].tasks[0].count"),
    ("unknown task key", (["tasks", 0, "gpus"], 1), 422, "jobs[0].tasks[0].gpus"),
    ("no tasks", (["tasks"], []), 422, "jobs[0].tasks"),
    ("unknown queue", (["queue"], "nope"), 422, "jobs[0].queue"),
    ("queue not granted", (["queue"], "dev"), 403, "jobs[0].queue"),
    ("zero weight", (["weight"], 0), 422, "jobs[0].weight"),
    ("unknown job key", (["deadline"], 1), 422, "jobs[0].deadline"),
    ("constraint nobody meets", (["tasks", 0, "constraints"], {"zone": "mars"}), 422,
     "jobs[0].tasks[0].constraints"),
]


@pytest.mark.parametrize("what, change, status, field", BAD_JOBS, ids=[b[0] for b in BAD_JOBS])
def test_bad_job_is_refused_with_its_field(api, what, change, status, field):
    client, _, _ = api
    r = submit(client, ALICE, good(), with_(change))  # the bad job is the second: jobs[1]
    assert r.status_code == status, r.text
    fields = [e["field"] for e in r.json()["errors"]]
    assert field.replace("jobs[0]", "jobs[1]") in fields, fields
    assert client.get("/v1/jobs", headers=H(ALICE)).json() == []  # all or nothing


def test_too_many_tasks_in_one_request_is_refused(api):
    client, _, _ = api
    # 2 jobs x 60,000 tasks = 120,000 > the 100,000 a request may create
    r = submit(client, ALICE, job("a", "ads", 60_000, {"cpu": 1}), job("b", "ads", 60_000, {"cpu": 1}))
    assert r.status_code == 422
    assert r.json()["error"]["field"] == "jobs"


@pytest.mark.parametrize("body, field", [
    ({}, "jobs"),
    ({"jobs": []}, "jobs"),
    ({"jobs": "x"}, "jobs"),
    ({"jobs": [1]}, "jobs[0]"),
    ({"jobs": [{"tasks": [{"demand": {"cpu": 1}, "count": 1, "command": "true"}]}], "x": 1}, "x"),
    ([1, 2], ""),
])
def test_bad_body_shape_is_422_with_field(api, body, field):
    client, _, _ = api
    r = client.post("/v1/jobs", json=body, headers=H(ALICE))
    assert r.status_code == 422, r.text
    assert field in [e["field"] for e in r.json()["errors"]]


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b"null", b'"jobs"'])
def test_unparsable_body_is_4xx_not_500(api, raw):
    client, _, _ = api
    r = client.post("/v1/jobs", content=raw, headers={**H(ALICE), "Content-Type": "application/json"})
    assert 400 <= r.status_code < 500, r.text
    assert "field" in r.json()["error"]


@pytest.mark.parametrize("path", ["/v1/jobs/0", "/v1/jobs/-1", "/v1/jobs/abc", "/v1/jobs/99999999999999999999",
                                  "/v1/jobs/12345"])
def test_bad_or_unknown_job_id_is_4xx(api, path):
    client, _, _ = api
    r = client.get(path, headers=H(ALICE))
    assert r.status_code in (404, 422), r.text
    assert r.json()["error"]["field"] in ("job_id", "id")


@pytest.mark.parametrize("change, field", [
    ({"weights": {"nope": 1}}, "weights.nope"),
    ({"weights": {"dev": 0}}, "weights.dev"),
    ({"weights": {"dev": "x"}}, "weights.dev"),
    ({"add": [{"path": "dev"}]}, "add[0].path"),
    ({"add": [{"path": "x.y"}]}, "add[0].path"),
    ({"add": [{"path": "a..b"}]}, "add[0].path"),
    ({"add": [{"path": "new", "order": "lifo"}]}, "add[0].order"),
    ({"remove": ["dev"]}, "remove"),
    # the limits of a request (MAX_WEIGHT, MAX_NAME_CHARS), as for a job
    ({"weights": {"dev": 1e7}}, "weights.dev"),
    ({"add": [{"path": "new", "weight": 1e7}]}, "add[0].weight"),
    ({"add": [{"path": "n" * 257}]}, "add[0].path"),
])
def test_bad_queue_change_is_422_with_field(api, change, field):
    client, _, _ = api
    r = client.put("/v1/queues", json=change, headers=H(ADMIN))
    assert r.status_code == 422, r.text
    assert field in [e["field"] for e in r.json()["errors"]]


def test_openapi_lists_the_routes(api):
    client, _, _ = api
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/cancel", "/v1/queues", "/v1/status",
            "/v1/history", "/healthz"} <= set(paths)
    assert client.get("/healthz").json()["status"] == "ok"


@pytest.mark.parametrize("path, token", [("/", None), ("/dashboard/dashboard.js", None), ("/healthz", None),
                                         ("/v1/jobs", ALICE), ("/v1/queues", ALICE), ("/v1/status", ADMIN),
                                         ("/metrics", ADMIN)])
def test_head_answers_as_get_without_the_body(api, path, token):
    # (HEAD / was a 405: FastAPI's routes answer only the methods they declare)
    client, _, _ = api
    headers = H(token) if token else {}
    get = client.get(path, headers=headers)
    head = client.head(path, headers=headers)
    assert get.status_code == 200, get.text
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-type"] == get.headers["content-type"]
    if not path.startswith(("/v1/", "/metrics")):  # (the others change from one call to the next)
        assert head.headers["content-length"] == str(len(get.content))


def test_head_is_refused_where_get_is(api):
    client, _, _ = api
    assert client.head("/v1/jobs").status_code == 401  # no token
    assert client.head("/v1/jobs/1/cancel", headers=H(ADMIN)).status_code == 405  # a POST route
    assert client.head("/nowhere").status_code == 404


# --- config: the auth section ------------------------------------------------------------------------
@pytest.mark.parametrize("auth, field", [
    (None, "auth"),
    ({"tenants": [{"name": "x", "token_sha256": "abc", "queues": ["ads"]}]}, "auth.tenants[0].token_sha256"),
    ({"tenants": [{"name": "x", "token_sha256": sha("t1-token"), "queues": ["nope"]}]}, "auth.tenants[0].queues[0]"),
    ({"tenants": [{"name": "x", "token_sha256": sha("t1-token"), "queues": []}]}, "auth.tenants[0].queues"),
    ({"tenants": [{"name": "admin", "token_sha256": sha("t1-token"), "queues": ["ads"]}]}, "auth.tenants[0].name"),
    ({"tenants": [{"name": "x", "token_sha256": sha("t1-token"), "queues": ["ads"]},
                  {"name": "y", "token_sha256": sha("t1-token"), "queues": ["ads"]}]}, "auth.tenants[1].token_sha256"),
    ({"tenants": [{"name": "x", "token": "short", "queues": ["ads"]}]}, "auth.tenants[0].token"),
    ({"admin_token_sha256": sha("a-token-1"), "tenants": [], "extra": 1}, "auth.extra"),
])
def test_bad_auth_config_names_the_field(auth, field):
    doc = config_doc()
    if auth is None:
        del doc["auth"]
    else:
        doc["auth"] = auth
    with pytest.raises(ScenarioError) as info:
        parse_config(doc, "cluster.yaml")
    assert field in info.value.paths


def test_parse_auth_alone_collects_every_problem():
    errors = []
    parse_auth({"tenants": [{"name": "", "queues": "ads"}]}, {"ads"}, errors)
    # only the tenant's problems: not also that nobody could use the service, which is
    # false once the tenant is fixed
    assert {e.path for e in errors} == {"auth.tenants[0].name", "auth.tenants[0].token_sha256",
                                        "auth.tenants[0].queues"}


@pytest.mark.parametrize("auth, paths", [
    ({"tenants": []}, ["auth"]),  # nobody could use the service: that is the problem
    ({}, ["auth"]),
    ({"admin_token": "short"}, ["auth.admin_token"]),
    ({"tenants": [{"name": "x", "token_sha256": "abc", "queues": ["ads"]}]}, ["auth.tenants[0].token_sha256"]),
])
def test_no_user_at_all_is_reported_only_when_nothing_else_is_wrong(auth, paths):
    errors = []
    parse_auth(auth, {"ads"}, errors)
    assert [e.path for e in errors] == paths


# --- Idempotency-Key ----------------------------------------------------------------------------------
def test_a_retried_submission_with_the_same_key_creates_nothing_new(api):
    client, svc, _ = api
    body = {"jobs": [job("a", "ads", 2, {"cpu": 1}), job("b", "ads.prod", 1, {"cpu": 1})]}
    first = client.post("/v1/jobs", json=body, headers={**H(ALICE), "Idempotency-Key": "k-1"})
    assert first.status_code == 201, first.text
    again = client.post("/v1/jobs", json=body, headers={**H(ALICE), "Idempotency-Key": "k-1"})
    # the same answer: status and body
    assert (again.status_code, again.json()) == (201, first.json())
    assert [j["id"] for j in client.get("/v1/jobs", headers=H(ALICE)).json()] == first.json()["ids"]
    assert svc.store.pending_tasks("alice") == 3  # 2 + 1, counted once
    # a new key is a new request
    other = client.post("/v1/jobs", json=body, headers={**H(ALICE), "Idempotency-Key": "k-2"})
    assert other.status_code == 201 and set(other.json()["ids"]).isdisjoint(first.json()["ids"])


def test_the_same_key_with_another_body_is_422_naming_the_header(api):
    client, _, _ = api
    r1 = client.post("/v1/jobs", json={"jobs": [job("a", "ads", 1, {"cpu": 1})]},
                     headers={**H(ALICE), "Idempotency-Key": "k"})
    r2 = client.post("/v1/jobs", json={"jobs": [job("a", "ads", 2, {"cpu": 1})]},
                     headers={**H(ALICE), "Idempotency-Key": "k"})
    assert r2.status_code == 422, r2.text
    assert r2.json()["error"]["field"] == "Idempotency-Key"
    assert str(r1.json()["ids"][0]) in r2.json()["error"]["reason"]
    assert len(client.get("/v1/jobs", headers=H(ALICE)).json()) == 1


def test_keys_belong_to_their_tenant(api):
    client, _, _ = api
    a = client.post("/v1/jobs", json={"jobs": [job("a", "ads", 1, {"cpu": 1})]},
                    headers={**H(ALICE), "Idempotency-Key": "shared"})
    b = client.post("/v1/jobs", json={"jobs": [job("b", "dev", 1, {"cpu": 1})]},
                    headers={**H(BOB), "Idempotency-Key": "shared"})
    assert (a.status_code, b.status_code) == (201, 201)
    assert a.json()["ids"] != b.json()["ids"]


@pytest.mark.parametrize("key", [b"", b"has space", b"x" * 256, "caf\u00e9".encode("latin-1")])
def test_a_malformed_key_is_422_naming_the_header(api, key):
    client, _, _ = api
    r = client.post("/v1/jobs", json={"jobs": [job("a", "ads", 1, {"cpu": 1})]},
                    headers={**H(ALICE), "Idempotency-Key": key})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "Idempotency-Key"
    assert client.get("/v1/jobs", headers=H(ALICE)).json() == []


def test_concurrent_retries_with_one_key_create_the_jobs_once(api):
    from concurrent.futures import ThreadPoolExecutor

    client, _, _ = api
    body = {"jobs": [job("a", "ads", 1, {"cpu": 1})]}

    def post(_):
        return client.post("/v1/jobs", json=body, headers={**H(ALICE), "Idempotency-Key": "race"})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(post, range(16)))
    assert {r.status_code for r in answers} == {201}
    assert len({tuple(r.json()["ids"]) for r in answers}) == 1
    assert len(client.get("/v1/jobs", headers=H(ALICE)).json()) == 1


def test_a_key_is_remembered_across_a_restart(tmp_path):
    config = make_config()
    svc = LiveService(config, Store(tmp_path / "fs.db"), ManualExecutor(config.nodes), policy="hdrf")
    svc.recover()
    alice = config.auth.authenticate(ALICE)
    body = {"jobs": [job("a", "ads", 1, {"cpu": 1})]}
    ids = svc.submit(alice, body, idempotency_key="k")
    svc.store.close()
    again = LiveService(config, Store(tmp_path / "fs.db"), ManualExecutor(config.nodes), policy="hdrf")
    again.recover()
    assert again.submit(alice, body, idempotency_key="k") == ids
    assert [r.id for r in again.store.jobs()] == ids


def test_a_retry_that_no_longer_validates_still_gets_the_first_answer(api):
    client, svc, executor = api
    # 3 CPUs: only cpu-node (4 CPUs) can hold it
    body = {"jobs": [job("big", "ads", 1, {"cpu": 3})]}
    first = client.post("/v1/jobs", json=body, headers={**H(ALICE), "Idempotency-Key": "k"})
    assert first.status_code == 201, first.text
    svc.step()
    executor.lose("cpu-node")
    svc.step()
    # now the same request without a key is refused: no node up can hold the task ...
    fresh = client.post("/v1/jobs", json=body, headers=H(ALICE))
    assert fresh.status_code == 422 and fresh.json()["error"]["field"] == "jobs[0].tasks[0].demand"
    # ... but the retry of the accepted one gets its answer again
    again = client.post("/v1/jobs", json=body, headers={**H(ALICE), "Idempotency-Key": "k"})
    assert (again.status_code, again.json()) == (201, first.json())


# --- pagination ------------------------------------------------------------------------------------
def test_job_tasks_and_job_lists_come_in_pages(api):
    client, _, _ = api
    got = submit(client, ALICE, job("big", "ads", 25, {"cpu": 1}), job("b2", "ads", 1, {"cpu": 1}),
                 job("b3", "ads", 1, {"cpu": 1}))
    big, b2, b3 = got.json()["ids"]
    # 25 tasks in pages of 10: 10 + 10 + 5, each page's cursor its last task id
    seen, cursor, pages = [], None, 0
    while True:
        params = {"tasks_limit": 10} | ({} if cursor is None else {"tasks_after": cursor})
        doc = client.get(f"/v1/jobs/{big}", params=params, headers=H(ALICE)).json()
        pages += 1
        seen += [t["id"] for t in doc["tasks"]]
        assert doc["tasks_total"] == 25  # the counts cover every task, whatever the page
        cursor = doc["tasks_next"]
        if cursor is None:
            break
        assert cursor == doc["tasks"][-1]["id"]
    assert pages == 3 and len(seen) == len(set(seen)) == 25 and seen == sorted(seen)
    # the default page holds them all here (1,000), with no next page
    doc = client.get(f"/v1/jobs/{big}", headers=H(ALICE)).json()
    assert len(doc["tasks"]) == 25 and doc["tasks_next"] is None
    # job lists: limit and after (the previous page's last id)
    first = client.get("/v1/jobs", params={"limit": 2}, headers=H(ALICE)).json()
    rest = client.get("/v1/jobs", params={"after": first[-1]["id"]}, headers=H(ALICE)).json()
    assert [j["id"] for j in first] == [big, b2] and [j["id"] for j in rest] == [b3]
    assert len(client.get("/v1/jobs", headers=H(ALICE)).json()) == 3  # no limit: every job, as before
    # newest first (the dashboard's page): after is then the id the page continues below
    newest = client.get("/v1/jobs", params={"order": "newest", "limit": 2}, headers=H(ALICE)).json()
    older = client.get("/v1/jobs", params={"order": "newest", "after": newest[-1]["id"]}, headers=H(ALICE)).json()
    assert [j["id"] for j in newest] == [b3, b2] and [j["id"] for j in older] == [big]


@pytest.mark.parametrize("path, params, field", [
    ("/v1/jobs", {"limit": 0}, "limit"), ("/v1/jobs", {"limit": 10_001}, "limit"), ("/v1/jobs", {"after": -1}, "after"),
    ("/v1/jobs", {"order": "random"}, "order"),
    ("/v1/jobs/1", {"tasks_limit": 0}, "tasks_limit"), ("/v1/jobs/1", {"tasks_after": "x"}, "tasks_after"),
])
def test_bad_page_parameters_are_422_naming_them(api, path, params, field):
    client, _, _ = api
    submit(client, ALICE, job("a", "ads", 1, {"cpu": 1}))
    r = client.get(path, params=params, headers=H(ALICE))
    assert r.status_code == 422 and field in r.text


# --- the submission route's middleware ------------------------------------------------------------
def test_submit_middleware_answers_as_the_fastapi_route_does(api):
    """``POST /v1/jobs`` is answered by ``api.SubmitRoute`` ahead of FastAPI's layers; a
    request with a ``root_path`` goes through FastAPI's own route instead. Both give the
    same status, headers of note and body for accepted, refused and malformed requests."""
    client, svc, _ = api
    assert any(m.cls is SubmitRoute for m in client.app.user_middleware)
    via_route = TestClient(client.app, raise_server_exceptions=False, root_path="/behind-a-proxy")
    ok = {"jobs": [job("a", "ads", 1, {"cpu": 1})]}
    cases = [
        ({"json": ok, "headers": H(ALICE)}, 201),
        ({"json": ok, "headers": {}}, 401),
        ({"content": b"{not json", "headers": H(ALICE)}, 400),
        ({"json": {"jobs": [job("a", "dev", 1, {"cpu": 1})]}, "headers": H(ALICE)}, 403),
        ({"json": {"jobs": [job("a", "ads", 1, {"cpu": 99})]}, "headers": H(ALICE)}, 422),
        ({"json": {"jobs": []}, "headers": H(ALICE)}, 422),
        ({"json": ok, "headers": {**H(ALICE), "Idempotency-Key": "no spaces allowed"}}, 422),
        ({"content": b"x" * (MAX_BODY_BYTES + 1), "headers": H(ALICE)}, 413),
    ]
    for kwargs, status in cases:
        got = [c.post("/v1/jobs", **kwargs) for c in (client, via_route)]
        assert [r.status_code for r in got] == [status, status], kwargs
        assert got[0].headers["content-type"] == got[1].headers["content-type"]
        if status == 201:
            assert [len(r.json()["ids"]) for r in got] == [1, 1]
        else:
            assert got[0].json() == got[1].json()
    assert len(svc.list_jobs(None)) == 2  # one accepted job through each path, nothing else stored


@pytest.mark.parametrize("method, path", [("post", "/v1/jobs"), ("put", "/v1/queues")])
def test_a_body_nested_too_deep_is_a_400_naming_the_body_on_every_route(api, method, path):
    """A body nested past the bound (here 10,000 arrays: deeper than Python's JSON parser
    recurses, which answered 500) is refused before it is parsed, on both body routes."""
    from fairshare.live.api import MAX_BODY_DEPTH

    client, _, _ = api
    deep = "[" * 10_000 + "]" * 10_000
    r = getattr(client, method)(path, content=deep, headers={**H(ADMIN), "Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    (error,) = r.json()["errors"]
    assert error["field"] == "body" and f"10000 arrays or objects deep, more than the {MAX_BODY_DEPTH}" in \
        error["reason"]
    # at the bound it is JSON of the wrong shape (422), not a nesting refusal
    at_bound = "[" * MAX_BODY_DEPTH + "]" * MAX_BODY_DEPTH
    assert getattr(client, method)(path, content=at_bound, headers=H(ADMIN)).status_code == 422


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_put_queues_reads_its_body_as_json_whatever_the_content_type_as_submit_does(api, content_type):
    import json as json_module

    client, svc, _ = api
    headers = H(ADMIN) if content_type is None else {**H(ADMIN), "Content-Type": content_type}
    # a wrong shape: the same 422 with its field, not an empty field and a pydantic message
    r = client.put("/v1/queues", content=json_module.dumps({"weights": {"dev": "x"}}), headers=headers)
    assert r.status_code == 422 and [e["field"] for e in r.json()["errors"]] == ["weights.dev"], r.text
    r = client.put("/v1/queues", content="not json", headers=headers)
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "body", r.text
    svc.start()  # (the loop applies a valid change)
    try:
        r = client.put("/v1/queues", content=json_module.dumps({"weights": {"dev": 2}}), headers=headers)
        assert r.status_code == 200 and r.json()["dev"]["weight"] == 2, r.text
    finally:
        svc.stop()


def test_the_openapi_document_declares_put_queues_body(api):
    client, _, _ = api
    doc = client.get("/openapi.json").json()
    body = doc["paths"]["/v1/queues"]["put"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/QueueChangeIn"}
    change = doc["components"]["schemas"]["QueueChangeIn"]["properties"]
    assert set(change) == {"weights", "add", "bounds", "fairness"}  # (fairness: the half-life, issue 22)
    assert "half_life" in json.dumps(change["fairness"]) + json.dumps(doc["components"]["schemas"].get("Fairness", {}))
