"""One walk of a jobs-only queue's jobs of the live shapes (``first_runnable_filed``, the
compiled walk with the key tables, as the tree sorters call it while the engine restricts
the shapes): ``--jobs`` jobs spread over ``--shapes`` shapes, every shape live, random
shares. Times it when every job is runnable (the walk takes its first pop) and when only
the jobs from the ``--taken``-th lowest key on are (it asks about the ones before first).
Prints the wall time per walk and the pick of each case.

Runs on any tree with the compiled walk (issue 24, round 9 and later), so two trees can be
timed by ``PYTHONPATH``:

    PYTHONPATH=src .venv/bin/python benchmarks/bench_filed_walk.py [--jobs 156] [--shapes 10]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from array import array

from fairshare.policies.machinery import compiled
from fairshare.policies.machinery.ties import DIGITS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=156, help="jobs in the queue (default 156: a leaf queue at 10k)")
    ap.add_argument("--shapes", type=int, default=10, help="shapes they are filed under (default 10)")
    ap.add_argument("--walks", type=int, default=20000, help="walks timed per case (default 20000)")
    ap.add_argument("--taken", type=int, default=5, help="the second case's first runnable job by key (default 5)")
    args = ap.parse_args()
    for name in ("jobs", "shapes", "walks", "taken"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    if not compiled.available():
        sys.exit(f"bench_filed_walk: the compiled walk is not built ({compiled.describe()})")
    walk = compiled._hdrf_kernel.first_runnable_filed
    rng = random.Random(0)
    n = args.jobs
    share = array("d", [rng.random() for _ in range(n)])
    running = [rng.randint(0, 3) for _ in range(n)]
    position = list(range(n))
    shape_of = [rng.randrange(args.shapes) for _ in range(n)]
    filed: dict[int, dict[int, None]] = {}
    for c in range(n):
        filed.setdefault(shape_of[c], {})[c] = None
    live, shape_mask, key = [1] * n, [1 << s for s in shape_of], [f"j{c}" for c in range(n)]
    bits = (1 << args.shapes) - 1
    by_key = sorted(range(n), key=lambda c: (round(share[c], DIGITS), running[c], position[c]))
    later = {key[c] for c in by_key[args.taken - 1:]}
    for label, runnable in (("every job runnable", lambda name: True),
                            (f"runnable from the {args.taken}th by key", later.__contains__)):
        alive = [bits]
        start = time.perf_counter()
        for _ in range(args.walks):
            got = walk(filed, bits, live=live, excluded=None, shape_mask=shape_mask, alive=alive, key=key,
                       runnable=runnable, node_key=None, tables=(share, running, position))
        spent = time.perf_counter() - start
        print(f"{label}: {1e6 * spent / args.walks:.2f} us a walk ({n} jobs, {args.shapes} shapes, "
              f"{args.walks} walks), pick {got}")


if __name__ == "__main__":
    main()
