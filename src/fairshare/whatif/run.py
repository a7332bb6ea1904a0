"""Assemble a what-if's scenario (imported queues + a job history) and run its variants.

The history's jobs name queues in the history's own terms (a Slurm account or
``account.user``, a Kueue ``namespace/localqueue`` or ClusterQueue, a YARN ``root.a.b``).
:func:`attach_history` maps each onto a queue of the imported configuration, in this
order, the first that matches:

1. ``--queue-map`` (an explicit ``{history queue: scenario queue}`` mapping);
2. the importer's own path table (``ImportedConfig.queue_paths``: ``root.a.b`` -> ``a.b``);
3. the same dotted path in the scenario;
4. the one scenario queue whose last component is the history queue's last component.

A job whose queue maps to none is an error naming the queue and how many jobs it holds,
unless ``--unmapped root`` (such jobs sit under the root) or ``--unmapped drop`` (left
out, and counted in the report's notes).

Every variant runs on the same document and seed (the simulator's common random numbers:
``sim.durations``), so differences between runs are the policies' (or the varied
setting's) doing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from fairshare.importers.base import queue_entries
from fairshare.model.errors import ScenarioError
from fairshare.model.loader import parse_scenario
from fairshare.model.scenario import Scenario
from fairshare.sim.result import SimResult
from fairshare.whatif.analysis import QueueNumbers, queue_numbers
from fairshare.whatif.variants import Variant, VariantError, apply_setting

UNMAPPED = ("error", "root", "drop")


class WhatIfError(ValueError):
    """The what-if cannot run as asked; the message names the flag or file and the reason."""


def attach_history(config_doc: dict[str, Any], jobs: list[dict[str, Any]], *,
                   queue_map: dict[str, str] | None = None, importer_paths: dict[str, str] | None = None,
                   unmapped: str = "error") -> tuple[dict[str, Any], list[str]]:
    """The config's document with ``jobs`` whose queues are mapped onto its queues (module
    docstring); returns (document, notes)."""
    if unmapped not in UNMAPPED:
        raise WhatIfError(f"--unmapped: one of {', '.join(UNMAPPED)}, got {unmapped!r}")
    paths = [path for path, _ in queue_entries(config_doc.get("queues") or [])]
    known = set(paths)
    by_last: dict[str, list[str]] = {}
    for p in paths:
        by_last.setdefault(p.rsplit(".", 1)[-1], []).append(p)
    queue_map = dict(queue_map or {})
    importer_paths = dict(importer_paths or {})
    for source, target in queue_map.items():
        if target not in known:
            raise WhatIfError(f"--queue-map: {source!r} maps to {target!r}, which is not a queue of the configuration "
                              f"(queues: {', '.join(paths[:12])}{' ...' if len(paths) > 12 else ''})")

    def resolve(queue: str | None) -> str | None:
        if queue is None:
            return None
        for table in (queue_map, importer_paths):
            if queue in table:
                return table[queue]
        if queue in known:
            return queue
        candidates = by_last.get(queue.replace("/", ".").rsplit(".", 1)[-1], [])
        return candidates[0] if len(candidates) == 1 else None

    out_jobs, missing, dropped = [], Counter(), 0
    for job in jobs:
        queue = job.get("queue")
        target = resolve(queue)
        if queue is not None and target is None:
            missing[queue] += 1
            if unmapped == "drop":
                dropped += 1
                continue
            if unmapped == "root":
                job = {k: v for k, v in job.items() if k != "queue"}
                out_jobs.append(job)
                continue
            continue
        out_jobs.append(job if target == queue else {**job, "queue": target})
    notes = []
    if missing and unmapped == "error":
        listed = ", ".join(f"{q!r} ({n} job{'s' if n != 1 else ''})" for q, n in missing.most_common(8))
        raise WhatIfError(f"--history: {sum(missing.values())} jobs name queues the configuration does not have: "
                          f"{listed}{' ...' if len(missing) > 8 else ''}; map them with --queue-map FILE, or "
                          f"--unmapped root|drop")
    if missing:
        how = "left out" if unmapped == "drop" else "placed under the root"
        notes.append(f"{sum(missing.values())} jobs of {len(missing)} unmapped history queue(s) were {how} "
                     f"({', '.join(sorted(missing)[:6])}{' ...' if len(missing) > 6 else ''})")
    doc = dict(config_doc)
    doc["jobs"] = out_jobs
    return doc, notes


@dataclass
class Run:
    """One variant's simulation and the what-if's numbers for it."""

    variant: Variant
    result: SimResult
    summary: dict[str, Any]
    queues: dict[str, QueueNumbers]
    audit: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def load_variant(doc: dict[str, Any], variant: Variant, source: str) -> Scenario:
    """The scenario of one variant (its setting applied); WhatIfError naming the setting."""
    if variant.setting is not None:
        try:
            doc = apply_setting(doc, variant.setting)
        except VariantError as exc:
            raise WhatIfError(str(exc)) from None
    try:
        return parse_scenario(doc, source)
    except ScenarioError as exc:
        where = f" with --vary {variant.setting.label}" if variant.setting else ""
        raise WhatIfError(f"the what-if scenario{where} does not load:\n{exc}") from None


def run_variant(scenario: Scenario, variant: Variant, *, seed: int, until: float | None,
                progress: Callable[[SimResult], None] | None = None) -> Run:
    """Simulate one variant and measure it."""
    from fairshare.policies import make_policy
    from fairshare.policies.base import PolicyModeError
    from fairshare.sim import SimOptions, Simulator
    from fairshare.sim.metrics import summarize
    from fairshare.sim.result import SimulationError

    options = SimOptions(seed=seed, until=until, track_fair_share=True)
    try:
        sim = Simulator(scenario, make_policy(variant.policy), options)
    except PolicyModeError as exc:
        raise WhatIfError(f"--policies {variant.policy}: {exc}") from None
    except SimulationError as exc:
        raise WhatIfError(f"--until: {exc}") from None
    result = sim.run()
    summary = summarize(result, fairness_gap=False, scenario_name=scenario.source)
    return Run(variant, result, summary, queue_numbers(result), notes=list(result.notes))


def snapshot_scenario(scenario: Scenario, result: SimResult, max_jobs: int) -> tuple[Scenario, float] | None:
    """The static scenario of the busiest instant of ``result``: the jobs demanding when the
    most jobs demanded at once (the first such instant; at most ``max_jobs`` of them, by
    submit then name), every one with a next task, as ``allocate`` and ``audit`` take it."""
    from dataclasses import replace

    demanding: dict[str, bool] = {}
    best, best_t, count = -1, 0.0, 0
    changes = result.demand_changes
    for k, (t, job, on) in enumerate(changes):
        if demanding.get(job, False) != on:
            count += 1 if on else -1
            demanding[job] = on
        if (k + 1 == len(changes) or changes[k + 1][0] != t) and count > best:
            best, best_t = count, t
    if best <= 0:
        return None
    state: dict[str, bool] = {}
    for t, job, on in changes:
        if t > best_t:
            break
        state[job] = on
    names = {j for j, on in state.items() if on}
    jobs = sorted((j for j in scenario.jobs if j.name in names), key=lambda j: (j.submit_s, j.name))[:max_jobs]
    return replace(scenario, jobs=tuple(jobs), events=()), best_t


def audit_at_snapshot(snapshot: Scenario, policy: str, *, max_jobs_searched: int = 4) -> dict[str, Any]:
    """The audit's verdicts for ``policy``'s static allocation of the snapshot, or why none."""
    from fairshare.audit import audit
    from fairshare.policies.base import PolicyModeError

    try:
        report = audit(snapshot, policy, max_jobs_searched=max_jobs_searched)
    except PolicyModeError as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, "violated": report.violated(),
            "holds": [n for n, r in report.properties.items() if r.holds],
            "details": {n: r.detail for n, r in report.properties.items() if r.holds is False}}
