"""Generic CSV histories (traces/csv_history.py): the column mapping, time formats, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from history_helpers import bytes_before_first

from fairshare.traces import TraceError, convert
from fairshare.traces.base import CommonOptions
from fairshare.traces.common import BadData
from fairshare.traces.csv_history import Options, _open

COLUMNS = "submit=SubmitTime,start=StartTime,end=EndTime,queue=Team,job=JobId,cpu=CPUs,memory=MemGB,gpu=GPUs"
HEADER = "JobId,Team,SubmitTime,StartTime,EndTime,CPUs,MemGB,GPUs"


def write(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    path = tmp_path / "history.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_the_column_mapping_with_iso_times(tmp_path):
    path = write(tmp_path, [
        "j1,ads.batch,2026-02-01T08:00:00Z,2026-02-01T08:00:30Z,2026-02-01T08:10:30Z,4,16,0",
        "j1,ads.batch,2026-02-01T08:00:00Z,2026-02-01T08:01:00Z,2026-02-01T08:06:00Z,4,16,0",
        "j2,search,2026-02-01T08:05:00+01:00,2026-02-01T07:06:00Z,,2,8,1",  # +01:00: 07:05 UTC, before j1
        "j3,search,2026-02-01T08:07:00Z,,,1,1,0",
        "j4,search,soon,2026-02-01T08:07:00Z,2026-02-01T08:08:00Z,1,1,0",
    ])
    result = convert("csv", [path], options=Options(columns=COLUMNS))
    jobs = {j["name"]: j for j in result.scenario["jobs"]}
    assert list(jobs) == ["j2", "j1"]  # 07:05 UTC before 08:00
    # time 0 = 07:05 UTC; j1 at 08:00 = 3300 s; its two runs 08:00:30-08:10:30 and 08:01-08:06
    assert jobs["j2"]["submit"] == 0 and jobs["j1"]["submit"] == 3300
    assert jobs["j1"]["tasks"] == [{"demand": {"cpu": 4, "memory": 16}, "count": 2, "duration": [600, 300]}]
    assert jobs["j1"]["queue"] == "ads.batch"
    # j2 has no end: censored at the history's last time, 08:10:30 UTC: 08:10:30 - 07:06 = 3870 s
    assert jobs["j2"]["tasks"][0] == {"demand": {"cpu": 2, "memory": 8, "gpu": 1}, "count": 1, "duration": 3870}
    assert result.stats["tasks never started (skipped)"] == 1  # j3: no start
    assert result.bad.counts == {"unparsable field": 1}
    assert result.bad.examples["unparsable field"][0].startswith(f"{path}:6:")  # j4 (the header is line 1)


def test_trace_seconds_are_kept_and_durations_read(tmp_path):
    # a duration column instead of an end
    path = write(tmp_path, ["b,q,40,45,60,1,512", "a,q,100,130,60,2,2048"],
                 header="job,queue,t_submit,t_start,run_s,cores,mem_mib")
    options = Options(columns="submit=t_submit,start=t_start,duration=run_s,job=job,queue=queue,cpu=cores,"
                              "memory=mem_mib", time_format="seconds", memory_unit="MiB")
    result = convert("csv", [path], options=options)
    jobs = {j["name"]: j for j in result.scenario["jobs"]}
    # seconds: times kept as they are (time 0 is 0, not the first submit)
    assert jobs["b"]["submit"] == 40 and jobs["a"]["submit"] == 100
    # 512 MiB = 0.5 GiB, 2048 MiB = 2 GiB; duration column 60 s
    assert jobs["b"]["tasks"] == [{"demand": {"cpu": 1, "memory": 0.5}, "count": 1, "duration": 60}]
    assert jobs["a"]["tasks"] == [{"demand": {"cpu": 2, "memory": 2}, "count": 1, "duration": 60}]


def test_epoch_times_and_a_window(tmp_path):
    rows = [f"j{k},q,{1_700_000_000 + 100 * k},{1_700_000_000 + 100 * k + 5},{1_700_000_000 + 100 * k + 65},1,1,0"
            for k in range(10)]
    path = write(tmp_path, rows)
    # time 0 = the earliest submit (j0); the window keeps the jobs submitted in [300, 600): j3, j4, j5
    result = convert("csv", [path], CommonOptions(window_start_s=300, window_end_s=600),
                     Options(columns=COLUMNS, time_format="epoch"))
    assert [(j["name"], j["submit"]) for j in result.scenario["jobs"]] == [("j3", 300), ("j4", 400), ("j5", 500)]
    assert result.stats["jobs outside the window"] == 7


@pytest.mark.parametrize(("columns", "message"), [
    ("submit=a,begin=b,end=c,cpu=d", "unknown field 'begin'"),
    ("start=b,end=c,cpu=d", "the field 'submit' is required"),
    ("submit=a,start=b,cpu=d", "'end' or 'duration'"),
    ("submit=a,start=b,end=c", "at least one demand field"),
    ("submit=a,start", "expected FIELD=COLUMN"),
])
def test_a_bad_column_mapping_is_an_error_naming_the_field(tmp_path, columns, message):
    with pytest.raises(TraceError, match=message):
        convert("csv", [write(tmp_path, [])], options=Options(columns=columns))


def test_a_mapped_column_missing_from_the_header_names_field_and_column(tmp_path):
    path = write(tmp_path, ["j1,q,2026-02-01T08:00:00Z,2026-02-01T08:00:30Z,2026-02-01T08:10:30Z,4,16"],
                 header="JobId,Team,SubmitTime,StartTime,EndTime,CPUs,MemGB")
    with pytest.raises(TraceError, match=r":1: missing column GPUs.*--columns gpu=GPUs"):
        convert("csv", [path], options=Options(columns=COLUMNS))


def test_other_delimiters(tmp_path):
    path = tmp_path / "h.tsv"
    path.write_text("submit;start;end;cpu\n0;1;11;2\n")
    result = convert("csv", [path], options=Options(columns="submit=submit,start=start,end=end,cpu=cpu",
                                                    time_format="seconds", delimiter=";"))
    assert result.scenario["jobs"][0]["tasks"] == [{"demand": {"cpu": 2}, "count": 1, "duration": 10}]


def test_rows_are_read_incrementally(tmp_path, monkeypatch):
    path = write(tmp_path, [f"j{k},q,{k},{k + 1},{k + 2},1,1,0" for k in range(400_000)])
    columns = dict(item.split("=") for item in COLUMNS.split(","))
    taken = bytes_before_first(monkeypatch, path, lambda: _open(path, columns, ",", BadData(), None, 0)[1])
    assert path.stat().st_size > 10 * 2**20
    assert 0 < taken <= 2 * 2**20


def test_runs_out_of_order_are_bad_rows_and_do_not_set_time_zero(tmp_path):
    path = write(tmp_path, ["a,q,100,130,190,1,1,0",
                            "b,q,50,40,70,1,1,0",  # starts before its submit
                            "c,q,60,80,70,1,1,0"])  # ends before it starts
    result = convert("csv", [path], options=Options(columns=COLUMNS, time_format="epoch"))
    assert [(j["name"], j["submit"]) for j in result.scenario["jobs"]] == [("a", 0)]  # time 0 = a's submit, 100
    assert result.bad.counts == {"impossible times": 2}
    assert result.bad.examples["impossible times"] == [f"{path}:3: start before submit", f"{path}:4: end before start"]
