"""Bad inputs are rejected before any work: exit status 2, the file and the field path named.

Contract ("Scenario file"): each problem is reported "with a message naming the file, the
field (its path, e.g. jobs[3].tasks[0].demand.gpu) and the reason, no traceback, and exit
status 2". Tests assert the path, never the wording. Each error line has the shape
``FILE: PATH: REASON`` (``FILE: REASON`` for a problem with the file as a whole).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fairshare.cli import main

GOOD_JOB = "  - {name: A, tasks: [{demand: {cpu: 1, memory: 4}}]}\n"
POOLED = "cluster: {capacity: {cpu: 9, memory: 18}}\n"


def scenario(*, cluster: str = POOLED, jobs: str = "jobs:\n" + GOOD_JOB, extra: str = "") -> str:
    return extra + cluster + jobs


# (id, file text, file suffix, field paths that must be reported)
CASES = [
    ("negative demand",
     scenario(cluster="cluster: {capacity: {cpu: 9, gpu: 2}}\n",
              jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1, gpu: -1}}]}\n"),
     ".yaml", ["jobs[0].tasks[0].demand.gpu"]),
    ("non-finite demand (nan)",
     scenario(jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: .nan}}]}\n"),
     ".yaml", ["jobs[0].tasks[0].demand.cpu"]),
    ("non-finite capacity (inf)",
     scenario(cluster="cluster: {capacity: {cpu: .inf, memory: 18}}\n"),
     ".yaml", ["cluster.capacity.cpu"]),
    ("demand on a resource the cluster lacks",
     scenario(jobs="jobs:\n" + GOOD_JOB + "  - {name: B, tasks: [{demand: {cpu: 1, gpu: 1}}]}\n"),
     ".yaml", ["jobs[1].tasks[0].demand.gpu"]),
    ("task demanding nothing",
     scenario(jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 0, memory: 0}}]}\n"),
     ".yaml", ["jobs[0].tasks[0].demand"]),
    # Heterogeneous nodes: 2 CPU-only nodes (48 cpu) and one MIC node with 2 cpu. A task
    # <4 cpu, 1 mic> fits the pooled sum (100 cpu, 3 mic) but no single node.
    ("demand no node can hold",
     scenario(cluster="cluster:\n  nodes:\n"
                      "    - {name: cpu-node, count: 2, capacity: {cpu: 48}}\n"
                      "    - {name: mic-node, capacity: {cpu: 2, mic: 3}}\n",
              jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1}}]}\n"
                   "  - {name: B, tasks: [{demand: {cpu: 4, mic: 1}}]}\n"),
     ".yaml", ["jobs[1].tasks[0].demand"]),
    ("demand larger than the pooled capacity",
     scenario(jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 10}}]}\n"),
     ".yaml", ["jobs[0].tasks[0].demand"]),
    ("unknown queue",
     scenario(extra="queues: [{name: ads}]\n",
              jobs="jobs:\n  - {name: A, queue: ads.prod, tasks: [{demand: {cpu: 1}}]}\n"),
     ".yaml", ["jobs[0].queue"]),
    ("unknown top-level key",
     scenario(extra="colour: red\n"),
     ".yaml", ["colour"]),
    ("unknown job key",
     scenario(jobs="jobs:\n  - {name: A, colour: red, tasks: [{demand: {cpu: 1}}]}\n"),
     ".yaml", ["jobs[0].colour"]),
    ("unknown task key",
     scenario(jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1}, size: 3}]}\n"),
     ".yaml", ["jobs[0].tasks[0].size"]),
    ("wrong type: weight a string",
     scenario(jobs="jobs:\n  - {name: A, weight: heavy, tasks: [{demand: {cpu: 1}}]}\n"),
     ".yaml", ["jobs[0].weight"]),
    ("wrong type: capacity a list",
     scenario(cluster="cluster: {capacity: [9, 18]}\n"),
     ".yaml", ["cluster.capacity"]),
    ("wrong type: count a fraction",
     scenario(jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1}, count: 2.5}]}\n"),
     ".yaml", ["jobs[0].tasks[0].count"]),
    ("duplicate job name",
     scenario(jobs="jobs:\n" + GOOD_JOB + GOOD_JOB),
     ".yaml", ["jobs[1].name"]),
    ("duplicate queue name",
     scenario(extra="queues: [{name: ads}, {name: dev}, {name: ads}]\n"),
     ".yaml", ["queues[2].name"]),
    ("duplicate child queue name",
     scenario(extra="queues: [{name: ads, children: [{name: prod}, {name: prod}]}]\n"),
     ".yaml", ["queues[0].children[1].name"]),
    ("duplicate node name",
     scenario(cluster="cluster:\n  nodes:\n    - {name: n, capacity: {cpu: 8}}\n    - {name: n, capacity: {cpu: 8}}\n",
              jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1}}]}\n"),
     ".yaml", ["cluster.nodes[1].name"]),
    ("node name clashes with a counted entry's expansion",  # count 2 names them n-0, n-1
     scenario(cluster="cluster:\n  nodes:\n    - {name: n, count: 2, capacity: {cpu: 8}}\n"
                      "    - {name: n-1, capacity: {cpu: 8}}\n",
              jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1}}]}\n"),
     ".yaml", ["cluster.nodes[1].name"]),
    ("empty cluster (all zero)",
     scenario(cluster="cluster: {capacity: {cpu: 0, memory: 0}}\n"),
     ".yaml", ["cluster.capacity"]),
    ("empty cluster (nodes all zero)",
     scenario(cluster="cluster:\n  nodes: [{name: n, count: 3, capacity: {cpu: 0}}]\n",
              jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1}}]}\n"),
     ".yaml", ["cluster.nodes"]),
    ("missing cluster",
     "jobs:\n" + GOOD_JOB,
     ".yaml", ["cluster"]),
    ("cluster left empty",
     "cluster:\njobs:\n" + GOOD_JOB,
     ".yaml", ["cluster"]),
    ("missing jobs",
     POOLED,
     ".yaml", ["jobs"]),
    ("zero queue weight",
     scenario(extra="queues: [{name: ads, weight: 0}]\n"),
     ".yaml", ["queues[0].weight"]),
    ("negative job weight",
     scenario(jobs="jobs:\n  - {name: A, weight: -1, tasks: [{demand: {cpu: 1}}]}\n"),
     ".yaml", ["jobs[0].weight"]),
    ("bad order value",
     scenario(extra="queues: [{name: ads, order: lifo}]\n"),
     ".yaml", ["queues[0].order"]),
    ("bad duration dist",
     scenario(jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1}, duration: {dist: pareto, mean: 3}}]}\n"),
     ".yaml", ["jobs[0].tasks[0].duration.dist"]),
    ("duration dist missing its parameter",
     scenario(jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1}, duration: {dist: exponential}}]}\n"),
     ".yaml", ["jobs[0].tasks[0].duration.mean"]),
    ("declared resources miss one used",
     scenario(extra="resources: [cpu, memory]\n",
              cluster="cluster: {capacity: {cpu: 9, memory: 18, gpu: 2}}\n",
              jobs="jobs:\n  - {name: A, tasks: [{demand: {cpu: 1, gpu: 1}}]}\n"),
     ".yaml", ["cluster.capacity.gpu", "jobs[0].tasks[0].demand.gpu"]),
    ("JSON works the same way",
     '{"cluster": {"capacity": {"cpu": 9}},\n "jobs": [{"name": "A", "tasks": [{"demand": {"cpu": -1}}]}]}\n',
     ".json", ["jobs[0].tasks[0].demand.cpu"]),
]


def run(capsys, path: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["allocate", str(path), "--policy", "drf", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def reported_paths(err: str, source: str) -> list[str]:
    """The field paths in ``FILE: PATH: REASON`` lines ('' for a whole-file problem), the
    names shown after an entry's index (``jobs[0] (A).weight``) left out."""
    paths = []
    for line in err.splitlines():
        if line.startswith(f"{source}: "):
            rest = line[len(source) + 2:]
            head, sep, _reason = rest.partition(": ")
            head = re.sub(r"(?<=\]) \([^()]*\)", "", head)
            # a whole-file line has no path: its first part is already the reason
            paths.append(head if sep and " " not in head else "")
    return paths


@pytest.mark.parametrize("text, suffix, paths", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_scenario_rejected_with_path(capsys, tmp_path, text, suffix, paths):
    path = tmp_path / f"scenario{suffix}"
    path.write_text(text)
    code, out, err = run(capsys, path)
    assert code == 2
    assert out == ""  # nothing computed, nothing printed
    assert "Traceback" not in err
    got = reported_paths(err, str(path))
    for expected in paths:
        assert expected in got, err


@pytest.mark.parametrize("text, suffix, line", [
    ("cluster: {capacity: {cpu: 9}\njobs: [\n", ".yaml", 2),                          # unclosed brace
    ("cluster:\n\tcapacity: {cpu: 9}\n", ".yaml", 2),                                 # a tab
    ("cluster: {capacity: {cpu: 9}}\ncluster: {capacity: {cpu: 1}}\njobs: []\n", ".yaml", 2),  # key twice
    ('{"cluster": {"capacity": {"cpu": 9}},\n "jobs": [}\n', ".json", 2),             # malformed JSON
])
def test_unparsable_file_names_the_line(capsys, tmp_path, text, suffix, line):
    path = tmp_path / f"broken{suffix}"
    path.write_text(text)
    code, out, err = run(capsys, path)
    assert code == 2 and out == ""
    assert err.startswith(f"{path}: ")
    assert f"line {line}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("make", [
    pytest.param(lambda d: d / "empty.yaml", id="empty file"),
    pytest.param(lambda d: d / "comments.yaml", id="only comments"),
    pytest.param(lambda d: d / "missing.yaml", id="file not found"),
    pytest.param(lambda d: d, id="a directory"),
])
def test_whole_file_problems(capsys, tmp_path, make):
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "comments.yaml").write_text("# nothing here\n")
    path = make(tmp_path)
    code, out, err = run(capsys, path)
    assert code == 2 and out == ""
    assert reported_paths(err, str(path)) == [""]  # one problem, with the file, no field
    assert "Traceback" not in err


def test_a_job_problem_names_the_job(capsys, tmp_path):
    # jobs[i] alone makes the reader count entries in a long file: the job's name follows
    # its index on every line about it; a job without a name shows none, and the paths
    # tools read (ScenarioError.paths, the API's field) stay bare
    path = tmp_path / "named.yaml"
    path.write_text(scenario(jobs="jobs:\n" + "".join(f"  - {{name: j{i}, tasks: [{{demand: {{cpu: 1}}}}]}}\n"
                                                      for i in range(10))
                             + "  - {name: big, weight: 0, tasks: [{demand: {cpu: 90}}]}\n"
                             + "  - {tasks: [{demand: {cpu: 90}}]}\n"))
    code, _, err = run(capsys, path)
    assert code == 2
    assert err.splitlines()[:3] == [
        f"{path}: jobs[10] (big).weight: must be > 0, got 0",
        f"{path}: jobs[10] (big).tasks[0].demand: no node can ever hold this task (cpu=90 exceeds the pooled "
        f"capacity)",
        f"{path}: jobs[11].tasks[0].demand: no node can ever hold this task (cpu=90 exceeds the pooled capacity)",
    ], err
    from fairshare.model import ScenarioError, load_scenario

    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.paths == ["jobs[10].weight", "jobs[10].tasks[0].demand", "jobs[11].tasks[0].demand"]


def test_all_problems_reported_at_once(capsys, tmp_path):
    path = tmp_path / "many.yaml"
    path.write_text(
        "colour: red\n"
        "cluster: {capacity: {cpu: 9, memory: 18}}\n"
        "queues: [{name: ads, weight: 0}, {name: ads}]\n"
        "jobs:\n"
        "  - {name: A, weight: 0, tasks: [{demand: {cpu: -1}}]}\n"
        "  - {name: A, queue: nowhere, tasks: [{demand: {cpu: 1}}]}\n"
        "  - {name: C, tasks: [{demand: {gpu: 1}}]}\n"       # a cross-field check, still reported
        "  - {name: D, tasks: [{demand: {cpu: 100}}]}\n"
    )
    code, _, err = run(capsys, path)
    assert code == 2
    got = reported_paths(err, str(path))
    assert set(got) >= {
        "colour", "queues[0].weight", "queues[1].name", "jobs[0].weight", "jobs[0].tasks[0].demand.cpu",
        "jobs[1].name", "jobs[1].queue", "jobs[2].tasks[0].demand.gpu", "jobs[3].tasks[0].demand",
    }, err


@pytest.mark.parametrize("argv, flag", [
    (["--policy", "no-such-policy"], "--policy"),
    (["--policy", "drf", "--no-rescale"], "--no-rescale"),
])
def test_bad_policy_arguments(capsys, tmp_path, argv, flag):
    path = tmp_path / "ok.yaml"
    path.write_text(scenario())
    code = main(["allocate", str(path), *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert flag in err and "Traceback" not in err


def test_good_scenario_still_loads(capsys, tmp_path):
    # The control: the base scenario every case above breaks is itself valid.
    path = tmp_path / "ok.yaml"
    path.write_text(scenario())
    code, out, err = run(capsys, path)
    assert code == 0, err
