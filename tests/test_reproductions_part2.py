"""Dynamic findings of the H-DRF, DFF and Tan papers, reproduced on the simulator (part 2).

Each test runs scenarios of ``examples/repro/`` (each header states every modelling choice
the paper leaves open) through ``fairshare.sim.simulate`` and asserts the paper's
*finding* with numeric margins justified next to them. Where a claim does not reappear
under our model, the test pins what we observe instead and says so;
docs/reproductions/part2.md has the numbers, the commands, the plots and the conditions.
The step-function helpers (means, medians over time) are shared with the plot script,
``examples/repro/repro_part2.py``, so the plots and the assertions read the same runs.

Papers: H-DRF = Bhattacharya et al., SoCC 2013; DFF = Wang et al., IEICE 2016;
Tan = Tan et al., "Multi-resource fair sharing for multiclass workflows".
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

REPRO = Path(__file__).resolve().parents[1] / "examples" / "repro"
sys.path.insert(0, str(REPRO))

import repro_part2 as R  # noqa: E402  (examples/repro is not a package)

MEMORY, CPU, GPU = 0, 1, 2  # resource columns of the H-DRF schedules
SEC52, SEC52_1GB, SEC531 = "hdrf_sec52_capacity", "hdrf_sec52_capacity_1gb", "hdrf_sec531_slots"
GPUS_52 = 50  # 50 servers x 1 GPU
CPUS = 200  # 50 servers x 4 CPUs


def contention(name: str, policy: str) -> dict[str, float]:
    """H-DRF Sec. 5.2's throughput numbers over the window in which all three top-level
    queues compete: [0, the time n2's last job finishes] (after it n2 has no jobs left and
    the comparison is no longer the paper's)."""
    run = R.run(name, policy)
    end = R.queue_finish(run, "n2")
    n11_running = R.step(run, "queue", "n1.n11", "running")
    return {
        "end": end,
        "n12_gpu_share": R.step(run, "queue", "n1.n12", "share").mean(0, end),
        "n11_cpu_share": R.step(run, "queue", "n1.n11", "share").mean(0, end),
        "n11_median_running": n11_running.median(0, end),
        "idle_gpus": GPUS_52 - R.step(run, "cluster", "cluster", GPU).mean(0, end),
    }


# --- 6. H-DRF Sec. 5.2 (Fig. 10, 11): Capacity Scheduler, naive H-DRF, H-DRF -----------------
def test_sec52_capacity_leaves_gpus_idle_with_n12_near_042():
    c = contention(SEC52, "capacity")
    # Paper: C.S-Current pins n1,2's GPU share at 21/50 = 0.42. Measured 0.357 (seeds 0-3:
    # 0.353-0.391; before the FIFO fix of the incremental sorter 0.396-0.418); 0.31-0.43
    # is about 2 GPUs beyond the seed spread either way, and includes the paper's 0.42.
    assert 0.31 <= c["n12_gpu_share"] <= 0.43, c
    # GPUs idle although n1,2 always has GPU tasks pending: measured 32.1 of 50 idle on
    # average (seeds 0-3: 30.5-32.4); at least 25 is a clear majority of "idle".
    assert c["idle_gpus"] >= 25, c
    # Only partly reappears on the paper's workload: n1,1's CPU share is 0.277 (seeds 0-3:
    # 0.253-0.279; paper ~0.40), so n1,2 sits 0.07-0.14 above n1,1 (seeds 0-3), closer
    # than before the FIFO fix (0.17) but not "near" it as in the 1-GB variant (0.02).
    # Pinned as observed: more than 0.05 apart, less than 0.2.
    assert 0.05 < c["n12_gpu_share"] - c["n11_cpu_share"] < 0.2, c


def test_sec52_naive_hdrf_starves_n11_and_hdrf_does_not():
    naive, hdrf = contention(SEC52, "hdrf-naive"), contention(SEC52, "hdrf")
    # Paper: under Pareto-Efficient-C.S n1,1's median throughput drops to 1 task. Measured
    # median 0 running tasks on every seed 0-3 (before the FIFO fix: 0, 24, 16, 24)
    # against H-DRF's 59 (seeds 0-3: 59-75).
    assert naive["n11_median_running"] <= 1, (naive, hdrf)
    assert naive["n11_median_running"] <= 0.5 * hdrf["n11_median_running"], (naive, hdrf)
    # time-averaged CPU share: measured 0.106 against 0.342 (seeds 0-3: 0.106-0.115
    # against 0.341-0.351, a ratio of at most 0.34); 0.5 x leaves room for the spread
    assert naive["n11_cpu_share"] <= 0.5 * hdrf["n11_cpu_share"], (naive, hdrf)
    # H-DRF does not starve n1,1: median 59 of 200 CPUs (fair share of n1 is a third of
    # the cluster, split with n1,2); 40 is 20% of the CPUs
    assert hdrf["n11_median_running"] >= 40, hdrf
    # ... and lets n1,2 go above n1,1's share (paper: "allows n1,2 to increase its
    # dominant share beyond that of n1,1"): measured 0.854 against 0.342 (seeds 0-3:
    # 0.853-0.859 against at most 0.351)
    assert hdrf["n12_gpu_share"] >= hdrf["n11_cpu_share"] + 0.3, hdrf
    # Since the FIFO fix H-DRF fills most GPUs on the paper's workload: 7.3 of 50 idle
    # (seeds 0-3: 7.1-7.4; before the fix ~27, "memory fills first"). Pinned as observed.
    assert hdrf["idle_gpus"] <= 10, hdrf
    # Still does NOT reappear: naive H-DRF giving n1,2 "almost all the GPUs". Measured
    # 0.610 (seeds 0-3: 0.586-0.640; before the fix 0.480), ~20 GPUs idle, well below
    # H-DRF's 0.85. Pinned as observed: between 0.5 and 0.75. The 1-GB variant shows the
    # condition under which it does reappear.
    assert 0.5 <= naive["n12_gpu_share"] <= 0.75, naive


def test_sec52_variant_1gb_findings():
    # VARIANT (every task 1 GB, so a server's 4 CPU tasks leave room for its GPU task).
    cap, naive, hdrf = (contention(SEC52_1GB, p) for p in ("capacity", "hdrf-naive", "hdrf"))
    # C.S-Current pins n1,2 near n1,1 (paper 0.42 vs 0.40): measured 0.338 vs 0.317,
    # within 0.05 of each other, and most GPUs idle (measured 33.1 of 50)
    assert abs(cap["n12_gpu_share"] - cap["n11_cpu_share"]) <= 0.05, cap
    assert cap["idle_gpus"] >= 25, cap
    # Pareto-Efficient-C.S: n1,2 takes (almost) all GPUs, n1,1 starves (paper: median 1)
    assert naive["n12_gpu_share"] >= 0.95, naive  # measured 1.000
    assert naive["n11_median_running"] <= 1, naive  # measured 0
    # H-DRF: n1,2 uses all GPUs (measured 1.000 on seeds 0-3) ...
    assert hdrf["n12_gpu_share"] >= 0.95, hdrf
    # ... but, since the FIFO fix of the incremental sorter, n1,1 does NOT keep its CPUs
    # through the window here: its median running tasks are 0 (seeds 0-3: 0, 1, 11, 0;
    # before the fix 56), although it still holds a time-averaged CPU share of 0.234
    # (seeds 0-3: 0.222-0.237) against naive H-DRF's 0.011. The paper's "H-DRF does not
    # starve n1,1" therefore holds on the average but not on the median in this variant.
    # Pinned as observed: median at most 15 and share at least 0.18 (and 10x naive's).
    assert hdrf["n11_median_running"] <= 15, hdrf
    assert hdrf["n11_cpu_share"] >= 0.18 and hdrf["n11_cpu_share"] >= 10 * naive["n11_cpu_share"], (hdrf, naive)
    # n1,2's jobs finish much earlier under H-DRF than under C.S-Current (paper: ~250%
    # better response times on average). Measured: its last job 1741 s vs 2580 s
    # (seeds 0-3: 1737-1750 s vs 2570-2583 s).
    assert R.queue_finish(R.run(SEC52_1GB, "hdrf"), "n1.n12") <= 0.8 * R.queue_finish(
        R.run(SEC52_1GB, "capacity"), "n1.n12")


# --- 7. H-DRF Sec. 5.3.1 (Fig. 12): H-DRF against 4, 5 and 6 slots per server ---------------
def improvements(slots: int) -> list[float]:
    """H-DRF Sec. 5.2's "percentage improvement in job response time" of H-DRF over the
    slot scheduler: (T_slots - T_hdrf) / T_slots x 100, per job."""
    hdrf, other = R.run(SEC531, "hdrf"), R.run(SEC531, "slots", slots=slots)
    return [100 * (R.completion(other, j) - R.completion(hdrf, j)) / R.completion(other, j) for j in hdrf.jobs]


@pytest.mark.parametrize("slots", [4, 5, 6])
def test_sec531_hdrf_finishes_the_schedule_first(slots):
    hdrf, other = R.run(SEC531, "hdrf"), R.run(SEC531, "slots", slots=slots)
    assert hdrf.all_finished and other.all_finished
    # Paper: 1379 s against 1446 / 1514 / 1732 s (4.6-20% shorter). Measured 1635 s
    # against 1883 / 1722 / 1715 s (seeds 0-3: hdrf 1632-1640 s, slots within 11 s of
    # these; hdrf/slots at most 0.956); H-DRF at least 2% shorter holds on each (the
    # closest, 6 slots, is 4.7% shorter at seed 0).
    assert hdrf.end_time <= 0.98 * other.end_time, (hdrf.end_time, other.end_time)
    # Summed job response time. Before the FIFO fix of the incremental sorter H-DRF was
    # 36-42% lower against every slot count; now it is lower only against 4 slots:
    # measured +8.4 / +0.3 / -1.1% (seeds 0-3: +7.3..+8.4 / -0.9..+0.3 / -2.3..-1.0%).
    # Pinned as observed: >= 5% lower against 4 slots, within 4% either way at 5 and 6.
    imp = improvements(slots)
    total_h = sum(R.completion(hdrf, j) for j in hdrf.jobs)
    total_o = sum(R.completion(other, j) for j in hdrf.jobs)
    if slots == 4:
        assert total_h <= 0.95 * total_o, (total_h, total_o)
    else:
        assert abs(total_h - total_o) <= 0.04 * total_o, (total_h, total_o)
    # Small jobs (0-19 tasks, 74 of 100): no longer a large gain (before the fix: median
    # +62-66%). Measured medians +5 / +1 / -1% (seeds 0-3: -5..+5% across 4-6 slots).
    # Pinned as observed: median within 10 points of 0.
    small = [i for i, job in zip(imp, R.scenario(SEC531).jobs) if job.total_count < 20]
    assert abs(statistics.median(small)) <= 10, statistics.median(small)
    # Thrashing (our model: duration x over-subscription at launch): none at 4 slots (4
    # tasks of <= 1.5 GB and 1 CPU fit a <6 GB, 4 CPU> server), from 5 slots on tasks are
    # stretched (measured 9,933 of 14,866 at 5, all at 6: the 5th and 6th CPU task
    # over-commit the 4 CPUs whatever the memory).
    if slots == 4:
        assert other.tasks_stretched == 0
    else:
        assert other.tasks_stretched >= 0.5 * other.tasks_launched


# --- 8. DFF Sec. 4 (Fig. 2, 3): the bundled scenario, and a cluster without MIC fragments ----
def mic_utilisation(name: str, policy: str, end: float) -> float:
    run = R.run(name, policy)
    mics = sum(node.capacity[2] for node in R.scenario(name).cluster.nodes)
    return R.step(run, "cluster", "cluster", 2).mean(0, end) / mics


def test_dff_sec4_copy_is_the_bundled_scenario():
    ours, bundled = R.scenario("dff_sec4"), R.scenario("default")
    assert (ours.resources, ours.cluster, ours.jobs) == (bundled.resources, bundled.cluster, bundled.jobs)
    assert list(ours.queues) == list(bundled.queues)  # QueueNode values: paths, weights, order


def test_dff_sec4_paper_cluster_mic_capped_for_both():
    # 3 MICs per node hold one 2-MIC task: 14 of 21 MICs (66.7%) for every policy, so the
    # paper's MIC-utilisation gain between 0 and 2,000 s cannot appear. Measured: exactly
    # 2/3 for both over [0, 2000].
    for policy in ("hdrf", "dff"):
        assert mic_utilisation("dff_sec4", policy, 2000) == pytest.approx(2 / 3, abs=1e-9)
    hdrf, dff = R.run("dff_sec4", "hdrf"), R.run("dff_sec4", "dff")
    total = {p: sum(R.completion(r, j) for j in r.jobs) for p, r in (("hdrf", hdrf), ("dff", dff))}
    # Paper: total completion -11.9%. Measured -1.9% (7,810 s -> 7,660 s: job3 and job4
    # earlier, job5 unchanged at 3,960 s, the MIC backlog). Within 5% either way: the
    # paper's gain does not reappear on its own cluster with whole tasks.
    assert abs(total["dff"] - total["hdrf"]) <= 0.05 * total["hdrf"], total
    assert R.completion(dff, "job5") == R.completion(hdrf, "job5")


def test_dff_sec4_variant_unfragmented_mics():
    # VARIANT: 4 MICs per node (two 2-MIC tasks each). While the CPU jobs run ([0, 400 s]),
    # H-DRF saturates CPUs and MIC tasks wait (paper's mechanism); DFF fills the MICs.
    # Measured 0.804 vs 1.000; DFF at least 10 points higher.
    assert mic_utilisation("dff_sec4_mic4", "dff", 400) >= mic_utilisation("dff_sec4_mic4", "hdrf", 400) + 0.10
    # ... with the CPU phase lengthened to ~2,000 s as in the paper (CPU tasks x5), over
    # [0, 2000]: measured 0.804 vs 0.986; and jobs 4 and 5 finish earlier (measured
    # 1,980 -> 1,800 s and 2,400 -> 1,980 s), total completion -5.3% (paper -11.9%).
    name = "dff_sec4_mic4_long_cpu"
    assert mic_utilisation(name, "dff", 2000) >= mic_utilisation(name, "hdrf", 2000) + 0.10
    hdrf, dff = R.run(name, "hdrf"), R.run(name, "dff")
    for job in ("job4", "job5"):
        assert R.completion(dff, job) < R.completion(hdrf, job), job
    total_h = sum(R.completion(hdrf, j) for j in hdrf.jobs)
    total_d = sum(R.completion(dff, j) for j in dff.jobs)
    assert total_d <= 0.97 * total_h, (total_d, total_h)


# --- 9. Tan Sec. 5: drf drifts to 60/40, timefair equalises average slowdowns ----------------
TAN = "tan_sec5_two_users"
N_A, N_B = 3, 10  # tasks alone: floor(100/30), floor(100/10)


def tan_averages(policy: str, until: float) -> dict[str, float]:
    run = R.run(TAN, policy, until=until)
    running = {u: R.step(run, "job", u, "running").mean(0, until) for u in ("A", "B")}
    return {"share_A": 30 * running["A"] / 100, "share_B": 10 * running["B"] / 100,
            "eta_A": running["A"] / N_A, "eta_B": running["B"] / N_B}


def test_tan_sec5_drf_drifts_to_60_40():
    d = tan_averages("drf", 2000)
    # Tan: "approximately equal to 60% and 40%". Measured exactly 0.6 / 0.4: 2 A tasks and
    # 4 B tasks (2x30 + 4x10 = 100) all the time; slowdowns 2/3 vs 4/10, a ratio of 1.67.
    assert d["share_A"] == pytest.approx(0.6, abs=0.02) and d["share_B"] == pytest.approx(0.4, abs=0.02)
    assert d["eta_A"] / d["eta_B"] == pytest.approx(5 / 3, rel=0.02)


def test_tan_sec5_timefair_equalises_slowdowns_within_10_percent():
    # One default window (l = 10,000 s). Measured eta_A = 0.551, eta_B = 0.504: ratio
    # 1.093 (fair point 10/19 = 0.526 each). <= 1.10 is Tan's "within ~10%"; >= 1.08 is the
    # ~9% floor of Tan's Z*M indicator (src/fairshare/policies/timefair.py: C integrates
    # eta_i * M / sum eta, weighting A's burst by 2/1.1 and B's phase by 2/1, so C_A = C_B
    # at plain averages 0.550 vs 0.505, ratio 1.089).
    t = tan_averages("timefair", 10000)
    assert 1.08 <= t["eta_A"] / t["eta_B"] <= 1.10, t
    assert t["share_A"] + t["share_B"] == pytest.approx(1.0, abs=1e-9)  # never idle
    # A horizon that cuts the run mid-cycle shows the window's echo: at 5,000 s the ratio
    # is 1.125 (not within 10%), still far from drf's 1.67.
    half = tan_averages("timefair", 5000)
    assert 1.08 <= half["eta_A"] / half["eta_B"] <= 1.15, half
