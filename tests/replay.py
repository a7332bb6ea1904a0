"""A minimal deterministic event loop over :class:`Scheduler`, for engine tests that must
not depend on the simulator: fixed durations, completions in (time, task id) order; and
:func:`lockstep`, two schedulers driven through the same completions side by side."""

from __future__ import annotations

import heapq
import random

from fairshare.engine import Scheduler


def replay(scheduler: Scheduler, jobs, duration_of, *, until: float = 1e9, node_events=(), observe=None):
    """Run ``jobs`` (submitted at their ``submit_s``) and return the launch log
    ``[(time, job, task_class, node)]``. ``duration_of(launch)`` gives each task's length;
    ``node_events`` are ``(time, "lose"|"add", node_or_name)``; ``observe(now)``, if given,
    is called after each instant's decisions (the state then holds until the next instant)."""
    log = []
    heap: list[tuple[float, int, int, object]] = []  # (time, kind, seq, payload)
    seq = 0
    for job in jobs:
        heapq.heappush(heap, (job.submit_s, 2, seq, job))
        seq += 1
    for t, kind, node in node_events:
        heapq.heappush(heap, (t, 1, seq, (kind, node)))
        seq += 1
    while heap:
        now = heap[0][0]
        if now > until:
            break
        while heap and heap[0][0] == now:  # every event at this instant, then decide once
            _, kind, _, payload = heapq.heappop(heap)
            if kind == 0:
                if payload in scheduler.tasks:
                    scheduler.finish(payload, now)
            elif kind == 1:
                what, node = payload
                if what == "lose":
                    scheduler.lose_node(node, now)
                else:
                    scheduler.add_node(node, now)
            else:
                scheduler.submit(payload, now)
        for launch in scheduler.schedule(now):
            log.append((now, launch.job, launch.task_class, launch.node))
            heapq.heappush(heap, (now + duration_of(launch), 0, launch.task_id, launch.task_id))
        if observe is not None:
            observe(now)
    return log


def lockstep(first: Scheduler, second: Scheduler, rounds: int, seed: int):
    """Two schedulers with the same jobs, side by side (two sorter cores, say): each round
    finishes the same running task in both (a seeded choice; none in round 0, the fill),
    re-fills, checks that both launched the same tasks on the same nodes and saw the same
    saturated set, and yields ``(round, launches)`` for the caller's own checks."""
    rng = random.Random(seed)
    for k in range(rounds):
        now = float(k)
        if k and first.tasks:
            task = rng.choice(sorted(first.tasks))
            first.finish(task, now)
            second.finish(task, now)
        got = [(launch.job, launch.node) for launch in first.schedule(now)]
        assert got == [(launch.job, launch.node) for launch in second.schedule(now)], k
        assert first.sorter.saturated == second.sorter.saturated, k
        yield k, got
