"""``fairshare.ray`` (submit, the decorator, options) and ``fairshare submit --ray``
against serve's API on a ``ManualExecutor`` (no Ray cluster): the jobs they send, as
serve stores them; the entrypoint of a submitted function runs it."""

from __future__ import annotations

import json

import pytest

import fairshare.ray
from fairshare.cli import main
from fairshare.client import Client, ClientError
from fairshare.ray.call import main as call_main
from live_helpers import ALICE, api_in_thread, wait_for

pytest.importorskip("ray", reason="the live extra (ray) is not installed (cloudpickle)")


@pytest.fixture
def server(tmp_path):
    with api_in_thread(tmp_path / "fs.db") as running:
        yield running


def scale(x, factor=1):
    return x * factor


def stored(svc, job_id):
    return wait_for(lambda: svc.get_job(job_id, None), 10, "the job")


def test_submit_sends_a_ray_program_whose_entrypoint_calls_the_function(server, capsys):
    url, svc = server
    job_id = fairshare.ray.submit(scale, 21, bundles=[{"cpu": 1}, {"cpu": 1}, {"cpu": 2, "mic": 1}],
                                  queue="ads.prod", priority=3, server=url, token=ALICE, factor=2)
    detail = stored(svc, job_id)
    assert (detail["name"], detail["gang"], detail["priority"]) == ("scale", True, 3)
    assert [(t["class"], t["demand"], t["count"]) for t in detail["spec"]["tasks"]] == [
        ("bundle0", {"cpu": 1}, 2), ("bundle1", {"cpu": 2, "mic": 1}, 1)]
    words = detail["spec"]["ray"]["entrypoint"].split()
    assert words[:3] == ["python", "-m", "fairshare.ray.call"]
    assert call_main(words[3:]) == 0  # what the driver runs: scale(21, factor=2)
    assert capsys.readouterr().out == "42\n"


def test_the_decorator_submits_and_still_runs_here(server):
    url, svc = server

    @fairshare.ray.job(bundles=[{"cpu": 1}], queue="ads", client=Client(url, ALICE))
    def double(x):
        return 2 * x

    assert double(4) == 8
    job_id = double.submit(5)
    assert stored(svc, job_id)["spec"]["tasks"] == [{"class": "bundle0", "demand": {"cpu": 1}, "count": 1}]


def test_bad_bundles_and_half_a_server_are_refused_here():
    with pytest.raises(ClientError, match=r"bundles\[1\]"):
        fairshare.ray.program_job("python a.py", [{"cpu": 1}, {}], queue="q")
    with pytest.raises(ClientError, match="bundles"):
        fairshare.ray.program_job("python a.py", [], queue="q")
    with pytest.raises(ClientError, match="server and token"):
        fairshare.ray.submit(scale, 1, bundles=[{"cpu": 1}], queue="q", server="http://x")


def test_options_map_amounts_to_the_programs_ray_resources(monkeypatch):
    monkeypatch.setenv(fairshare.ray.RESOURCES_ENV, json.dumps({"cpu": ["fs_cpu", 1.0], "gpu": ["fs_gpu", 1.0]}))
    assert fairshare.ray.options(cpu=2, gpu=1) == {"num_cpus": 0, "resources": {"fs_cpu": 2, "fs_gpu": 1}}
    monkeypatch.delenv(fairshare.ray.RESOURCES_ENV)
    assert fairshare.ray.options(cpu=2, memory=1) == {"num_cpus": 2, "memory": 2 ** 30, "resources": {}}


def test_cli_submit_ray_sends_the_program_and_its_bundles(server, tmp_path, capsys):
    url, svc = server
    assert main(["submit", "--ray", "--bundle", "cpu=1", "--bundle", "cpu=1", "--queue", "ads.prod",
                 "--working-dir", str(tmp_path), "--server", url, "--token", ALICE,
                 "--", "python", "train.py", "--epochs", "3"]) == 0
    (job_id,) = map(int, capsys.readouterr().out.split())
    spec = stored(svc, job_id)["spec"]
    assert spec["ray"] == {"entrypoint": "python train.py --epochs 3", "runtime_env": {"working_dir": str(tmp_path)}}
    assert spec["tasks"] == [{"class": "bundle0", "demand": {"cpu": 1.0}, "count": 2}]
    assert main(["submit", "--ray", "--queue", "ads", "--server", url, "--token", ALICE, "--", "bash", "x.sh"]) == 2
    assert "jobs[0].ray.entrypoint" in capsys.readouterr().err
