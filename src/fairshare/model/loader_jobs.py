"""The scenario loader's ``jobs:`` section: jobs and their task classes.

A job has a ``name``, a ``queue`` (a dotted path of ``queues:``; absent: the root), a
``weight``, a ``submit`` time and ``tasks``, one entry per task class: ``demand`` (per
task), ``count`` (absent: unbounded), ``duration``, ``constraints`` (node attributes),
``max_per_node``; and ``gang`` (all tasks start together or none; every class needs a
``count``), ``pack`` (a gang's tasks on one node, ``node``, or on nodes sharing an
attribute's value, ``{attribute: rack}``; only with ``gang: true``) and ``priority``
(an integer, default 0: within the queue, higher first). :func:`parse_jobs` checks each field on its own; :func:`build_jobs`,
once the cluster is known, checks what needs it (a demanded resource the cluster has, a
node that can hold the task, device amounts) and makes the ``Job`` objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fairshare.model.cluster import Node, satisfies
from fairshare.model.jobs import PACK_NODE, Duration, Job, TaskClass
from fairshare.model.loader_cluster import device_amount_ok, vector
from fairshare.model.loader_fields import Collector, NoteResource, amounts, show
from fairshare.model.queues import ROOT
from fairshare.model.resources import Vector, fits
from fairshare.model.schema import DISTRIBUTIONS, JOB, TASK, keys

JOB_KEYS = keys(JOB)
TASK_KEYS = keys(TASK)
#: ``duration: {dist: KIND, ...}`` -> the parameters that kind needs
DURATION_KINDS = {kind: set(params) for kind, params in DISTRIBUTIONS.items()}

Constraints = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class ClassSpec:
    """One checked task class, its demand still by resource name."""

    name: str
    demand: dict[str, float]
    count: int | None
    duration: Duration
    constraints: Constraints
    max_per_node: int | None
    path: str  # jobs[i].tasks[k]
    checkpoint: float | None = None


@dataclass(frozen=True)
class JobSpec:
    """One checked job. Kept even when its name, weight or submit is bad (with
    placeholders), so its demands still get the cross-field checks; a spec with errors
    never reaches a Scenario (the loader raises)."""

    name: str
    queue: str
    weight: float
    submit: float
    classes: tuple[ClassSpec, ...]
    path: str  # jobs[i]
    gang: bool = False
    pack: tuple[str, str | None] | None = None
    priority: int = 0


def parse_jobs(col: Collector, jobs_raw: Any, queue_paths: set[str], note: NoteResource) -> list[JobSpec]:
    job_specs: list[JobSpec] = []
    if jobs_raw is None:
        return job_specs
    if not isinstance(jobs_raw, list):
        col.add("jobs", f"must be a list of jobs, got {show(jobs_raw)}")
        return job_specs
    job_names: set[str] = set()
    for i, jb in enumerate(jobs_raw):
        p = f"jobs[{i}]"
        if not isinstance(jb, Mapping):
            col.add(p, f"must be a mapping, got {show(jb)}")
            continue
        col.name_entry(p, jb.get("name"))  # (before any check, so each problem of the job names it)
        col.unknown_keys(jb, JOB_KEYS, p)
        name = col.name(jb.get("name", f"job{i}"), f"{p}.name")
        if name is not None:
            if name in job_names:
                col.add(f"{p}.name", f"duplicate job name {name!r}")
            job_names.add(name)
        queue = jb.get("queue", ROOT)
        if queue is None:
            queue = ROOT
        if not isinstance(queue, str):
            col.add(f"{p}.queue", f"must be a dotted queue path, got {show(queue)}")
            queue = ROOT
        elif queue != ROOT and queue not in queue_paths:
            known = ", ".join(sorted(queue_paths)) or "none defined"
            col.add(f"{p}.queue", f"unknown queue {queue!r} (queues: {known})")
        weight = col.number(jb.get("weight", 1), f"{p}.weight", positive=True)
        submit = col.number(jb.get("submit", 0), f"{p}.submit", minimum=0.0)
        classes = _task_classes(col, jb.get("tasks"), p, name, note)
        gang, pack = _gang(col, jb, p, classes)
        priority = col.number(jb.get("priority", 0), f"{p}.priority", minimum=None, integer=True)
        job_specs.append(JobSpec(name if name is not None else f"job{i}", queue,
                                 weight if weight is not None else 1.0, submit if submit is not None else 0.0,
                                 tuple(classes), p, gang, pack, int(priority) if priority is not None else 0))
    return job_specs


def _gang(col: Collector, jb: Mapping, p: str, classes: list[ClassSpec]) -> tuple[bool, tuple | None]:
    """``gang`` and ``pack`` of ``jobs[i]``: a gang's classes all need a count (an
    unbounded gang could never start all of its tasks); ``pack`` without ``gang: true``
    is an error (a lone task is always on one node: the key would say nothing)."""
    gang = jb.get("gang", False)
    if not isinstance(gang, bool):
        col.add(f"{p}.gang", f"must be true or false, got {show(gang)}")
        gang = False
    if gang:
        for cs in classes:
            if cs.count is None:
                col.add(f"{cs.path}.count", "is required in a gang (all of its tasks start together)")
            elif cs.count == 0:
                col.add(f"{cs.path}.count", "must be >= 1 in a gang")
    raw = jb.get("pack")
    if raw is None:
        return gang, None
    pack = None
    if raw == "node":
        pack = PACK_NODE
    elif isinstance(raw, Mapping) and set(raw) == {"attribute"} and isinstance(raw["attribute"], str) \
            and raw["attribute"]:
        pack = ("attribute", raw["attribute"])
    else:
        col.add(f"{p}.pack", f"must be node or {{attribute: NAME}}, got {show(raw)}")
    if pack is not None and not gang:
        col.add(f"{p}.pack", "applies to a gang only (add gang: true)")
    return gang, pack


def _task_classes(col: Collector, tasks: Any, p: str, job_name: str | None, note: NoteResource) -> list[ClassSpec]:
    """``jobs[i].tasks``: the classes whose demand is valid (the others are reported)."""
    classes: list[ClassSpec] = []
    if tasks is None:
        col.add(f"{p}.tasks", "is required (one entry per task class)")
        return classes
    if not isinstance(tasks, list) or not tasks:
        col.add(f"{p}.tasks", f"must be a non-empty list of task classes, got {show(tasks)}")
        return classes
    class_names: set[str] = set()
    for k, tc in enumerate(tasks):
        tp = f"{p}.tasks[{k}]"
        if not isinstance(tc, Mapping):
            col.add(tp, f"must be a mapping, got {show(tc)}")
            continue
        col.unknown_keys(tc, TASK_KEYS, tp)
        cname = tc.get("class", "main" if len(tasks) == 1 else f"class{k}")
        if not isinstance(cname, str) or not cname:
            col.add(f"{tp}.class", f"must be a non-empty string, got {show(cname)}")
            cname = f"class{k}"
        elif cname in class_names:
            col.add(f"{tp}.class", f"duplicate task class {cname!r} in job {job_name!r}")
        class_names.add(cname)
        if "demand" not in tc:
            col.add(f"{tp}.demand", "is required")
            continue
        demand = amounts(col, tc["demand"], f"{tp}.demand", note)
        if demand is not None and not any(v > 0 for v in demand.values()):
            col.add(f"{tp}.demand", "a task must demand a positive amount of some resource")
        count = tc.get("count")
        cnt = None
        if count is not None:
            c = col.number(count, f"{tp}.count", minimum=0.0, integer=True)
            cnt = int(c) if c is not None else None
        duration = _duration(col, tc.get("duration", 1), f"{tp}.duration")
        constraints = _constraints(col, tc.get("constraints"), f"{tp}.constraints")
        max_per_node = None
        if tc.get("max_per_node") is not None:
            mpn = col.number(tc["max_per_node"], f"{tp}.max_per_node", positive=True, integer=True)
            max_per_node = int(mpn) if mpn is not None else None
        checkpoint = None
        if tc.get("checkpoint") is not None:
            checkpoint = col.number(tc["checkpoint"], f"{tp}.checkpoint", positive=True)
        if demand is not None:
            classes.append(ClassSpec(cname, demand, cnt, duration, constraints, max_per_node, tp, checkpoint))
    return classes


def _duration(col: Collector, raw: Any, path: str) -> Duration:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        v = col.number(raw, path, positive=True)
        return Duration("fixed", (("value", v if v is not None else 1.0),))
    if isinstance(raw, list):
        if not raw:
            col.add(path, "a list of durations must not be empty")
            return Duration()
        values = [col.number(x, f"{path}[{i}]", positive=True) for i, x in enumerate(raw)]
        return Duration("list", (("values", tuple(v or 1.0 for v in values)),))
    if isinstance(raw, Mapping):
        kind = raw.get("dist")
        if not isinstance(kind, str) or kind not in DURATION_KINDS:  # (a mapping or list is unhashable)
            col.add(f"{path}.dist", f"must be one of {', '.join(DURATION_KINDS)}, got {show(kind)}")
            return Duration()
        needed = DURATION_KINDS[kind]
        col.unknown_keys(raw, needed | {"dist"}, path)
        params = []
        for key in sorted(needed):
            if key not in raw:
                col.add(f"{path}.{key}", f"is required for dist {kind}")
                continue
            positive = key not in ("mu", "low")
            v = col.number(raw[key], f"{path}.{key}", minimum=None if key == "mu" else 0.0, positive=positive)
            if v is not None:
                params.append((key, v))
        d = dict(params)
        if kind == "uniform" and "low" in d and "high" in d and d["high"] < d["low"]:
            col.add(f"{path}.high", f"must be >= low ({d['low']:g}), got {d['high']:g}")
        return Duration(kind, tuple(params))
    col.add(path, f"must be a number of seconds, a list, or {{dist: ...}}, got {show(raw)}")
    return Duration()


def _constraints(col: Collector, raw: Any, path: str) -> Constraints:
    """``constraints: {gpu_model: [V100, A100]}``: the task runs only on nodes whose
    attribute has one of the listed values."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        col.add(path, f"must be a mapping of node attribute to allowed values, got {show(raw)}")
        return ()
    out = []
    for key, allowed in raw.items():
        vals = allowed if isinstance(allowed, list) else [allowed]
        if not vals or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in vals):
            col.add(f"{path}.{key}", f"must be a value or a non-empty list of values, got {show(allowed)}")
            continue
        out.append((str(key), tuple(str(v) for v in vals)))
    return tuple(sorted(out))


def build_jobs(col: Collector, job_specs: list[JobSpec], resources: tuple[str, ...], nodes: tuple[Node, ...],
               capacity: Vector, pooled: bool, devices: tuple[int, ...]) -> list[Job]:
    """The ``Job`` objects, checking each task class against the cluster: device amounts,
    resources the cluster has, a node whose attributes allow it and that can hold it."""
    # Which task shapes some node can hold: checked once per distinct (demand,
    # constraints) against each distinct node shape, not per task class and node (a
    # converted trace has thousands of each).
    node_shapes = list({(nd.capacity, nd.attributes): None for nd in nodes})
    holds: dict[tuple, tuple[bool, bool]] = {}  # -> (some node eligible, one of those holds it)

    def placeable(d: tuple, constraints) -> tuple[bool, bool]:
        key = (d, constraints)
        if key not in holds:
            # placement's own tests, so the loader refuses no task placement could start
            # on an empty node
            eligible = [cap for cap, attrs in node_shapes if satisfies(attrs, constraints)]
            holds[key] = (bool(eligible), any(fits(d, cap) for cap in eligible))
        return holds[key]

    jobs = []
    for spec in job_specs:
        tcs = []
        for cs in spec.classes:
            tp = cs.path
            d = vector(cs.demand, resources)
            for r in devices:
                if not device_amount_ok(d[r]):
                    col.add(f"{tp}.demand.{resources[r]}",
                            f"{d[r]:g} is neither a fraction of one device (< 1) nor a whole number of devices")
            missing = [res for r, res in enumerate(resources) if d[r] > 0 and capacity[r] <= 0]
            for res in missing:
                col.add(f"{tp}.demand.{res}", f"the cluster has no {res}")
            any_eligible, fits_one = placeable(d, cs.constraints)
            if not any_eligible:
                col.add(f"{tp}.constraints", "no node satisfies these constraints")
            elif not missing and not fits_one:
                # (skipped when a resource is missing altogether: that error says it all)
                biggest = ", ".join(f"{res}={d[r]:g}" for r, res in enumerate(resources) if d[r] > 0)
                where = "the pooled capacity" if pooled else "any single node"
                col.add(f"{tp}.demand", f"no node can ever hold this task ({biggest} exceeds {where})")
            tcs.append(TaskClass(cs.name, d, cs.count, cs.duration, cs.constraints, cs.max_per_node, cs.checkpoint))
        job = Job(spec.name, spec.queue, spec.weight, spec.submit, tuple(tcs), spec.gang, spec.pack, spec.priority)
        if spec.gang and tcs and len(tcs) == len(spec.classes) and all(c.count for c in tcs):  # (no class: reported)
            problem = gang_room_problem(job, nodes)
            if problem is not None:
                col.add(spec.path, f"gang {spec.name!r} can never start: {problem}")
        jobs.append(job)
    return jobs


def gang_room_problem(job: Job, nodes: tuple[Node, ...]) -> str | None:
    """Why ``job``'s gang cannot fit the cluster at once even when it is empty, or None.

    The test is on summed amounts (each class's tasks within its eligible nodes, every
    task within the nodes of one pack group), so it refuses only gangs that surely never
    fit; one that fits in sum but not task by task (fragmentation) waits, and the
    simulator reports it unfinished."""
    if job.pack is None:
        groups = {"": nodes}
    elif job.pack == PACK_NODE:
        groups = {nd.name: (nd,) for nd in nodes}
    else:
        attribute = job.pack[1]
        groups = {}
        for nd in nodes:
            value = dict(nd.attributes).get(attribute)
            if value is not None:
                groups.setdefault(value, []).append(nd)
        if not groups:
            return f"no node has attribute {attribute!r}"
    m = len(job.classes[0].demand)
    for members in groups.values():
        total = [0.0] * m
        whole = True
        for cls in job.classes:
            eligible = [nd for nd in members if satisfies(nd.attributes, cls.constraints)]
            room = [sum(nd.capacity[r] for nd in eligible) for r in range(m)]
            per_node = cls.max_per_node if cls.max_per_node is not None else cls.count
            need = tuple((cls.count or 0) * d for d in cls.demand)
            if not fits(need, room) or len(eligible) * per_node < (cls.count or 0):
                whole = False
                break
            total = [a + b for a, b in zip(total, need)]
        union = {nd.name: nd for cls in job.classes for nd in members
                 if satisfies(nd.attributes, cls.constraints)}
        room = tuple(sum(nd.capacity[r] for nd in union.values()) for r in range(m))
        if whole and fits(tuple(total), room):
            return None
    if job.pack is None:
        where = "the cluster's nodes"
    elif job.pack == PACK_NODE:
        where = "any one node"
    else:
        where = f"the nodes of any one value of {job.pack[1]!r}"
    return f"its {job.total_count} tasks together exceed {where}"

