"""Generate the 100-job schedule of H-DRF Sec. 5.2 / 5.3.1 (Bhattacharya et al., SoCC 2013).

Writes examples/repro/hdrf_sec52_capacity.yaml (Sec. 5.2: 50 nodes <6 GB, 4 CPU, 1 GPU>)
and examples/repro/hdrf_sec531_slots.yaml (Sec. 5.3.1: 50 nodes <6 GB, 4 CPU, 4 GPU>,
n3 weight 2) from one seeded draw, plus a VARIANT of the first,
examples/repro/hdrf_sec52_capacity_1gb.yaml, in which every task takes 1 GB (so memory
no longer decides how many GPU tasks fit beside four CPU tasks), so both runs use the same jobs in the same order (the
paper: "the order of the jobs submitted to the leaves is kept the same across the
different experiments").

    .venv/bin/python examples/repro/make_hdrf_schedule_part2.py   # deterministic (SEED)

What the paper gives: the Fig. 10 hierarchy; Table 1's bin counts (74 jobs of 0-19
tasks, 10 of 20-149, 6 of 150-499, 10 of 500+); 1.5 GB or 1 GB per task by whether the
sampled Facebook job was memory-dominant; 1 CPU per task, except n1,2's jobs, 1 GPU and
no CPU; the ten large (500+) jobs on n1,1, n1,2 and n3,1, the smaller ones over n2's
leaves; each leaf runs its jobs one after the other. Everything else is chosen here
(and repeated in the YAML headers):

* task counts uniform within each bin: 1-19, 20-149, 150-499, and 500-1500 for "500+"
  (the paper gives no upper end; 1500 keeps the schedule near the paper's ~23-minute
  runs with the durations below);
* memory per task: 1.5 GB with probability 0.6, else 1 GB (Sec. 5.3.1: "a majority" of
  the small jobs use 1.5 GB; we do not have the Facebook trace's dominant resources);
* task durations: uniform on [15, 35] s (mean 25 s), per job class, sampled by the
  simulator from --seed; the paper gives none;
* the ten large jobs are dealt round-robin in draw order to n1,1, n1,2, n3,1 (4, 3, 3);
  the 90 others round-robin to n2,1, n2,2, n2,3 (30 each);
* all jobs are submitted at 0 into `order: fifo` leaf queues, in draw order. Our FIFO
  lets the next job compete once the previous one has *started* all its tasks (the
  engine's FIFO: the earliest non-blocked job competes), not once it has *finished*
  as in the paper; the difference is the last wave of each job.
"""

from __future__ import annotations

import random
from pathlib import Path

SEED = 2013
HERE = Path(__file__).resolve().parent

#: Table 1 ("Num. jobs in our workload") and our task-count range for each bin
BINS = [(74, 1, 19), (10, 20, 149), (6, 150, 499), (10, 500, 1500)]
P_MEMORY_HEAVY = 0.6
DURATION = "{dist: uniform, low: 15, high: 35}"
LARGE_LEAVES = ["n1.n11", "n1.n12", "n3.n31"]
SMALL_LEAVES = ["n2.n21", "n2.n22", "n2.n23"]


def draw_jobs(seed: int = SEED) -> list[dict]:
    rng = random.Random(seed)
    sizes = [(rng.randint(lo, hi), lo >= 500) for n, lo, hi in BINS for _ in range(n)]
    rng.shuffle(sizes)  # the order in which jobs are submitted to their leaves
    jobs, n_large, n_small = [], 0, 0
    for k, (count, large) in enumerate(sizes):
        if large:
            queue = LARGE_LEAVES[n_large % 3]
            n_large += 1
        else:
            queue = SMALL_LEAVES[n_small % 3]
            n_small += 1
        memory = 1.5 if rng.random() < P_MEMORY_HEAVY else 1.0
        gpu_job = queue == "n1.n12"
        demand = {"memory": memory, "cpu": 0 if gpu_job else 1, "gpu": 1 if gpu_job else 0}
        jobs.append({"name": f"j{k:03d}", "queue": queue, "count": count, "demand": demand})
    return jobs


def render(jobs: list[dict], *, header: str, node_capacity: str, n3_weight: int,
           memory_gb: float | None = None) -> str:
    lines = [header.rstrip(), "resources: [memory, cpu, gpu]   # GB, cores, GPUs",
             "cluster:", f"  nodes:\n    - {{name: server, count: 50, capacity: {node_capacity}}}",
             "queues:",
             "  - name: n1", "    children:",
             "      - {name: n11, order: fifo}", "      - {name: n12, order: fifo}",
             "  - name: n2", "    children:",
             "      - {name: n21, order: fifo}", "      - {name: n22, order: fifo}",
             "      - {name: n23, order: fifo}",
             f"  - name: n3\n    weight: {n3_weight}", "    children:",
             "      - {name: n31, order: fifo}",
             "jobs:"]
    for job in jobs:
        d = dict(job["demand"])
        if memory_gb is not None:
            d["memory"] = memory_gb
        lines.append(f"  - {{name: {job['name']}, queue: {job['queue']}, tasks: [{{demand: "
                     f"{{memory: {d['memory']:g}, cpu: {d['cpu']}, gpu: {d['gpu']}}}, "
                     f"count: {job['count']}, duration: {DURATION}}}]}}")
    return "\n".join(lines) + "\n"


COMMON = """\
# Modelling choices the paper does not give (examples/repro/make_hdrf_schedule_part2.py,
# seed {seed}, generated this file; do not edit by hand):
# - task counts uniform within Table 1's bins: 1-19 (74 jobs), 20-149 (10), 150-499 (6),
#   500-1500 (10; the paper gives no upper end for "500+");
# - 1.5 GB per task with probability 0.6, else 1 GB (no Facebook trace here);
# - task durations uniform on [15, 35] s, sampled by the simulator from --seed;
# - large jobs round-robin to n1.n11, n1.n12, n3.n31 (4, 3, 3 jobs); the 90 others
#   round-robin to n2.n21, n2.n22, n2.n23 (30 each); all submitted at 0;
# - leaf queues are `order: fifo`: the next job of a leaf competes once the previous one
#   has started all its tasks (the paper: once it has finished);
# - equal weights unless said below.
"""

HEADER_52 = """\
# H-DRF (Bhattacharya et al., SoCC 2013) Sec. 5.2, Fig. 10 and 11: the Capacity
# Scheduler (C.S-Current = `capacity`), Pareto-Efficient-C.S (= `hdrf-naive`, with
# --headroom as in the paper) and H-DRF (`hdrf`).
# From the paper: 50 servers of <6 GB, 4 CPU, 1 GPU>; the Fig. 10 hierarchy
# n1{n1,1 n1,2} n2{n2,1 n2,2 n2,3} n3{n3,1}; a 100-job schedule with Table 1's job-size
# distribution; 1.5 GB or 1 GB and 1 CPU per task, n1,2's jobs 1 GPU and no CPU; the
# ten 500+ jobs on n1,1, n1,2, n3,1, the rest on n2's leaves; leaves run jobs in order.
"""

HEADER_52_1GB = """\
# VARIANT of hdrf_sec52_capacity.yaml (H-DRF, SoCC 2013, Sec. 5.2, Fig. 10 and 11), NOT
# the paper's workload: the same 100 jobs in the same order, but every task takes 1 GB
# instead of 1.5 GB or 1 GB. Then four CPU tasks leave 2 GB on a <6 GB, 4 CPU, 1 GPU>
# server, enough for its GPU task (the paper's footnote 7), so memory no longer decides
# how many GPUs n1,2 can use and the schedulers' own behaviour shows.
"""

HEADER_531 = """\
# H-DRF (Bhattacharya et al., SoCC 2013) Sec. 5.3.1, Fig. 12: H-DRF against the
# hierarchical slot scheduler with 4, 5 and 6 slots per server.
# From the paper: 50 servers configured as <6 GB, 4 CPU, 4 GPU>; the same schedule and
# hierarchy as Sec. 5.2 (the same jobs, in the same order, as hdrf_sec52_capacity.yaml);
# n3's weight 2.
# Thrashing: the paper's slot schedulers thrash when memory is over-committed; our model
# is the simulator's (docs/simulation.md, "the thrashing model"): a task launched on a
# node whose over-subscription max_r used_r / capacity_r is f > 1 runs f times longer.
"""


def main() -> None:
    jobs = draw_jobs()
    common = COMMON.format(seed=SEED)
    (HERE / "hdrf_sec52_capacity.yaml").write_text(
        render(jobs, header=HEADER_52 + common, node_capacity="{memory: 6, cpu: 4, gpu: 1}", n3_weight=1))
    (HERE / "hdrf_sec52_capacity_1gb.yaml").write_text(
        render(jobs, header=HEADER_52_1GB + common + "# - VARIANT: every task 1 GB (see the first lines).\n",
               node_capacity="{memory: 6, cpu: 4, gpu: 1}", n3_weight=1, memory_gb=1.0))
    (HERE / "hdrf_sec531_slots.yaml").write_text(
        render(jobs, header=HEADER_531 + common + "# - n3's weight is 2 (the paper).\n",
               node_capacity="{memory: 6, cpu: 4, gpu: 4}", n3_weight=2))


if __name__ == "__main__":
    main()
