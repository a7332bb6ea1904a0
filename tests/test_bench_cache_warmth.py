"""``benchmarks/bench_cache_warmth.py`` times decisions without changing them: the run's
launches are the same with its probes (each sampled call made twice more) as without,
every repeat returned the job its call did, and bad flags are refused by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_cache_warmth.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300)


def measured(*args: str) -> dict:
    done = run(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("policy", ["hdrf", "dff"])
def test_the_probes_leave_the_decisions_as_they_were(policy):
    common = ("--policy", policy, "--sizes", "120", "--warmup", "100", "--events", "150")
    flow = measured(*common, "--every", "2")
    cold = measured(*common, "--every", "2", "--evict-mb", "1")
    plain = measured(*common, "--every", "0")
    assert flow["decisions"] == cold["decisions"] == plain["decisions"] > 0
    assert flow["launch_digest"] == cold["launch_digest"] == plain["launch_digest"]
    assert flow["mismatches"] == cold["mismatches"] == 0
    assert plain["pick"]["sampled"] == plain["pick_among"]["sampled"] == 0
    for probed in (flow, cold):
        # every second call of each kind sampled (half of them, rounded down)
        for kind in ("pick", "pick_among"):
            assert probed[kind]["sampled"] == probed["calls"][kind] // 2
    sampled = [kind for kind in ("pick", "pick_among") if flow[kind]["sampled"]]
    assert sampled
    for kind in sampled:
        # the run without eviction times the calls in flow and warm, not cold; the one
        # with eviction times cold repeats and no call in flow (its caches are emptied)
        assert flow[kind]["in_flow_median"] > 0 and flow[kind]["warm_median"] > 0
        assert "cold_median" not in flow[kind]
        assert cold[kind]["cold_median"] > 0 and "in_flow_median" not in cold[kind]


def test_bad_flags_are_refused_by_name():
    done = run("--sizes", "1k")
    assert done.returncode == 2
    assert "--sizes: comma-separated integers, not '1k'" in done.stderr
    done = run("--every", "-1")
    assert done.returncode == 2
    assert "--every: not negative, not -1" in done.stderr
    done = run("--sizes", "0")
    assert done.returncode == 2
    assert "--sizes: positive, not '0'" in done.stderr
