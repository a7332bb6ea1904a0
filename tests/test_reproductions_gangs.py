"""docs/reproductions/gangs.md: the relations it claims, checked from the runs
``examples/repro/make_gangs.py`` makes (not from the numbers printed there): without a
reservation the gang waits beyond every bound measured; with one it waits at most
``reserve_after + D_max`` and starts at its shadow time; backfill never delays it and
never holds more idle capacity; the no-reservation run holds none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPRO = Path(__file__).resolve().parents[1] / "examples" / "repro"
sys.path.insert(0, str(REPRO))
import make_gangs as G  # noqa: E402  (examples/repro is not a package)


@pytest.fixture(scope="module")
def runs():
    return {(r.reserve_after, r.backfill): r for r in G.all_runs()}


@pytest.fixture(scope="module")
def longest():
    return G.longest_other_task(G.load_scenario(G.SCENARIO))


def test_without_a_reservation_the_gang_waits_beyond_every_bound(runs, longest):
    starved = runs[(None, True)]
    assert starved.reserved is None and "reserved_idle" not in starved.summary
    assert starved.gang_wait > max(G.RESERVE_AFTER) + longest


@pytest.mark.parametrize("after", G.RESERVE_AFTER)
@pytest.mark.parametrize("backfill", [True, False])
def test_with_a_reservation_the_wait_is_bounded(runs, longest, after, backfill):
    r = runs[(after, backfill)]
    assert r.gang_wait <= after + longest
    at, shadow = r.reserved
    submit = r.summary["jobs"][G.GANG]["submit"]
    assert submit + after <= at  # (reserved at the first round once overdue)
    assert r.summary["jobs"][G.GANG]["start"] == pytest.approx(shadow)  # (durations known: on time)


@pytest.mark.parametrize("after", G.RESERVE_AFTER)
def test_backfill_never_delays_the_gang_and_never_idles_more(runs, after):
    with_, without = runs[(after, True)], runs[(after, False)]
    assert with_.gang_wait == pytest.approx(without.gang_wait)
    assert with_.reserved_idle <= without.reserved_idle + 1e-6
    assert without.reserved_idle > 0


def test_backfill_saves_idle_capacity_somewhere(runs):
    # (the doc's claim: it cuts the idle reservation where short tasks fit the window)
    assert any(runs[(a, True)].reserved_idle < runs[(a, False)].reserved_idle for a in G.RESERVE_AFTER)


def test_the_reservation_costs_under_one_percent_and_beats_starving_on_utilization(runs):
    starved = runs[(None, True)]
    cpus = G.load_scenario(G.SCENARIO).capacity[0]
    for (after, _b), r in runs.items():
        if after is None:
            continue
        capacity_s = cpus * r.summary["makespan"]
        assert r.reserved_idle < 0.01 * capacity_s
        assert r.utilization > starved.utilization
