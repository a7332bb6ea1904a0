"""The peer baselines from the command line: a scenario's bad ``peers:`` setting is a user
error (exit 2) naming the file and ``peers.<peer>.<key>``, for every command that builds
the policy from the scenario (``Policy.configured``: simulate, compare; the static form:
allocate, audit, explain); good settings run."""

from __future__ import annotations

import json

import pytest
import yaml

from fairshare.cli import main

SCENARIO = {
    "resources": ["cpu", "memory"],
    "cluster": {"nodes": [{"name": "n1", "capacity": {"cpu": 8, "memory": 32}}]},
    "queues": [{"name": "a", "guarantee": {"cpu": 6}}, {"name": "b"}],
    "jobs": [{"name": "ja", "queue": "a", "submit": 0,
              "tasks": [{"count": 2, "demand": {"cpu": 1, "memory": 4}, "duration": 10}]}],
}


def write(tmp_path, peers):
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "peers": peers}))
    return str(path)


@pytest.mark.parametrize("command", [
    ["simulate", "{f}", "--policy", "kueue", "--out", "{out}"],
    ["compare", "{f}", "--policies", "hdrf,kueue", "--out", "{out}"],
    ["allocate", "{f}", "--policy", "kueue"],
    ["audit", "{f}", "--policy", "kueue"],
    ["explain", "{f}", "--policy", "kueue", "--job", "ja"],
])
def test_a_bad_setting_is_a_user_error_naming_its_path(tmp_path, capsys, command):
    f = write(tmp_path, {"kueue": {"lending_limit": {"a": {"gpu": 1}}}})
    argv = [part.format(f=f, out=tmp_path / "out") for part in command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{f}: peers.kueue.lending_limit.a.gpu: not a resource of the scenario" in err
    assert "1 problem in" in err and "nothing was computed" in err
    assert not (tmp_path / "out" / "summary.json").exists()


@pytest.mark.parametrize("policy, peers", [
    ("yarn-fair", {"yarn-fair": {"default_policy": "drf", "queue_policies": {"b": "fifo"}}}),
    ("kueue", {"kueue": {"lending_limit": {"a": {"cpu": 2}}, "fair_sharing": True}}),
    ("slurm-fairtree", {"slurm-fairtree": {"billing_weights": {"cpu": 1, "memory": 0.25}, "half_life": 3600}}),
])
def test_good_settings_run(tmp_path, capsys, policy, peers):
    f = write(tmp_path, peers)
    assert main(["simulate", f, "--policy", policy, "--out", str(tmp_path / "out"), "--format", "json"]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["policy"] == policy
