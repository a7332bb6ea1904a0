"""The full-size Google 2011 generator (``fairshare.traces.google_full``): templates from
a hand-written task_events part, the initial population and its extended services, the
arrival process, determinism, laziness and the shared task classes.
"""

from __future__ import annotations

import gzip
import itertools
import os
from pathlib import Path

import pytest

from fairshare.sim import SimOptions, simulate
from fairshare.traces import TraceError, google_full

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("FAIRSHARE_TRACES", REPO.parent / "shared" / "traces"))
USER = "AbCdEfGh+rest/of/the/hash="


def row(t_s: float, job: int, task: int, event: int, priority: int = 9, cpu: str = "0.25", mem: str = "0.125") -> str:
    return f"{int(t_s * 1e6)},,{job},{task},,{event},{USER},2,{priority},{cpu},{mem},0.001,0"


@pytest.fixture
def templates(tmp_path) -> google_full.Templates:
    rows = [
        row(0, 1, 0, 1),                      # job 1 running at the start (submit 0): initial
        row(0, 4, 0, 1),                      # job 4 too; it never ends: censored over the whole window
        row(700, 2, 0, 0), row(700, 2, 0, 1),  # job 2 arrives at 700 - 600 = 100 s
        row(760, 2, 0, 4),                    # FINISH: 60 s
        row(800, 1, 0, 4),                    # job 1's run: 800 - 600 = 200 s
        row(820, 3, 0, 0, priority=0), row(830, 3, 0, 1, priority=0), row(830, 3, 1, 1, priority=0),  # job 3 at 220 s
        row(900, 3, 0, 4, priority=0), row(950, 3, 1, 4, priority=0),  # 70 s and 120 s
        row(1000, 1, 1, 7),                   # the last event: the window is 600 .. 1000, 400 s
    ]
    with gzip.open(tmp_path / "part.csv.gz", "wt") as f:
        f.write("\n".join(rows) + "\n")
    return google_full.templates_from_parts(tmp_path, ["part.csv.gz"])


def test_templates_split_initial_and_arriving(templates):
    assert templates.window_s == 400
    assert [j.name for j in templates.initial] == ["j1", "j4"]
    assert [(j.name, j.submit_s) for j in templates.arriving] == [("j2", 100), ("j3", 220)]
    assert templates.arrival_runs_mean == 1.5      # (1 run + 2 runs) / 2 jobs
    assert templates.initial_runs == 2


def test_initial_services_last_until_the_span_end(templates):
    # fraction 0.001 of 29 days = 2,505.6 s; j4's run lasted the whole 400 s window: extended to 2,505.6
    jobs = list(itertools.islice(google_full.generate(templates, 0.001, seed=1), 2))
    assert [(j.name, j.submit_s) for j in jobs] == [("i-j1", 0), ("i-j4", 0)]
    assert jobs[0].classes[0].duration == templates.initial[0].classes[0].duration   # 200 s: not censored
    assert dict(jobs[1].classes[0].duration.params) == {"value": pytest.approx(0.001 * 29 * 86400)}


def test_arrivals_are_poisson_at_the_full_rate_in_submit_order(templates):
    fraction = 0.002
    jobs = list(google_full.generate(templates, fraction, seed=3))
    arrivals = jobs[2:]
    span = fraction * google_full.FULL_SPAN_S                     # 5,011.2 s
    rate = (google_full.FULL_JOBS - 2) / google_full.FULL_SPAN_S   # 672,072 jobs / 29 days = 0.2682 per s
    expected = rate * span                                         # 1,344 arrivals
    assert abs(len(arrivals) - expected) < 4 * expected ** 0.5     # Poisson: sd = sqrt(mean) ~ 37
    times = [j.submit_s for j in arrivals]
    assert times == sorted(times) and 0 < times[0] and times[-1] < span
    assert len({j.name for j in jobs}) == len(jobs)                # unique names
    by_name = {j.name: j for j in templates.arriving}
    for job in arrivals[:50]:   # a copy of its template: the same queue and the very same task classes
        template = by_name[job.name.split("-", 1)[1]]
        assert job.queue == template.queue and job.classes is template.classes
    assert {j.name.split("-", 1)[1] for j in arrivals} == {"j2", "j3"}
    assert google_full.expected_size(templates, fraction)["jobs"] == pytest.approx(2 + expected)


def test_same_seed_same_jobs_and_lazy(templates):
    a = [(j.name, j.submit_s) for j in google_full.generate(templates, 0.001, seed=7)]
    b = [(j.name, j.submit_s) for j in google_full.generate(templates, 0.001, seed=7)]
    c = [(j.name, j.submit_s) for j in google_full.generate(templates, 0.001, seed=8)]
    assert a == b and a != c
    # the full size is ~672,000 jobs: taking the first 10 must not build them
    first = list(itertools.islice(google_full.generate(templates, 1.0, seed=7), 10))
    assert len(first) == 10


def test_materialized_scenario_simulates(templates):
    scenario = google_full.materialize(templates, google_full.generate(templates, 0.0002, seed=0))
    run = simulate(scenario, "hdrf", SimOptions(seed=0))
    assert run.all_finished
    assert run.tasks_completed == sum(j.total_count for j in scenario.jobs)


def test_bad_fraction_and_missing_parts(tmp_path, templates):
    with pytest.raises(ValueError, match="fraction"):
        list(google_full.generate(templates, 0, seed=0))
    with pytest.raises(TraceError, match="not found"):
        google_full.templates_from_parts(tmp_path / "nowhere")


@pytest.mark.skipif(not (TRACES / "google-2011").is_dir(), reason=f"Google 2011 parts not found under {TRACES}")
def test_real_parts_give_the_documented_templates():
    t = google_full.templates_from_parts(TRACES / "google-2011")
    assert (len(t.initial), len(t.arriving), t.initial_runs) == (3974, 3065, 164119)
    assert len(t.base.cluster.nodes) == 12583
    # full size: 3,974 initial jobs + 668,100 arrivals x 34.88 runs = ~23.5 million task runs
    assert google_full.expected_size(t, 1.0)["task runs"] == pytest.approx(23.47e6, rel=1e-3)


def test_streamed_generator_gives_the_materialized_run(templates, tmp_path):
    # the generator streamed into the simulator (what the benchmark runs) writes the files
    # of the up-front run on the materialized scenario: same jobs, same order, same durations
    from dataclasses import replace

    from fairshare.policies import make_policy
    from fairshare.sim import Simulator
    from fairshare.sim.metrics import summarize
    from fairshare.sim.output import write_outputs
    from fairshare.sim.stream import StreamingOutput

    scenario = google_full.materialize(templates, google_full.generate(templates, 0.001, seed=2))
    up = simulate(scenario, "hdrf", SimOptions(seed=2))
    write_outputs(tmp_path / "a", up, summarize(up, fairness_gap=False, scenario_name="g"))
    empty = replace(scenario, jobs=())
    sink = StreamingOutput(empty, tmp_path / "b", scenario_name="g")
    streamed = Simulator(empty, make_policy("hdrf"), SimOptions(seed=2),
                         arrivals=google_full.generate(templates, 0.001, seed=2), sink=sink).run()
    sink.finish(streamed)
    assert up.all_finished and streamed.tasks_completed == up.tasks_completed > 2
    for name in ("summary.json", "timeline.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
