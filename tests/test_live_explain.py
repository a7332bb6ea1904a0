"""serve's ``GET /v1/jobs/{id}/explain`` and ``fairshare_pending_jobs{reason}`` behind
the executor seam (``ManualExecutor``: no Ray), on a hand-moved clock so every number
of the forecast can be checked."""

from __future__ import annotations

import json
import threading

import pytest

from live_helpers import ManualExecutor, job, make_config
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.metrics import registry_for
from fairshare.live.queues import queue_changes
from fairshare.live.service import LiveError, LiveService
from fairshare.live.store import Store

ALICE = Principal("alice", queues=("ads",))
BOB = Principal("bob", queues=("dev",))
WALL0 = 1_700_000_000.0  # the wall clock when the service's clock reads 0


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def service(tmp_path, policy="drf"):
    config = make_config()
    commands = CommandBook()
    executor = ManualExecutor(config.nodes, commands)
    clock = Clock()
    svc = LiveService(config, Store(tmp_path / "fs.db"), executor, policy=policy, commands=commands,
                      clock=clock, wall_clock=lambda: WALL0 + clock.t)
    svc._t0 = 0.0
    svc.recover()
    return svc, executor, clock


def pending_jobs(svc) -> dict[str, float]:
    registry = registry_for(svc)
    return {kind: registry.get_sample_value("fairshare_pending_jobs", {"reason": kind})
            for kind in ("priority_held", "queue_limit", "gang_incomplete", "no_node_fits")}


def test_a_job_waiting_for_the_one_mic_is_explained_with_its_forecast_from_the_users_estimate(tmp_path):
    svc, ex, clock = service(tmp_path)
    # one MIC in the cluster (mic-node); alice's task holds it for an estimated 100 s
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 1, {"cpu": 1, "mic": 1},
                                           duration={"dist": "fixed", "value": 100})]})
    clock.t = 10.0
    svc.step()
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 1, {"cpu": 1, "mic": 1})]})
    clock.t = 20.0
    svc.step()
    doc = svc.explain(BOB, b)
    assert list(doc) == ["job", "state", "reasons", "would_start_if", "estimated_start"]
    assert (doc["job"], doc["state"]) == (str(b), "pending")
    first = doc["reasons"][0]
    assert first["kind"] == "no_node_fits"
    # 1 MIC in all, held by a: free mic 0, so not even the total would hold it
    assert (first["demand"]["mic"], first["free"]["mic"], first["fits_in_total"]) == (1, 0, False)
    # every node is short of the one MIC alone: the first in cluster order is the closest
    assert (first["best_node"], first["shortfall"]) == ("cpu-node", {"cpu": 0, "memory": 0, "mic": 1, "gpu": 0})
    # a started at 10 s with an estimate of 100 s: b starts when it ends, at 110 s
    assert doc["estimated_start"] == pytest.approx(WALL0 + 110.0)
    # the same document for the admin; alice's own job runs, nothing left to wait for
    assert svc.explain(Principal("admin", admin=True), b)["reasons"] == doc["reasons"]
    running = svc.explain(ALICE, a)
    assert (running["state"], running["reasons"], running["estimated_start"]) == ("running", [], None)
    assert pending_jobs(svc) == {"priority_held": 0, "queue_limit": 0, "gang_incomplete": 0, "no_node_fits": 1}


def test_without_an_estimate_the_forecast_uses_the_queues_recent_run_times(tmp_path):
    svc, ex, clock = service(tmp_path)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 2, {"cpu": 1, "mic": 1})]})
    svc.step()
    (first,) = list(ex.running)
    clock.t = 30.0
    ex.finish(first)  # ran 30 s: ads.prod's mean is 30 s
    svc.step()  # the second task starts at 30 s
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 1, {"cpu": 1, "mic": 1})]})
    clock.t = 35.0
    svc.step()
    # the second task of a started at 30 s and is expected to run 30 s: b at 60 s
    assert svc.explain(BOB, b)["estimated_start"] == pytest.approx(WALL0 + 60.0)


def test_no_duration_known_gives_no_estimate(tmp_path):
    svc, ex, clock = service(tmp_path)
    svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 1, {"cpu": 1, "mic": 1})]})
    svc.step()
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 1, {"cpu": 1, "mic": 1})]})
    svc.step()
    doc = svc.explain(BOB, b)
    assert doc["reasons"] and doc["estimated_start"] is None


def test_another_tenants_job_or_no_job_is_404(tmp_path):
    svc, _, _ = service(tmp_path)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 1, {"cpu": 1})]})
    for principal, job_id in ((BOB, a), (ALICE, a + 1)):
        with pytest.raises(LiveError) as refused:
            svc.explain(principal, job_id)
        assert refused.value.status == 404 and refused.value.errors[0].path == "job_id"


def test_a_job_not_yet_admitted_or_done_has_its_stores_state_and_no_reasons(tmp_path):
    svc, ex, _ = service(tmp_path)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 1, {"cpu": 1})]})
    assert svc.explain(ALICE, a) == {"job": str(a), "state": "pending", "reasons": [], "would_start_if": [],
                                     "estimated_start": None}
    svc.step()
    ex.finish(next(iter(ex.running)))
    svc.step()
    assert svc.explain(ALICE, a)["state"] == "succeeded"


def test_the_gauge_counts_a_queue_limit(tmp_path):
    svc, _, _ = service(tmp_path)
    # the admin's limit on dev, applied at the next pass (update_queues would wait for the loop)
    svc._inbox.append(("queues", (queue_changes({"bounds": {"dev": {"limit": {"cpu": 1}}}}), threading.Event())))
    svc.step()
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 3, {"cpu": 1})]})
    svc.step()
    doc = svc.explain(BOB, b)
    assert doc["state"] == "running"
    assert doc["reasons"][0] == {"kind": "queue_limit", "queue": "dev", "resource": "cpu", "usage": 1.0,
                                 "demand": 1.0, "limit": 1.0}
    assert doc["would_start_if"] == [{"kind": "limit_raised", "limits": {"dev": {"cpu": 2.0}}}]
    assert pending_jobs(svc)["queue_limit"] == 1


def test_fairshare_why_and_the_client_read_the_route(tmp_path, capsys):
    from live_helpers import ALICE as ALICE_TOKEN, BOB as BOB_TOKEN, api_in_thread, wait_for
    from fairshare.cli import main
    from fairshare.client import Client, ClientError

    with api_in_thread(tmp_path / "fs.db") as (url, _svc):
        alice, bob = Client(url, ALICE_TOKEN), Client(url, BOB_TOKEN)
        alice.submit([job("a", "ads.prod", 1, {"cpu": 1, "mic": 1}, duration={"dist": "fixed", "value": 600})])
        (b,) = bob.submit([job("b", "dev", 1, {"cpu": 1, "mic": 1})]).ids
        doc = wait_for(lambda: (d := bob.explain(b))["reasons"] and d, 20, "job b's reasons")
        assert doc["state"] == "pending" and doc["reasons"][0]["kind"] == "no_node_fits"
        with pytest.raises(ClientError) as refused:
            alice.explain(b)  # bob's job: not revealed to alice
        assert refused.value.status == 404
        assert main(["why", str(b), "--server", url, "--token", BOB_TOKEN, "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["reasons"][0]["kind"] == "no_node_fits"
        assert main(["why", str(b), "--server", url, "--token", BOB_TOKEN]) == 0
        text = capsys.readouterr().out
        assert f"Job {b} is pending" in text and "No node fits its next task (1 cpu, 1 mic)" in text
        assert "Estimated start: " in text and "unknown" not in text
        assert main(["why", str(b), "--server", url, "--token", ALICE_TOKEN]) == 2
