"""A restarted LiveService adopts the tasks its executor still runs (``recover``), without
Ray: ``AdoptingExecutor`` is ``ManualExecutor`` with the optional ``recover`` and
``acknowledge`` of ``RayExecutor`` and ends that name their attempt, so every step of
the adoption, the fencing by attempt and the acknowledgements can be checked exactly.
The same on a real Ray cluster, through SIGKILLs of serve: test_live_crash.py."""

from __future__ import annotations

from fairshare.engine.events import NodeLost, TaskFinished
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from live_helpers import ManualExecutor, job, make_config

ALICE = Principal("alice", queues=("ads",))


class AdoptingExecutor(ManualExecutor):
    """Like the node agents: ``held`` (shared by the services of a test, as the agents
    outlive serve) maps task id -> (attempt, node, ended ok or None while running); an
    end is held until acknowledged, and reported again to a restarted service."""

    def __init__(self, nodes, commands, held: dict[int, tuple[int, str, bool | None]]):
        super().__init__(nodes, commands)
        self.held = held
        self.recovered: list[tuple[str, int, dict]] = []
        self.acked: list[tuple[int, int]] = []

    def start(self, launch, now):
        super().start(launch, now)
        self.held[launch.task_id] = (launch.attempt, launch.node, None)

    def recover(self, service_id, incarnation, running):
        self.recovered.append((service_id, incarnation, dict(running)))
        adopted = {t for t, (attempt, node, _ok) in self.held.items() if running.get(t) == (attempt, node)}
        for t in set(self.held) - adopted:  # dropped: killed, forgotten
            del self.held[t]
        for t in sorted(adopted):
            attempt, node, ok = self.held[t]
            if ok is None:
                self.running[t] = None
            else:  # ended while no service was up: reported now
                self._events.append(TaskFinished(t, ok, "" if ok else "exit status 1: boom", attempt=attempt))
        return adopted

    def end(self, task_id: int, ok: bool = True) -> None:
        """The held attempt of ``task_id`` ends (reported to the service running now)."""
        attempt, node, _ = self.held[task_id]
        self.held[task_id] = (attempt, node, ok)
        self.running.pop(task_id, None)
        self._events.append(TaskFinished(task_id, ok, "" if ok else "exit status 1: boom", attempt=attempt))

    def acknowledge(self, ends):
        self.acked.extend(ends)
        for task_id, attempt in ends:
            if task_id in self.held and self.held[task_id][0] == attempt:
                del self.held[task_id]


def service(tmp_path, held):
    config = make_config()
    commands = CommandBook()
    executor = AdoptingExecutor(config.nodes, commands, held)
    svc = LiveService(config, Store(tmp_path / "fs.db"), executor, policy="drf", commands=commands)
    svc.recover()
    return svc, executor


def states(svc, job_id):
    return [(t.state, t.attempts) for t in svc.store.tasks(job_id)]


def test_a_restart_adopts_running_tasks_and_records_their_ends_once(tmp_path):
    held: dict = {}
    svc, ex = service(tmp_path, held)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads", 10, {"cpu": 1})]})
    svc.step()
    first = sorted(ex.running)
    assert len(first) == 8  # 8 CPUs
    ex.end(first[0])
    svc.step()
    assert ex.acked == [(first[0], 1)] and first[0] not in held  # forgotten once recorded

    # "kill -9" with 7 tasks running; one ends before the dead service records it, one
    # while no service is up
    ex.end(first[1])
    ex._events.clear()  # (the dead service never saw it)
    ex.end(first[2])
    was_running = {t.id: (t.attempts, t.node) for t in svc.store.tasks(a, state="running")}
    assert len(was_running) == 8  # first[1:] and the task started in first[0]'s room
    svc2, ex2 = service(tmp_path, held)
    sid, inc, running = ex2.recovered[0]
    assert (sid, inc) == (svc.store.begin_incarnation()[0], svc.incarnation + 1)
    assert running == was_running  # what the database says runs, with attempt and node
    # first pass: the jobs arrive and the 8 are adopted (the two ends, reported before
    # the arrival, wait one pass); second: the ends are recorded, the last pending task
    # starts in the room they leave
    svc2.step()
    assert ex2.started == [] and svc2.status()["running_tasks"] == 8
    svc2.step()
    assert [la.task_id for la in ex2.started] == [10]  # no adopted task started again
    assert svc2.status()["running_tasks"] == 7
    assert states(svc2, a).count(("succeeded", 1)) == 3
    assert sorted(ex2.acked) == [(first[1], 1), (first[2], 1)]
    # a late, repeated end of a recorded attempt changes nothing (and may be forgotten)
    ex2._events.append(TaskFinished(first[1], False, "exit status 1: late", attempt=1))
    svc2.step()
    assert states(svc2, a).count(("succeeded", 1)) == 3
    while ex2.running:
        for t in list(ex2.running):
            ex2.end(t)
        svc2.step()
    assert states(svc2, a) == [("succeeded", 1)] * 10  # every task ran once
    assert held == {}


def test_an_adopted_task_whose_node_is_lost_before_its_job_arrives_runs_again(tmp_path):
    held: dict = {}
    svc, ex = service(tmp_path, held)
    (a,) = svc.submit(ALICE, {"jobs": [job("a", "ads", 2, {"cpu": 1})]})
    svc.step()
    on = {t: node for t, (_a, node, _ok) in held.items()}
    lost = on[min(on)]
    svc2, ex2 = service(tmp_path, held)
    ex2._events.append(NodeLost(lost))  # reported in the first pass, before the job's arrival
    svc2.step()
    gone = [t for t, node in on.items() if node == lost]
    assert {la.task_id for la in ex2.started} == set(gone)  # started again elsewhere (attempt 2)
    assert all(la.node != lost for la in ex2.started)
    assert {t.id: t.attempts for t in svc2.store.tasks(a) if t.id in gone} == {t: 2 for t in gone}
