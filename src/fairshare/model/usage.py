"""Past usage for the static allocations: the scenario's ``usage:`` section
(docs/usage.md, "usage: past usage for allocate"; docs/policies.md, "Fairness with memory").

The online policies with memory order by the dominant share of ``A + U / W``: the
current allocation plus the decayed average past allocation (``policies/machinery/
decay.py``). The static question with history is the same filling started from that
average: each job (and, in a hierarchy, each queue) enters the progressive filling
with an *offset* ``p = U / W`` already counted in its level, so the entitlement is what
the online sorter would fill an empty cluster to at the instant the history was taken.
:class:`PastUsage` holds ``p`` per job and per queue, in the resources' units.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fairshare.model.jobs import Job
from fairshare.model.queues import QueueTree
from fairshare.model.resources import Vector

LN2 = math.log(2.0)


def decayed_time(half_life: float, over: float) -> float:
    """``W = (h / ln 2)(1 - 2^(-T/h))``: the decayed length of ``over`` = T seconds of
    history with half-life ``h`` (``inf``: T itself). The same W as
    ``DecayLedger.weight``, so ``U / W`` is the average the online sorters add."""
    if math.isinf(half_life):
        return over
    return (half_life / LN2) * -math.expm1(-over * LN2 / half_life)


@dataclass(frozen=True)
class PastUsage:
    """Per job and per queue (dotted path), the decayed *average* past allocation
    ``U / W`` (resource units, the scenario's resource order). A queue's entry is its
    whole subtree's history (at least what its given children and jobs add up to: the
    loader checks), so it may include jobs that have since left."""

    jobs: Mapping[str, Vector]
    queues: Mapping[str, Vector]
    #: what the amounts were given as: ``over`` seconds of history decayed with
    #: ``half_life`` (None, None: given directly as average allocations)
    half_life: float | None = None
    over: float | None = None
    #: where it came from: the scenario's ``usage:`` section, or the file of ``--usage``
    source: str = "usage"

    def is_zero(self) -> bool:
        return not any(x for vec in (*self.jobs.values(), *self.queues.values()) for x in vec)

    def basis(self) -> dict:
        """How the averages were obtained, for the outputs (allocate JSON ``usage``)."""
        if self.over is None:
            return {"given_as": "average", "source": self.source}
        return {"given_as": "resource_seconds", "over": self.over,
                "half_life": "inf" if self.half_life is None or math.isinf(self.half_life) else self.half_life,
                "source": self.source}

    def queue_totals(self, jobs: Sequence[Job], tree: QueueTree, m: int) -> dict[str, Vector]:
        """Every queue's history (path -> vector): its given total, or else what its
        child queues and its jobs add up to (the online H-DRF queue's vector: its
        children's, plus a hidden leaf for the history of jobs that have left)."""
        return subtree_totals(self.queues, self.jobs, jobs, tree, m)[0]

    def for_report(self, jobs: Sequence[Job], tree: QueueTree, m: int) -> PastUsage:
        """This history with an entry for every job and every queue (zeros where none)."""
        zero = (0.0,) * m
        return PastUsage({job.name: self.jobs.get(job.name, zero) for job in jobs},
                         self.queue_totals(jobs, tree, m), self.half_life, self.over, self.source)


def subtree_totals(queues: Mapping[str, Vector], jobs_given: Mapping[str, Vector], jobs: Sequence[Job],
                   tree: QueueTree, m: int) -> tuple[dict[str, Vector], dict[str, Vector]]:
    """Per queue path (root included): ``(total, below)``, ``below`` what its child queues'
    totals and its jobs' given usage add up to, ``total`` its given usage or else
    ``below``."""
    jobs_of: dict[str, list[str]] = {}
    for job in jobs:
        jobs_of.setdefault(job.queue, []).append(job.name)
    total: dict[str, Vector] = {}
    below: dict[str, Vector] = {}
    for node in reversed(list(tree)):  # (pre-order reversed: children before parents)
        parts = [total[c] for c in node.children] + [jobs_given[j] for j in jobs_of.get(node.path, ())
                                                     if j in jobs_given]
        below[node.path] = tuple(math.fsum(v[r] for v in parts) for r in range(m))
        total[node.path] = queues.get(node.path, below[node.path])
    return total, below
