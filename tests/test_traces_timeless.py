"""Timeless Alibaba GPU pod lists (``alibaba-gpu2023 --duration``): row order is arrival
order, durations come from the option, and a list without times and without the option
is refused naming it. Hand-written inputs in ``tmp_path``; the real lists in
``../shared/traces`` (skipped with a reason when absent).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fairshare.cli import main
from fairshare.model import parse_scenario
from fairshare.sim import SimOptions, simulate
from fairshare.traces import CommonOptions, TraceError, convert
from fairshare.traces.alibaba_gpu2023 import Options, parse_duration

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("FAIRSHARE_TRACES", REPO.parent / "shared" / "traces"))
ALIBABA = TRACES / "alibaba-gpu-2023"
needs_alibaba = pytest.mark.skipif(not ALIBABA.is_dir(), reason=f"shared Alibaba GPU traces not found at {ALIBABA} "
                                                                "(set FAIRSHARE_TRACES to the traces folder)")

NODE_LIST = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,262144,0,\nn1,96000,786432,8,V100M16\nn2,64000,524288,2,T4\n"
TIMELESS_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli"

# (row, expected demand in cores / GiB / devices, why)
TIMELESS_ROWS = [
    # 12000 m / 1000 = 12 cores; 16384 MiB / 1024 = 16 GiB; num_gpu 1 with gpu_milli 1000: 1 whole GPU
    ("p0,12000,16384,1,1000", {"cpu": 12, "memory": 16, "gpu": 1}),
    ("p1,6000,12288,1,460", {"cpu": 6, "memory": 12, "gpu": 0.46}),        # sharing: gpu_milli 460 / 1000 of one GPU
    ("p2,4000,8192,2,1000", {"cpu": 4, "memory": 8, "gpu": 2}),            # num_gpu 2, whole devices
    ("p3,500,512,0,0", {"cpu": 0.5, "memory": 0.5}),                       # CPU-only: gpu left out of the demand
    ("p4,88000,400000,8,1000", {"cpu": 88, "memory": 390.625, "gpu": 8}),  # 400000 / 1024 = 390.625 GiB
]


def write_list(tmp_path: Path, header: str, rows: list[str]) -> Path:
    (tmp_path / "openb_node_list_all_node.csv").write_text(NODE_LIST, encoding="utf-8")
    path = tmp_path / "pods.csv"
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def test_timeless_rows_become_tasks_in_row_order(tmp_path):
    path = write_list(tmp_path, TIMELESS_HEADER, [r for r, _ in TIMELESS_ROWS])
    result = convert("alibaba-gpu2023", [path], options=Options(duration="600", interarrival_s=2.5))
    jobs = result.scenario["jobs"]
    assert [j["name"] for j in jobs] == ["p0", "p1", "p2", "p3", "p4"]          # the rows' order
    assert [j["submit"] for j in jobs] == [0, 2.5, 5, 7.5, 10]                # data row i at i * 2.5 s
    for job, (_row, demand) in zip(jobs, TIMELESS_ROWS):
        assert "queue" not in job                                              # no qos column: no queue
        assert job["tasks"] == [{"demand": pytest.approx(demand), "count": 1, "duration": 600}]
    assert result.stats["tasks (pods)"] == 5 and result.bad.total == 0
    sc = parse_scenario(result.scenario, "timeless")
    assert [j.name for j in sc.jobs] == ["p0", "p1", "p2", "p3", "p4"]


def test_interarrival_zero_keeps_row_order_as_the_tie_rule(tmp_path):
    # all submitted at 0: the scenario format orders equal submits by position, so the file order must hold
    rows = ["z9,1000,1024,0,0", "a1,1000,1024,0,0", "m5,1000,1024,0,0"]
    sc = convert("alibaba-gpu2023", [write_list(tmp_path, TIMELESS_HEADER, rows)],
                 options=Options(duration="60", interarrival_s=0)).scenario
    assert [(j["name"], j["submit"]) for j in sc["jobs"]] == [("z9", 0), ("a1", 0), ("m5", 0)]


@pytest.mark.parametrize("text, document", [
    ("exp:3600", {"dist": "exponential", "mean": 3600.0}),
    ("exponential:5", {"dist": "exponential", "mean": 5.0}),
    ("lognormal:8,1.5", {"dist": "lognormal", "mu": 8.0, "sigma": 1.5}),
    ("uniform:10,20", {"dist": "uniform", "low": 10.0, "high": 20.0}),
])
def test_duration_distributions_are_written_per_task_class(tmp_path, text, document):
    path = write_list(tmp_path, TIMELESS_HEADER, ["p0,12000,16384,1,1000", "p1,6000,12288,1,460"])
    result = convert("alibaba-gpu2023", [path], options=Options(duration=text))
    assert [j["tasks"][0]["duration"] for j in result.scenario["jobs"]] == [document, document]
    parse_scenario(result.scenario, "timeless")   # the loader accepts the distribution


def test_group_bucket_puts_same_shaped_pods_in_one_class(tmp_path):
    # 1 s apart, buckets of 2 s: rows 0,1 -> b0 and rows 2,3 -> b1; rows 0 and 1 have the same shape
    rows = ["p0,1000,1024,0,0", "p1,1000,1024,0,0", "p2,2000,1024,0,0", "p3,1000,1024,0,0"]
    sc = convert("alibaba-gpu2023", [write_list(tmp_path, TIMELESS_HEADER, rows)],
                 options=Options(duration="exp:60", group="bucket", bucket_s=2)).scenario
    counts = [(j["name"], [t["count"] for t in j["tasks"]]) for j in sc["jobs"]]
    assert counts == [("pods-b0", [2]), ("pods-b1", [1, 1])]


def test_timed_list_with_duration_replays_every_pod_in_row_order(tmp_path):
    # a timed list (the default and gpuspec33 pod lists) under --duration: times, phase ignored; qos, gpu_spec kept
    header = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
              "scheduled_time")
    rows = ["p0,12000,16384,1,1000,,LS,Running,900,1500,1000",
            "p1,6000,12288,1,460,T4,BE,Succeeded,50,350,60",
            "p3,1000,1024,0,0,,BE,Pending,90,200,"]               # never scheduled: still a pod of the workload
    result = convert("alibaba-gpu2023", [write_list(tmp_path, header, rows)], options=Options(duration="100"))
    jobs = result.scenario["jobs"]
    assert [(j["name"], j["submit"], j["queue"]) for j in jobs] == [("p0", 0, "LS"), ("p1", 1, "BE"), ("p3", 2, "BE")]
    assert jobs[1]["tasks"][0]["constraints"] == {"gpu_model": ["T4"]}
    assert all(j["tasks"][0]["duration"] == 100 for j in jobs)


def test_bad_rows_are_counted_and_keep_their_arrival_slot(tmp_path):
    # the arrival index is the data row's, bad rows included: p2 arrives at 2 s though p1 is skipped
    rows = ["p0,1000,1024,0,0", "p1,lots,1024,0,0", "p2,1000,1024,0,0"]
    result = convert("alibaba-gpu2023", [write_list(tmp_path, TIMELESS_HEADER, rows)], options=Options(duration="5"))
    assert [(j["name"], j["submit"]) for j in result.scenario["jobs"]] == [("p0", 0), ("p2", 2)]
    assert result.bad.counts == {"unparsable field": 1}


def test_timeless_list_without_duration_names_the_option(tmp_path):
    path = write_list(tmp_path, TIMELESS_HEADER, ["p0,1000,1024,0,0"])
    with pytest.raises(TraceError, match=r"timeless pod list .*--duration"):
        convert("alibaba-gpu2023", [path])


def test_cli_timeless_without_duration_exits_2(tmp_path, capsys):
    path = write_list(tmp_path, TIMELESS_HEADER, ["p0,1000,1024,0,0"])
    out = tmp_path / "out.yaml"
    assert main(["trace", "convert", "alibaba-gpu2023", str(path), "-o", str(out)]) == 2
    assert "--duration" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("text, fragment", [
    ("0", "positive seconds"), ("-5", "positive seconds"), ("soon", "positive seconds"),
    ("exp:0", "MEAN must be > 0"), ("lognormal:1", "takes MU,SIGMA"), ("lognormal:1,0", "SIGMA must be > 0"),
    ("uniform:5,2", "0 <= LOW <= HIGH"), ("weibull:1,2", "unknown distribution"), ("exp:x", "takes MEAN"),
])
def test_bad_duration_option_is_an_error_naming_it(text, fragment):
    with pytest.raises(TraceError, match="--duration") as info:
        parse_duration(text)
    assert fragment in str(info.value)


@pytest.mark.parametrize("argv, fragment", [
    (["--duration", "exp:0"], "--duration"), (["--duration", "5", "--interarrival", "-1"], "--interarrival"),
])
def test_cli_bad_timeless_options_exit_2(tmp_path, capsys, argv, fragment):
    path = write_list(tmp_path, TIMELESS_HEADER, ["p0,1000,1024,0,0"])
    assert main(["trace", "convert", "alibaba-gpu2023", str(path), "-o", str(tmp_path / "o.json"), *argv]) == 2
    assert fragment in capsys.readouterr().err


@needs_alibaba
@pytest.mark.parametrize("name, rows, constrained", [
    ("openb_pod_list_multigpu50.csv", 9061, False),   # no qos, no gpu_spec: no queues, no constraints
    ("openb_pod_list_gpuspec33.csv", 8152, True),     # gpu_spec kept as constraints
    ("openb_pod_list_default.csv", 8152, False),
])
def test_real_pod_lists_convert_timeless_and_simulate(name, rows, constrained):
    limit = 300
    result = convert("alibaba-gpu2023", [ALIBABA / name], CommonOptions(limit=limit), Options(duration="exp:600"))
    jobs = result.scenario["jobs"]
    assert result.stats["rows read"] == limit
    # impossible demands (a pod no node can hold) are the only rows allowed to drop
    assert len(jobs) == limit - result.bad.counts.get("impossible demand", 0)
    assert [j["submit"] for j in jobs] == sorted(j["submit"] for j in jobs)
    assert any("constraints" in t for j in jobs for t in j["tasks"]) == constrained
    sc = parse_scenario(result.scenario, name)
    run = simulate(sc, "drf", SimOptions(seed=0))
    assert run.tasks_completed == len(jobs)
    full = sum(1 for _ in open(ALIBABA / name, encoding="utf-8")) - 1
    assert full == rows   # the list the docs describe


# --- the fill-until-full experiment (examples/traces/fill_until_full.py) -----------------------

def load_fill_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fill_until_full", REPO / "examples" / "traces" / "fill_until_full.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def test_fill_until_full_first_failure_and_fragmentation_arithmetic(tmp_path):
    fill = load_fill_module()
    folder = tmp_path / "alibaba-gpu-2023"
    folder.mkdir()
    (folder / "openb_node_list_all_node.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\na,8000,65536,2,T4\n",
                                                         encoding="utf-8")
    (folder / "openb_pod_list_default.csv").write_text(
        TIMELESS_HEADER + "\n"
        "p0,1000,1024,1,500\n"      # half of one GPU: GPU 0 has 0.5 left
        "p1,1000,1024,1,1000\n"     # a whole GPU: GPU 1
        "p2,1000,1024,1,1000\n"     # a whole GPU: none is free -> the first failure
        "p3,1000,1024,1,300\n",     # 0.3 fits in GPU 0's 0.5: placed after the failure
        encoding="utf-8")
    sc = fill.load_list(tmp_path, "default", batch=False)
    shapes = fill.gpu_shapes(sc)
    r = fill.fill(sc, "default", "first-fit", "fifo", False, shapes)
    assert r.first_failure == 2
    assert r.gpu_ratio_at_failure == pytest.approx(1.5 / 2)   # 0.5 + 1 of 2 GPUs, just before p2
    assert r.placed_at_failure == pytest.approx(2 / 4)
    assert r.free_gpu_at_failure == pytest.approx(0.5 / 2)
    # GPU shapes: 0.5 (p = 1/4), whole GPU (p = 2/4), 0.3 (p = 1/4). Free: GPU 0 has 0.5.
    # 0.5 fits there: nothing unusable; a whole GPU fits nowhere: all 0.5 unusable; 0.3 fits: the 0.5
    # is not smaller than 0.3, so nothing unusable. F = 2/4 * 0.5 = 0.25 GPU, over 2 GPUs = 12.5%
    assert r.fragmentation_at_failure == pytest.approx(0.25 / 2)
    assert r.placed_end == pytest.approx(3 / 4) and r.gpu_ratio_end == pytest.approx(1.8 / 2)
