"""The first hour (issue 19): the README's and the docs' example commands print their
headline effect in the terminal, not only in the files. Each expected number is derived
from the scenario (its comment says how), never copied from a run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fairshare.cli import main
from fairshare.report.terminal import human_duration

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def seconds(text: str) -> float:
    """Back from :func:`human_duration`: ``45 s``, ``3m 19s``, ``1h 02m``, ``2d 03h``."""
    if text.endswith(" s"):
        return float(text[:-2])
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([dhms])", text))


def queue_rows(stdout: str) -> dict[tuple[str, str], list[str]]:
    """The per-queue table's rows, (queue, policy) -> cells split on runs of 2+ spaces
    (a continuation row repeats the queue above it)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("queue "))
    header = re.split(r" {2,}", lines[start])
    rows: dict[tuple[str, str], list[str]] = {}
    queue = ""
    for line in lines[start + 2:]:
        if not line or not (line[0] in " -" or line[0].isalnum()) or line.startswith("fair share:"):
            break
        if line.startswith("--"):
            continue
        cells = re.split(r" {2,}", line.strip())
        if line.startswith(" "):
            cells = [queue, *cells]
        queue = cells[0]
        policy = cells[1] if header[1] == "policy" else ""
        rows[(queue, policy)] = cells
    return rows


def starvation_cell(cell: str) -> tuple[float, str | None]:
    if cell == "none":
        return 0.0, None
    m = re.fullmatch(r"(.+) \((\S+)\)", cell)
    return seconds(m.group(1)), m.group(2)


@pytest.mark.parametrize("value, text", [
    (45, "45 s"), (0.5, "0.5 s"), (33.2944, "33.3 s"), (0.025, "0.025 s"),
    (199, "3m 19s"),          # 3*60 + 19
    (3720, "1h 02m"),         # 3600 + 2*60
    (3960, "1h 06m"),         # 3600 + 6*60
    (2 * 86400 + 3 * 3600, "2d 03h"),
    (None, "-"),
])
def test_human_durations(value, text):
    assert human_duration(value) == text


def test_starvation_example_shows_n21_starving_under_naive_hdrf_only(tmp_path: Path, capsys):
    # README / docs/simulation.md: H-DRF Sec. 3.3, Fig. 4(a). Under hdrf-naive, n22 (GPU)
    # arrives at 0.5 s and from then on n2's dominant share (GPU) stays at its fair share,
    # so n21 (CPU) gets no CPU until the horizon: starved for about 200 - 1 s. H-DRF keeps
    # n21 at about 5 tasks, so it never waits more than a task's 1 s.
    code = main(["compare", str(EXAMPLES / "starvation.yaml"), "--policies", "hdrf-naive,hdrf", "--until", "200",
                 "--out", str(tmp_path / "st")])
    assert code == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith(("hdrf-naive ", "hdrf "))}
    for policy in ("hdrf-naive", "hdrf"):
        # every job always has a next task: none finishes, the run is cut at --until 200
        assert "horizon 3m 20s (200 s, cut by --until); jobs finished 0/3" in lines[policy]
        assert "makespan" not in lines[policy]
    assert re.search(r"longest starvation (.+) \(n21\)", lines["hdrf-naive"])
    rows = queue_rows(out)
    naive_s, naive_job = starvation_cell(rows[("n2", "hdrf-naive")][4])
    hdrf_s, _ = starvation_cell(rows[("n2", "hdrf")][4])
    assert naive_job == "n21" and naive_s >= 190
    assert hdrf_s < 10
    # n1 holds only CPU jobs: its H-DRF share is half the CPUs (two queues, weight 1)
    assert rows[("n1", "hdrf")][3] == "50.00%"


def test_preemption_example_prints_preemptions_and_the_late_tenant_waits(tmp_path: Path, capsys):
    # examples/preemption.yaml: training's 32 tasks of 4 CPUs fill the 4 x 16 CPUs for an
    # hour; queries arrive at 60 s. Without preemption they wait for the first training
    # task to end (3600 - 60 s); with --preempt (after 30 s by default) for about 30 s.
    scen = str(EXAMPLES / "preemption.yaml")
    assert main(["simulate", scen, "--policy", "hdrf", "--out", str(tmp_path / "wait"), "--track-fair-share"]) == 0
    wait = capsys.readouterr().out
    assert main(["simulate", scen, "--policy", "hdrf", "--out", str(tmp_path / "pre"), "--preempt"]) == 0
    pre = capsys.readouterr().out
    waited, job = starvation_cell(queue_rows(wait)[("product", "")][3])
    assert job == "queries" and waited >= 3600 - 60 - 1
    assert "preemptions" not in wait.splitlines()[0]
    m = re.search(r"; preemptions (\d+) \(work lost (.+) of task time\)", pre.splitlines()[0])
    assert m and int(m.group(1)) > 0
    starved, job = starvation_cell(queue_rows(pre)[("product", "")][3])
    assert job == "queries" and 30 <= starved < 60
    # both runs measure time below fair share: its column is there
    assert "below fair share" in wait and "below fair share" in pre
    # every job finishes: the end is a makespan
    assert pre.startswith("makespan ") and "jobs finished 2/2" in pre


def test_format_json_prints_the_summary_on_stdout(tmp_path: Path, capsys):
    scen = str(EXAMPLES / "starvation.yaml")
    assert main(["simulate", scen, "--policy", "hdrf", "--until", "20", "--out", str(tmp_path / "s"),
                 "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "s" / "summary.json").read_text())
    assert main(["compare", scen, "--policies", "hdrf-naive,hdrf", "--until", "20", "--out", str(tmp_path / "c"),
                 "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "c" / "compare.json").read_text())


def test_demo_scenario_shows_dff_using_the_mics_under_contention(tmp_path: Path, capsys):
    # examples/dff_contended.yaml (`make demo`'s online part): the MIC jobs are 45 + 70
    # tasks of 2 MICs for 60 s, 13800 MIC-seconds whatever the policy, on 21 MICs, so a
    # run's MIC utilization is 13800 / (21 x makespan): DFF, keeping the MICs busier while
    # the CPUs are full, must finish sooner and show the higher figure.
    assert main(["compare", str(EXAMPLES / "dff_contended.yaml"), "--policies", "drf,hdrf,dff", "--seed", "1",
                 "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    makespan, mic = {}, {}
    for line in out.splitlines():
        m = re.match(r"(\S+) +makespan .* \((\d+(?:\.\d+)?) s\); .*mic (\d+\.\d+)%", line)
        if m:
            makespan[m.group(1)] = float(m.group(2))
            mic[m.group(1)] = float(m.group(3))
    assert set(mic) == {"drf", "hdrf", "dff"}
    for policy in mic:
        assert mic[policy] == pytest.approx(100 * 13800 / (21 * makespan[policy]), abs=0.01)
    assert mic["dff"] > max(mic["drf"], mic["hdrf"])
    # n4 holds only job5 (MIC): its mean dominant share is its MIC share, higher under dff
    rows = queue_rows(out)
    n4 = {p: float(rows[("n4", p)][2].rstrip("%")) for p in ("drf", "hdrf", "dff")}
    assert n4["dff"] > max(n4["drf"], n4["hdrf"])
    # the compare report overlays each top-level queue's share across the policies, with
    # the fair share line (four queues, weight 1 each: one plot per queue)
    html = (tmp_path / "demo" / "report.html").read_text()
    for queue in ("n1", "n2", "n3", "n4"):
        assert f"Dominant share of {queue}" in html
    assert html.count("fair share (hdrf)") == 4


def test_reports_say_nothing_finished_instead_of_empty_plots(tmp_path: Path, capsys):
    # starvation.yaml's jobs are unbounded: cut at --until 200, none finishes
    assert main(["compare", str(EXAMPLES / "starvation.yaml"), "--policies", "hdrf-naive,hdrf", "--until", "200",
                 "--out", str(tmp_path / "st")]) == 0
    for report in ("report.html", "hdrf/report.html"):
        html = (tmp_path / "st" / report).read_text()
        assert "Nothing finished in this run (the run was cut at --until 200 s)" in html
        assert "Completion-time CDF" not in html


def test_compare_bar_title_counts_the_unfinished_jobs(tmp_path: Path, capsys):
    # quick: 1 task of 1 s, finishes; slow: 1 task of 100 s, unfinished at --until 10.
    # Under each of the two policies one job is unfinished: 2 bars drawn at 0.
    scen = tmp_path / "two.yaml"
    scen.write_text("cluster: {capacity: {cpu: 2}}\n"
                    "jobs:\n"
                    "  - {name: quick, tasks: [{demand: {cpu: 1}, count: 1, duration: 1}]}\n"
                    "  - {name: slow, tasks: [{demand: {cpu: 1}, count: 1, duration: 100}]}\n")
    assert main(["compare", str(scen), "--policies", "drf,fifo", "--until", "10", "--out", str(tmp_path / "c")]) == 0
    html = (tmp_path / "c" / "report.html").read_text()
    assert "Completion time per job (2 unfinished drawn at 0)" in html
    assert "unfinished: 0" not in html
    assert "horizon 10 s (cut by --until); jobs finished 1/2" in capsys.readouterr().out


SHARED_TRACES = ROOT.parent / "shared" / "traces"


def documented_commands(doc: Path, after: str) -> list[list[str]]:
    """The ``$ fairshare ...`` commands of the first console block after the text
    ``after`` in ``doc`` (continuation lines joined), as argument lists without
    ``fairshare``: the test runs what the docs say, not a copy of it."""
    text = doc.read_text(encoding="utf-8")
    block = text[text.index(after):]
    block = block[block.index("```console"):]
    block = block[:block.index("```", 3)].replace("\\\n", " ")
    return [line[len("$ fairshare "):].split() for line in block.splitlines() if line.startswith("$ fairshare ")]


@pytest.mark.skipif(not (SHARED_TRACES / "swim-facebook").is_dir(),
                    reason="the shared SWIM trace (../shared/traces/swim-facebook) is not on this machine")
def test_first_trace_example_shows_fifo_head_of_line_blocking(tmp_path: Path, capsys, monkeypatch):
    # docs/traces.md's first example: fifo's mean completion and longest starvation are far
    # above the fair policies' (a large job at the head of fifo's line holds the CPUs)
    convert, compare = documented_commands(ROOT / "docs" / "traces.md", "**A first trace, where the policies differ.**")
    monkeypatch.chdir(tmp_path)
    convert = [arg.replace("../shared/traces", str(SHARED_TRACES)) for arg in convert]
    assert main(convert) == 0
    capsys.readouterr()
    assert main(compare) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if " makespan " in line}
    assert set(lines) == {"drf", "hdrf", "fifo"}

    def figure(policy: str, name: str) -> float:
        cell = re.search(rf"{name} (.+?)(;|$)", lines[policy]).group(1)
        return starvation_cell(cell)[0] if name == "longest starvation" else seconds(cell)

    for fair in ("drf", "hdrf"):
        assert figure("fifo", "mean completion") > 3 * figure(fair, "mean completion")
        assert figure("fifo", "longest starvation") > 10 * figure(fair, "longest starvation")
    # the docs quote the run: their headline figures are this run's
    doc = (ROOT / "docs" / "traces.md").read_text(encoding="utf-8")
    for policy in ("drf", "fifo"):
        assert lines[policy] in doc, policy
