"""Prometheus metrics of the live scheduler: ``GET /metrics``, through ``prometheus_client``.

Two sources feed one page:

- :class:`Metrics`, owned by the service, holds what is observed as it happens:
  scheduling decisions and their latency, each task's admission wait (submit to first
  start, observed by ``live.loop`` as the start is committed) and jobs finished by final
  state. These are ``prometheus_client``'s own Counter and Histogram objects (their
  locks make them safe from any thread), registered in no registry.
- :class:`ServiceCollector` reads the service's state at scrape time: ``status()`` (the
  document ``GET /v1/status`` returns: per queue its shares, tasks, allocation, fair share,
  guarantee and limit per resource; per resource utilization and capacity; the nodes),
  ``counters()`` (attempts started, tasks re-queued by reason, service starts) and the
  ``ray`` part of ``health()`` (``live.ray_health``).

Each app gets its own ``CollectorRegistry`` (``install``), never the library's global
one, so a process may create several apps (the tests do) and a page shows one service.

Names follow Prometheus' conventions, as Kueue's do (``kueue_admission_wait_time_seconds``,
``kueue_cluster_queue_resource_usage``, ``kueue_build_info``): the unit in the name
(``_seconds``, ``_tasks``), ``_ratio`` for a fraction, ``_total`` for a counter, ``queue_``
for a per-queue family. Resource amounts carry no unit suffix: a resource's unit is the
one the config gives it. docs/live.md (section Metrics) lists every metric and the names
renamed from the hand-written page this module replaced.

Access: ``/metrics`` needs ``Authorization: Bearer TOKEN`` with the admin token or any
tenant's token, the same rule as ``GET /v1/status`` (it exposes the same numbers), so a
Prometheus scrape job sets ``authorization: {credentials: TOKEN}``. Without a valid
token it answers 401.
"""

# No ``from __future__ import annotations``: FastAPI reads the route's parameter
# annotations at run time, and ``Request`` is imported inside ``install``.
import math
from functools import partial
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fairshare import __version__
from fairshare.engine.explain import BLOCKER_KINDS

#: Upper bounds (seconds) of the decision latency histogram. One decision of the
#: incremental sorters takes tens of microseconds and a reference-sorter decision on a
#: large tree milliseconds (docs/performance.md), so the buckets run from 10 us to 1 s,
#: about three per decade; Prometheus' default buckets start at 5 ms and would put every
#: decision in the first one. ``+Inf`` is implicit.
DEFAULT_DECISION_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.00001, 0.000025, 0.00005,
    0.0001, 0.00025, 0.0005,
    0.001, 0.0025, 0.005,
    0.01, 0.025, 0.05,
    0.1, 0.25, 0.5,
    1.0,
)

#: Upper bounds (seconds) of the admission wait histogram: a task on a free cluster
#: starts at the next pass (milliseconds), one behind its fair share waits for others to
#: end (minutes to hours), so from 10 ms to a day; Kueue's own starts at 1 s and doubles.
DEFAULT_ADMISSION_WAIT_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
    3600.0, 7200.0, 14400.0, 43200.0, 86400.0,
)

#: the final states of a job (``store.job_state``), each a ``fairshare_jobs_finished_total`` series
JOB_FINAL_STATES = ("succeeded", "failed", "cancelled")

#: the states of ``fairshare_node_health`` (``live.ray_health.STATES``; not imported:
#: this module needs no Ray)
NODE_STATES = ("alive", "unhealthy", "dead")

#: The Content-Type of the page: ``generate_latest`` writes the text format 0.0.4 (the
#: library's CONTENT_TYPE_LATEST names 1.0.0 in its recent versions, the same text with
#: UTF-8 metric names allowed, which this page does not use).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _bounds(field: str, values: Sequence[float]) -> tuple[float, ...]:
    """Histogram upper bounds: strictly increasing, positive, finite (``+Inf`` is added);
    a bad one is named by its index."""
    bounds = tuple(float(b) for b in values)
    for index, bound in enumerate(bounds):
        if not (math.isfinite(bound) and bound > 0):
            raise ValueError(f"{field}[{index}]: must be a positive finite number, got {bound!r}")
        if index and bound <= bounds[index - 1]:
            raise ValueError(f"{field}[{index}]: must be greater than the previous bound "
                             f"{bounds[index - 1]!r}, got {bound!r}")
    return bounds


def _seconds(field: str, value: float) -> float:
    """A measured duration: finite and >= 0 (the callers measure with a clock, so anything
    else is a bug there, not something to record)."""
    seconds = float(value)
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"{field}: must be a finite number >= 0, got {value!r}")
    return seconds


class Metrics:
    """What the service observes as it runs; thread-safe (the library's metric objects).

    A value equal to a bucket's bound falls in that bucket (Prometheus' ``le``, "less
    than or equal")."""

    def __init__(self, latency_buckets_s: Sequence[float] = DEFAULT_DECISION_LATENCY_BUCKETS_S,
                 wait_buckets_s: Sequence[float] = DEFAULT_ADMISSION_WAIT_BUCKETS_S) -> None:
        # registry=None: registered in no registry (each app's ServiceCollector yields them)
        self.decisions = Counter("fairshare_decisions", "Scheduling decisions made since the service started.",
                                 registry=None)
        self.decision_latency = Histogram(
            "fairshare_decision_latency_seconds", "Time one scheduling decision took, in seconds.",
            buckets=_bounds("latency_buckets_s", latency_buckets_s), registry=None)
        self.admission_wait = Histogram(
            "fairshare_admission_wait_seconds",
            "Seconds from a job's submission to the first start of each of its tasks, observed as the task "
            "starts (a re-run is not observed again).",
            buckets=_bounds("wait_buckets_s", wait_buckets_s), registry=None)
        self.jobs_finished = Counter(
            "fairshare_jobs_finished", "Jobs that reached a final state in this service process, by state.",
            ["state"], registry=None)
        for state in JOB_FINAL_STATES:  # every state shows from the start, at 0
            self.jobs_finished.labels(state=state)

    def observe_decision(self, latency_seconds: float) -> None:
        """Count one scheduling decision that took ``latency_seconds`` (ValueError when
        negative or not finite: nothing is recorded)."""
        latency_s = _seconds("latency_seconds", latency_seconds)
        self.decisions.inc()
        self.decision_latency.observe(latency_s)

    def observe_admission_wait(self, wait_seconds: float) -> None:
        """One task's first start, ``wait_seconds`` after its job was submitted."""
        self.admission_wait.observe(_seconds("wait_seconds", wait_seconds))

    def job_finished(self, state: str) -> None:
        if state not in JOB_FINAL_STATES:
            raise ValueError(f"state: must be one of {', '.join(JOB_FINAL_STATES)}, got {state!r}")
        self.jobs_finished.labels(state=state).inc()

    def collect(self) -> Iterator[Metric]:
        for metric in (self.decisions, self.decision_latency, self.admission_wait, self.jobs_finished):
            for family in metric.collect():
                # the library adds a ``_created`` timestamp to counters and histograms, which
                # the text format writes as a gauge family of its own: one more series per
                # counter for every dashboard, with nothing to graph in it
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield family


def _number(value: Any) -> float:
    """A status number; None (not known: a node never answered) is NaN, Prometheus' "no
    value", a gap in a graph."""
    return math.nan if value is None else float(value)


def _family(kind: type, name: str, help_text: str, labels: Sequence[str],
            samples: Iterable[tuple[Sequence[str], Any]]) -> Metric:
    family = kind(name, help_text, labels=list(labels))
    for label_values, value in samples:
        family.add_metric(list(label_values), _number(value))
    return family


_gauge = partial(_family, GaugeMetricFamily)
_counter = partial(_family, CounterMetricFamily)


class ServiceCollector(Collector):
    """The page of one service: its ``Metrics`` and its state read at scrape time.

    Families come in a fixed order and samples sorted by their labels, so two scrapes of
    the same state are byte-identical."""

    def __init__(self, service: Any):
        self.service = service

    def collect(self) -> Iterator[Metric]:
        service = self.service
        yield _gauge("fairshare_build_info", "Always 1: the running fairshare's version and scheduling policy.",
                     ("version", "policy"), [((__version__, str(service.policy_name)), 1)])
        yield from service.metrics.collect()
        status = service.status()
        yield from status_families(status)
        if hasattr(service, "counters"):
            yield from counter_families(service.counters())
        if hasattr(service, "pending_reasons"):
            yield pending_reason_family(service.pending_reasons())
        ray = service.health()[1].get("ray") if hasattr(service, "health") else None
        if ray is not None:  # (the executor is Ray)
            yield from ray_families(ray)


def status_families(status: Mapping[str, Any]) -> Iterator[Metric]:
    """The gauges of one ``service.status()`` document."""
    yield _counter("fairshare_preemptions_total",
                   "Task attempts stopped by fair-share preemption since the service started (0 when preemption "
                   "is off).", (), [((), status.get("preemptions_total") or 0)])

    queues: Mapping[str, Mapping[str, Any]] = status["queues"]
    paths = sorted(queues)
    resources = list(status["resources"])
    yield _gauge("fairshare_queue_dominant_share_ratio",
                 "Dominant share of a queue (0..1): kind=current what it holds now, kind=fair what the policy "
                 "entitles it to now.", ("queue", "kind"),
                 [((path, kind), queues[path][f"{kind}_dominant_share"]) for path in paths
                  for kind in ("current", "fair")])
    yield _gauge("fairshare_queue_weight", "Configured weight of a queue (relative to its siblings).", ("queue",),
                 [((path,), queues[path]["weight"]) for path in paths])
    yield _gauge("fairshare_queue_pending_tasks", "Tasks waiting to be placed, per queue (its subtree).", ("queue",),
                 [((path,), queues[path]["pending_tasks"]) for path in paths])
    yield _gauge("fairshare_queue_running_tasks", "Tasks running now, per queue (its subtree).", ("queue",),
                 [((path,), queues[path]["running_tasks"]) for path in paths])
    def per_resource(key: str, every_resource: bool) -> Iterator[tuple[tuple[str, str], float]]:
        # (a guarantee or a limit names only some resources: the others have none, not 0)
        for path in paths:
            amounts = queues[path].get(key) or {}
            for resource in (resources if every_resource else sorted(amounts)):
                yield (path, resource), amounts.get(resource, 0.0)

    yield _gauge("fairshare_queue_allocated",
                 "Amount of a resource held by a queue's running tasks (its subtree), in the resource's unit.",
                 ("queue", "resource"), per_resource("allocated", True))
    yield _gauge("fairshare_queue_fair_share",
                 "Amount of a resource the policy entitles a queue to now (the allocation behind its fair "
                 "dominant share), in the resource's unit.", ("queue", "resource"), per_resource("fair_share", True))
    decayed = [path for path in paths if queues[path].get("decayed_usage") is not None]  # (none: half-life 0)
    if decayed:  # (without a half-life the families are not there at all, as before)
        yield from _decay_families(queues, decayed, resources)
    yield _gauge("fairshare_queue_guarantee",
                 "Amount of a resource guaranteed to a queue while it has demand (the resources it has one for).",
                 ("queue", "resource"), per_resource("guarantee", False))
    yield _gauge("fairshare_queue_limit", "Most of a resource a queue may hold (the resources it has one for).",
                 ("queue", "resource"), per_resource("limit", False))

    yield _gauge("fairshare_pending_tasks", "Tasks waiting to be placed on the whole cluster.", (),
                 [((), status["pending_tasks"])])
    yield _gauge("fairshare_running_tasks", "Tasks running now on the whole cluster.", (),
                 [((), status["running_tasks"])])
    yield _gauge("fairshare_utilization_ratio",
                 "Fraction (0..1) of the cluster's capacity of a resource allocated to running tasks.",
                 ("resource",), [((r,), status["utilization"].get(r)) for r in resources])
    yield _gauge("fairshare_capacity", "Capacity of a resource over the nodes that are up, in its own unit.",
                 ("resource",), [((r,), status["capacity"].get(r)) for r in resources])
    nodes = sorted(status["nodes"], key=lambda n: str(n["name"]))
    yield _gauge("fairshare_node_up", "1 when the node is alive, 0 when it is not.", ("node",),
                 [((str(n["name"]),), 1 if n["alive"] else 0) for n in nodes])



def _decay_families(queues: Mapping[str, Mapping[str, Any]], paths: list[str],
                    resources: Sequence[str]) -> Iterator[Metric]:
    """With ``fairness.half_life`` above 0 (docs/live.md): per queue its decayed usage."""
    yield _gauge("fairshare_queue_decayed_usage",
                 "Decayed average allocation U/W of a resource by a queue (its subtree; fairness.half_life, "
                 "docs/live.md), in the resource's unit; only with a half-life above 0.", ("queue", "resource"),
                 [((path, r), queues[path]["decayed_usage"].get(r, 0.0)) for path in paths for r in resources])
    yield _gauge("fairshare_queue_effective_dominant_share_ratio",
                 "Dominant share of a queue's allocation plus its decayed usage (what the order is by with "
                 "fairness.half_life); only with a half-life above 0.", ("queue",),
                 [((path,), queues[path]["effective_dominant_share"]) for path in paths])


def pending_reason_family(counts: Mapping[str, int]) -> Metric:
    """``fairshare_pending_jobs{reason}``: every blocker kind (0 when none holds a job),
    then any other kind counted, by name."""
    kinds = list(BLOCKER_KINDS) + sorted(set(counts) - set(BLOCKER_KINDS))
    return _gauge("fairshare_pending_jobs",
                  "Jobs with tasks waiting, by what blocks their next start (the first reason of GET "
                  "/v1/jobs/{id}/explain), computed at scrape time.", ("reason",),
                  [((kind,), counts.get(kind, 0)) for kind in kinds])


def counter_families(counters: Mapping[str, Any]) -> Iterator[Metric]:
    """The counters of ``service.counters()``."""
    yield _counter("fairshare_task_attempts_total",
                   "Task attempts started by this service process (every start, re-runs included).", (),
                   [((), counters["task_attempts_total"])])
    requeued: Mapping[str, Any] = counters["tasks_requeued_total"]
    yield _counter("fairshare_tasks_requeued_total",
                   "Tasks put back to pending by this service process, by reason: node_lost (its node died or "
                   "stopped answering), infrastructure (Ray lost it), failed (its command failed or its start "
                   "was refused, with attempts left).", ("reason",),
                   [((reason,), requeued[reason]) for reason in sorted(requeued)])
    yield _counter("fairshare_service_starts_total",
                   "Starts of a service on this database, this one included (restarts: this minus one).", (),
                   [((), counters["service_starts_total"])])


def ray_families(health: Mapping[str, Any]) -> Iterator[Metric]:
    """The gauges of the ``ray`` part of ``service.health()``."""
    yield _gauge("fairshare_ray_reachable", "1 when Ray listed its nodes within the node timeout, else 0.", (),
                 [((), 1 if health["reachable"] else 0)])
    states = sorted(health["node_states"], key=lambda n: str(n["name"]))
    yield _gauge("fairshare_node_health",
                 "1 for the node's health state, 0 for the others: alive (answers its probes), unhealthy (listed "
                 "alive by Ray, no answer for the node timeout: out of scheduling), dead (Ray lists it dead).",
                 ("node", "state"),
                 [((str(n["name"]), state), 1 if n["state"] == state else 0) for n in states for state in NODE_STATES])
    yield _gauge("fairshare_node_last_answer_seconds", "Seconds since the node last answered a probe (NaN: never, "
                 "or dead).", ("node",), [((str(n["name"]),), n.get("last_answer_s")) for n in states])


def registry_for(service: Any) -> CollectorRegistry:
    """A registry of its own holding ``service``'s page (not the library's global one)."""
    # auto_describe=False: the registry would otherwise call collect() once at register
    # time to learn the names, reading the service's status before anything asks for it
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceCollector(service))
    return registry


def render(registry: CollectorRegistry) -> str:
    """The page (text format 0.0.4) of ``registry`` now."""
    return generate_latest(registry).decode("utf-8")


# ---------------------------------------------------------------- HTTP route


def install(app: Any, service: Any, *, authorize: Callable[[Any], Any] | None = None,
            route: Mapping[str, Any] | None = None) -> None:
    """Add ``GET /metrics`` to the FastAPI ``app``, with a registry of its own.

    ``service`` provides ``status()``, ``policy_name`` and ``metrics`` (a :class:`Metrics`),
    and, when it has them, ``counters()`` and ``health()``. ``authorize(request)`` checks
    the bearer token and raises the API's own 401 error when it is missing or unknown
    (``fairshare.live.api.authorize``, which ``create_app`` passes). Without it, the token
    is checked against ``service.auth`` here and a refusal is a plain FastAPI 401.
    ``route``: more arguments of the route's decorator (the API's operationId and
    responses).
    """
    from fastapi import Depends, Request
    from fastapi.responses import Response
    from fastapi.security import HTTPBearer

    check = authorize or _service_authorizer(service)
    registry = registry_for(service)
    app.state.metrics_registry = registry
    # Declared (auto_error=False: ``check`` decides) so the OpenAPI document says this
    # route takes the same bearer token as the API.
    bearer = HTTPBearer(auto_error=False, description="a tenant's token, or the admin token")
    options: dict[str, Any] = {"tags": ["observability"], "operation_id": "getMetrics", **(route or {})}
    options["responses"] = {200: {"description": "The metrics page (docs/live.md, section Metrics).",
                                  "content": {"text/plain": {"schema": {"type": "string"}}}},
                            **options.get("responses", {})}

    @app.get("/metrics", summary="Prometheus metrics (text exposition format 0.0.4)", response_class=Response,
             dependencies=[Depends(bearer)], **options)
    def get_metrics(request: Request) -> Response:
        check(request)
        return Response(content=render(registry), media_type=CONTENT_TYPE)


def _service_authorizer(service: Any) -> Callable[[Any], None]:
    from fastapi import HTTPException

    from fairshare.live.auth import AuthError

    def check(request: Any) -> None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        try:
            service.auth.authenticate(token.strip() if scheme.lower() == "bearer" else None)
        except AuthError as exc:  # no token, or a token nobody holds
            raise HTTPException(status_code=401, detail=f"Authorization: {exc}") from None

    return check
