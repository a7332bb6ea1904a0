"""What every converter produces, and the per-job aggregation most of them share.

A converter streams its rows into a :class:`JobTable` (one entry per output job, one
task class per distinct demand and constraint set, a duration per task run), then
:func:`build_scenario` turns the table, the node list and the queue weights into a
scenario document (the contract's format). Job order in the output: by submit time,
then by first appearance in the trace (the FIFO tie rule of the scenario format), so
the same input and options always give the same bytes.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from fairshare.model.cluster import satisfies
from fairshare.model.resources import fits
from fairshare.traces.common import BadData, TraceError, durations_value

DemandKey = tuple[tuple[str, float], ...]
ConstraintKey = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass
class Conversion:
    """A converted trace: the scenario document plus what the summary reports."""

    kind: str
    scenario: dict[str, Any]
    stats: dict[str, Any]  # ordered: shown as "key: value" lines in the summary
    notes: list[str]
    bad: BadData


@dataclass
class CommonOptions:
    """Options every kind takes (``fairshare trace convert KIND --help``)."""

    window_start_s: float | None = None  # trace seconds; None = the trace's own start
    window_end_s: float | None = None  # None = the last event read
    limit: int | None = None  # data rows read per conversion (all inputs together)
    sample: float = 1.0  # fraction of jobs kept, by a stable hash of the job key
    seed: int = 0  # the sampling hash's salt


@dataclass
class _TaskClassAgg:
    name: str | None
    demand: dict[str, float]
    constraints: dict[str, list[str]] | None
    extra: dict[str, Any]
    durations_s: list[float] = field(default_factory=list)
    # a duration distribution ({dist: ...}) written instead of the runs' durations: a
    # timeless list has no durations of its own (alibaba-gpu2023 --duration exp:MEAN)
    duration_spec: dict[str, Any] | None = None


@dataclass
class _JobAgg:
    name: str
    queue: str | None
    submit_s: float
    order: int  # first appearance
    classes: dict[tuple, _TaskClassAgg] = field(default_factory=dict)


class JobTable:
    """Jobs aggregated while streaming: key -> queue, earliest submit, classes with durations.

    Memory is one entry per output job and one float per output task: what the scenario
    itself will hold, never a row of the input.
    """

    def __init__(self) -> None:
        self.jobs: dict[Any, _JobAgg] = {}
        self.tasks = 0
        # runs without an end yet: (class, index in its durations, run start); see close_censored
        self._censored: list[tuple[_TaskClassAgg, int, float]] = []

    @property
    def censored(self) -> int:
        return len(self._censored)

    def close_censored(self, window_end_s: float) -> None:
        """Give every run added with ``duration_s=None`` its duration up to the window end."""
        for cls, index, began in self._censored:
            cls.durations_s[index] = window_end_s - began

    def add_task(self, key: Any, *, name: str, queue: str | None, submit_s: float, demand: dict[str, float],
                 duration_s: float | None, constraints: dict[str, list[str]] | None = None, class_name: str | None = None,
                 extra: dict[str, Any] | None = None, run_start_s: float = 0.0, repeat: int = 1,
                 duration_spec: dict[str, Any] | None = None) -> None:
        """One task run. ``duration_s=None``: still running at the window end (censored);
        its duration becomes ``window_end - run_start_s`` in :meth:`close_censored`.
        ``repeat``: that many identical runs (a SWIM job's maps). ``duration_spec``: the
        class's duration is this distribution document (``{dist: exponential, mean: 60}``),
        sampled by the simulator per task; ``duration_s`` is then ignored."""
        job = self.jobs.get(key)
        if job is None:
            job = self.jobs[key] = _JobAgg(name, queue, submit_s, len(self.jobs))
        elif submit_s < job.submit_s:
            job.submit_s = submit_s
        ckey = (class_name, tuple(sorted(demand.items())),
                tuple(sorted((k, tuple(v)) for k, v in (constraints or {}).items())),
                tuple(sorted((extra or {}).items())), tuple(sorted((duration_spec or {}).items())))
        cls = job.classes.get(ckey)
        if cls is None:
            cls = job.classes[ckey] = _TaskClassAgg(class_name, dict(demand), constraints, dict(extra or {}),
                                                    duration_spec=dict(duration_spec) if duration_spec else None)
        if duration_spec is not None:
            duration_s = 0.0  # a placeholder per run: only the count of runs is used
        elif duration_s is None:
            self._censored.append((cls, len(cls.durations_s), run_start_s))
            duration_s = 0.0
        if repeat == 1:
            cls.durations_s.append(duration_s)
        else:
            cls.durations_s.extend([duration_s] * repeat)
        self.tasks += repeat

    def job_documents(self, resources: list[str]) -> list[dict[str, Any]]:
        """The ``jobs:`` list: by submit time, then first appearance."""
        out = []
        for job in sorted(self.jobs.values(), key=lambda j: (j.submit_s, j.order)):
            tasks = []
            for k, cls in enumerate(job.classes.values()):
                doc: dict[str, Any] = {}
                if cls.name is not None:
                    doc["class"] = cls.name
                elif len(job.classes) > 1:
                    doc["class"] = f"c{k}"
                doc["demand"] = {r: _num(cls.demand[r]) for r in resources if cls.demand.get(r, 0) > 0}
                doc["count"] = len(cls.durations_s)
                doc["duration"] = (dict(cls.duration_spec) if cls.duration_spec is not None
                                   else durations_value(cls.durations_s))
                if cls.constraints:
                    doc["constraints"] = cls.constraints
                doc.update(cls.extra)
                tasks.append(doc)
            entry: dict[str, Any] = {"name": job.name}
            if job.queue:
                entry["queue"] = job.queue
            entry["submit"] = _num(round(max(0.0, job.submit_s), 3))
            entry["tasks"] = tasks
            out.append(entry)
        return out


def _num(x: float) -> float | int:
    """Whole numbers as ints (shorter files); others as given."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else x


def queue_documents(paths: list[str], weights: dict[str, float]) -> list[dict[str, Any]]:
    """The ``queues:`` tree for dotted ``paths`` (parents implied), in first-seen order.

    ``weights`` maps a queue's *name* (any level) or dotted path to its weight; a path
    entry wins over a name entry; unlisted queues weigh 1.
    """
    root: dict[str, dict] = {}
    for path in paths:
        level = root
        for part in path.split("."):
            level = level.setdefault(part, {})

    def build(level: dict[str, dict], prefix: str) -> list[dict[str, Any]]:
        docs = []
        for name, children in level.items():
            path = f"{prefix}{name}"
            doc: dict[str, Any] = {"name": name}
            weight = weights.get(path, weights.get(name))
            if weight is not None and weight != 1:
                doc["weight"] = _num(weight)
            if children:
                doc["children"] = build(children, path + ".")
            docs.append(doc)
        return docs

    return build(root, "")


def build_scenario(resources: list[str], nodes: list[dict[str, Any]], table: JobTable,
                   weights: dict[str, float] | None = None, devices: list[str] | None = None) -> dict[str, Any]:
    jobs = table.job_documents(resources)
    queue_paths: list[str] = []
    seen: set[str] = set()
    for job in jobs:
        q = job.get("queue")
        if q and q not in seen:
            seen.add(q)
            queue_paths.append(q)
    cluster: dict[str, Any] = {"nodes": nodes}
    if devices and loader_accepts("cluster", "devices"):
        cluster["devices"] = devices
    doc: dict[str, Any] = {"resources": resources, "cluster": cluster}
    if queue_paths:
        doc["queues"] = queue_documents(queue_paths, weights or {})
    doc["jobs"] = jobs
    return doc


def loader_accepts(section: str, key: str) -> bool:
    """Whether the scenario loader of this build accepts ``key`` in ``section``.

    Placement extensions (``devices:`` on the cluster, ``max_per_node`` on a task class)
    are emitted only when the loader knows them, so a converted scenario always loads.
    """
    from fairshare.model import loader

    keys = {"cluster": getattr(loader, "CLUSTER_KEYS", set()), "task": getattr(loader, "TASK_KEYS", set())}[section]
    return key in keys


def parse_weights(text: str | None, flag: str) -> dict[str, float]:
    """``name=w,name=w`` -> dict; a clear error naming the flag otherwise."""
    if not text:
        return {}
    out: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = float("nan")
        if not sep or not name.strip() or not weight > 0 or weight == float("inf"):
            raise TraceError(f"{flag}: expected NAME=WEIGHT with a weight > 0, got {item!r}")
        out[name.strip()] = weight
    return out


def parse_capacity(text: str, flag: str, allowed: list[str]) -> dict[str, float]:
    """``cpu=8,memory=16`` -> dict over ``allowed`` resources (others are an error)."""
    out: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            amount = float(value)
        except ValueError:
            amount = float("nan")
        if not sep or name not in allowed or not amount >= 0 or amount == float("inf"):
            raise TraceError(f"{flag}: expected RESOURCE=AMOUNT with RESOURCE in {', '.join(allowed)} "
                             f"and AMOUNT >= 0, got {item!r}")
        out[name] = amount
    return out


def fits_some_node(demand: dict[str, float], nodes: list[dict[str, Any]],
                   constraints: dict[str, list[str]] | None = None) -> bool:
    """Whether some node of the scenario documents ``nodes`` can hold a task of ``demand``
    with ``constraints``: the loader's own tests (``model.resources.fits``,
    ``model.cluster.satisfies``, on attribute values as strings, as the loader reads them),
    so a converted task is one the loader accepts."""
    kinds = list(demand)
    need = [demand[r] for r in kinds]
    allowed = [(str(k), {str(v) for v in vals}) for k, vals in (constraints or {}).items()]
    for node in nodes:
        cap = node["capacity"]
        attrs = {str(k): str(v) for k, v in node.get("attributes", {}).items()}
        if fits(need, [cap.get(r, 0) for r in kinds]) and satisfies(attrs, allowed):
            return True
    return False


class NodeFitCache:
    """``fits_some_node`` memoized per (demand, constraints): traces repeat a few shapes."""

    def __init__(self, nodes: list[dict[str, Any]]):
        # identical node shapes need checking once
        shapes: dict[tuple, dict[str, Any]] = {}
        for n in nodes:
            key = (tuple(sorted(n["capacity"].items())), tuple(sorted(n.get("attributes", {}).items())))
            shapes.setdefault(key, n)
        self.nodes = list(shapes.values())
        self.cache: dict[tuple, bool] = {}

    def fits(self, demand: dict[str, float], constraints: dict[str, list[str]] | None = None) -> bool:
        key = (tuple(sorted(demand.items())), tuple(sorted((k, tuple(v)) for k, v in (constraints or {}).items())))
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = fits_some_node(demand, self.nodes, constraints)
        return hit


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("common options")
    g.add_argument("-o", "--output", required=True, metavar="SCENARIO",
                   help="the scenario file to write: JSON when it ends in .json (faster for big traces), else YAML")
    g.add_argument("--window", metavar="START:END", default=None,
                   help="keep the trace's activity between START and END seconds of trace time (either side may "
                        "be empty: '600:4200', ':86400'); tasks still running at END are censored there")
    g.add_argument("--limit", type=int, default=None, metavar="N",
                   help="read at most N data rows (all inputs together; for quick looks and tests)")
    g.add_argument("--sample", type=float, default=1.0, metavar="FRACTION",
                   help="keep this fraction of the jobs (0 < F <= 1), chosen by a stable hash of the job key "
                        "(deterministic for a given --seed)")
    g.add_argument("--seed", type=int, default=0, metavar="N", help="salt of the --sample hash (default 0)")
    g.add_argument("--strict", action="store_true",
                   help="stop at the first bad row (wrong columns, unparsable field, impossible demand, "
                        "truncated file) with exit status 2, instead of counting and skipping it")
    g.add_argument("--progress", action="store_true",
                   help="show a progress bar on stderr even when it is not a terminal")
    g.add_argument("--quiet", action="store_true", help="print nothing but errors")
    g.add_argument("--no-check", action="store_true",
                   help="do not load the result through the scenario loader before writing it (saves time on "
                        "very large traces; the converter's own checks of every row still apply)")


def common_options(ns: argparse.Namespace) -> CommonOptions:
    start = end = None
    if ns.window is not None:
        left, sep, right = ns.window.partition(":")
        try:
            start = float(left) if left.strip() else None
            end = float(right) if right.strip() else None
        except ValueError:
            raise TraceError(f"--window: expected START:END in seconds, got {ns.window!r}") from None
        if not sep or (start is not None and start < 0) or (start is not None and end is not None and end <= start):
            raise TraceError(f"--window: expected START:END with 0 <= START < END, got {ns.window!r}")
    if ns.limit is not None and ns.limit <= 0:
        raise TraceError(f"--limit: must be a positive whole number, got {ns.limit}")
    if not 0 < ns.sample <= 1:
        raise TraceError(f"--sample: must be in (0, 1], got {ns.sample}")
    return CommonOptions(start, end, ns.limit, ns.sample, ns.seed)
