"""Trace converters (``fairshare trace convert``, ``KIND:PATH``): mapping arithmetic on tiny
hand-written inputs, bad data, --strict, and small slices of the shared traces.

Tests on the real traces read ``../shared/traces`` next to the repository and skip with a
reason when it is absent. The hand-written inputs are built here (``tmp_path``) or are the
SLS fixture ``tests/data/sls_sample.json``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml

from fairshare.cli import main
from fairshare.model import parse_scenario
from fairshare.traces import KINDS, CommonOptions, TraceError, convert
from fairshare.traces import alibaba_dlrm2025, alibaba_gpu2023, google2011, swim
from fairshare.traces.base import loader_accepts
from fairshare.traces.common import BadData, sample_keep

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
SLS_SAMPLE = REPO / "tests" / "data" / "sls_sample.json"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")

GOOGLE_USER = "AbCdEfGh+rest/of/the/hash="  # first 8 chars -> "AbCdEfGh"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time," \
             "scheduled_time"
NODE_LIST = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,262144,0,\nn1,96000,786432,8,V100M16\nn2,64000,524288,2,T4\n"
DLRM_HEADER = ("instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
               "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,"
               "scheduled_time,deletion_time")


def google_row(t_s: float, job: int, task: int, event: int, priority: int = 9, cpu: str = "0.25",
               mem: str = "0.125") -> str:
    return f"{int(t_s * 1e6)},,{job},{task},,{event},{GOOGLE_USER},2,{priority},{cpu},{mem},0.001,0"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def job_by_name(scenario: dict, name: str) -> dict:
    return next(j for j in scenario["jobs"] if j["name"] == name)


# --- google2011 -------------------------------------------------------------------------------

def google_sample(tmp_path: Path) -> Path:
    rows = [
        google_row(0, 1, 0, 1),            # running before the window: starts at the window start, 600 s
        google_row(700, 1, 1, 0),          # SUBMIT
        google_row(700, 1, 1, 1),          # SCHEDULE
        google_row(760, 1, 1, 4),          # FINISH: 760 - 700 = 60 s
        google_row(780, 2, 0, 0, priority=0, cpu="0.5", mem="0.25"),
        google_row(790, 2, 0, 1, priority=0, cpu="0.5", mem="0.25"),
        google_row(800, 1, 0, 4),          # FINISH: 800 - 600 = 200 s
        google_row(820, 3, 0, 0, priority=4),  # submitted, never scheduled: dropped
        google_row(900, 2, 0, 2, priority=0, cpu="0.5", mem="0.25"),  # EVICT: 900 - 790 = 110 s
        google_row(910, 2, 0, 1, priority=0, cpu="0.5", mem="0.25"),  # runs again, still running at 1000
        google_row(1000, 1, 2, 7, cpu="0.375"),  # UPDATE_PENDING raises job 1's cpu to 0.375; the last event
    ]
    path = tmp_path / "task_events-part-00000-of-00500.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(rows) + "\n")
    return path


def test_google_runs_durations_censoring_and_bands(tmp_path):
    result = convert("google2011", [google_sample(tmp_path)], options=google2011.Options(machines=100))
    sc = result.scenario
    j1, j2 = job_by_name(sc, "j1"), job_by_name(sc, "j2")
    assert j1["queue"] == "production.AbCdEfGh"          # priority 9 -> production band, then the user
    assert j2["queue"] == "free.AbCdEfGh"                # priority 0 -> free
    assert j1["tasks"][0]["duration"] == [60, 200]       # FINISH order: 760-700, 800-600
    assert j1["tasks"][0]["demand"] == {"cpu": 0.375, "memory": 0.125}  # the largest request seen
    # job 2: evicted after 900-790 = 110 s, then censored at the window end 1000: 1000-910 = 90 s
    assert j2["tasks"][0]["duration"] == [110, 90]
    assert j2["submit"] == 780 - 600
    assert result.stats["runs censored at the window end"] == 1
    assert result.stats["jobs never scheduled in the window (dropped)"] == 1  # job 3
    assert sum(n["count"] for n in sc["cluster"]["nodes"]) == 100
    parse_scenario(sc, "google")


@pytest.mark.parametrize("machines, expected", [
    # 12,583 machines -> exactly the published table
    (google2011.FULL_MACHINES, [n for n, _, _ in google2011.MACHINE_MIX]),
    # 100 machines: exact shares 53.50, 30.70, 7.96, 6.32, 1.00, 0.41, ... -> floors 53+30+7+6+1 = 97;
    # the 3 left go to the largest remainders: 7.96 (0.96), 30.70 (0.70), 53.50 (0.50)
    (100, [54, 31, 8, 6, 1]),
])
def test_google_machine_mix_scaling(machines, expected):
    nodes = google2011.machine_nodes(machines)
    assert [n["count"] for n in nodes] == expected
    assert sum(n["count"] for n in nodes) == machines


@pytest.mark.parametrize("hierarchy, weights, queue_of_j1, top_queues", [
    ("band-user", None, "production.AbCdEfGh", [{"name": "production", "children": [{"name": "AbCdEfGh"}]},
                                                 {"name": "free", "children": [{"name": "AbCdEfGh"}]}]),
    ("band", "production=4", "production", [{"name": "production", "weight": 4}, {"name": "free"}]),
    ("user", None, "AbCdEfGh", [{"name": "AbCdEfGh"}]),
    ("flat", None, None, None),
])
def test_google_hierarchy_options(tmp_path, hierarchy, weights, queue_of_j1, top_queues):
    opts = google2011.Options(hierarchy=hierarchy, machines=10, weights=weights)
    sc = convert("google2011", [google_sample(tmp_path)], options=opts).scenario
    assert job_by_name(sc, "j1").get("queue") == queue_of_j1
    assert sc.get("queues") == top_queues   # first-seen order: j1 (production) before j2 (free)


def test_google_window_cuts_and_censors(tmp_path):
    # window 600..770: job 1 task 1 finished at 760 (60 s); task 0 still running -> 770 - 600 = 170 s
    result = convert("google2011", [google_sample(tmp_path)], CommonOptions(window_start_s=600, window_end_s=770),
                     google2011.Options(machines=10))
    assert job_by_name(result.scenario, "j1")["tasks"][0]["duration"] == [60, 170]
    assert result.stats["runs censored at the window end"] == 1


# --- alibaba-gpu2023 --------------------------------------------------------------------------

def alibaba_sample(tmp_path: Path, extra_rows: str = "") -> Path:
    write(tmp_path / "openb_node_list_all_node.csv", NODE_LIST)
    return write(tmp_path / "pods.csv", POD_HEADER + "\n" +
                 "p0,12000,16384,1,1000,,LS,Running,0,500,100\n"        # 1 whole GPU, 500-100 = 400 s
                 "p1,6000,12288,1,460,T4,BE,Succeeded,50,350,60\n"      # 0.46 of a T4, 350-60 = 290 s
                 "p2,4000,8192,2,1000,V100M16|T4,LS,Failed,70,170,80\n"  # 2 GPUs on V100M16 or T4, 90 s
                 "p3,1000,1024,0,0,,BE,Pending,90,200,\n"               # never scheduled: left out
                 + extra_rows)


def test_alibaba_pods_gpu_fractions_and_constraints(tmp_path):
    result = convert("alibaba-gpu2023", [alibaba_sample(tmp_path)])
    sc = result.scenario
    p0, p1, p2 = (job_by_name(sc, n) for n in ("p0", "p1", "p2"))
    assert p0["tasks"][0] == {"demand": {"cpu": 12, "memory": 16, "gpu": 1}, "count": 1, "duration": 400}
    assert p1["queue"] == "BE"
    assert p1["tasks"][0]["demand"]["gpu"] == pytest.approx(0.46)      # gpu_milli 460 / 1000
    assert p1["tasks"][0]["constraints"] == {"gpu_model": ["T4"]}
    assert p2["tasks"][0]["constraints"] == {"gpu_model": ["T4", "V100M16"]}
    assert p2["tasks"][0]["duration"] == 90
    assert result.stats["pods never scheduled (left out)"] == 1
    nodes = {n["name"]: n for n in sc["cluster"]["nodes"]}
    assert nodes["n1"]["capacity"] == {"cpu": 96, "memory": 768, "gpu": 8}   # 96000 m, 786432 MiB / 1024
    assert nodes["n1"]["attributes"] == {"gpu_model": "V100M16"}
    assert "attributes" not in nodes["n0"]                                      # no GPU, no model
    assert sc["cluster"].get("devices") == (["gpu"] if loader_accepts("cluster", "devices") else None)
    parse_scenario(sc, "alibaba")


def test_alibaba_group_bucket(tmp_path):
    # buckets of 60 s by creation: p0 (0) -> LS-b0; p2 (70) -> LS-b1; p1 (50) -> BE-b0
    opts = alibaba_gpu2023.Options(group="bucket", bucket_s=60)
    sc = convert("alibaba-gpu2023", [alibaba_sample(tmp_path)], options=opts).scenario
    assert [j["name"] for j in sc["jobs"]] == ["LS-b0", "BE-b0", "LS-b1"]   # by submit: 0, 50, 70


def test_alibaba_pending_include_uses_pending_time(tmp_path):
    opts = alibaba_gpu2023.Options(pending="include")
    sc = convert("alibaba-gpu2023", [alibaba_sample(tmp_path)], options=opts).scenario
    assert job_by_name(sc, "p3")["tasks"][0]["duration"] == 110   # deletion 200 - creation 90


def test_alibaba_node_sample_keeps_a_stable_subset(tmp_path):
    path = alibaba_sample(tmp_path)
    kept = [sn for sn in ("n0", "n1", "n2") if sample_keep(sn, 0.5, 0)]
    assert kept == ["n0", "n1"]   # seed 0 drops n2, the only T4 node
    result = convert("alibaba-gpu2023", [path], options=alibaba_gpu2023.Options(node_sample=0.5))
    assert [n["name"] for n in result.scenario["cluster"]["nodes"]] == kept
    # p1 may run only on a T4: left out and counted, not bad data; p0 and p2 (V100M16|T4) stay
    assert result.bad.total == 0
    assert result.stats["pods no kept node can hold (left out)"] == 1
    assert [j["name"] for j in result.scenario["jobs"]] == ["p0", "p2"]


# --- alibaba-dlrm2025 -------------------------------------------------------------------------

def test_dlrm_roles_censoring_and_derived_nodes(tmp_path):
    path = write(tmp_path / "dlrm.csv", DLRM_HEADER + "\n" +
                 # before the window, still running: 0 .. window end (1000) = 1000 s, censored
                 "i0,HN,app_a,8,8,1,1,25,25,40,40,100,100,4,,,\n"
                 # created 100, scheduled 110, deleted 410: 300 s
                 "i1,HN,app_a,8,8,1,1,25,25,40,40,100,100,4,100,110,410\n"
                 # CN instance, created 200, scheduled 200, deleted 1000 (the last time: the window end)
                 "i2,CN,app_b,64,64,0,0,1,1,320,320,255,255,-1,200,200,1000\n")
    opts = alibaba_dlrm2025.Options(group="app", node_size=2, load=0.5)
    result = convert("alibaba-dlrm2025", [path], options=opts)
    sc = result.scenario
    assert sc["resources"] == ["cpu", "gpu", "rdma", "memory", "disk"]
    app_a = job_by_name(sc, "app_a")
    assert app_a["queue"] == "app_a" and app_a["submit"] == 0
    assert app_a["tasks"][0]["duration"] == [1000, 300]
    assert app_a["tasks"][0]["constraints"] == {"role": ["HN"]}
    if loader_accepts("task", "max_per_node"):
        assert app_a["tasks"][0]["max_per_node"] == 4          # max_instance_per_node 4
        assert "max_per_node" not in job_by_name(sc, "app_b")["tasks"][0]   # -1: no limit
    assert result.stats["runs censored at the window end"] == 1
    nodes = {n["name"]: n for n in sc["cluster"]["nodes"]}
    # HN shape: 2 x largest request = cpu 16, gpu 2, rdma 50, memory 80, disk 200.
    # Peak concurrent HN demand: i0 + i1 = gpu 2; count = ceil(2 / (0.5 x 2)) = 2 (same on every resource)
    assert nodes["hn-node"]["capacity"] == {"cpu": 16, "gpu": 2, "rdma": 50, "memory": 80, "disk": 200}
    assert nodes["hn-node"]["count"] == 2
    # CN: one instance of cpu 64 on nodes of 128: ceil(64 / (0.5 x 128)) = 1
    assert nodes["cn-node"]["count"] == 1
    parse_scenario(sc, "dlrm")


# --- swim -------------------------------------------------------------------------------------

def test_swim_task_derivation_arithmetic(tmp_path):
    mib, gib = 1 << 20, 1 << 30
    path = write(tmp_path / "FB-2009_samples_24_times_1hr_0.tsv",
                 f"job0\t10\t10\t{300 * mib}\t{int(1.5 * gib)}\t{gib // 2}\n"
                 f"job1\t20\t10\t0\t0\t0\n")
    sc = convert("swim", [path]).scenario
    j0, j1 = job_by_name(sc, "job0"), job_by_name(sc, "job1")
    maps, reduces = j0["tasks"]
    assert maps["count"] == 3                                 # ceil(300 / 128)
    assert maps["duration"] == pytest.approx(5 + 100 / 32)    # overhead + (300/3 MiB) / 32 MiB/s
    assert reduces["count"] == 2                              # ceil(1.5 GiB / 1 GiB)
    # overhead + (1.5 GiB shuffle + 0.5 GiB output) / 2 reduces / 16 MiB/s = 5 + 1024/16 = 69 s
    assert reduces["duration"] == pytest.approx(69)
    assert j0["queue"] == "medium" and j1["queue"] == "small"   # 3 maps; 1 map
    assert len(j1["tasks"]) == 1 and j1["tasks"][0]["count"] == 1  # no input: one map, no reduce
    assert sc["cluster"]["nodes"][0]["count"] == 600            # FB-2009 default


# --- sls --------------------------------------------------------------------------------------

def test_sls_fixture():
    result = convert("sls", [SLS_SAMPLE])
    sc = result.scenario
    job1 = job_by_name(sc, "job_1")
    assert job1["queue"] == "analytics.daily"                 # "root." dropped
    maps, reduce_ = job1["tasks"]
    assert maps["duration"] == [17.043, 14.928]               # (23707-6664)/1000, (21593-6665)/1000
    assert reduce_["demand"] == {"cpu": 2, "memory": 2}        # 2 vcores, 2048 MB / 1024
    assert [j["name"] for j in sc["jobs"]] == ["job_1", "job_2-0", "job_2-1"]   # job.count 2
    assert job_by_name(sc, "job_2-1")["tasks"][0]["count"] == 3                  # container.count
    assert [n["name"] for n in sc["cluster"]["nodes"]] == ["node1", "node2", "node3"]
    parse_scenario(sc, "sls")


def test_sls_garbled_object_is_counted_and_reading_resumes(tmp_path):
    text = SLS_SAMPLE.read_text()
    first_end = text.index("\n}\n") + 3
    garbled = text[:first_end] + '{\n  "job.start.ms" : 1,, \n}\n' + text[first_end:]
    result = convert("sls", [write(tmp_path / "g.json", garbled)])
    assert result.bad.counts == {"unparsable JSON": 1}
    # the fixture's first job is lines 1-29; the garbled object is lines 30-32, its ",," on line 31
    assert result.bad.examples["unparsable JSON"][0].endswith(":31: Expecting property name enclosed in double quotes")
    assert len(result.scenario["jobs"]) == 3   # both good jobs (job_2 twice) still converted


def test_sls_accepts_an_indented_array_and_reports_a_cut_file(tmp_path):
    jobs = [json.loads(chunk) for chunk in ("{" + c.strip().rstrip("}") + "}" for c in
                                            SLS_SAMPLE.read_text().strip().lstrip("{").split("\n}\n{"))]
    as_array = write(tmp_path / "array.json", json.dumps(jobs, indent=2))   # "[\n  {\n ... \n  },\n  {..."
    assert [j["name"] for j in convert("sls", [as_array]).scenario["jobs"]] == ["job_1", "job_2-0", "job_2-1"]
    cut = write(tmp_path / "cut.json", SLS_SAMPLE.read_text()[:-40])       # the second job loses its end
    result = convert("sls", [cut])
    assert result.bad.counts == {"truncated or corrupt file": 1}
    assert result.bad.examples["truncated or corrupt file"][0].startswith(f"{cut}:30")   # where job 2 starts
    assert [j["name"] for j in result.scenario["jobs"]] == ["job_1"]


# --- bad data ---------------------------------------------------------------------------------

def test_google_garbled_row_names_the_column(tmp_path):
    path = tmp_path / "task_events.csv"
    write(path, google_row(700, 1, 0, 1) + "\n" + google_row(710, 1, 0, 4).replace(",1,0,,4,", ",1,zero,,4,") + "\n")
    result = convert("google2011", [path], options=google2011.Options(machines=10))
    assert result.bad.examples["unparsable field"] == [f"{path}:2: task_index: 'zero' is not a whole number"]


def test_truncated_gzip_keeps_rows_before_it(tmp_path):
    path = google_sample(tmp_path)
    data = path.read_bytes()
    cut = tmp_path / "task_events-part-00001-of-00500.csv.gz"
    cut.write_bytes(data[: len(data) - 12])  # drop the gzip trailer and some of the stream
    result = convert("google2011", [cut], options=google2011.Options(machines=10))
    assert result.bad.counts.get("truncated or corrupt file") == 1
    assert result.stats["rows read"] >= 1


@pytest.mark.parametrize("row, reason", [
    ("p9,12000,16384,1,1000,,LS,Running,0,500", "wrong number of columns"),
    ("p9,lots,16384,1,1000,,LS,Running,0,500,100", "unparsable field"),
    ("p9,999000,16384,0,0,,LS,Running,0,500,100", "impossible demand"),       # 999 cores: no node
    ("p9,1000,1024,1,1000,A100,LS,Running,0,500,100", "impossible demand"),   # no A100 node
    ("p9,1000,1024,2,500,,LS,Running,0,500,100", "impossible demand"),        # sharing needs one GPU
])
def test_alibaba_bad_rows_counted_with_line_numbers(tmp_path, row, reason):
    path = alibaba_sample(tmp_path, row + "\n")
    result = convert("alibaba-gpu2023", [path])
    assert result.bad.counts == {reason: 1}
    assert result.bad.examples[reason][0].startswith(f"{path}:6")   # header + 4 pods, then the bad row
    assert len(result.scenario["jobs"]) == 3                        # the good rows are all there
    with pytest.raises(TraceError, match=f"{path}:6.*--strict"):
        convert("alibaba-gpu2023", [path], strict=True)


def test_truncated_last_line(tmp_path):
    path = alibaba_sample(tmp_path, "p9,1000,1024,0,0,,LS,Runn")   # cut mid-row, no newline
    result = convert("alibaba-gpu2023", [path])
    assert result.bad.counts == {"truncated last line": 1}


def test_missing_column_is_an_error_naming_it(tmp_path):
    write(tmp_path / "openb_node_list_all_node.csv", NODE_LIST)
    path = write(tmp_path / "pods.csv", POD_HEADER.replace(",qos", "") + "\n")
    with pytest.raises(TraceError, match="missing column qos"):
        convert("alibaba-gpu2023", [path])


def test_bad_data_keeps_the_first_few_locations():
    bad = BadData()
    for line in range(1, 9):
        bad.add("unparsable field", f"f.csv:{line}", "x")
    assert bad.counts["unparsable field"] == 8
    assert bad.examples["unparsable field"] == [f"f.csv:{n}: x" for n in range(1, 6)]   # EXAMPLES_KEPT = 5
    assert bad.lines() == ["8 x unparsable field (first at f.csv:1: x; f.csv:2: x; f.csv:3: x; f.csv:4: x; "
                           "f.csv:5: x, ...)"]


def test_sampling_is_stable_and_about_the_fraction():
    kept = [k for k in range(10_000) if sample_keep(str(k), 0.25, seed=3)]
    assert kept == [k for k in range(10_000) if sample_keep(str(k), 0.25, seed=3)]
    assert 2_300 < len(kept) < 2_700   # 25% of 10,000 = 2,500, +-200 (about 4.6 standard deviations)
    assert kept != [k for k in range(10_000) if sample_keep(str(k), 0.25, seed=4)]


# --- the command line -------------------------------------------------------------------------

def test_cli_convert_writes_yaml_and_json(tmp_path, capsys):
    out_yaml, out_json = tmp_path / "s.yaml", tmp_path / "s.json"
    assert main(["trace", "convert", "sls", str(SLS_SAMPLE), "-o", str(out_yaml)]) == 0
    assert main(["trace", "convert", "sls", str(SLS_SAMPLE), "-o", str(out_json)]) == 0
    from_yaml = yaml.safe_load(out_yaml.read_text())
    assert from_yaml == json.loads(out_json.read_text())
    assert "&id" not in out_yaml.read_text()       # no YAML anchors for shared capacities
    out = capsys.readouterr().out
    assert "jobs: 3" in out and "bad data: none" in out


def test_cli_strict_exits_2_and_writes_nothing(tmp_path, capsys):
    path = alibaba_sample(tmp_path, "p9,lots,16384,1,1000,,LS,Running,0,500,100\n")
    out = tmp_path / "s.yaml"
    assert main(["trace", "convert", "alibaba-gpu2023", str(path), "-o", str(out), "--strict"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:6" in err and "unparsable field" in err and "Traceback" not in err
    assert not out.exists()
    assert list(tmp_path.glob(".s.yaml.*")) == []   # no temporary file left behind


@pytest.mark.parametrize("argv, fragment", [
    (["--window", "5"], "--window"),
    (["--sample", "0"], "--sample"),
    (["--node-capacity", "cpu=x"], "--node-capacity"),
    (["--limit", "0"], "--limit"),
])
def test_cli_bad_options_exit_2_naming_the_flag(tmp_path, capsys, argv, fragment):
    rc = main(["trace", "convert", "sls", str(SLS_SAMPLE), "-o", str(tmp_path / "s.yaml"), *argv])
    assert rc == 2
    assert fragment in capsys.readouterr().err


def test_cli_missing_input_exits_2(tmp_path, capsys):
    assert main(["trace", "convert", "swim", str(tmp_path / "nope.tsv"), "-o", str(tmp_path / "s.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_simulate_kind_path(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", f"sls:{SLS_SAMPLE}", "--policy", "drf", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["jobs"]) == ["job_1", "job_2-0", "job_2-1"]
    assert all(j["finish"] is not None for j in summary["jobs"].values())


def test_compare_kind_path_bad_trace_exits_2(tmp_path, capsys):
    rc = main(["compare", f"swim:{tmp_path / 'missing.tsv'}", "--policies", "drf,fifo", "--out", str(tmp_path / "o")])
    assert rc == 2
    assert "no such file" in capsys.readouterr().err


def test_every_kind_is_registered_with_the_contract_names():
    assert set(KINDS) == {"google2011", "alibaba-gpu2023", "alibaba-dlrm2025", "swim", "sls",
                          # job histories (issue 23)
                          "sacct", "kueue-workloads", "csv", "fairshare-db"}


# --- slices of the shared traces ---------------------------------------------------------------

SLICES = [
    # (kind, path under ../shared/traces, options, rows read, bad-data reasons the slice really has)
    ("google2011", "google-2011/task_events-part-00001-of-00500.csv.gz", google2011.Options(machines=2000), 20_000,
     {"job without a resource request"}),   # job 4121195473 asks for nothing (requests empty or 0)
    ("alibaba-gpu2023", "alibaba-gpu-2023/openb_pod_list_gpuspec33.csv", None, 400, set()),
    ("alibaba-dlrm2025", "alibaba-dlrm-2025", None, 600, set()),
    ("swim", "swim-facebook/FB-2010_samples_24_times_1hr_0.tsv", None, 300, set()),
]


@needs_traces
@pytest.mark.parametrize("kind, rel, options, limit, known_bad", SLICES, ids=[s[0] for s in SLICES])
def test_shared_trace_slices_convert_load_and_simulate(tmp_path, kind, rel, options, limit, known_bad):
    from fairshare.policies import make_policy
    from fairshare.sim import SimOptions, simulate

    result = convert(kind, [TRACES / rel], CommonOptions(limit=limit), options)
    assert set(result.bad.counts) == known_bad, result.bad.lines()
    assert result.stats.get("rows read", limit) == limit
    sc = parse_scenario(result.scenario, kind)
    tasks = sum(job.total_count for job in sc.jobs)
    assert tasks == sum(t["count"] for j in result.scenario["jobs"] for t in j["tasks"]) > 0
    if kind in ("google2011", "swim"):
        return  # thousands of long tasks: the conversion is the point here; the simulation is benchmarked
    run = simulate(sc, "drf", SimOptions(seed=0))
    assert run.tasks_completed == tasks   # every converted task runs to completion
