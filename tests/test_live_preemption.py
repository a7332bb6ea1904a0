"""Guarantees, limits and fair-share preemption in the live service (docs/live.md).

Without Ray: ``ManualExecutor`` (live_helpers) decides when each task ends and the
service's clock is moved by hand, so every decision and every store row can be checked
exactly. The last test runs the same on a real local Ray cluster (marked ``ray``).

The cluster of ``live_helpers.config_doc``: 4 + 2 + 2 = 8 CPUs; queues ``ads`` (alice,
``ads.prod`` below it) and ``dev`` (bob), weights 1:1.
"""

from __future__ import annotations

import threading
import time

import pytest

from live_helpers import ADMIN, ALICE as ALICE_TOKEN, ManualExecutor, config_doc, job
from fairshare.engine.events import TaskFinished
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.config import parse_config
from fairshare.live.metrics import registry_for
from fairshare.live.service import LiveError, LiveService
from fairshare.live.store import Store
from fairshare.model.errors import ScenarioError
from fairshare.model.loader import parse_scenario
from fairshare.model.scenario import PreemptionConfig

ALICE = Principal("alice", queues=("ads",))
BOB = Principal("bob", queues=("dev",))
ADMIN_P = Principal("admin", admin=True)
CPUS = 8


class Clock:
    """The service's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def doc_with(*, preemption=None, dev=None) -> dict:
    """``config_doc`` with a ``preemption:`` section and/or extra keys on queue ``dev``."""
    doc = config_doc()
    if preemption is not None:
        doc["preemption"] = preemption
    if dev is not None:
        doc["queues"][1].update(dev)
    return doc


def service(tmp_path, doc: dict, *, executor_cls=ManualExecutor, max_attempts: int = 3, db: str = "fs.db"):
    config = parse_config(doc, "test-config")
    commands = CommandBook()
    executor = executor_cls(config.nodes, commands)
    clock = Clock()
    svc = LiveService(config, Store(tmp_path / db), executor, policy="hdrf", commands=commands,
                      max_attempts=max_attempts, clock=clock)
    svc.recover()
    return svc, executor, clock


def running_by_job(executor) -> dict[str, int]:
    out: dict[str, int] = {}
    for launch in executor.running.values():
        out[launch.job] = out.get(launch.job, 0) + 1
    return out


def errors_of(call) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        call()
    return [str(e) for e in info.value.errors]


# --- the config ------------------------------------------------------------------------------


@pytest.mark.parametrize("extra, field", [
    ({"dev": {"guarantee": {"cpu": -1}}}, "queues[1].guarantee.cpu"),
    ({"dev": {"limit": {"tpu": 2}}}, "queues[1].limit.tpu"),
    ({"dev": {"limit": "lots"}}, "queues[1].limit"),
    ({"dev": {"guarantee": {"cpu": 3}, "limit": {"cpu": 2}}}, "queues[1].limit.cpu"),
    ({"dev": {"guarantee": {"cpu": 9}}}, "queues"),  # more than the cluster's 8 CPUs
    ({"preemption": {"after": -1}}, "preemption.after"),
    ({"preemption": {"tolerance": 1.5}}, "preemption.tolerance"),
    ({"preemption": {"max_per_round": 0}}, "preemption.max_per_round"),
    ({"preemption": {"rule": "greedy"}}, "preemption.rule"),
    ({"preemption": {"afterr": 3}}, "preemption.afterr"),
    ({"preemption": "yes"}, "preemption"),
])
def test_bad_bounds_and_preemption_are_refused_like_in_a_scenario_file(extra, field):
    doc = doc_with(preemption=extra.get("preemption"), dev=extra.get("dev"))
    live = errors_of(lambda: parse_config(doc, "test-config"))
    assert any(e.startswith(f"{field}: ") for e in live), live
    # the same problems, with the same paths and messages, as the scenario loader's
    scenario_doc = {k: v for k, v in doc.items() if k != "auth"} | {"jobs": []}
    assert live == errors_of(lambda: parse_scenario(scenario_doc, "test-config"))


def test_the_config_carries_bounds_and_preemption_into_the_queue_tree():
    config = parse_config(doc_with(preemption={"after": 5, "max_per_round": 2},
                                   dev={"guarantee": {"cpu": 2}, "limit": {"cpu": 6, "gpu": 1}}), "test-config")
    assert config.preemption == PreemptionConfig(after=5.0, max_per_round=2)
    tree = config.tree()
    assert (tree["dev"].guarantee, tree["dev"].limit) == ((("cpu", 2.0),), (("cpu", 6.0), ("gpu", 1.0)))
    assert tree["ads"].guarantee == tree["ads"].limit == ()
    # and without the section: off
    assert parse_config(config_doc(), "test-config").preemption is None


# --- guarantees and limits, live ---------------------------------------------------------------


def test_a_queue_limit_caps_it_even_on_an_idle_cluster(tmp_path):
    svc, ex, _ = service(tmp_path, doc_with(dev={"limit": {"cpu": 3}}))
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 8, {"cpu": 1})]})
    svc.step()
    assert running_by_job(ex) == {str(b): 3}  # 3 of 8 CPUs: the limit, the rest idle
    q = svc.queues()["dev"]
    assert (q["limit"], q["guarantee"]) == ({"cpu": 3.0}, {})
    assert q["time_below_fair_share"] is None  # preemption is off
    assert svc.status()["preemptions_total"] is None
    # alice takes what dev may not
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 8, {"cpu": 1})]})
    svc.step()
    assert running_by_job(ex) == {str(b): 3, str(a): 5}


@pytest.mark.parametrize("policy", ["drf", "hdrf"])
def test_a_queue_guarantee_is_honoured_when_both_tenants_want_everything(tmp_path, policy):
    config = parse_config(doc_with(dev={"guarantee": {"cpu": 6}}), "test-config")
    commands = CommandBook()
    ex = ManualExecutor(config.nodes, commands)
    svc = LiveService(config, Store(tmp_path / f"{policy}.db"), ex, policy=policy, commands=commands)
    svc.recover()
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 16, {"cpu": 1})]})
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 16, {"cpu": 1})]})
    svc.step()
    # weights 1:1 would split the 8 CPUs 4:4; dev's guarantee of 6 CPUs lifts it to 6,
    # ads gets the other 8 - 6 = 2
    assert running_by_job(ex) == {str(a): 2, str(b): 6}
    assert svc.queues()["dev"]["guarantee"] == {"cpu": 6.0}


@pytest.mark.parametrize("change, field", [
    ({"bounds": {"dev": {"limit": {"cpu": -2}}}}, "bounds.dev.limit.cpu"),
    ({"bounds": {"dev": {"guarantee": {"tpu": 1}}}}, "bounds.dev.guarantee.tpu"),
    ({"bounds": {"nope": {"limit": {"cpu": 1}}}}, "bounds.nope"),
    ({"bounds": {"dev": {"floor": {"cpu": 1}}}}, "bounds.dev.floor"),
    ({"bounds": {"dev": {"guarantee": {"cpu": 5}}, "ads": {"guarantee": {"cpu": 4}}}}, "bounds.ads.guarantee.cpu"),  # 9 > 8
    ({"bounds": {"dev": {"guarantee": {"cpu": 4}, "limit": {"cpu": 3}}}}, "bounds.dev.limit.cpu"),
    ({"add": [{"path": "dev.x", "guarantee": {"cpu": 1}, "limit": {"memory": "all"}}]}, "add[0].limit.memory"),
    ({"add": [{"path": "ads.x", "guarantee": {"cpu": 9}}]}, "add[0].guarantee.cpu"),
])
def test_put_queues_refuses_bad_bounds_with_422_naming_the_field(tmp_path, change, field):
    svc, _, _ = service(tmp_path, config_doc())
    with pytest.raises(LiveError) as info:
        svc.update_queues(ADMIN_P, change)
    assert info.value.status == 422
    assert field in [e.path for e in info.value.errors], info.value.errors
    assert svc.store.queue_changes() == []  # nothing kept


def test_put_queues_through_http_validates_bounds(tmp_path):
    from fastapi.testclient import TestClient

    from fairshare.live.api import create_app

    svc, _, _ = service(tmp_path, config_doc())
    svc.start()
    try:
        client = TestClient(create_app(svc), raise_server_exceptions=False)
        admin = {"Authorization": f"Bearer {ADMIN}"}
        bad = client.put("/v1/queues", json={"bounds": {"dev": {"limit": {"cpu": -1}}}}, headers=admin)
        assert bad.status_code == 422, bad.text
        assert [e["field"] for e in bad.json()["errors"]] == ["bounds.dev.limit.cpu"]
        bad = client.put("/v1/queues", json={"bounds": {"dev": {"floor": {}}}}, headers=admin)
        assert bad.status_code == 422 and "floor" in bad.json()["error"]["field"], bad.text
        tenant = client.put("/v1/queues", json={"bounds": {"dev": {"limit": {"cpu": 2}}}},
                            headers={"Authorization": f"Bearer {ALICE_TOKEN}"})
        assert tenant.status_code == 403
        ok = client.put("/v1/queues", json={"bounds": {"dev": {"limit": {"cpu": 2}}},
                                            "add": [{"path": "ads.batch", "guarantee": {"cpu": 1}}]}, headers=admin)
        assert ok.status_code == 200, ok.text
        assert ok.json()["dev"]["limit"] == {"cpu": 2.0}
        assert ok.json()["ads.batch"]["guarantee"] == {"cpu": 1.0}
        got = client.get("/v1/queues", headers=admin).json()
        assert set(got["dev"]) >= {"weight", "current_dominant_share", "fair_dominant_share", "running_tasks",
                                   "pending_tasks", "guarantee", "limit", "fair_share", "time_below_fair_share"}
    finally:
        svc.stop()
    assert svc.loop_error is None


def test_a_limit_set_at_run_time_is_enforced_and_survives_a_restart(tmp_path):
    svc, ex, _ = service(tmp_path, config_doc())
    done = threading.Thread(target=svc.update_queues, args=(ADMIN_P, {"bounds": {"dev": {"limit": {"cpu": 2}}}}))
    done.start()  # update_queues waits for a pass to apply the change: make it here
    deadline = time.monotonic() + 10
    while done.is_alive() and time.monotonic() < deadline:
        svc.step()
        time.sleep(0.01)
    done.join()
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 8, {"cpu": 1})]})
    svc.step()
    assert running_by_job(ex) == {str(b): 2}
    svc.store.close()
    # a new service on the same database replays the stored change: the limit holds
    again, ex2, _ = service(tmp_path, config_doc())
    assert again.queues()["dev"]["limit"] == {"cpu": 2.0}
    again.step()
    assert running_by_job(ex2) == {str(b): 2}


# --- preemption ---------------------------------------------------------------------------------


def fill_then_starve(tmp_path, preemption=None, **kw):
    """alice's 16 one-CPU tasks fill the 8 CPUs at t=0; bob's 8 arrive at t=1 and wait
    (dev starved: share 0 < fair 4/8). ``after`` = 5: dev may preempt from t=6."""
    svc, ex, clock = service(tmp_path, doc_with(preemption={"after": 5, **(preemption or {})}), **kw)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 16, {"cpu": 1})]})
    svc.step()
    clock.t = 1.0
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 8, {"cpu": 1})]})
    svc.step()
    assert running_by_job(ex) == {str(a): CPUS}
    return svc, ex, clock, a, b


def test_a_starved_queue_preempts_at_its_deadline_without_any_event(tmp_path):
    svc, ex, clock, a, b = fill_then_starve(tmp_path)
    assert svc.loop.next_wake() == 6.0  # starved since 1, after = 5
    clock.t = 5.9
    assert svc._idle_wait() == pytest.approx(0.02)  # (the default poll: earlier than 0.1 s away)
    assert not svc.step() and ex.killed == []
    clock.t = 5.99
    assert svc._idle_wait() == pytest.approx(0.01)  # the wait ends at the deadline
    clock.t = 6.0
    assert svc.step()  # no executor event, no request: the deadline alone
    # fair shares 4:4 (hdrf, weights 1:1). max_per_round 4 (the default) and the loop-free
    # rule (alice keeps at least her fair share 4) allow 4 victims: alice's latest started
    assert sorted(ex.killed) == [1, 2, 3, 4]
    assert running_by_job(ex) == {str(a): 4, str(b): 4}
    assert svc.loop.next_wake() is None  # dev is at its fair share: no more deadline


def test_paced_rounds_wake_the_loop_every_round_while_a_queue_stays_starved(tmp_path):
    # one victim a round, a round every 2 s: dev needs 4 tasks back (fair share 4), so
    # 4 rounds, at 6 (the deadline), 8, 10 and 12, each woken by the loop alone
    svc, ex, clock, a, b = fill_then_starve(tmp_path, {"max_per_round": 1, "round": 2})
    for n, t in enumerate([6.0, 8.0, 10.0, 12.0], start=1):
        assert svc.loop.next_wake() == t
        clock.t = t - 0.5
        svc.step()  # (the last victim's end reported: a decision, but no round yet)
        assert len(ex.killed) == n - 1
        clock.t = t
        assert svc.step()  # no executor event, no request: the paced round alone
        assert len(ex.killed) == n and running_by_job(ex) == {str(a): CPUS - n, str(b): n}
    assert svc.loop.next_wake() is None  # dev holds its fair share: no more rounds


def test_preempted_attempts_are_recorded_requeued_and_run_once_more(tmp_path):
    # max_attempts 1: a preemption must not count as a failed attempt
    svc, ex, clock, a, b = fill_then_starve(tmp_path, max_attempts=1)
    clock.t = 6.0
    svc.step()
    victims = sorted(ex.killed)
    rows = {t.id: t for t in svc.store.tasks(a)}
    for v in victims:
        assert (rows[v].state, rows[v].attempts, rows[v].preemptions) == ("pending", 1, 1)
        assert rows[v].finished_at is None and rows[v].exit_code is None  # the attempt did not finish
        assert rows[v].message == "preempted for job 2 on cpu-node"
    preempted_events = [e for e in svc.store.events() if e["kind"] == "preempted"]
    assert sorted(e["task_id"] for e in preempted_events) == victims
    q = svc.queues()
    assert q["dev"]["time_below_fair_share"] == pytest.approx(5.0)  # below from t=1 to t=6
    assert q["ads"]["time_below_fair_share"] == 0.0
    assert q["dev"]["fair_share"]["cpu"] == pytest.approx(4.0)
    assert svc.status()["preemptions_total"] == 4
    assert registry_for(svc).get_sample_value("fairshare_preemptions_total") == 4
    # the killed attempts' reports ("cancelled") come in the next pass: fenced, not failures
    clock.t = 7.0
    svc.step()
    assert svc.loop.failures == {}
    assert all(svc.store.tasks(a)[v - 1].state == "pending" for v in victims)
    # run everything to the end, finishing what runs, pass after pass
    for _ in range(40):
        for task_id in list(ex.running):
            ex.finish(task_id)
        clock.t += 1.0
        svc.step()
        if not ex.running:
            break
    tasks = svc.store.tasks(a) + svc.store.tasks(b)
    assert [t.state for t in tasks] == ["succeeded"] * 24
    succeeded = [e["task_id"] for e in svc.store.events() if e["kind"] == "succeeded"]
    assert sorted(succeeded) == sorted(t.id for t in tasks)  # each task succeeded exactly once
    by_id = {t.id: t for t in tasks}
    assert all((by_id[v].attempts, by_id[v].preemptions) == (2, 1) for v in victims)
    assert all((t.attempts, t.preemptions) == (1, 0) for t in tasks if t.id not in victims)
    assert [j["state"] for j in (svc.get_job(a, None), svc.get_job(b, None))] == ["succeeded", "succeeded"]
    assert svc.get_job(a, None)["tasks"][victims[0] - 1]["preemptions"] == 1


class LateKillExecutor(ManualExecutor):
    """A kill whose report (naming the killed launch's attempt) comes whenever the test
    says (``report_kills``), possibly after the task's row started again: the fence must
    still take it for the killed attempt's."""

    def __init__(self, nodes, commands=None):
        super().__init__(nodes, commands)
        self.unreported: list[tuple[int, int]] = []

    def kill(self, task_id: int) -> None:
        self.killed.append(task_id)
        launch = self.running.pop(task_id, None)
        if launch is not None:
            self.unreported.append((task_id, launch.attempt))

    def report_kills(self) -> None:
        for task_id, attempt in self.unreported:
            self._events.append(TaskFinished(task_id, ok=False, reason="cancelled", attempt=attempt))
        self.unreported.clear()


def test_a_late_report_of_a_killed_attempt_does_not_end_the_next_attempt(tmp_path):
    svc, ex, clock, a, b = fill_then_starve(tmp_path, executor_cls=LateKillExecutor, max_attempts=1)
    clock.t = 6.0
    svc.step()
    victims = sorted(ex.killed)
    # bob's 8 tasks all end: the 4 CPUs go back to alice, whose next rows are the victims'
    for _ in range(2):
        for task_id in [t for t, la in ex.running.items() if la.job == str(b)]:
            ex.finish(task_id)
        clock.t += 1
        svc.step()
    restarted = sorted(t for t, la in ex.running.items() if t in victims)
    assert restarted == victims  # the same rows, second attempts, running now
    # only now do the killed first attempts report their end (failed: "cancelled")
    ex.report_kills()
    clock.t += 1
    svc.step()
    rows = {t.id: t for t in svc.store.tasks(a)}
    assert all((rows[v].state, rows[v].attempts) == ("running", 2) for v in victims)
    assert all(v in svc.scheduler.tasks for v in victims)
    assert svc.loop.failures == {}
    for v in victims:
        ex.finish(v)
    svc.step()
    assert all(svc.store.tasks(a)[v - 1].state == "succeeded" for v in victims)


def test_preemption_needs_a_policy_with_fair_shares(tmp_path):
    from fairshare.policies import PolicyModeError

    config = parse_config(doc_with(preemption={}), "test-config")
    with pytest.raises(PolicyModeError, match="preemption needs the policy's fair shares"):
        LiveService(config, Store(tmp_path / "fs.db"), ManualExecutor(config.nodes), policy="slots")


# --- on a real local Ray cluster ------------------------------------------------------------------


@pytest.mark.ray
@pytest.mark.slow
def test_on_ray_a_starved_tenant_gets_its_fair_share_by_preemption(tmp_path):
    """alice fills the 8 CPUs with 12 long tasks (sleep 6); bob's 4 arrive. With
    ``after`` = 2 s, bob must run 4 tasks (his fair share, 4 of 8 CPUs) within after + a few
    seconds, alice's preempted tasks run again later, and every task succeeds exactly once."""
    pytest.importorskip("ray", reason="the live extra (ray) is not installed")
    from fairshare.live.ray_executor import RayExecutor

    after = 2.0
    config = parse_config(doc_with(preemption={"after": after}), "test-config")
    commands = CommandBook()
    executor = RayExecutor(config.resources, config.nodes, commands=commands)
    svc = LiveService(config, Store(tmp_path / "fs.db"), executor, policy="hdrf", commands=commands)
    try:
        svc.start()
        (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 12, {"cpu": 1}, command=["sleep", "6"])]})
        wait_until(lambda: svc.queues()["ads"]["running_tasks"] == CPUS, 30, "alice to fill the cluster")
        (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 4, {"cpu": 1}, command=["sleep", "1"])]})
        arrived = time.monotonic()
        wait_until(lambda: svc.queues()["dev"]["running_tasks"] == 4, after + 4, "bob to reach his fair share")
        reached = time.monotonic() - arrived
        assert after - 0.05 <= reached <= after + 4  # not before its wait, soon after it
        wait_until(lambda: all(svc.get_job(j, None)["state"] == "succeeded" for j in (a, b)), 60,
                   "every task to succeed")
        tasks = svc.store.tasks(a) + svc.store.tasks(b)
        assert [t.state for t in tasks] == ["succeeded"] * 16
        succeeded = [e["task_id"] for e in svc.store.events(limit=10_000) if e["kind"] == "succeeded"]
        assert sorted(succeeded) == sorted(t.id for t in tasks)  # exactly once each
        preempted = [t for t in tasks if t.preemptions]
        assert preempted and all(t.job_id == a for t in preempted)  # only alice's, over her share
        assert all(t.attempts == 1 + t.preemptions for t in tasks)
        assert svc.status()["preemptions_total"] == sum(t.preemptions for t in tasks)
        assert svc.loop.failures == {}
        print(f"bob reached his fair share {reached:.2f} s after arriving (after = {after} s); "
              f"{len(preempted)} of alice's tasks preempted")
    finally:
        svc.stop()
        executor.shutdown(stop_commands=True)  # (alice's commands still run: none outlives the test)
    assert svc.loop_error is None


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
