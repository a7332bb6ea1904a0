"""Parity with FIFO queues: the incremental sorters honour ``order: fifo`` as the
reference does (only a queue's earliest runnable job competes with its sub-queues).

The random scenarios of test_online_parity.py have fair queues only; here every queue is
made FIFO with probability 1/2 and the same launch sequence is required.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import scenarios
from test_online_parity import run

from fairshare.model import Node
from fairshare.model.queues import QueueTree

CASES = [("dff", {}), ("drf", {}), ("hdrf", {}), ("hdrf-naive", {})]


def with_fifo_queues(sc, rng: random.Random):
    entries = [(p, sc.queues[p].weight, rng.choice(["fair", "fifo"])) for p in sc.queues.paths]
    return dataclasses.replace(sc, queues=QueueTree.build(entries))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(max_jobs=8, counts=True), seed=st.integers(0, 100), k=st.integers(1, 3))
@pytest.mark.parametrize("policy, options", CASES)
def test_fifo_queues_match_reference(policy, options, sc, seed, k):
    rng = random.Random(seed)
    sc = with_fifo_queues(sc, rng)
    sc = dataclasses.replace(sc, jobs=tuple(dataclasses.replace(j, submit_s=float(rng.choice([0, 0, 1, 4])))
                                            for j in sc.jobs))
    per_node = tuple(max(c / k, max(j.classes[0].demand[r] for j in sc.jobs)) for r, c in enumerate(sc.capacity))
    nodes = tuple(Node(f"n{i}", per_node) for i in range(k))
    fast = run(sc, nodes, policy, options, seed=seed)
    slow = run(sc, nodes, policy, options, reference=True, seed=seed)
    assert fast == slow
