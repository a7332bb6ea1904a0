"""Shared helpers for the part-2 reproductions (docs/reproductions/part2.md).

Used by tests/test_reproductions_part2.py and examples/repro/make_plots_part2.py, so the
numbers asserted, plotted and written down come from one place. Everything runs the
simulator through its library entry point (``fairshare.sim.simulate``, what
``fairshare simulate`` calls) and reads the recorded step functions (``SimResult.rows``):
no sampling, no wall clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fairshare.model import load_scenario
from fairshare.model.scenario import Scenario
from fairshare.sim import SimOptions, SimResult, simulate

HERE = Path(__file__).resolve().parent
BUNDLED_DEFAULT = HERE.parent.parent / "src" / "fairshare" / "data" / "default.yaml"


@lru_cache(maxsize=None)
def scenario(name: str) -> Scenario:
    """``examples/repro/NAME.yaml``, or the bundled DFF scenario for ``default``."""
    return load_scenario(str(BUNDLED_DEFAULT if name == "default" else HERE / f"{name}.yaml"))


@lru_cache(maxsize=None)
def run(name: str, policy: str, *, seed: int = 0, until: float | None = None, headroom: bool = False,
        slots: int | None = None) -> SimResult:
    """One simulation (cached: tests and plots share runs within a process)."""
    opts = {} if slots is None else {"slots": slots}
    return simulate(scenario(name), policy, SimOptions(seed=seed, until=until, headroom=headroom), **opts)


@dataclass(frozen=True)
class Step:
    """A right-continuous step function: value ``values[k]`` on ``[times[k], times[k+1])``,
    the last one up to ``end``."""

    times: tuple[float, ...]
    values: tuple[float, ...]
    end: float

    def segments(self, t0: float, t1: float):
        for k, (t, v) in enumerate(zip(self.times, self.values)):
            nxt = self.times[k + 1] if k + 1 < len(self.times) else self.end
            a, b = max(t, t0), min(nxt, t1)
            if b > a:
                yield a, b, v

    def mean(self, t0: float, t1: float) -> float:
        """Time average over [t0, t1] (0 where the function is not yet defined)."""
        return sum((b - a) * v for a, b, v in self.segments(t0, t1)) / (t1 - t0)

    def median(self, t0: float, t1: float) -> float:
        """Time-weighted median over [t0, t1]: the smallest value held at least half the time."""
        segs = sorted(((v, b - a) for a, b, v in self.segments(t0, t1)))
        half, acc = (t1 - t0) / 2, 0.0
        for v, dt in segs:
            acc += dt
            if acc >= half:
                return v
        return segs[-1][0] if segs else 0.0

    def at(self, t: float) -> float:
        value = 0.0
        for time, v in zip(self.times, self.values):
            if time > t:
                break
            value = v
        return value


def step(result: SimResult, kind: str, entity: str, field: str | int) -> Step:
    """The step function of one timeline column: ``running``, ``share`` (dominant share),
    or a resource index (allocated amount) of a job, queue or ``cluster``."""
    times, values = [], []
    for row in result.rows:
        if row[1] != kind or row[2] != entity:
            continue
        if field == "running":
            v = float(row[3])
        elif field == "share":
            v = row[4]
        else:
            v = row[5][field]
        times.append(row[0])
        values.append(v)
    return Step(tuple(times), tuple(values), result.end_time)


def queue_finish(result: SimResult, queue: str) -> float | None:
    """When the last job under ``queue`` (a dotted path prefix) finished; None if one did not."""
    ends = [o.finish for o in result.jobs.values() if o.queue == queue or o.queue.startswith(queue + ".")]
    return None if any(e is None for e in ends) else max(ends)


def completion(result: SimResult, job: str) -> float | None:
    o = result.jobs[job]
    return None if o.finish is None else o.finish - o.submit
