"""A what-if's outputs: ``whatif.json``, ``report.html`` (first page: who gains and who
loses if you switch) and the terminal's summary.

The HTML report's sections, in order: the verdicts (one paragraph per variant against the
base), the per queue table (waits, share against entitlement, preemptions), utilization
per resource, the audit of each policy's static allocation at the busiest instant, and a
plot per queue of its share against its entitlement over time, every variant on it.
"""

from __future__ import annotations

from typing import Any

from fairshare.report.html import escape, number_cell, page, percent_cell, plot, table
from fairshare.whatif.analysis import changes, verdict_lines
from fairshare.whatif.run import Run

#: plots drawn at most (the first queues in tree order: parents first); the table has all
MAX_QUEUE_PLOTS = 40


def comparisons(runs: list[Run], queues: list[str]) -> dict[str, list[str]]:
    """Per variant other than the base, the first page's sentences."""
    base = runs[0]
    return {run.variant.label: verdict_lines(base.variant.label, run.variant.label,
                                             changes(base.queues, run.queues, queues))
            for run in runs[1:]}


def whatif_document(runs: list[Run], *, queues: list[str], notes: list[str], seed: int, until: float | None,
                    source: dict[str, Any], snapshot_time: float | None) -> dict[str, Any]:
    """``whatif.json``: per variant its headline numbers and per queue numbers; the verdicts."""
    variants = []
    for run in runs:
        s = run.summary
        variants.append({
            "label": run.variant.label,
            "policy": run.variant.policy,
            "current": run.variant.current,
            "setting": None if run.variant.setting is None else {"key": run.variant.setting.key,
                                                                 "value": run.variant.setting.value},
            "outputs": run.variant.slug,
            "makespan": s["makespan"],
            "utilization": dict(s["utilization"]),
            "completion_time": dict(s["completion_time"]),
            "preemptions": run.result.preemptions,
            "work_lost_s": sum(run.result.work_lost.values()),
            "queues": {q: run.queues[q].to_json() for q in queues if q in run.queues},
            "audit": run.audit,
            "notes": run.notes,
        })
    return {"source": source, "seed": seed, "until": until, "base": runs[0].variant.label,
            "audit_snapshot_time": snapshot_time, "notes": notes, "variants": variants,
            "verdicts": comparisons(runs, queues)}


def terminal_text(doc: dict[str, Any]) -> str:
    lines = []
    for verdict in doc["verdicts"].values():
        lines.extend(verdict)
    if not doc["verdicts"]:
        lines.append(f"one variant only ({doc['base']}): nothing to compare it with")
    for note in doc["notes"]:
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def _seconds(x: float | None) -> str:
    return number_cell(x, " s")


def figures(runs: list[Run], queues: list[str]) -> dict[str, str]:
    """The report's plots as SVG, by file stem: ``waits`` (p95 wait per leaf queue, one bar
    per variant) and ``queue_<path>`` (the queue's share against its entitlement over time,
    every variant on it) for the first ``MAX_QUEUE_PLOTS`` queues."""
    from fairshare.report.plots import bars, lines_over_time

    out = {}
    leaves = [q for q in queues if not any(other.startswith(q + ".") for other in queues)]
    if leaves:
        out["waits"] = bars(leaves, {run.variant.label: [run.queues[q].wait_p95 if q in run.queues else None
                                                          for q in leaves] for run in runs},
                            title="p95 wait per leaf queue (jobs that started)", ylabel="seconds")
    end = max(r.result.end_time for r in runs)
    for q in queues[:MAX_QUEUE_PLOTS]:
        series = {}
        for run in runs:
            n = run.queues.get(q)
            if n is not None:
                series[run.variant.label] = n.share_series
        base = runs[0].queues.get(q)
        if base is not None:
            series["entitlement"] = base.entitlement_series
        out[f"queue_{q}"] = lines_over_time(series, end, title=f"queue {q}: share against entitlement",
                                            ylabel="dominant share", percent=True, dashed=True)
    return out


def html_report(runs: list[Run], doc: dict[str, Any], *, queues: list[str], title: str,
                svgs: dict[str, str]) -> str:
    """The page; ``svgs``: :func:`figures`."""
    parts = [f"<h1>{escape(title)}</h1>"]
    src = doc["source"]
    parts.append("<p>" + escape(", ".join(f"{k}: {v}" for k, v in src.items() if v)) +
                 f"; seed {doc['seed']}; every variant on the same jobs and task durations.</p>")
    parts.append("<h2>If you switch</h2>")
    if doc["verdicts"]:
        for label, lines in doc["verdicts"].items():
            parts.append(f"<h3>{escape(label)}</h3><pre>{escape(chr(10).join(lines))}</pre>")
    else:
        parts.append("<p>One variant only: nothing to compare.</p>")
    if "waits" in svgs:
        parts.append(plot(svgs["waits"]))
    for note in doc["notes"]:
        parts.append(f'<p class="note">{escape(note)}</p>')

    parts.append("<h2>Per queue</h2><p>wait: first task's start minus submit (jobs that started); "
                 "entitlement: H-DRF's hierarchical share guarantee among the demanding queues; "
                 "short: seconds demanding and more than 1% of the cluster below it (docs/whatif.md).</p>")
    header = ["queue", "variant", "jobs", "not started", "wait p50", "wait p95", "share (demanding)",
              "entitlement (demanding)", "short of entitlement", "preempted tasks", "work lost"]
    rows = []
    for q in queues:
        for run in runs:
            n = run.queues.get(q)
            if n is None:
                continue
            rows.append([escape(q), escape(run.variant.label), str(n.jobs), str(n.not_started), _seconds(n.wait_p50),
                         _seconds(n.wait_p95), percent_cell(n.share_while_demanding),
                         percent_cell(n.entitlement_while_demanding), _seconds(n.short_s), str(n.preempted_tasks),
                         _seconds(n.work_lost_s)])
    parts.append(table(header, rows, left=2))

    resources = list(runs[0].summary["utilization"])
    parts.append("<h2>Utilization per resource</h2>")
    parts.append(table(["variant", *resources, "makespan", "preemptions"],
                       [[escape(r.variant.label), *[percent_cell(r.summary["utilization"][res]) for res in resources],
                         _seconds(r.summary["makespan"]), str(r.result.preemptions or 0)] for r in runs]))

    parts.append("<h2>Fairness properties (audit)</h2>")
    when = doc.get("audit_snapshot_time")
    if when is None:
        parts.append("<p>No instant with demanding jobs: nothing to audit.</p>")
    else:
        parts.append(f"<p>Each policy's static allocation of the jobs demanding at t = {escape(f'{when:,.0f}')} s "
                     "(the busiest instant of the base run), checked by <code>fairshare audit</code>.</p>")
        audit_rows = []
        for run in runs:
            a = run.audit
            if a is None or run.variant.setting is not None:
                continue
            if not a["available"]:
                audit_rows.append([escape(run.variant.label), escape("no static allocation: " + a["reason"])])
            else:
                audit_rows.append([escape(run.variant.label),
                                   escape("violated: " + ", ".join(a["violated"]) if a["violated"]
                                          else "all properties checked hold")])
        parts.append(table(["policy", "verdict"], audit_rows, left=2))

    parts.append("<h2>Share against entitlement over time</h2>")
    for q in queues[:MAX_QUEUE_PLOTS]:
        parts.append(plot(svgs[f"queue_{q}"]))
    if len(queues) > MAX_QUEUE_PLOTS:
        parts.append(f'<p class="note">{len(queues) - MAX_QUEUE_PLOTS} more queues: see whatif.json.</p>')
    return page(title, "\n".join(parts))
