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


#: The fit test's tolerance, relative to the free amount (absolute below 1): free amounts
#: are running sums of many task starts and finishes, and their float noise must not
#: refuse a task that fits exactly. The one tolerance every fit test uses (placement, the
#: whole-task static greedy, the audits).
FIT_TOL = 1e-9


def fits(demand: Sequence[float], free: Sequence[float]) -> bool:
    """True when ``demand`` fits in ``free``: ``d_r <= f_r + FIT_TOL * max(1, |f_r|)`` for
    every resource (written ``not d > limit`` so it agrees with :func:`fit_limits` on
    every float, NaN included)."""
    for d, f in zip(demand, free, strict=True):
        if d > f + FIT_TOL * max(1.0, abs(f)):
            return False
    return True


def fit_limits(free: Sequence[float]) -> tuple[float, ...]:
    """Per entry, the tolerance-widened free amount :func:`fits` compares a demand against.

    ``fits(demand, free)`` is exactly ``not any(map(operator.gt, demand, fit_limits(free)))``:
    the same float expression, evaluated once per free vector instead of once per test
    (placement tests a vector far more often than it changes, and the comparison loop then
    runs in C). ``max(1.0, abs(f))`` is written out as a conditional (no builtin calls,
    about twice as fast) with the same value for every float: ``abs(f)`` when it exceeds
    1.0 (``f`` or ``-f``, exactly), else 1.0, NaN included (``max`` keeps its first
    argument then).
    """
    return tuple([f + FIT_TOL * (f if f > 1.0 else (-f if f < -1.0 else 1.0)) for f in free])


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
