"""One descent of a tree sorter while the engine restricts the shapes (``descend_tree``
with a ``ShapeIndex``), on a tree shaped like the Google 2011 trace's: root -> three
priority bands of 354, 251 and 91 user queues -> 20 jobs each, every user's jobs of one or
two of 64 shapes, three shapes live, one job in 1,000 runnable (``--runnable``). Most user queues then have
no job of a live shape: the heap walk (before issue 24's round 8) popped and pushed back
each of them; the walk by live children (``descent.first_runnable_child``) does not
enter them. Prints the CPU time per descent and the pick.

The script calls ``descend_tree`` as the sorters do (the compiled descent and walks where built,
``FAIRSHARE_PURE_PYTHON=1`` for the reference) and runs on a tree from before the round
too (no ``first_child`` there), so both trees can be timed by ``PYTHONPATH``:

    PYTHONPATH=src .venv/bin/python benchmarks/bench_descent.py [--descents 1000] [--runnable 0.001]
"""

from __future__ import annotations

import argparse
import inspect
import random
import time

from fairshare.policies.machinery import compiled
from fairshare.policies.machinery.descent import ShapeIndex, descend_tree
from fairshare.policies.machinery.ties import DIGITS

BANDS = (354, 251, 91)
JOBS_PER_USER = 20
SHAPES = 64
LIVE = (3, 17, 40)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--descents", type=int, default=1000, help="descents timed (default 1000)")
    ap.add_argument("--runnable", type=float, default=0.001, help="the share of jobs runnable (default 0.001)")
    args = ap.parse_args()
    rng = random.Random(1)
    parent, is_job = [-1], [False]
    for users in BANDS:
        parent.append(0)
        is_job.append(False)
        band = len(parent) - 1
        for _ in range(users):
            parent.append(band)
            is_job.append(False)
            user = len(parent) - 1
            parent.extend([user] * JOBS_PER_USER)
            is_job.extend([True] * JOBS_PER_USER)
    n = len(parent)
    kids: list[list[int]] = [[] for _ in range(n)]
    for v in range(1, n):
        kids[parent[v]].append(v)
    key = [f"v{v}" for v in range(n)]
    live = [0] * n
    for v in range(n):
        a = v if is_job[v] else -1
        while a >= 0:
            live[a] += 1
            a = parent[a]
    index = ShapeIndex()  # (bare, over this tree: the sorters add it to their node table)
    index.parent, index.index = parent, {name: v for v, name in enumerate(key)}
    index._init_shapes()
    for p, job in zip(parent, is_job):
        index._grow_shapes(p, job)
    user_shapes = {u: (rng.randrange(SHAPES), rng.randrange(SHAPES)) for u in range(n) if not is_job[u]}
    for v in range(n):
        if is_job[v]:
            index.file_shape(key[v], rng.choice(user_shapes[parent[v]]))
    share = [rng.random() for _ in range(n)]
    running = [rng.randint(0, 3) for _ in range(n)]
    position = [kids[parent[v]].index(v) if v else 0 for v in range(n)]
    heaps = [sorted((round(share[c], DIGITS), running[c], position[c], 0, c) for c in kids[v]) for v in range(n)]
    lucky = {key[v] for v in range(n) if is_job[v] and rng.random() < args.runnable}
    walks = {"first_runnable": compiled.tree_first_runnable(), "tables": (share, running, position)}
    if "first_child" in inspect.signature(descend_tree).parameters:
        walks["first_child"] = compiled.tree_first_child()
    # the compiled descent where built (issue 24, round 9; a tree from before it: the reference)
    descend = compiled.tree_descend() if hasattr(compiled, "tree_descend") else descend_tree
    picks = set()
    version = [0] * n  # (read only: no pick entry is renewed without ``deferred``; made once, not timed)
    start = time.process_time()
    for _ in range(args.descents):
        index.only_shapes(LIVE)
        picks.add(descend(0, heaps, is_job=is_job, key=key, live=live, fifo_jobs=lambda v: None,
                          version=version, present=key, runnable=lucky.__contains__, shapes=index,
                          node_key=lambda v: (round(share[v], DIGITS), running[v], position[v]), **walks))
    spent = time.process_time() - start
    print(f"{compiled.describe()}: {1e6 * spent / args.descents:.1f} us CPU per descent "
          f"({args.descents} descents, {n:,} nodes), picks {sorted(map(str, picks))}")


if __name__ == "__main__":
    main()
