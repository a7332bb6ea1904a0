"""The live service's inputs: the CLUSTER.yaml config and submitted job documents.

Both are validated by the scenario loader (``model.loader.parse_scenario``; a request's
jobs by ``model.loader.parse_jobs_on``, the same checks against the service's own nodes
and queues, which are not parsed again), so a job sent to ``POST /v1/jobs`` is checked
exactly like a job in a scenario file and its problems carry the same paths
(``jobs[0].tasks[0].demand.gpu``). What only the live service needs
is checked here: a ``command`` on every task class, a finite ``count``, demands the
executor can represent (``DEMAND_RESOLUTION``), and the ``auth`` section. The config's
queue ``guarantee``/``limit``, its ``preemption:`` and ``fairness:`` sections are the scenario loader's
too (same checks, same messages and field paths): the bounds travel beside the queue
entries (``QueueBounds``) so that job validation (``parse_jobs``) checks jobs against the
queue tree without re-checking the guarantees against the nodes up at that moment.

``request_problems`` holds the limits of what one tenant's request may carry (sizes,
weights, text that is valid Unicode without NUL characters), checked at the edge before
anything else looks at a request, so no request can make the service misbehave for the
other tenants (docs/live.md, "Limits of a request").
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fairshare.live.auth import AUTH, AuthConfig, parse_auth
from fairshare.model import schema
from fairshare.model.cluster import Node
from fairshare.model.errors import FieldError, ScenarioError
from fairshare.model.jobs import TaskClass
from fairshare.model.loader import parse_jobs_on, parse_scenario, read_document
from fairshare.model.queues import ROOT, QueueTree
from fairshare.model.scenario import GangsConfig, PreemptionConfig
from fairshare.model.schema import Boolean, Either, ListOf, MapOf, Number, Obj, Text, keys

#: one request creates at most this many task rows (a bound on what one call can cost)
MAX_TASKS_PER_REQUEST = 100_000
#: Ray keeps resource amounts in fixed point with 4 decimals: a demand above 0 that
#: rounds to 0 there is no demand to Ray, which then refuses every start of the task
#: (and the task would be re-queued forever). Demands are 0 or at least this.
DEMAND_RESOLUTION = 0.0001
#: a job's weight is in (0, MAX_WEIGHT]: shares divide by weights, and a weight of 1e308
#: makes every other job's share 0 (or overflows a sum of weights to inf)
MAX_WEIGHT = 1e6
#: characters in a job name, a task class name, a queue path or a constraint key or value
MAX_NAME_CHARS = 256
#: characters in one task class's command (the string, or all arguments of the list)
MAX_COMMAND_CHARS = 64 * 1024
#: bytes in one request body (checked from the headers and while reading, before parsing)
MAX_BODY_BYTES = 8 * 1024 * 1024
#: tasks of one class, and jobs of one request
MAX_TASKS_PER_CLASS = 100_000
MAX_JOBS_PER_REQUEST = 1000

# --- the documents, described once (``model.schema``: the scenario's parts with the live
# service's limits): the parsers below take their keys from here, ``fairshare schema
# config|jobs`` and the OpenAPI document render them
CONFIG = Obj("Config", {
    "resources": schema.RESOURCES,
    "cluster": schema.CLUSTER.but(drop=("capacity",), required=("nodes",), exactly_one_of=(),
                                  description="the nodes (the live service needs discrete nodes)"),
    "queues": schema.SCENARIO.fields["queues"],
    "auth": AUTH,
    "preemption": schema.PREEMPTION,
    "gangs": schema.GANGS,
    "fairness": schema.FAIRNESS,
}, "the config of fairshare serve (docs/live.md)", required=("cluster", "auth"))
_NAME = dict(max_length=MAX_NAME_CHARS)
LIVE_TASK = schema.TASK.but("LiveTaskClass", fields={
    "class": replace(schema.TASK.fields["class"], **_NAME),
    "demand": replace(schema.AMOUNTS, description=f"per task, e.g. {{cpu: 1, memory: 4}}; omitted resources are "
                                                  f"0; each amount 0 or at least {DEMAND_RESOLUTION:g}"),
    "count": Number("tasks of this class", minimum=0, maximum=MAX_TASKS_PER_CLASS, integer=True),
    "command": Either((Text("split like a shell would, run without one (with shell: through /bin/sh -c)",
                            pattern=r"\S", max_length=MAX_COMMAND_CHARS),
                       ListOf(Text("an argument", min_length=0), "the program and its arguments", min_items=1,
                              first=Text("the program"))),
                      f"what each task runs: a string or a list of arguments ({MAX_COMMAND_CHARS} characters "
                      f"in all at most); required, except in a job with `ray:` (its tasks are the bundles of "
                      f"the program's placement group and run nothing themselves)"),
    "shell": Boolean("run the command string through /bin/sh -c", default=False),
    "constraints": MapOf(schema.TASK.fields["constraints"].values, schema.TASK.fields["constraints"].description,
                         key_max_length=MAX_NAME_CHARS, nullable=True),
}, required=("demand", "count"))
RAY_PROGRAM = Obj("RayProgram", {
    "entrypoint": Text("`python SCRIPT [ARGS]` or `python -m MODULE [ARGS]`: run in-process by the program's "
                       "driver actor, inside its placement group (docs/live.md, \"Ray programs\")",
                       pattern=r"\S", max_length=MAX_COMMAND_CHARS),
    "runtime_env": Obj("RayRuntimeEnv", {
        "working_dir": Text("a directory, uploaded by serve to the cluster; relative: to serve's working "
                            "directory (fairshare submit makes it absolute against the job file's)"),
        "pip": ListOf(Text("a requirement"), "packages pip installs for the program"),
        "env_vars": MapOf(Text("a value", min_length=0), "environment variables of the driver and its tasks"),
    }, "Ray's runtime environment of the driver (and of every task and actor it creates)"),
}, "the job's work is a Ray program, not commands: always a gang; its tasks are its placement group's "
   "bundles", required=("entrypoint",))
LIVE_JOB = schema.JOB.but("LiveJob", fields={
    "name": replace(schema.JOB.fields["name"], **_NAME),
    "queue": replace(schema.JOB.fields["queue"], description="its queue's dotted path; granted to the tenant",
                     **_NAME),
    "weight": replace(schema.JOB.fields["weight"], maximum=MAX_WEIGHT),
    "submit": replace(schema.JOB.fields["submit"], description="accepted for scenario compatibility; "
                                                                "ignored by serve"),
    "tasks": ListOf(LIVE_TASK, "one entry per task class", min_items=1),
    "ray": RAY_PROGRAM,
}, items_require_unless=(("tasks", "command", "ray"),))
JOBS = Obj("JobFile", {
    "jobs": ListOf(LIVE_JOB, "the jobs to submit", min_items=1, max_items=MAX_JOBS_PER_REQUEST),
}, "a job file (fairshare submit) or the body of POST /v1/jobs", required=("jobs",))
CONFIG_KEYS = keys(CONFIG)
JOBS_KEYS = keys(JOBS)
#: the entries of a queue tree: (dotted path, weight, order), parents before children
QueueEntries = tuple[tuple[str, float, str], ...]
#: a guarantee or a limit: (resource name, amount) pairs, sorted by name (``QueueNode``'s form)
BoundPairs = tuple[tuple[str, float], ...]
#: the queues that have a guarantee or a limit: (path, guarantee, limit), sorted by path
QueueBounds = tuple[tuple[str, BoundPairs, BoundPairs], ...]


@dataclass(frozen=True)
class LiveConfig:
    resources: tuple[str, ...]
    nodes: tuple[Node, ...]
    queues: QueueEntries
    auth: AuthConfig
    source: str = "<config>"
    bounds: QueueBounds = ()
    #: fair-share preemption (the config's ``preemption:`` section); None: off
    preemption: PreemptionConfig | None = None
    #: gang reservations (the config's ``gangs:`` section, ``engine.reserve``); None: off
    gangs: GangsConfig | None = None
    #: the half-life of decayed usage (the config's ``fairness:`` section, ``live.decay``):
    #: 0 no memory (the instantaneous policy), ``math.inf`` cumulative usage
    half_life: float = 0.0

    def tree(self) -> QueueTree:
        return build_tree(self.queues, self.bounds)


def build_tree(entries: QueueEntries, bounds: QueueBounds = ()) -> QueueTree:
    """The queue tree of these entries, with the guarantees and limits of ``bounds``."""
    return QueueTree.build(entries, "fair", bounds_mapping(bounds))


def bounds_mapping(bounds: QueueBounds) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
    """``QueueTree.build``'s form of the bounds: path -> (guarantee, limit) mappings."""
    return {path: (dict(g), dict(lim)) for path, g, lim in bounds}


def tree_bounds(tree: QueueTree) -> QueueBounds:
    """The bounds a queue tree carries, as ``QueueBounds``."""
    return tuple(sorted((n.path, n.guarantee, n.limit) for n in tree if n.path != ROOT and (n.guarantee or n.limit)))


def load_config(path: str | Path) -> LiveConfig:
    return parse_config(read_document(path, what="config file"), str(path))


def parse_config(data: Any, source: str = "<config>") -> LiveConfig:
    if not isinstance(data, Mapping):
        raise ScenarioError(FieldError("", "the config must be a mapping with cluster, queues, auth"), source)
    errors: list[FieldError] = []
    for key in data:
        if key not in CONFIG_KEYS:
            errors.append(FieldError(str(key), f"unknown key (allowed: {', '.join(sorted(CONFIG_KEYS))})"))
    doc = {k: data[k] for k in ("resources", "cluster", "queues", "preemption", "gangs", "fairness") if k in data}
    doc["jobs"] = []
    try:
        scenario = parse_scenario(doc, source)
    except ScenarioError as exc:
        errors.extend(exc.errors)
        # still check auth against the queues that parsed, so every problem shows at once
        scenario = None
    queue_paths = set(scenario.queues.paths) if scenario is not None else set()
    auth = parse_auth(data.get("auth"), queue_paths, errors if scenario is not None else [])
    if errors:
        raise ScenarioError(errors, source)
    assert scenario is not None
    if scenario.cluster.pooled:
        raise ScenarioError(FieldError("cluster", "the live service needs discrete `nodes`, not one pooled "
                                                  "`capacity` (tasks run on real nodes)"), source)
    remembering = [n.path for n in scenario.queues if n.half_life is not None]
    if remembering:  # (like the top-level fairness: section, not in CONFIG_KEYS)
        raise ScenarioError(FieldError("queues", f"queue {remembering[0]!r}: the live service has no decayed usage "
                                                 "yet: remove its fairness: key"), source)
    entries = tuple((n.path, n.weight, n.order) for n in scenario.queues if n.path != ROOT)
    return LiveConfig(scenario.resources, scenario.cluster.nodes, entries, auth, source,
                      tree_bounds(scenario.queues), scenario.preemption, scenario.gangs,
                      scenario.fairness.half_life if scenario.fairness else 0.0)


def queue_doc(entries: QueueEntries) -> list[dict]:
    """The nested ``queues:`` list of a scenario file for these entries."""
    by_path: dict[str, dict] = {}
    top: list[dict] = []
    for path, weight, order in entries:
        node = {"name": path.rsplit(".", 1)[-1], "weight": weight, "order": order, "children": []}
        by_path[path] = node
        parent = path.rsplit(".", 1)[0] if "." in path else ROOT
        (by_path[parent]["children"] if parent != ROOT else top).append(node)
    return top


def node_doc(node: Node, resources: tuple[str, ...]) -> dict:
    return {"name": node.name, "capacity": {r: c for r, c in zip(resources, node.capacity) if c > 0},
            "attributes": dict(node.attributes)}


@dataclass(frozen=True)
class TaskCommand:
    """What a task runs: ``argv`` without a shell, or ``script`` through ``/bin/sh -c``."""

    argv: tuple[str, ...]
    shell: bool = False

    def script(self) -> str:
        return shlex.join(self.argv) if len(self.argv) != 1 else self.argv[0]


#: the grace a stopped Ray program has between its SIGTERM and the removal of its
#: placement group when no task class of it has a ``checkpoint`` interval
DEFAULT_RAY_GRACE_S = 10.0
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")


@dataclass(frozen=True)
class RayProgram:
    """A job's Ray program (``ray:``): run in-process by a driver actor in the job's
    placement group. ``script`` or ``module`` (one of them) with ``args``, as
    ``python SCRIPT ARGS`` or ``python -m MODULE ARGS`` would."""

    entrypoint: str
    script: str | None
    module: str | None
    args: tuple[str, ...]
    runtime_env: dict
    #: seconds between the program's SIGTERM and its placement group's removal when it is
    #: cancelled or preempted: its task classes' largest ``checkpoint`` (the time it needs
    #: to save its work), else ``DEFAULT_RAY_GRACE_S``
    grace_s: float = DEFAULT_RAY_GRACE_S
    #: the gang's ``pack`` (``Job.pack``): the placement group's strategy
    pack: tuple[str, str | None] | None = None


def parse_ray_program(raw: Any, path: str, errors: list[FieldError], checkpoints: list[float]) -> RayProgram | None:
    """A job's ``ray:`` section, or None with its problems in ``errors``."""
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path, "must be a mapping with an `entrypoint`"))
        return None
    before = len(errors)
    for key in raw:
        if key not in RAY_PROGRAM.fields:
            errors.append(FieldError(f"{path}.{key}", f"unknown key (allowed: {', '.join(sorted(RAY_PROGRAM.fields))})"))
    entry = raw.get("entrypoint")
    argv: list[str] = []
    if not isinstance(entry, str) or not entry.strip():
        errors.append(FieldError(f"{path}.entrypoint", "is required: a string such as `python train.py`"))
    else:
        try:
            argv = shlex.split(entry)
        except ValueError as exc:
            errors.append(FieldError(f"{path}.entrypoint", f"cannot be split into arguments: {exc}"))
    script = module = None
    args: tuple[str, ...] = ()
    if argv:
        program_ok = _PYTHON.fullmatch(os.path.basename(argv[0])) is not None
        if program_ok and len(argv) >= 3 and argv[1] == "-m":
            module, args = argv[2], tuple(argv[3:])
        elif program_ok and len(argv) >= 2 and not argv[1].startswith("-"):
            script, args = argv[1], tuple(argv[2:])
        else:
            errors.append(FieldError(f"{path}.entrypoint", f"must be `python SCRIPT [ARGS]` or `python -m MODULE "
                                                           f"[ARGS]`, got {entry!r}: the program runs inside its "
                                                           f"driver actor, so that every task and actor it creates "
                                                           f"is in its placement group (another process's Ray work "
                                                           f"would escape it)"))
    env = raw.get("runtime_env", {})
    if env is None:
        env = {}
    if not isinstance(env, Mapping):
        errors.append(FieldError(f"{path}.runtime_env", "must be a mapping (working_dir, pip, env_vars)"))
        env = {}
    fields = RAY_PROGRAM.fields["runtime_env"].fields
    for key, value in env.items():
        kp = f"{path}.runtime_env.{key}"
        if key not in fields:
            errors.append(FieldError(kp, f"unknown key (allowed: {', '.join(sorted(fields))})"))
        elif key == "working_dir" and (not isinstance(value, str) or not value):
            errors.append(FieldError(kp, f"must be a directory path, got {value!r}"))
        elif key == "pip" and not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
            errors.append(FieldError(kp, f"must be a list of requirements (strings), got {value!r}"))
        elif key == "env_vars" and not (isinstance(value, Mapping) and
                                        all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            errors.append(FieldError(kp, "must map names to strings"))
    if len(errors) > before:
        return None
    grace = max(checkpoints, default=DEFAULT_RAY_GRACE_S)
    return RayProgram(entry, script, module, args, dict(env), grace)


@dataclass(frozen=True)
class SubmittedJob:
    name: str
    queue: str
    weight: float
    classes: tuple[TaskClass, ...]
    commands: tuple[TaskCommand, ...]  # per class
    spec: dict  # the job document as sent (stored; recovery rebuilds from it)
    #: the scheduling of the job as the loader parsed it (``model.jobs.Job``'s fields)
    gang: bool = False
    pack: tuple[str, str | None] | None = None
    priority: int = 0
    #: the job's Ray program (``ray:``); None: its tasks run their commands
    program: RayProgram | None = None


def parse_jobs(data: Any, resources: tuple[str, ...], nodes: tuple[Node, ...], queues: QueueEntries,
               source: str = "request") -> list[SubmittedJob]:
    """Validate a JOBFILE / ``POST /v1/jobs`` body (``{"jobs": [...]}``) against the live
    cluster (nodes up now) and queue tree; raises ``ScenarioError`` with every problem."""
    if not isinstance(data, Mapping):
        raise ScenarioError(FieldError("", "must be a mapping with a `jobs` list"), source)
    errors: list[FieldError] = []
    for key in data:
        if key not in JOBS_KEYS:
            errors.append(FieldError(str(key), f"unknown key (allowed: {', '.join(sorted(JOBS_KEYS))})"))
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ScenarioError(errors + [FieldError("jobs", "must be a non-empty list of jobs")], source)
    if not nodes:
        raise ScenarioError(FieldError("", "no node is up: nothing can run"), source)
    commands: list[list[TaskCommand]] = []
    programs: dict[int, RayProgram | None] = {}
    for i, jb in enumerate(jobs):
        cmds: list[TaskCommand] = []
        if not isinstance(jb, Mapping):
            commands.append(cmds)
            continue  # the loader reports it
        tasks = jb.get("tasks")
        ray_job = "ray" in jb
        for k, tc in enumerate(tasks if isinstance(tasks, list) else []):
            if not isinstance(tc, Mapping):
                continue
            tp = f"jobs[{i}].tasks[{k}]"
            if ray_job:
                for key in ("command", "shell"):
                    if key in tc:
                        errors.append(FieldError(f"{tp}.{key}", "is not for a task of a Ray program (its tasks "
                                                                "are its placement group's bundles: the program "
                                                                "is `ray.entrypoint`)"))
            else:
                cmd = _command(tc, tp, errors)
                if cmd is not None:
                    cmds.append(cmd)
            _check_resolution(tc.get("demand"), f"{tp}.demand", errors)
            count = tc.get("count")
            if count is None:
                errors.append(FieldError(f"{tp}.count", "is required for a live job (a task class runs a "
                                                         "finite number of commands)"))
            elif isinstance(count, (int, float)) and not isinstance(count, bool) and math.isfinite(count) \
                    and count > MAX_TASKS_PER_CLASS:
                errors.append(FieldError(f"{tp}.count", f"must be at most {MAX_TASKS_PER_CLASS} per class, "
                                                        f"got {count:g}"))
        commands.append(cmds)
        if ray_job:
            if jb.get("gang", True) is not True:
                errors.append(FieldError(f"jobs[{i}].gang", "must be true (or left out) for a Ray program: its "
                                                            "placement group is reserved whole"))
            checkpoints = [tc["checkpoint"] for tc in (tasks if isinstance(tasks, list) else [])
                           if isinstance(tc, Mapping) and isinstance(tc.get("checkpoint"), (int, float))
                           and not isinstance(tc.get("checkpoint"), bool)]
            programs[i] = parse_ray_program(jb["ray"], f"jobs[{i}].ray", errors, checkpoints)
    total = sum(tc.get("count") for jb in jobs if isinstance(jb, Mapping)
                for tc in (jb.get("tasks") if isinstance(jb.get("tasks"), list) else [])
                if isinstance(tc, Mapping) and isinstance(tc.get("count"), int) and not isinstance(tc.get("count"), bool)
                and tc.get("count") > 0)
    if total > MAX_TASKS_PER_REQUEST:
        errors.append(FieldError("jobs", f"at most {MAX_TASKS_PER_REQUEST} tasks per request, got {total}"))
    try:
        # (the nodes and queues are the service's own: only the jobs need checking)
        # (a Ray program is a gang; its ``ray:`` section is this module's, not the loader's)
        loader_jobs = [{**{k: v for k, v in jb.items() if k != "ray"}, "gang": True}
                       if isinstance(jb, Mapping) and "ray" in jb else jb for jb in jobs]
        parsed = parse_jobs_on(loader_jobs, resources, nodes, {path for path, _w, _o in queues}, source)
    except ScenarioError as exc:
        errors.extend(e for e in exc.errors if e not in errors)
        raise ScenarioError(_sorted(errors), source) from None
    if errors:
        raise ScenarioError(_sorted(errors), source)
    out = []
    for i, (job, raw, cmds) in enumerate(zip(parsed, jobs, commands)):
        program = programs.get(i)
        if program is not None:
            program = replace(program, pack=job.pack)
        out.append(SubmittedJob(job.name, job.queue, job.weight, job.classes,
                                tuple(cmds), dict(raw), job.gang, job.pack, job.priority, program))
    return out


def _check_resolution(demand: Any, path: str, errors: list[FieldError]) -> None:
    """Each amount is 0 or at least ``DEMAND_RESOLUTION`` (the loader checks the rest:
    numbers, finite, not negative)."""
    if not isinstance(demand, Mapping):
        return
    for key, value in demand.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and 0 < value and round(value, 4) == 0:
            errors.append(FieldError(f"{path}.{key}", f"must be 0 or at least {DEMAND_RESOLUTION:g} (the "
                                                      f"executor's resource precision), got {value!r}"))


def request_problems(body: Any) -> list[FieldError]:
    """What a ``{"jobs": [...]}`` request may not carry, whatever it means (module
    docstring): NUL characters or lone surrogates in any string or key, names longer than
    ``MAX_NAME_CHARS``, commands longer than ``MAX_COMMAND_CHARS``, weights above
    ``MAX_WEIGHT``. Each problem names its field; an empty list is a request within limits."""
    errors: list[FieldError] = []
    _check_text(body, "", errors)
    jobs = body.get("jobs") if isinstance(body, Mapping) else None
    if isinstance(jobs, list) and len(jobs) > MAX_JOBS_PER_REQUEST:
        errors.append(FieldError("jobs", f"must be at most {MAX_JOBS_PER_REQUEST} jobs per request, got {len(jobs)}"))
    for i, jb in enumerate(jobs if isinstance(jobs, list) else []):
        if not isinstance(jb, Mapping):
            continue
        p = f"jobs[{i}]"
        for key in ("name", "queue"):
            _check_length(jb.get(key), f"{p}.{key}", MAX_NAME_CHARS, errors)
        program = jb.get("ray")
        if isinstance(program, Mapping):
            _check_length(program.get("entrypoint"), f"{p}.ray.entrypoint", MAX_COMMAND_CHARS, errors)
        weight = jb.get("weight")
        if isinstance(weight, (int, float)) and not isinstance(weight, bool) and weight > MAX_WEIGHT:
            errors.append(FieldError(f"{p}.weight", f"must be at most {MAX_WEIGHT:g}, got {weight!r}"))
        tasks = jb.get("tasks")
        for k, tc in enumerate(tasks if isinstance(tasks, list) else []):
            if not isinstance(tc, Mapping):
                continue
            tp = f"{p}.tasks[{k}]"
            _check_length(tc.get("class"), f"{tp}.class", MAX_NAME_CHARS, errors)
            cmd = tc.get("command")
            size = len(cmd) if isinstance(cmd, str) else \
                sum(len(a) for a in cmd if isinstance(a, str)) if isinstance(cmd, list) else 0
            if size > MAX_COMMAND_CHARS:
                errors.append(FieldError(f"{tp}.command", f"must be at most {MAX_COMMAND_CHARS} characters, "
                                                          f"got {size}"))
            constraints = tc.get("constraints")
            if isinstance(constraints, Mapping):
                for key, allowed in constraints.items():
                    cp = f"{tp}.constraints"
                    _check_length(key, cp, MAX_NAME_CHARS, errors, what="a key")
                    for value in allowed if isinstance(allowed, list) else [allowed]:
                        _check_length(value, f"{cp}.{key}", MAX_NAME_CHARS, errors)
    return _sorted(list(dict.fromkeys(errors)))


def _check_length(value: Any, path: str, limit: int, errors: list[FieldError], what: str = "") -> None:
    if isinstance(value, str) and len(value) > limit:
        errors.append(FieldError(path, f"{what + ' ' if what else ''}must be at most {limit} characters, "
                                       f"got {len(value)}"))


def _check_text(value: Any, path: str, errors: list[FieldError]) -> None:
    """Every string and key: no NUL (a command cannot carry one, SQLite text ends there for
    some readers) and no lone surrogate (not Unicode text: it cannot be stored or sent
    back as UTF-8). The message does not echo the string."""
    if isinstance(value, str):
        reason = _text_problem(value)
        if reason:
            errors.append(FieldError(path, reason))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if isinstance(key, str):
                reason = _text_problem(key)
                if reason:
                    errors.append(FieldError(path, f"a key {reason}"))
                    continue  # the key cannot be part of a field path either
            _check_text(item, sub, errors)
    elif isinstance(value, list):
        for k, item in enumerate(value):
            _check_text(item, f"{path}[{k}]", errors)


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain a NUL character (\\u0000)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (f"must be valid Unicode text: it contains a lone surrogate "
                    f"(\\u{ord(text[exc.start]):04x} at character {exc.start})")
    return None


def _sorted(errors: list[FieldError]) -> list[FieldError]:
    def key(e: FieldError):
        return [int(part) if part.isdigit() else part for part in e.path.replace("[", ".").replace("]", "").split(".")]

    try:
        return sorted(errors, key=key)
    except TypeError:  # a path mixing names and numbers at one place: keep the found order
        return errors


def _command(tc: Mapping, tp: str, errors: list[FieldError]) -> TaskCommand | None:
    shell = tc.get("shell", False)
    if not isinstance(shell, bool):
        errors.append(FieldError(f"{tp}.shell", f"must be true or false, got {shell!r}"))
        return None
    if "command" not in tc or tc["command"] is None:
        errors.append(FieldError(f"{tp}.command", "is required for a live job (a string or a list of arguments)"))
        return None
    cmd = tc["command"]
    if isinstance(cmd, str):
        if not cmd.strip():
            errors.append(FieldError(f"{tp}.command", "must not be empty"))
            return None
        if shell:
            return TaskCommand((cmd,), True)
        try:
            argv = shlex.split(cmd)
        except ValueError as exc:
            errors.append(FieldError(f"{tp}.command", f"cannot be split into arguments: {exc}"))
            return None
        return TaskCommand(tuple(argv), False)
    if isinstance(cmd, list) and cmd and all(isinstance(a, str) for a in cmd) and cmd[0]:
        return TaskCommand(tuple(cmd), shell)
    errors.append(FieldError(f"{tp}.command", "must be a non-empty string or a non-empty list of strings"))
    return None
