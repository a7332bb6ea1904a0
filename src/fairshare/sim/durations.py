"""Task durations, sampled at launch from each task class's ``Duration``.

All randomness of a simulation comes from one ``random.Random(seed)`` owned by the
simulator. From it, before anything runs, each (job, task class) gets its own stream
(a 64-bit seed drawn in scenario order). The n-th task of a class therefore gets the same
duration whatever the policy did before it: ``fairshare compare`` is a paired comparison
(common random numbers), and adding a job does not shift the other jobs' durations.

Kinds (``model.jobs.Duration``): ``fixed`` (``value``), ``exponential`` (``mean``),
``uniform`` (``low``, ``high``), ``lognormal`` (``mu``, ``sigma`` of the underlying normal),
``list`` (``values``, used in order and cycled, per class). A task that is run again
(its node failed) draws a new duration: the next one of its class's stream.
"""

from __future__ import annotations

import random

from fairshare.model.jobs import Duration, Job

#: a sampled duration is never shorter (1 ns): every task takes time, so an instant's
#: events are always processed in one round (a 0-s task would finish "during" the
#: scheduling round that started it)
MIN_DURATION_S = 1e-9


class DurationSampler:
    def __init__(self, jobs: tuple[Job, ...], rng: random.Random):
        self._streams: dict[tuple[str, int], random.Random] = {}
        self._cursor: dict[tuple[str, int], int] = {}
        for job in jobs:
            for j, _cls in enumerate(job.classes):
                key = (job.name, j)
                self._streams[key] = random.Random(rng.getrandbits(64))
                self._cursor[key] = 0

    def sample(self, job: Job, class_index: int) -> float:
        key = (job.name, class_index)
        d: Duration = job.classes[class_index].duration
        p = dict(d.params)
        if d.kind == "fixed":
            value = float(p["value"])
        elif d.kind == "list":
            values = p["values"]
            k = self._cursor[key]
            self._cursor[key] = k + 1
            value = float(values[k % len(values)])
        else:
            rng = self._streams[key]
            if d.kind == "exponential":
                value = rng.expovariate(1.0 / float(p["mean"]))
            elif d.kind == "uniform":
                value = rng.uniform(float(p["low"]), float(p["high"]))
            elif d.kind == "lognormal":
                value = rng.lognormvariate(float(p["mu"]), float(p["sigma"]))
            else:  # the loader admits no other kind
                raise ValueError(f"unknown duration kind {d.kind!r} in job {job.name!r}")
        return max(value, MIN_DURATION_S)

