"""Fairness with memory (docs/policies.md, "Fairness with memory"): decayed usage.

Table-driven, with the arithmetic in the comments: one queue busy, the other idle, then
both demand 10 one-CPU slots on a 10-CPU cluster at day 6. The key of each side is its
dominant share of ``A + U / W`` (allocation plus decayed average past allocation,
``machinery/decay.py``), and each free slot goes to the lower key (ties: fewer running
tasks), so the split is the one that leaves the two keys within one task of each other.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import job, q, scenario

from fairshare.conformance.driver import drive
from fairshare.conformance.online import with_half_life, with_queue_half_lives
from fairshare.conformance.workloads import Workload, bounded_workload
from fairshare.engine import Scheduler
from fairshare.model import ScenarioError
from fairshare.model.loader import parse_scenario
from fairshare.policies import PolicyModeError, make_policy
from fairshare.policies.machinery.decay import DecayLedger

DAY = 86400.0


def _split_at_day_6(policy: str, half_life: float, busy_days: float) -> dict[str, int]:
    """Queue ``a``'s job A holds all 10 CPUs from day 0 to ``busy_days``, then waits
    (not demanding: drf is flat over jobs, so the history that counts is the job's);
    at day 6 it and a job of idle queue ``b`` each want 10 one-CPU tasks."""
    sc = scenario(capacity={"cpu": 10}, queues=[q("a"), q("b")], jobs=[job("A", {"cpu": 1}, "a")])
    sorter = make_policy(policy).online(sc.resources, sc.queues, sc.capacity)
    if half_life:
        sorter.set_half_life(half_life)
    sorter.add_job("A", "a", 1.0, (1.0,))
    for _ in range(10):
        sorter.allocated("A", (1.0,), 0.0)
    for _ in range(10):
        sorter.released("A", (1.0,), busy_days * DAY)
    sorter.set_demanding("A", False)
    sorter.add_job("B", "b", 1.0, (1.0,))
    sorter.set_demanding("A", True)
    got = {"A": 0, "B": 0}
    for _ in range(10):
        name = sorter.pick(lambda name: name in got, 6 * DAY)
        got[name] += 1
        sorter.allocated(name, (1.0,), 6 * DAY)
    return got


# a's decayed average at day 6, in CPUs (W = (h/ln2)(1 - 2^(-6d/h)), U = the integral):
#  busy 6 days, any finite h: U = 10 W, so 10 (a constant allocation averages to itself)
#  busy 3 days, h = 1 day:  10 (1 - 2^-3) 2^-3 / (1 - 2^-6) = 10 x .875 x .125 / .984375 = 1.11
#  busy 3 days, h = 6 days: 10 (1 - 2^-.5) 2^-.5 / (1 - 2^-1) = 10 x .29289 x .70711 / .5 = 4.14
#  busy 3 days, h = inf:    30 CPU-days / 6 days = 5
# b takes slots while b < a + avg: avg 10 -> all 10 (b = 9 < 10); 1.11 -> b 6, a 4
# (6 < 5.11 + 1); 4.14 -> b 7, a 3; 5 -> b 7, a 3 (ties at 5-5, 6-6, 7-7 go to a, which
# runs fewer tasks, so a ends at 3). Without memory: 5 and 5.
# dff: both queues (and jobs) need cpu, so each Fair Resource is 10 x 1/2 = 5 CPUs and a
# fairness is its usage / 5 (Def. 2), twice the dominant share usage / 10: the same order,
# the same splits (neither queue's fairness passes 1 before its last task: no override).
CASES = [
    (0, 6, {"A": 5, "B": 5}),
    (DAY, 6, {"A": 0, "B": 10}),
    (DAY, 3, {"A": 4, "B": 6}),
    (6 * DAY, 3, {"A": 3, "B": 7}),
    (math.inf, 3, {"A": 3, "B": 7}),
]


@pytest.mark.parametrize("policy", ["drf", "hdrf", "hdrf-naive", "dff"])
@pytest.mark.parametrize("half_life,busy_days,expected", CASES)
def test_the_idle_queue_gets_more_than_half_at_first(policy, half_life, busy_days, expected):
    assert _split_at_day_6(policy, half_life, busy_days) == expected


def _split_after_a_finished_job(policy: str, busy_cpus: int, busy_days: float) -> tuple[dict[str, int], object]:
    """Job ``old`` of queue a holds ``busy_cpus`` CPUs from day 0 to ``busy_days`` and ends
    (removed); at day 6 a new job of a and one of b each want 10 one-CPU tasks (h = 1 day)."""
    sc = scenario(capacity={"cpu": 10}, queues=[q("a"), q("b")], jobs=[job("A", {"cpu": 1}, "a")])
    sorter = make_policy(policy).online(sc.resources, sc.queues, sc.capacity)
    sorter.set_half_life(DAY)
    sorter.add_job("old", "a", 1.0, (1.0,))
    for _ in range(busy_cpus):
        sorter.allocated("old", (1.0,), 0.0)
    for _ in range(busy_cpus):
        sorter.released("old", (1.0,), busy_days * DAY)
    sorter.remove_job("old")
    sorter.add_job("A", "a", 1.0, (1.0,))
    sorter.add_job("B", "b", 1.0, (1.0,))
    got = {"A": 0, "B": 0}
    for _ in range(10):
        name = sorter.pick(lambda name: True, 6 * DAY)
        got[name] += 1
        sorter.allocated(name, (1.0,), 6 * DAY)
    return got, sorter


# the denominator of a queue's share: H-DRF's dominant share divides by the capacity (10
# CPUs), DFF's fairness by the queue's Fair Resource (5 CPUs: both queues need cpu)
@pytest.mark.parametrize("policy,denominator", [("hdrf", 10), ("capacity", 10), ("dff", 5)])
def test_a_queue_keeps_the_history_of_its_finished_jobs(policy, denominator):
    """The job that used queue a ends (removed); the queue's hidden history leaf keeps its
    decayed usage, so the split is the table's (h = 1 day, busy 3 days: 4/6)."""
    got, sorter = _split_after_a_finished_job(policy, 10, 3)
    assert got == {"A": 4, "B": 6}
    assert set(sorter.shares()) == {"a", "b", "A", "B"}  # (the history leaf is not reported)
    # queue a's share: (4 running + 1.11 average) / denominator
    assert sorter.shares()["a"] == pytest.approx((4 + 10 * .875 * .125 / .984375) / denominator)


def test_dff_history_takes_no_fair_resource():
    """DFF Alg. 1 runs over the present jobs: queue a's history leaf needs nothing, so a
    and b still get 5 CPUs each, and A and B their queue's 5 (docs/policies.md, "Fairness
    with memory")."""
    _, sorter = _split_after_a_finished_job("dff", 10, 3)
    index = sorter.index
    assert [sorter.fr[index[v]] for v in ("a", "b")] == [(5.0,), (5.0,)]
    assert [sorter._job_fr(index[v]) for v in ("A", "B")] == [(5.0,), (5.0,)]


# DFF's override (Alg. 2 line 9) with a history above the Fair Resource: old held 10 CPUs
# for 6 days, so at day 6 a's history averages 10 CPUs (the first table's row), fairness
# 10 / 5 = 2 before a runs anything. The override is tested on what a's children hold now
# (k / 5, not above 1 until A's sixth task) and adds the history to the child's fairness
# it takes (k / 5 + 2), so a's key is k / 5 + 2 >= 2 > 1 >= B's: B takes all 10. Were the
# history a blocked child's holding, a's fairness 2 > 1 would give way to A's 0 at once,
# and the history would count for nothing (5 and 5).
# old held 2 CPUs for 3 days: average 2 x .875 x .125 / .984375 = .222, fairness .044:
# a's key (k + .222) / 5 against B's k / 5 (no override: k / 5 <= 1 up to A's fifth), so
# at equal counts a is .044 above B: B goes first and they alternate, A 5, B 5 (a history
# of a fifth of a task decides only who goes first)
@pytest.mark.parametrize("busy_cpus,busy_days,expected", [(10, 6, {"A": 0, "B": 10}), (2, 3, {"A": 5, "B": 5})])
def test_dff_override_keeps_the_queue_history(busy_cpus, busy_days, expected):
    got, sorter = _split_after_a_finished_job("dff", busy_cpus, busy_days)
    assert got == expected


def test_ledger_decays_lazily_and_charges_as_usage_accrues():
    ledger = DecayLedger(10.0, 1)
    ledger.charge("j", 0.0, [4.0])
    # running 4 for 10 s (one half-life): U = 4 (h/ln2)(1 - 1/2) = 4 x 14.427 x .5 = 28.85
    assert ledger.usage("j", 10.0) == pytest.approx([4 * 10 / math.log(2) * 0.5])
    # held since the origin, the average is the allocation: A + U/W = 4 + 4
    assert ledger.effective("j", [4.0], 10.0) == pytest.approx([8.0])
    ledger.charge("j", 10.0, [0.0])  # the task ends
    # 10 s later (one more half-life) the usage has halved, W = (h/ln2)(3/4): 4 x .5 x .5 / .75
    assert ledger.effective("j", [0.0], 20.0) == pytest.approx([4 * 0.5 * 0.5 / 0.75])
    cumulative = DecayLedger(math.inf, 1)
    cumulative.charge("j", 0.0, [4.0])
    cumulative.charge("j", 10.0, [0.0])
    assert cumulative.usage("j", 30.0) == [40.0]  # 4 x 10 s, never decaying
    assert cumulative.effective("j", [0.0], 30.0) == pytest.approx([40.0 / 30.0])


def _sc(fairness):
    return {"cluster": {"capacity": {"cpu": 4}}, "jobs": [], "fairness": fairness}


@pytest.mark.parametrize("fairness,half_life", [({"half_life": 3600}, 3600.0), ({"half_life": 0}, 0.0),
                                                ({"half_life": math.inf}, math.inf), ({"half_life": "inf"}, math.inf),
                                                ({}, 0.0)])
def test_loader_reads_the_half_life(fairness, half_life):
    assert parse_scenario(_sc(fairness)).fairness.half_life == half_life


@pytest.mark.parametrize("fairness,message", [({"half_life": -1}, "fairness.half_life: must be >= 0"),
                                              ({"half_life": "soon"}, "fairness.half_life: must be a number"),
                                              ({"halflife": 3}, "halflife"),
                                              (5, "fairness: must be a mapping")])
def test_loader_names_the_field_of_a_bad_half_life(fairness, message):
    with pytest.raises(ScenarioError, match=message.replace(".", r"\.")):
        parse_scenario(_sc(fairness))


def test_a_policy_without_memory_refuses_a_half_life():
    sc = scenario(capacity={"cpu": 4})
    with pytest.raises(PolicyModeError, match="policy .fifo.: fairness.half_life: this policy has no decayed usage"):
        Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("fifo"), half_life=60.0)


@pytest.mark.parametrize("policy", ["drf", "hdrf", "dff"])
def test_decay_changes_the_launches_the_limit_check_sees(policy):
    """The conformance check ``decayed limits`` is not vacuous: decay changes the order."""
    workload = bounded_workload(0)
    plain = drive(make_policy(policy), workload).log
    assert drive(make_policy(policy), with_half_life(workload, 2.0)).log != plain
    first, second = workload.scenario.queues.paths[:2]
    per_queue = with_queue_half_lives(workload, {first: 2.0, second: math.inf})
    assert drive(make_policy(policy), per_queue).log != plain


@pytest.mark.parametrize("policy", ["drf", "hdrf", "dff"])
@pytest.mark.parametrize("guarantee,expected_g", [(None, 0), ({"cpu": 4}, 4)])
def test_a_decayed_order_does_not_starve_a_guarantee(policy, guarantee, expected_g):
    """g ran 10 CPUs for 6 days (h = 1 day: its average is 10), n arrives at day 6 when
    g's tasks end. By decayed shares n takes all 10 slots; with a guarantee of 4 CPUs the
    engine serves g first up to it: g 4, n 6."""
    queues = [q("g"), q("n")]
    if guarantee:
        queues[0]["guarantee"] = guarantee
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 10}}, "queues": queues, "fairness": {"half_life": DAY},
                         "jobs": [job("G", {"cpu": 1}, "g", count=20), job("N", {"cpu": 1}, "n", submit=6 * DAY)]})
    run = drive(make_policy(policy), Workload(sc, until=6 * DAY), duration=lambda launch, rng: 6 * DAY)
    at_day_6 = [i for i in run.instants if i.now == 6 * DAY][0]
    started = {"G": 0, "N": 0}
    for launch in at_day_6.launches:
        started[launch.job] += 1
    assert started == {"G": expected_g, "N": 10 - expected_g}


# --- per-queue half-life (queues[].fairness.half_life) ----------------------------------------

def _queue(name: str, half_life: float | None, *children) -> dict:
    entry = q(name, 1, *children)
    if half_life is not None:
        entry["fairness"] = {"half_life": half_life}
    return entry


def _split_by_queue_half_lives(policy: str, top: float, a: float | None, b: float | None, *,
                               nested: bool = False) -> dict[str, int]:
    """Job A (queue a, or a.x with ``nested``) holds all 10 CPUs from day 0 to day 3, job
    B (queue b) from day 3 to day 6; at day 6 each wants 10 one-CPU tasks. ``top``: the
    scenario's half-life; ``a``, ``b``: the queues' own (None: none)."""
    queue_a = _queue("a", a, q("x")) if nested else _queue("a", a)
    path_a = "a.x" if nested else "a"
    sc = scenario(capacity={"cpu": 10}, queues=[queue_a, _queue("b", b)], jobs=[job("A", {"cpu": 1}, path_a)])
    sorter = make_policy(policy).online(sc.resources, sc.queues, sc.capacity)
    assert sc.queues.remembers(top)
    sorter.set_half_life(top)
    sorter.add_job("A", path_a, 1.0, (1.0,))
    sorter.add_job("B", "b", 1.0, (1.0,))
    for name, start, end in (("A", 0, 3), ("B", 3, 6)):
        for _ in range(10):
            sorter.allocated(name, (1.0,), start * DAY)
        for _ in range(10):
            sorter.released(name, (1.0,), end * DAY)
    got = {"A": 0, "B": 0}
    for _ in range(10):
        name = sorter.pick(lambda name: True, 6 * DAY)
        got[name] += 1
        sorter.allocated(name, (1.0,), 6 * DAY)
    return got


# Each job's decayed average at day 6, with its queue's half-life h (W of that h):
#  A (busy days 0-3): h = 1 day: 1.11 (the table above); h = 6 days: 4.14; h = 0: 0
#  B (busy days 3-6): h = 1 day: 10 (1 - 2^-3) / (1 - 2^-6) = 10 x .875 / .984375 = 8.89;
#                     h = inf: 30 CPU-days / 6 days = 5; h = 0: 0
# A takes slots while A + avg_A < B + avg_B (ties: fewer running tasks), one at a time:
#  1.11 vs 5:    a a a a b a b a b a -> A 7, B 3 (5.11 > 5, 6.11 > 6, 7.11 > 7)
#  1.11 vs 8.89: A takes 8 first (8 + 1.11 = 9.11 > 8.89), then B 1, A 1 ... -> A 9, B 1
#  0 vs 0:       today's instantaneous split, 5 and 5
#  4.14 vs 0:    B takes 5 first (4 < 4.14), then they alternate -> A 3, B 7
#  0 vs 8.89:    A 9 (9 > 8.89: then B), B 1
QUEUE_CASES = [
    # top,    a's,   b's,       expected
    (DAY, None, math.inf, {"A": 7, "B": 3}),  # b remembers everything, a a day
    (0.0, DAY, math.inf, {"A": 7, "B": 3}),  # the same with no top-level memory
    (DAY, None, None, {"A": 9, "B": 1}),  # both the top level's day
    (DAY, 0.0, 0.0, {"A": 5, "B": 5}),  # half-life 0 on a queue: no memory for its jobs
    (6 * DAY, None, 0.0, {"A": 3, "B": 7}),  # b forgets, a remembers 6 days
    (0.0, 0.0, DAY, {"A": 9, "B": 1}),  # a forgets, b remembers a day
]


@pytest.mark.parametrize("policy", ["drf", "collapsed", "hdrf", "hdrf-naive", "capacity", "dff"])
@pytest.mark.parametrize("top,a,b,expected", QUEUE_CASES)
def test_a_queue_half_life_overrides_the_scenario_one(policy, top, a, b, expected):
    assert _split_by_queue_half_lives(policy, top, a, b) == expected


@pytest.mark.parametrize("policy", ["drf", "hdrf", "dff"])
def test_a_sub_queue_inherits_its_parent_half_life(policy):
    """A sits in a.x, which sets none: a's day applies (the first case of the table)."""
    assert _split_by_queue_half_lives(policy, 0.0, DAY, math.inf, nested=True) == {"A": 7, "B": 3}


def test_each_half_life_has_its_own_weight():
    """W per half-life from the one origin: a job held since the origin averages its
    allocation under any half-life (A + U/W = 2A), and half-life 0 keeps no usage."""
    ledger = DecayLedger(10.0, 1)
    for name, half_life in (("day", DAY), ("inf", math.inf), ("none", 0.0), ("top", 10.0)):
        ledger.enrol(name, half_life)
        ledger.charge(name, 0.0, [3.0])
    assert ledger.weight(100.0, math.inf) == 100.0
    assert ledger.weight(100.0, 0.0) == 0.0
    for name in ("day", "inf", "top"):
        assert ledger.effective(name, [3.0], 100.0) == pytest.approx([6.0])
    assert ledger.usage("none", 100.0) == [0.0]
    assert ledger.effective("none", [3.0], 100.0) == [3.0]
    # the vectorized read (one pass per half-life) agrees with the scalar one
    names = ["day", "inf", "none", "top"]
    rows = [ledger.rows[name] for name in names]
    many = ledger.effective_rows(np.array(rows), 100.0).tolist()
    assert many == [ledger.effective(name, [3.0], 100.0) for name in names]


def test_scheduler_remembers_when_only_a_queue_sets_a_half_life():
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "queues": [_queue("a", 60.0), _queue("b", None)],
                         "jobs": []})
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("drf"))
    assert sched.sorter.decay is not None and sched.sorter.decay.half_life == 0.0
    plain = parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "queues": [_queue("a", 0.0)], "jobs": []})
    assert Scheduler(plain.resources, plain.cluster.nodes, plain.queues, make_policy("drf")).sorter.decay is None
    with pytest.raises(PolicyModeError, match="fairness.half_life"):
        Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("fifo"))


@pytest.mark.parametrize("fairness,half_life", [({"half_life": 60}, 60.0), ({"half_life": math.inf}, math.inf),
                                                ({"half_life": "inf"}, math.inf), ({"half_life": 0}, 0.0),
                                                ({}, None), (None, None)])
def test_loader_reads_a_queue_half_life(fairness, half_life):
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "jobs": [],
                         "queues": [{"name": "a", "fairness": fairness, "children": [{"name": "x"}]}]})
    assert sc.queues["a"].half_life == half_life
    assert sc.queues.half_life_of("a.x", 7.0) == (7.0 if half_life is None else half_life)


@pytest.mark.parametrize("fairness,message", [({"half_life": -1}, "queues[0].fairness.half_life: must be >= 0"),
                                              ({"half_life": "soon"}, "queues[0].fairness.half_life: must be a number"),
                                              ({"halflife": 3}, "halflife"),
                                              (5, "queues[0].fairness: must be a mapping")])
def test_loader_names_the_field_of_a_bad_queue_half_life(fairness, message):
    with pytest.raises(ScenarioError, match=message.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]")):
        parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "jobs": [],
                        "queues": [{"name": "a", "fairness": fairness}]})


def test_a_queue_change_event_sets_a_half_life():
    """``events: [{time, queue: {name, fairness: {half_life}}}]``: the queue has its own
    half-life from then on (the simulator builds the sorter again for the new tree)."""
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "jobs": [], "queues": [q("a")],
                         "events": [{"time": 5, "queue": {"name": "a", "fairness": {"half_life": 60}}}]})
    change = sc.events[0].queue_change
    assert change.half_life == 60.0
    after = sc.queues.changed(change)
    assert (sc.queues["a"].half_life, after["a"].half_life) == (None, 60.0)
    assert not sc.queues.remembers(0.0) and after.remembers(0.0)
    with pytest.raises(ScenarioError, match=r"events\[0\]\.queue\.fairness\.half_life: must be >= 0"):
        parse_scenario({"cluster": {"capacity": {"cpu": 4}}, "jobs": [], "queues": [q("a")],
                        "events": [{"time": 5, "queue": {"name": "a", "fairness": {"half_life": -1}}}]})


def test_serve_refuses_a_queue_half_life_it_would_ignore():
    from live_helpers import config_doc

    from fairshare.live.config import parse_config
    doc = config_doc()
    doc["queues"][0]["fairness"] = {"half_life": 60}
    with pytest.raises(ScenarioError, match="the live service has no decayed usage yet") as info:
        parse_config(doc, "cluster.yaml")
    assert "queues" in info.value.paths


def test_a_ledger_restored_through_its_entries_reads_the_same_by_rows():
    """A saved ledger written back into ``entries`` (serve's store): ``resync`` brings the
    rows the sorters read in one pass into step with them."""
    saved = DecayLedger(DAY, 2)
    saved.charge("j", 0.0, [2.0, 1.0])
    saved.charge("k", 50.0, [1.0, 0.0])
    restored = DecayLedger(DAY, 2)
    restored.origin = saved.origin
    restored.entries.update({name: [list(u), list(a), t0] for name, (u, a, t0) in saved.entries.items()})
    restored.resync()
    rows = np.array([restored.rows["j"], restored.rows["k"]])
    assert restored.effective_rows(rows, 100.0).tolist() == [saved.effective(n, saved.entries[n][1], 100.0)
                                                            for n in ("j", "k")]
