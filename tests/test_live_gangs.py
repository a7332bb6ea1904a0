"""Gangs and priorities in serve, behind the executor seam without Ray (``ManualExecutor``):
a gang starts whole, a failed member stops the rest (pending again, in the store too), a
cancel ends every member, priority orders a queue, and the API shows the keys."""

from __future__ import annotations

import pytest
from test_live_service import ALICE, BOB, running_by_job, service

from live_helpers import job


def gang(name, queue, count, demand, **extra):
    return dict(job(name, queue, count, demand), gang=True, **extra)


def test_a_gang_starts_whole_or_waits(tmp_path):
    svc, ex = service(tmp_path)
    # 8 CPUs: a 6-task filler leaves 2, a gang of 4 waits whole (not 2 of 4)
    (fill,) = svc.submit(ALICE, {"jobs": [job("fill", "ads", 6, {"cpu": 1})]})
    svc.step()
    (g,) = svc.submit(ALICE, {"jobs": [gang("g", "ads", 4, {"cpu": 1})]})
    svc.step()
    assert running_by_job(ex) == {str(fill): 6}
    for task_id in sorted(ex.running)[:2]:
        ex.finish(task_id)
    svc.step()  # 4 CPUs free: the gang starts, all 4
    assert running_by_job(ex) == {str(fill): 4, str(g): 4}
    detail = svc.get_job(g, None)
    assert (detail["gang"], detail["pack"], detail["priority"]) == (True, None, 0)
    assert [t["state"] for t in detail["tasks"]] == ["running"] * 4


def test_a_failed_member_stops_its_gang_and_the_store_says_pending(tmp_path):
    svc, ex = service(tmp_path)
    (g,) = svc.submit(ALICE, {"jobs": [gang("g", "ads", 3, {"cpu": 1}, pack="node")]})
    svc.step()
    members = sorted(ex.running)
    assert len({ex.running[t].node for t in members}) == 1  # pack: node
    ex.finish(members[0], ok=False)
    svc.step()  # the failure stops the other two (killed); all three pending, then restart together
    assert sorted(ex.killed) == members[1:]
    svc.step()
    detail = svc.get_job(g, None)
    assert [t["state"] for t in detail["tasks"]] == ["running"] * 3
    assert [t["attempts"] for t in detail["tasks"]] == [2, 2, 2]
    assert detail["pack"] == "node"


def test_the_store_shows_stopped_members_pending_before_they_restart(tmp_path):
    svc, ex = service(tmp_path)
    (fill,) = svc.submit(ALICE, {"jobs": [job("fill", "ads", 5, {"cpu": 1})]})
    (g,) = svc.submit(ALICE, {"jobs": [gang("g", "ads", 3, {"cpu": 1})]})
    svc.step()
    members = sorted(t for t, la in ex.running.items() if la.job == str(g))
    # a new job of higher priority in the same queue takes the room first when the gang stops
    (urgent,) = svc.submit(ALICE, {"jobs": [dict(job("urgent", "ads", 3, {"cpu": 1}), priority=5)]})
    ex.finish(members[0], ok=False)
    svc.step()
    detail = svc.get_job(g, None)
    assert [t["state"] for t in detail["tasks"]] == ["pending"] * 3
    assert "stopped with its gang" in detail["tasks"][1]["message"]
    assert running_by_job(ex) == {str(fill): 5, str(urgent): 3}
    assert svc.get_job(urgent, None)["priority"] == 5


def test_cancel_ends_every_member(tmp_path):
    svc, ex = service(tmp_path)
    (g,) = svc.submit(ALICE, {"jobs": [gang("g", "ads", 4, {"cpu": 1})]})
    svc.step()
    svc.cancel(ALICE, g)
    svc.step()
    svc.step()
    assert len(ex.killed) == 4
    assert {t["state"] for t in svc.get_job(g, None)["tasks"]} == {"cancelled"}


def test_a_restart_adopts_a_gang_whole_or_not_at_all(tmp_path):
    from test_live_adoption import AdoptingExecutor

    from fairshare.live.commands import CommandBook
    from fairshare.live.service import LiveService
    from fairshare.live.store import Store
    from live_helpers import make_config

    class Killing(AdoptingExecutor):
        def kill(self, task_id):  # (an adopted attempt: the agent kills it and forgets it)
            self.killed.append(task_id)
            self.running.pop(task_id, None)
            self.held.pop(task_id, None)

    def serve(held):
        config, commands = make_config(), CommandBook()
        executor = Killing(config.nodes, commands, held)
        svc = LiveService(config, Store(tmp_path / "fs.db"), executor, policy="drf", commands=commands)
        svc.recover()
        return svc, executor

    held: dict = {}
    svc, ex = serve(held)
    (g,) = svc.submit(ALICE, {"jobs": [gang("g", "ads", 3, {"cpu": 1})]})
    svc.step()
    members = sorted(ex.running)
    del held[members[0]]  # one member died with the old serve (its agent gone): the others are not adopted
    svc2, ex2 = serve(held)
    assert sorted(ex2.killed) == members[1:]
    svc2.step()
    svc2.step()
    detail = svc2.get_job(g, None)
    assert [t["state"] for t in detail["tasks"]] == ["running"] * 3  # started again, together
    assert sorted(la.task_id for la in ex2.started) == members


def reserving_service(tmp_path, reserve_after):
    """serve on the 8-CPU test cluster with ``gangs: {reserve_after:}`` (None: no section)."""
    from live_helpers import ManualExecutor, config_doc

    from fairshare.live.commands import CommandBook
    from fairshare.live.config import parse_config
    from fairshare.live.service import LiveService
    from fairshare.live.store import Store

    doc = config_doc()
    if reserve_after is not None:
        doc["gangs"] = {"reserve_after": reserve_after}
    config = parse_config(doc, "test-config")
    commands = CommandBook()
    executor = ManualExecutor(config.nodes, commands)
    svc = LiveService(config, Store(tmp_path / "fs.db"), executor, policy="drf", commands=commands)
    svc.recover()
    return svc, executor


def gang_behind_two_ended_fillers(svc, ex) -> tuple[int, int]:
    """alice's 6-task filler runs, her 8-task gang waits, 2 fillers end, then bob submits a
    2-task job: (the gang's id, bob's job's id) after one more pass."""
    svc.submit(ALICE, {"jobs": [job("fill", "ads", 6, {"cpu": 1})]})
    svc.step()
    (g,) = svc.submit(ALICE, {"jobs": [gang("g", "ads", 8, {"cpu": 1})]})
    svc.step()
    for task_id in sorted(ex.running)[:2]:
        ex.finish(task_id)
    (small,) = svc.submit(BOB, {"jobs": [job("small", "dev", 2, {"cpu": 1})]})
    svc.step()
    return g, small


@pytest.mark.parametrize("reserve_after, small_starts", [(None, True), (0, False)])
def test_a_reservation_holds_freed_cpus_for_an_overdue_gang(tmp_path, reserve_after, small_starts):
    # 8 CPUs (4 + 2 + 2): a 6-task filler runs, an 8-task gang needs the whole cluster.
    # Two fillers end: 8 - 4 = 4 CPUs free. Without `gangs:` bob's 2-task job takes 2 (the
    # gang cannot start: 4 < 8); with reserve_after 0 the gang is overdue at once and every
    # node is in its plan, so the 4 free CPUs are held for it and bob's job waits (serve
    # knows no duration: no backfill, engine/reserve.py).
    svc, ex = reserving_service(tmp_path, reserve_after)
    g, small = gang_behind_two_ended_fillers(svc, ex)
    assert running_by_job(ex).get(str(small), 0) == (2 if small_starts else 0)
    if not small_starts:
        for task_id in sorted(ex.running):  # the rest of the filler ends: the gang starts whole, first
            ex.finish(task_id)
        svc.step()
        assert running_by_job(ex) == {str(g): 8}


def test_a_job_kept_off_held_capacity_is_told_so(tmp_path):
    # the same cluster and jobs as above, with reserve_after 0: bob's job waits because
    # 4 CPUs are held for the gang; without the hold they would fit it (reserved_for)
    svc, ex = reserving_service(tmp_path, 0)
    g, small = gang_behind_two_ended_fillers(svc, ex)
    (reason, *_) = svc.explain(BOB, small)["reasons"]
    assert reason["kind"] == "reserved_for" and reason["gang"] == str(g)
    # 2 of 6 fillers ended: 8 - 4 = 4 CPUs free, all held (every node is in the 8-CPU plan)
    assert reason["held"]["cpu"] == 8 - 4 and reason["gang_start"] is None  # serve: no durations
    held = {n for n in reason["held_nodes"]}
    assert set(reason["would_fit_on"]) <= held
    from fairshare.report.explain import reason_sentence

    assert reason_sentence(reason).startswith(f"Reserved for gang {g}: 4 cpu held on ")
