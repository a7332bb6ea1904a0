"""Dynamic findings of the DRF and H-DRF papers, reproduced on the simulator (part 1).

Each test runs one scenario of ``examples/repro/`` (its header states every modelling
choice the paper leaves open) and asserts the paper's *finding*: a qualitative claim
with numeric margins, each justified next to it. Where a claim does not reappear under
our model, the test pins what we observe instead and says so; docs/reproductions/part1.md
reports the numbers, the commands and the conditions.

Papers: DRF = Ghodsi et al., NSDI 2011; H-DRF = Bhattacharya et al., SoCC 2013.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fairshare.model import load_scenario
from fairshare.sim import SimOptions, SimResult, simulate
from fairshare.sim.metrics import summarize

REPRO = Path(__file__).resolve().parents[1] / "examples" / "repro"

RUNNING, SHARE = 3, 4  # columns of a timeline row: (time, kind, entity, running, share, alloc)


def run(name: str, policy: str, *, seed: int = 0, until: float | None = None, **options) -> SimResult:
    return simulate(load_scenario(REPRO / name), policy, SimOptions(seed=seed, until=until), **options)


def time_avg(result: SimResult, job: str, start_s: float, end_s: float, column: int = SHARE) -> float:
    """Time average over [start_s, end_s] of a job's step function (timeline rows)."""
    rows = [r for r in result.rows if r[1] == "job" and r[2] == job]
    total = 0.0
    for k, row in enumerate(rows):
        t0 = max(row[0], start_s)
        t1 = min(rows[k + 1][0] if k + 1 < len(rows) else end_s, end_s)
        if t1 > t0:
            total += row[column] * (t1 - t0)
    return total / (end_s - start_s)


def alloc_avg(result: SimResult, job: str, resource: int, start_s: float, end_s: float) -> float:
    """Time average of one resource of a job's allocation over [start_s, end_s]."""
    rows = [r for r in result.rows if r[1] == "job" and r[2] == job]
    total = 0.0
    for k, row in enumerate(rows):
        t0 = max(row[0], start_s)
        t1 = min(rows[k + 1][0] if k + 1 < len(rows) else end_s, end_s)
        if t1 > t0:
            total += row[5][resource] * (t1 - t0)
    return total / (end_s - start_s)


# --- 1. DRF Sec. 7.1, Fig. 8 ------------------------------------------------------------------

def test_drf_fig8_equalises_dominant_shares_per_phase():
    res = run("drf_fig8_dynamic.yaml", "drf")
    cpu_total, mem_total = 48 * 4, 48 * 14  # 192 CPUs, 672 GB
    # Windows skip the first 20 s of each 2-minute phase (old tasks, up to 15 s long, drain)
    # and the last 10 s (the phase's counts run dry at about 112-118 s).

    # Phase 1: job 1 <1, 10> is memory-dominant, job 2 <1, 1> CPU-dominant. Paper: "job 1
    # uses around 70% of the RAM while job 2 uses around 75% of the CPUs". Whole tasks give
    # exactly that: one 10 GB task per 14 GB node -> 48 x 10 / 672 = 0.714 of RAM, and the
    # node's remaining <3 CPU, 4 GB> holds 3 job-2 tasks -> 144 / 192 = 0.75 of CPUs. (The
    # divisible DRF answer is 0.741 each: x + 2.857x = 192.) Margin 0.005: the plateau is flat.
    j1 = time_avg(res, "job1a", 20, 110)
    j2 = time_avg(res, "job2a", 20, 110)
    assert j1 == pytest.approx(480 / mem_total, abs=0.005)
    assert j2 == pytest.approx(144 / cpu_total, abs=0.005)
    assert min(j1, j2) > 0.5  # sharing incentive: both beat half the cluster

    # Phase 2: both CPU-dominant (<2, 4> and <1, 3>); DRF's divisible answer is 0.5 each
    # (2x = y, 2x + y = 192). Observed: job 1 ~0.45, job 2 ~0.55, CPUs full. Fragmentation:
    # a node holding 3 job-2 tasks has 1 CPU free, which job 1's 2-CPU task cannot use,
    # so DRF (work-conserving) gives it to job 2. Margins: CPUs at least 98% busy; both
    # within 0.1 of 0.5 (their gap is at most 0.12, i.e. 11.5 job-1 tasks on 48 nodes).
    j1 = time_avg(res, "job1b", 140, 230)
    j2 = time_avg(res, "job2b", 140, 230)
    cpu_used = alloc_avg(res, "job1b", 0, 140, 230) + alloc_avg(res, "job2b", 0, 140, 230)
    assert cpu_used / cpu_total >= 0.98
    assert j1 == pytest.approx(0.5, abs=0.1) and j2 == pytest.approx(0.5, abs=0.1)
    assert abs(j1 - j2) <= 0.12

    # Phase 3: both memory-dominant (<1, 7> and <1, 4>): DRF equalises memory shares. Paper:
    # "the shares are not exactly equal ... due to resource fragmentation". Divisible: 0.5
    # each (7x = 4y, 7x + 4y = 672). Whole tasks: a 14 GB node holds {7,7}, {7,4} or
    # {4,4,4}, leaving 0-3 GB idle, so both stay below 0.5. Margins: within 0.02 of each
    # other (observed 0.438 vs 0.435: one 7 GB task is 0.0104), both in [0.4, 0.5).
    j1 = time_avg(res, "job1c", 260, 350)
    j2 = time_avg(res, "job2c", 260, 350)
    assert abs(j1 - j2) <= 0.02
    assert 0.4 <= j1 < 0.5 and 0.4 <= j2 < 0.5


# --- 2. DRF Sec. 7.2, Figs. 9-10 --------------------------------------------------------------

def _jobs_completed(result: SimResult) -> tuple[int, int]:
    """(small, large) 80-task jobs completed: each user's completed tasks // 80."""
    jobs = summarize(result, fairness_gap=False)["jobs"]
    small = sum(v["tasks_completed"] // 80 for k, v in jobs.items() if k.startswith("small"))
    large = sum(v["tasks_completed"] // 80 for k, v in jobs.items() if k.startswith("large"))
    return small, large


def test_drf_sec72_drf_beats_slots_and_cpu_fair_is_not_worse_on_large_jobs():
    until = 600  # "each experiment ran for ten minutes"
    counts = {"drf": _jobs_completed(run("drf_sec72_slots.yaml", "drf", until=until)),
              "cpu": _jobs_completed(run("drf_sec72_slots.yaml", "cpu", until=until))}
    util = {}
    stretched = {}
    for n in (3, 4, 5, 6):
        res = run("drf_sec72_slots.yaml", "slots", until=until, slots=n)
        counts[f"slots{n}"] = _jobs_completed(res)
        s = summarize(res, fairness_gap=False)
        util[n] = s["utilization"]
        stretched[n] = s["tasks"]["stretched_by_oversubscription"]
    total = {k: sum(v) for k, v in counts.items()}

    # Paper: "with slot-based scheduling, both the throughput and job response times are
    # worse than with DRF, regardless of the number of slots". Holds: DRF ~99 jobs, the
    # best slot count ~84. Margin: DRF at least 10% above every slot count.
    assert all(total["drf"] >= 1.1 * total[f"slots{n}"] for n in (3, 4, 5, 6))

    # "with a low slot count, the scheduler can undersubscribe nodes": 3 and 4 slots of
    # 8 CPUs leave CPUs idle whatever the mix (at most 3 x 2 = 6 or 4 x 2 = 8 CPUs, and
    # max-min on tasks gives half the slots to 1-CPU tasks). Margin: <= 80% of CPUs used.
    assert util[3]["cpu"] <= 0.8 and util[4]["cpu"] <= 0.8
    # "... while with a large slot count, it can oversubscribe them": 5 and 6 slots put
    # more than 6 GB on nodes (time-averaged memory use above capacity), and the
    # thrashing model stretches tasks.
    assert util[5]["memory"] > 1.0 and util[6]["memory"] > 1.0
    assert stretched[5] > 0 and stretched[6] > 0

    # NOT reproduced (docs/reproductions/part1.md says why): in the paper more slots mean
    # fewer jobs (thrashing); under our linear stretching model total throughput still
    # rises from 3 to 6 slots, and 6 slots finish more large jobs than DRF. We pin the
    # direction we observe so a change in the model shows up here.
    assert total["slots6"] > total["slots3"]
    assert counts["slots6"][1] > counts["drf"][1]

    # Paper: CPU-fair runs "much fewer large jobs" than DRF because it over-commits memory.
    # NOT reproduced: fairshare's `cpu` places tasks by all their resources, so memory is
    # never over-committed; CPU max-min then gives each large user 48 / 2 = 24 tasks, more
    # than DRF's ~20.6, so CPU-fair completes at least as many large jobs. Small jobs:
    # "similar to DRF" holds (within 15%: 48 vs ~51 running tasks per small user).
    assert counts["cpu"][1] >= counts["drf"][1]
    assert counts["cpu"][0] == pytest.approx(counts["drf"][0], rel=0.15)


# --- 3. H-DRF Sec. 3.3, Fig. 4(a) --------------------------------------------------------------

def test_hdrf_fig4_naive_starves_n21_hdrf_does_not():
    naive = run("hdrf_fig4_starvation.yaml", "hdrf-naive", until=200)
    hdrf = run("hdrf_fig4_starvation.yaml", "hdrf", until=200)
    # Paper: naive H-DRF repeats "until job n2,1 is completely starved and 10 CPUs have
    # been allocated to n1,1". From 1 s on (the first CPU tasks end) n2,1 runs nothing.
    # Window [2, 200] s skips the first second, when the initial 5 : 5 split still runs.
    assert time_avg(naive, "n21", 2, 200, RUNNING) == 0.0
    assert time_avg(naive, "n11", 2, 200, RUNNING) == 10.0
    assert summarize(naive, fairness_gap=False)["starvation"]["job"] == "n21"
    # H-DRF (Sec. 3.4): n2,1 keeps its static 5 CPUs (Fig. 4(b)), n2,2 all 10 GPUs.
    # Exact: every task takes 1 s and 5 : 5 is reached at each whole second.
    assert time_avg(hdrf, "n21", 2, 200, RUNNING) == 5.0
    assert time_avg(hdrf, "n11", 2, 200, RUNNING) == 5.0
    assert time_avg(hdrf, "n22", 2, 200, RUNNING) == 10.0


# --- 4. H-DRF Sec. 3.4, Fig. 5 and the <1, eps> variant of Fig. 4 -------------------------------

def test_hdrf_fig5_rescaling_alone_favours_n32():
    full = run("hdrf_fig5_rescaling.yaml", "hdrf", until=200)
    rescale_only = run("hdrf_fig5_rescaling.yaml", "hdrf", until=200, ignore_blocked=False)
    gpus = 60
    # Static H-DRF (Fig. 5(b)): every CPU leaf 1/3 of the CPUs (20), n3,2 and n4,1 half of
    # the GPUs each (30). Full H-DRF holds that while tasks end and restart. Margin: 1 task.
    for j in ("n11", "n21", "n31"):
        assert time_avg(full, j, 20, 200, RUNNING) == pytest.approx(20, abs=1)
    assert time_avg(full, "n32", 20, 200, RUNNING) / gpus == pytest.approx(0.5, abs=1 / gpus)
    assert time_avg(full, "n41", 20, 200, RUNNING) / gpus == pytest.approx(0.5, abs=1 / gpus)
    # Rescaling alone (--no-ignore-blocked): "n3,2 gets 2/3 of GPUs, while n4,1 gets only
    # 1/3". Observed 39 : 21 of 60 (0.65 : 0.35): whole tasks and the tie rule land one
    # task from 40 : 20. Margin: 2 tasks (0.033) of the paper's fractions.
    assert time_avg(rescale_only, "n32", 20, 200, RUNNING) / gpus == pytest.approx(2 / 3, abs=2 / gpus)
    assert time_avg(rescale_only, "n41", 20, 200, RUNNING) / gpus == pytest.approx(1 / 3, abs=2 / gpus)
    # The CPU leaves are unaffected by the ablation (CPU saturates with every leaf at 1/3).
    for j in ("n11", "n21", "n31"):
        assert time_avg(rescale_only, j, 20, 200, RUNNING) == pytest.approx(20, abs=1)


def test_hdrf_fig4_eps_ignoring_blocked_alone_starves_n21():
    full = run("hdrf_fig4_eps.yaml", "hdrf", until=300)
    no_rescale = run("hdrf_fig4_eps.yaml", "hdrf", until=300, rescale=False)
    # Paper: with n2,1 demanding <1, eps>, "ignoring blocked nodes alone will no longer
    # suffice": n2,1 is starved and its CPUs go to n1,1. Under --no-rescale n2,1 loses one
    # CPU per finished task (5 -> 0 within ~30 s, durations 5-15 s); window from 50 s.
    assert time_avg(no_rescale, "n21", 50, 300, RUNNING) == 0.0
    assert time_avg(no_rescale, "n11", 50, 300, RUNNING) == 10.0
    # "Rescaling will, however, remedy the problem ... ensuring that CPUs are split equally
    # between n1,1 and n2,1": full H-DRF keeps 5 : 5.
    assert time_avg(full, "n21", 50, 300, RUNNING) == 5.0
    assert time_avg(full, "n11", 50, 300, RUNNING) == 5.0


# --- 5. H-DRF Sec. 5.1, Figs. 8-9 ----------------------------------------------------------------

def test_hdrf_fig9_weighted_and_sibling_sharing():
    res = run("hdrf_fig8_sharing.yaml", "hdrf")
    finish = {name: out.finish for name, out in res.jobs.items()}
    # The paper's end order: n1,1 (350 s), n2,2 (400 s), n2,1 (550 s), n1,2 (600 s). Our
    # durations are fitted to those times (scenario header); whole-task tails end each job
    # a little later. Margin: each within 60 s of the paper's time.
    assert finish["n11"] < finish["n22"] < finish["n21"] < finish["n12"]
    for name, paper_s in (("n11", 350), ("n22", 400), ("n21", 550), ("n12", 600)):
        assert finish[name] == pytest.approx(paper_s, abs=60)

    # All four running (paper: 200-300 s; ours from 50 s, after the first tasks turn
    # over, to 300 s): n1 : n2 = 4 : 1 on CPUs -> n1,1 0.8, n2,1 = n2,2 = 0.1; n1,2 all
    # GPUs (1.0), as no one else needs them. Whole tasks: 0.8 x 196 = 156.8 CPUs -> 156 or
    # 157 tasks (0.796-0.801); 19.6 -> 19 or 20 (0.097-0.102). Margin 0.01.
    assert time_avg(res, "n11", 50, 300) == pytest.approx(0.8, abs=0.01)
    assert time_avg(res, "n21", 50, 300) == pytest.approx(0.1, abs=0.01)
    assert time_avg(res, "n22", 50, 300) == pytest.approx(0.1, abs=0.01)
    assert time_avg(res, "n12", 50, 300) == pytest.approx(1.0, abs=0.01)

    # After n1,1 ends, "its resources are taken over by n2,1 and n2,2, taking their
    # dominant resource (CPU) share to 0.5 each". Window: from n1,1's end (its last
    # tasks have drained) to n2,2's last launch (after it, n2,2 only drains and n2,1 takes
    # the freed CPUs). Margin 0.03 (tasks of 3-9 s turn over fast; observed 0.500).
    last_launch = {job: t for t, job, demanding in res.demand_changes if not demanding}
    a, b = finish["n11"], last_launch["n22"]
    assert time_avg(res, "n21", a, b) == pytest.approx(0.5, abs=0.03)
    assert time_avg(res, "n22", a, b) == pytest.approx(0.5, abs=0.03)
    assert time_avg(res, "n12", a, b) == pytest.approx(1.0, abs=0.01)
    # "when n2,2 finishes at 400s, ... n2,1 increases its share to use all the CPUs".
    a, b = finish["n22"], last_launch["n21"]
    assert time_avg(res, "n21", a, b) == pytest.approx(1.0, abs=0.01)
