"""The ``fairshare`` command line (contract: "Package and command", ``allocate``, ``audit``).

Most cases run the CLI in-process through ``main([...])``; a few run ``python -m
fairshare`` as a subprocess to check the real entry point, exit status and streams.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from fairshare import __version__
from fairshare.cli import main
from fairshare.policies import REGISTRY

REL = 1e-9

# DRF Sec. 4.1: 9 CPUs and 18 GB; user A runs tasks of <1 CPU, 4 GB>, user B <3 CPU, 1 GB>.
# A's dominant resource is memory (4/18 = 2/9 per task), B's is CPU (3/9 = 1/3 per task).
# DRF equalises dominant shares: with x tasks of A and y of B,
#   max (x, y)  s.t.  x + 3y <= 9 (cpu),  4x + y <= 18 (memory),  2x/9 = y/3
# gives x = 3, y = 2: A holds <3 CPU, 12 GB>, B <6 CPU, 2 GB>, both dominant shares
# 12/18 = 6/9 = 2/3; CPU is used up (3 + 6 = 9), memory 14/18 = 0.7778.
DRF_EXAMPLE = """\
cluster:
  capacity: {cpu: 9, memory: 18}
jobs:
  - name: A
    tasks: [{demand: {cpu: 1, memory: 4}}]
  - name: B
    tasks: [{demand: {cpu: 3, memory: 1}}]
"""

# A small hierarchy with a multiclass job, for the table layout.
HIERARCHY = """\
resources: [cpu, memory]
cluster:
  nodes:
    - {name: big, count: 2, capacity: {cpu: 8, memory: 32}}
queues:
  - name: ads
    weight: 3
    children:
      - {name: prod, weight: 2}
  - name: dev
jobs:
  - name: etl
    queue: ads.prod
    tasks:
      - {class: map, demand: {cpu: 1, memory: 2}, count: 10}
      - {class: reduce, demand: {cpu: 2, memory: 4}, count: 5}
  - name: notebook
    queue: dev
    tasks: [{demand: {cpu: 1, memory: 8}}]
"""


@pytest.fixture
def drf_file(tmp_path: Path) -> Path:
    path = tmp_path / "drf.yaml"
    path.write_text(DRF_EXAMPLE)
    return path


@pytest.fixture
def tree_file(tmp_path: Path) -> Path:
    path = tmp_path / "tree.yaml"
    path.write_text(HIERARCHY)
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv) -> dict:
    code, out, err = run(capsys, *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


# --- allocate: the JSON shape of the contract ------------------------------------------------

def test_allocate_json_shape_drf_example(capsys, drf_file):
    doc = run_json(capsys, "allocate", drf_file, "--policy", "drf")
    # keys in the contract's order (a stable order, not sorted)
    assert list(doc) == ["policy", "mode", "resources", "capacity", "jobs", "queues", "utilization"]
    assert doc["policy"] == "drf" and doc["mode"] == "divisible"
    assert doc["resources"] == ["cpu", "memory"]
    assert doc["capacity"] == {"cpu": 9.0, "memory": 18.0}
    assert list(doc["jobs"]) == ["A", "B"]
    for job in doc["jobs"].values():
        assert list(job) == ["tasks", "tasks_by_class", "allocation", "dominant_share"]
        assert list(job["allocation"]) == ["cpu", "memory"]
        assert all(isinstance(v, float) for v in job["allocation"].values())
    assert doc["queues"] == {}  # no queues in the file: `queues` lists none (never the root)


@pytest.mark.parametrize("job, tasks, allocation, share", [
    ("A", 3.0, {"cpu": 3.0, "memory": 12.0}, 2 / 3),  # 3 x <1, 4>; 12/18
    ("B", 2.0, {"cpu": 6.0, "memory": 2.0}, 2 / 3),   # 2 x <3, 1>; 6/9
])
def test_allocate_drf_example_numbers(capsys, drf_file, job, tasks, allocation, share):
    doc = run_json(capsys, "allocate", drf_file, "--policy", "drf")
    got = doc["jobs"][job]
    assert got["tasks"] == pytest.approx(tasks, rel=REL)
    assert got["tasks_by_class"] == {"main": pytest.approx(tasks, rel=REL)}
    assert got["allocation"] == {r: pytest.approx(v, rel=REL) for r, v in allocation.items()}
    assert got["dominant_share"] == pytest.approx(share, rel=REL)
    # cpu: (3 + 6) / 9 = 1; memory: (12 + 2) / 18 = 7/9
    assert doc["utilization"] == {"cpu": pytest.approx(1.0, rel=REL), "memory": pytest.approx(14 / 18, rel=REL)}


def test_json_keeps_every_digit(capsys, drf_file):
    # 14/18 = 0.777...: JSON is not rounded (the table is).
    code, out, _ = run(capsys, "allocate", drf_file, "--policy", "drf", "--format", "json")
    assert code == 0
    assert '"memory": 0.7777777777777778' in out
    assert out.startswith("{\n  \"policy\"")  # indented by 2


def test_respect_counts_caps_jobs(capsys, tmp_path):
    # A may run 1 task only: A holds <1, 4>; B grows until CPU runs out:
    # y = (9 - 1) / 3 = 8/3 tasks (memory 4 + 8/3 = 6.67 <= 18 is not binding).
    path = tmp_path / "counts.yaml"
    path.write_text(DRF_EXAMPLE.replace("tasks: [{demand: {cpu: 1, memory: 4}}]",
                                        "tasks: [{demand: {cpu: 1, memory: 4}, count: 1}]"))
    doc = run_json(capsys, "allocate", path, "--policy", "drf", "--respect-counts")
    assert doc["jobs"]["A"]["tasks"] == pytest.approx(1.0, rel=REL)
    assert doc["jobs"]["B"]["tasks"] == pytest.approx(8 / 3, rel=REL)


def test_allocate_discrete_has_placement(capsys, drf_file):
    # The whole-task DRF of Sec. 6.2 reaches the same 3 + 2 tasks on the one pooled node.
    doc = run_json(capsys, "allocate", drf_file, "--policy", "drf", "--discrete")
    assert doc["mode"] == "discrete"
    assert doc["placement"] == {"pool": {"A": {"main": 3}, "B": {"main": 2}}}


def test_queues_listed_by_dotted_path(capsys, tree_file):
    doc = run_json(capsys, "allocate", tree_file, "--policy", "hdrf")
    assert list(doc["queues"]) == ["ads", "ads.prod", "dev"]
    assert list(doc["jobs"]["etl"]["tasks_by_class"]) == ["map", "reduce"]


# --- allocate: the table ------------------------------------------------------------------------

def test_table_has_header_and_job_rows(capsys, drf_file):
    code, out, err = run(capsys, "allocate", drf_file, "--policy", "drf")
    assert code == 0, err
    assert "policy:    drf" in out and "divisible" in out and "cpu 9, memory 18" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    # name, weight, tasks, cpu, memory, dominant share
    assert rows["A"] == ["A", "1", "3", "3", "12", "66.67%"]
    assert rows["B"] == ["B", "1", "2", "6", "2", "66.67%"]
    assert rows["utilization"] == ["utilization", "100.00%", "77.78%"]


def test_table_tree_order_indent_and_classes(capsys, tree_file):
    code, out, err = run(capsys, "allocate", tree_file, "--policy", "hdrf", "--discrete")
    assert code == 0, err
    header, shares, placement = out.split("\n\n")[:3]  # header, share table, placement table
    lines = shares.splitlines()
    names = [ln.split()[0] for ln in lines[2:]]  # below the column titles and the rule
    # queue, then (indented) its jobs or child queues; multiclass rows per class
    for expected in ("ads", "prod", "etl", "[map]", "[reduce]", "dev", "notebook"):
        assert expected in names
    assert names.index("ads") < names.index("prod") < names.index("etl") < names.index("[map]")
    assert names.index("dev") < names.index("notebook")
    indent = {ln.split()[0]: len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()}
    assert indent["ads"] == 0 and indent["prod"] == 2 and indent["etl"] == 4 and indent["[map]"] == 6
    assert placement.startswith("placement (whole tasks per node)")
    assert any(ln.startswith("big-0") for ln in placement.splitlines())


# --- the bundled default scenario ---------------------------------------------------------------

def test_default_scenario_dff(capsys):
    doc = run_json(capsys, "allocate", "default", "--policy", "dff")
    assert doc["resources"] == ["cpu", "memory", "mic"]
    # DFF Sec. 4.1: 7 nodes x <48 threads, 136 GB, 3 MIC>
    assert doc["capacity"] == {"cpu": 336.0, "memory": 952.0, "mic": 21.0}
    assert list(doc["jobs"]) == ["job1", "job2", "job3", "job4", "job5"]
    assert list(doc["queues"]) == ["n1", "n2", "n3", "n4"]
    for res, used in doc["utilization"].items():
        assert 0.0 <= used <= 1.0 + REL, res


@pytest.mark.parametrize("argv", [
    ["allocate", "default", "--policy", "drf"],
    ["allocate", "default", "--policy", "hdrf", "--discrete"],
    ["allocate", "default", "--policy", "hdrf", "--no-rescale", "--no-ignore-blocked"],
    ["allocate", "default", "--policy", "cpu", "--resource", "mic"],
])
def test_default_scenario_table(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    for job in ("job1", "job2", "job3", "job4", "job5"):
        assert f"  {job} " in out


# --- other commands -----------------------------------------------------------------------------

def test_policies_lists_registry(capsys):
    code, out, _ = run(capsys, "policies")
    assert code == 0
    lines = out.splitlines()
    assert [ln.split()[0] for ln in lines] == list(REGISTRY)
    for ln, cls in zip(lines, REGISTRY.values()):
        assert cls.citation in ln


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_policy_options_are_the_constructor_arguments(name):
    # The CLI builds its policy flags from Policy.options: each policy declares exactly its
    # constructor arguments, so every argument has a flag and every flag reaches one.
    cls = REGISTRY[name]
    params = set(inspect.signature(cls).parameters)
    assert {option.param for option in cls.options} == params


def test_policy_flags_come_from_the_declarations(capsys):
    code, out, _ = run(capsys, "simulate", "--help")
    assert code == 0
    for cls in REGISTRY.values():
        for option in cls.options:
            assert option.flag in out
    # a flag shared by no other policy names its one policy in the help
    assert "slots: slots per node" in " ".join(out.split())


@pytest.mark.parametrize("argv", [
    ("allocate", "default", "--policy", "cpu", "--resource", "gpuX"),
    ("simulate", "default", "--policy", "cpu", "--resource", "gpuX"),
    ("compare", "default", "--policies", "cpu,drf", "--resource", "gpuX"),
])
def test_a_resource_option_names_a_resource_of_the_scenario(capsys, tmp_path, argv):
    # cpu declares --resource as naming a resource; the CLI checks it before any work
    extra = () if argv[0] == "allocate" else ("--out", str(tmp_path / "out"))
    code, _, err = run(capsys, *argv, *extra)
    assert code == 2
    assert "--resource: 'gpuX' is not a resource of this scenario (resources: cpu, memory, mic)" in err
    assert not (tmp_path / "out").exists()


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"fairshare {__version__}"


@pytest.fixture
def fake_audit(monkeypatch):
    """A stand-in for fairshare.audit (checks the CLI's wiring, not the audit itself)."""
    calls = []

    class Report:
        def to_json(self):
            return {"policy": calls[-1]["policy"], "properties": {"envy_freeness": {"holds": True, "witness": None}}}

        def format_table(self):
            return "property  holds\nenvy_freeness  yes"

    def audit(scenario, policy, *, respect_counts=False, discrete=False, max_jobs_searched=None):
        calls.append({"policy": policy, "respect_counts": respect_counts, "discrete": discrete,
                      "max_jobs_searched": max_jobs_searched, "jobs": [j.name for j in scenario.jobs]})
        return Report()

    module = types.ModuleType("fairshare.audit")
    module.audit = audit
    monkeypatch.setitem(sys.modules, "fairshare.audit", module)
    return calls


def test_audit_wiring(capsys, drf_file, fake_audit):
    doc = run_json(capsys, "audit", drf_file, "--policy", "asset", "--max-jobs-searched", "3", "--discrete")
    assert doc == {"policy": "asset", "properties": {"envy_freeness": {"holds": True, "witness": None}}}
    assert fake_audit[-1] == {"policy": "asset", "respect_counts": False, "discrete": True,
                              "max_jobs_searched": 3, "jobs": ["A", "B"]}
    code, out, _ = run(capsys, "audit", "default", "--policy", "hdrf")
    assert code == 0 and "envy_freeness" in out and out.endswith("\n")


CONTRACT_PROPERTIES = {"sharing_incentive", "envy_freeness", "pareto_efficiency", "bottleneck_fairness",
                       "strategy_proofness", "hierarchical_share_guarantee", "population_monotonicity"}


def test_audit_real_json_shape(capsys, drf_file):
    pytest.importorskip("fairshare.audit")
    doc = run_json(capsys, "audit", drf_file, "--policy", "drf")
    assert doc["policy"] == "drf"
    assert set(doc["properties"]) <= CONTRACT_PROPERTIES and doc["properties"]
    for verdict in doc["properties"].values():
        assert verdict["holds"] in (True, False, None) and "witness" in verdict


def test_audit_mode_error_exit_2(capsys, drf_file):
    pytest.importorskip("fairshare.audit")
    code, out, err = run(capsys, "audit", drf_file, "--policy", "timefair")
    assert code == 2 and out == "" and "--policy timefair" in err and "Traceback" not in err


def test_audit_unknown_policy_before_work(capsys, drf_file, fake_audit):
    code, _, err = run(capsys, "audit", drf_file, "--policy", "nope")
    assert code == 2 and "--policy" in err and fake_audit == []


# --- user errors: exit 2, the flag or field named, no traceback --------------------------------

@pytest.mark.parametrize("extra, needle", [
    (["--policy", "nope"], "--policy"),
    (["--policy", "drf", "--no-rescale"], "--no-rescale"),
    (["--policy", "dff", "--no-ignore-blocked"], "--no-ignore-blocked"),
    (["--policy", "drf", "--slots", "4"], "--slots"),
    (["--policy", "hdrf", "--resource", "cpu"], "--resource"),
    (["--policy", "cpu", "--resource", "gpu"], "--resource"),
    (["--policy", "timefair"], "--policy timefair"),      # online only: no static allocation
    (["--policy", "slots", "--slots", "2"], "--policy slots"),
])
def test_policy_errors_exit_2(capsys, drf_file, extra, needle):
    code, out, err = run(capsys, "allocate", drf_file, *extra)
    assert code == 2
    assert needle in err
    assert out == "" and "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ["allocate"],                                             # no scenario
    ["allocate", "x.yaml"],                                   # no --policy
    ["allocate", "x.yaml", "--policy", "drf", "--format", "xml"],
    ["allocate", "x.yaml", "--policy", "slots", "--slots", "0"],
    ["nonsense"],
    [],
])
def test_usage_errors_exit_2(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2 and "Traceback" not in err


def test_scenario_errors_name_file_and_field(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(DRF_EXAMPLE.replace("memory: 4}", "memory: -4}"))
    code, out, err = run(capsys, "allocate", bad, "--policy", "drf")
    assert code == 2 and out == ""
    assert f"{bad}: jobs[0] (A).tasks[0].demand.memory: " in err
    assert "Traceback" not in err


# --- internal errors: exit 1, "please report", traceback only with FAIRSHARE_DEBUG=1 ------------

def test_internal_error(capsys, monkeypatch, drf_file):
    import fairshare.api

    def boom(*args, **kwargs):
        raise RuntimeError("invariant broken")

    monkeypatch.setattr(fairshare.api, "allocate", boom)
    monkeypatch.delenv("FAIRSHARE_DEBUG", raising=False)
    code, _, err = run(capsys, "allocate", drf_file, "--policy", "drf")
    assert code == 1 and "please report" in err and "invariant broken" in err
    assert "Traceback" not in err
    monkeypatch.setenv("FAIRSHARE_DEBUG", "1")
    code, _, err = run(capsys, "allocate", drf_file, "--policy", "drf")
    assert code == 1 and "Traceback" in err


# --- the real entry point, as a subprocess --------------------------------------------------------

def _python_m(*argv, env_extra=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FAIRSHARE_DEBUG"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "fairshare", *map(str, argv)], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.mark.parametrize("argv, status, stream, needle", [
    (["allocate", "{drf}", "--policy", "drf", "--format", "json"], 0, "stdout", '"dominant_share": 0.6666666666666666'),
    (["allocate", "default", "--policy", "dff"], 0, "stdout", "job5"),
    (["allocate", "{bad}", "--policy", "drf"], 2, "stderr", "jobs[1] (B).tasks[0].demand.gpu"),
    (["allocate", "{drf}", "--policy", "drf", "--no-rescale"], 2, "stderr", "--no-rescale"),
    (["policies"], 0, "stdout", "dff"),
])
def test_subprocess(tmp_path, argv, status, stream, needle):
    drf = tmp_path / "drf.yaml"
    drf.write_text(DRF_EXAMPLE)
    bad = tmp_path / "bad.yaml"
    bad.write_text(DRF_EXAMPLE.replace("cpu: 3, memory: 1", "cpu: 3, gpu: 1"))
    argv = [a.format(drf=drf, bad=bad) for a in argv]
    proc = _python_m(*argv)
    assert proc.returncode == status, proc.stderr
    assert needle in getattr(proc, stream)
    assert "Traceback" not in proc.stderr
    if argv[-1] == "json":
        json.loads(proc.stdout)


@pytest.mark.parametrize("argv, accepted", [
    (["allocate", "default", "--policy", "slowdown", "--mix", "max-usage", "--format", "json"], True),
    (["allocate", "default", "--policy", "slowdown", "--time-limit", "5", "--format", "json"], True),
    (["allocate", "default", "--policy", "drf", "--mix", "max-usage"], False),  # not a drf option
    (["allocate", "default", "--policy", "slowdown", "--time-limit", "0"], False),  # must be > 0
    (["allocate", "default", "--policy", "hdrf", "--window", "100"], False),  # timefair only
])
def test_policy_specific_flags(argv, accepted, capsys):
    from fairshare.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse rejects bad values itself, with exit 2
        code = exc.code
    assert (code == 0) == accepted
    if not accepted:
        assert code == 2


@pytest.mark.parametrize("argv, hint", [
    (["simulat", "default"], "invalid choice: 'simulat'"),  # a mistyped command
    (["simulate", "default", "--policy", "drf", "--out", "x", "--placement", "frist-fit"],
     "invalid choice: 'frist-fit'"),
])
def test_a_mistyped_choice_gets_the_closest_one(capsys, argv, hint):
    assert main(argv) == 2  # (a usage error)
    err = capsys.readouterr().err
    assert hint in err
    closest = {"simulat": "simulate", "frist-fit": "first-fit"}[hint.split("'")[1]]
    assert err.rstrip().endswith(f"did you mean {closest!r}?"), err


@pytest.mark.parametrize("argv", [["allocate", "default", "--policy", "hdfr"],
                                  ["compare", "default", "--policies", "drf,hdfr", "--out", "unused"]])
def test_a_mistyped_policy_gets_the_closest_one(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "unknown policy 'hdfr' (did you mean 'hdrf'?); known policies: drf," in err


def test_no_suggestion_when_nothing_is_close(capsys):
    assert main(["allocate", "default", "--policy", "zzz"]) == 2
    err = capsys.readouterr().err
    assert "unknown policy 'zzz'; known policies" in err and "did you mean" not in err
    assert main(["zzzz"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'zzzz'" in err and "did you mean" not in err
