"""Digests of what fairshare decides and writes, to compare two versions byte for byte.

For a refactoring that must not change a decision: every bundled scenario (``default``,
``examples/*.yaml``, ``examples/repro/*.yaml``) under every online policy that accepts it
is simulated with seed 1 (``--preempt`` where the scenario has a ``preemption:``
section), and the sha256 of its ``summary.json`` and ``timeline.csv`` is taken; the
decision benchmark's workload (``bench_decisions.py``: fill, then steady completions) is
run under each sorter and the sha256 of its launches ``(task id, job, node)`` taken.
Each run is its own process with ``PYTHONPATH=SRC``, so two source trees (a worktree of
the older commit, and this one) are compared in one command:

    git worktree add /tmp/base <commit>
    .venv/bin/python benchmarks/outputs_digest.py /tmp/base/src src

prints one line per case with both digests and ``same`` or ``DIFFERENT``, and exits 1 if
any differs. With one SRC it prints that tree's digests. ``--half-life S`` runs only the
launch cases, each with decayed usage of half-life S (``--policies`` to choose them): for a
change to the decayed sorters.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
POLICIES = ("drf", "hdrf", "hdrf-naive", "capacity", "dff", "fifo", "timefair", "slots", "asset", "cpu", "collapsed")
LAUNCH_POLICIES = ("drf", "hdrf", "dff", "capacity", "slots")

LAUNCHES = r'''
import hashlib, sys
sys.path.insert(0, {bench!r})
import bench_decisions as b
from generate import hierarchy_scenario
sc = hierarchy_scenario(jobs=300, levels=3, fanout=4, nodes=300, seed=0, shapes=None)
s = b.build(sc, {policy!r}, False, half_life=float({half_life!r}))
h = hashlib.sha256()
for la in s.schedule(0.0):
    h.update(repr((la.task_id, la.job, la.node)).encode())
import random
rng = random.Random(1)
for k in range(1500):
    task_id = rng.choice(sorted(s.tasks))
    s.finish(task_id, float(k + 1))
    for la in s.schedule(float(k + 1)):
        h.update(repr((la.task_id, la.job, la.node)).encode())
print(h.hexdigest())
'''


def scenarios() -> list[str]:
    return ["default", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.yaml")),
            *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "repro").glob("*.yaml"))]


def simulate_digest(src: str, scenario: str, policy: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(src).resolve()))
    with tempfile.TemporaryDirectory() as out:
        args = [sys.executable, "-m", "fairshare", "simulate", scenario, "--policy", policy, "--out", out,
                "--seed", "1"]
        path = ROOT / scenario
        if path.is_file() and "preemption:" in path.read_text():
            args.append("--preempt")
        run = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        if run.returncode:
            return f"refused ({run.returncode})"
        h = hashlib.sha256()
        for name in ("summary.json", "timeline.csv"):
            h.update((pathlib.Path(out) / name).read_bytes())
        return h.hexdigest()[:16]


def launch_digest(src: str, policy: str, half_life: float = 0.0) -> str:
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(src).resolve()))
    code = LAUNCHES.format(bench=str(HERE), policy=policy, half_life=str(half_life))
    run = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=900)
    return run.stdout.strip()[:16] if run.returncode == 0 else f"failed: {run.stderr.strip()[-200:]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="+", help="one or two src directories")
    ap.add_argument("--jobs", type=int, default=2, help="processes at once (default 2)")
    ap.add_argument("--half-life", type=float, default=0.0,
                    help="only the launch cases, with decayed usage of this half-life (seconds)")
    ap.add_argument("--policies", default=",".join(LAUNCH_POLICIES),
                    help="with --half-life: the policies of the launch cases (comma-separated)")
    args = ap.parse_args()
    if len(args.src) > 2:
        ap.error("give one or two src directories")
    if args.half_life:
        cases = [("launches", f"bench_decisions half-life {args.half_life:g}", p) for p in args.policies.split(",")]
    else:
        cases = [("simulate", sc, p) for sc in scenarios() for p in POLICIES] + \
                [("launches", "bench_decisions", p) for p in LAUNCH_POLICIES]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {(kind, sc, p, src): pool.submit(simulate_digest if kind == "simulate" else launch_digest,
                                                   *((src, sc, p) if kind == "simulate" else (src, p, args.half_life)))
                   for kind, sc, p in cases for src in args.src}
        differ = 0
        for kind, sc, p in cases:
            got = [futures[(kind, sc, p, src)].result() for src in args.src]
            verdict = "" if len(got) == 1 else ("same" if got[0] == got[1] else "DIFFERENT")
            differ += verdict == "DIFFERENT"
            print(f"{kind:9} {sc:45} {p:11} {'  '.join(got)}  {verdict}", flush=True)
    if len(args.src) == 2:
        print(f"{len(cases) - differ} of {len(cases)} cases the same")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
