"""Decayed usage in serve (``fairness: {half_life}``, live/decay.py): kept in the store
across a restart (a clean stop and a crash), changed by ``PUT /v1/queues`` with the
decayed averages carried over, refused with field paths when bad, and shown in
``/v1/queues`` and ``/metrics``. The service runs on ``ManualExecutor`` with hand-moved
clocks (no Ray): the engine clock starts at 0 in each process, the wall clock runs on.
"""

from __future__ import annotations

import math
import threading

import pytest

from live_helpers import ManualExecutor, config_doc, job
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.config import parse_config
from fairshare.live.decay import queue_usage
from fairshare.live.metrics import status_families
from fairshare.live.service import LiveError, LiveService
from fairshare.live.store import Store
from fairshare.model.errors import ScenarioError

ADMIN = Principal("admin", admin=True)
HALF_LIFE = 60.0
WALL_START = 1_700_000_000.0


class Clocks:
    """One process's clocks: the engine's monotonic clock from 0, the wall clock from
    ``wall`` (both moved by ``advance``)."""

    def __init__(self, wall: float):
        self.t, self.wall0 = 0.0, wall

    def mono(self) -> float:
        return self.t

    def wall(self) -> float:
        return self.wall0 + self.t

    def advance(self, to: float) -> None:
        self.t = to


def config(half_life=HALF_LIFE):
    doc = config_doc()
    doc["fairness"] = {"half_life": half_life}
    return parse_config(doc, "decay-config")


def service(path, clocks: Clocks, policy="hdrf", half_life=HALF_LIFE) -> tuple[LiveService, ManualExecutor]:
    cfg = config(half_life)
    commands = CommandBook()
    ex = ManualExecutor(cfg.nodes, commands)
    svc = LiveService(cfg, Store(path), ex, policy=policy, commands=commands, clock=clocks.mono,
                      wall_clock=clocks.wall)
    svc.recover()
    return svc, ex


def decayed(svc) -> dict[str, dict[str, float]]:
    return {path: q["decayed_usage"] for path, q in svc.queues().items()}


def assert_close(got: dict, want: dict, rel=1e-9):
    assert got.keys() == want.keys()
    for path in want:
        for r, value in want[path].items():
            assert got[path][r] == pytest.approx(value, rel=rel, abs=1e-12), (path, r)


def run_some(svc, ex, clocks) -> None:
    """ads.prod and dev run; ads.test's one job finishes (with hdrf its usage goes to the
    queue's history); tasks still run at the end."""
    svc.submit(ADMIN, {"jobs": [job("a", "ads.prod", 6, {"cpu": 1}), job("t", "ads.test", 2, {"cpu": 1}),
                                job("d", "dev", 6, {"cpu": 1, "memory": 2})]})
    svc.step()
    clocks.advance(20.0)
    for launch in [la for la in ex.started if la.job == "2"]:  # (job ids 1, 2, 3: t is 2)
        ex.finish(launch.task_id)
    svc.step()
    clocks.advance(35.0)
    ex.finish(ex.started[0].task_id)
    svc.step()


@pytest.mark.parametrize("policy", ["hdrf", "drf", "dff"])
@pytest.mark.parametrize("how", ["stop", "crash"])
def test_a_restart_keeps_every_queues_decayed_usage(tmp_path, policy, how):
    clocks = Clocks(WALL_START)
    svc, ex = service(tmp_path / "fs.db", clocks, policy)
    run_some(svc, ex, clocks)
    saved_at = clocks.t  # (the last pass saved: its first save, more than SAVE_EVERY_S ago)
    if how == "stop":
        clocks.advance(41.5)
        saved_at = clocks.t
        svc.stop()
    else:
        clocks.advance(41.5)  # a crash: no stop, the last pass's save is what is kept
    before = decayed(svc)
    assert any(u > 0 for q in before.values() for u in q.values())
    if policy != "drf":  # (the tree policies)
        assert before["ads.test"]["cpu"] > 0  # its finished job's history
    # what the new process must show 300 s later: every entry settled at the save, with
    # nothing charged since, decayed through the downtime (live/decay.py)
    ledger = svc.scheduler.sorter.decay
    for name in list(ledger.entries):
        ledger.charge(name, saved_at, [0.0] * ledger.m)
    down = 300.0
    want = queue_usage(svc.scheduler, clocks.t + down)
    svc.store.close()

    clocks2 = Clocks(clocks.wall() + down)
    svc2, ex2 = service(tmp_path / "fs.db", clocks2, policy)
    got = decayed(svc2)
    assert_close(got, {path: dict(zip(svc.resources, avg)) for path, avg in want.items()})
    assert any(u > 0 for q in got.values() for u in q.values())  # not reset
    # and it goes on: the re-queued tasks run again, usage grows from there
    svc2.step()
    clocks2.advance(10.0)
    svc2.step()
    assert decayed(svc2)["dev"]["memory"] > 0
    svc2.stop()
    svc2.store.close()


def test_without_a_stop_or_a_pass_since_the_save_the_restart_reads_the_same_usage(tmp_path):
    """Restarting at the instant of the save shows exactly what the old process showed."""
    clocks = Clocks(WALL_START)
    svc, ex = service(tmp_path / "fs.db", clocks)
    run_some(svc, ex, clocks)
    svc.stop()
    before = decayed(svc)
    svc.store.close()
    svc2, _ = service(tmp_path / "fs.db", Clocks(clocks.wall()))
    assert_close(decayed(svc2), before)


def put(svc, change) -> dict:
    """``PUT /v1/queues`` (it waits for the pass that applies it: passes run here)."""
    out: dict = {}
    worker = threading.Thread(target=lambda: out.update(queues=svc.update_queues(ADMIN, change)))
    worker.start()
    while worker.is_alive():
        svc.step()
        worker.join(0.01)
    return out["queues"]


def test_put_changes_the_half_life_keeping_each_queues_average_then_decays_with_it(tmp_path):
    clocks = Clocks(WALL_START)
    svc, ex = service(tmp_path / "fs.db", clocks)
    run_some(svc, ex, clocks)
    before = decayed(svc)
    after = put(svc, {"fairness": {"half_life": 600}})
    assert svc.scheduler.half_life == 600.0 == svc.scheduler.sorter.decay.half_life
    assert svc.status()["fairness"] == {"half_life": 600.0}
    assert_close({p: q["decayed_usage"] for p, q in after.items()}, before, rel=1e-12)  # carried over
    # from then on it decays with the new half-life: with nothing running, the average
    # at t + 60 is U(t) 2^(-60/h) / W(t + 60), U(t) = average(t) W(t), W from the origin 0
    while ex.running:  # (every job runs to its end, at this instant)
        for task_id in list(ex.running):
            ex.finish(task_id)
        svc.step()
    at, h = clocks.t, 600.0
    average = decayed(svc)["dev"]["memory"]

    def weight(t):
        return h / math.log(2) * (1 - 2 ** (-t / h))

    clocks.advance(at + 60.0)
    assert decayed(svc)["dev"]["memory"] == pytest.approx(average * weight(at) * 2 ** (-60 / h)
                                                          / weight(at + 60), rel=1e-12)
    # kept across a restart: the stored change wins over the config's half-life
    svc.stop()
    svc.store.close()
    svc2, _ = service(tmp_path / "fs.db", Clocks(clocks.wall()))
    assert svc2.scheduler.half_life == 600.0
    assert put(svc2, {"fairness": {"half_life": "inf"}}) and svc2.scheduler.half_life == math.inf
    assert svc2.status()["fairness"] == {"half_life": "inf"}
    # to 0: no memory (the instantaneous sorter), the stored history dropped
    put(svc2, {"fairness": {"half_life": 0}})
    assert svc2.scheduler.half_life == 0.0 and getattr(svc2.scheduler.sorter, "decay", None) is None
    assert all(q["decayed_usage"] is None for q in svc2.queues().values())
    svc2.stop()
    assert svc2.store.load_decay() is None


def test_put_from_half_life_0_starts_charging_what_runs(tmp_path):
    clocks = Clocks(WALL_START)
    svc, ex = service(tmp_path / "fs.db", clocks, half_life=0)
    svc.submit(ADMIN, {"jobs": [job("d", "dev", 2, {"cpu": 1})]})
    svc.step()
    assert svc.queues()["dev"]["decayed_usage"] is None
    put(svc, {"fairness": {"half_life": 30}})
    clocks.advance(30.0)
    # dev has held 2 CPUs all the time since the switch: its average is exactly that
    assert svc.queues()["dev"]["decayed_usage"]["cpu"] == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("change, field", [
    ({"fairness": {"half_life": -1}}, "fairness.half_life"),
    ({"fairness": {"half_life": "soon"}}, "fairness.half_life"),
    ({"fairness": {}}, "fairness.half_life"),
    ({"fairness": {"half_life": 5, "window": 3}}, "fairness.window"),
    ({"fairness": None}, "fairness"),
])
def test_put_refuses_a_bad_half_life_naming_the_field(tmp_path, change, field):
    svc, _ = service(tmp_path / "fs.db", Clocks(WALL_START))
    with pytest.raises(LiveError) as info:
        svc.update_queues(ADMIN, change)
    assert info.value.status == 422
    assert field in [e.path for e in info.value.errors]
    assert svc.scheduler.half_life == HALF_LIFE


def test_put_refuses_a_half_life_for_a_policy_without_memory(tmp_path):
    svc, _ = service(tmp_path / "fs.db", Clocks(WALL_START), policy="fifo", half_life=0)
    with pytest.raises(LiveError) as info:
        svc.update_queues(ADMIN, {"fairness": {"half_life": 100}})
    assert [e.path for e in info.value.errors] == ["fairness.half_life"]


def test_config_fairness_is_checked_by_the_loader_with_its_field_path():
    doc = config_doc()
    doc["fairness"] = {"half_life": float("inf")}
    assert parse_config(doc).half_life == math.inf
    doc["fairness"] = {"half_life": -5}
    with pytest.raises(ScenarioError) as info:
        parse_config(doc)
    assert [e.path for e in info.value.errors] == ["fairness.half_life"]
    del doc["fairness"]
    assert parse_config(doc).half_life == 0.0


def test_queues_json_and_metrics_show_decayed_usage(tmp_path):
    clocks = Clocks(WALL_START)
    svc, ex = service(tmp_path / "fs.db", clocks)
    run_some(svc, ex, clocks)
    status = svc.status()
    dev = status["queues"]["dev"]
    capacity = status["capacity"]
    # the effective share: the dominant share of allocation + decayed average
    want = max((dev["allocated"][r] + dev["decayed_usage"][r]) / capacity[r] for r in capacity if capacity[r] > 0)
    assert dev["effective_dominant_share"] == pytest.approx(want)
    assert dev["effective_dominant_share"] > dev["current_dominant_share"] > 0
    # an inner queue sums its subtree
    ads = status["queues"]["ads"]["decayed_usage"]
    assert ads["cpu"] == pytest.approx(status["queues"]["ads.prod"]["decayed_usage"]["cpu"]
                                       + status["queues"]["ads.test"]["decayed_usage"]["cpu"])
    families = {f.name: f for f in status_families(status)}
    samples = {(s.labels["queue"], s.labels["resource"]): s.value
               for s in families["fairshare_queue_decayed_usage"].samples}
    assert samples[("dev", "memory")] == pytest.approx(dev["decayed_usage"]["memory"])
    shares = {s.labels["queue"]: s.value for s in families["fairshare_queue_effective_dominant_share_ratio"].samples}
    assert shares["dev"] == pytest.approx(dev["effective_dominant_share"])


def test_the_http_api_carries_the_decayed_usage_and_the_half_life(tmp_path):
    import httpx

    from live_helpers import ADMIN as ADMIN_TOKEN
    from live_helpers import api_in_thread, wait_for

    with api_in_thread(tmp_path / "fs.db", config("inf")) as (url, svc):
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        httpx.post(url + "/v1/jobs", json={"jobs": [job("d", "dev", 2, {"cpu": 1})]}, headers=headers,
                   timeout=10).raise_for_status()
        wait_for(lambda: svc.queues()["dev"]["running_tasks"] == 2, 20, "dev's tasks to start")
        status = httpx.get(url + "/v1/status", headers=headers, timeout=10).json()
        assert status["fairness"] == {"half_life": "inf"}
        dev = httpx.get(url + "/v1/queues", headers=headers, timeout=10).json()["dev"]
        assert set(dev["decayed_usage"]) == {"cpu", "memory", "mic", "gpu"}
        assert dev["effective_dominant_share"] >= dev["current_dominant_share"] > 0
        bad = httpx.put(url + "/v1/queues", json={"fairness": {"half_life": -3}}, headers=headers, timeout=10)
        assert bad.status_code == 422 and "fairness.half_life" in bad.text
        ok = httpx.put(url + "/v1/queues", json={"fairness": {"half_life": 3600}}, headers=headers, timeout=10)
        assert ok.status_code == 200 and ok.json()["dev"]["decayed_usage"] is not None
        assert httpx.get(url + "/v1/status", headers=headers, timeout=10).json()["fairness"] == {"half_life": 3600.0}


def test_the_client_and_the_queues_table_show_it(tmp_path, capsys):
    from live_helpers import ADMIN as ADMIN_TOKEN
    from live_helpers import api_in_thread, wait_for
    from fairshare.client import Client
    from fairshare.live.cli import _print_queues

    with api_in_thread(tmp_path / "fs.db", config(120)) as (url, svc):
        client = Client(url, ADMIN_TOKEN)
        client.submit([job("d", "dev", 2, {"cpu": 1})])
        wait_for(lambda: svc.queues()["dev"]["running_tasks"] == 2, 20, "dev's tasks to start")
        queues = client.set_half_life(math.inf)
        assert svc.scheduler.half_life == math.inf
        dev = queues["dev"]
        assert dev.decayed_usage == dev.raw["decayed_usage"] and dev.decayed_usage["cpu"] >= 0
        assert dev.effective_dominant_share == dev.raw["effective_dominant_share"] >= dev.current_dominant_share
        _print_queues(queues, "table")
        header, *rows = capsys.readouterr().out.splitlines()
        assert header.split()[-2:] == ["EFFECTIVE", "DECAYED"]
        dev_row = next(r for r in rows if r.startswith("dev "))
        assert dev_row.split()[-2] == f"{dev.effective_dominant_share:.3f}"
        assert dev_row.split()[-1].startswith("cpu=")
        client.set_half_life(0)
        plain = client.queues()
        assert plain["dev"].decayed_usage is None and plain["dev"].effective_dominant_share is None
        _print_queues(plain, "table")
        assert "EFFECTIVE" not in capsys.readouterr().out  # (the table of before, without a half-life)


def test_serve_refuses_a_half_life_with_a_policy_without_memory(tmp_path):
    from fairshare.policies.base import PolicyModeError

    with pytest.raises(PolicyModeError, match="fairness.half_life"):
        service(tmp_path / "fs.db", Clocks(WALL_START), policy="fifo")


def test_half_life_0_keeps_nothing_and_drops_a_saved_history(tmp_path):
    clocks = Clocks(WALL_START)
    svc, ex = service(tmp_path / "fs.db", clocks)
    run_some(svc, ex, clocks)
    svc.stop()
    assert svc.store.load_decay() is not None
    svc.store.close()
    svc2, ex2 = service(tmp_path / "fs.db", Clocks(clocks.wall()), half_life=0)
    assert svc2.store.load_decay() is None
    assert all(q["decayed_usage"] is None for q in svc2.queues().values())
    assert "fairshare_queue_decayed_usage" not in {f.name for f in status_families(svc2.status())}
