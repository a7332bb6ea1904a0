"""Two versions of fairshare on the decision benchmark, alternately, in one run.

Each version is a ``src`` directory (for example a second worktree of another commit:
``git worktree add /tmp/base HEAD~1``). Every round runs the fill and steady phases of
``bench_decisions.py`` once per version, each in its own process (CPU time of that
process), so both see the same machine conditions.

Run: ``.venv/bin/python benchmarks/ab_decisions.py /tmp/base/src src [--policy hdrf]``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent

CHILD = r'''
import sys, time
sys.path.insert(0, {bench!r})
import bench_decisions as b
from generate import hierarchy_scenario
sc = hierarchy_scenario(jobs={jobs}, levels=3, fanout=4, nodes={nodes}, seed=0, shapes={shapes})
s = b.build(sc, {policy!r}, False, **({{"half_life": {half_life!r}}} if {half_life!r} else {{}}))
t = time.process_time(); n, _ = b.fill(s, None); f = time.process_time() - t
t = time.process_time(); d, _ = b.steady(s, {events}, 1); st = time.process_time() - t
print(f"{{n / f:9.0f}} {{d / st:9.0f}} {{n}} {{d}}")
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs=2, help="two src directories (A and B)")
    ap.add_argument("--policy", default="hdrf")
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--shapes", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--half-life", type=float, default=0.0,
                    help="decayed usage with this half-life in seconds (bench_decisions.py --half-life)")
    args = ap.parse_args()
    code = CHILD.format(bench=str(HERE), jobs=args.jobs, nodes=args.nodes, shapes=args.shapes,
                        policy=args.policy, events=args.events, half_life=args.half_life)
    print(f"{args.policy}: {'':6} fill/s  steady/s  decisions (fill, steady)")
    for _ in range(args.rounds):
        for label, src in zip("AB", args.src):
            env = dict(os.environ, PYTHONPATH=str(pathlib.Path(src).resolve()))
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"{label} ({src}) failed:\n{out.stderr[-2000:]}")
            print(f"  {label} {out.stdout.strip()}")


if __name__ == "__main__":
    main()
