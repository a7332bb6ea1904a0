"""Resource vectors.

A resource vector is a plain ``tuple[float, ...]`` aligned with a scenario's ordered
resource kinds (``Scenario.resources``). Tuples keep values immutable and hashable and
cost nothing to build; the helpers here are the only arithmetic the model needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


#: the fit test's tolerance, relative to the free amount (absolute below 1)
FIT_TOL = 1e-9


def fits(demand: Sequence[float], free: Sequence[float], tol: float = FIT_TOL) -> bool:
    """True when ``demand`` fits in ``free`` (a relative tolerance absorbs float noise)."""
    return all(d <= f + tol * max(1.0, abs(f)) for d, f in zip(demand, free, strict=True))


def dominant_share(amounts: Sequence[float], capacity: Sequence[float]) -> float:
    """max_r amounts_r / capacity_r over resources with positive capacity (DRF Sec. 4)."""
    best = 0.0
    for a, c in zip(amounts, capacity, strict=True):
        if c > 0 and a / c > best:
            best = a / c
    return best


def to_mapping(v: Sequence[float], names: Sequence[str]) -> dict[str, float]:
    return {name: float(x) for name, x in zip(names, v, strict=True)}
