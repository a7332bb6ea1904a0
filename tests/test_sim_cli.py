"""``fairshare simulate`` and ``fairshare compare`` (contract: their output files; exit 2 on
user errors, before any work, with a message naming the flag)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fairshare.cli import main
from fairshare.model import parse_scenario
from fairshare.policies import REGISTRY
from fairshare.sim.metrics import StaticShares

CONTRACT_JOB_KEYS = {"submit", "start", "finish", "completion_time", "tasks_completed", "mean_running_tasks",
                     "mean_allocation"}

SMALL = """\
resources: [cpu, memory]
cluster:
  nodes:
    - {name: n, count: 2, capacity: {cpu: 4, memory: 16}}
queues:
  - {name: prod, weight: 2}
  - {name: dev}
jobs:
  - name: A
    queue: prod
    tasks: [{demand: {cpu: 1, memory: 4}, count: 12, duration: {dist: exponential, mean: 5}}]
  - name: B
    queue: dev
    submit: 3
    tasks: [{demand: {cpu: 2, memory: 1}, count: 6, duration: [4, 6]}]
events:
  - {time: 8, node_fail: n-1}
  - {time: 12, node_add: {name: n-1}}
"""

UNBOUNDED = """\
cluster: {capacity: {cpu: 2}}
jobs:
  - {name: U, tasks: [{demand: {cpu: 1}, duration: 1}]}
"""


@pytest.fixture
def small(tmp_path: Path) -> Path:
    p = tmp_path / "small.yaml"
    p.write_text(SMALL)
    return p


def test_simulate_writes_the_contract_files(small: Path, tmp_path: Path, capsys):
    out = tmp_path / "out" / "run"  # parents are created
    assert main(["simulate", str(small), "--policy", "hdrf", "--out", str(out), "--seed", "3"]) == 0
    stdout = capsys.readouterr().out
    assert f"report: {out / 'report.html'}" in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary)[:5] == ["policy", "makespan", "utilization", "jobs", "queues"]
    assert summary["policy"] == "hdrf" and summary["seed"] == 3
    assert set(summary["utilization"]) == {"cpu", "memory"}
    assert set(summary["jobs"]) == {"A", "B"}
    for job in summary["jobs"].values():
        assert CONTRACT_JOB_KEYS <= set(job)
        assert set(job["mean_allocation"]) == {"cpu", "memory"}
        assert job["tasks_completed"] == job["tasks_total"]
    assert set(summary["queues"]) == {"prod", "dev"}
    assert summary["tasks"]["lost_to_node_failures"] >= 0
    head = (out / "timeline.csv").read_text().splitlines()[0]
    assert head == "time,kind,entity,running_tasks,dominant_share,cpu,memory"
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 3
    assert "http://" not in html.replace("http://www.w3.org", "")  # self-contained


def test_simulate_is_byte_identical_for_a_seed(small: Path, tmp_path: Path, capsys):
    for d in ("a", "b"):
        assert main(["simulate", str(small), "--policy", "drf", "--out", str(tmp_path / d), "--seed", "5"]) == 0
    for name in ("summary.json", "timeline.csv", "report.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_compare_writes_each_policy_and_the_side_by_side(small: Path, tmp_path: Path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", str(small), "--policies", "drf,hdrf,fifo", "--out", str(out), "--seed", "1",
                 "--placement", "best-fit"])
    assert code == 0
    assert f"report: {out / 'report.html'}" in capsys.readouterr().out
    for p in ("drf", "hdrf", "fifo"):
        for name in ("summary.json", "timeline.csv", "report.html"):
            assert (out / p / name).is_file()
        assert json.loads((out / p / "summary.json").read_text())["placement"] == "best-fit"
    doc = json.loads((out / "compare.json").read_text())
    assert doc["policies"] == ["drf", "hdrf", "fifo"] and doc["seed"] == 1
    for p, row in doc["results"].items():
        assert {"makespan", "completion_time_mean", "completion_time_p95", "utilization", "starvation",
                "fairness_gap"} <= set(row)
        assert set(row["starvation"]) == {"max_s", "job"}
        assert row["fairness_gap"]["static_policy"] == "hdrf"  # one reference for every row (queues)
    assert doc["fairness_reference_policy"] == "hdrf"
    html = (out / "report.html").read_text()
    assert html.count("<svg") >= 3 and 'href="hdrf/report.html"' in html


def test_compare_applies_an_option_to_the_policies_that_take_it(small: Path, tmp_path: Path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(small), "--policies", "hdrf,drf", "--no-rescale", "--out", str(out)]) == 0
    doc = json.loads((out / "compare.json").read_text())
    assert doc["results"]["hdrf"]["params"]["rescale"] is False
    assert doc["results"]["drf"]["params"] == {}


def test_fairness_gap_falls_back_for_online_only_policies(small: Path, tmp_path: Path, capsys):
    assert main(["simulate", str(small), "--policy", "slots", "--slots", "2", "--out", str(tmp_path / "s")]) == 0
    gap = json.loads((tmp_path / "s" / "summary.json").read_text())["fairness_gap"]
    assert gap["static_policy"] == "hdrf"  # hierarchical scenario; slots has no static allocation
    assert "no static allocation" in gap["static_policy_reason"]


HIERARCHY = Path(__file__).resolve().parents[1] / "examples" / "hierarchy.yaml"


def _gap(out: Path) -> tuple[float, str, str | None]:
    summary = json.loads((out / "summary.json").read_text())
    return summary["fairness_gap"]["value"], summary["fairness_gap"]["static_policy"], \
        summary.get("fairness_reference_policy")


def test_simulate_reference_measures_the_gap_against_that_policy(tmp_path: Path, capsys):
    # examples/hierarchy.yaml: drf (one share per job) and hdrf (one per queue, H-DRF
    # Sec. 3) allocate differently, so the same run's gap differs with the yardstick
    run = ["simulate", str(HIERARCHY), "--policy", "hdrf", "--until", "300"]
    assert main([*run, "--out", str(tmp_path / "own")]) == 0
    assert main([*run, "--out", str(tmp_path / "drf"), "--reference", "drf"]) == 0
    own, drf = _gap(tmp_path / "own"), _gap(tmp_path / "drf")
    assert own[1:] == ("hdrf", None)  # the default: the policy's own, and no key (the summary it always had)
    assert drf[1:] == ("drf", "drf")
    assert drf[0] != pytest.approx(own[0])
    assert "fair share (drf)" in capsys.readouterr().out  # the terminal's column follows the reference


def test_compare_rows_share_one_reference(tmp_path: Path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(HIERARCHY), "--policies", "hdrf,dff", "--until", "300", "--reference", "drf",
                 "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    doc = json.loads((out / "compare.json").read_text())
    assert doc["fairness_reference_policy"] == "drf"
    for p in ("hdrf", "dff"):
        assert doc["results"][p]["fairness_gap"]["static_policy"] == "drf"
        assert _gap(out / p)[1:] == ("drf", "drf")
    assert "fairness gap against drf's static allocation (every policy; --reference)" in stdout
    # the hdrf row measured against drf is simulate's --reference drf, not hdrf's own gap
    assert main(["simulate", str(HIERARCHY), "--policy", "hdrf", "--until", "300", "--reference", "drf",
                 "--out", str(tmp_path / "one")]) == 0
    assert _gap(out / "hdrf")[0] == _gap(tmp_path / "one")[0]


@pytest.mark.parametrize("command", [["simulate", "--policy", "drf"], ["compare", "--policies", "drf,hdrf"]])
@pytest.mark.parametrize("reference, message", [
    ("timefair", "--reference timefair: policy 'timefair' has no static allocation"),
    ("slots", "--reference slots: policy 'slots' has no static allocation"),
    ("nope", "--reference: unknown policy 'nope'"),
])
def test_a_reference_without_a_static_allocation_is_refused(small: Path, tmp_path: Path, capsys, command,
                                                             reference, message):
    out = tmp_path / "out"
    assert main([command[0], str(small), *command[1:], "--reference", reference, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # refused before any run


def test_fairness_gap_reference_is_declared_by_one_policy_of_each_kind():
    # sim/metrics asks the policies (Policy.fairness_reference), never names one
    refs = {kind: [name for name, cls in REGISTRY.items() if cls.fairness_reference == kind]
            for kind in ("flat", "hierarchical")}
    assert refs == {"flat": ["drf"], "hierarchical": ["hdrf"]}


def test_fairness_gap_falls_back_to_drf_on_a_flat_scenario():
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 9, "mem": 18}},
                         "jobs": [{"name": "A", "tasks": [{"demand": {"cpu": 1, "mem": 4}}]},
                                  {"name": "B", "tasks": [{"demand": {"cpu": 3, "mem": 1}}]}]}, "<test>")
    static = StaticShares(sc, "slots", {"slots": 2})
    # DRF Sec. 4's example: both jobs at dominant share 2/3
    assert static.shares(frozenset({"A", "B"}), sc.capacity) == pytest.approx({"A": 2 / 3, "B": 2 / 3})
    assert static.name == "drf"
    assert static.reason.endswith("; using drf, the reference for a flat scenario")


@pytest.mark.parametrize("argv, flag", [
    (["simulate", "{u}", "--policy", "drf", "--out", "{o}"], "--until"),
    (["compare", "{u}", "--policies", "drf,hdrf", "--out", "{o}"], "--until"),
    (["simulate", "{s}", "--policy", "ceei", "--out", "{o}"], "--policy ceei"),
    (["compare", "{s}", "--policies", "drf,ceei", "--out", "{o}"], "--policies ceei"),
    (["compare", "{s}", "--policies", "drf,slowdown", "--out", "{o}"], "--policies slowdown"),
    (["compare", "{s}", "--policies", "drf,nope", "--out", "{o}"], "--policies"),
    (["compare", "{s}", "--policies", "drf,,hdrf", "--out", "{o}"], "--policies"),
    (["compare", "{s}", "--policies", "drf,drf", "--out", "{o}"], "--policies"),
    (["compare", "{s}", "--policies", "drf,fifo", "--no-rescale", "--out", "{o}"], "--no-rescale"),
    (["simulate", "{s}", "--policy", "drf", "--no-rescale", "--out", "{o}"], "--no-rescale"),
    (["simulate", "{s}", "--policy", "drf", "--out", "{o}", "--until", "-5"], "--until"),
    (["simulate", "{s}", "--policy", "drf", "--out", "{o}", "--seed", "x"], "--seed"),
    (["simulate", "{s}", "--policy", "drf", "--out", "{o}", "--placement", "worst-fit"], "--placement"),
    (["simulate", "{s}", "--policy", "cpu", "--resource", "gpu", "--out", "{o}"], "--resource"),
    (["simulate", "{s}", "--policy", "drf", "--out", "{f}"], "--out"),
    (["simulate", "{s}", "--policy", "drf"], "--out"),
])
def test_user_errors_exit_2_before_any_work(argv, flag, small: Path, tmp_path: Path, capsys):
    unbounded = tmp_path / "unbounded.yaml"
    unbounded.write_text(UNBOUNDED)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    out = tmp_path / "never"
    args = [a.format(u=unbounded, s=small, o=out, f=a_file) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err
    assert not out.exists()  # nothing was run or written


def test_scenario_errors_in_events_exit_2_with_the_path(tmp_path: Path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.replace("node_fail: n-1", "node_fail: n-9"))
    assert main(["simulate", str(bad), "--policy", "drf", "--out", str(tmp_path / "o")]) == 2
    assert "events[0].node_fail: node 'n-9' is not a node of the cluster" in capsys.readouterr().err


def test_progress_bar_on_request(small: Path, tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "fairshare", "simulate", str(small), "--policy", "drf",
                           "--out", str(tmp_path / "o"), "--progress"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "tasks" in proc.stderr and "elapsed" in proc.stderr and "[" in proc.stderr
    assert "report:" in proc.stdout
    # no silent wait after 100%: each post-run step is said, with its time, in order
    steps = [line.split("...")[0] for line in proc.stderr.splitlines() if "..." in line]
    assert steps == ["summary and fairness gap", "summary.json and timeline.csv", "report.html"], proc.stderr


@pytest.mark.parametrize("frac, elapsed, text", [
    (0.01, 5.0, ""),                      # under ETA_AFTER (2%): the rate says little yet
    (0.25, 10.0, ", about 30 s left"),    # 10 s for a quarter: 3 quarters left at 10 s each
    (0.5, 61.0, ", about 61 s left"),
    (1.0, 9.0, ""),                       # done: nothing left to estimate
])
def test_eta_is_the_rest_at_the_rate_so_far(frac, elapsed, text):
    from fairshare.sim.progress import eta_text

    assert eta_text(frac, elapsed) == text


def test_outputs_do_not_depend_on_the_process(tmp_path: Path):
    # Two processes with different string hashing (PYTHONHASHSEED): any iteration over a set
    # of names that feeds float sums or output order would show here. Fractional demands
    # make float sums order-sensitive.
    import os

    scen = tmp_path / "frac.yaml"
    scen.write_text(SMALL.replace("cpu: 1, memory: 4", "cpu: 0.7, memory: 3.3")
                    .replace("cpu: 2, memory: 1", "cpu: 0.3, memory: 1.1"))
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"run{seed}"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-m", "fairshare", "compare", str(scen), "--policies", "hdrf,drf",
                               "--out", str(out), "--seed", "4"], capture_output=True, text=True, env=env,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
    for rel in ("hdrf/summary.json", "hdrf/timeline.csv", "drf/summary.json", "drf/timeline.csv", "compare.json"):
        assert (outs[0] / rel).read_bytes() == (outs[1] / rel).read_bytes(), rel
