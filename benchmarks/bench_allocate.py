"""Static allocation speed: ``fairshare allocate`` on a generated 1,000-job, 4-level,
4-resource hierarchy (issue: under 2 s on a 2-core machine), every static policy, and
the exact engine against the literal epsilon-step reference (H-DRF Alg. 1) on a smaller
tree, all measured in one run.

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_allocate.py [--jobs N]``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from generate import hierarchy_scenario  # noqa: E402

from fairshare import allocate  # noqa: E402
from fairshare.policies import make_policy  # noqa: E402
from fairshare.policies.machinery.filling import fill  # noqa: E402
from fairshare.policies.machinery.reference_fill import reference_fill  # noqa: E402


def best_of(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--levels", type=int, default=4)
    ap.add_argument("--policies", default="drf,asset,hdrf,collapsed,dff,capacity,fifo,ceei,slowdown")
    args = ap.parse_args()

    t0 = time.perf_counter()
    sc = hierarchy_scenario(jobs=args.jobs, levels=args.levels)
    print(f"scenario: {len(sc.jobs)} jobs, {len(sc.queues) - 1} queues in {args.levels} levels, "
          f"{sc.m} resources, {len(sc.cluster.nodes)} nodes (generated + validated in {time.perf_counter() - t0:.2f} s)")
    print(f"{'policy':<11} {'divisible s':>12} {'phases':>7} {'discrete s':>11}")
    for name in args.policies.split(","):
        pol = make_policy(name)
        try:
            div = best_of(lambda: allocate(sc, pol))
        except Exception as exc:  # report and go on: one policy must not hide the others
            print(f"{name:<11} error: {exc}")
            continue
        phases = fill(pol.build_tree(sc, False), pol.rule).phases if hasattr(pol, "build_tree") else "-"
        try:
            disc = f"{best_of(lambda: allocate(sc, pol, discrete=True), repeat=1):11.3f}"
        except Exception:
            disc = f"{'n/a':>11}"
        print(f"{name:<11} {div:12.3f} {phases!s:>7} {disc}")

    # exact engine vs the epsilon reference on a tree small enough for the reference
    small = hierarchy_scenario(jobs=40, levels=2, fanout=3, seed=1)
    pol = make_policy("hdrf")
    tree = pol.build_tree(small, False)
    exact_s = best_of(lambda: fill(tree, pol.rule))
    eps = 1e-3
    t0 = time.perf_counter()
    ref = reference_fill(tree, pol.rule, epsilon=eps)
    ref_s = time.perf_counter() - t0
    exact = fill(tree, pol.rule).tasks
    per_task = {j.name: max(d / c for d, c in zip(j.composite_demand(), small.capacity)) for j in small.jobs}
    worst = max(abs(exact[k] - ref[k]) * per_task[k] for k in exact)
    print(f"\nhdrf, 40 jobs / 2 levels: exact engine {exact_s * 1e3:.1f} ms, epsilon={eps:g} reference "
          f"{ref_s:.2f} s (ratio {ref_s / exact_s:.0f}x); largest dominant-share gap {worst:.2e}")


if __name__ == "__main__":
    main()
