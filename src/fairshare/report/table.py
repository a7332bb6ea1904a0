"""Plain-text tables: the default human output of ``fairshare allocate``.

Only the standard library; the output is meant for a terminal or a log, so columns are
padded to line up and numbers are shortened (the JSON output keeps every digit).

Layout of :func:`format_allocation`:

* a header: policy (with its citation when known), mode, capacity, node count;
* one table in queue-tree order, pre-order, each row indented by its depth: a queue,
  then the jobs that sit directly in it, then its child queues. A job with more than
  one task class gets one further-indented row per class. Columns: weight, tasks, the
  allocation of every resource, the dominant share (as a percentage);
* a ``total`` row and a ``utilization`` row (percent of capacity per resource);
* with ``--discrete``, the placement of whole tasks per node (per node group when
  there are more than :data:`MAX_NODE_ROWS` nodes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fairshare.model.allocation import Allocation
from fairshare.model.queues import ROOT
from fairshare.model.resources import dominant_share
from fairshare.model.scenario import Scenario

#: above this many nodes the placement table is summarised by node group
MAX_NODE_ROWS = 40
_INDENT = "  "


def fmt_number(x: float) -> str:
    """Up to 4 decimals, trailing zeros dropped; tiny non-zero values in 4 significant digits."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    if _integral(x):
        return str(int(round(x)))
    if abs(x) < 1e-3:
        return f"{x:.4g}"
    text = f"{x:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_tasks(x: float) -> str:
    """Task counts: an integer when whole (to float noise), else 3 decimals."""
    return str(int(round(x))) if _integral(x) else f"{x:.3f}"


def fmt_percent(x: float) -> str:
    """A fraction as a percentage with 2 decimals, float noise (1.0000000000000002) hidden."""
    return f"{100.0 * x:.2f}%"


def _integral(x: float) -> bool:
    return abs(x - round(x)) <= 1e-9 * max(1.0, abs(x))


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, align: Sequence[str] | None = None,
                 separators: Sequence[int] = ()) -> str:
    """Align ``rows`` under ``header``; ``align`` is ``"l"`` or ``"r"`` per column.

    ``separators`` are row indices before which a dashed rule is drawn.
    """
    ncol = len(header)
    align = list(align or ["l"] + ["r"] * (ncol - 1))
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    out = [line(header), rule]
    for k, row in enumerate(rows):
        if k in separators:
            out.append(rule)
        out.append(line(row))
    return "\n".join(out)


def format_allocation(alloc: Allocation, scenario: Scenario, *, citation: str | None = None,
                      source: str | None = None) -> str:
    """The human-readable report of one static allocation (see the module docstring).

    ``source`` names the scenario in the header (default: the file it was read from).
    """
    parts = [_header(alloc, scenario, citation, source), "", _share_table(alloc, scenario)]
    if alloc.placement is not None:
        parts += ["", _placement_table(alloc, scenario)]
    if alloc.notes:
        parts += [""] + [f"note: {n}" for n in alloc.notes]
    return "\n".join(parts) + "\n"


def _header(alloc: Allocation, scenario: Scenario, citation: str | None, source: str | None) -> str:
    policy = alloc.policy + (f"  ({citation})" if citation else "")
    cap = ", ".join(f"{r} {fmt_number(c)}" for r, c in zip(alloc.resources, alloc.capacity))
    cluster = scenario.cluster
    if cluster.pooled:
        shape = "one pooled machine"
    else:
        groups = sorted({n.group for n in cluster.nodes})
        shape = f"{len(cluster.nodes)} node{'s' if len(cluster.nodes) != 1 else ''}"
        if len(groups) > 1:
            shape += f" in {len(groups)} groups"
    mode = alloc.mode + ("  (fluid tasks on the pooled capacity)" if alloc.mode == "divisible"
                         else "  (whole tasks placed on nodes)")
    lines = [
        f"policy:    {policy}",
        f"mode:      {mode}",
        f"capacity:  {cap}  ({shape})",
    ]
    if alloc.past_usage is not None:
        lines.append(f"history:   {_history_basis(alloc.past_usage.basis())}")
    source = source or (scenario.source if scenario.source != "<scenario>" else None)
    if source:
        lines.insert(0, f"scenario:  {source}")
    return "\n".join(lines)


def _history_basis(basis: dict) -> str:
    """How the past usage was given, for the header (allocate with ``usage:``)."""
    where = f"from {basis['source']}"
    if basis["given_as"] == "average":
        return f"average past allocations {where}; past share = their dominant share"
    half = basis["half_life"]
    decay = "no decay" if half == "inf" else f"half-life {fmt_number(half)} s"
    return (f"resource-seconds over {fmt_number(basis['over'])} s ({decay}) {where}, as average allocations; "
            f"past share = their dominant share")


def _share_table(alloc: Allocation, scenario: Scenario) -> str:
    names = alloc.resources
    header = ["queue / job", "weight", "tasks", *names, "dominant share"]
    past = alloc.past_usage
    # past usage given (allocate with usage:): its dominant share, one more column
    extra = (lambda vec: [fmt_percent(dominant_share(vec, alloc.capacity))]) if past is not None else \
        (lambda _vec: [])
    if past is not None:
        header.append("past share")
    rows: list[list[str]] = []
    jobs_by_queue: dict[str, list] = {}
    for job in scenario.jobs:
        jobs_by_queue.setdefault(job.queue, []).append(job)

    def job_rows(job, depth: int) -> None:
        ja = alloc.jobs.get(job.name)
        if ja is None:  # a policy reported no entry: show the job as empty, not crash
            rows.append([_INDENT * depth + job.name, fmt_number(job.weight), "-", *["-"] * len(names), "-",
                         *extra(past.jobs[job.name] if past else ())])
            return
        rows.append([_INDENT * depth + job.name, fmt_number(job.weight), fmt_tasks(ja.tasks),
                     *(fmt_number(a) for a in ja.allocation), fmt_percent(ja.dominant_share),
                     *extra(past.jobs[job.name] if past else ())])
        if len(job.classes) > 1:
            for cls in job.classes:
                n = ja.tasks_by_class.get(cls.name, 0.0)
                rows.append([_INDENT * (depth + 1) + f"[{cls.name}]", "", fmt_tasks(n),
                             *(fmt_number(n * d) for d in cls.demand), "", *([""] if past else [])])

    def visit(path: str, depth: int) -> None:
        if path != ROOT:
            node = scenario.queues[path]
            qa = alloc.queues.get(path)
            alloc_cells = [fmt_number(a) for a in qa.allocation] if qa else ["-"] * len(names)
            share = fmt_percent(qa.dominant_share) if qa else "-"
            rows.append([_INDENT * depth + node.name, fmt_number(node.weight), "", *alloc_cells, share,
                         *extra(past.queues[path] if past else ())])
            depth += 1
        for job in jobs_by_queue.get(path, []):
            job_rows(job, depth)
        for child in scenario.queues[path].children:
            visit(child, depth)

    visit(ROOT, 0)
    used = [sum(ja.allocation[r] for ja in alloc.jobs.values()) for r in range(len(names))]
    total_tasks = sum(ja.tasks for ja in alloc.jobs.values())
    footer_at = len(rows)
    blank = [""] if past else []
    rows.append(["total", "", fmt_tasks(total_tasks), *(fmt_number(u) for u in used), "", *blank])
    rows.append(["utilization", "", "", *(fmt_percent(u) for u in alloc.utilization), "", *blank])
    return render_table(header, rows, separators=[footer_at])


def _placement_table(alloc: Allocation, scenario: Scenario) -> str:
    placement = alloc.placement or {}
    nodes = scenario.cluster.nodes
    multiclass = {job.name for job in scenario.jobs if len(job.classes) > 1}
    job_rank = {job.name: k for k, job in enumerate(scenario.jobs)}

    def in_job_order(jobs: dict[str, dict[str, int]]) -> list[tuple[str, dict[str, int]]]:
        return sorted(jobs.items(), key=lambda item: job_rank.get(item[0], len(job_rank)))

    def counts(per_class: dict[str, int], job: str) -> tuple[str, str]:
        total = sum(per_class.values())
        detail = ", ".join(f"{c} {n}" for c, n in per_class.items()) if job in multiclass else ""
        return str(total), detail

    rows: list[list[str]] = []
    if len(nodes) <= MAX_NODE_ROWS:
        title = "placement (whole tasks per node)"
        header = ["node", "job", "tasks", "by class"]
        align = ["l", "l", "r", "l"]
        for node in nodes:
            jobs = placement.get(node.name, {})
            if not jobs:
                rows.append([node.name, "(idle)", "0", ""])
                continue
            for k, (job, per_class) in enumerate(in_job_order(jobs)):
                rows.append([node.name if k == 0 else "", job, *counts(per_class, job)])
    else:
        title = f"placement (whole tasks per node group; {len(nodes)} nodes)"
        header = ["node group", "nodes", "job", "tasks", "by class"]
        align = ["l", "r", "l", "r", "l"]
        group_nodes: dict[str, list[str]] = {}
        for node in nodes:
            group_nodes.setdefault(node.group or node.name, []).append(node.name)
        for group, members in group_nodes.items():
            merged: dict[str, dict[str, int]] = {}
            for name in members:
                for job, per_class in placement.get(name, {}).items():
                    slot = merged.setdefault(job, {})
                    for c, n in per_class.items():
                        slot[c] = slot.get(c, 0) + n
            if not merged:
                rows.append([group, str(len(members)), "(idle)", "0", ""])
                continue
            for k, (job, per_class) in enumerate(in_job_order(merged)):
                rows.append([group if k == 0 else "", str(len(members)) if k == 0 else "", job,
                             *counts(per_class, job)])
    if not multiclass:  # the "by class" column would be empty
        header, align, rows = header[:-1], align[:-1], [r[:-1] for r in rows]
    return title + "\n" + render_table(header, rows, align=align)
