"""The engine's one loop (``engine.step.Engine``) and its read-only views
(``engine.snapshot``), on small clusters whose every decision can be worked out by hand.

Cluster: two nodes of 4 CPUs and 8 GB; queues ``a`` (children ``a.x``, ``a.y``) and ``b``,
weight 1 each; DRF on queues (hdrf).
"""

from __future__ import annotations

import random

import pytest

from builders import job, q, scenario
from fairshare.engine import (Engine, JobArrived, JobCancelled, NodeAdded, NodeLost, Scheduler, TaskFinished,
                              run_rounds)
from fairshare.model.cluster import Node
from fairshare.policies import make_policy
from fairshare.sim.durations import DurationSampler
from fairshare.sim.events import EventQueue
from fairshare.sim.executor import SimulatedExecutor

NODES = [{"name": "n1", "capacity": {"cpu": 4, "memory": 8}}, {"name": "n2", "capacity": {"cpu": 4, "memory": 8}}]
QUEUES = [q("a", 1, q("x"), q("y")), q("b")]


class Recorder:
    """An executor that starts nothing and records what the engine asked of it."""

    def __init__(self, nodes=()):
        self._nodes = tuple(nodes)
        self.started = []
        self.killed = []

    def nodes(self):
        return self._nodes

    def start(self, launch, now):
        self.started.append((launch, now))

    def kill(self, task_id):
        self.killed.append(task_id)

    def poll(self):
        return []


def build(jobs, *, task_ids=None, policy="hdrf"):
    sc = scenario(jobs=jobs, queues=QUEUES, nodes=NODES)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy), task_ids=task_ids)
    ex = Recorder(sc.cluster.nodes)
    return sc, Engine(sched, ex), ex


def test_one_step_applies_the_events_then_decides_once_and_starts_in_order():
    sc, engine, ex = build([job("J", {"cpu": 1, "memory": 1}, "a.x", count=3)])
    instant = engine.step(0.0, [JobArrived(sc.jobs[0])])
    # 3 one-CPU tasks fit on n1 (first-fit): one decision round, three launches
    assert [(la.job, la.node) for la in instant.launches] == [("J", "n1")] * 3
    assert [la for la, _ in ex.started] == instant.launches
    assert [a.event for a in instant.applied] == [JobArrived(sc.jobs[0])]
    assert engine.scheduler.decisions == 3


def test_a_step_whose_events_all_miss_does_not_decide():
    sc, engine, ex = build([job("J", {"cpu": 1}, "a.x", count=1)])
    engine.step(0.0, [JobArrived(sc.jobs[0])])
    # a completion of an unknown task, a node lost that does not exist, a node added twice
    instant = engine.step(1.0, [TaskFinished(99), NodeLost("nope"), NodeAdded(sc.cluster.nodes[0])])
    assert instant.applied == [] and instant.launches == []


def test_task_ids_come_from_the_caller():
    rows = {0: [10, 11]}  # class 0 of job J: the caller's ids, in the order it hands them out
    sc, engine, _ = build([job("J", {"cpu": 1}, "a.x", count=2)], task_ids=lambda name, j: rows[j].pop(0))
    launches = engine.step(0.0, [JobArrived(sc.jobs[0])]).launches
    assert [la.task_id for la in launches] == [10, 11]
    assert sorted(engine.scheduler.tasks) == [10, 11]
    # a completion names the caller's id
    engine.step(1.0, [TaskFinished(10)])
    assert sorted(engine.scheduler.tasks) == [11]


def test_cancel_kills_the_running_tasks_through_the_executor():
    sc, engine, ex = build([job("J", {"cpu": 4}, "a.x", count=5)])
    engine.step(0.0, [JobArrived(sc.jobs[0])])  # 2 of 5 start (4 CPUs each, 2 nodes)
    applied = engine.step(1.0, [JobCancelled("J")]).applied
    assert ex.killed == [0, 1] and applied[0].tasks == (0, 1)
    # the kills come back as failures: the job is complete, nothing re-queued
    instant = engine.step(2.0, [TaskFinished(0, ok=False), TaskFinished(1, ok=False)])
    assert instant.launches == []
    assert engine.scheduler.jobs["J"].finished_at == 2.0


def test_node_lost_reports_the_requeued_tasks():
    sc, engine, _ = build([job("J", {"cpu": 4}, "a.x", count=2)])
    engine.step(0.0, [JobArrived(sc.jobs[0])])  # task 0 on n1, task 1 on n2
    instant = engine.step(1.0, [NodeLost("n1")])
    assert instant.applied[0].tasks == (0,)
    assert instant.launches == []  # n2 is full: the re-queued task waits
    instant = engine.step(2.0, [NodeAdded(Node("n3", (4.0, 8.0)))])
    assert [(la.job, la.node) for la in instant.launches] == [("J", "n3")]


def test_replay_of_recorded_rounds_gives_the_same_launches():
    jobs = [job("A", {"cpu": 1, "memory": 2}, "a.x", count=6), job("B", {"cpu": 2}, "b", count=4)]
    sc, engine, _ = build(jobs)
    rounds = [(0.0, [JobArrived(sc.jobs[0]), JobArrived(sc.jobs[1])]),
              (1.0, [TaskFinished(0), TaskFinished(1)]),
              (2.0, [NodeLost("n2")])]
    first = run_rounds(engine, rounds)
    _, again, _ = build(jobs)
    assert [(la.task_id, la.job, la.node) for la in run_rounds(again, rounds)] == \
        [(la.task_id, la.job, la.node) for la in first]


def test_snapshot_rolls_usage_up_the_queue_tree():
    jobs = [job("X", {"cpu": 1, "memory": 2}, "a.x", count=2), job("Y", {"cpu": 2, "memory": 1}, "a.y", count=1),
            job("B", {"cpu": 1, "memory": 1}, "b", count=9)]
    sc, engine, _ = build(jobs)
    engine.step(0.0, [JobArrived(j) for j in sc.jobs])
    snap = engine.snapshot()
    assert snap.capacity == (8.0, 16.0)
    running = {name: j.running for name, j in snap.jobs.items()}
    # 8 CPUs, queues a and b of weight 1: each gets 4 CPUs' worth of dominant share
    # a: X 2 x (1, 2) + Y 1 x (2, 1) = (4, 5), share max(4/8, 5/16) = 0.5
    # b: 4 x (1, 1) = (4, 4), share 0.5; B's other 5 tasks wait
    assert running == {"X": 2, "Y": 1, "B": 4}
    assert snap.queues["a"].usage == (4.0, 5.0) and snap.queues["a"].dominant_share == pytest.approx(0.5)
    assert snap.queues["a.x"].usage == (2.0, 4.0) and snap.queues["a.y"].usage == (2.0, 1.0)
    assert snap.queues["b"] == (4, (4.0, 4.0), 0.5)
    assert (snap.pending_jobs["B"], snap.pending_queues["b"], snap.pending) == (5, 5, 5)
    assert snap.cluster.running == 7 and snap.cluster.usage == (8.0, 9.0)
    # per node: n1 holds X's 2 tasks and Y's, then B's first (1 + 1 + 2 = 4 CPUs) ...
    assert sum(n.running for n in snap.nodes) == 7
    assert [n.used[0] for n in snap.nodes] == [4.0, 4.0]


def test_changes_report_only_what_moved():
    jobs = [job("X", {"cpu": 1}, "a.x", count=2), job("B", {"cpu": 1}, "b", count=2)]
    sc, engine, _ = build(jobs)
    engine.step(0.0, [JobArrived(j) for j in sc.jobs])
    first = engine.changes()  # the first report: every queue and the cluster
    assert set(first.queues) == {"a", "a.x", "a.y", "b"} and first.cluster is not None
    engine.step(1.0, [TaskFinished(0)])  # one of X's tasks
    moved = engine.changes()
    assert [j.name for j in moved.jobs] == ["X"]
    assert set(moved.queues) == {"a", "a.x"}  # b and a.y did not move
    assert moved.queues["a.x"].running == 1 and moved.cluster.running == 3
    assert engine.changes().jobs == []  # nothing since


def test_a_snapshot_does_not_hide_changes_from_the_next_report():
    sc, engine, _ = build([job("X", {"cpu": 1}, "a.x", count=2)])
    engine.step(0.0, [JobArrived(sc.jobs[0])])
    engine.changes()
    engine.step(1.0, [TaskFinished(0)])
    engine.snapshot()  # rolls the completion up ...
    moved = engine.changes()  # ... and the next report still has it
    assert [j.name for j in moved.jobs] == ["X"] and moved.queues["a.x"].running == 1


def test_totals_match_the_snapshot_and_neither_hides_changes():
    jobs = [job("X", {"cpu": 1, "memory": 2}, "a.x", count=2), job("B", {"cpu": 1, "memory": 1}, "b", count=9)]
    sc, engine, _ = build(jobs)
    engine.step(0.0, [JobArrived(j) for j in sc.jobs])
    engine.changes()
    engine.step(1.0, [TaskFinished(0)])
    capacity, queues, cluster = engine.totals()
    snap = engine.snapshot()
    assert (capacity, queues, cluster) == (snap.capacity, snap.queues, snap.cluster)
    assert queues["a.x"].running == 1  # X: one of its two tasks ended
    assert list(queues) == ["a", "a.x", "a.y", "b"]  # (tree order)
    # a.x: X's other task (1, 2) left, a.y nothing: a holds (1, 2) of (8, 16), share 1/8;
    # B took the 6 CPUs X left at 0 and the one it freed at 1: 7 x (1, 1), share 7/8;
    # the cluster 8 tasks (8, 9), share max(8/8, 9/16) = 1
    assert queues["a"] == (1, (1.0, 2.0), 0.125) and queues["b"] == (7, (7.0, 7.0), 0.875)
    assert cluster == (8, (8.0, 9.0), 1.0)
    moved = engine.changes()  # (reads: the next report still has the completion and B's launch)
    assert [j.name for j in moved.jobs] == ["B", "X"] and set(moved.queues) == {"a", "a.x", "b"}


def test_two_readers_each_see_every_change():
    sc, engine, _ = build([job("X", {"cpu": 1}, "a.x", count=3), job("B", {"cpu": 1}, "b", count=1)])
    ledger = engine.ledger
    timeline, other = ledger.reader(), ledger.reader()
    engine.step(0.0, [JobArrived(j) for j in sc.jobs])  # tasks 0, 2, 3 of X's and 1 of B's
    first = ledger.changes(timeline)  # a new reader's first report: every job, queue and the cluster
    assert [j.name for j in first.jobs] == ["B", "X"] and list(first.queues) == ["a", "a.x", "a.y", "b"]  # (by path)
    engine.step(1.0, [TaskFinished(0)])  # one of X's tasks
    assert [j.name for j in ledger.changes(timeline).jobs] == ["X"]
    engine.step(2.0, [TaskFinished(1)])  # B's task
    # the other reader has not read since the start: everything, with both ends in it
    got = ledger.changes(other)
    assert got.queues["a.x"].running == 2 and got.queues["b"].running == 0 and got.cluster.running == 2
    moved = ledger.changes(timeline)  # and the first still gets B's end, which the other read
    assert [j.name for j in moved.jobs] == ["B"] and set(moved.queues) == {"b"}
    assert moved.cluster == (2, (2.0, 0.0), 0.25)
    assert ledger.changes(other).jobs == [] and ledger.changes(timeline).cluster is None
    ledger.drop(other)
    engine.step(3.0, [TaskFinished(2)])
    assert [j.name for j in ledger.changes(timeline).jobs] == ["X"]


def test_a_capacity_change_reports_everything_to_every_reader():
    sc, engine, _ = build([job("X", {"cpu": 1}, "a.x", count=1)])
    engine.step(0.0, [JobArrived(sc.jobs[0])])
    other = engine.ledger.reader()
    engine.changes(), engine.ledger.changes(other)
    engine.step(1.0, [NodeAdded(Node("n3", (4.0, 8.0)))])
    for got in (engine.changes(), engine.ledger.changes(other)):
        assert got.capacity_changed and got.capacity == (12.0, 24.0)  # three nodes of (4, 8)
        assert [j.name for j in got.jobs] == ["X"] and len(got.queues) == 4 and got.cluster.running == 1
    assert not engine.changes().capacity_changed


def test_queue_usage_is_one_table_the_limits_and_the_views_read():
    limited = q("a", 1, q("x"), q("y"))
    limited["limit"] = {"cpu": 3}
    sc = scenario(jobs=[job("X", {"cpu": 1, "memory": 2}, "a.x", count=5), job("B", {"cpu": 1}, "b", count=1)],
                  queues=[limited, q("b")], nodes=NODES)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
    engine = Engine(sched, Recorder(sc.cluster.nodes))
    instant = engine.step(0.0, [JobArrived(j) for j in sc.jobs])
    # a's limit of 3 CPUs, read task by task within the round: X runs 3 of its 5 tasks
    assert sorted(la.job for la in instant.launches) == ["B", "X", "X", "X"]
    table = sched.bounds
    # settled at the end of the round: a.x and a hold 3 x (1, 2), the root (the cluster) 4 tasks
    assert table.usage["a.x"] == table.usage["a"] == [3.0, 6.0] and table.running["a"] == 3
    assert table.usage[""] == [4.0, 6.0] and table.running[""] == 4
    assert table.current("a") == [3.0, 6.0]  # (nothing moving: all settled)
    snap = engine.snapshot()
    assert snap.queues["a"] == (3, (3.0, 6.0), 0.375) and snap.cluster == (4, (4.0, 6.0), 0.5)
    engine.step(1.0, [TaskFinished(instant.launches[0].task_id)])  # one of X's ends: X's 4th starts
    assert table.running["a"] == 3 and table.current("a") == [3.0, 6.0]


def test_an_engine_over_a_scheduler_with_running_tasks_reports_them():
    # (a runtime rebuilding its scheduler adopts the running tasks before the engine exists)
    sc = scenario(jobs=[job("X", {"cpu": 1, "memory": 2}, "a.x", count=2)], queues=QUEUES, nodes=NODES)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
    sched.submit(sc.jobs[0], 0.0)
    assert len(sched.schedule(0.0)) == 2 and len(sched.change_log) == 0  # (no reader yet: the log keeps nothing)
    engine = Engine(sched, Recorder(sc.cluster.nodes))
    assert engine.snapshot().queues["a"] == (2, (2.0, 4.0), 0.25)  # 2 x (1, 2) of (8, 16)
    first = engine.changes()
    assert [j.running for j in first.jobs] == [2] and first.cluster.running == 2


def test_the_simulated_executor_ends_a_killed_task_at_once():
    sc = scenario(jobs=[job("J", {"cpu": 4}, "a.x", count=3)], queues=QUEUES, nodes=NODES)
    events = EventQueue()
    clock = [0.0]
    ex = SimulatedExecutor(sc.cluster.nodes, events, DurationSampler(sc.jobs, random.Random(0)),
                           {j.name: j for j in sc.jobs}, lambda: clock[0])
    engine = Engine(Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf")), ex)
    engine.step(0.0, [JobArrived(sc.jobs[0])])
    assert ex.launched == 2 and len(events) == 2  # two completions pushed
    clock[0] = 0.5
    engine.step(0.5, [JobCancelled("J")])
    # the kills: failed completions at the current time, before the scheduled ones
    t, _, event = events.pop()
    assert (t, event) == (0.5, TaskFinished(0, ok=False, reason="cancelled"))


def test_moved_is_the_changes_before_their_shares_and_survives_a_pickle():
    # ``UsageLedger.moved``: what ``changes`` reports, before the shares are worked out;
    # ``changes_of`` makes the same ``Changes`` of it here and of a pickled or marshalled
    # copy (``sim.offload``'s child), and reading it moves the reader on as ``changes`` does
    import marshal
    import pickle

    from fairshare.engine.snapshot import Moved, changes_of

    sc, engine, _ = build([job("X", {"cpu": 1, "memory": 2}, "a.x", count=3), job("B", {"cpu": 1}, "b", count=1)])
    ledger = engine.ledger
    twin = ledger.reader()
    engine.step(0.0, [JobArrived(j) for j in sc.jobs])
    engine.step(1.0, [TaskFinished(0)])
    moved, expected = ledger.moved(), ledger.changes(twin)
    assert [j[0] for j in moved.jobs] == ["B", "X"] and {q[0] for q in moved.queues} >= {"", "a", "a.x", "b"}
    assert changes_of(moved) == expected and expected.cluster is not None
    assert changes_of(pickle.loads(pickle.dumps(moved))) == expected
    assert changes_of(Moved(*marshal.loads(marshal.dumps(tuple(moved))))) == expected
    assert ledger.moved().jobs == [] and ledger.moved().queues == []  # (read: nothing since)
