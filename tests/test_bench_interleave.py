"""``benchmarks/bench_interleave.py`` compares two checkouts window by window: the same tree
against itself makes the same launches in every window (so a digest that differs is the
change's, not the harness's), every window is reported, and bad flags are refused by name."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_interleave.py"


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), "--quiet", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_a_tree_against_itself_decides_the_same_in_every_window():
    done = run("--before", str(ROOT), "--after", str(ROOT), "--policy", "hdrf", "--sizes", "60,150",
               "--warmup", "50", "--window", "60", "--rounds", "3", "--rewarm", "10")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["digests_differ"] is None
    for size in ("60", "150"):
        before, after = result["windows"]["before"][size], result["windows"]["after"][size]
        assert len(before) == len(after) == 3  # a window per round and tree
        assert [w["digest"] for w in before] == [w["digest"] for w in after]
        assert [w["decisions"] for w in before] == [w["decisions"] for w in after]
        assert all(w["events"] == 60 and w["decisions"] > 0 for w in before)
        # consecutive windows are different launches (the state moves on between them)
        assert len({w["digest"] for w in before}) == 3
        assert result[f"after_over_before_{size}"]["n"] == 3
    assert result["before_k"]["n"] == result["after_k"]["n"] == 3
    assert all(worker["fill_complete"] for worker in result["workers"].values())


def test_a_changed_launch_order_is_reported_with_its_window(tmp_path):
    # a copy of the tree whose scheduler returns each call's launches last first: the same
    # state, other digests (a steady-state completion frees room for several launches), so
    # the first window of the first round already differs; the copy has no kernels built
    # (its sorters run pure Python), and that alone changes no decision
    copy = tmp_path / "changed"
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"))
    engine = copy / "src" / "fairshare" / "engine" / "__init__.py"
    engine.write_text(engine.read_text() + REVERSED)
    done = run("--before", str(ROOT), "--after", str(copy), "--policy", "hdrf", "--sizes", "60",
               "--warmup", "20", "--window", "40", "--rounds", "2", "--rewarm", "0")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["digests_differ"] == {"round": 0, "size": 60}
    first = result["windows"]["before"]["60"][0], result["windows"]["after"]["60"][0]
    assert first[0]["decisions"] == first[1]["decisions"] and first[0]["digest"] != first[1]["digest"]


REVERSED = """

_schedule = Scheduler.schedule


def _last_first(self, now):
    return list(reversed(_schedule(self, now)))


Scheduler.schedule = _last_first
"""


def test_bad_flags_are_refused_by_name(tmp_path):
    done = run("--before", str(tmp_path), "--after", str(ROOT))
    assert done.returncode == 2
    assert f"--before: {str(tmp_path)!r} is not a fairshare checkout" in done.stderr
    done = run("--after", str(ROOT))
    assert done.returncode == 2 and "--before: a checkout is required" in done.stderr
    done = run("--before", str(ROOT), "--after", str(ROOT), "--sizes", "10,10")
    assert done.returncode == 2 and "--sizes: distinct positive integers, not '10,10'" in done.stderr
    done = run("--before", str(ROOT), "--after", str(ROOT), "--window", "0")
    assert done.returncode == 2 and "--window: at least 1, not 0" in done.stderr
    done = run("--before", str(ROOT), "--after", str(ROOT), "--budget", "0")
    assert done.returncode == 2 and "--budget: positive, not 0.0" in done.stderr


def test_a_worker_that_cannot_start_is_named():
    done = run("--before", str(ROOT), "--after", str(ROOT), "--policy", "no-such-policy", "--sizes", "20",
               "--rounds", "1")
    assert done.returncode == 2
    assert "bench_interleave: the before worker at 20 stopped" in done.stderr
