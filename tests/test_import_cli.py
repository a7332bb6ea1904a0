"""``fairshare import KIND FILE... -o SCENARIO``: the command around the importers.

It writes a scenario the loader accepts (and nothing at all on an error), prints a summary,
each unsupported setting as ``warning: PATH: message`` on stderr (``--strict``: an error),
and refuses bad input with the file, the field and the reason, exit status 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fairshare.cli import build_parser, main
from fairshare.model import load_scenario

HADOOP = Path(__file__).parent / "data" / "peers" / "hadoop"
DOCS_EXAMPLE = str(HADOOP / "fair-scheduler-docs-example.xml")
CS_WEBSERVICES = str(HADOOP / "capacity-scheduler-webservices-test.xml")
CLUSTER = "cpu=1000,memory=1000"  # memory in GiB (1024000 MB / 1024)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_import_writes_a_scenario_that_loads_and_prints_a_summary(tmp_path, capsys):
    out_file = tmp_path / "cs.yaml"
    status, out, err = run(capsys, "import", "yarn-capacity", CS_WEBSERVICES, "--cluster", CLUSTER,
                           "-o", str(out_file), "--policy", "hdrf")
    assert status == 0, err
    scenario = load_scenario(out_file)
    assert set(scenario.queues.paths) >= {"a", "a.a1.a1a", "b.b3", "c"}
    assert scenario.jobs == ()
    assert "queues: 11 (8 leaves)" in out
    assert "baseline policy: capacity" in out
    assert "--policies capacity,hdrf" in out
    # every unsupported setting on stderr, by path
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 10 and "warning: root.a.a1.user-limit-factor: " in err


def test_strict_makes_unsupported_settings_an_error_and_writes_nothing(tmp_path, capsys):
    out_file = tmp_path / "fair.yaml"
    status, out, err = run(capsys, "import", "yarn-fair", DOCS_EXAMPLE, "--cluster", CLUSTER, "-o", str(out_file),
                           "--strict")
    assert status == 2
    assert "warning: root.sample_queue.maxRunningApps:" in err
    assert "--strict: 10 setting(s)" in err
    assert not out_file.exists() and out == ""


def test_nodes_from_a_node_list_or_a_scenario_and_jobs_from_a_scenario(tmp_path, capsys):
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump([{"name": "n", "count": 4, "capacity": {"cpu": 250, "memory": 250}}]))
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"cluster": {"capacity": {"cpu": 1}},
                                "jobs": [{"name": "j", "queue": "a.a2", "tasks": [{"demand": {"cpu": 1}}]}]}))
    out_file = tmp_path / "cs.json"
    status, _out, err = run(capsys, "import", "yarn-capacity", CS_WEBSERVICES, "--nodes", str(nodes),
                            "--jobs", str(jobs), "-o", str(out_file), "--quiet")
    assert status == 0, err
    doc = json.loads(out_file.read_text())
    assert doc["cluster"] == {"nodes": [{"name": "n", "count": 4, "capacity": {"cpu": 250, "memory": 250}}]}
    assert doc["jobs"][0]["queue"] == "a.a2"
    # the 4 nodes pool to 1000 vcores and 1000 GiB: a's guarantee is 10.5% of them
    assert doc["queues"][0]["guarantee"]["cpu"] == pytest.approx(105)
    # a scenario file as --nodes: its cluster
    again = tmp_path / "again.yaml"
    status, _out, err = run(capsys, "import", "yarn-capacity", CS_WEBSERVICES, "--nodes", str(out_file),
                            "-o", str(again), "--quiet")
    assert status == 0, err
    assert load_scenario(again).queues["a"].guarantee == (("cpu", pytest.approx(105)),
                                                          ("memory", pytest.approx(105)))  # 10.5% of 1000 GiB


@pytest.mark.parametrize("args, message", [
    (["--cluster", "cpu96"], "--cluster: 'cpu96' is not RES=AMOUNT"),
    (["--cluster", "cpu=-1,memory=4"], "--cluster: cpu: must be a finite number >= 0"),
    (["--cluster", "cpu=8"], "root.a.capacity.memory: the cluster has no memory"),  # the file names memory
])
def test_bad_cluster_options_are_refused(tmp_path, capsys, args, message):
    xml = tmp_path / "cs.xml"
    xml.write_text("<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a</value>"
                   "</property><property><name>yarn.scheduler.capacity.root.a.capacity</name>"
                   "<value>[memory=10,vcores=1]</value></property></configuration>")
    out_file = tmp_path / "out.yaml"
    status, _out, err = run(capsys, "import", "yarn-capacity", str(xml), *args, "-o", str(out_file))
    assert status == 2 and message in err
    assert not out_file.exists()


def test_a_bad_file_names_the_file_and_field_and_writes_nothing(tmp_path, capsys):
    xml = tmp_path / "fair-scheduler.xml"
    xml.write_text("<allocations><queue name='a'><weight>-2</weight></queue></allocations>")
    out_file = tmp_path / "out.yaml"
    status, out, err = run(capsys, "import", "yarn-fair", str(xml), "--cluster", CLUSTER, "-o", str(out_file))
    assert status == 2
    assert f"fairshare: error: {xml}: root.a.weight: must be a finite number >= 0" in err
    assert not out_file.exists() and out == ""


def test_a_resource_the_cluster_lacks_and_jobs_that_do_not_load_are_refused(tmp_path, capsys):
    xml = tmp_path / "fair-scheduler.xml"
    xml.write_text("<allocations><queue name='a'><maxResources>vcores=2, yarn.io/gpu=1</maxResources></queue>"
                   "</allocations>")
    out_file = tmp_path / "out.yaml"
    status, _out, err = run(capsys, "import", "yarn-fair", str(xml), "--cluster", CLUSTER, "-o", str(out_file))
    assert status == 2 and "names gpu, which the cluster does not have" in err
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(yaml.safe_dump({"jobs": [{"name": "j", "queue": "nowhere", "tasks": [{"demand": {"cpu": 1}}]}]}))
    status, _out, err = run(capsys, "import", "yarn-capacity", CS_WEBSERVICES, "--cluster", CLUSTER,
                            "--jobs", str(jobs), "-o", str(out_file))
    assert status == 2 and "does not load" in err and "jobs[0].queue" in err
    assert not out_file.exists()


def test_the_cluster_option_is_required_and_the_kinds_are_listed(capsys):
    assert main(["import", "yarn-fair", DOCS_EXAMPLE, "-o", "x.yaml"]) == 2
    assert "one of the arguments --nodes --cluster is required" in capsys.readouterr().err
    assert main(["import", "yarn-fir", DOCS_EXAMPLE]) == 2
    assert "did you mean 'yarn-fair'?" in capsys.readouterr().err


def test_completion_offers_import_and_its_kinds():
    from fairshare.completion import _walk

    tree: dict = {}
    _walk(build_parser(), (), tree)
    assert "import" in tree[""][2]
    assert {"yarn-fair", "yarn-capacity"} <= set(tree["import"][2])
    assert {"--nodes", "--cluster", "--jobs", "--strict", "--policy"} <= set(tree["import yarn-fair"][0])
