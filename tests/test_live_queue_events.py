"""Queue-tree changes are engine events: serve, a replay and the simulator decide alike.

A workload runs through the live service (``ManualExecutor``, a hand-moved clock) while
the admin changes the queue tree through ``update_queues`` (the ``PUT /v1/queues`` path:
validated, stored, then applied by the scheduling pass as ``QueueChanged`` events):

* t = 3: dev's weight 1 -> 3;
* t = 5: a limit of 3 CPUs on ads;
* t = 6: a new queue ads.new (weight 2); at t = 7 a job F is submitted to it (the API
  accepts a job for a queue once the pass has added it).

Three runs must make the same decisions:

1. the live service;
2. a replay of the events serve fed to ``Engine.step`` (``record_rounds``) through
   ``run_rounds`` on a fresh engine: the same launches, task ids and attempts;
3. ``simulate`` of a scenario with the same jobs and the same changes in its
   ``events:`` section (``{time, queue: {...}}``), given the same completion times.
"""

from __future__ import annotations

import heapq
import threading

import pytest

from live_helpers import ManualExecutor, config_doc, make_config, replay, simulate_launches, wait_for
from fairshare.live.auth import Principal
from fairshare.live.commands import CommandBook
from fairshare.live.service import LiveService
from fairshare.live.store import Store

ADMIN = Principal("admin", admin=True)

# (name, queue, count, demand, duration s, submit s)
WORKLOAD = [
    ("A", "ads.prod", 12, {"cpu": 1, "memory": 2}, 2, 0),
    ("B", "ads.test", 8, {"cpu": 1}, 3, 0),
    ("C", "dev", 14, {"cpu": 1}, 2, 0),
    ("F", "ads.new", 6, {"cpu": 1}, 2, 7),
]
# (time, the scenario's queue change, the same change as a PUT /v1/queues document)
CHANGES = [
    (3, {"name": "dev", "weight": 3}, {"weights": {"dev": 3}}),
    (5, {"name": "ads", "limit": {"cpu": 3}}, {"bounds": {"ads": {"limit": {"cpu": 3}}}}),
    (6, {"name": "ads.new", "weight": 2}, {"add": [{"path": "ads.new", "weight": 2}]}),
]


def job_doc(name, queue, count, demand, duration, submit=None) -> dict:
    doc = {"name": name, "queue": queue,
           "tasks": [{"demand": demand, "count": count, "duration": duration, "command": "true"}]}
    if submit is not None:
        doc["submit"] = submit
    return doc


def simulate(policy: str) -> list[tuple[str, str, float]]:
    doc = config_doc()
    del doc["auth"]
    doc["jobs"] = [job_doc(*w) for w in WORKLOAD]
    doc["events"] = [{"time": t, "queue": change} for t, change, _ in CHANGES]
    return simulate_launches(doc, policy, "queue events")


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def change_queues(svc: LiveService, doc: dict) -> threading.Thread:
    """``update_queues`` as an admin's request does it (it waits for the pass to apply
    the change; the test runs the pass)."""
    before = len(svc._inbox)
    thread = threading.Thread(target=svc.update_queues, args=(ADMIN, doc))
    thread.start()
    wait_for(lambda: len(svc._inbox) > before, 10, "the queue change in the inbox")
    return thread


@pytest.mark.parametrize("policy", ["hdrf", "drf", "dff"])
def test_queue_changes_replay_and_simulate_to_the_same_decisions(tmp_path, policy):
    sim_launches = simulate(policy)
    duration = {w[0]: float(w[4]) for w in WORKLOAD}

    config = make_config()
    commands = CommandBook()
    ex = ManualExecutor(config.nodes, commands)
    clock = Clock()
    svc = LiveService(config, Store(tmp_path / "fs.db"), ex, policy=policy, commands=commands,
                      record_rounds=True, clock=clock)
    svc.recover()
    name_of = {}
    for w in WORKLOAD:
        if w[5] == 0:
            (job_id,) = svc.submit(ADMIN, {"jobs": [job_doc(*w[:5])]})
            name_of[str(job_id)] = w[0]
    svc.step()  # t = 0

    # every later instant in time order: completions (in launch order within an instant,
    # as the simulator's heap), then the queue changes and arrivals of that time
    ends: list[tuple[float, int]] = []
    pushed = 0
    changes = {t: doc for t, _, doc in CHANGES}
    arrivals = {w[5]: w for w in WORKLOAD if w[5] > 0}
    instants = sorted(set(changes) | set(arrivals))
    while True:
        while pushed < len(ex.started):
            la = ex.started[pushed]
            heapq.heappush(ends, (clock.t + duration[name_of[la.job]], pushed))
            pushed += 1
        later = next((x for x in instants if x > clock.t), None)
        candidates = [x for x in (ends[0][0] if ends else None, later) if x is not None]
        if not candidates:
            break
        t = min(candidates)
        clock.t = t
        while ends and ends[0][0] == t:
            _, k = heapq.heappop(ends)
            ex.finish(ex.started[k].task_id)
        waiting = []
        if t in changes:
            waiting.append(change_queues(svc, changes[t]))
        if t in arrivals:
            w = arrivals[t]
            (job_id,) = svc.submit(ADMIN, {"jobs": [job_doc(*w[:5])]})
            name_of[str(job_id)] = w[0]
        svc.step()
        for thread in waiting:
            thread.join(10)
            assert not thread.is_alive()

    live = [(name_of[la.job], la.node) for la in ex.started]
    assert len(live) == sum(w[2] for w in WORKLOAD)  # 12 + 8 + 14 + 6 = 40 decisions
    assert live == [(job, node) for job, node, _ in sim_launches]
    assert {j["state"] for j in svc.list_jobs(None)} == {"succeeded"}
    # the tree the pass applied: dev weight 3, ads limited to 3 CPUs, ads.new added
    queues = svc.queues()
    assert queues["dev"]["weight"] == 3 and queues["ads.new"]["weight"] == 2
    # the changes took effect in the decisions: from t = 5 on, no task of ads (A, B, F)
    # starts while 3 of its tasks (1 CPU each) run
    starts = [(t, job) for job, _, t in sim_launches]
    assert _most_running_at_ads_starts(starts, duration, since=5) <= 3
    # and the replay of what serve fed to Engine.step decides the same, ids and attempts too
    assert [(la.job, la.node, la.task_id, la.attempt) for la in replay(svc, policy)] == \
        [(la.job, la.node, la.task_id, la.attempt) for la in ex.started]


def _most_running_at_ads_starts(starts, duration, since):
    """The most tasks of ads's jobs running just after any start of one of them at or
    after ``since`` (the one just started included)."""
    ads = {"A", "B", "F"}
    return max((sum(1 for s, job in starts if job in ads and s <= t < s + duration[job])
                for t, started in starts if started in ads and t >= since), default=0)
