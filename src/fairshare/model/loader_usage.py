"""The scenario loader's ``usage:`` section, and ``allocate --usage FILE``: past usage
for the static allocations (docs/usage.md, "usage: past usage for allocate"; ``model/usage.py``).

The section is read once the jobs and the queue tree are built: its names must be
theirs. Every problem goes to the collector with its field path (``usage.jobs.A.gpu:
unknown resource 'gpu'``), as the other sections'.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fairshare.model.errors import FieldError, ScenarioError
from fairshare.model.jobs import Job
from fairshare.model.loader_fields import Collector, amounts, show
from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.resources import Vector, fits
from fairshare.model.scenario import FairnessConfig, Scenario
from fairshare.model.schema import USAGE, keys
from fairshare.model.usage import PastUsage, decayed_time, subtree_totals

USAGE_KEYS = keys(USAGE)
_EXAMPLE = "{over: 604800, half_life: 86400, queues: {ads: {cpu: 2.0e6}}}"


def parse_usage(col: Collector, raw: Any, resources: tuple[str, ...], jobs: Sequence[Job], tree: QueueTree,
                fairness: FairnessConfig | None, *, source: str = "usage") -> PastUsage | None:
    """``usage:`` (optional): ``over`` seconds > 0 with amounts in decayed resource-seconds
    (``half_life`` > 0 or infinite; default ``fairness.half_life`` when above 0, else
    infinite), or ``average: true`` with amounts in resource units; ``jobs`` and
    ``queues`` map names / dotted paths to amounts. A queue's amounts are its subtree's
    and must be at least what its given sub-queues and jobs add up to."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        col.add("usage", f"must be a mapping like {_EXAMPLE}, got {show(raw)}")
        return None
    errors_before = len(col.errors)
    col.unknown_keys(raw, USAGE_KEYS, "usage")
    per_second = _time_basis(col, raw, fairness)
    job_names = {job.name for job in jobs}
    queue_paths = set(tree.paths)
    given_jobs = _entries(col, raw.get("jobs"), "jobs", job_names, "job", resources)
    given_queues = _entries(col, raw.get("queues"), "queues", queue_paths, "queue", resources)
    _check_subtrees(col, given_queues, given_jobs, jobs, tree, resources)
    if len(col.errors) > errors_before or per_second is None:
        return None
    scale, half_life, over = per_second
    return PastUsage({n: tuple(x * scale for x in v) for n, v in given_jobs.items()},
                     {p: tuple(x * scale for x in v) for p, v in given_queues.items()},
                     half_life, over, source)


def _time_basis(col: Collector, raw: Mapping, fairness: FairnessConfig | None) \
        -> tuple[float, float | None, float | None] | None:
    """``(1 / W, half_life, over)`` for resource-seconds, ``(1, None, None)`` for averages."""
    average = raw.get("average")
    if average is not None and average is not True:
        col.add("usage.average", f"must be true (the amounts are average allocations; for resource-seconds give "
                                 f"over instead), got {show(average)}")
        return None
    has_over = raw.get("over") is not None
    if average and has_over:
        col.add("usage.average", "give either over (the amounts are decayed resource-seconds) or average: true "
                                 "(they are average allocations), not both")
        return None
    if average:
        if raw.get("half_life") is not None:
            col.add("usage.half_life", "only with over: average allocations are not decayed again")
            return None
        return 1.0, None, None
    if not has_over:
        col.add("usage", "needs over: SECONDS (the amounts are decayed resource-seconds accumulated over that "
                         "long) or average: true (the amounts are average allocations)")
        return None
    over = col.number(raw["over"], "usage.over", positive=True)
    value = raw.get("half_life")
    if value is None:
        half_life = fairness.half_life if fairness is not None and fairness.half_life > 0 else math.inf
    elif value == "inf" or (isinstance(value, float) and value == math.inf):
        half_life = math.inf
    else:
        half_life = col.number(value, "usage.half_life", positive=True)
    if over is None or half_life is None:
        return None
    return 1.0 / decayed_time(half_life, over), half_life, over


def _entries(col: Collector, raw: Any, key: str, known: set[str], what: str,
             resources: tuple[str, ...]) -> dict[str, Vector]:
    """``usage.jobs`` or ``usage.queues``: name -> amounts, as vectors in resource order."""
    path = f"usage.{key}"
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        col.add(path, f"must be a mapping of {what} -> resource amounts like {{A: {{cpu: 3}}}}, got {show(raw)}")
        return {}
    out: dict[str, Vector] = {}
    for name, entry in raw.items():
        where = f"{path}.{name}"
        if name not in known or name == ROOT:
            col.add(where, f"unknown {what} {name!r}" + (f" ({what}s: {', '.join(sorted(known))})" if known else
                                                         f" (the scenario has no {what}s)"))
            continue
        given = amounts(col, entry, where, lambda _res: None)
        if given is None:
            continue
        bad = [res for res in given if res not in resources]
        for res in bad:
            col.add(f"{where}.{res}", f"unknown resource {res!r} (resources: {', '.join(resources)})")
        if not bad:
            out[name] = tuple(given.get(res, 0.0) for res in resources)
    return out


def _check_subtrees(col: Collector, queues: dict[str, Vector], jobs_given: dict[str, Vector], jobs: Sequence[Job],
                    tree: QueueTree, resources: tuple[str, ...]) -> None:
    """A queue's given usage is its whole subtree's: at least the sum of what is given
    for its child queues (their own totals) and its jobs."""
    _total, below = subtree_totals(queues, jobs_given, jobs, tree, len(resources))
    for path, given in queues.items():
        for r, res in enumerate(resources):
            if not fits((below[path][r],), (given[r],)):
                col.add(f"usage.queues.{path}.{res}",
                        f"{given[r]:g} is less than its sub-queues and jobs given here add up to "
                        f"({below[path][r]:g}): a queue's usage is its whole subtree's")


# --- allocate --usage FILE (read by ``loader.with_usage_file``) -----------------------------------

def usage_of_summary(summary: Mapping, scenario: Scenario, source: str) -> dict:
    """A ``usage:`` section from a ``simulate`` summary.json (docs/usage.md, "usage: past usage for allocate").

    summary.json holds no decayed usage, only means over each job's active span, so the
    history is the run's plain resource-seconds (``half_life: inf``) over its makespan:
    a job's ``mean_allocation x span`` (span ``submit`` to ``finish``, or to the makespan
    when unfinished: how the mean was taken, ``sim/metrics.py``). Jobs of the run that
    are not in ``scenario`` count only in their queues; a queue's usage is the sum over
    every job of the run below it (exact: a queue's integral is its jobs')."""
    makespan = summary.get("makespan")
    if isinstance(makespan, bool) or not isinstance(makespan, (int, float)) or not makespan > 0:
        raise ScenarioError(FieldError("makespan", f"must be a number > 0 to average a run's usage over, got "
                                                   f"{show(makespan)}"), source)
    names = {job.name for job in scenario.jobs}
    jobs: dict[str, dict[str, float]] = {}
    queues: dict[str, dict[str, float]] = {}
    for name, entry in summary["jobs"].items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("mean_allocation"), Mapping):
            raise ScenarioError(FieldError(f"jobs.{name}.mean_allocation", "missing: not a simulate summary.json "
                                                                           "job entry"), source)
        submit = entry.get("submit") or 0.0
        finish = entry.get("finish")
        span = max(0.0, (finish if finish is not None else makespan) - submit)
        used = {res: amount * span for res, amount in entry["mean_allocation"].items()}
        if name in names:
            jobs[name] = used
        queue = entry.get("queue") or ROOT
        while queue != ROOT:  # the job's queue and every ancestor
            into = queues.setdefault(queue, {})
            for res, x in used.items():
                into[res] = into.get(res, 0.0) + x
            queue = queue.rpartition(".")[0]
    return {"over": float(makespan), "half_life": "inf", "jobs": jobs, "queues": queues}
