"""``kueue``: Kueue's dominant resource share, quota tree and admission, on the cases of
Kueue's own unit test, and simulated runs that show borrowing, lending and reclaiming.

Source (kubernetes-sigs/kueue, Apache-2.0): ``pkg/cache/fair_sharing_test.go``
``TestDominantResourceShare`` (a ClusterQueue ``cq`` and a ``lending-cq`` in one cohort;
``wantDRValue`` in thousandths, e.g. ``200, // (7-5)*1000/10``) and the formulas of
``pkg/cache/resource_node.go`` (``available``, ``guaranteedQuota``).
"""

from __future__ import annotations

import math

import pytest

from fairshare.model.errors import ScenarioError
from fairshare.model.loader import parse_scenario
from fairshare.model.scenario import PreemptionConfig
from fairshare.policies import make_policy
from fairshare.policies.kueue import dominant_resource_share
from fairshare.sim import SimOptions
from fairshare.sim.simulator import simulate

CQ, LENDER = "test-cohort.cq", "test-cohort.lending-cq"


def cohort_of_two(nominal_cq, nominal_lender, *, weight=1.0, lending=None, resources=("cpu", "gpu")):
    """TestDominantResourceShare's cohort: ``cq`` and ``lending-cq``, the cluster exactly
    their quotas (so the root cohort owns nothing)."""
    capacity = {r: nominal_cq.get(r, 0) + nominal_lender.get(r, 0) for r in resources}
    doc = {"resources": list(resources), "cluster": {"capacity": capacity}, "jobs": [],
           "queues": [{"name": "test-cohort", "children": [
               {"name": "cq", "weight": weight, "guarantee": nominal_cq},
               {"name": "lending-cq", "guarantee": nominal_lender}]}]}
    if lending:
        doc["peers"] = {"kueue": {"lending_limit": lending}}
    return parse_scenario(doc)


def drs_in_thousandths(sc, usage, request):
    """The DRS of ``cq`` holding ``usage`` with ``request`` admitted, through the policy's
    own quota tree, as Kueue reports it (thousandths)."""
    sorter = make_policy("kueue").configured(sc).online(sc.resources, sc.queues, sc.capacity)
    sorter.add_job("w", CQ, 1.0, tuple(usage))
    sorter.allocated("w", tuple(usage))
    drs = sorter.drs(CQ, tuple(request), sorter.quota.usages(sorter.own_usage()))
    return drs * 1000 if math.isinf(drs) else round(drs * 1000)


# (case of TestDominantResourceShare, cq nominal, lender nominal, cq weight, lending
# limits, cq usage <cpu, gpu>, request, wanted DRS in thousandths)
CASES = [
    ("usage below nominal", {"cpu": 2, "gpu": 5}, {"cpu": 8, "gpu": 5}, 1, None, (1, 2), (0, 0), 0),
    # gpu borrowed 7-5 = 2 of the cohort's lendable 5+5: (7-5)*1000/10
    ("usage above nominal", {"cpu": 2, "gpu": 5}, {"cpu": 8, "gpu": 5}, 1, None, (3, 7), (0, 0), 200),
    # cpu borrowed 3-2 = 1 of 2+8: (3-2)*1000/10
    ("one resource above nominal", {"cpu": 2, "gpu": 5}, {"cpu": 8, "gpu": 5}, 1, None, (3, 3), (0, 0), 100),
    # with the workload's <4, 4>: cpu (1+4-2)*1000/10 = 300, gpu (2+4-5)*1000/10 = 100
    ("usage with workload above nominal", {"cpu": 2, "gpu": 5}, {"cpu": 8, "gpu": 5}, 1, None, (1, 2), (4, 4),
     300),
    # gpu lendingLimit 0 in both: nothing lendable, so gpu does not count: cpu (1+4-2)*1000/10
    ("A resource with zero lendable", {"cpu": 2, "gpu": 2}, {"cpu": 8, "gpu": 64}, 1,
     {"test-cohort.cq": {"gpu": 0}, "test-cohort.lending-cq": {"gpu": 0}}, (1, 1), (4, 4), 300),
    # ((7-5)*1000/10)/2
    ("above nominal with integer weight", {"gpu": 5}, {"gpu": 5}, 2, None, (0, 7), (0, 0), 100),
    # ((7-5)*1000/10)/(1/2)
    ("above nominal with decimal weight", {"gpu": 5}, {"gpu": 5}, 0.5, None, (0, 7), (0, 0), 400),
]


@pytest.mark.parametrize("case, cq, lender, weight, lending, usage, workload, want", CASES, ids=[c[0] for c in CASES])
def test_dominant_resource_share_as_kueues_unit_test(case, cq, lender, weight, lending, usage, workload, want):
    assert drs_in_thousandths(cohort_of_two(cq, lender, weight=weight, lending=lending), usage, workload) == want


def test_zero_weight_is_infinite():
    # "above nominal with zero weight": math.MaxInt in Kueue. (A scenario's queue weight
    # must be positive, so the formula itself.)
    assert dominant_resource_share((0, 7), (0, 0), (0, 5), (0, 15), 0.0) == math.inf


def available(sc, queue, usage=None):
    sorter = make_policy("kueue").configured(sc).online(sc.resources, sc.queues, sc.capacity)
    own = {q: list(u) for q, u in (usage or {}).items()}
    return sorter.quota.available(queue, sorter.quota.usages(own), 0)


def two_teams(peers=None, b_limit=None, capacity=8):
    b = {"name": "team-b", "guarantee": {"cpu": 4}}
    if b_limit is not None:
        b["limit"] = {"cpu": b_limit}
    doc = {"resources": ["cpu"], "cluster": {"nodes": [{"name": "n", "capacity": {"cpu": capacity}}]},
           "queues": [{"name": "cohort", "children": [{"name": "team-a", "guarantee": {"cpu": 4}}, b]}],
           "jobs": [{"name": "jb", "queue": "cohort.team-b", "submit": 0,
                     "tasks": [{"count": 40, "demand": {"cpu": 1}, "duration": 100}]},
                    {"name": "ja", "queue": "cohort.team-a", "submit": 10,
                     "tasks": [{"count": 4, "demand": {"cpu": 1}, "duration": 100}]}]}
    if peers:
        doc["peers"] = {"kueue": peers}
    return parse_scenario(doc)


@pytest.mark.parametrize("peers, want", [
    # no limits: b may use its nominal 4 and a's 4 (resource_node.go ``available``)
    ({}, 8),
    # a lends nothing (lendingLimit 0: guaranteed 4 - 0 = 4 kept): b has its own 4
    ({"lending_limit": {"cohort.team-a": {"cpu": 0}}}, 4),
    # a lends 1: the cohort's subtree quota is 1 + 4 = 5
    ({"lending_limit": {"cohort.team-a": {"cpu": 1}}}, 5),
    # b borrows at most 2: stored 4 - used 0 + 2 = 6 < the cohort's 8
    ({"borrowing_limit": {"cohort.team-b": {"cpu": 2}}}, 6),
])
def test_available_follows_kueues_formula(peers, want):
    assert available(two_teams(peers), "cohort.team-b") == want


def test_available_counts_the_lenders_own_usage():
    # a uses 3 of its 4 and lends up to 2 (guaranteed 4 - 2 = 2): a's 1 past its guarantee
    # counts in the cohort, whose quota is 2 + 4 = 6: b may use 6 - 1 = 5
    sc = two_teams({"lending_limit": {"cohort.team-a": {"cpu": 2}}})
    assert available(sc, "cohort.team-b", {"cohort.team-a": [3.0]}) == 5


def queue_running(result, queue, t):
    rows = [(time, n) for time, kind, entity, n, _s, _a in result.rows if kind == "queue" and entity == queue]
    return [n for time, n in rows if time <= t][-1]


def test_a_borrowing_cluster_queue_is_reclaimed_from():
    # b borrows a's idle quota (8 running from t=0, 100 s tasks); a arrives at t=10.
    # Without preemption a waits for b's tasks to end (t=100); with it, a reclaims its
    # nominal 4 from the borrower (reclaimWithinCohort) once starved for ``after`` = 5 s
    sc = two_teams()
    waiting = simulate(sc, "kueue", SimOptions(until=60))
    assert queue_running(waiting, "cohort.team-b", 10) == 8 and queue_running(waiting, "cohort.team-a", 59) == 0
    reclaimed = simulate(sc, "kueue", SimOptions(until=60, preemption=PreemptionConfig(after=5)))
    assert reclaimed.preemptions == 4
    assert queue_running(reclaimed, "cohort.team-a", 59) == 4 and queue_running(reclaimed, "cohort.team-b", 59) == 4


def test_a_lending_limit_keeps_quota_back_from_borrowers():
    # a lends nothing: b runs its own 4 only, though a is idle until t=10 and 4 CPUs idle
    result = simulate(two_teams({"lending_limit": {"cohort.team-a": {"cpu": 0}}}), "kueue", SimOptions(until=5))
    assert queue_running(result, "cohort.team-b", 0) == 4


def test_without_fair_sharing_not_borrowing_goes_first():
    # Kueue's order without fair sharing: not borrowing first, then creation time. b
    # (created first) holds 6 of its nominal 4: its next task borrows; a's does not: a
    doc = {"resources": ["cpu"], "cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 8}}]},
           "queues": [{"name": "team-a", "guarantee": {"cpu": 4}}, {"name": "team-b", "guarantee": {"cpu": 4}}],
           "jobs": [], "peers": {"kueue": {"fair_sharing": False}}}
    sc = parse_scenario(doc)
    sorter = make_policy("kueue").configured(sc).online(sc.resources, sc.queues, sc.capacity)
    sorter.add_job("b", "team-b", 1.0, (1.0,))
    sorter.add_job("a", "team-a", 1.0, (1.0,))
    for _ in range(6):
        sorter.allocated("b", (1.0,))
    assert sorter.pick(lambda name: True) == "a"
    sorter.allocated("a", (1.0,))
    sorter.allocated("a", (1.0,))
    sorter.allocated("a", (1.0,))
    sorter.allocated("a", (1.0,))  # a at 4: both would borrow now; creation order: b first
    assert sorter.pick(lambda name: True) is None  # 6 + 4 = 10 > 8: the quota is spent
    sorter.released("b", (1.0,))
    sorter.released("b", (1.0,))
    sorter.released("b", (1.0,))  # b 3, a 4: b's next does not borrow, a's would
    assert sorter.pick(lambda name: True) == "b"


def test_strict_fifo_head_blocks_its_cluster_queue():
    doc = {"resources": ["cpu"], "cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 8}}]},
           "queues": [{"name": "team-a"}], "jobs": [],
           "peers": {"kueue": {"queueing_strategy": {"team-a": "StrictFIFO"}}}}
    sc = parse_scenario(doc)
    sorter = make_policy("kueue").configured(sc).online(sc.resources, sc.queues, sc.capacity)
    sorter.add_job("big", "team-a", 1.0, (16.0,))  # fits no quota (8)
    sorter.add_job("small", "team-a", 1.0, (1.0,))
    assert sorter.pick(lambda name: True) is None
    best_effort = make_policy("kueue").configured(parse_scenario({**doc, "peers": {}}))
    sorter = best_effort.online(sc.resources, sc.queues, sc.capacity)
    sorter.add_job("big", "team-a", 1.0, (16.0,))
    sorter.add_job("small", "team-a", 1.0, (1.0,))
    assert sorter.pick(lambda name: True) == "small"


@pytest.mark.parametrize("peers, path", [
    ({"cluster_queues": ["cohort"]}, "peers.kueue.cluster_queues[0]"),
    ({"lending_limit": {"cohort.team-a": {"gpu": 1}}}, "peers.kueue.lending_limit.cohort.team-a.gpu"),
    ({"borrowing_limit": {"nope": {"cpu": 1}}}, "peers.kueue.borrowing_limit.nope"),
    ({"queueing_strategy": {"cohort.team-a": "LIFO"}}, "peers.kueue.queueing_strategy.cohort.team-a"),
    ({"preemption": {"cohort.team-a": {"reclaim_within_cohort": "Sometimes"}}},
     "peers.kueue.preemption.cohort.team-a.reclaim_within_cohort"),
    ({"preemption": {"cohort.team-a": {"borrow_within_cohort": {"policy": "Always"}}}},
     "peers.kueue.preemption.cohort.team-a.borrow_within_cohort.policy"),
    ({"fair_sharing": "yes"}, "peers.kueue.fair_sharing"),
])
def test_bad_settings_are_named_by_path(peers, path):
    with pytest.raises(ScenarioError) as info:
        make_policy("kueue").configured(two_teams(peers))
    assert path in info.value.paths


def test_fair_sharing_splits_only_the_borrowable_quota():
    # docs/policies.md "How the peers differ": A's nominal quota is 6 of 10 CPUs, B has
    # none, equal weights, both want everything. DRS: A (u_A - 6) / 10, B u_B / 10; equal
    # borrowing at u_A - 6 = u_B with u_A + u_B = 10: A 8, B 2. (hdrf: equal shares above
    # the floor, A 6 and B 4)
    doc = {"resources": ["cpu"], "cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 10}}]},
           "queues": [{"name": "a", "guarantee": {"cpu": 6}}, {"name": "b"}],
           "jobs": [{"name": name, "queue": name, "submit": 0,
                     "tasks": [{"count": 200, "demand": {"cpu": 1}, "duration": 10}]} for name in ("a", "b")]}
    result = simulate(parse_scenario(doc), "kueue", SimOptions(until=50))
    assert queue_running(result, "a", 45) == 8 and queue_running(result, "b", 45) == 2
    hdrf = simulate(parse_scenario(doc), "hdrf", SimOptions(until=50))
    assert queue_running(hdrf, "a", 45) == 6 and queue_running(hdrf, "b", 45) == 4


@pytest.mark.parametrize("c2_weight, first", [(1, "ja2"), (3, "jb")])
def test_hierarchical_cohorts_compare_cohorts_by_their_drs(c2_weight, first):
    # root -> c1 (a1, a2: nominal 2 CPUs each), c2 (b: nominal 2); 12 CPUs, the root owns
    # the 6 unclaimed. Lendable (the parent's subtree quota, calculateLendable): c1 4,
    # root 6 + 4 + 2 = 12. a1 holds 4, a2 0, b 3; every request 1 CPU.
    # Within c1: a1 (4+1-2)/4 = 0.75, a2 borrows nothing: 0; a2 is c1's candidate.
    # At the root: c1 (4+1-4)/12 = 0.083 against c2 (3+1-2)/12 = 0.167: a2 first;
    # with c2's weight 3, 0.167 / 3 = 0.056: b first
    doc = {"resources": ["cpu"], "cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 12}}]},
           "queues": [{"name": "c1", "children": [{"name": "a1", "guarantee": {"cpu": 2}},
                                                  {"name": "a2", "guarantee": {"cpu": 2}}]},
                      {"name": "c2", "weight": c2_weight, "children": [{"name": "b", "guarantee": {"cpu": 2}}]}],
           "jobs": []}
    sc = parse_scenario(doc)
    sorter = make_policy("kueue").configured(sc).online(sc.resources, sc.queues, sc.capacity)
    for name, queue, held in (("ja1", "c1.a1", 4), ("ja2", "c1.a2", 0), ("jb", "c2.b", 3)):
        sorter.add_job(name, queue, 1.0, (1.0,))
        for _ in range(held):
            sorter.allocated(name, (1.0,))
    assert sorter.pick(lambda name: True) == first
    assert sorter.shares()["c1.a1"] == pytest.approx(0.75) and sorter.shares()["c1.a2"] == 0.0
