"""One incremental view per recently seen saturated set, for the tree sorters.

H-DRF (Alg. 3's Y and blocked leaves) and DFF (Alg. 2 line 9's schedulable children)
both decide with state that depends on which resources are saturated, and on a full
cluster that set flips on almost every event (a finishing task frees some of a resource,
the next launch uses it up again). Rebuilding on every flip costs O(nodes x m), so each
sorter keeps one complete incremental *view* per recently seen set, in a
:class:`ViewCache`, and decides with the current one (``cache.current``).

Events are applied at once to the current view only (by the sorter); the others record
which leaves changed (:meth:`ViewCache.record`) and catch up in one batch when their set
comes back and the sorter reads them (:meth:`ViewCache.catch_up`): the sorter's
``replay(view, leaves)``, or a full ``rebuild(view)`` when more than a quarter of the
nodes changed. A sorter may also record into the current view and catch it up before it
decides (the H-DRF sorter does: on a full cluster the set changes before most decisions,
so an event applied at once would be applied alone, while in a batch its ancestors are
shared with the other leaves'). At most
:data:`MAX_VIEWS` views are kept, least recently used evicted, and a view unused for
:data:`VIEW_TTL_EVENTS` events is dropped (every event adds to every view's pending set),
unless the sorter asks for no time to live (``ttl=None``: the DFF sorter).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

MAX_VIEWS = 16
#: a view not used for this many events is dropped (every event updates every view)
VIEW_TTL_EVENTS = 512
#: events between two checks for views past their time to live
PRUNE_EVERY = 64


def counters(n: int) -> array:
    """``n`` counters at zero, for a view's per-node counts and versions (the H-DRF
    sorter's ``unblocked``, ``pool_version`` and ``updates``, the DFF sorter's ``unblocked``
    and ``version``): 64-bit C integers, read and written as Python ints by the reference
    and through their buffer by the compiled catch-ups (``_hdrf_kernel``, ``_dff_kernel``),
    without an int object per update (a version past 256 is a new object at each increment
    in a list). Their values are the ints a list would hold: they only count up from zero
    (or are sums of 0/1 flags), far below 2**63."""
    return array("q", bytes(8 * n))


class EveryChild(dict):
    """A queue's deferred pick marks (a tree sorter's ``deferred[queue]``: its children whose
    pick entries wait for renewal until a descent reads its heap) that stand for every
    child of ``queue``: the marks made so far, not added to any more. A sorter makes
    them (:func:`every_child`) once a queue's marks are as many as its children, and
    renews every child still there when the heap is read (the H-DRF sorter's
    ``_renew_deferred``)."""

    __slots__ = ("queue",)


def every_child(queue: int, marks: dict[int, None]) -> EveryChild:
    """``marks``, the deferred marks of ``queue``, as marks standing for every child."""
    every = EveryChild(marks)
    every.queue = queue
    return every


class SaturatedView:
    """A sorter's view for one saturated set: subclasses add the state that depends on it."""

    def __init__(self, saturated: frozenset[int]):
        self.saturated = saturated
        self.last_used = 0  # the cache's event count when it was last current
        self.pending: dict[int, None] = {}  # leaves changed while this view was not current


V = TypeVar("V", bound=SaturatedView)


class ViewCache(Generic[V]):
    """The views of one sorter, the current one first.

    ``make(saturated)`` creates an empty view, ``rebuild(view)`` recomputes it from scratch
    (and clears its ``pending``), ``replay(view, leaves)`` brings it up to date after the
    given leaves changed, and ``size()`` is the sorter's node count (the batch threshold).
    ``ttl``: the events a view may go unused before it is dropped (None: never, only the
    least recently used beyond :data:`MAX_VIEWS`).
    """

    def __init__(self, make: Callable[[frozenset[int]], V], rebuild: Callable[[V], None],
                 replay: Callable[[V, Iterable[int]], None], size: Callable[[], int],
                 ttl: int | None = VIEW_TTL_EVENTS):
        self.ttl = ttl
        self._make = make
        self._rebuild = rebuild
        self._replay = replay
        self._size = size
        self.views: list[V] = []
        #: the same views by saturated set (``select`` finds a kept view without comparing
        #: sets one by one; ``views`` keeps the recency order)
        self._by_set: dict[frozenset[int], V] = {}
        #: ``views[0]``, the view decisions use (an attribute, not a property: the sorters
        #: read it on every event)
        self.current: V | None = None
        self.events = 0

    def __iter__(self) -> Iterator[V]:
        return iter(self.views)

    def __len__(self) -> int:
        return len(self.views)

    def tick(self) -> None:
        """An event happened: count it, and now and then drop the views past their TTL."""
        self.events += 1
        if len(self.views) > 1 and self.events % PRUNE_EVERY == 0 and self.ttl is not None:
            horizon = self.events - self.ttl
            self.views[1:] = [v for v in self.views[1:] if v.last_used >= horizon]
            if len(self._by_set) != len(self.views):
                self._by_set = {v.saturated: v for v in self.views}

    def record(self, leaf: int) -> None:
        """Leaf ``leaf`` changed and the sorter updated the current view: the others note it."""
        for view in self.views[1:]:
            view.pending[leaf] = None

    def select(self, saturated: frozenset[int]) -> V:
        """Make the view of ``saturated`` current (built if none is kept). A kept view is
        not caught up here: the sorter catches it up when it first reads it (its
        ``pending`` set says whether it must), since a decision among one candidate reads
        no share, and the leaves a skipped catch-up would have replayed then join the
        view's next batch, their common ancestors recomputed once."""
        view = self._by_set.get(saturated)
        if view is not None:
            view.last_used = self.events
            if view is not self.current:
                self.views.remove(view)  # (by identity: a view defines no equality)
                self.views.insert(0, view)
                self.current = view
            return view
        view = self._make(saturated)
        view.last_used = self.events
        self._rebuild(view)
        self.views.insert(0, view)
        self._by_set[saturated] = view
        for evicted in self.views[MAX_VIEWS:]:
            del self._by_set[evicted.saturated]
        del self.views[MAX_VIEWS:]
        self.current = view
        return view

    def catch_up(self, view: V) -> None:
        """Apply the leaves ``view`` has recorded: one batch, or a rebuild when more than a
        quarter of the nodes changed (cheaper than many walks)."""
        if len(view.pending) * 4 > self._size():
            self._rebuild(view)
        else:
            self._replay(view, view.pending)
        view.pending.clear()

    def clear(self) -> None:
        """Drop every view (what they hold is stale for good)."""
        self.views = []
        self._by_set = {}
        self.current = None
