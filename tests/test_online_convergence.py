"""The static allocations are the limit of the online decisions.

Each static policy answers "where does progressive filling end" for divisible tasks; its
online sorter makes the same choice task by task. Split every task of a paper's example
into k smaller ones (demand / k, unbounded counts), run the pure Scheduler with tasks
finishing and restarting (tests/replay.py: job i's tasks last a fixed, job-specific time,
so jobs release at different instants and the freed space is re-filled by the policy),
and time-average each job's dominant share after a warm-up. It must match
``fairshare.allocate(scenario, policy)``'s exact dominant shares within O(1/k).

The bound. After every instant the Scheduler re-fills until no task fits, so every job
the policy ranks below another holds at most one task more than the divisible limit
would give it (DRF Sec. 6.2, Theorem 7's argument, applied per decision), and the
resources held back by whole tasks are at most one task per job. A job's dominant share
is thus within ``(jobs + 1) x task_share`` of the limit, where ``task_share`` is the
largest dominant share of one (scaled) task: O(1/k). We assert that bound.

The long run. For a fixed horizon and k -> oo the online schedule stays at the static
answer (the fill from an empty cluster is the discrete progressive filling, and each
restart moves O(1/k)). For a fixed k and a long horizon, tasks keep finishing and
restarting on a full cluster; the tests with ``long_run`` in their name check that the
schedule stays at the static answer there too. That depends on when a resource counts as
saturated (engine/scheduler.py: once no pending task fits in what is left of it). With
"once the largest pending task no longer fits", three of these examples drifted to other
fixed points (docs/policies.md keeps the arithmetic).
"""

from __future__ import annotations

import pytest
from builders import job, q, scenario
from replay import replay

from fairshare import allocate
from fairshare.conformance.workloads import drf_41, fig4, scaled
from fairshare.engine import Scheduler
from fairshare.model import Node
from fairshare.policies import make_policy

# The online schedule needs a while to forget the initial fill (the greedy from an empty
# cluster, which is the discrete static answer); by 60 s every example here has settled.
WARMUP_S = 60.0
HORIZON_S = 120.0


def online_shares(sc, policy: str, nodes=None, window=None) -> dict[str, float]:
    """Time-averaged dominant share of each job over ``window`` (default [WARMUP_S, HORIZON_S])."""
    warmup_s, horizon_s = window or (WARMUP_S, HORIZON_S)
    nodes = nodes or sc.cluster.nodes
    sched = Scheduler(sc.resources, tuple(nodes), sc.queues, make_policy(policy))
    cap = sc.capacity
    # job i's tasks last 1 + 0.37 i: distinct, so releases interleave
    duration = {j.name: 1.0 + 0.37 * i for i, j in enumerate(sc.jobs)}
    acc = {j.name: 0.0 for j in sc.jobs}
    last = {"t": None, "shares": None}

    def shares_now() -> dict[str, float]:
        return {j.name: max(u / c for u, c in zip(sched.usage(j.name), cap) if c > 0) for j in sc.jobs}

    def observe(now: float) -> None:
        if last["t"] is not None:
            lo, hi = max(last["t"], warmup_s), min(now, horizon_s)
            if hi > lo:
                for name, s in last["shares"].items():
                    acc[name] += s * (hi - lo)
        last["t"], last["shares"] = now, shares_now()

    replay(sched, sc.jobs, lambda launch: duration[launch.job], until=horizon_s, observe=observe)
    observe(horizon_s)
    return {name: v / (horizon_s - warmup_s) for name, v in acc.items()}


def task_share(sc) -> float:
    """Largest dominant share of one task: the granularity of the online schedule."""
    return max(max(d / c for d, c in zip(j.composite_demand(), sc.capacity) if c > 0) for j in sc.jobs)


def assert_converges(sc_full, sc_small, policy: str, expected: dict[str, float], nodes=None, window=None):
    static = allocate(sc_full, policy)
    for name, want in expected.items():  # the paper's numbers, through the exact engine
        assert static.jobs[name].dominant_share == pytest.approx(want, rel=1e-9), name
    got = online_shares(sc_small, policy, nodes, window)
    tol = (len(sc_small.jobs) + 1) * task_share(sc_small)
    for name, want in expected.items():
        assert got[name] == pytest.approx(want, abs=tol), (policy, name, got, expected, tol)
    return got, tol


# --- DRF Sec. 4.1: <9 CPU, 18 GB>, A <1, 4>, B <3, 1> (workloads.drf_41) -------------------------

@pytest.mark.parametrize("policy", ["drf", "hdrf", "dff"])
def test_drf_section_4_1(policy):
    # DRF: x = 3 A-tasks, y = 2 B-tasks (x + 3y = 9, 4x + y = 18, 4x/18 = 3y/9): both at 2/3.
    # Flat, so H-DRF is DRF; DFF's FR of each job is <4.5, 9> (both need both), fairness
    # max(x/4.5, 4x/9) = 4x/9 vs max(3y/4.5, y/9) = 2y/3: the same equation, the same answer.
    k = 32  # tasks of <1/32, 1/8> and <3/32, 1/32>: task share 1/96, bound 3/96
    assert_converges(drf_41(1), drf_41(k), policy, {"A": 2 / 3, "B": 2 / 3})


# --- H-DRF Fig. 4: 10 CPUs, 10 GPUs; n1 -> n1,1 <1, 0>; n2 -> n2,1 <1, 0>, n2,2 <0, 1> (workloads.fig4)

@pytest.mark.parametrize("policy, expected", [
    # Fig. 4(b): n1,1 = n2,1 = 5 CPUs (0.5 each), n2,2 all 10 GPUs (1.0). Online with tasks
    # finishing this is Sec. 3.3's point: H-DRF keeps n2,1 at 0.5 (naive would starve it).
    ("hdrf", {"n11": 0.5, "n21": 0.5, "n22": 1.0}),
    # DRF ignores the queues: n1,1 and n2,1 split the CPUs, n2,2 takes the GPUs.
    ("drf", {"n11": 0.5, "n21": 0.5, "n22": 1.0}),
    # DFF: FR(n1) = <5, 0>, FR(n2) = <5, 10>; n2,1 FR <5, 0>, n2,2 <0, 10>. n1,1 and n2,1 reach
    # fairness 1 at 5 CPUs, CPUs saturate; n2,2 grows to 10 GPUs (fairness 1 too).
    ("dff", {"n11": 0.5, "n21": 0.5, "n22": 1.0}),
])
def test_hdrf_figure_4(policy, expected):
    assert_converges(fig4(1), fig4(32), policy, expected)  # task share 1/320, bound 4/320


# --- H-DRF Fig. 5: n1..n4; n3 with a CPU and a GPU job; <1 CPU, 1 GPU> ---------------------------

def fig5(k: int):
    return scenario(capacity={"cpu": 1, "gpu": 1}, queues=[q("n1"), q("n2"), q("n3"), q("n4")],
                    jobs=[job("n11", scaled({"cpu": 1}, k), "n1"), job("n21", scaled({"cpu": 1}, k), "n2"),
                          job("n31", scaled({"cpu": 1}, k), "n3"), job("n32", scaled({"gpu": 1}, k), "n3"),
                          job("n41", scaled({"gpu": 1}, k), "n4")])


@pytest.mark.parametrize("policy, expected", [
    # Fig. 5(b): CPU leaves 1/3 each; n3,2 and n4,1 then split the GPUs: 1/3 + 1/6 = 1/2 each.
    ("hdrf", {"n11": 1 / 3, "n21": 1 / 3, "n31": 1 / 3, "n32": 0.5, "n41": 0.5}),
    # DRF (flat): three CPU jobs 1/3 each, two GPU jobs 1/2 each.
    ("drf", {"n11": 1 / 3, "n21": 1 / 3, "n31": 1 / 3, "n32": 0.5, "n41": 0.5}),
])
def test_hdrf_figure_5(policy, expected):
    assert_converges(fig5(1), fig5(64), policy, expected)  # task share 1/64, bound 6/64


# --- H-DRF Fig. 7 left: <100 CPU, 100 GPU>; n1,1 <3, 2>; n2,1 <1, 1>, n2,2 <1, 3> --------------------

def fig7(k: int):
    return scenario(capacity={"cpu": 100, "gpu": 100}, queues=[q("n1"), q("n2")],
                    jobs=[job("n11", scaled({"cpu": 3, "gpu": 2}, k), "n1"),
                          job("n21", scaled({"cpu": 1, "gpu": 1}, k), "n2"),
                          job("n22", scaled({"cpu": 1, "gpu": 3}, k), "n2")])


FIG7_LEFT = {"n11": 0.6, "n21": 0.3, "n22": 0.3}


def test_hdrf_figure_7_left_fixed_horizon():
    # x = 20, y = 30, z = 10 (3x = 6z, 3x + 4z = 100): n1,1 <60, 40> -> 0.6; n2,1 <30, 30>
    # -> 0.3; n2,2 <10, 30> -> 0.3. Holds over the first 60 s at k = 32 (task share 3/3200).
    assert_converges(fig7(1), fig7(32), "hdrf", FIG7_LEFT, window=(2.0, 60.0))


def test_hdrf_figure_7_left_long_run():
    # The same limit long after the fill (k = 8, 150-250 s: every task has restarted
    # dozens of times). Both resources end full, and a resource only counts as saturated
    # once no pending task fits in what is left of it (engine/scheduler.py), so the GPUs
    # are not taken out of Alg. 3's comparison while n2,1's 1/8-GPU tasks still fit.
    # (Counting them saturated as soon as n2,2's larger task no longer fitted drifted to
    # an equal CPU split, 0.5 / 5/12 / 0.25: docs/policies.md.)
    assert_converges(fig7(1), fig7(8), "hdrf", FIG7_LEFT, window=(150.0, 250.0))


# --- H-DRF Sec. 5.1 / Fig. 8: 49 servers <16 GB, 4 CPU, 4 GPU>, n1 : n2 = 4 : 1 ---------------------

def fig8(k: int):
    d = {"n11": {"mem": 1, "cpu": 1}, "n12": {"mem": 1, "gpu": 1}, "n21": {"mem": 1, "cpu": 1},
         "n22": {"mem": 1, "cpu": 1}}
    queue_of = {"n11": "n1", "n12": "n1", "n21": "n2", "n22": "n2"}
    return scenario(nodes=[{"name": "ec2", "count": 49, "capacity": {"mem": 16, "cpu": 4, "gpu": 4}}],
                    queues=[q("n1", 4), q("n2", 1)],
                    jobs=[job(name, scaled(d[name], k), queue_of[name]) for name in d])


def test_hdrf_section_5_1_figure_8_on_its_49_servers():
    # 200-300 s of Fig. 9, all four active: CPUs n1 : n2 = 4 : 1 -> n1,1 0.8, n2,1 = n2,2 =
    # 0.1; n1,2 alone on the GPUs: 1.0. Whole (halved) tasks on the 49 real servers.
    assert_converges(fig8(1), fig8(2), "hdrf", {"n11": 0.8, "n12": 1.0, "n21": 0.1, "n22": 0.1})


# --- DFF Table 1 on a divisible-enough cluster ---------------------------------------------------

def dff_table1(k: int, pooled: bool = True):
    # Sec. 4.1: 336 CPU threads, 952 GB (7 x 136), 21 MICs; Fig. 1: n1..n4, n3 with jobs 3, 4.
    rows = [("job1", "n1", (4, 4, 0)), ("job2", "n2", (4, 3, 0)), ("job3", "n3", (2, 4, 0)),
            ("job4", "n3", (1, 4, 2)), ("job5", "n4", (1, 3, 2))]
    jobs = [job(name, scaled({r: v for r, v in zip(("cpu", "mem", "mic"), d) if v}, k), queue)
            for name, queue, d in rows]
    return scenario(capacity={"cpu": 336, "mem": 952, "mic": 21}, queues=[q("n1"), q("n2"), q("n3"), q("n4")],
                    jobs=jobs)


# docs/policies.md and test_paper_examples: job1, job2 110.25 CPU (0.328125), job3 105 CPU
# (0.3125), job4, job5 10.5 MICs (0.5).
DFF_TABLE_1 = {"job1": 110.25 / 336, "job2": 110.25 / 336, "job3": 105 / 336, "job4": 0.5, "job5": 0.5}


def test_dff_table_1_fixed_horizon():
    # k = 32: tasks of <1/8, 1/8, 0> ... <1/32, 3/32, 1/16>; MIC task share 1/336, bound 6/336.
    # The first seconds (the fill and the first restarts) sit at the static answer.
    assert_converges(dff_table1(1), dff_table1(32), "dff", DFF_TABLE_1, window=(0.0, 5.0))


def test_drf_table_1_long_run():
    # DRF (flat) on Table 1 keeps its static answer in the long run too.
    static = allocate(dff_table1(1), "drf")
    expected = {name: ja.dominant_share for name, ja in static.jobs.items()}
    assert_converges(dff_table1(1), dff_table1(16), "drf", expected)


def test_dff_table_1_long_run():
    # DFF keeps its static answer in the long run (k = 8, 60-120 s): job4 = job5 = 10.5
    # MICs (0.5). The MICs stay full; a freed MIC is contested only while some pending
    # task fits in it, so n3's override (Alg. 2 line 9) keeps seeing job4 as schedulable.
    # (With the "largest pending task" reading job4 counted as blocked and job5 drifted
    # to 1.3125 x 10.5 = 13.78 MICs, 0.65625: docs/policies.md.)
    assert_converges(dff_table1(1), dff_table1(8), "dff", DFF_TABLE_1, window=(60.0, 120.0))


def test_hdrf_table_1_fixed_horizon():
    static = allocate(dff_table1(1), "hdrf")
    expected = {name: ja.dominant_share for name, ja in static.jobs.items()}
    assert_converges(dff_table1(1), dff_table1(32), "hdrf", expected, window=(0.0, 5.0))


def test_hdrf_table_1_long_run():
    # Static H-DRF stops when the CPUs saturate (every job needs CPU): MICs about 65% used,
    # job4 and job5 near 0.32-0.33. Online, in the long run (k = 8, 60-120 s), the same.
    static = allocate(dff_table1(1), "hdrf")
    expected = {name: ja.dominant_share for name, ja in static.jobs.items()}
    assert expected["job4"] < 0.33
    assert_converges(dff_table1(1), dff_table1(8), "hdrf", expected, window=(60.0, 120.0))


def test_error_shrinks_with_k():
    # O(1/k): the worst deviation at k = 64 is well under the one at k = 4 (DRF Sec. 4.1).
    errs = []
    for k in (4, 64):
        got = online_shares(drf_41(k), "drf", window=(10.0, 30.0))
        errs.append(max(abs(got[n] - 2 / 3) for n in ("A", "B")))
    assert errs[1] < errs[0] / 4 or errs[1] < 1e-3, errs


def test_many_nodes_fig4():
    # The same Fig. 4 limit on 10 nodes of <1 CPU, 1 GPU> with tasks of 1/8.
    nodes = tuple(Node(f"n{i}", (1.0, 1.0)) for i in range(10))
    got = online_shares(fig4(8), "hdrf", nodes)
    tol = 4 * task_share(fig4(8))
    assert got == pytest.approx({"n11": 0.5, "n21": 0.5, "n22": 1.0}, abs=tol)
