"""Self-contained HTML reports of simulations (``report.html`` of ``simulate`` and ``compare``).

One file, no external resources: inline CSS and the plots as inline SVG (``report.plots``).
The report of one run has the utilization per resource over time, the dominant shares of
the top-level queues and (up to :data:`MAX_JOB_LINES` jobs) of the jobs over time, the
completion-time CDF and the summary tables. The comparison overlays the policies: the
utilization per resource, each top-level queue's dominant share against its fair share
(H-DRF's and DFF's effects are who gets what), the completion-time CDFs, the completion
time per job, and a table of makespan, completion times, utilization, starvation and
fairness gap. A plot with nothing to draw (no job finished) is a note instead; titles
say what the run shows, never a fixed count.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from fairshare.report import plots
from fairshare.report.table import fmt_number, fmt_percent
from fairshare.sim.simulator import CLUSTER, PREEMPT, SimResult

#: per-job share lines only up to this many jobs (more would be unreadable)
MAX_JOB_LINES = 20
#: per-job rows in the comparison's completion-time bar chart
MAX_JOB_BARS = 30
#: per-queue share plots in the comparison only up to this many top-level queues
MAX_QUEUE_PLOTS = 8

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.meta { color: #555; font-size: 0.9em; } .meta code { background: #f3f3f3; padding: 0 0.3em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 0.25em 0.6em; text-align: right; white-space: nowrap; }
th { background: #f6f6f6; } td.l, th.l { text-align: left; }
.plot { margin: 0.8em 0; } .plot svg { max-width: 100%; height: auto; }
.note { color: #8a5a00; } .small { font-size: 0.85em; color: #555; }
"""


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _num(x: float | None, unit: str = "") -> str:
    if x is None:
        return "&ndash;"
    return _e(fmt_number(float(x)) + unit)


def _pct(x: float | None) -> str:
    return "&ndash;" if x is None else _e(fmt_percent(float(x)))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """``rows`` cells are already HTML; the first ``left`` columns are left-aligned."""
    head = "".join(f'<th class="l">{_e(h)}</th>' if i < left else f"<th>{_e(h)}</th>" for i, h in enumerate(header))
    body = "\n".join("<tr>" + "".join(f'<td class="l">{c}</td>' if i < left else f"<td>{c}</td>"
                                      for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{_e(title)}</title>\n'
            f"<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _plot(svg: str) -> str:
    return f'<div class="plot">{svg}</div>'


def _nothing_finished(opts) -> str:
    """The note drawn instead of completion-time plots when no job finished."""
    why = f" (the run was cut at --until {fmt_number(opts.until)} s)" if opts.until is not None else ""
    return f'<p class="note">Nothing finished in this run{_e(why)}: no completion times to plot.</p>'


# --- series from a run ----------------------------------------------------------------------

def entity_series(result: SimResult) -> dict[tuple[str, str], tuple[list[float], list[float], list[tuple]]]:
    """(kind, entity) -> (times, dominant shares, allocations) of its rows."""
    out: dict[tuple[str, str], tuple[list[float], list[float], list[tuple]]] = {}
    for t, kind, entity, _running, share, alloc in result.rows:
        s = out.get((kind, entity))
        if s is None:
            s = out[(kind, entity)] = ([], [], [])
        s[0].append(t)
        s[1].append(share)
        s[2].append(alloc)
    return out


def utilization_series(result: SimResult, series=None) -> dict[str, tuple[list[float], list[float]]]:
    """Per resource: (times, allocated / capacity up at that time) of the cluster."""
    series = series if series is not None else entity_series(result)
    times, _shares, allocs = series.get(("cluster", CLUSTER), ([0.0], [0.0], [(0.0,) * result.scenario.m]))
    caps = result.capacity_changes
    # merge the cluster's rows with the capacity changes (both in time order)
    merged_t: list[float] = []
    merged_v: list[list[float]] = [[] for _ in result.scenario.resources]
    i = j = 0
    alloc = (0.0,) * result.scenario.m
    cap = caps[0][1]
    while i < len(times) or j < len(caps):
        t = min(times[i] if i < len(times) else float("inf"), caps[j][0] if j < len(caps) else float("inf"))
        while i < len(times) and times[i] == t:
            alloc = allocs[i]
            i += 1
        while j < len(caps) and caps[j][0] == t:
            cap = caps[j][1]
            j += 1
        merged_t.append(t)
        for r in range(result.scenario.m):
            merged_v[r].append(alloc[r] / cap[r] if cap[r] > 0 else 0.0)
    return {res: (merged_t, merged_v[r]) for r, res in enumerate(result.scenario.resources)}


# --- one run ----------------------------------------------------------------------------------

def run_report(result: SimResult, summary: dict, *, scenario_name: str, citation: str = "") -> str:
    sc = result.scenario
    end = result.end_time
    names = sc.resources
    series = entity_series(result)
    parts: list[str] = []
    opts = result.options
    params = ", ".join(f"{k}={v}" for k, v in result.params.items())
    parts.append(f"<h1>fairshare simulate: {_e(result.policy)}</h1>")
    parts.append('<p class="meta">'
                 f"scenario <code>{_e(scenario_name)}</code> &middot; policy <code>{_e(result.policy)}</code>"
                 + (f" ({_e(params)})" if params else "")
                 + (f"<br>{_e(citation)}" if citation else "")
                 + f"<br>seed {_e(opts.seed)} &middot; until {_e(opts.until if opts.until is not None else 'all done')}"
                 f" &middot; placement {_e(opts.placement)}{' + headroom' if opts.headroom else ''}"
                 f" &middot; {len(sc.cluster.nodes)} node(s) &middot; {len(sc.jobs)} job(s)"
                 f" &middot; {result.tasks_completed} task(s) completed</p>")
    for note in result.notes:
        parts.append(f'<p class="note">{_e(note)}</p>')

    # headline table
    ct = summary["completion_time"]
    starv = summary["starvation"]
    gap = summary.get("fairness_gap")
    head_rows = [
        ["makespan", _num(summary["makespan"], " s")],
        ["jobs finished", _e(f"{ct['finished_jobs']} of {ct['finished_jobs'] + ct['unfinished_jobs']}")],
        ["mean completion time", _num(ct["mean"], " s")],
        ["p95 completion time", _num(ct["p95"], " s")],
        *[[f"utilization {res}", _pct(summary["utilization"][res])] for res in names],
        ["longest starvation", _num(starv["max_s"], " s") + (f" ({_e(starv['job'])})" if starv["job"] else "")],
    ]
    if gap is not None:
        head_rows.append(["fairness gap", _num(gap["value"]) + f' <span class="small">vs static '
                                                                f'{_e(gap["static_policy"])}</span>'])
    for res, idle in (summary.get("reserved_idle") or {}).items():  # (gang reservations were on)
        head_rows.append([f"reserved idle {_e(res)}", _num(idle, " resource-s")])
    head_rows.append(["scheduling decisions", _e(summary["decisions"])])
    parts.append("<h2>Summary</h2>")
    parts.append(_table(["metric", "value"], head_rows))

    parts.append("<h2>Utilization</h2>")
    parts.append(_plot(plots.lines_over_time(utilization_series(result, series), end,
                                             title="Cluster utilization per resource", ylabel="allocated (% of capacity up)",
                                             percent=True)))

    # fair-share preemption: the instants tasks were preempted, marked on the share plots
    marks = [row[0] for row in result.rows if row[1] == PREEMPT]
    top = [p for p in sc.queues.paths if "." not in p]
    if top:
        q_series = {p: (series[("queue", p)][0], series[("queue", p)][1]) for p in top if ("queue", p) in series}
        parts.append("<h2>Dominant share per top-level queue</h2>")
        parts.append(_plot(plots.lines_over_time(q_series, end, title="Dominant share of each top-level queue",
                                                 ylabel="dominant share (%)", percent=True, marks=marks)))
    if result.decayed_usage:
        parts.append("<h2>Decayed usage per top-level queue</h2>")
        parts.append(_plot(decayed_usage_plot(result, top or list(sc.queues.paths))))
    below = {p: q["time_below_fair_share"] for p, q in summary["queues"].items() if "time_below_fair_share" in q}
    if below:
        parts.append("<h2>Time below fair share</h2>")
        parts.append(_plot(plots.bars(list(below), {result.policy: list(below.values())},
                                      title="Seconds each queue spent below its fair share (by more than the "
                                            "tolerance) while it had demand", ylabel="seconds")))
        if summary.get("preemptions") is not None:
            parts.append(f'<p class="small">{summary["preemptions"]} task(s) preempted, '
                         f'{_num(summary["work_lost"])} task-seconds of work lost.</p>')
    submitted = [j.name for j in sc.jobs if ("job", j.name) in series]
    if submitted and len(submitted) <= MAX_JOB_LINES:
        j_series = {n: (series[("job", n)][0], series[("job", n)][1]) for n in submitted}
        parts.append("<h2>Dominant share per job</h2>")
        parts.append(_plot(plots.lines_over_time(j_series, end, title="Dominant share of each job",
                                                 ylabel="dominant share (%)", percent=True, marks=marks)))
    elif submitted:
        parts.append(f'<p class="small">{len(submitted)} jobs: per-job share lines are drawn only up to '
                     f"{MAX_JOB_LINES} jobs; see timeline.csv.</p>")

    parts.append("<h2>Job completion times</h2>")
    times = [j["completion_time"] for j in summary["jobs"].values() if j["completion_time"] is not None]
    if times:
        parts.append(_plot(plots.cdf({result.policy: times}, title="Completion-time CDF (finish - submit)",
                                     xlabel="completion time (s)", totals={result.policy: len(sc.jobs)})))
    else:
        parts.append(_nothing_finished(opts))

    parts.append("<h2>Jobs</h2>")
    job_rows = []
    for name, j in summary["jobs"].items():
        job_rows.append([_e(name), _e(j.get("queue") or "(root)"), _num(j["submit"]), _num(j["start"]),
                         _num(j["finish"]), _num(j["completion_time"]),
                         _e(f"{j['tasks_completed']}" + (f" / {j['tasks_total']}" if j.get("tasks_total") is not None
                                                         else " / unbounded")),
                         _num(j["mean_running_tasks"]),
                         *[_num(j["mean_allocation"][res]) for res in names],
                         _num(j.get("longest_starvation_s"))])
    parts.append(_table(["job", "queue", "submit (s)", "start (s)", "finish (s)", "completion (s)", "tasks done",
                         "mean running", *[f"mean {res}" for res in names], "longest starvation (s)"], job_rows, left=2))
    if summary["queues"]:
        parts.append("<h2>Queues</h2>")
        q_rows = [[_e(p), *[_num(q["mean_allocation"][res]) for res in names], _pct(q["mean_dominant_share"])]
                  for p, q in summary["queues"].items()]
        parts.append(_table(["queue", *[f"mean {res}" for res in names], "mean dominant share"], q_rows))
    parts.append('<p class="small">Means are time-weighted over each entity\'s active span (a job: submit to '
                 "finish; a queue: first submit to last finish below it). Utilization: allocated resource-seconds "
                 "over the resource-seconds of the nodes up, on [0, makespan]. Definitions: docs/simulation.md."
                 "</p>")
    return _page(f"fairshare simulate {result.policy}: {scenario_name}", "\n".join(parts))


def decayed_usage_plot(result: SimResult, paths: Sequence[str], end: float | None = None, who: str = "") -> str:
    """Each queue's decayed share (the dominant share of its decayed average past
    allocation, ``U / W``; decayed_usage.csv) at the run's instants, up to ``end`` (the
    run's end by default); ``who`` names the policy in a comparison."""
    series: dict[str, tuple[list[float], list[float]]] = {}
    for t, queue, decayed, _effective, _usage in result.decayed_usage or ():
        if queue in paths:
            times, values = series.setdefault(queue, ([], []))
            times.append(t)
            values.append(decayed)
    return plots.samples_over_time({p: series[p] for p in paths if p in series},
                                   result.end_time if end is None else end,
                                   title=f"Decayed share of each top-level queue{who} (U / W over capacity)",
                                   ylabel="decayed share (%)", percent=True)


# --- several policies ----------------------------------------------------------------------------

def compare_report(runs: list[tuple[str, SimResult, dict]], *, scenario_name: str,
                   fair_shares: tuple[str, dict[str, float]] | None = None) -> str:
    """``runs``: (policy, result, summary) in the order given on the command line;
    ``fair_shares``: (reference policy, queue -> dominant share) drawn as a flat line on
    each queue's share plot (``sim.metrics.queue_fair_shares``), None for none."""
    first = runs[0][1]
    sc = first.scenario
    names = sc.resources
    opts = first.options
    parts = [f"<h1>fairshare compare: {_e(', '.join(p for p, _, _ in runs))}</h1>",
             f'<p class="meta">scenario <code>{_e(scenario_name)}</code> &middot; seed {_e(opts.seed)} &middot; '
             f"until {_e(opts.until if opts.until is not None else 'all done')} &middot; placement "
             f"{_e(opts.placement)}{' + headroom' if opts.headroom else ''} &middot; {len(sc.cluster.nodes)} node(s)"
             f" &middot; {len(sc.jobs)} job(s). Same scenario and seed for every policy; the n-th task of a job's "
             f"class has the same sampled duration under every policy.</p>"]
    rows = []
    for policy, _result, summary in runs:
        ct = summary["completion_time"]
        st = summary["starvation"]
        gap = summary.get("fairness_gap") or {}
        rows.append([f'<a href="{_e(policy)}/report.html">{_e(policy)}</a>', _num(summary["makespan"]),
                     _e(f"{ct['finished_jobs']}/{ct['finished_jobs'] + ct['unfinished_jobs']}"),
                     _num(ct["mean"]), _num(ct["p95"]),
                     *[_pct(summary["utilization"][res]) for res in names],
                     _num(st["max_s"]) + (f" ({_e(st['job'])})" if st["job"] else ""),
                     _num(gap.get("value")) + (f' <span class="small">vs {_e(gap["static_policy"])}</span>'
                                               if gap.get("static_policy") else ""),
                     _e(summary["decisions"])])
    parts.append("<h2>Side by side</h2>")
    parts.append(_table(["policy", "makespan (s)", "jobs finished", "mean completion (s)", "p95 completion (s)",
                         *[f"util. {res}" for res in names], "longest starvation (s)", "fairness gap",
                         "decisions"], rows))
    parts.append('<p class="small">Longest starvation: the longest time a job was demanding (submitted, '
                 "unfinished, tasks pending) while running no task; the job in brackets. Fairness gap: "
                 "time average of the mean |dominant share - static-allocation dominant share| over the demanding "
                 "jobs (the static allocation's policy is named). Each policy's own report is linked.</p>")

    end = max(r.end_time for _, r, _ in runs)
    util = {p: utilization_series(r) for p, r, _ in runs}
    parts.append("<h2>Utilization per resource</h2>")
    for res in names:
        parts.append(_plot(plots.lines_over_time({p: util[p][res] for p, _, _ in runs}, end,
                                                 title=f"{res} utilization", ylabel=f"{res} allocated (%)",
                                                 percent=True, height=2.6, dashed=True)))
    parts.extend(_queue_share_plots(runs, end, fair_shares))
    decayed = [(p, r) for p, r, _ in runs if r.decayed_usage]
    if decayed:
        parts.append("<h2>Decayed usage per top-level queue</h2>")
        top = [q for q in sc.queues.paths if "." not in q] or list(sc.queues.paths)
        for policy, result in decayed:
            parts.append(_plot(decayed_usage_plot(result, top, end, f" under {policy}")))
    parts.append("<h2>Job completion times</h2>")
    samples = {p: [j["completion_time"] for j in s["jobs"].values() if j["completion_time"] is not None]
               for p, _, s in runs}
    if not any(samples.values()):
        parts.append(_nothing_finished(opts))
    else:
        parts.append(_plot(plots.cdf(samples, title="Completion-time CDF per policy", xlabel="completion time (s)",
                                     totals={p: len(sc.jobs) for p, _, _ in runs})))
    if any(samples.values()) and len(sc.jobs) <= MAX_JOB_BARS:
        jobs = [j.name for j in sc.jobs]
        unfinished = sum(s["jobs"][n]["completion_time"] is None for _, _, s in runs for n in jobs)
        title = "Completion time per job" + (f" ({unfinished} unfinished drawn at 0)" if unfinished else "")
        parts.append(_plot(plots.bars(jobs, {p: [s["jobs"][n]["completion_time"] for n in jobs] for p, _, s in runs},
                                      title=title, ylabel="completion time (s)")))
    return _page(f"fairshare compare: {scenario_name}", "\n".join(parts))


def _queue_share_plots(runs: list[tuple[str, SimResult, dict]], end: float,
                       fair_shares: tuple[str, dict[str, float]] | None) -> list[str]:
    """One plot per top-level queue (up to :data:`MAX_QUEUE_PLOTS`): its dominant share
    over time under each policy, and its fair share as a flat line."""
    top = [p for p in runs[0][1].scenario.queues.paths if "." not in p]
    if not top:
        return []
    series = {policy: entity_series(result) for policy, result, _ in runs}
    parts = ["<h2>Dominant share per top-level queue</h2>"]
    for path in top[:MAX_QUEUE_PLOTS]:
        lines = {policy: (s[("queue", path)][0], s[("queue", path)][1])
                 for policy, s in series.items() if ("queue", path) in s}
        if fair_shares is not None and path in fair_shares[1]:
            lines[f"fair share ({fair_shares[0]})"] = ([0.0], [fair_shares[1][path]])
        parts.append(_plot(plots.lines_over_time(lines, end, title=f"Dominant share of {path}",
                                                 ylabel="dominant share (%)", percent=True, height=2.6,
                                                 dashed=True)))
    if len(top) > MAX_QUEUE_PLOTS:
        parts.append(f'<p class="small">{len(top)} top-level queues: share plots only for the first '
                     f"{MAX_QUEUE_PLOTS}; see each policy's timeline.csv.</p>")
    parts.append('<p class="small">Fair share: the queue\'s dominant share in the static allocation with every '
                 "job demanding, the same line for every policy.</p>" if fair_shares else "")
    return parts


# --- the page parts other reports build on (``whatif.report``) ---------------------------------------
escape, number_cell, percent_cell, table, page, plot = _e, _num, _pct, _table, _page, _plot
