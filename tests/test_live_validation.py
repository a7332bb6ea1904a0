"""No tenant can hurt the others through ``POST /v1/jobs``: demands the executor cannot
represent, oversized names, commands and bodies, absurd weights, NUL characters and
lone surrogates are refused with the field named (never a 500); a tenant over its
pending-task cap or its submission rate gets 429 with ``Retry-After``. Each test checks
the status *and* the field, and that a refused request stored nothing."""

from __future__ import annotations

import json
import warnings

import pytest

from live_helpers import ADMIN, ALICE, BOB, ManualExecutor, config_doc, job
from fairshare.live.auth import DEFAULT_LIMITS, SubmitRateLimiter, TenantLimits
from fairshare.live.config import MAX_BODY_BYTES, MAX_COMMAND_CHARS, MAX_NAME_CHARS, parse_config, request_problems
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from fairshare.model.errors import ScenarioError

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from fairshare.live.api import create_app  # noqa: E402


def H(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def make_api(tmp_path, limits: dict | None = None, alice_limits: dict | None = None):
    doc = config_doc()
    if limits is not None:
        doc["auth"]["limits"] = limits
    if alice_limits is not None:
        doc["auth"]["tenants"][0]["limits"] = alice_limits
    config = parse_config(doc, "test-config")
    executor = ManualExecutor(config.nodes)
    svc = LiveService(config, Store(tmp_path / "fs.db"), executor, policy="hdrf")
    svc.recover()
    return TestClient(create_app(svc), raise_server_exceptions=False), svc, executor


@pytest.fixture
def api(tmp_path):
    return make_api(tmp_path)


def fields(r) -> list[str]:
    return [e["field"] for e in r.json()["errors"]]


def nothing_stored(client) -> bool:
    return client.get("/v1/jobs", headers=H(ADMIN)).json() == []


# --- what a request may carry ----------------------------------------------------------------------
@pytest.mark.parametrize("demand, field", [
    ({"cpu": 1e-300}, "jobs[0].tasks[0].demand.cpu"),  # rounds to 0 at Ray's 4 decimals
    ({"cpu": 0.00004}, "jobs[0].tasks[0].demand.cpu"),  # round(0.00004, 4) = 0.0
    ({"cpu": 1, "memory": 1e-9}, "jobs[0].tasks[0].demand.memory"),
])
def test_a_demand_too_small_for_the_executor_is_422(api, demand, field):
    client, svc, _ = api
    r = client.post("/v1/jobs", json={"jobs": [job("tiny", "ads", 1, demand)]}, headers=H(ALICE))
    assert r.status_code == 422, r.text
    assert field in fields(r)
    assert "0.0001" in r.json()["error"]["reason"]
    assert nothing_stored(client)


def test_the_smallest_representable_demand_is_accepted(api):
    client, _, _ = api
    # 0.0001 is Ray's resolution; 0.00005 rounds up to it (round(0.00005, 4) = 0.0001)
    r = client.post("/v1/jobs", json={"jobs": [job("small", "ads", 1, {"cpu": 0.0001}),
                                               job("half", "ads", 1, {"cpu": 0.00006})]}, headers=H(ALICE))
    assert r.status_code == 201, r.text


def test_a_10_mb_name_is_refused_before_parsing(api):
    client, _, _ = api
    body = json.dumps({"jobs": [job("x" * 10_000_000, "ads", 1, {"cpu": 1})]}).encode()
    assert len(body) > MAX_BODY_BYTES
    r = client.post("/v1/jobs", content=body, headers={**H(ALICE), "Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert fields(r) == ["body"]
    assert str(MAX_BODY_BYTES) in r.json()["error"]["reason"]
    assert nothing_stored(client)


def test_a_body_without_content_length_is_cut_off_at_the_limit(api):
    client, _, _ = api

    def chunks():  # chunked transfer: no Content-Length to check up front
        yield b'{"jobs": [{"name": "'
        for _ in range(9):
            yield b"x" * (1024 * 1024)
        yield b'"}]}'

    r = client.post("/v1/jobs", content=chunks(), headers={**H(ALICE), "Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert fields(r) == ["body"]
    assert nothing_stored(client)


@pytest.mark.parametrize("change, field", [
    ({"name": "n" * (MAX_NAME_CHARS + 1)}, "jobs[0].name"),
    ({"weight": 1e308}, "jobs[0].weight"),
    ({"weight": 1e6 + 1}, "jobs[0].weight"),
    ({"tasks": [{"demand": {"cpu": 1}, "count": 1, "command": "x" * (MAX_COMMAND_CHARS + 1)}]},
     "jobs[0].tasks[0].command"),
    ({"tasks": [{"demand": {"cpu": 1}, "count": 1, "command": ["a" * MAX_COMMAND_CHARS, "b"]}]},
     "jobs[0].tasks[0].command"),  # the arguments together: 65536 + 1 characters
    ({"tasks": [{"demand": {"cpu": 1}, "count": 1, "command": "true", "class": "c" * 300}]},
     "jobs[0].tasks[0].class"),
])
def test_sizes_and_weights_over_the_limits_are_422(api, change, field):
    client, _, _ = api
    doc = {**job("a", "ads", 1, {"cpu": 1}), **change}
    r = client.post("/v1/jobs", json={"jobs": [doc]}, headers=H(ALICE))
    assert r.status_code == 422, r.text
    assert field in fields(r)
    assert nothing_stored(client)


def test_the_largest_weight_is_accepted(api):
    client, _, _ = api
    r = client.post("/v1/jobs", json={"jobs": [{**job("a", "ads", 1, {"cpu": 1}), "weight": 1e6}]},
                    headers=H(ALICE))
    assert r.status_code == 201, r.text


# JSON text as sent on the wire: "\u0000" and a lone "\ud800" are valid JSON escapes,
# but neither is text a command, SQLite or a UTF-8 answer can carry
TEXT_CASES = [
    ("NUL in a command", '"command": "echo a\\u0000b"', "jobs[0].tasks[0].command", "NUL"),
    ("NUL in an argument", '"command": ["echo", "a\\u0000b"]', "jobs[0].tasks[0].command[1]", "NUL"),
    ("lone surrogate in a command", '"command": "echo \\ud800"', "jobs[0].tasks[0].command", "surrogate"),
    ("lone surrogate in an argument", '"command": ["echo", "\\udfff"]', "jobs[0].tasks[0].command[1]",
     "surrogate"),
]


@pytest.mark.parametrize("what, command, field, word", TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_nul_and_lone_surrogates_in_a_command_are_422(api, what, command, field, word):
    client, _, _ = api
    raw = '{"jobs": [{"name": "a", "queue": "ads", "tasks": [{"demand": {"cpu": 1}, "count": 1, ' + command + '}]}]}'
    r = client.post("/v1/jobs", content=raw.encode(), headers={**H(ALICE), "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    assert word in r.json()["error"]["reason"]
    assert nothing_stored(client)


@pytest.mark.parametrize("raw, field", [
    ('{"jobs": [{"name": "\\ud800", "queue": "ads", "tasks": [{"demand": {"cpu": 1}, "count": 1, '
     '"command": "true"}]}]}', "jobs[0].name"),
    ('{"jobs": [{"name": "a\\u0000", "queue": "ads", "tasks": [{"demand": {"cpu": 1}, "count": 1, '
     '"command": "true"}]}]}', "jobs[0].name"),
    # a key that is not text: named by the object that holds it
    ('{"jobs": [{"name": "a", "queue": "ads", "tasks": [{"demand": {"cpu": 1, "\\ud83d": 1}, "count": 1, '
     '"command": "true"}]}]}', "jobs[0].tasks[0].demand"),
    ('{"jobs": [{"name": "a", "queue": "ads\\ud800", "tasks": [{"demand": {"cpu": 1}, "count": 1, '
     '"command": "true"}]}]}', "jobs[0].queue"),
])
def test_a_lone_surrogate_or_nul_anywhere_is_422_not_500(api, raw, field):
    client, _, _ = api
    r = client.post("/v1/jobs", content=raw.encode(), headers={**H(ALICE), "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert field in fields(r)
    assert nothing_stored(client)


def test_a_lone_surrogate_in_a_queue_change_is_422_not_500(api):
    client, _, _ = api
    raw = '{"add": [{"path": "dev.\\ud800"}]}'
    r = client.put("/v1/queues", content=raw.encode(), headers={**H(ADMIN), "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert fields(r) == ["add[0].path"]


def test_request_problems_lists_every_problem_with_its_path():
    body = {"jobs": [{"name": "a\x00", "weight": 2e6, "tasks": [{"command": ["ok", "\ud800"],
                                                                   "constraints": {"zone": "z" * 300}}]}]}
    problems = {e.path: e.reason for e in request_problems(body)}
    assert set(problems) == {"jobs[0].name", "jobs[0].weight", "jobs[0].tasks[0].command[1]",
                             "jobs[0].tasks[0].constraints.zone"}
    assert "\ud800" not in " ".join(problems.values())  # the reason does not echo the bad text
    assert request_problems({"jobs": [job("fine", "ads", 1, {"cpu": 1}, ["echo", "héllo ✓"])]}) == []


@pytest.mark.parametrize("raw", [b"{not json", b'{"jobs": [', b"\xff\xfe"])
def test_a_body_that_is_not_json_is_400(api, raw):
    client, _, _ = api
    r = client.post("/v1/jobs", content=raw, headers={**H(ALICE), "Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert fields(r) == ["body"]


@pytest.mark.parametrize("raw", [b"null", b'"jobs"', b"[1, 2]", b'{"jobs": 1}'])
def test_json_of_the_wrong_shape_is_422(api, raw):
    client, _, _ = api
    r = client.post("/v1/jobs", content=raw, headers={**H(ALICE), "Content-Type": "application/json"})
    assert r.status_code == 422, r.text


# --- per-tenant limits --------------------------------------------------------------------------------
def test_over_the_pending_cap_is_429_until_tasks_start(tmp_path):
    client, svc, executor = make_api(tmp_path, alice_limits={"max_pending_tasks": 10})
    # 6 pending, then 6 more would be 12 > 10
    assert client.post("/v1/jobs", json={"jobs": [job("a", "ads", 6, {"cpu": 1})]}, headers=H(ALICE)).status_code == 201
    r = client.post("/v1/jobs", json={"jobs": [job("b", "ads", 6, {"cpu": 1})]}, headers=H(ALICE))
    assert r.status_code == 429, r.text
    assert fields(r) == ["jobs"]
    assert "max_pending_tasks" in r.json()["error"]["reason"] and "10" in r.json()["error"]["reason"]
    assert int(r.headers["Retry-After"]) > 0
    assert len(client.get("/v1/jobs", headers=H(ALICE)).json()) == 1  # the refused job is not stored
    # bob has his own cap (the default): alice's backlog does not stop him
    assert client.post("/v1/jobs", json={"jobs": [job("c", "dev", 6, {"cpu": 1})]}, headers=H(BOB)).status_code == 201
    # the loop starts alice's tasks: 4 of 6 run (hdrf: 8 CPUs, ads and dev 1:1), 2 stay pending
    svc.step()
    assert svc.store.pending_tasks("alice") == 2
    r = client.post("/v1/jobs", json={"jobs": [job("b", "ads", 6, {"cpu": 1})]}, headers=H(ALICE))
    assert r.status_code == 201, r.text  # 2 + 6 = 8 <= 10
    # a cancelled job's pending tasks leave the count
    (b,) = r.json()["ids"]
    assert svc.store.pending_tasks("alice") == 8
    assert client.post(f"/v1/jobs/{b}/cancel", headers=H(ALICE)).status_code == 200
    assert svc.store.pending_tasks("alice") == 2


def test_a_request_larger_than_the_cap_is_422_not_429(tmp_path):
    client, _, _ = make_api(tmp_path, alice_limits={"max_pending_tasks": 10})
    r = client.post("/v1/jobs", json={"jobs": [job("a", "ads", 11, {"cpu": 1})]}, headers=H(ALICE))
    assert r.status_code == 422, r.text  # retrying would never help
    assert fields(r) == ["jobs"]


def test_the_admin_has_no_limits(tmp_path):
    client, _, _ = make_api(tmp_path, limits={"max_pending_tasks": 1, "submit_rate": 1, "submit_burst": 1})
    for k in range(3):
        r = client.post("/v1/jobs", json={"jobs": [job(f"a{k}", "ads", 5, {"cpu": 1})]}, headers=H(ADMIN))
        assert r.status_code == 201, r.text


def test_over_the_submission_rate_is_429_with_retry_after(tmp_path):
    # 2 requests at once (burst), then 1 every 2 s (rate 0.5/s)
    client, _, _ = make_api(tmp_path, limits={"submit_rate": 0.5, "submit_burst": 2})
    for k in range(2):
        r = client.post("/v1/jobs", json={"jobs": [job(f"a{k}", "ads", 1, {"cpu": 1})]}, headers=H(ALICE))
        assert r.status_code == 201, r.text
    r = client.post("/v1/jobs", json={"jobs": [job("a2", "ads", 1, {"cpu": 1})]}, headers=H(ALICE))
    assert r.status_code == 429, r.text
    assert fields(r) == ["rate"]
    assert "0.5 request(s)/s" in r.json()["error"]["reason"]
    # no token left: one comes back after 1 / 0.5 = 2 s (less the few ms since the burst)
    assert r.headers["Retry-After"] == "2"
    # another tenant's bucket is its own
    assert client.post("/v1/jobs", json={"jobs": [job("b", "dev", 1, {"cpu": 1})]}, headers=H(BOB)).status_code == 201
    assert len(client.get("/v1/jobs", headers=H(ALICE)).json()) == 2


@pytest.mark.parametrize("steps, waits", [
    # rate 2/s, burst 3: three at t=0 pass, the fourth waits (1 - 0) / 2 = 0.5 s
    ([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.5]),
    # at t=0.25 the bucket has refilled 0.25 * 2 = 0.5 token: still 0.5 short -> 0.25 s
    ([0.0, 0.0, 0.0, 0.25], [0.0, 0.0, 0.0, 0.25]),
    # at t=0.5 one token is back: it passes; the next at 0.5 waits the full 0.5 s
    ([0.0, 0.0, 0.0, 0.5, 0.5], [0.0, 0.0, 0.0, 0.0, 0.5]),
    # a long quiet spell refills to the burst, never beyond: 3 pass, the fourth waits
    ([0.0, 100.0, 100.0, 100.0, 100.0], [0.0, 0.0, 0.0, 0.0, 0.5]),
])
def test_token_bucket_arithmetic(steps, waits):
    limiter = SubmitRateLimiter()
    limits = TenantLimits(submit_rate=2.0, submit_burst=3)
    assert [limiter.take("t", limits, now) for now in steps] == pytest.approx(waits)


@pytest.mark.parametrize("auth_limits, tenant_limits, field", [
    ({"submit_rate": 0}, None, "auth.limits.submit_rate"),
    ({"max_pending_tasks": 1.5}, None, "auth.limits.max_pending_tasks"),
    ({"burst": 3}, None, "auth.limits.burst"),
    ("fast", None, "auth.limits"),
    (None, {"submit_burst": -1}, "auth.tenants[0].limits.submit_burst"),
    (None, {"submit_rate": True}, "auth.tenants[0].limits.submit_rate"),
])
def test_bad_limits_in_the_config_name_the_field(auth_limits, tenant_limits, field):
    doc = config_doc()
    if auth_limits is not None:
        doc["auth"]["limits"] = auth_limits
    if tenant_limits is not None:
        doc["auth"]["tenants"][0]["limits"] = tenant_limits
    with pytest.raises(ScenarioError) as info:
        parse_config(doc, "cluster.yaml")
    assert field in info.value.paths


def test_limits_default_then_tenant_override():
    doc = config_doc()
    doc["auth"]["limits"] = {"submit_rate": 5}
    doc["auth"]["tenants"][0]["limits"] = {"max_pending_tasks": 7}
    auth = parse_config(doc).auth
    assert auth.limits_of("alice") == TenantLimits(max_pending_tasks=7, submit_rate=5.0,
                                                   submit_burst=DEFAULT_LIMITS.submit_burst)
    assert auth.limits_of("bob") == TenantLimits(max_pending_tasks=DEFAULT_LIMITS.max_pending_tasks,
                                                 submit_rate=5.0, submit_burst=DEFAULT_LIMITS.submit_burst)
    assert auth.limits_of("admin") is None


@pytest.mark.parametrize("amount", ["Infinity", "-Infinity", "NaN", "1e400"])
def test_a_demand_that_is_not_finite_is_422(api, amount):
    client, _, _ = api
    # Python's JSON reader takes these literals (1e400 overflows to inf); none is a demand
    raw = ('{"jobs": [{"name": "a", "queue": "ads", "tasks": [{"demand": {"cpu": ' + amount + '}, "count": 1, '
           '"command": "true"}]}]}')
    r = client.post("/v1/jobs", content=raw.encode(), headers={**H(ALICE), "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert fields(r) == ["jobs[0].tasks[0].demand.cpu"]
    assert nothing_stored(client)


# --- the jobs-only loader the service validates submissions with ----------------------------
_CLUSTER = {"nodes": [{"name": "a", "capacity": {"cpu": 4, "memory": 8}, "attributes": {"zone": "x"}},
                      {"name": "b", "capacity": {"cpu": 2, "memory": 8, "gpu": 1}, "attributes": {"zone": "y"}}]}
_QUEUES = [{"name": "ads", "children": [{"name": "prod"}]}, {"name": "dev"}]
_JOB_LISTS = [
    [job("ok", "ads.prod", 3, {"cpu": 1, "memory": 2}), job("gpu", "dev", 1, {"cpu": 1, "gpu": 1})],
    [{"tasks": [{"demand": {"cpu": 1}, "count": 2, "class": "c1"}, {"demand": {"gpu": 0.5}, "count": 1}]}],
    [job("pinned", "dev", 1, {"cpu": 1}, constraints={"zone": ["y"]})],
    [job("nowhere", "dev", 1, {"cpu": 1}, constraints={"zone": "z"})],
    [job("big", "dev", 1, {"cpu": 5})],
    [job("unknown-res", "dev", 1, {"cpu": 1, "tpu": 1})],
    [job("no-such-queue", "ops", 1, {"cpu": 1})],
    [job("neg", "dev", -1, {"cpu": -1})],
    [job("twice", "dev", 1, {"cpu": 1}), job("twice", "dev", 1, {"cpu": 1})],
    [{"name": "w", "queue": "dev", "weight": 0, "tasks": [{"demand": {"cpu": 1}, "count": 1}]}],
    [{"name": "no-tasks", "queue": "dev"}, "not a job", {"name": "extra", "tasks": [], "colour": "red"}],
    [{"name": 7, "queue": ["dev"], "tasks": [{"demand": "cpu", "count": "x", "duration": {"kind": "?"}}]}],
]


@pytest.mark.parametrize("jobs", _JOB_LISTS, ids=range(len(_JOB_LISTS)))
def test_parse_jobs_on_matches_the_whole_scenario_parse(jobs):
    """``parse_jobs_on`` (what each submission is checked with) builds the jobs, or finds
    the problems, that ``parse_scenario`` finds in a whole document of the same cluster,
    queues and jobs."""
    from fairshare.model.loader import parse_jobs_on, parse_scenario

    resources = ("cpu", "memory", "gpu")
    doc = {"resources": list(resources), "cluster": _CLUSTER, "queues": _QUEUES, "jobs": jobs}
    try:
        whole = parse_scenario(doc, "s")
        expected = ("ok", whole.jobs)
    except ScenarioError as exc:
        expected = ("refused", sorted((e.path, e.reason) for e in exc.errors))
    base = parse_scenario({**doc, "jobs": []}, "s")
    try:
        got = ("ok", parse_jobs_on(jobs, resources, base.cluster.nodes, set(base.queues.paths), "s"))
    except ScenarioError as exc:
        got = ("refused", sorted((e.path, e.reason) for e in exc.errors))
    assert got == expected
