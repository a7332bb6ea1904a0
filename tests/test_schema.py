"""The JSON Schemas (``fairshare schema scenario|config|jobs``) against the loaders, and
the API against the scenario loader: one description of each document
(``model.schema``), one validation (the loader).

* every bundled example passes both the schema and the loader;
* a table of bad documents (unknown key, wrong type, negative amount, unknown enum value,
  missing field) is refused by both, each naming the field;
* generated bad documents (one field of a bundled example replaced, removed or joined by
  an unknown key): the schema never refuses what the loader accepts, and every field the
  schema names is one the loader names too (the loader also makes the checks a schema
  cannot: resources known, tasks that fit, queues that exist);
* the same generated job files through ``POST /v1/jobs`` and through the scenario loader
  (the CLI's path): the API refuses every field the loader refuses, and nothing more but
  what the job file's schema refuses (the live service's own fields: command, count,
  limits).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import DELETE, changed
from fairshare.cli import main
from fairshare.live.config import CONFIG, JOBS, load_config, parse_config, parse_jobs, request_problems
from fairshare.model.errors import ScenarioError
from fairshare.model.loader import parse_scenario
from fairshare.model.schema import SCENARIO, json_schema

ROOT = Path(__file__).resolve().parent.parent
LIVE_CONFIG = ROOT / "examples/live/cluster.yaml"
SCENARIOS = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/repro/*.yaml"),
                    *ROOT.glob("src/fairshare/data/*.yaml")])
EXAMPLES = [("scenario", p) for p in SCENARIOS] + [("config", LIVE_CONFIG)] + \
           [("jobs", p) for p in sorted(ROOT.glob("examples/live/*.yaml")) if p != LIVE_CONFIG]
DOCUMENTS = {"scenario": SCENARIO, "config": CONFIG, "jobs": JOBS}


def read(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# --- the two verdicts, as lists of field paths ([] accepted) -----------------------------------

_VALIDATORS: dict[str, jsonschema.Draft202012Validator] = {}


def validator(kind: str) -> jsonschema.Draft202012Validator:
    if kind not in _VALIDATORS:
        schema = json_schema(DOCUMENTS[kind])
        jsonschema.Draft202012Validator.check_schema(schema)
        _VALIDATORS[kind] = jsonschema.Draft202012Validator(schema)
    return _VALIDATORS[kind]


def _join(path: str, key) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def schema_paths(kind: str, doc) -> list[str]:
    """The fields the schema refuses, named as the loader names them
    (``jobs[0].tasks[0].demand.cpu``); an unknown or missing key named by itself."""
    return _named(validator(kind).iter_errors(doc))


def _named(errors) -> list[str]:
    out = []
    for err in errors:
        if err.validator == "anyOf":
            # when one option only is of the value's type (a mapping given for a nullable
            # mapping), the fields that option refuses; else the value itself
            within = [e for e in err.context if e.validator != "type"]
            if len({e.schema_path[0] for e in within}) == 1:
                out += _named(within)
                continue
        path = ""
        for key in err.absolute_path:
            path = _join(path, key)
        if err.validator == "additionalProperties" and err.validator_value is False:
            out += [_join(path, k) for k in err.instance if k not in err.schema.get("properties", {})]
        elif err.validator == "required":
            out += [_join(path, k) for k in err.validator_value if k not in err.instance]
        else:
            out.append(path)
    return out


_LIVE = None


def live_config():
    global _LIVE
    if _LIVE is None:
        _LIVE = load_config(LIVE_CONFIG)
    return _LIVE


def loader_paths(kind: str, doc) -> list[str]:
    """The fields the loader refuses: ``parse_scenario``, ``parse_config``, or for a job
    file what ``POST /v1/jobs`` runs (``request_problems``, then ``parse_jobs`` against
    the live example's nodes and queues)."""
    try:
        if kind == "scenario":
            parse_scenario(doc)
        elif kind == "config":
            parse_config(doc)
        else:
            problems = request_problems(doc)
            if problems:
                return [e.path for e in problems]
            cfg = live_config()
            parse_jobs(doc, cfg.resources, cfg.nodes, cfg.queues)
    except ScenarioError as exc:
        return exc.paths
    return []


def related(a: str, b: str) -> bool:
    """One path is the other or inside it (a schema names ``cluster`` where the loader
    names ``cluster.nodes``, or the reverse)."""
    def inside(x: str, y: str) -> bool:
        return x == y or y == "" or x.startswith(y + ".") or x.startswith(y + "[")
    return inside(a, b) or inside(b, a)


# --- the bundled examples ----------------------------------------------------------------------

@pytest.mark.parametrize("kind, path", EXAMPLES, ids=[f"{k}:{p.name}" for k, p in EXAMPLES])
def test_every_bundled_example_passes_the_schema_and_the_loader(kind, path):
    doc = read(path)
    assert schema_paths(kind, doc) == []
    assert loader_paths(kind, doc) == []


def test_the_examples_cover_each_document():
    assert {kind for kind, _ in EXAMPLES} == set(DOCUMENTS)
    assert len(SCENARIOS) >= 5


@pytest.mark.parametrize("kind", sorted(DOCUMENTS))
def test_cli_prints_the_schema(kind, capsys):
    assert main(["schema", kind]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert printed["additionalProperties"] is False
    assert printed["properties"] == json_schema(DOCUMENTS[kind])["properties"]
    jsonschema.Draft202012Validator.check_schema(printed)


def test_schema_carries_descriptions_and_enums():
    schema = json_schema(SCENARIO)
    queue = schema["$defs"]["Queue"]
    assert queue["properties"]["order"]["enum"] == ["fair", "fifo"]
    assert queue["properties"]["children"]["type"] == ["array", "null"]
    assert queue["properties"]["children"]["items"] == {"$ref": "#/$defs/Queue"}
    assert schema["$defs"]["Preemption"]["properties"]["rule"]["enum"] == ["loop-free", "naive"]
    assert all(spec.get("description") for spec in schema["$defs"]["Job"]["properties"].values())


# --- bad documents, each field named by both -------------------------------------------------------

BAD = [
    # (document, example, field, value, the field named)
    ("scenario", "examples/hierarchy.yaml", ("jobs", 0, "colour"), "red", "jobs[0].colour"),
    ("scenario", "examples/hierarchy.yaml", ("jobs", 0, "weight"), "heavy", "jobs[0].weight"),
    ("scenario", "examples/hierarchy.yaml", ("jobs", 0, "tasks", 0, "demand", "cpu"), -1,
     "jobs[0].tasks[0].demand.cpu"),
    ("scenario", "examples/hierarchy.yaml", ("jobs", 0, "tasks", 0, "count"), 1.5, "jobs[0].tasks[0].count"),
    ("scenario", "examples/hierarchy.yaml", ("jobs", 0, "tasks", 0, "demand"), DELETE, "jobs[0].tasks[0].demand"),
    ("scenario", "examples/hierarchy.yaml", ("queues", 0, "order"), "lifo", "queues[0].order"),
    ("scenario", "examples/hierarchy.yaml", ("queues", 0, "name"), "a.b", "queues[0].name"),
    ("scenario", "examples/preemption.yaml", ("preemption",), {"rule": "greedy"}, "preemption.rule"),
    ("scenario", "examples/preemption.yaml", ("preemption",), {"tolerance": 1}, "preemption.tolerance"),
    ("scenario", "examples/hierarchy.yaml", ("jobs", 0, "tasks", 0, "duration"), {"dist": "gamma", "k": 2},
     "jobs[0].tasks[0].duration.dist"),
    ("scenario", "examples/hierarchy.yaml", ("cluster",), DELETE, "cluster"),
    ("config", "examples/live/cluster.yaml", ("policy",), "drf", "policy"),
    ("config", "examples/live/cluster.yaml", ("cluster", "nodes", 0, "capacity", "cpu"), -4,
     "cluster.nodes[0].capacity.cpu"),
    ("config", "examples/live/cluster.yaml", ("auth", "tenants", 0, "queues"), [], "auth.tenants[0].queues"),
    ("config", "examples/live/cluster.yaml", ("auth", "tenants", 0, "token_sha256"), "abc",
     "auth.tenants[0].token_sha256"),
    ("config", "examples/live/cluster.yaml", ("auth",), DELETE, "auth"),
    ("jobs", "examples/live/alice.yaml", ("jobs", 0, "tasks", 0, "command"), DELETE, "jobs[0].tasks[0].command"),
    ("jobs", "examples/live/alice.yaml", ("jobs", 0, "tasks", 0, "count"), 200_000, "jobs[0].tasks[0].count"),
    ("jobs", "examples/live/alice.yaml", ("jobs", 0, "tasks", 0, "shell"), "yes", "jobs[0].tasks[0].shell"),
    ("jobs", "examples/live/alice.yaml", ("jobs", 0, "weight"), 1e9, "jobs[0].weight"),
    ("jobs", "examples/live/alice.yaml", ("jobs", 0, "tasks", 0, "demand", "memory"), -1,
     "jobs[0].tasks[0].demand.memory"),
    ("jobs", "examples/live/alice.yaml", ("jobs", 0, "deadline"), 3, "jobs[0].deadline"),
]


@pytest.mark.parametrize("kind, example, field, value, named", BAD, ids=[case[4] for case in BAD])
def test_bad_document_is_refused_by_both_naming_the_field(kind, example, field, value, named):
    doc = changed(read(ROOT / example), field, value)
    assert named in loader_paths(kind, doc)
    # (the schema names the field itself, or, for a value none of a union's options takes
    # such as a duration's unknown distribution, the value holding it)
    by_schema = schema_paths(kind, doc)
    assert named in by_schema or named.rsplit(".", 1)[0] in by_schema


# --- generated bad documents: the schema never stricter, never naming another field ----------------

BAD_VALUES = [-1, 0, 0.5, 1e7, True, "x", "a.b", "", None, [], {}, ["x"], {"x": 1}]
UNKNOWN_KEY = "colour"


def locations(doc, path=()):
    """Every field of a document (mapping values and list items), as key paths."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield (*path, key)
        yield from locations(value, (*path, key))


def mappings(doc, path=()):
    if isinstance(doc, dict):
        yield path
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield from mappings(value, (*path, key))


def mutated(example: Path):
    """A bundled example with one field replaced by a bad value, removed, or one mapping
    given an unknown key."""
    doc = read(example)
    fields = [f for f in locations(doc) if not (f[-1] == "count" and "cluster" in f)]  # (1e7 nodes: slow)
    replace = st.tuples(st.sampled_from(fields), st.sampled_from(BAD_VALUES + [DELETE]))
    extra = st.sampled_from(list(mappings(doc))).map(lambda m: ((*m, UNKNOWN_KEY), 1))
    return st.one_of(replace, extra).map(lambda change: changed(doc, *change))


def check_schema_against_loader(kind: str, doc) -> None:
    by_schema, by_loader = schema_paths(kind, doc), loader_paths(kind, doc)
    if not by_loader:
        assert not by_schema, f"the schema refuses {by_schema}, which the loader accepts"
    for path in by_schema:
        assert any(related(path, p) for p in by_loader), \
            f"the schema refuses {path!r}, the loader names only {by_loader}"


GENERATED = [("scenario", ROOT / "examples/preemption.yaml"), ("scenario", ROOT / "examples/hierarchy.yaml"),
             ("scenario", ROOT / "examples/dff_contended.yaml"), ("scenario", ROOT / "src/fairshare/data/default.yaml"),
             ("config", LIVE_CONFIG), ("jobs", ROOT / "examples/live/alice.yaml")]


@pytest.mark.parametrize("kind, example", GENERATED, ids=[f"{k}:{p.name}" for k, p in GENERATED])
def test_generated_bad_documents_get_the_same_verdict(kind, example):
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(mutated(example))
    def check(doc):
        check_schema_against_loader(kind, doc)

    check()


def test_too_many_jobs_in_one_file_is_refused_by_both(api):
    one = read(ROOT / "examples/live/alice.yaml")["jobs"][0]
    doc = {"jobs": [{**one, "name": f"j{i}"} for i in range(1001)]}  # (MAX_JOBS_PER_REQUEST + 1)
    assert "jobs" in schema_paths("jobs", doc)
    assert api_paths(api, doc) == ["jobs"]


def test_a_queue_change_event_is_checked_by_both():
    doc = read(ROOT / "examples/hierarchy.yaml")
    doc["events"] = [{"time": 10, "queue": {"name": "x..y", "weight": -2}}]
    check_schema_against_loader("scenario", doc)
    assert {"events[0].queue.name", "events[0].queue.weight"} <= set(schema_paths("scenario", doc))


# --- the API and the CLI's loader over the same job files -----------------------------------------

@pytest.fixture(scope="module")
def api(tmp_path_factory):
    from fairshare.live.api import create_app
    from fairshare.live.service import LiveService
    from fairshare.live.store import Store
    from live_helpers import ManualExecutor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    config = live_config()
    service = LiveService(config, Store(tmp_path_factory.mktemp("schema") / "fs.db"),
                          ManualExecutor(config.nodes), policy="hdrf")
    service.recover()
    return TestClient(create_app(service), raise_server_exceptions=False)


def api_paths(client, doc) -> list[str]:
    answer = client.post("/v1/jobs", json=doc, headers={"Authorization": "Bearer admin-demo-token"})
    if answer.status_code == 201:
        return []
    assert answer.status_code == 422, answer.text
    return [e["field"] for e in answer.json()["errors"]]


def scenario_paths(doc) -> list[str]:
    """The scenario loader's verdict (``fairshare simulate``) on these jobs on the live
    example's cluster and queues."""
    base = read(LIVE_CONFIG)
    scenario = {k: base[k] for k in ("resources", "cluster", "queues")}
    # (the job file's own shape, not a scenario's: its keys, a non-empty list of jobs)
    unknown = sorted(set(doc) - {"jobs"})
    if unknown or not doc.get("jobs"):
        return unknown or ["jobs"]
    scenario["jobs"] = doc["jobs"]
    try:
        parse_scenario(scenario)
    except ScenarioError as exc:
        return exc.paths
    return []


def check_api_against_loader(client, doc) -> None:
    by_api, by_loader, by_schema = api_paths(client, doc), scenario_paths(doc), schema_paths("jobs", doc)
    for path in by_loader:
        assert any(related(path, p) for p in by_api), f"the loader refuses {path!r}, the API names only {by_api}"
    for path in by_api:
        assert any(related(path, p) for p in by_loader + by_schema), \
            f"the API refuses {path!r}, which neither the loader nor the job file's schema refuses"
    if not by_api:
        assert not by_loader and not by_schema


@pytest.mark.parametrize("example", ["alice.yaml", "bob.yaml"])
def test_api_and_loader_accept_the_bundled_job_files(api, example):
    doc = read(ROOT / "examples/live" / example)
    assert api_paths(api, doc) == scenario_paths(doc) == []


def test_generated_job_files_get_the_same_verdict_from_the_api_and_the_loader(api):
    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(mutated(ROOT / "examples/live/alice.yaml"))
    def check(doc):
        check_api_against_loader(api, doc)

    check()


def test_openapi_request_schemas_are_the_job_files(api):
    document = api.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    rendered = json_schema(JOBS)
    assert schemas["SubmitIn"]["properties"]["jobs"]["maxItems"] == rendered["properties"]["jobs"]["maxItems"]
    assert schemas["LiveTaskClass"]["required"] == rendered["$defs"]["LiveTaskClass"]["required"]
    assert schemas["QueueAdd"]["properties"]["order"]["enum"] == ["fair", "fifo"]
