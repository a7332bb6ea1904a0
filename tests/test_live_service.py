"""LiveService behind the executor seam, without Ray: ``ManualExecutor`` (live_helpers)
decides when each task finishes, so every decision can be checked exactly. The same
checks on a real Ray cluster are in test_live_ray.py."""

from __future__ import annotations

import pytest

from live_helpers import ManualExecutor, job, make_config
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.metrics import registry_for
from fairshare.live.service import LiveService
from fairshare.live.store import Store

ALICE = Principal("alice", queues=("ads",))
BOB = Principal("bob", queues=("dev",))
ADMIN = Principal("admin", admin=True)


def service(tmp_path, policy="drf", db="fs.db", **kw):
    config = make_config(**kw)
    commands = CommandBook()
    executor = ManualExecutor(config.nodes, commands)
    svc = LiveService(config, Store(tmp_path / db), executor, policy=policy, commands=commands)
    svc.recover()
    return svc, executor


def running_by_job(executor) -> dict[str, int]:
    out: dict[str, int] = {}
    for launch in executor.running.values():
        out[launch.job] = out.get(launch.job, 0) + 1
    return out


@pytest.mark.parametrize("policy", ["drf", "hdrf"])
def test_two_tenants_split_the_cpus_by_queue_weight(tmp_path, policy):
    svc, ex = service(tmp_path, policy)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 10, {"cpu": 1})]})
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 10, {"cpu": 1})]})
    svc.step()
    # 4 + 2 + 2 = 8 CPUs, queues ads and dev of weight 1 each: 8 / 2 = 4 tasks each
    assert running_by_job(ex) == {str(a): 4, str(b): 4}
    queues = svc.queues()
    assert queues["ads"]["current_dominant_share"] == pytest.approx(4 / 8)
    assert queues["dev"]["current_dominant_share"] == pytest.approx(4 / 8)
    assert queues["ads"]["fair_dominant_share"] == pytest.approx(4 / 8)
    assert (queues["ads"]["running_tasks"], queues["ads"]["pending_tasks"]) == (4, 6)


def test_admin_weight_change_moves_the_fair_share_and_keeps_running_tasks(tmp_path):
    svc, ex = service(tmp_path, "hdrf")  # hierarchical: queue weights count (flat drf weighs jobs)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 40, {"cpu": 1})]})
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 40, {"cpu": 1})]})
    svc.step()
    # update_queues waits for the loop; run the change through step() by hand here
    from fairshare.live.queues import queue_changes

    svc._inbox.append(("queues", (queue_changes({"weights": {"dev": 3}}), __import__("threading").Event())))
    svc.step()
    assert running_by_job(ex) == {str(a): 4, str(b): 4}  # adopted, not restarted
    assert svc.status()["running_tasks"] == 8
    # finish alice's 4 tasks; the 4 free CPUs go, one by one, to the queue with the lowest
    # dominant share / weight: ads 0 < dev (4/8)/3 = .167; ads 1/8 = .125 < .167;
    # dev .167 < ads 2/8 = .25; dev (5/8)/3 = .208 < .25: ads 2 tasks, dev 6
    for task_id in [t for t, la in ex.running.items() if la.job == str(a)]:
        ex.finish(task_id)
    svc.fair.at = float("-inf")  # the fair-share view is throttled to every 0.5 s
    svc.step()
    # and the fair share, weights 1:3 over 8 CPUs: dev 8 * 3/4 = 6 CPUs = 6/8
    assert running_by_job(ex) == {str(a): 2, str(b): 6}
    assert svc.queues()["dev"]["fair_dominant_share"] == pytest.approx(6 / 8)
    assert svc.queues()["dev"]["weight"] == 3


def test_failed_command_is_retried_then_marked_failed(tmp_path):
    svc, ex = service(tmp_path)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads", 1, {"cpu": 1}, command="false")]})
    for attempt in range(3):  # max_attempts = 3
        svc.step()
        (task_id,) = ex.running
        ex.finish(task_id, ok=False, reason="exit status 1: ")
    svc.step()
    detail = svc.get_job(a, None)
    assert detail["state"] == "failed"
    assert [(t["state"], t["attempts"], t["exit_code"]) for t in detail["tasks"]] == [("failed", 3, 1)]


def test_node_loss_requeues_its_tasks_elsewhere(tmp_path):
    svc, ex = service(tmp_path)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads", 3, {"cpu": 2})]})
    svc.step()
    # first fit: cpu-node (4 CPUs) takes 2 tasks, mic-node the third
    assert sorted(la.node for la in ex.running.values()) == ["cpu-node", "cpu-node", "mic-node"]
    ex.lose("cpu-node")
    svc.step()
    # the 2 lost tasks go back to pending; gpu-node (2 CPUs) takes one, the other waits
    assert sorted(la.node for la in ex.running.values()) == ["gpu-node", "mic-node"]
    for task_id in list(ex.running):
        ex.finish(task_id)
    svc.step()
    (last,) = ex.running
    ex.finish(last)
    svc.step()
    detail = svc.get_job(a, None)
    assert detail["state"] == "succeeded"
    assert all(t["node"] != "cpu-node" for t in detail["tasks"])


def test_cancel_drops_pending_and_interrupts_running(tmp_path):
    svc, ex = service(tmp_path)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads", 20, {"cpu": 1})]})
    svc.step()
    running = sorted(ex.running)
    svc.cancel(ALICE, a)
    svc.step()  # kills the 8 running (ManualExecutor reports them failed)
    svc.step()
    assert sorted(ex.killed) == running
    detail = svc.get_job(a, None)
    assert detail["state"] == "cancelled"
    assert {t["state"] for t in detail["tasks"]} == {"cancelled"}
    assert svc.status()["running_tasks"] == 0


def test_restart_resumes_without_rerunning_succeeded_tasks(tmp_path):
    svc, ex = service(tmp_path)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads", 10, {"cpu": 1})]})
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 2, {"cpu": 1})]})
    svc.step()
    done = sorted(ex.running)[:3]
    for task_id in done:
        ex.finish(task_id)
    svc.step()
    # "kill -9": the first service is dropped without stopping; a second one opens the db
    svc2, ex2 = service(tmp_path)
    svc2.step()
    started_again = {la.task_id for la in ex2.started}
    assert not started_again & set(done)  # a succeeded task never runs again
    jobs = {j["id"]: j for j in svc2.list_jobs(None)}
    assert set(jobs) == {a, b}  # no accepted job lost
    # 12 tasks - 3 succeeded = 9 to run; 8 CPUs: 8 start now
    assert len(started_again) == 8
    while ex2.running:
        for task_id in list(ex2.running):
            ex2.finish(task_id)
        svc2.step()
    assert {j["state"] for j in svc2.list_jobs(None)} == {"succeeded"}
    assert sum(j["tasks_succeeded"] for j in svc2.list_jobs(None)) == 12


def test_tenant_sees_only_its_own_jobs(tmp_path):
    svc, _ = service(tmp_path)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads", 1, {"cpu": 1})]})
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 1, {"cpu": 1})]})
    assert [j["id"] for j in svc.list_jobs("alice")] == [a]
    assert [j["id"] for j in svc.list_jobs("bob")] == [b]
    assert [j["id"] for j in svc.list_jobs(None)] == [a, b]


def test_status_has_the_dashboard_fields(tmp_path):
    svc, _ = service(tmp_path)
    svc.submit(ALICE, {"jobs": [job("a", "ads.prod", 3, {"cpu": 1, "mic": 1})]})
    svc.step()
    st = svc.status()
    assert set(st) >= {"time", "policy", "resources", "capacity", "utilization", "queues", "pending_tasks",
                       "running_tasks", "decisions_total", "nodes"}
    # one MIC in the cluster: one task runs, 2 wait; utilization of mic 1/1, cpu 1/8
    assert (st["running_tasks"], st["pending_tasks"], st["decisions_total"]) == (1, 2, 1)
    assert st["utilization"]["mic"] == pytest.approx(1.0)
    assert st["utilization"]["cpu"] == pytest.approx(1 / 8)
    assert [n["name"] for n in st["nodes"]] == ["cpu-node", "mic-node", "gpu-node"]
    assert st["nodes"][1]["used"]["mic"] == 1
    assert svc.history() and set(svc.history()[-1]) == {"time", "utilization", "queues"}
    assert registry_for(svc).get_sample_value("fairshare_decisions_total") == 1


class RefusingExecutor(ManualExecutor):
    """Refuses every start, as Ray does for a demand it cannot represent."""

    def start(self, launch, now):
        raise ValueError("Resource quantities < 0.0001 are not allowed")


def test_a_start_the_executor_refuses_uses_an_attempt_and_ends_failed(tmp_path):
    config = make_config()
    commands = CommandBook()
    ex = RefusingExecutor(config.nodes, commands)
    svc = LiveService(config, Store(tmp_path / "fs.db"), ex, policy="drf", commands=commands)
    svc.recover()
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads", 1, {"cpu": 1})]})
    passes = 0
    while svc.get_job(a, None)["state"] not in ("failed", "succeeded") and passes < 20:
        svc.step()
        passes += 1
    detail = svc.get_job(a, None)
    # max_attempts = 3 refused starts, then failed with the reason: no endless retries
    assert detail["state"] == "failed", (passes, detail)
    (task,) = detail["tasks"]
    assert task["state"] == "failed" and task["attempts"] == 3
    assert "start refused by the executor" in task["message"] and "0.0001" in task["message"]
    assert passes <= 8  # (each refused start comes back at the next pass)


def test_a_finished_job_leaves_the_loops_memory(tmp_path):
    svc, ex = service(tmp_path)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads", 2, {"cpu": 1})]})
    (b,) = svc.submit(BOB, {"jobs": [job("b", "dev", 2, {"cpu": 1})]})
    svc.step()
    assert svc.loop.admission.commands.jobs() == {str(a), str(b)}
    for task_id in [t for t, la in ex.running.items() if la.job == str(a)]:
        ex.finish(task_id)
    svc.step()
    assert svc.loop.admission.commands.jobs() == {str(b)}  # a's commands are gone
    assert set(svc.scheduler.jobs) == {str(b)}  # and the engine's record of it
    assert svc.status()["queues"]  # the views read the engine without it
    assert svc.get_job(a, None)["state"] == "succeeded"  # (the store still has it)
    svc.cancel(ADMIN, a)  # a cancel of a finished job changes nothing
    svc.step()
    assert svc.get_job(a, None)["state"] == "succeeded"


def test_fair_shares_are_computed_when_read_and_throttled_by_their_cost(tmp_path):
    """The fair-share view costs the policy's allocation of every job: passes only mark
    it stale, a read computes it, and after a computation that took ``cost`` seconds the
    next one waits ``max(FAIR_SHARE_EVERY_S, FAIR_SHARE_COST_FACTOR * cost)``."""
    from fairshare.live.views import FAIR_SHARE_COST_FACTOR, FAIR_SHARE_EVERY_S

    now = [0.0]
    config = make_config()
    commands = CommandBook()
    ex = ManualExecutor(config.nodes, commands)
    svc = LiveService(config, Store(tmp_path / "fs.db"), ex, policy="hdrf", commands=commands,
                      clock=lambda: now[0])
    svc.recover()
    svc.submit(ALICE, {"jobs": [job("a", "ads", 10, {"cpu": 1})]})
    svc.step()
    assert svc.fair.at == float("-inf")  # passes ran, nobody read: nothing computed
    assert svc.queues()["ads"]["fair_dominant_share"] == pytest.approx(1.0)  # alone: the whole cluster
    computed_at = svc.fair.at
    assert computed_at == 0.0

    svc.submit(BOB, {"jobs": [job("b", "dev", 10, {"cpu": 1})]})
    svc.step()
    svc.fair.cost = 0.2  # as if the last computation had taken 0.2 s: wait 2 s, not 0.5 s
    wait = max(FAIR_SHARE_EVERY_S, FAIR_SHARE_COST_FACTOR * svc.fair.cost)
    assert wait == pytest.approx(2.0)
    now[0] = wait - 0.01
    assert svc.queues()["ads"]["fair_dominant_share"] == pytest.approx(1.0)  # the last value, within the wait
    assert svc.fair.at == computed_at
    now[0] = wait
    assert svc.queues()["ads"]["fair_dominant_share"] == pytest.approx(0.5)  # bob's job counted now
    assert svc.fair.at == wait
    svc.step()  # nothing changed since: a read computes nothing more
    now[0] = 10 * wait
    svc.queues()
    assert svc.fair.at == wait
