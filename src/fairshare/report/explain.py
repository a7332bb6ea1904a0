"""``fairshare explain`` and ``allocate --explain``: a job's wait in sentences with the
numbers, from the engine's reasons (``engine/explain.py``) or the static allocation.

Static (``allocate --explain``, ``explain`` without ``--at``): what bounds each job in the
allocation (:func:`static_bounds`). The filling policies grow every demanding job until a
constraint stops it (DRF's progressive filling, Ghodsi et al. Sec. 4 and Appendix A.1;
H-DRF's Alg. 1, Bhattacharya et al. Sec. 3.1, where a leaf is *blocked* when a resource it
needs saturates, Sec. 3.4): a job is bounded by its own demand (its task count, with
``--respect-counts``), by a limit of its queue or one above it (the chain of bounded
fills, docs/policies.md "Guarantees and limits"), or by a saturated resource it uses,
which froze it at the dominant share it holds (a frozen job grows no more, so its final
share is the one it had when the resource saturated); in discrete mode also by the node
fit (its next whole task fits on no node's remaining capacity).

Over time (``explain --at S``): the scenario simulated up to S (every event at or before
S), the engine's explanation of the job there, and ``estimated_start`` from the same run
carried on to the end: the simulator knows the durations (the same seed draws the same
ones), so the estimate is the simulated start, in absolute seconds.
"""

from __future__ import annotations

import math

from fairshare.model.allocation import Allocation
from fairshare.model.scenario import Scenario
from fairshare.report.table import fmt_number

#: a quantity within this fraction of its bound has reached it (the filling's events
#: are exact up to float rounding)
REACHED_RTOL = 1e-9


def _reached(value: float, bound: float) -> bool:
    return value >= bound - REACHED_RTOL * max(1.0, abs(bound))


def static_bounds(scenario: Scenario, allocation: Allocation, *, respect_counts: bool) -> dict[str, list[dict]]:
    """Per job, the constraints that bound it in ``allocation`` (module docstring), each
    with its numbers; several when several hold at once."""
    resources = allocation.resources
    capacity = allocation.capacity
    used = [sum(ja.allocation[r] for ja in allocation.jobs.values()) for r in range(len(resources))]
    free_by_node = _node_free(scenario, allocation)
    out: dict[str, list[dict]] = {}
    for job in scenario.jobs:
        got = allocation.jobs.get(job.name)
        if got is None:
            continue
        uses = [r for r in range(len(resources)) if any(c.demand[r] > 0 for c in job.classes)]
        found: list[dict] = []
        total = job.total_count
        if (respect_counts or job.gang) and total is not None and _reached(got.tasks, total):
            found.append({"kind": "own_demand", "tasks": total})
        for path in scenario.queues.ancestors(job.queue) if job.queue else ():
            if path not in allocation.queues:
                continue
            limit = scenario.queues[path].limit_vector(resources)
            usage = allocation.queues[path].allocation
            for r in uses:
                if limit[r] < math.inf and _reached(usage[r], limit[r]):
                    found.append({"kind": "queue_limit", "queue": path, "resource": resources[r],
                                  "usage": usage[r], "limit": limit[r]})
        for r in uses:
            if capacity[r] > 0 and _reached(used[r], capacity[r]):
                found.append({"kind": "saturated", "resource": resources[r], "capacity": capacity[r],
                              "dominant_share": got.dominant_share, "weight": job.weight})
        if free_by_node is not None and not found:
            demand = job.classes[0].demand
            if not any(all(d <= f + REACHED_RTOL * max(1.0, f) for d, f in zip(demand, free))
                       for free in free_by_node.values()):
                found.append({"kind": "no_node_fits", "demand": dict(zip(resources, demand)),
                              "largest_free": dict(zip(resources, _largest(free_by_node)))})
        out[job.name] = found
    return out


def _node_free(scenario: Scenario, allocation: Allocation) -> dict[str, list[float]] | None:
    """Discrete mode: each node's capacity left after the placement."""
    if allocation.placement is None:
        return None
    jobs = {job.name: {c.name: c.demand for c in job.classes} for job in scenario.jobs}
    free = {}
    for node in scenario.cluster.nodes:
        left = list(node.capacity)
        for job, classes in allocation.placement.get(node.name, {}).items():
            for cls, n in classes.items():
                for r, d in enumerate(jobs[job][cls]):
                    left[r] -= n * d
        free[node.name] = left
    return free


def _largest(free_by_node: dict[str, list[float]]) -> list[float]:
    return [max((free[r] for free in free_by_node.values()), default=0.0)
            for r in range(len(next(iter(free_by_node.values()), [])))]


# --- over time -----------------------------------------------------------------------------------

def explain_at(scenario: Scenario, policy, job: str, at: float, options) -> dict:
    """The contract's ``explain`` document for ``job`` at simulated time ``at`` (module
    docstring); ``options`` a ``SimOptions`` (its ``until`` is replaced)."""
    from dataclasses import replace

    from fairshare.engine.explain import explain
    from fairshare.sim import Simulator

    sim = Simulator(scenario, policy, replace(options, until=at))
    sim.run()
    sch = sim.scheduler
    rt = sch.jobs.get(job)
    if rt is None:
        doc = {"job": job, "state": "not_submitted", "reasons": [], "would_start_if": []}
    else:
        doc = explain(sch, job, sim.now).to_json()
    doc["at"] = at
    waiting = doc["state"] in ("pending", "not_submitted") or bool(doc["reasons"])
    # (the state at ``at`` is after that instant's decision: a start still to come is later)
    doc["estimated_start"] = simulated_start(scenario, policy, job, options, after=at) if waiting else rt.first_start
    return doc


def simulated_start(scenario: Scenario, policy, job: str, options, *, after: float | None = None) -> float | None:
    """When a task of the job next starts (after ``after``, when given) in the run to the
    end; None: never, or the run has no end (a job with unbounded counts)."""
    from fairshare.sim import SimulationError, Simulator

    try:
        sim = Simulator(scenario, policy, options)
    except SimulationError:
        return None
    starts: list[float] = []
    start = sim.executor.start

    def recording(launch, now: float) -> None:
        if launch.job == job and not starts and (after is None or now > after):
            starts.append(now)
        start(launch, now)

    sim.executor.start = recording
    sim.run()
    return starts[0] if starts else None


def explain_static(scenario: Scenario, allocation: Allocation, job: str, *, respect_counts: bool) -> dict:
    """``explain`` without ``--at``: the job's place in the static allocation."""
    got = allocation.jobs[job]
    return {"job": job, "state": "allocated" if got.tasks > 0 else "not_allocated",
            "reasons": static_bounds(scenario, allocation, respect_counts=respect_counts)[job],
            "would_start_if": [], "tasks": got.tasks,
            "allocation": dict(zip(allocation.resources, got.allocation)), "dominant_share": got.dominant_share}


# --- text ----------------------------------------------------------------------------------------

def _amounts(mapping: dict) -> str:
    return ", ".join(f"{fmt_number(v)} {r}" for r, v in mapping.items() if v)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def reason_sentence(reason: dict) -> str:
    """One reason as a sentence with its numbers."""
    kind = reason["kind"]
    if kind == "priority_held":
        return (f"Held by priority: job(s) {', '.join(reason['higher'])} of higher priority in queue "
                f"{reason['queue'] or '(root)'} are served first (this job: priority {reason['priority']}).")
    if kind == "queue_limit":
        demand = reason.get("demand")
        more = f" + {fmt_number(demand)} asked" if demand is not None else ""
        return (f"Queue {reason['queue']} is at its {reason['resource']} limit: it uses "
                f"{fmt_number(reason['usage'])}{more}, limit {fmt_number(reason['limit'])}.")
    if kind == "reserved_for":
        start = "" if reason.get("gang_start") is None else f", planned to start at {fmt_number(reason['gang_start'])} s"
        return (f"Reserved for gang {reason['gang']}: {_amounts(reason['held'])} held on "
                f"{', '.join(reason['held_nodes'])} until it starts{start}; its next task "
                f"({_amounts(reason['demand'])}) would fit on {', '.join(reason['would_fit_on'])} without the hold.")
    if kind == "gang_incomplete":
        where = f" (pack {reason['pack']})" if reason.get("pack") else ""
        total = ("the free capacity in total would hold it: fragmentation" if reason["fits_in_total"]
                 else "not even the free capacity in total would hold it")
        return (f"Gang incomplete: no room for all {reason['tasks']} tasks at once{where} "
                f"({_amounts(reason['demand'])} together; free {_amounts(reason['free']) or 'nothing'}); {total}.")
    if kind == "no_node_fits":
        total = ("the free capacity summed over the eligible nodes would hold it: fragmentation"
                 if reason["fits_in_total"] else "not even the free capacity in total would hold it")
        best = ""
        if "best_node" in reason:
            best = (f" The closest node, {reason['best_node']}, has {_amounts(reason['node_free']) or 'nothing'} free: "
                    f"short of {_amounts(reason['shortfall'])}.")
        return (f"No node fits its next task ({_amounts(reason['demand'])}) among "
                f"{reason['eligible_nodes']} eligible node(s).{best} {total[0].upper() + total[1:]}.")
    if kind == "preempted":
        return _preempted_sentence(reason)
    if kind == "guarantee_owed":
        return (f"Queue {reason['queue']} is below its guarantee (uses {_amounts(reason['usage']) or 'nothing'} "
                f"of {_amounts(reason['guarantee'])}): its job {reason['job']} is served first.")
    if kind == "behind_fair_share":
        level = reason["level"] or "the root"
        sentence = (f"Behind {reason['ahead']} at {level}: dominant share {_pct(reason['dominant_share'])} "
                    f"of {reason['dominant_resource']} (weight {fmt_number(reason['weight'])}) against "
                    f"{_pct(reason['ahead_dominant_share'])} of {reason['ahead_dominant_resource']} "
                    f"(weight {fmt_number(reason['ahead_weight'])})")
        if reason.get("policy_share") is not None and reason.get("ahead_policy_share") is not None:
            sentence += (f"; the policy's own shares {fmt_number(round(reason['policy_share'], 4))} "
                         f"against {fmt_number(round(reason['ahead_policy_share'], 4))}")
        if "submitted" in reason:
            sentence += (f"; submitted at {fmt_number(reason['submitted'])} s against "
                         f"{fmt_number(reason['ahead_submitted'])} s")
        return sentence + f" (job {reason['ahead_job']} is served first)."
    if kind == "own_demand":
        return f"Bounded by its own demand: all {reason['tasks']} tasks are allocated."
    if kind == "saturated":
        return (f"Bounded by {reason['resource']}, saturated (capacity {fmt_number(reason['capacity'])}) when "
                f"its dominant share reached {_pct(reason['dominant_share'])} (weight {fmt_number(reason['weight'])}).")
    return f"{kind}: {reason}"


def _ratio(x: float | None) -> str:
    return "infinite" if x is None else fmt_number(round(x, 4))


def _preempted_sentence(reason: dict) -> str:
    """``preempted``: who, when, and the numbers its rule compared."""
    head = (f"Preempted by job {reason['by']} at {fmt_number(reason['at'])} s: {reason['tasks']} task(s) re-queued, "
            f"{reason['waiting']} still waiting")
    if reason["rule"] == "within_queue":
        return (head + f"; priority preemption within its queue: priority {reason['priority']} against the "
                f"claimant's {reason['claimant_priority']}.")
    victim = (f"this job's share / fair share went from {_ratio(reason['victim_ratio_before'])} to "
              f"{_ratio(reason['victim_ratio'])}, the claimant's from {_ratio(reason['claimant_ratio_before'])} "
              f"to {_ratio(reason['claimant_ratio'])}")
    if reason["rule"] == "naive":
        return head + f"; the naive rule (above its fair share, whatever it keeps): {victim}."
    return head + f"; legal by the loop-free rule (it keeps at least max(1, the claimant's new ratio)): {victim}."


def change_sentence(change: dict) -> str:
    kind = change["kind"]
    if kind == "limit_raised":
        return "if " + "; ".join(f"queue {q}'s limit were {_amounts(lim)}" for q, lim in change["limits"].items())
    if kind == "smaller_demand":
        return f"if its {change['task_class']} tasks asked for {_amounts(change['demand'])} instead of " \
               f"{_amounts(change['instead_of'])}"
    if kind == "tasks_ended":
        freed = "; ".join(f"{q or '(root)'} used {_amounts(amounts)} less" for q, amounts in change["freed"].items())
        return f"if {freed} on node {change['node']} (task(s) {', '.join(map(str, change['tasks']))} " \
               f"of {', '.join(change['jobs'])} ended)"
    if kind == "smaller_gang":
        return f"if the gang had {change['tasks']} tasks instead of {change['instead_of']}"
    return f"{kind}: {change}"


def explanation_text(doc: dict) -> str:
    """The ``explain`` document as sentences."""
    at = f" at {fmt_number(doc['at'])} s" if "at" in doc else " in the static allocation"
    lines = [f"Job {doc['job']} is {doc['state'].replace('_', ' ')}{at}."]
    lines += [f"- {reason_sentence(r)}" for r in doc["reasons"]]
    if doc["would_start_if"]:
        lines.append("It would start now (checked by deciding again):")
        lines += [f"- {change_sentence(c)}" for c in doc["would_start_if"]]
    start = doc.get("estimated_start")
    lines.append(f"Estimated start: {fmt_number(start)} s (simulated)." if start is not None
                 else "Estimated start: unknown (it does not start in the simulated run, or the run has no end: "
                      "a job with unbounded tasks).")
    return "\n".join(lines) + "\n"


def bounds_text(bounds: dict[str, list[dict]]) -> str:
    """``allocate --explain``: per job, what bounds it."""
    lines = ["", "What bounds each job (progressive filling: DRF Ghodsi et al. Sec. 4; H-DRF Bhattacharya et al. "
             "Sec. 3.1, 3.4):"]
    for job, found in bounds.items():
        text = " ".join(reason_sentence(r) for r in found) or "Nothing found at its bound."
        lines.append(f"- {job}: {text}")
    return "\n".join(lines) + "\n"
