"""The scenario loader's sections (model/loader_*.py) on inputs the validation table of
test_validation.py does not cover: every bad value is a ScenarioError naming its field,
never a crash."""

from __future__ import annotations

import pytest

from fairshare.model import ScenarioError, parse_scenario


def with_duration(duration) -> dict:
    return {"cluster": {"capacity": {"cpu": 4}},
            "jobs": [{"name": "A", "tasks": [{"demand": {"cpu": 1}, "duration": duration}]}]}


@pytest.mark.parametrize("dist", [{"cpu": 1}, {}, ["uniform"], []],
                         ids=["mapping", "empty mapping", "list", "empty list"])
def test_a_duration_dist_that_is_not_a_name_is_reported_with_its_path(dist):
    # (a mapping or list used to reach a set lookup and crash with "unhashable type")
    with pytest.raises(ScenarioError) as info:
        parse_scenario(with_duration({"dist": dist, "mean": 3}), "<test>")
    assert info.value.paths == ["jobs[0].tasks[0].duration.dist"]


def test_every_section_reports_in_one_go():
    # one problem per section, all reported together, in section order
    doc = {"resources": ["cpu", "cpu"],
           "cluster": {"capacity": {"cpu": 4}, "devices": "gpu"},
           "queues": [{"name": "a.b"}],
           "jobs": [{"name": "A", "weight": 0, "tasks": [{"demand": {"cpu": 1}}]}],
           "events": [{"time": -1, "node_fail": "pool"}]}
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc, "<test>")
    assert info.value.paths == ["resources[1]", "cluster.devices", "queues[0].name", "jobs[0].weight", "events[0].time"]
