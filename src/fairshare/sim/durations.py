"""Task durations, sampled at launch from each task class's ``Duration``.

All randomness of a simulation comes from one ``random.Random(seed)`` owned by the
simulator. From it each (job, task class) gets its own stream: a 64-bit seed drawn when
the job is added to the sampler (:meth:`DurationSampler.add`), class by class. A run
that knows its jobs up front adds them all before anything runs, in scenario order; a
streaming run adds each job at its arrival. The two draw the same seeds whenever the
scenario lists its jobs in submit order (converted traces and the full-size generator
do): the n-th job added gets the n-th seeds either way. The n-th task of a class
therefore gets the same duration whatever the policy did before it: ``fairshare compare``
is a paired comparison (common random numbers), and adding a job does not shift the
other jobs' durations.

A class's ``random.Random`` (about 2.9 KB of state) is built from its seed only when the
class first samples from it: ``fixed`` and ``list`` durations never do, and a trace's
classes are mostly ``list``s. :meth:`DurationSampler.forget` drops a finished job.

Kinds (``model.jobs.Duration``): ``fixed`` (``value``), ``exponential`` (``mean``),
``uniform`` (``low``, ``high``), ``lognormal`` (``mu``, ``sigma`` of the underlying normal),
``list`` (``values``, used in order and cycled, per class). A task that is run again
(its node failed) draws a new duration: the next one of its class's stream.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from fairshare.model.jobs import Duration, Job

#: a sampled duration is never shorter (1 ns): every task takes time, so an instant's
#: events are always processed in one round (a 0-s task would finish "during" the
#: scheduling round that started it)
MIN_DURATION_S = 1e-9


class DurationSampler:
    def __init__(self, jobs: Iterable[Job], rng: random.Random):
        self._rng = rng
        # per (job, class): the stream's seed, replaced by the stream once it is used
        self._streams: dict[tuple[str, int], int | random.Random] = {}
        # per (job, class) of a ``list`` duration: [its next position, its values] (the
        # values taken out of ``params`` once, not at every task: a trace's classes are lists)
        self._lists: dict[tuple[str, int], list] = {}
        # per (job, class): the next duration, drawn ahead by ``peek`` (gang backfill)
        self._peeked: dict[tuple[str, int], float] = {}
        for job in jobs:
            self.add(job)

    def add(self, job: Job) -> None:
        """Draw the job's per-class seeds (the next ones of the run's generator)."""
        rng = self._rng
        for j in range(len(job.classes)):
            self._streams[(job.name, j)] = rng.getrandbits(64)

    def forget(self, job: Job) -> None:
        """Drop a finished job's streams and cursors."""
        for j in range(len(job.classes)):
            key = (job.name, j)
            del self._streams[key]
            self._lists.pop(key, None)
            self._peeked.pop(key, None)

    def peek(self, job: Job, class_index: int) -> float:
        """The duration the next ``sample`` of this class will return: drawn now and kept
        for it, so peeking changes no duration (the stream is drawn in the same order)."""
        key = (job.name, class_index)
        got = self._peeked.get(key)
        if got is None:
            got = self._peeked[key] = self.sample(job, class_index)
        return got

    def sample(self, job: Job, class_index: int) -> float:
        key = (job.name, class_index)
        if self._peeked:
            got = self._peeked.pop(key, None)
            if got is not None:
                return got
        cursor = self._lists.get(key)
        if cursor is not None:
            k, values = cursor
            cursor[0] = k + 1
            return max(float(values[k % len(values)]), MIN_DURATION_S)
        d: Duration = job.classes[class_index].duration
        kind = d.kind
        if kind == "fixed":
            value = float(dict(d.params)["value"])
        elif kind == "list":
            values = dict(d.params)["values"]
            self._lists[key] = [1, values]
            value = float(values[0 % len(values)])
        else:
            rng = self._streams[key]
            if not isinstance(rng, random.Random):
                rng = self._streams[key] = random.Random(rng)
            p = dict(d.params)
            if kind == "exponential":
                value = rng.expovariate(1.0 / float(p["mean"]))
            elif kind == "uniform":
                value = rng.uniform(float(p["low"]), float(p["high"]))
            elif kind == "lognormal":
                value = rng.lognormvariate(float(p["mu"]), float(p["sigma"]))
            else:  # the loader admits no other kind
                raise ValueError(f"unknown duration kind {kind!r} in job {job.name!r}")
        return max(value, MIN_DURATION_S)
