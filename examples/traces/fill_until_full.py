"""Fill-until-full GPU allocation on the Alibaba GPU 2023 cluster (docs/traces.md#fill-until-full).

The experiment of the trace's paper (Weng et al., "Beware of Fragmentation", ATC'23, Sec. 6):
pods arrive one by one, in the pod list's row order, into the 1,523-node cluster and never
finish, until the first pod that cannot be placed; how much of the cluster's GPU is then
allocated, and how fragmented is what is left?

Each pod list is converted with ``fairshare trace convert alibaba-gpu2023 --duration 1e9``
(the timeless mode: data row i arrives at i seconds; a duration no run reaches, so nothing
completes), loaded, and driven through the engine's public loop: ``Scheduler.submit`` one
pod, ``Scheduler.schedule(t)`` one round, per arrival (what ``fairshare simulate`` does, see
``--check-simulator``, without the timeline the simulator also records). The launches say
which node and which GPU devices each pod got, which the fragmentation measure needs.

Reported per (pod list, placement, policy):

- the first failure: the arrival index of the first pod that is not placed on arrival, the
  GPU allocation ratio (allocated GPU / total GPU) just before it, and the fraction of the
  list's pods placed by then;
- the run to the end of the list (later pods that still fit are placed; with no completions
  a pod that waits never starts): pods placed, GPU allocation ratio at the end;
- GPU fragmentation at the first failure, in the paper's sense (Sec. 4.1): for a node n and
  a task shape m, F_n(m) is the free GPU on n that m cannot use: all of n's free GPU when m
  cannot be placed on n (CPU, memory, model or GPUs short), else the free fractions of
  partially used GPUs smaller than what m takes of one GPU (for a whole-GPU task, every
  partially used GPU's free part). The cluster's fragmentation is sum_n sum_m p_m F_n(m)
  with p_m the share of GPU-requesting pods of shape m in the list (CPU-only pods left out
  of the expectation); reported as a fraction of the total GPU, next to the free GPU.

Policies only reorder pods that wait. Arriving one per round with nothing completing, a pod
that fits is placed when it arrives whatever the policy; one that does not fit never will.
``--batch`` submits the whole list at time 0 instead (the scheduler sees every pod at once
and the policy chooses the order), where policies do differ.

Run from the repository root (needs ../shared/traces, or --traces):
``PYTHONPATH=src .venv/bin/python examples/traces/fill_until_full.py [--lists ...] [--batch]``
Writes a markdown table to stdout (and ``--json``) and a plot to ``docs/img/``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from fairshare.engine import STRATEGIES, Scheduler
from fairshare.model import parse_scenario
from fairshare.model.scenario import Scenario
from fairshare.policies import make_policy
from fairshare.traces import convert
from fairshare.traces.alibaba_gpu2023 import Options

REPO = Path(__file__).resolve().parents[2]
LISTS = ("default", "gpuspec33", "multigpu50")
POLICIES = ("fifo", "drf", "hdrf", "dff")
NEVER_S = "1e9"  # a duration no fill reaches (9,061 arrivals, one a second)
_EPS = 1e-9


@dataclass
class Fill:
    pod_list: str
    placement: str
    policy: str
    mode: str  # "online": one pod per round in row order; "batch": all pods at 0
    pods: int
    gpu_total: float
    first_failure: int | None  # arrival index (0-based) of the first pod not placed on arrival; None: all fit
    gpu_ratio_at_failure: float  # allocated / total GPU just before the first failure (or at the end)
    placed_at_failure: float  # fraction of the list's pods placed just before the first failure
    fragmentation_at_failure: float  # F / total GPU (definition above)
    free_gpu_at_failure: float  # unallocated / total GPU
    placed_end: float  # fraction of pods placed after the whole list
    gpu_ratio_end: float
    seconds: float
    curve: list[tuple[float, float]]  # (fraction of the list arrived, GPU allocation ratio), thinned


class ClusterState:
    """Per-node CPU and memory in use and per-GPU allocated fraction, from the launches."""

    def __init__(self, sc: Scenario):
        self.resources = sc.resources
        self.gpu = sc.resources.index("gpu")
        self.nodes = {n.name: n for n in sc.cluster.nodes}
        self.used = {n.name: [0.0] * len(sc.resources) for n in sc.cluster.nodes}
        self.gpus = {n.name: [0.0] * int(round(n.capacity[self.gpu])) for n in sc.cluster.nodes}
        self.models = {n.name: dict(n.attributes).get("gpu_model") for n in sc.cluster.nodes}
        self.gpu_total = sum(len(g) for g in self.gpus.values())
        self.gpu_used = 0.0

    def launch(self, node: str, demand, devices) -> None:
        used = self.used[node]
        for r, d in enumerate(demand):
            used[r] += d
        g = demand[self.gpu]
        self.gpu_used += g
        held = dict(devices).get("gpu", ())
        if g > 0 and not held:
            raise RuntimeError(f"a GPU pod on {node} without device numbers: is the cluster's devices: [gpu] lost?")
        for k in held:  # a sharing pod holds one device for a fraction, a whole-GPU pod k devices for all
            self.gpus[node][k] += g if g < 1 else 1.0

    def fragmentation(self, shapes: Counter) -> float:
        """sum_n sum_m p_m F_n(m) over the GPU shapes ``m = (demand, models)`` of the list."""
        total = sum(shapes.values())
        frag = 0.0
        for name, node in self.nodes.items():
            gpus = self.gpus[name]
            if not gpus:
                continue
            free = [1.0 - a for a in gpus]
            free_total = sum(f for f in free if f > _EPS)
            if free_total <= _EPS:
                continue
            cap, used = node.capacity, self.used[name]
            for (demand, models), count in shapes.items():
                g = demand[self.gpu]
                others_fit = all(d <= c - u + _EPS for r, (d, c, u) in enumerate(zip(demand, cap, used))
                                 if r != self.gpu)
                model_ok = not models or self.models[name] in models
                if g < 1:
                    fits = others_fit and model_ok and any(f >= g - _EPS for f in free)
                    unusable = sum(f for f in free if _EPS < f < g - _EPS) if fits else free_total
                else:
                    whole = sum(1 for f in free if f >= 1 - _EPS)
                    fits = others_fit and model_ok and whole >= g - _EPS
                    unusable = sum(f for f in free if _EPS < f < 1 - _EPS) if fits else free_total
                frag += count / total * unusable
        return frag


def load_list(traces: Path, name: str, batch: bool) -> Scenario:
    path = traces / "alibaba-gpu-2023" / f"openb_pod_list_{name}.csv"
    result = convert("alibaba-gpu2023", [path], options=Options(duration=NEVER_S, interarrival_s=0 if batch else 1))
    if result.bad.total:
        print(f"{name}: {result.bad.total} rows left out: {'; '.join(result.bad.lines())}", file=sys.stderr)
    return parse_scenario(result.scenario, path.name)


def gpu_shapes(sc: Scenario) -> Counter:
    gpu = sc.resources.index("gpu")
    shapes: Counter = Counter()
    for job in sc.jobs:
        for cls in job.classes:
            if cls.demand[gpu] > 0:
                models = frozenset(v for k, vals in cls.constraints for v in vals if k == "gpu_model")
                shapes[(cls.demand, models)] += cls.count or 1
    return shapes


def fill(sc: Scenario, pod_list: str, placement: str, policy: str, batch: bool, shapes: Counter) -> Fill:
    started = time.monotonic()
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy), placement=placement,
                      devices=sc.cluster.devices)
    state = ClusterState(sc)
    n = len(sc.jobs)
    placed: set[str] = set()
    first_failure = None
    at_failure = (0.0, 0.0, 0.0, 0.0)
    curve: list[tuple[float, float]] = []
    step = max(1, n // 400)

    def run_round(t: float) -> None:
        for launch in sched.schedule(t):
            state.launch(launch.node, launch.demand, launch.devices)
            placed.add(launch.job)

    if batch:
        for job in sc.jobs:
            sched.submit(job, 0.0)
        run_round(0.0)
        missing = [i for i, job in enumerate(sc.jobs) if job.name not in placed]
        first_failure = missing[0] if missing else None
    else:
        for i, job in enumerate(sc.jobs):
            before = (state.gpu_used / state.gpu_total, len(placed) / n)
            sched.submit(job, job.submit_s)
            run_round(job.submit_s)
            if first_failure is None and job.name not in placed:
                first_failure = i
                at_failure = (*before, state.fragmentation(shapes) / state.gpu_total,
                              1 - state.gpu_used / state.gpu_total)
            if i % step == 0 or i == n - 1:
                curve.append(((i + 1) / n, state.gpu_used / state.gpu_total))
    end = (state.gpu_used / state.gpu_total, len(placed) / n)
    if batch or first_failure is None:  # batch: one round, its end is the fill's state; all fit: the end
        at_failure = (end[0], end[1], state.fragmentation(shapes) / state.gpu_total,
                      1 - state.gpu_used / state.gpu_total)
    return Fill(pod_list, placement, policy, "batch" if batch else "online", n, state.gpu_total, first_failure,
                at_failure[0], at_failure[1], at_failure[2], at_failure[3], end[1], end[0],
                time.monotonic() - started, curve)


def check_simulator(sc: Scenario, result: Fill) -> str:
    """The same fill through ``fairshare.sim.simulate``: the pods placed must be the same."""
    from fairshare.sim import SimOptions, simulate

    started = time.monotonic()
    run = simulate(sc, result.policy, SimOptions(seed=0, placement=result.placement, until=len(sc.jobs)))
    placed = sum(1 for o in run.jobs.values() if o.start is not None)
    seconds = time.monotonic() - started
    if placed != round(result.placed_end * result.pods):
        raise SystemExit(f"simulate placed {placed} pods, the engine loop {result.placed_end * result.pods:.0f}")
    return (f"simulate agrees on {result.pod_list}/{result.placement}/{result.policy}: {placed} pods placed "
            f"({seconds:.1f} s with its timeline vs {result.seconds:.1f} s)")


def table(results: list[Fill]) -> str:
    lines = ["| pod list | mode | placement | policy | first failure (pod #) | GPU alloc. at failure | pods placed "
             "at failure | GPU frag. at failure | GPU free at failure | pods placed (end) | GPU alloc. (end) | s |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        ff = "none (all fit)" if r.first_failure is None else f"{r.first_failure:,}"
        lines.append(f"| {r.pod_list} | {r.mode} | {r.placement} | {r.policy} | {ff} | {r.gpu_ratio_at_failure:.1%} | "
                     f"{r.placed_at_failure:.1%} | {r.fragmentation_at_failure:.2%} | {r.free_gpu_at_failure:.2%} | "
                     f"{r.placed_end:.1%} | {r.gpu_ratio_end:.1%} | {r.seconds:.1f} |")
    return "\n".join(lines)


def plot(results: list[Fill], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    online = [r for r in results if r.mode == "online" and r.policy == results[0].policy]
    lists = sorted({r.pod_list for r in online}, key=LISTS.index)
    fig, axes = plt.subplots(1, len(lists), figsize=(4.2 * len(lists), 3.6), sharey=True, squeeze=False)
    for ax, name in zip(axes[0], lists):
        for r in (r for r in online if r.pod_list == name):
            xs, ys = zip(*r.curve)
            ax.plot([100 * x for x in xs], [100 * y for y in ys], label=r.placement)
            if r.first_failure is not None:
                x = 100 * (r.first_failure + 1) / r.pods
                ax.plot([x], [100 * r.gpu_ratio_at_failure], "o", color=ax.lines[-1].get_color())
        ax.set_title(f"openb_pod_list_{name}")
        ax.set_xlabel("pods arrived (% of the list)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("GPU allocated (% of 6,212 GPUs)" if online and online[0].gpu_total == 6212
                          else "GPU allocated (% of the cluster)")
    axes[0][0].legend(title="placement (dot: first failure)", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    print(f"wrote {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, default=REPO.parent / "shared" / "traces")
    ap.add_argument("--lists", nargs="+", choices=LISTS, default=list(LISTS))
    ap.add_argument("--placements", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    ap.add_argument("--policies", nargs="+", default=list(POLICIES))
    ap.add_argument("--batch", action="store_true", help="also run every pod submitted at 0 (the policy orders them)")
    ap.add_argument("--check-simulator", action="store_true",
                    help="re-run the first online configuration through fairshare.sim.simulate and compare")
    ap.add_argument("--plot", type=Path, default=REPO / "docs" / "img" / "traces_fill_until_full.svg")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if not (args.traces / "alibaba-gpu-2023").is_dir():
        print(f"no Alibaba GPU traces under {args.traces} (give --traces)", file=sys.stderr)
        return 2
    results: list[Fill] = []
    for name in args.lists:
        for batch in ([False, True] if args.batch else [False]):
            sc = load_list(args.traces, name, batch)
            shapes = gpu_shapes(sc)
            for placement in args.placements:
                for policy in args.policies:
                    r = fill(sc, name, placement, policy, batch, shapes)
                    print(f"{name} {r.mode} {placement} {policy}: first failure {r.first_failure}, "
                          f"GPU {r.gpu_ratio_at_failure:.3f}, {r.seconds:.1f} s", file=sys.stderr, flush=True)
                    results.append(r)
            if args.check_simulator and not batch:
                first = next(r for r in results if r.pod_list == name and r.mode == "online")
                print(check_simulator(sc, first), file=sys.stderr)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n", encoding="utf-8")
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
