"""Streaming runs (``Simulator(arrivals=, sink=)``, ``sim.stream.StreamingOutput``).

The oracle is the up-front run: on a scenario whose jobs are listed in submit order, a
streaming run must write the same ``summary.json`` (fairness gap off) and ``timeline.csv``
byte for byte, while holding only the jobs in the system. Random workloads cover what the
hand examples do not: several nodes, node failures and additions, every duration kind,
ties of submit times, multi-class jobs, hierarchical queues, a stop time before the last
arrivals, jobs that fit nowhere.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from fairshare.engine.events import JobArrived
from fairshare.engine.scheduler import Scheduler
from fairshare.engine.step import Engine
from fairshare.model import parse_scenario
from fairshare.model.scenario import PreemptionConfig
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, SimulationError, Simulator
from fairshare.sim.durations import DurationSampler
from fairshare.sim.metrics import summarize
from fairshare.sim.output import write_outputs
from fairshare.sim.sink import ResultCollector
from fairshare.sim.stream import StreamingOutput, entry_text


def random_scenario(seed: int, *, jobs: int = 30, events: str | None = "churn", hierarchical: bool = True):
    """Jobs listed in submit order (ties kept in list order), on a few nodes; job j7 fits
    only on node ``big``. ``events``: "churn" (a node fails and comes back, ``big`` fails
    at 12 s), "big down" (``big`` fails at 0.1 s: j7 never runs) or None."""
    rng = random.Random(seed)
    durations = [3, [2, 5, 1], {"dist": "exponential", "mean": 4}, {"dist": "uniform", "low": 1, "high": 6},
                 {"dist": "lognormal", "mu": 1, "sigma": 0.5}, {"dist": "fixed", "value": 2.5}]
    queues = [{"name": "a", "children": [{"name": "x"}, {"name": "y", "weight": 2}]}, {"name": "b"}]
    leaves = ["a.x", "a.y", "b"]
    submit = 0.0
    job_list = []
    for k in range(jobs):
        if rng.random() < 0.6:  # (else the same submit time as the job before: a tie)
            submit += rng.choice([0.5, 1, 2.25, 3])
        classes = [{"class": f"c{c}", "demand": {"cpu": rng.choice([1, 2, 3]), "mem": rng.choice([1, 2, 4])},
                    "count": rng.randint(1, 6), "duration": rng.choice(durations)}
                   for c in range(rng.choice([1, 1, 2]))]
        if k == 7:  # fits only on node big
            classes = [{"demand": {"cpu": 8}, "count": 1}]
        job = {"name": f"j{k}", "submit": submit, "tasks": classes}
        if hierarchical:
            job["queue"] = rng.choice(leaves)
        job_list.append(job)
    data = {"resources": ["cpu", "mem"],
            "cluster": {"nodes": [{"name": "n", "count": 3, "capacity": {"cpu": 4, "mem": 8}},
                                  {"name": "big", "capacity": {"cpu": 8, "mem": 16}}]},
            "jobs": job_list}
    if hierarchical:
        data["queues"] = queues
    if events == "churn":
        data["events"] = [{"time": 5, "node_fail": "n-1"}, {"time": 9.5, "node_add": {"name": "n-1"}},
                          {"time": 12, "node_fail": "big"}]
    elif events == "big down":
        data["events"] = [{"time": 0.1, "node_fail": "big"}]
    return parse_scenario(data, "<stream test>")


def run_both(tmp_path, scenario, policy: str, options: SimOptions):
    """The up-front run's files and the streaming run's, with the streaming simulator."""
    up = Simulator(scenario, make_policy(policy), options).run()
    write_outputs(tmp_path / "upfront", up, summarize(up, fairness_gap=False, scenario_name="s"))
    empty = replace(scenario, jobs=())
    sink = StreamingOutput(empty, tmp_path / "stream", scenario_name="s")
    sim = Simulator(empty, make_policy(policy), options, arrivals=iter(scenario.jobs), sink=sink)
    streamed = sim.run()
    sink.finish(streamed)
    return up, streamed, sim


def same_files(tmp_path) -> None:
    for name in ("summary.json", "timeline.csv"):
        a = (tmp_path / "upfront" / name).read_bytes()
        b = (tmp_path / "stream" / name).read_bytes()
        assert a == b, name


@pytest.mark.parametrize("policy", ["drf", "hdrf", "dff", "fifo"])
@pytest.mark.parametrize("seed", [0, 1])
def test_streaming_writes_the_upfront_files(tmp_path, policy, seed):
    sc = random_scenario(seed)
    up, streamed, sim = run_both(tmp_path, sc, policy, SimOptions(seed=seed + 11, until=60))
    same_files(tmp_path)
    assert (streamed.end_time, streamed.tasks_completed, streamed.decisions, streamed.notes) == \
        (up.end_time, up.tasks_completed, up.decisions, up.notes)
    assert streamed.tasks_lost == up.tasks_lost > 0  # (the node failures hit running tasks)
    # what the streaming run still holds at the end: only the jobs left unfinished
    left = {name for name, o in up.jobs.items() if o.submitted and o.finish is None}
    assert left and set(sim.scheduler.jobs) == set(sim.arrivals.jobs) == left
    assert set(sim.engine.ledger._jobs) <= left and {name for name, _ in sim.durations._streams} == left


@pytest.mark.parametrize("entry", [
    {"submit": 0.1, "start": None, "finish": 12, "tasks_completed": 3, "mean_allocation": {"cpu": 1e-17, "gpu": 2.5},
     "queue": "a.\u00e9\"q\n", "gang_wait": True, "huge": 10 ** 30, "off": False},
    {"mean_allocation": {}, "x": -0.0},  # (an empty mapping: json writes "{}")
    {"nested": {"deeper": {"a": 1}}},  # (beyond the layout: json's own)
    {"list": [1, 2]},
    {},
])
def test_a_job_entry_is_the_text_json_writes(entry):
    """The streaming sink lays a job's entry out itself (json's indented encoder is slow):
    json's own text, for what it lays out and for what it hands to json."""
    for name in ("j1", "\u00e9\"x"):
        expected = "    " + json.dumps(name) + ": " + json.dumps(entry, indent=2, allow_nan=False).replace("\n", "\n    ")
        assert entry_text(name, entry) == expected


def test_a_job_entry_with_a_float_json_refuses_raises_as_json():
    with pytest.raises(ValueError, match="JSON compliant"):
        entry_text("j", {"mean_allocation": {"cpu": float("nan")}})


def test_a_streamed_result_is_not_summarized_from_rows(tmp_path):
    sc = random_scenario(0, events=None)
    _, streamed, _ = run_both(tmp_path, sc, "drf", SimOptions(until=20))
    assert streamed.streamed and streamed.rows == [] and streamed.jobs == {}
    with pytest.raises(ValueError, match="its summary comes from its sink"):
        summarize(streamed)


def test_streaming_until_before_the_last_arrivals(tmp_path):
    sc = random_scenario(2)
    last = sc.jobs[-1].submit_s
    up, streamed, _ = run_both(tmp_path, sc, "hdrf", SimOptions(seed=4, until=last / 2))
    same_files(tmp_path)
    assert not up.all_finished and not all(o.submitted for o in up.jobs.values())


def test_streaming_without_until_reports_the_stuck_job(tmp_path):
    sc = random_scenario(3, events="big down")
    up, streamed, _ = run_both(tmp_path, sc, "drf", SimOptions(seed=0))
    same_files(tmp_path)
    assert not streamed.all_finished
    assert streamed.notes == up.notes and "j7" in streamed.notes[0]


def test_streaming_all_finished_flat(tmp_path):
    sc = random_scenario(4, events=None, hierarchical=False)
    sc = replace(sc, jobs=tuple(j for j in sc.jobs if j.name != "j7"))
    up, streamed, _ = run_both(tmp_path, sc, "drf", SimOptions(seed=2))
    same_files(tmp_path)
    assert streamed.all_finished and streamed.end_time == up.end_time


def hog_scenario():
    # a job of queue b takes the whole cluster at 0 with long tasks (checkpointed every 5 s);
    # the others arrive later and wait more than ``after``: their queues preempt it
    sc = random_scenario(5, events=None)
    hog = parse_scenario({"resources": ["cpu", "mem"], "cluster": {"capacity": {"cpu": 1, "mem": 1}},
                          "jobs": [{"name": "hog", "queue": "b", "tasks": [
                              {"demand": {"cpu": 1, "mem": 1}, "count": 40, "duration": 400, "checkpoint": 5}]}],
                          "queues": [{"name": "a", "children": [{"name": "x"}, {"name": "y"}]}, {"name": "b"}]},
                         "<hog>").jobs[0]
    return replace(sc, jobs=(hog,) + sc.jobs)


def test_streaming_with_preemption(tmp_path):
    sc = hog_scenario()
    up, streamed, _ = run_both(tmp_path, sc, "hdrf",
                               SimOptions(seed=1, until=300, preemption=PreemptionConfig(after=3)))
    same_files(tmp_path)
    assert streamed.preemptions == up.preemptions > 0


@pytest.mark.parametrize("scenario, options", [
    (random_scenario(0), SimOptions(seed=11, until=60)),
    (hog_scenario(), SimOptions(seed=1, until=300, preemption=PreemptionConfig(after=3)))])
def test_a_stream_into_the_in_memory_sink_gives_the_upfront_result(scenario, options):
    """One sink interface (``sim.sink``): the ``ResultCollector`` an up-front run keeps its
    output in, given the same jobs as a stream, collects the same rows, demand changes,
    outcomes and preemption figures (the jobs come in scenario order)."""
    up = Simulator(scenario, make_policy("hdrf"), options).run()
    empty = replace(scenario, jobs=())
    got = Simulator(empty, make_policy("hdrf"), options, arrivals=iter(scenario.jobs), sink=ResultCollector()).run()
    assert not got.streamed and got.rows and got.jobs
    assert (got.rows, got.demand_changes, got.capacity_changes, got.jobs, got.end_time, got.notes) == \
        (up.rows, up.demand_changes, up.capacity_changes, up.jobs, up.end_time, up.notes)
    assert (got.preemptions, got.tasks_preempted, got.work_lost) == (up.preemptions, up.tasks_preempted, up.work_lost)
    assert list(got.jobs) == [j.name for j in scenario.jobs]


def test_no_jobs_at_all(tmp_path):
    sc = replace(random_scenario(0, events=None), jobs=())
    run_both(tmp_path, sc, "drf", SimOptions())
    same_files(tmp_path)


def test_durations_seeded_at_arrival_are_the_upfront_ones():
    # jobs in submit order: adding each at its arrival draws the seeds an up-front sampler draws
    sc = random_scenario(6)
    upfront = DurationSampler(sc.jobs, random.Random(9))
    streamed = DurationSampler((), random.Random(9))
    for job in sc.jobs:
        streamed.add(job)
        for j in range(len(job.classes)):
            for _ in range(3):
                assert streamed.sample(job, j) == upfront.sample(job, j)
        streamed.forget(job)
    assert streamed._streams == {} and streamed._lists == {}


def test_bad_streams_are_refused(tmp_path):
    sc = random_scenario(0, events=None)
    empty = replace(sc, jobs=())

    def streaming(jobs, options=SimOptions(until=100)):
        sink = StreamingOutput(empty, tmp_path / "out", timeline=False)
        return Simulator(empty, make_policy("drf"), options, arrivals=iter(jobs), sink=sink).run()

    with pytest.raises(SimulationError, match="submit order: job 'j0' submits at 0.0 s, after a job submitted at 5"):
        streaming([replace(sc.jobs[3], submit_s=5.0), sc.jobs[0]])
    unbounded = replace(sc.jobs[0], classes=(replace(sc.jobs[0].classes[0], count=None),))
    with pytest.raises(SimulationError, match="job 'j0' has an unbounded task count"):
        streaming([unbounded], SimOptions())
    with pytest.raises(SimulationError, match="job 'j0': unknown queue 'nowhere'"):
        streaming([replace(sc.jobs[0], queue="nowhere")])
    one = replace(sc.jobs[0].classes[0], demand=(1.0,))
    with pytest.raises(SimulationError, match="job 'j0': task class 'c0' has 1 demand amounts, the scenario has 2"):
        streaming([replace(sc.jobs[0], classes=(one,))])
    same_name = [sc.jobs[0], replace(sc.jobs[1], name="j0")]
    with pytest.raises(SimulationError, match="job 'j0' arrives while a job of that name is in the system"):
        streaming(same_name)
    with pytest.raises(SimulationError, match="scenario lists 30 job"):
        Simulator(sc, make_policy("drf"), arrivals=iter(()), sink=StreamingOutput(empty, tmp_path / "o2"))
    with pytest.raises(SimulationError, match="both arrivals and a sink"):
        Simulator(empty, make_policy("drf"), arrivals=iter(()))


def test_forget_only_a_finished_reported_job():
    sc = random_scenario(0, events=None, hierarchical=False)
    sch = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("drf"))

    class Executor:  # records nothing: the test finishes tasks by hand
        def nodes(self):
            return sc.cluster.nodes

        def poll(self):
            return []

        def start(self, launch, now):
            pass

        def kill(self, task_id):
            pass

    engine = Engine(sch, Executor())
    job = sc.jobs[0]
    engine.step(0.0, [JobArrived(job)])
    engine.changes()  # (from here on the engine's reader of the changes must read a finish first)
    with pytest.raises(ValueError, match="has not finished"):
        engine.forget(job.name)
    with pytest.raises(ValueError, match="not known"):
        sch.forget("nobody")
    for _ in range(job.total_count):
        task = next(t for t in sch.tasks.values() if t.job == job.name)
        sch.finish(task.task_id, 1.0)
        sch.schedule(1.0)
    assert sch.jobs[job.name].finished_at == 1.0
    with pytest.raises(ValueError, match="changes not reported"):
        engine.forget(job.name)
    assert any(j.name == job.name and j.finished for j in engine.changes().jobs)
    engine.forget(job.name)
    assert job.name not in sch.jobs and job.name not in engine.snapshot().jobs


def test_cli_simulate_stream_writes_the_same_files(tmp_path, capsys):
    from fairshare.cli import main

    # the bundled scenario lists its jobs in submit order: the same durations either way
    assert main(["simulate", "default", "--policy", "hdrf", "--out", str(tmp_path / "a"), "--seed", "2",
                 "--no-fairness-gap"]) == 0
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "report.html").write_text("an earlier run's")
    assert main(["simulate", "default", "--policy", "hdrf", "--out", str(tmp_path / "b"), "--seed", "2",
                 "--stream"]) == 0
    for name in ("summary.json", "timeline.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["summary.json", "timeline.csv"]
    assert "no report.html" in capsys.readouterr().out


def test_cli_simulate_stream_refuses_unbounded_jobs_before_writing(tmp_path, capsys):
    from fairshare.cli import main

    starvation = Path(__file__).resolve().parents[1] / "examples" / "starvation.yaml"
    assert main(["simulate", str(starvation), "--policy", "hdrf", "--out", str(tmp_path / "o"),
                 "--stream"]) == 2
    assert "--until: job(s) n11, n21, n22 have unbounded task counts" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
