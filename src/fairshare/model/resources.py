"""Resource vectors.

A resource vector is a plain ``tuple[float, ...]`` aligned with a scenario's ordered
resource kinds (``Scenario.resources``). Tuples keep values immutable and hashable and
cost nothing to build; the helpers here are the only arithmetic the model needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

Vector = tuple[float, ...]


def zeros(m: int) -> Vector:
    return (0.0,) * m


def add(a: Sequence[float], b: Sequence[float]) -> Vector:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def sub(a: Sequence[float], b: Sequence[float]) -> Vector:
    return tuple(x - y for x, y in zip(a, b, strict=True))


def scale(a: Sequence[float], k: float) -> Vector:
    return tuple(x * k for x in a)


def vsum(vectors: Iterable[Sequence[float]], m: int) -> Vector:
    total = [0.0] * m
    for v in vectors:
        for r, x in enumerate(v):
            total[r] += x
    return tuple(total)


#: The fit test's tolerance, relative to the bound (absolute below 1): free amounts and
#: queue usages are running sums of many task starts and finishes, and their float noise
#: must not refuse a task that fits exactly. The one tolerance of every fit test (the
#: loader, the trace converters, placement, queue limits and guarantees, the whole-task
#: static greedy, the audits): they all go through :func:`fit_limit`.
FIT_TOLERANCE = 1e-9


def fit_limit(bound: float) -> float:
    """The largest amount that still fits in ``bound``, tolerance included:
    ``bound + FIT_TOLERANCE * max(1, |bound|)``. An amount ``x`` fits when
    ``not x > fit_limit(bound)``.

    ``max(1.0, abs(bound))`` is written out as a conditional (no builtin calls, about twice
    as fast) with the same value for every float: ``abs(bound)`` when it exceeds 1.0
    (``bound`` or ``-bound``, exactly), else 1.0, NaN included (``max`` keeps its first
    argument then). Every fit test is this one expression compared with ``not x > limit``,
    so they all agree on every float, amounts exactly at the tolerance and NaN included
    (tests/test_predicates.py).
    """
    return bound + FIT_TOLERANCE * (bound if bound > 1.0 else (-bound if bound < -1.0 else 1.0))


def fits(demand: Sequence[float], free: Sequence[float]) -> bool:
    """True when ``demand`` fits in ``free``: ``d_r <= f_r + FIT_TOLERANCE * max(1, |f_r|)``
    for every resource."""
    for d, f in zip(demand, free, strict=True):
        if d > fit_limit(f):
            return False
    return True


def fit_limits(free: Sequence[float]) -> tuple[float, ...]:
    """Per entry, the tolerance-widened free amount :func:`fits` compares a demand against.

    ``fits(demand, free)`` is exactly ``not any(map(operator.gt, demand, fit_limits(free)))``:
    the same float expression, evaluated once per free vector instead of once per test
    (placement tests a vector far more often than it changes, and the comparison loop then
    runs in C).
    """
    return tuple(map(fit_limit, free))


def within(usage: float, demand: float, bound: float) -> bool:
    """True when one more ``demand`` on top of ``usage`` stays within ``bound`` (a queue's
    limit or guarantee of one resource): ``usage + demand <= bound`` with the fit test's
    tolerance, i.e. ``usage + demand`` fits in ``bound`` (:func:`fit_limit`). Whether a
    bound of a resource the task does not use counts is the caller's rule."""
    return not usage + demand > fit_limit(bound)


def packing_score(demand: Sequence[float], free: Sequence[float], capacity: Sequence[float]) -> float:
    """How well a demand is aligned with a free vector, Tetris-style: the dot product of
    the demand and the free amounts, each normalised by the capacity,
    ``sum_r (d_r / C_r) (f_r / C_r)`` over resources with ``C_r > 0`` (larger packs
    better). Placement's ``packing`` strategy ranks nodes by it (``C`` the cluster's
    total capacity), and ``timefair`` ranks jobs by it (``f`` the cluster's free amounts,
    Tan et al. Sec. 5 leave the choice to "bin-packing algorithms")."""
    score = 0.0
    for d, f, c in zip(demand, free, capacity, strict=True):
        if c > 0:
            score += (d / c) * (f / c)
    return score


def dominant_share(amounts: Sequence[float], capacity: Sequence[float]) -> float:
    """max_r amounts_r / capacity_r over resources with positive capacity (DRF Sec. 4)."""
    best = 0.0
    for a, c in zip(amounts, capacity, strict=True):
        if c > 0 and a / c > best:
            best = a / c
    return best


def to_mapping(v: Sequence[float], names: Sequence[str]) -> dict[str, float]:
    return {name: float(x) for name, x in zip(names, v, strict=True)}


def from_mapping(d: Mapping[str, float], names: Sequence[str]) -> Vector:
    return tuple(float(d.get(name, 0.0)) for name in names)
