"""sacct -P histories (traces/sacct.py): the man page's example, arrays, steps, TRES, streaming."""

from __future__ import annotations

from pathlib import Path

import pytest
from history_helpers import bytes_before_first

from fairshare.traces import TraceError, convert
from fairshare.traces.base import CommonOptions
from fairshare.traces.common import BadData, LineReader
from fairshare.traces.sacct import Options, _file_runs, parse_tres, split_job_id

PEERS = Path(__file__).parent / "data" / "peers"
MAN_EXAMPLE = PEERS / "slurm" / "sacct_man_example.sacct"

HEADER = "JobID|JobName|Partition|Account|User|Submit|Start|End|State|ReqTRES|AllocTRES"
ROWS = [
    "100|train|gpu|physics|alice|2026-01-05T10:00:00|2026-01-05T10:01:00|2026-01-05T11:01:00|COMPLETED|"
    "billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1",
    "100.batch|batch||physics||2026-01-05T10:01:00|2026-01-05T10:01:00|2026-01-05T11:01:00|COMPLETED||"
    "cpu=8,gres/gpu=2,mem=64G,node=1",
    "100.extern|extern||physics||2026-01-05T10:01:00|2026-01-05T10:01:00|2026-01-05T11:01:00|COMPLETED||"
    "billing=8,cpu=8,gres/gpu=2,mem=64G,node=1",
    "101_1|sweep|cpu|chem|bob|2026-01-05T10:05:00|2026-01-05T10:06:00|2026-01-05T10:16:00|COMPLETED|"
    "cpu=2,mem=4000M,node=1|cpu=2,mem=4000M,node=1",
    "101_2|sweep|cpu|chem|bob|2026-01-05T10:05:00|2026-01-05T10:06:00|2026-01-05T10:26:00|COMPLETED|"
    "cpu=2,mem=4000M,node=1|cpu=2,mem=4000M,node=1",
    "101_[3-4]|sweep|cpu|chem|bob|2026-01-05T10:05:00|Unknown|Unknown|PENDING|cpu=2,mem=4000M,node=1|",
    "102|mpi|cpu|chem|carol|2026-01-05T10:10:00|2026-01-05T10:30:00|2026-01-05T10:40:00|COMPLETED|"
    "cpu=64,mem=256G,node=2|cpu=64,mem=256G,node=2",
    "103|x|cpu|physics|alice|2026-01-05T10:20:00|None|2026-01-05T10:25:00|CANCELLED by 1000|cpu=1,mem=1G,node=1|",
    "104|y|cpu|physics|alice|2026-01-05T10:30:00|2026-01-05T10:31:00|Unknown|RUNNING|cpu=4,mem=8G,node=1|"
    "cpu=4,mem=8G,node=1",
    "105|z|cpu|physics|alice|yesterday|2026-01-05T10:31:00|2026-01-05T10:32:00|COMPLETED|cpu=1,mem=1G|cpu=1",
    "106|short|cpu|physics",
]


def write(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    path = tmp_path / "history.sacct"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def jobs_by_name(scenario: dict) -> dict[str, dict]:
    return {j["name"]: j for j in scenario["jobs"]}


def test_the_man_page_example_gives_its_start_times_and_durations():
    result = convert("sacct", [MAN_EXAMPLE])
    jobs = jobs_by_name(result.scenario)
    # no Submit column: submit = Start, time 0 = 11:33:16 (job 2's start)
    assert {n: j["submit"] for n, j in jobs.items()} == {"2": 0, "3": 125, "4": 125, "5": 465}
    # 11:59:01 - 11:33:16 = 25 min 45 s = 1545 s; 11:45:21 - 11:35:21 = 600 s
    assert jobs["2"]["tasks"][0]["duration"] == 1545
    assert jobs["4"]["tasks"][0]["duration"] == 600
    # 3 and 5 RUNNING (End Unknown): censored at the history's last time, 11:59:01:
    # 11:59:01 - 11:35:21 = 1420 s; 11:59:01 - 11:41:01 = 1080 s
    assert jobs["3"]["tasks"][0]["duration"] == 1420
    assert jobs["5"]["tasks"][0]["duration"] == 1080
    assert result.stats["runs censored at the history's end"] == 2
    # no TRES column: one cpu per job; 4 jobs overlap at 11:41:01, so the derived cluster has 4 nodes
    assert result.scenario["cluster"]["nodes"] == [{"name": "node", "count": 4, "capacity": {"cpu": 1}}]
    assert any("no Submit column" in n for n in result.notes)


def test_arrays_steps_multi_node_jobs_and_units(tmp_path):
    result = convert("sacct", [write(tmp_path, ROWS)])
    jobs = jobs_by_name(result.scenario)
    assert list(jobs) == ["100", "101", "102", "104"]  # submit order: 10:00, 10:05, 10:10, 10:30
    # time 0 = 10:00:00; 101 at 10:05 = 300 s, 102 at 10:10 = 600 s, 104 at 10:30 = 1800 s
    assert [j["submit"] for j in jobs.values()] == [0, 300, 600, 1800]
    assert jobs["100"]["queue"] == "physics"
    assert jobs["100"]["tasks"] == [{"demand": {"cpu": 8, "memory": 64, "gpu": 2}, "count": 1, "duration": 3600}]
    # array 101: tasks _1 and _2 are its two tasks; 4000M = 4000/1024 GiB = 3.90625; 10 and 20 minutes
    assert jobs["101"]["tasks"] == [{"demand": {"cpu": 2, "memory": 3.90625}, "count": 2, "duration": [600, 1200]}]
    # node=2: two tasks of 64/2 cpu and 256/2 GiB, 10:30 -> 10:40
    assert jobs["102"]["tasks"] == [{"demand": {"cpu": 32, "memory": 128}, "count": 2, "duration": 600}]
    # 104 RUNNING: censored at 11:01:00 (job 100's end, the history's last time): 11:01 - 10:31 = 1800 s
    assert jobs["104"]["tasks"][0]["duration"] == 1800
    # the pending remainder 101_[3-4] and 103 (Start None: cancelled before it started)
    assert result.stats["tasks never started (skipped)"] == 2
    assert result.stats["job steps (skipped)"] == 2
    # bad rows are counted with their line numbers (the header is line 1)
    assert result.bad.counts == {"unparsable field": 1, "wrong number of columns": 1}
    assert result.bad.examples["unparsable field"][0].startswith(f"{tmp_path / 'history.sacct'}:11:")
    assert result.bad.examples["wrong number of columns"][0].startswith(f"{tmp_path / 'history.sacct'}:12:")


def test_queue_choice_alloc_tres_and_queue_map(tmp_path):
    path = write(tmp_path, ROWS[:1] + ROWS[3:5])
    queue_map = tmp_path / "map.yaml"
    queue_map.write_text("physics.alice: research.ml\n")
    result = convert("sacct", [path], options=Options(queue="account.user", tres="alloc",
                                                      queue_map=str(queue_map)))
    jobs = jobs_by_name(result.scenario)
    assert jobs["100"]["queue"] == "research.ml"
    assert jobs["101"]["queue"] == "chem.bob"  # not in the map: its own name, and a note says so
    assert any("not in --queue-map" in n and "chem.bob" in n for n in result.notes)
    assert [q["name"] for q in result.scenario["queues"]] == ["research", "chem"]


def test_a_missing_column_is_an_error_naming_it(tmp_path):
    path = write(tmp_path, [], header="JobID|Submit|Start")
    with pytest.raises(TraceError, match=r":1: missing column End"):
        convert("sacct", [path])


def test_tres_parsing():
    assert parse_tres("cpu=4,mem=16G,gres/gpu=1,node=1,billing=4") == {"cpu": 4, "memory": 16, "gpu": 1, "node": 1}
    assert parse_tres("cpu=1,mem=512M") == {"cpu": 1, "memory": 0.5}
    assert parse_tres("mem=1.5T") == {"memory": 1536}
    assert parse_tres("mem=2048") == {"memory": 2}  # no unit: megabytes
    assert parse_tres("gres/gpu:a100=2,gres/gpu:v100=1") == {"gpu": 3}
    with pytest.raises(ValueError, match="mem=4Q"):
        parse_tres("mem=4Q")


def test_job_ids():
    assert split_job_id("123") == ("123", None, False)
    assert split_job_id("123_4") == ("123", "4", False)
    assert split_job_id("123_[1-3]") == ("123", "[1-3]", False)
    assert split_job_id("123+1") == ("123", "+1", False)
    assert split_job_id("123.batch")[2] and split_job_id("123_4.0")[2]


def test_rows_are_read_incrementally(tmp_path, monkeypatch):
    """Streaming: the first run comes out after a block of the file, not all of it."""
    path = tmp_path / "big.sacct"
    with open(path, "w") as out:
        out.write(HEADER + "\n")
        for k in range(60_000):  # about 13 MB
            out.write(ROWS[0].replace("100|", f"{k}|", 1) + "\n")
    bad = BadData()
    taken = bytes_before_first(monkeypatch, path, lambda: _file_runs(
        path, LineReader(path, bad), Options(), bad, {"job steps (skipped)": 0}, set()))
    assert path.stat().st_size > 10 * 2**20
    assert 0 < taken <= 2 * 2**20  # LineReader's 1 MiB buffer (and the text decoder's look-ahead)


def test_a_big_generated_history_converts(tmp_path):
    path = tmp_path / "big.sacct"
    with open(path, "w") as out:
        out.write(HEADER + "\n")
        for k in range(20_000):
            minute = k % 600
            out.write(f"{k}_1|j|cpu|acct{k % 7}|u|2026-01-05T10:00:00|2026-01-05T{10 + minute // 60:02d}:"
                      f"{minute % 60:02d}:00|2026-01-05T{10 + minute // 60:02d}:{minute % 60:02d}:30|COMPLETED|"
                      f"cpu=1,mem=1G,node=1|\n")
    result = convert("sacct", [path], CommonOptions(sample=0.5))
    kept = result.stats["jobs"]
    assert 9_000 < kept < 11_000  # the stable hash keeps about half
    assert result.stats["jobs sampled out"] == 20_000 - kept
    assert len(result.scenario["queues"]) == 7


def test_a_given_cluster_size_and_a_demand_it_cannot_hold(tmp_path):
    result = convert("sacct", [write(tmp_path, ROWS[:9])],
                     options=Options(machines=5, node_capacity="cpu=16,memory=64,gpu=2"))
    assert result.scenario["cluster"]["nodes"] == [{"name": "node", "count": 5,
                                                    "capacity": {"cpu": 16, "memory": 64, "gpu": 2}}]
    # job 102's tasks (32 cpu, 128 GiB each) fit no node of 16 cpu: bad rows, named
    assert result.bad.counts == {"impossible demand": 1}
    assert "cpu=32, memory=128 fits no node" in result.bad.examples["impossible demand"][0]
