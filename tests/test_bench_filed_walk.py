"""``benchmarks/bench_filed_walk.py`` times the walk it means to: each case's pick is the
job the reference's sorted walk gives on the same queue (the lowest key when every job is
runnable, the ``--taken``-th lowest otherwise), and bad counts are refused by name."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fairshare.policies.machinery import compiled
from fairshare.policies.machinery.ties import DIGITS

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_filed_walk.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not compiled.available(), reason=compiled.describe())
@pytest.mark.parametrize("jobs, taken", [(30, 1), (30, 7), (156, 5)])
def test_each_case_picks_the_job_the_sorted_walk_gives(jobs, taken):
    done = run("--jobs", str(jobs), "--shapes", "4", "--walks", "3", "--taken", str(taken))
    assert done.returncode == 0, done.stderr
    picks = re.findall(r"pick (j\d+)", done.stdout)
    # the benchmark's queue, made again: its shares and running counts from the same seed
    rng = random.Random(0)
    share = [rng.random() for _ in range(jobs)]
    running = [rng.randint(0, 3) for _ in range(jobs)]
    by_key = sorted(range(jobs), key=lambda c: (round(share[c], DIGITS), running[c], c))
    assert picks == [f"j{by_key[0]}", f"j{by_key[taken - 1]}"]


def test_a_count_below_one_is_refused_by_name():
    done = run("--walks", "0")
    assert done.returncode == 2
    assert "--walks must be at least 1, not 0" in done.stderr
