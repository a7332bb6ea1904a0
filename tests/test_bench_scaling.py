"""``benchmarks/bench_scaling.py``'s steady-state record counts the full garbage
collections that land inside its timed window (``steady_full_collections``): a 10,000-job
state's full collection costs tenths of a second, enough to halve a short window's rate,
so an A/B reads each run with its count and their CPU seconds
(``steady_full_collection_s``); ``--collect-first`` runs the set-up's own full collection
before the window."""

from __future__ import annotations

import gc
import importlib.util
import math
import sys
from pathlib import Path

import pytest

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


def test_the_full_collections_cpu_seconds_are_summed_inside_the_window():
    bench = bench_module()

    class CollectingScheduler(bench.Scheduler):
        """One full collection per completion."""

        def finish(self, task_id, now):
            gc.collect()
            return super().finish(task_id, now)

    def spin(phase, info):
        """Makes each full collection last 5 ms more CPU: it runs at the collection's end,
        before the bench's own callback (appended later) reads the clock."""
        if phase == "stop" and info["generation"] == 2:
            until = bench.CLOCK() + 0.005
            while bench.CLOCK() < until:
                pass

    bench.Scheduler = CollectingScheduler
    gc.callbacks.append(spin)
    try:
        record = bench.measure("drf", 100, events=20, budget=30.0, fill_budget=30.0)
    finally:
        gc.callbacks.remove(spin)
    collections = record["steady_full_collections"]
    assert collections >= 20
    # each counted collection lasted >= 5 ms: 20 of them >= 0.1 s, all inside the window
    assert 0.005 * collections <= record["steady_full_collection_s"] <= record["steady_s"]


def test_collect_first_runs_one_full_collection_before_the_window_and_none_inside_it_by_itself():
    bench = bench_module()
    seen = []

    def note(phase, info):
        if phase == "start" and info["generation"] == 2:
            seen.append(len(seen))

    enabled = gc.isenabled()
    gc.callbacks.append(note)
    gc.disable()  # (only the bench's own collection can run)
    try:
        record = bench.measure("drf", 100, events=20, budget=30.0, fill_budget=30.0, collect_first=True)
    finally:
        gc.callbacks.remove(note)
        if enabled:
            gc.enable()
    assert record["collected_first"] is True
    assert len(seen) == 1  # the one before the window
    assert record["steady_full_collections"] == 0 and record["steady_full_collection_s"] == 0.0


def test_windows_are_timed_back_to_back_and_the_first_is_the_steady_record():
    # ``--windows 3``: three windows of ``events`` completions one after the other, each
    # with its own counts; the steady_* fields are the first window's, as with one window
    bench = bench_module()
    one = bench.measure("drf", 100, events=15, budget=30.0, fill_budget=30.0, warmup=5)
    three = bench.measure("drf", 100, events=15, budget=30.0, fill_budget=30.0, warmup=5, windows=3)
    assert "windows" not in one
    windows = three["windows"]
    assert [w["events"] for w in windows] == [15, 15, 15]
    assert (three["steady_events"], three["steady_decisions"], three["steady_s"]) == \
        (windows[0]["events"], windows[0]["decisions"], windows[0]["s"])
    # a deterministic workload: the first window is the one-window run's
    assert windows[0]["decisions"] == one["steady_decisions"]
    assert all(w["decisions"] > 0 and w["s"] > 0 for w in windows)


def test_windows_below_one_are_refused_with_the_flags_name(capsys):
    bench = bench_module()
    try:
        bench.main(["--policy", "drf", "--size", "100", "--windows", "0"])
    except SystemExit as stop:
        assert stop.code == 2
    else:
        raise AssertionError("--windows 0 was accepted")
    assert "--windows must be at least 1 (got 0)" in capsys.readouterr().err


def test_paired_sizes_take_windows_in_turn_and_give_a_k_per_round():
    # ``--paired 50,100``: both states in one process, a window of each per round (after
    # ``rewarm`` untimed completions), k per round from that round's two rates
    bench = bench_module()
    record = bench.measure_paired("drf", (100, 50), events=10, budget=30.0, fill_budget=30.0, warmup=5, windows=3,
                                  rewarm=4)
    assert record["sizes"] == [50, 100] and record["fill_complete"]
    windows = record["windows"]
    assert [len(windows["50"]), len(windows["100"])] == [3, 3]
    assert all(w["events"] == 10 and w["decisions"] > 0 for size in ("50", "100") for w in windows[size])
    for r, k in enumerate(record["k_per_round"]):
        small, large = windows["50"][r], windows["100"][r]
        # k = log10(rate at 50 / rate at 100) / log10(100 / 50)
        expected = math.log10((small["decisions"] / small["s"]) / (large["decisions"] / large["s"])) / math.log10(2)
        assert k == pytest.approx(expected, abs=1e-3)
    assert record["k_median"] == sorted(record["k_per_round"])[1]


@pytest.mark.parametrize("argv, message", [
    (["--policy", "drf", "--paired", "100"], "--paired takes two different sizes, SMALL,LARGE (got '100')"),
    (["--policy", "drf", "--paired", "100,100"], "--paired takes two different sizes"),
    (["--policy", "drf", "--paired", "a,b"], "--paired takes two different sizes"),
    (["--paired", "50,100"], "--paired needs --policy"),
    (["--policy", "drf", "--paired", "50,100", "--rewarm", "-1"], "--rewarm must be at least 0 (got -1)"),
])
def test_paired_flags_are_checked_with_their_names(capsys, argv, message):
    bench = bench_module()
    with pytest.raises(SystemExit) as stop:
        bench.main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_paired_windows_without_decisions_give_no_k():
    # a fill stopped by its budget (no steady state to time): no window has a decision,
    # so no round gives a k and the median is NaN, not a division by zero
    bench = bench_module()
    record = bench.measure_paired("drf", (50, 100), events=10, budget=30.0, fill_budget=0.0, warmup=0, windows=2,
                                  rewarm=0)
    assert record["fill_complete"] is False
    assert all(w["decisions"] == 0 for size in ("50", "100") for w in record["windows"][size])
    assert len(record["k_per_round"]) == 2 and all(math.isnan(k) for k in record["k_per_round"])
    assert math.isnan(record["k_median"])
