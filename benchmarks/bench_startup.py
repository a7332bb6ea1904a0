"""Start-up time of the ``fairshare`` command: wall time, best of N, per command line.

The commands a user runs most and expects at once (issue 19, "Fast, light clients"):
``--version``, ``--help``, a subcommand's ``--help``, and the clients against an
unreachable server (``http://127.0.0.1:9``: nothing listens on the discard port, so
the connection is refused at once and the time is the start-up, not a network wait).
Each run is its own process (``python -m fairshare``), started the way a shell would.

Given several ``src`` directories (for example a worktree of another commit:
``git worktree add /tmp/base HEAD~1``), every round runs each command once per version,
alternately, so all versions see the same machine conditions.

Run: ``.venv/bin/python benchmarks/bench_startup.py [SRC ...] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
UNREACHABLE = "http://127.0.0.1:9"
JOBFILE = "jobs:\n  - name: j\n    tasks:\n      - demand: {cpu: 1}\n        count: 1\n        command: 'true'\n"


def command_lines(jobfile: str) -> dict[str, list[str]]:
    """Label -> the arguments after ``python -m fairshare``."""
    client = ["--server", UNREACHABLE, "--token", "x"]
    return {
        "--version": ["--version"],
        "--help": ["--help"],
        "jobs --help": ["jobs", "--help"],
        "simulate --help": ["simulate", "--help"],
        "jobs (unreachable)": ["jobs", *client],
        "queues (unreachable)": ["queues", *client],
        "cancel 1 (unreachable)": ["cancel", "1", *client],
        "submit (unreachable)": ["submit", jobfile, "--retries", "0", *client],
        "logs 1 (unreachable)": ["logs", "1", *client],
    }


def wall_time(argv: list[str], src: pathlib.Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("FAIRSHARE_SERVER", None)
    env.pop("FAIRSHARE_TOKEN", None)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fairshare", *argv], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="*", default=[str(HERE.parent / "src")],
                    help="src directories to compare (default: this checkout's)")
    ap.add_argument("--runs", type=int, default=5, help="runs per command and version; the best is shown")
    args = ap.parse_args()
    sources = [pathlib.Path(s).resolve() for s in args.src]
    with tempfile.TemporaryDirectory() as tmp:
        jobfile = pathlib.Path(tmp, "jobs.yaml")
        jobfile.write_text(JOBFILE, encoding="utf-8")
        lines = command_lines(str(jobfile))
        best = {(label, src): float("inf") for label in lines for src in sources}
        for _ in range(args.runs):
            for label, argv in lines.items():
                for src in sources:
                    best[label, src] = min(best[label, src], wall_time(argv, src))
    width = max(len(label) for label in lines)
    print(f"best of {args.runs}, wall seconds; python {sys.version.split()[0]}")
    for i, src in enumerate(sources):
        print(f"  [{i}] {src}")
    print(f"{'command':{width}}  " + "  ".join(f"{f'[{i}]':>7}" for i in range(len(sources))))
    for label in lines:
        print(f"{label:{width}}  " + "  ".join(f"{best[label, src]:7.3f}" for src in sources))


if __name__ == "__main__":
    main()
