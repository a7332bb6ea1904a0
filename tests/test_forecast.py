"""``engine/forecast.py``: the estimated start by a forward simulation, and the run times
it assumes when the job gives none."""

from __future__ import annotations

from fairshare.engine.forecast import RecentDurations, expected_seconds, forecast_start
from fairshare.model.jobs import Duration
from fairshare.model.loader import parse_scenario
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, Simulator

from test_sim_reasons import SCENARIO


def test_recent_durations_give_the_median_of_those_longer_than_the_task_has_run():
    recent = RecentDurations(keep=5)
    assert recent.expected("q") is None  # nothing finished yet
    for seconds in (9, 9, 9, 70, 90):
        recent.add("q", seconds)
    assert recent.expected("q") == 9  # median of 9, 9, 9, 70, 90
    assert recent.expected("q", ran=10) == (70 + 90) / 2  # a task past 10 s is one of the long ones
    assert recent.expected("q", ran=100) == 100  # outlived them all: it ends any moment
    assert recent.expected("other") == 9  # a queue with none: every queue's
    recent.add("q", 90)  # (keep 5: the first 9 goes)
    assert recent.expected("q") == 70  # median of 9, 9, 70, 90, 90


def test_expected_seconds_is_each_distributions_mean():
    assert expected_seconds(Duration("fixed", (("value", 7.0),))) == 7
    assert expected_seconds(Duration("list", (("values", (30, 40)),))) == 35
    assert expected_seconds(Duration("exponential", (("mean", 5.0),))) == 5
    assert expected_seconds(Duration("uniform", (("low", 5.0), ("high", 15.0)))) == 10


def test_with_the_durations_known_the_forecast_is_the_runs_start():
    # test_sim_reasons' run: at 1 s, C waits for a CPU; B ends at 5 s and C starts then
    sc = parse_scenario(SCENARIO, "forecast")
    sim = Simulator(sc, make_policy("drf"), SimOptions(until=1))
    sim.run()
    classes = {job.name: job.classes for job in sc.jobs}
    decisions = sim.scheduler.decisions

    def known(job: str, class_index: int, ran: float) -> float:
        return expected_seconds(classes[job][class_index].duration)

    assert forecast_start(sim.scheduler, "C", 1.0, known) == 5.0
    assert forecast_start(sim.scheduler, "C", 1.0, lambda job, k, ran: None) is None  # nothing known
    assert forecast_start(sim.scheduler, "B", 1.0, known) is None  # B runs: nothing to wait for
    assert sim.scheduler.decisions == decisions  # (on a copy)
