"""Every numeric example of the papers, for the progressive-filling policies.

Each case cites its section or figure and shows the arithmetic behind the expected
numbers. CEEI and slowdown examples live in test_ceei_slowdown.py, property verdicts in
test_audit.py. Results must hold to 1e-9 relative: the allocations are exact.
"""

from __future__ import annotations

import pytest
from builders import job, q, scenario

from fairshare import allocate

REL = 1e-9


def tasks_of(alloc) -> dict[str, float]:
    return {name: ja.tasks for name, ja in alloc.jobs.items()}


def assert_tasks(alloc, expected: dict[str, float]) -> None:
    got = tasks_of(alloc)
    for name, want in expected.items():
        assert got[name] == pytest.approx(want, rel=REL, abs=1e-12), f"{name}: {got[name]} != {want}"


# --- DRF (Ghodsi et al., NSDI 2011) ------------------------------------------------------

DRF_41 = dict(capacity={"cpu": 9, "mem": 18},
              jobs=[job("A", {"cpu": 1, "mem": 4}), job("B", {"cpu": 3, "mem": 1})])


@pytest.mark.parametrize("policy, expected", [
    # Sec. 4.1: max (x, y) s.t. x + 3y <= 9, 4x + y <= 18, 2x/9 = y/3 -> x = 3, y = 2.
    ("drf", {"A": 3.0, "B": 2.0}),
    # Sec. 5.1: one GB worth $1, one CPU $2 -> A spends 6x, B 7y; 6x = 7y with x + 3y = 9
    # -> x = 9 / (1 + 18/7) = 63/25 = 2.52, y = 54/25 = 2.16.
    ("asset", {"A": 63 / 25, "B": 54 / 25}),
])
def test_drf_section_4_1_and_asset(policy, expected):
    alloc = allocate(scenario(**DRF_41), policy)
    assert_tasks(alloc, expected)


def test_drf_section_4_1_shares_and_table_1_discrete():
    # Fig. 3 / Table 1: A gets <3 CPU, 12 GB>, B <6 CPU, 2 GB>; both dominant shares 2/3
    # (12/18 and 6/9). Table 1 runs Alg. 1 with whole tasks and ends at the same point.
    for discrete in (False, True):
        alloc = allocate(scenario(**DRF_41), "drf", discrete=discrete)
        a, b = alloc.jobs["A"], alloc.jobs["B"]
        assert a.allocation == pytest.approx((3.0, 12.0), rel=REL)
        assert b.allocation == pytest.approx((6.0, 2.0), rel=REL)
        assert a.dominant_share == pytest.approx(2 / 3, rel=REL)
        assert b.dominant_share == pytest.approx(2 / 3, rel=REL)
        # CPU saturates (3 + 6 = 9); memory 14 of 18 GB.
        assert alloc.utilization == pytest.approx((1.0, 14 / 18), rel=REL)


def test_weighted_drf_section_4_3():
    # Sec. 4.3: with equal per-resource weights the dominant shares are in ratio w_A : w_B.
    # A weight 2: 2x/9 = 2 * (y/3) -> x = 3y; CPU 3y + 3y = 9 -> y = 1.5, x = 4.5;
    # memory 4 * 4.5 + 1.5 = 19.5 > 18, so memory binds first: 12y + y = 18 -> y = 18/13,
    # x = 54/13 (memory 216/13 + 18/13 = 18; CPU 54/13 + 54/13 = 108/13 < 9).
    sc = scenario(capacity={"cpu": 9, "mem": 18},
                  jobs=[job("A", {"cpu": 1, "mem": 4}, weight=2), job("B", {"cpu": 3, "mem": 1})])
    alloc = allocate(sc, "drf")
    assert_tasks(alloc, {"A": 54 / 13, "B": 18 / 13})
    assert alloc.jobs["A"].dominant_share == pytest.approx(2 * alloc.jobs["B"].dominant_share, rel=REL)


@pytest.mark.parametrize("policy, expected", [
    # Thm 1 (Fig. 5): <30, 30>, D1 = <1, 3>, D2 = <1, 1>. Asset: 4x/30 = 2y/30 -> y = 2x;
    # resource 2: 3x + 2x = 30 -> x = 6, y = 12 (user 2 holds <12, 12>, less than half of both).
    ("asset", {"u1": 6.0, "u2": 12.0}),
    # DRF: dominant shares 3x/30 = y/30 -> y = 3x; resource 2: 3x + 3x = 30 -> x = 5, y = 15.
    ("drf", {"u1": 5.0, "u2": 15.0}),
])
def test_drf_theorem_1_example(policy, expected):
    sc = scenario(capacity={"r1": 30, "r2": 30}, jobs=[job("u1", {"r1": 1, "r2": 3}), job("u2", {"r1": 1, "r2": 1})])
    assert_tasks(allocate(sc, policy), expected)


@pytest.mark.parametrize("policy, expected", [
    # Thm 2: <21, 21>, D1 = <3, 2>, D2 = <4, 1>. Asset: 5x/21 = 5y/21 -> x = y; resource 1:
    # 3x + 4x = 21 -> x = y = 3 (user 1 gets 9/21 = 3/7 of the bottleneck, not 1/2).
    ("asset", {"u1": 3.0, "u2": 3.0}),
    # DRF: both dominant on resource 1: 3x/21 = 4y/21, 3x + 4y = 21 -> x = 3.5, y = 2.625.
    ("drf", {"u1": 3.5, "u2": 2.625}),
])
def test_drf_theorem_2_example(policy, expected):
    sc = scenario(capacity={"r1": 21, "r2": 21}, jobs=[job("u1", {"r1": 3, "r2": 2}), job("u2", {"r1": 4, "r2": 1})])
    assert_tasks(allocate(sc, policy), expected)


def test_drf_zero_and_excess_demand_example():
    # Appendix (after Thm 12): 10 users, the first <1, 0>, nine <0, 1>, capacity <1, 1>.
    # Truthful: user 1 gets all of resource 1 (nobody else wants it), the nine 1/9 each of
    # resource 2. If user 1 claims <1, 1>: everyone needs resource 2, so all ten get 1/10.
    users = [job("u0", {"r1": 1})] + [job(f"u{i}", {"r2": 1}) for i in range(1, 10)]
    alloc = allocate(scenario(capacity={"r1": 1, "r2": 1}, jobs=users), "drf")
    assert alloc.jobs["u0"].allocation == pytest.approx((1.0, 0.0), abs=1e-12)
    for i in range(1, 10):
        assert alloc.jobs[f"u{i}"].allocation == pytest.approx((0.0, 1 / 9), rel=REL, abs=1e-12)
    lying = [job("u0", {"r1": 1, "r2": 1})] + users[1:]
    alloc = allocate(scenario(capacity={"r1": 1, "r2": 1}, jobs=lying), "drf")
    for name in alloc.jobs:
        assert alloc.jobs[name].dominant_share == pytest.approx(0.1, rel=REL)


# --- H-DRF (Bhattacharya et al., SoCC 2013) ------------------------------------------------

def fig2(with_n23: bool = True):
    # Fig. 2: n1 (w 1) and n2 (w 1); n2 has n2,1 (w 1), n2,2 (w 2), n2,3 (w 2). One job per
    # leaf, each task one slot of a 480-slot cluster (single resource).
    leaves = [("n11", "n1", 1), ("n21", "n2.a", 1), ("n22", "n2.b", 2)] + ([("n23", "n2.c", 2)] if with_n23 else [])
    jobs = [job(name, {"slot": 1}, queue) for name, queue, _ in leaves]
    queues = [q("n1"), q("n2", 1, q("a", 1), q("b", 2), *([q("c", 2)] if with_n23 else []))]
    return scenario(capacity={"slot": 480}, jobs=jobs, queues=queues)


def test_hdrf_section_2_1_share_guarantee_480_slots():
    # n1, n2: 480 / 2 = 240 each; n2's children 240 * 1/5 = 48, 240 * 2/5 = 96, 96.
    assert_tasks(allocate(fig2(), "hdrf"), {"n11": 240.0, "n21": 48.0, "n22": 96.0, "n23": 96.0})
    # Sibling sharing: without n2,3 its 96 slots go to its siblings 1:2 -> +32, +64; n1 keeps 240.
    assert_tasks(allocate(fig2(with_n23=False), "hdrf"), {"n11": 240.0, "n21": 80.0, "n22": 160.0})


def fig4(n11_demand: dict):
    # Fig. 4(a): n1 -> n1,1; n2 -> n2,1 <1 CPU, 0 GPU>, n2,2 <0 CPU, 1 GPU>; 10 CPUs, 10 GPUs.
    return scenario(capacity={"cpu": 10, "gpu": 10}, queues=[q("n1"), q("n2")],
                    jobs=[job("n11", n11_demand, "n1"), job("n21", {"cpu": 1}, "n2"), job("n22", {"gpu": 1}, "n2")])


@pytest.mark.parametrize("policy, n11_demand, expected, queue_shares", [
    # Fig. 4(b): CPU saturates with n1,1 and n2,1 at 5 CPUs each (dominant shares equal at
    # 1/2 along the way, n2,2 grows with them); then n2,2 alone takes the remaining GPUs: 10.
    ("hdrf", {"cpu": 1}, {"n11": 5.0, "n21": 5.0, "n22": 10.0}, {"n1": 0.5, "n2": 1.0}),
    # Sec. 3.2: n1,1 demands <1, 1>. H-DRF: n1 = x/10, n2 = max(y, z)/10 with y = z (siblings
    # equal); CPU x + y = 10 and GPU x + z = 10 with x = y -> all 5; n2 holds 50% as entitled.
    ("hdrf", {"cpu": 1, "gpu": 1}, {"n11": 5.0, "n21": 5.0, "n22": 5.0}, {"n1": 0.5, "n2": 0.5}),
    # Collapsed weights: n1,1 = 1/2, n2,1 = n2,2 = 1/2 * 1/2 = 1/4, so n1,1 grows twice as fast:
    # x/10 / (1/2) = y/10 / (1/4) -> x = 2y; CPU x + y = 10 -> y = 10/3, x = 20/3; GPU the same.
    # n2 gets only 1/3 of each resource instead of its entitled 1/2.
    ("collapsed", {"cpu": 1, "gpu": 1}, {"n11": 20 / 3, "n21": 10 / 3, "n22": 10 / 3}, {"n1": 2 / 3, "n2": 1 / 3}),
    # The single-resource variant of Sec. 3.2 (n2,2 demands <1, 0>): collapsing works:
    # n1,1 gets 50% of CPUs, n2,1 and n2,2 25% each.
    ("collapsed", None, {"n11": 5.0, "n21": 2.5, "n22": 2.5}, {"n1": 0.5, "n2": 0.5}),
])
def test_hdrf_figure_4_and_collapsed_section_3_2(policy, n11_demand, expected, queue_shares):
    if n11_demand is None:
        sc = scenario(capacity={"cpu": 10, "gpu": 10}, queues=[q("n1"), q("n2")],
                      jobs=[job("n11", {"cpu": 1}, "n1"), job("n21", {"cpu": 1}, "n2"), job("n22", {"cpu": 1}, "n2")])
    else:
        sc = fig4(n11_demand)
    alloc = allocate(sc, policy)
    assert_tasks(alloc, expected)
    for path, share in queue_shares.items():
        assert alloc.queues[path].dominant_share == pytest.approx(share, rel=REL)


def test_hdrf_figure_5_rescaling_example():
    # Fig. 5(a): n1 -> n1,1 <1,0>; n2 -> n2,1 <1,0>; n3 -> n3,1 <1,0>, n3,2 <0,1>; n4 -> n4,1 <0,1>.
    # CPU saturates when every leaf has 1/3 (three CPU leaves at 1/3, n3,2 and n4,1 at 1/3 of
    # GPUs). Then only n3,2 and n4,1 grow, and n3's share follows n3,2 (n3,1 is blocked), so
    # they split the remaining 1/3 of GPUs equally: 1/3 + 1/6 = 1/2 each (Fig. 5(b)).
    sc = scenario(capacity={"cpu": 1, "gpu": 1}, queues=[q("n1"), q("n2"), q("n3"), q("n4")],
                  jobs=[job("n11", {"cpu": 1}, "n1"), job("n21", {"cpu": 1}, "n2"), job("n31", {"cpu": 1}, "n3"),
                        job("n32", {"gpu": 1}, "n3"), job("n41", {"gpu": 1}, "n4")])
    assert_tasks(allocate(sc, "hdrf"), {"n11": 1 / 3, "n21": 1 / 3, "n31": 1 / 3, "n32": 0.5, "n41": 0.5})


@pytest.mark.parametrize("with_n22, expected_cpu_gpu", [
    # Fig. 7 left: n1 = 3x (CPU-dominant, 100 each); n2: y = 3z (n2,1 <1,1>, n2,2 <1,3> equal
    # shares y/100 = 3z/100), n2 uses <y + z, y + 3z> = <4z, 6z>, dominant GPU 6z; n1 = n2:
    # 3x = 6z; CPU 3x + 4z = 100 -> z = 10, y = 30, x = 20.
    (True, {"n11": (60.0, 40.0), "n21": (30.0, 30.0), "n22": (10.0, 30.0)}),
    # Fig. 7 right (n2,2 gone): both CPU-dominant, 3x = y, 3x + y = 100 -> y = 50, x = 50/3:
    # n1,1 <50, 33.3>, n2,1 <50, 50>. n1,1 drops from 60% to 50% (no population monotonicity).
    (False, {"n11": (50.0, 100 / 3), "n21": (50.0, 50.0)}),
])
def test_hdrf_figure_7_both_panels(with_n22, expected_cpu_gpu):
    jobs = [job("n11", {"cpu": 3, "gpu": 2}, "n1"), job("n21", {"cpu": 1, "gpu": 1}, "n2")]
    if with_n22:
        jobs.append(job("n22", {"cpu": 1, "gpu": 3}, "n2"))
    alloc = allocate(scenario(capacity={"cpu": 100, "gpu": 100}, queues=[q("n1"), q("n2")], jobs=jobs), "hdrf")
    for name, vec in expected_cpu_gpu.items():
        assert alloc.jobs[name].allocation == pytest.approx(vec, rel=REL)


def fig8_scenario(leaves=("n11", "n12", "n21", "n22")):
    # Sec. 5.1, Fig. 8: 49 servers of <16 GB, 4 CPU, 4 GPU>; n1 : n2 weights 4 : 1.
    demands = {"n11": {"mem": 1, "cpu": 1}, "n12": {"mem": 1, "gpu": 1},
               "n21": {"mem": 1, "cpu": 1}, "n22": {"mem": 1, "cpu": 1}}
    queue_of = {"n11": "n1", "n12": "n1", "n21": "n2", "n22": "n2"}
    return scenario(nodes=[{"name": "ec2", "count": 49, "capacity": {"mem": 16, "cpu": 4, "gpu": 4}}],
                    queues=[q("n1", 4), q("n2", 1)],
                    jobs=[job(name, demands[name], queue_of[name]) for name in leaves])


@pytest.mark.parametrize("leaves, expected_shares", [
    # 200-300 s, all four active: n1 : n2 = 4 : 1 of CPUs -> n1,1 0.8, n2,1 = n2,2 = 0.1;
    # n1,2 alone wants GPUs and gets all of them (1.0); n1 is normalised, not punished.
    (("n11", "n12", "n21", "n22"), {"n11": 0.8, "n12": 1.0, "n21": 0.1, "n22": 0.1}),
    # After n1,1 finishes (300 s): n2,1 and n2,2 take its CPUs, 0.5 each; n1,2 keeps 1.0.
    (("n12", "n21", "n22"), {"n12": 1.0, "n21": 0.5, "n22": 0.5}),
    # After n2,2 finishes too (400 s): n2,1 uses all CPUs.
    (("n12", "n21"), {"n12": 1.0, "n21": 1.0}),
])
def test_hdrf_section_5_1_figure_9_shares(leaves, expected_shares):
    alloc = allocate(fig8_scenario(leaves), "hdrf")
    for name, share in expected_shares.items():
        assert alloc.jobs[name].dominant_share == pytest.approx(share, rel=REL)


def test_hdrf_section_5_1_discrete_within_one_task_per_node_group():
    # The same example with whole tasks on the 49 servers: 196 CPUs and 196 GPUs; n1,1 should
    # get 0.8 * 196 = 156.8 CPUs, so whole tasks give 156 or 157, n2,x 19.6 -> 19 or 20 each.
    alloc = allocate(fig8_scenario(), "hdrf", discrete=True)
    t = tasks_of(alloc)
    assert t["n12"] == 196
    assert abs(t["n11"] - 156.8) <= 1 and abs(t["n21"] - 19.6) <= 1 and abs(t["n22"] - 19.6) <= 1
    assert t["n11"] + t["n21"] + t["n22"] == 196  # all CPUs used


# --- DFF (Wang et al., IEICE 2016) -------------------------------------------------------------

def dff_table1(count: bool = True):
    # Sec. 4.1: 7 nodes, 14 CPUs x 24 threads = 336 CPU, 21 MICs (3 per node), 136 GB each;
    # Fig. 1 hierarchy: n1..n4 under the root, n3 with two jobs; Table 1 demands <CPU, mem, MIC>.
    rows = [("job1", "n1", (4, 4, 0), 300), ("job2", "n2", (4, 3, 0), 370), ("job3", "n3", (2, 4, 0), 260),
            ("job4", "n3", (1, 4, 2), 180), ("job5", "n4", (1, 3, 2), 280)]
    jobs = [job(name, {k: v for k, v in zip(("cpu", "mem", "mic"), d) if v}, queue, count=n if count else None)
            for name, queue, d, n in rows]
    return scenario(nodes=[{"name": "node", "count": 7, "capacity": {"cpu": 48, "mem": 136, "mic": 3}}],
                    queues=[q("n1"), q("n2"), q("n3"), q("n4")], jobs=jobs)


def test_dff_table_1_fair_resource_vectors():
    from fairshare.policies.dff import fair_resources

    fr = fair_resources(dff_table1())
    # Alg. 1: CPU and memory are needed by all four queues -> 336/4 = 84, 952/4 = 238 each;
    # MIC only by n3 and n4 -> 21/2 = 10.5 each. In n3: CPU, memory split in two (42, 119);
    # MIC only job4 needs it -> all 10.5; job3 gets 0 MIC.
    assert fr["n1"] == pytest.approx((84, 238, 0))
    assert fr["n3"] == pytest.approx((84, 238, 10.5))
    assert fr["job3"] == pytest.approx((42, 119, 0))
    assert fr["job4"] == pytest.approx((42, 119, 10.5))
    assert fr["job5"] == pytest.approx((84, 238, 10.5))


def test_dff_table_1_against_hdrf_divisible():
    sc = dff_table1()
    hdrf, dff = allocate(sc, "hdrf"), allocate(sc, "dff")
    mic = sc.resources.index("mic")
    # H-DRF: the four queues rise together in dominant share t; job4 and job5 are MIC-dominant
    # (2/21 per task), everyone else CPU-dominant. CPU saturates first, at t ~ 0.33, blocking
    # every job (all need CPU) with only ~65% of the MICs in use.
    assert hdrf.utilization[0] == pytest.approx(1.0, rel=REL)
    assert hdrf.utilization[mic] == pytest.approx(0.649797, abs=1e-6)
    # DFF measures each node against its Fair Resource: the MIC jobs reach fairness 1 (10.5
    # MICs each, 5.25 tasks) when CPU use is 220.5 of 336, so MICs saturate first: 100%.
    # Then n3 (fairness pinned at 1 by its MIC) absorbs CPU for job3 until its CPU share of
    # FR reaches 1 (job3 at 42 * 1.875 = 78.75 CPU), then n1, n2, n3 rise together until the
    # CPUs run out: 2 * 84 + 84 + 5.25 = 257.25 used, 78.75 left over three queues of 84 ->
    # fairness 1 + 78.75/252 = 1.3125: job1, job2 at 110.25 CPU = 27.5625 tasks, job3 at
    # 110.25 - 5.25 = 105 CPU = 52.5 tasks.
    assert dff.utilization[mic] == pytest.approx(1.0, rel=REL)
    assert dff.utilization[0] == pytest.approx(1.0, rel=REL)
    assert_tasks(dff, {"job1": 27.5625, "job2": 27.5625, "job3": 52.5, "job4": 5.25, "job5": 5.25})


def test_dff_table_1_discrete_is_capped_by_mic_fragmentation():
    # With whole tasks, a node's 3 MICs hold one 2-MIC task: at most 7 MIC tasks (14 of 21
    # MICs, 66.7%) whatever the policy. DFF's divisible advantage does not survive this
    # cluster's fragmentation (docs/policies.md).
    sc = dff_table1()
    mic = sc.resources.index("mic")
    for policy in ("hdrf", "dff"):
        alloc = allocate(sc, policy, discrete=True)
        t = tasks_of(alloc)
        assert t["job4"] + t["job5"] == 7
        assert alloc.utilization[mic] == pytest.approx(14 / 21, rel=REL)


# --- Capacity Scheduler and FIFO baselines ------------------------------------------------------

def test_capacity_scheduler_stops_at_first_saturation():
    # Fig. 4(a) under C.S-Current: allocation proceeds as H-DRF until the CPUs saturate with
    # n1,1 = n2,1 = 5 and n2,2 = 5 GPUs; then it stops, leaving 5 GPUs idle (Sec. 5.2).
    alloc = allocate(fig4({"cpu": 1}), "capacity")
    assert_tasks(alloc, {"n11": 5.0, "n21": 5.0, "n22": 5.0})
    assert alloc.utilization == pytest.approx((1.0, 0.5), rel=REL)


def test_fifo_serves_jobs_in_submit_order():
    # A (submitted first) takes all it can: memory binds first, 4x <= 18 -> x = 4.5 tasks
    # (4.5 CPUs, 18 GB). B needs 1 GB per task and memory is gone, so B gets nothing.
    sc = scenario(capacity={"cpu": 9, "mem": 18},
                  jobs=[job("B", {"cpu": 3, "mem": 1}, submit=5), job("A", {"cpu": 1, "mem": 4}, submit=0)])
    assert_tasks(allocate(sc, "fifo"), {"A": 4.5, "B": 0.0})


def test_respect_counts_caps_jobs_and_redistributes():
    # DRF Sec. 4.1 with A limited to 1 task: A <1, 4>; B then takes what it can: CPU (9-1)/3
    # = 8/3 tasks, memory 4 + 8/3 <= 18 fine -> B = 8/3.
    sc = scenario(capacity={"cpu": 9, "mem": 18},
                  jobs=[job("A", {"cpu": 1, "mem": 4}, count=1), job("B", {"cpu": 3, "mem": 1})])
    assert_tasks(allocate(sc, "drf", respect_counts=True), {"A": 1.0, "B": 8 / 3})
    assert_tasks(allocate(sc, "drf"), {"A": 3.0, "B": 2.0})  # counts ignored by default


def test_discrete_placement_honours_constraints():
    # Two GPU nodes with different models; the job may only use model "a100": one task per
    # node fits (1 GPU each), so it gets exactly the one a100 node's task.
    sc = scenario(nodes=[{"name": "v100", "capacity": {"cpu": 4, "gpu": 1}, "attributes": {"gpu_model": "v100"}},
                         {"name": "a100", "capacity": {"cpu": 4, "gpu": 1}, "attributes": {"gpu_model": "a100"}}],
                  jobs=[job("picky", {}, classes=[{"demand": {"cpu": 1, "gpu": 1},
                                                   "constraints": {"gpu_model": ["a100"]}}])])
    alloc = allocate(sc, "drf", discrete=True)
    assert alloc.placement == {"a100": {"picky": {"main": 1}}}
    assert allocate(sc, "drf").notes  # divisible mode says it ignores the constraint
