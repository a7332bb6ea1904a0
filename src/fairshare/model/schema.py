"""The documents' fields, written once: names, types, bounds, enum values, descriptions.

One declarative description per document (the scenario file here; the live config, the
job file and the queue change document in ``live.config`` and ``live.queues``, built
from the same parts). Two readers use it, so they cannot drift apart:

* the hand-written loader (``loader*.py``, ``live.config``, ``live.auth``,
  ``live.queues``) takes its key sets and enum values from it (``JOB_KEYS =
  keys(JOB)``): a key added here is accepted by the loader, one removed is refused;
* :func:`json_schema` renders it as a JSON Schema (draft 2020-12) for editors
  (``fairshare schema scenario|config|jobs``) and for the API's OpenAPI document.

The loader stays the one validation (docs/usage.md, "JSON Schemas": why not pydantic):
it reports every problem with its field path, and it makes the checks a schema cannot
(a demanded resource the cluster has, a task some node can hold, a queue that exists,
duplicate names). The schema checks each field on its own, and never refuses a
document the loader accepts; ``tests/test_schema.py`` runs both over the bundled
examples and over generated bad documents, and holds them to the same verdict and the
same field path.

Imports nothing beyond the standard library and ``model.scenario`` (the preemption
rules): the CLI's start-up stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Union

from fairshare.model.scenario import PREEMPTION_RULES, PreemptionConfig

DRAFT = "https://json-schema.org/draft/2020-12/schema"


# --- the vocabulary --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Number:
    """A number (``bool`` is not one); ``integer``: a whole number (``2.0`` is one)."""

    description: str = ""
    minimum: float | None = None
    exclusive_minimum: float | None = None
    maximum: float | None = None
    exclusive_maximum: float | None = None
    integer: bool = False
    default: Any = None
    nullable: bool = False


@dataclass(frozen=True)
class Text:
    description: str = ""
    min_length: int = 1
    max_length: int | None = None
    pattern: str | None = None
    enum: tuple[str, ...] | None = None
    default: Any = None
    nullable: bool = False


@dataclass(frozen=True)
class Boolean:
    description: str = ""
    default: bool | None = None
    nullable: bool = False


@dataclass(frozen=True)
class Anything:
    """Any value (the loader reads it as text, or it is ignored)."""

    description: str = ""
    nullable: bool = True


@dataclass(frozen=True)
class ListOf:
    items: Spec
    description: str = ""
    min_items: int = 0
    max_items: int | None = None
    unique: bool = False
    nullable: bool = False
    #: what the first item must be besides an item (a command's program: not empty)
    first: Spec | None = None


@dataclass(frozen=True)
class MapOf:
    """A mapping of free keys (resource names, node attributes, queue paths) to ``values``."""

    values: Spec
    description: str = ""
    key_max_length: int | None = None
    nullable: bool = False


@dataclass(frozen=True)
class Either:
    options: tuple[Spec, ...]
    description: str = ""
    nullable: bool = False


@dataclass(frozen=True)
class Ref:
    """A named object defined elsewhere (the queue tree refers to itself)."""

    name: str


@dataclass(frozen=True)
class Obj:
    """A mapping with known keys. ``closed``: any other key is refused (the loader's
    "unknown key"). ``exactly_one_of``: one of these keys and no other of them;
    ``at_most_one_of``: not two of them."""

    name: str | None
    fields: dict[str, Spec]
    description: str = ""
    required: tuple[str, ...] = ()
    exactly_one_of: tuple[str, ...] = ()
    at_most_one_of: tuple[str, ...] = ()
    closed: bool = True
    nullable: bool = False
    #: ``(list field, item key, unless key)``: each item of the list field needs the item
    #: key unless this object has the other key (a live job's tasks need a ``command``
    #: unless the job is a Ray program, ``ray:``)
    items_require_unless: tuple[tuple[str, str, str], ...] = ()

    def but(self, name: str | None = None, *, drop: tuple[str, ...] = (), **changes: Any) -> Obj:
        """This object with fields replaced (``fields={...}`` merged into its own), others
        dropped, or other attributes changed: a variant written as its difference."""
        fields = {k: v for k, v in {**self.fields, **changes.pop("fields", {})}.items() if k not in drop}
        return replace(self, name=name if name is not None else self.name, fields=fields, **changes)


Spec = Union[Number, Text, Boolean, Anything, ListOf, MapOf, Either, Ref, Obj]


def keys(obj: Obj) -> set[str]:
    """The keys an object accepts: the loader's ``unknown_keys`` allowed set."""
    return set(obj.fields)


# --- the scenario's parts -------------------------------------------------------------------------

AMOUNTS = MapOf(Number(minimum=0), "resource name -> amount (>= 0), e.g. {cpu: 4, memory: 16}")
#: a queue or job name: a path is names joined by dots, so a name has none
NAME_PATTERN = r"^[^.]*[^.\s][^.]*$"
#: a dotted queue path such as ``ads.prod``
PATH_PATTERN = r"^[^.]+(\.[^.]+)*$"
ORDERS = ("fair", "fifo")
ORDER = Text("how the queue shares among its jobs: fair (the policy's share) or fifo (arrival order)",
             enum=ORDERS, default="fair")
ATTRIBUTES = MapOf(Anything("read as text"), "node attribute -> value, matched by task constraints",
                   nullable=True)

RESOURCES = ListOf(Text("a resource name"), "the resources, in the order vectors and reports use (default: the "
                                            "order in which the file first names each)", min_items=1, unique=True)
NODE = Obj("Node", {
    "name": Text("the node's name (default nodeI); with count N the nodes are NAME-0 .. NAME-(N-1)"),
    "count": Number("identical nodes of this entry", exclusive_minimum=0, integer=True, default=1),
    "capacity": AMOUNTS,
    "attributes": ATTRIBUTES,
}, "a node, or count identical ones", required=("capacity",))
CLUSTER = Obj("Cluster", {
    "capacity": replace(AMOUNTS, description="one pooled machine (the papers' divisible setting)"),
    "nodes": ListOf(NODE, "the nodes", min_items=1),
    "devices": ListOf(Text("a resource name"), "resources counted in whole physical devices (a task takes a "
                                               "fraction of one device or whole devices)", unique=True, nullable=True),
}, "one pooled capacity, or a list of nodes", required=(), exactly_one_of=("capacity", "nodes"))
HALF_LIFE = Number("seconds for past usage to lose half its weight (0: no memory, today's instantaneous "
                   "policy; .inf or \"inf\": cumulative usage)", minimum=0, default=0)
QUEUE_FAIRNESS = Obj("QueueFairness", {
    "half_life": replace(HALF_LIFE, default=None),
}, "its own memory: its jobs' and its sub-queues' usage decays with this half-life instead of the scenario's "
   "(docs/policies.md, \"Fairness with memory\")", nullable=True)
QUEUE = Obj("Queue", {
    "name": Text("the queue's name (no dots: its path is its ancestors' names joined by dots)",
                 pattern=NAME_PATTERN),
    "weight": Number("its weight among its siblings", exclusive_minimum=0, default=1),
    "order": ORDER,
    "children": ListOf(Ref("Queue"), "its child queues", nullable=True),
    "guarantee": replace(AMOUNTS, description="at least this much while it has demand", nullable=True),
    "limit": replace(AMOUNTS, description="never more than this", nullable=True),
    "fairness": QUEUE_FAIRNESS,
}, "a queue of the tree", required=("name",))

POSITIVE_SECONDS = Number("seconds", exclusive_minimum=0)
#: ``duration: {dist: KIND, ...}``: each distribution's parameters (all required)
DISTRIBUTIONS = {
    "fixed": {"value": POSITIVE_SECONDS},
    "exponential": {"mean": Number("mean seconds", exclusive_minimum=0)},
    "uniform": {"low": Number("seconds", minimum=0), "high": Number("seconds (>= low)", exclusive_minimum=0)},
    "lognormal": {"mu": Number("mean of the log of the seconds"),
                  "sigma": Number("deviation of the log of the seconds", exclusive_minimum=0)},
}
DURATION = Either((
    POSITIVE_SECONDS,
    ListOf(POSITIVE_SECONDS, "one duration per task, cycled", min_items=1),
    *(Obj(None, {"dist": Text(f"the {kind} distribution", enum=(kind,)), **params}, required=("dist", *params))
      for kind, params in DISTRIBUTIONS.items()),
), "each task's run time: seconds, a list, or {dist: fixed|exponential|uniform|lognormal, ...} (default 1)")
SCALAR = Either((Text(min_length=0), Number()))
TASK = Obj("TaskClass", {
    "class": Text("the class's name (default main, or classK)"),
    "demand": replace(AMOUNTS, description="per task, e.g. {cpu: 1, memory: 4}; omitted resources are 0"),
    "count": Number("tasks of this class (absent: unbounded, in a simulation)", minimum=0, integer=True,
                    nullable=True),
    "duration": DURATION,
    "constraints": MapOf(Either((SCALAR, ListOf(SCALAR, min_items=1))),
                         "node attribute -> allowed value(s): the task runs only on such nodes", nullable=True),
    "max_per_node": Number("most tasks of this class on one node", exclusive_minimum=0, integer=True,
                           nullable=True),
    "checkpoint": Number("seconds between checkpoints (work lost to a preemption is since the last one)",
                         exclusive_minimum=0, nullable=True),
    "command": Anything("what serve runs (the job file); the simulator ignores it"),
    "shell": Anything("serve: run the command through /bin/sh -c; the simulator ignores it"),
}, "a task class: tasks of one shape", required=("demand",))
JOB = Obj("Job", {
    "name": Text("the job's name (default jobI; no dots)", pattern=NAME_PATTERN),
    "queue": Text("its queue's dotted path (absent: the root)", min_length=0, nullable=True),
    "weight": Number("its weight among the jobs of its queue", exclusive_minimum=0, default=1),
    "submit": Number("arrival time, seconds from the start", minimum=0, default=0),
    "tasks": ListOf(TASK, "one entry per task class", min_items=1),
    "gang": Boolean("all of its tasks start together or none does (each class needs a count >= 1)", default=False),
    "pack": Either((Text("every task of the gang on one node", enum=("node",)),
                    Obj(None, {"attribute": Text("a node attribute")},
                        "every task of the gang on nodes with one value of this attribute", required=("attribute",))),
                   "where a gang's tasks go together (a gang only)", nullable=True),
    "priority": Number("within its queue, higher is served first (fairness between queues is unchanged)",
                       integer=True, default=0),
}, "a job", required=("tasks",))

QUEUE_CHANGE = Obj("QueueChange", {
    "name": Text("the queue's dotted path: an existing queue, or a new one under an existing parent",
                 pattern=PATH_PATTERN),
    "weight": Number("its new weight", exclusive_minimum=0),
    "order": replace(ORDER, default=None, nullable=True),
    "guarantee": replace(AMOUNTS, description="its new guarantee (null: none)", nullable=True),
    "limit": replace(AMOUNTS, description="its new limit (null: none)", nullable=True),
    "fairness": replace(QUEUE_FAIRNESS, description="its new half-life (absent: unchanged)"),
    "remove": Boolean("remove the queue (it must have no jobs then; with name only)", default=False),
}, "a change to the queue tree", required=("name",))
ADDED_NODE = Obj("AddedNode", {
    "name": Text("a new node's name, or a failed node's that comes back"),
    "capacity": replace(AMOUNTS, description="required for a new node; a failed node comes back with its own"),
    "attributes": ATTRIBUTES,
}, "a node that joins", required=("name",))
EVENT = Obj("Event", {
    "time": Number("seconds from the start", minimum=0),
    "node_fail": Text("the name of the node that fails (its tasks are lost)"),
    "node_add": ADDED_NODE,
    "queue": QUEUE_CHANGE,
}, "a change over time: one of node_fail, node_add, queue", required=("time",),
    exactly_one_of=("node_fail", "node_add", "queue"))
_DEFAULT_PREEMPTION = PreemptionConfig()
PREEMPTION = Obj("Preemption", {
    "after": Number("seconds a queue stays starved before it may preempt", minimum=0,
                    default=_DEFAULT_PREEMPTION.after),
    "tolerance": Number("starved: dominant share below the fair one by more than this", minimum=0,
                        exclusive_maximum=1, default=_DEFAULT_PREEMPTION.tolerance),
    "max_per_round": Number("most victims per decision round", exclusive_minimum=0, integer=True,
                            default=_DEFAULT_PREEMPTION.max_per_round),
    "rule": Text("loop-free; naive (for comparisons only: it can preempt in a loop)", enum=PREEMPTION_RULES,
                 default=_DEFAULT_PREEMPTION.rule),
    "within_queue": Boolean("a job may also preempt jobs of lower priority in its own queue",
                            default=_DEFAULT_PREEMPTION.within_queue),
    "round": Number("seconds between preemption rounds: at most max_per_round victims per round, a round every "
                    "round seconds while a queue stays starved (absent: a round at every decision)",
                    exclusive_minimum=0),
}, "fair-share preemption: on when the section is present ({} for the defaults)", nullable=True)

GANGS = Obj("Gangs", {
    "reserve_after": Number("seconds a gang at the head of the policy's order waits before nodes are reserved "
                            "for it as they free up (absent: never)", minimum=0),
}, "gang reservations (docs/policies.md, \"Reservations: no gang starves\")", nullable=True)

FAIRNESS = Obj("Fairness", {
    "half_life": HALF_LIFE,
}, "fairness with memory: order by decayed usage (docs/policies.md, \"Fairness with memory\")", nullable=True)

USAGE = Obj("Usage", {
    "over": Number("seconds of history the amounts were accumulated over: the amounts are then decayed "
                   "resource-seconds U, turned into average allocations U / W (docs/usage.md, \"usage: past usage for allocate\")",
                   exclusive_minimum=0),
    "half_life": Number("the half-life the amounts were decayed with (default: fairness.half_life when above 0, "
                        "else .inf or \"inf\": plain resource-seconds)", exclusive_minimum=0),
    "average": Boolean("true (only): the amounts are average allocations already (resource units), instead of "
                       "over"),
    "jobs": MapOf(AMOUNTS, "job name -> its past usage, e.g. {A: {cpu: 3}}", nullable=True),
    "queues": MapOf(AMOUNTS, "queue dotted path -> its whole subtree's past usage (at least what its children "
                             "and jobs given here add up to)", nullable=True),
}, "past usage for the static allocation (`allocate`): each job and queue enters the progressive filling "
   "with its average past allocation counted (docs/policies.md, \"Fairness with memory\")", nullable=True,
   exactly_one_of=("over", "average"))

#: the peer schedulers whose semantics a baseline policy reproduces (docs/whatif.md); each
#: section's keys are the baseline policy's to check (``policies/<peer>.py``), because
#: only it knows them; the loader checks the section names and that each is a mapping
PEER_NAMES = ("yarn-fair", "kueue", "slurm-fairtree")
PEERS = Obj("Peers", {
    name: MapOf(Anything(), f"options of the {name} baseline policy (docs/whatif.md)", nullable=True)
    for name in PEER_NAMES
}, "a peer scheduler's own settings that the scenario's queues cannot hold (written by "
   "`fairshare import`; read by the peer's baseline policy)", nullable=True)

SCENARIO = Obj("Scenario", {
    "resources": RESOURCES,
    "cluster": CLUSTER,
    "queues": ListOf(QUEUE, "the queue tree (absent: every job under the root)", nullable=True),
    "jobs": ListOf(JOB, "the jobs ([] for none)"),
    "events": ListOf(EVENT, "node failures and additions, queue changes, over time", nullable=True),
    "preemption": PREEMPTION,
    "gangs": GANGS,
    "fairness": FAIRNESS,
    "usage": USAGE,
    "peers": PEERS,
}, "a fairshare scenario file (docs/usage.md)", required=("cluster", "jobs"))


# --- rendering ------------------------------------------------------------------------------------

def json_schema(doc: Obj, *, title: str | None = None, schema_id: str | None = None) -> dict[str, Any]:
    """``doc`` as a JSON Schema document (draft 2020-12): named objects under ``$defs``."""
    defs: dict[str, Any] = {}
    out: dict[str, Any] = {"$schema": DRAFT}
    if schema_id:
        out["$id"] = schema_id
    if title:
        out["title"] = title
    out.update(render(replace(doc, name=None), defs, "#/$defs/"))
    if defs:
        out["$defs"] = dict(sorted(defs.items()))
    return out


def render(spec: Spec, defs: dict[str, Any], ref_prefix: str) -> dict[str, Any]:
    """One spec as a schema; each named object rendered once into ``defs`` (keyed by its
    name) and referred to as ``{ref_prefix}NAME``."""
    if isinstance(spec, Ref):
        return {"$ref": ref_prefix + spec.name}
    if isinstance(spec, Obj) and spec.name is not None:
        if spec.name not in defs:
            defs[spec.name] = {}  # (a placeholder first: the object may refer to itself)
            defs[spec.name] = _shape(replace(spec, nullable=False), defs, ref_prefix)
        ref = {"$ref": ref_prefix + spec.name}
        return {"anyOf": [ref, {"type": "null"}]} if spec.nullable else ref
    return _shape(spec, defs, ref_prefix)


def _shape(spec: Spec, defs: dict[str, Any], ref_prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(spec, Number):
        out["type"] = "integer" if spec.integer else "number"
        for key, value in (("minimum", spec.minimum), ("exclusiveMinimum", spec.exclusive_minimum),
                           ("maximum", spec.maximum), ("exclusiveMaximum", spec.exclusive_maximum)):
            if value is not None:
                out[key] = value
    elif isinstance(spec, Text):
        out["type"] = "string"
        if spec.enum is not None:
            out["enum"] = list(spec.enum)
        else:
            if spec.min_length:
                out["minLength"] = spec.min_length
            if spec.max_length is not None:
                out["maxLength"] = spec.max_length
            if spec.pattern is not None:
                out["pattern"] = spec.pattern
    elif isinstance(spec, Boolean):
        out["type"] = "boolean"
    elif isinstance(spec, ListOf):
        out["type"] = "array"
        if spec.first is not None:
            out["prefixItems"] = [render(spec.first, defs, ref_prefix)]
        out["items"] = render(spec.items, defs, ref_prefix)
        if spec.min_items:
            out["minItems"] = spec.min_items
        if spec.max_items is not None:
            out["maxItems"] = spec.max_items
        if spec.unique:
            out["uniqueItems"] = True
    elif isinstance(spec, MapOf):
        out["type"] = "object"
        out["propertyNames"] = {"minLength": 1, **({"maxLength": spec.key_max_length}
                                                   if spec.key_max_length is not None else {})}
        out["additionalProperties"] = render(spec.values, defs, ref_prefix)
    elif isinstance(spec, Either):
        out["anyOf"] = [render(option, defs, ref_prefix) for option in spec.options]
    elif isinstance(spec, Obj):
        out["type"] = "object"
        out["properties"] = {key: render(value, defs, ref_prefix) for key, value in spec.fields.items()}
        if spec.required:
            out["required"] = list(spec.required)
        if spec.exactly_one_of:
            out["oneOf"] = [{"required": [key]} for key in spec.exactly_one_of]
        if spec.at_most_one_of:
            out["not"] = {"required": list(spec.at_most_one_of)}
        conditions = [{"if": {"not": {"required": [unless]}},
                       "then": {"properties": {field_name: {"items": {"required": [item_key]}}}}}
                      for field_name, item_key, unless in spec.items_require_unless]
        if conditions:
            out["allOf"] = conditions
        if spec.closed:
            out["additionalProperties"] = False
    # (Anything: no constraint)
    description = getattr(spec, "description", "")
    if description:
        out = {"description": description, **out}
    default = getattr(spec, "default", None)
    if default is not None:
        out["default"] = default
    if getattr(spec, "nullable", False) and not isinstance(spec, Anything):
        typed = out.get("type")
        if isinstance(typed, str) and "enum" not in out:
            out["type"] = [typed, "null"]
        else:
            kept = {k: out.pop(k) for k in ("description", "default") if k in out}
            out = {**kept, "anyOf": [out, {"type": "null"}]}
    return out
