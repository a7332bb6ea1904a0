"""``ViewCache``: which view ``select`` returns, which it builds, and the recency order
(``policies/machinery/views.py``), against a plain least-recently-used list.

The cache finds a kept view by its saturated set through a dict (``_by_set``); the
model below finds it by comparing sets one by one, as the cache did before. Both must
agree on every step of a random sequence of selects, events and clears: the view
returned, whether it was built, the kept views in recency order, and the dict holding
exactly the kept views."""

from __future__ import annotations

import random

import pytest

from fairshare.policies.machinery.views import MAX_VIEWS, PRUNE_EVERY, SaturatedView, ViewCache


class _Model:
    """The least-recently-used list, searched set by set."""

    def __init__(self, ttl):
        self.ttl = ttl
        self.views: list[SaturatedView] = []
        self.events = 0

    def tick(self):
        self.events += 1
        if len(self.views) > 1 and self.events % PRUNE_EVERY == 0 and self.ttl is not None:
            horizon = self.events - self.ttl
            self.views[1:] = [v for v in self.views[1:] if v.last_used >= horizon]

    def find(self, saturated):
        for view in self.views:
            if view.saturated == saturated:
                return view
        return None


def _sets(m: int) -> list[frozenset[int]]:
    return [frozenset(r for r in range(m) if mask >> r & 1) for mask in range(1 << m)]


@pytest.mark.parametrize("ttl", [None, 40])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_select_agrees_with_a_least_recently_used_list(ttl, seed):
    rng = random.Random(seed)
    built: list[SaturatedView] = []

    def rebuild(view):
        built.append(view)

    # 5 resources: 32 sets, twice MAX_VIEWS, so views are evicted as well as found
    sets = _sets(5)
    assert len(sets) > MAX_VIEWS
    cache = ViewCache(SaturatedView, rebuild, lambda view, leaves: None, lambda: 100, ttl=ttl)
    model = _Model(ttl)
    for step in range(3000):
        roll = rng.random()
        if roll < 0.55:
            cache.tick()
            model.tick()
            continue
        if roll < 0.56:
            cache.clear()
            model.views = []
            continue
        # a few sets come back often, as on a full cluster; the others now and then
        saturated = rng.choice(sets[:6]) if rng.random() < 0.7 else rng.choice(sets)
        kept = model.find(saturated)
        before = len(built)
        view = cache.select(saturated)
        if kept is None:
            assert len(built) == before + 1 and built[-1] is view, step
            model.views.insert(0, view)
            del model.views[MAX_VIEWS:]
        else:
            assert view is kept and len(built) == before, step
            model.views.remove(kept)
            model.views.insert(0, kept)
        assert view.saturated == saturated
        assert view.last_used == cache.events == model.events
        assert cache.current is view
        # the model's views carry the cache's own last_used marks, so the TTL prune
        # of either drops the same ones
        assert [v.saturated for v in cache.views] == [v.saturated for v in model.views], step
        assert all(a is b for a, b in zip(cache.views, model.views))
        assert cache._by_set == {v.saturated: v for v in cache.views}, step


def test_a_pruned_or_evicted_view_is_built_again_when_its_set_returns():
    built = []
    cache = ViewCache(SaturatedView, built.append, lambda view, leaves: None, lambda: 100, ttl=PRUNE_EVERY)
    sets = _sets(5)
    first = cache.select(sets[1])
    cache.select(sets[2])  # sets[1]'s view is no longer current
    for _ in range(3 * PRUNE_EVERY):
        cache.tick()  # ... and unused past its time to live: pruned
    assert [v.saturated for v in cache.views] == [sets[2]]
    again = cache.select(sets[1])
    assert again is not first and built[-1] is again
    # fill past MAX_VIEWS: the least recently used (sets[2]'s) is evicted
    for s in sets[3:3 + MAX_VIEWS - 1]:
        cache.select(s)
    assert len(cache.views) == MAX_VIEWS and sets[2] not in cache._by_set
    n = len(built)
    assert cache.select(sets[2]) is built[n] and len(built) == n + 1
