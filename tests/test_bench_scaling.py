"""``benchmarks/bench_scaling.py``'s steady-state record counts the full garbage
collections that land inside its timed window (``steady_full_collections``): a 10,000-job
state's full collection costs tenths of a second, enough to halve a short window's rate,
so an A/B reads each run with its count."""

from __future__ import annotations

import gc
import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scaling.py"


def bench_module():
    sys.path.insert(0, str(BENCH.parent))  # (it imports its sibling ``generate``)
    try:
        spec = importlib.util.spec_from_file_location("bench_scaling", BENCH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH.parent))
    return module


def test_each_full_collection_in_the_steady_state_is_counted_and_none_outside_it():
    bench = bench_module()

    class CollectingScheduler(bench.Scheduler):
        """Runs one full collection per completion (the steady state's step) and one per
        submission (before the timed window: not counted)."""

        def submit(self, job, now):
            gc.collect()
            return super().submit(job, now)

        def finish(self, task_id, now):
            gc.collect()
            return super().finish(task_id, now)

    bench.Scheduler = CollectingScheduler
    record = bench.measure("drf", 100, events=40, budget=30.0, fill_budget=30.0)
    assert record["steady_events"] == 40
    # the 40 forced ones, and any the collector started by itself in the window
    assert record["steady_full_collections"] >= 40
    # the callback is removed again: later collections are not counted
    assert all(getattr(cb, "__name__", "") != "count_full" for cb in gc.callbacks)


def test_a_window_without_full_collections_counts_none():
    bench = bench_module()
    enabled = gc.isenabled()
    gc.disable()
    try:
        record = bench.measure("drf", 100, events=40, budget=30.0, fill_budget=30.0)
    finally:
        if enabled:
            gc.enable()
    assert record["steady_events"] == 40
    assert record["steady_full_collections"] == 0


def test_warmup_completions_run_before_the_window_and_are_not_counted_in_it():
    bench = bench_module()
    cold = bench.measure("drf", 100, events=30, budget=30.0, fill_budget=30.0)
    warm = bench.measure("drf", 100, events=20, budget=30.0, fill_budget=30.0, warmup=10)
    assert (cold["warmup_events"], cold["steady_events"]) == (0, 30)
    assert (warm["warmup_events"], warm["steady_events"]) == (10, 20)
    # the same run either way (a deterministic workload): the warm window's launches are
    # the cold window's last 20 completions' launches, so at most the cold run's
    assert 0 < warm["steady_decisions"] <= cold["steady_decisions"]
