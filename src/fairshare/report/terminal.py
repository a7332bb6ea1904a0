"""The terminal summaries of ``simulate`` and ``compare``: the headline of a run in one line
and, per queue, its mean dominant share against a common fair share and the longest
starvation of a job below it, so the papers' effects (H-DRF Sec. 3.3's starved job,
DFF's use of the MICs) show where the command is run, not only in the files.

Everything is read from the runs' summaries (``sim.metrics.summarize``); the fair share
is the reference policy's static allocation (``sim.metrics.queue_fair_shares``), one
yardstick for every policy of a comparison.
"""

from __future__ import annotations

from collections.abc import Sequence

from fairshare.report.table import fmt_number, fmt_percent, render_table

#: above this many queues the per-queue table keeps the top-level ones
MAX_QUEUE_ROWS = 20


def human_duration(seconds: float | None) -> str:
    """``45 s``, ``33.3 s``, ``0.025 s``, ``3m 19s``, ``1h 02m``, ``2d 03h``: seconds to a
    tenth under a minute (to a thousandth under one), then the two largest units (what a
    reader compares at a glance)."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{fmt_number(round(seconds, 1 if seconds >= 1 else 3))} s"
    whole = int(round(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s"


def cut_by_until(summary: dict) -> bool:
    """True when ``--until`` stopped the run with jobs unfinished: its end is a horizon,
    not a makespan."""
    return summary.get("until") is not None and not summary.get("all_finished", True)


def run_line(summary: dict, label: str = "") -> str:
    """One run's headline: its end (makespan, or horizon when cut by ``--until``), jobs
    finished, mean completion, utilization, the longest starvation (with the job) and,
    with preemption on, the tasks preempted and the work they lost."""
    ct = summary["completion_time"]
    finished = f"{ct['finished_jobs']}/{ct['finished_jobs'] + ct['unfinished_jobs']}"
    end = human_duration(summary["makespan"])
    # (exactly too, to compare with the files; and why the run stopped when it was cut)
    exact = [f"{fmt_number(round(summary['makespan'], 1))} s"] if summary["makespan"] >= 60 else []
    cut = cut_by_until(summary)
    why = " (" + ", ".join(exact + (["cut by --until"] if cut else [])) + ")" if exact or cut else ""
    head = f"{'horizon' if cut else 'makespan'} {end}{why}; jobs finished {finished}"
    util = ", ".join(f"{res} {fmt_percent(u)}" for res, u in summary["utilization"].items())
    parts = [head, f"mean completion {human_duration(ct['mean'])}", f"utilization {util}",
             f"longest starvation {_starvation(summary['starvation']['max_s'], summary['starvation']['job'])}"]
    if summary.get("preemptions") is not None:
        parts.append(f"preemptions {summary['preemptions']} (work lost {human_duration(summary['work_lost'])} "
                     f"of task time)")
    if summary.get("reserved_idle") is not None:  # (gang reservations were on)
        parts.append(reserved_idle_text(summary))
    return label + "; ".join(parts)


def reserved_idle_text(summary: dict) -> str:
    """``reserved idle cpu 428.2 resource-s``: what gang reservations held unused, per
    resource (summary.json ``reserved_idle``)."""
    return "reserved idle " + ", ".join(f"{res} {fmt_number(round(idle, 1))} resource-s"
                                        for res, idle in summary["reserved_idle"].items())


def _starvation(seconds: float, job: str | None) -> str:
    return "none" if not job or seconds <= 0 else f"{human_duration(seconds)} ({job})"


def queue_starvation(summary: dict, path: str) -> tuple[float, str | None]:
    """The longest starvation of a job at or below queue ``path``, with the job (the
    summary's jobs in scenario order; the first of equals)."""
    prefix = path + "."
    best: tuple[float, str | None] = (0.0, None)
    for name, job in summary["jobs"].items():
        queue = job.get("queue") or ""
        if (queue == path or queue.startswith(prefix)) and job["longest_starvation_s"] > best[0]:
            best = (job["longest_starvation_s"], name)
    return best


def _shown_queues(summary: dict) -> list[str]:
    paths = list(summary["queues"])
    return paths if len(paths) <= MAX_QUEUE_ROWS else [p for p in paths if "." not in p]


def queue_table(runs: Sequence[tuple[str, dict]], fair: tuple[str, dict[str, float]] | None) -> str:
    """Per queue (and per policy when there are several runs): the mean dominant share,
    the fair share (``fair``: (reference policy, queue -> dominant share); None: not
    computed), the longest starvation below the queue and, where measured, the time
    below fair share. Empty text for a scenario without queues or a summary without jobs
    (a streamed run's)."""
    summaries = [s for _, s in runs]
    if not summaries[0]["queues"] or not summaries[0]["jobs"]:
        return ""
    several = len(runs) > 1
    below = any("time_below_fair_share" in q for s in summaries for q in s["queues"].values())
    decayed = any("decayed_share" in q for s in summaries for q in s["queues"].values())
    header = ["queue", *(["policy"] if several else []), "mean dominant share",
              f"fair share ({fair[0]})" if fair else "fair share", "longest starvation",
              *(["below fair share"] if below else []), *(["decayed share at end"] if decayed else [])]
    rows, separators = [], []
    for path in _shown_queues(summaries[0]):
        if several and rows:
            separators.append(len(rows))
        for k, (policy, summary) in enumerate(runs):
            q = summary["queues"][path]
            shown_path = path if k == 0 else ""
            row = [shown_path, *([policy] if several else []), fmt_percent(q["mean_dominant_share"]),
                   fmt_percent(fair[1][path]) if fair and path in fair[1] else "-",
                   _starvation(*queue_starvation(summary, path))]
            if below:
                t = q.get("time_below_fair_share")
                row.append("-" if t is None else human_duration(t))
            if decayed:
                d = q.get("decayed_share")
                row.append("-" if d is None else fmt_percent(d))
            rows.append(row)
    align = ["l", *(["l"] if several else []), "r", "r", "l", *(["r"] if below else []), *(["r"] if decayed else [])]
    note = ("fair share: the queue's dominant share in the static allocation with every job demanding.\n"
            "longest starvation: the longest time a job below the queue had pending tasks and ran none."
            + ("\ndecayed share: the dominant share of the queue's decayed average past allocation (U / W)."
               if decayed else ""))
    return render_table(header, rows, align=align, separators=separators) + "\n" + note + "\n"


def simulate_text(summary: dict, fair: tuple[str, dict[str, float]] | None) -> str:
    """``simulate``'s terminal summary: the run line and its queue table."""
    table = queue_table([(summary["policy"], summary)], fair)
    return run_line(summary) + "\n" + (("\n" + table) if table else "")


def fairness_gap_line(runs: Sequence[tuple[str, dict]]) -> str:
    """Each run's fairness gap and the one static allocation they are all measured
    against (``fairness_reference_policy``, compare's ``--reference``: hdrf by default),
    so the figures compare across the policies. Empty text when no gap was measured."""
    gaps = [(policy, s.get("fairness_gap")) for policy, s in runs]
    if all(gap is None for _, gap in gaps):
        return ""
    reference = runs[0][1].get("fairness_reference_policy") or gaps[0][1]["static_policy"]
    shown = ", ".join(f"{policy} {'-' if gap is None or gap['value'] is None else fmt_number(round(gap['value'], 4))}"
                      for policy, gap in gaps)
    return f"fairness gap against {reference}'s static allocation (every policy; --reference): {shown}\n"


def compare_text(runs: Sequence[tuple[str, dict]], fair: tuple[str, dict[str, float]] | None) -> str:
    """``compare``'s terminal summary after the runs' lines: the fairness gaps against
    their common reference, then the per-queue table across the policies."""
    table = queue_table(runs, fair)
    text = fairness_gap_line(runs) + (("\n" + table) if table else "")
    return ("\n" + text) if text else ""
