"""Prometheus metrics of the live scheduler: ``GET /metrics``.

Two sources feed one page in the Prometheus text exposition format (version 0.0.4):

- :class:`Metrics`, owned by the service, counts scheduling decisions and keeps a
  histogram of their latency. The service calls :meth:`Metrics.observe_decision` once per
  decision, from whichever thread decides, so every update holds a lock.
- ``service.status()`` (the same snapshot ``GET /v1/status`` returns) gives the gauges:
  dominant shares per queue (current and fair), pending and running tasks, utilization
  and capacity per resource, nodes up.
- ``service.counters()``: task attempts started, tasks re-queued by reason, starts of a
  service on the database; ``service.health()``: Ray reachable, each node's health
  (``live.ray_health``).

The page is written by hand (no client library) because it is a few dozen lines of a
stable, documented format; the tests parse it back with ``prometheus_client``'s own
parser to prove it is well formed.

Access: ``/metrics`` needs ``Authorization: Bearer TOKEN`` with the admin token or any
tenant's token, the same rule as ``GET /v1/status`` (it exposes the same numbers), so a
Prometheus scrape job sets ``authorization: {credentials: TOKEN}``. Without a valid
token it answers 401. docs/live.md (section Metrics) lists every metric.
"""

# No ``from __future__ import annotations``: FastAPI reads the route's parameter
# annotations at run time, and ``Request`` is imported inside ``install``.
import bisect
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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

#: The Content-Type Prometheus expects for the text format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class DecisionLatencySnapshot:
    """A consistent copy of the decision counters, taken under the lock.

    ``cumulative_counts[i]`` is the number of decisions that took at most
    ``upper_bounds_s[i]`` seconds (Prometheus buckets are cumulative); the ``+Inf``
    bucket is ``decisions_total``.
    """

    decisions_total: int
    latency_sum_s: float
    upper_bounds_s: tuple[float, ...]
    cumulative_counts: tuple[int, ...]


class Metrics:
    """Thread-safe decision counter and decision latency histogram.

    ``latency_buckets_s``: strictly increasing, positive, finite upper bounds in seconds
    (``+Inf`` is always added). A latency equal to a bound falls in that bound's bucket
    (Prometheus' ``le``, "less than or equal").
    """

    def __init__(self, latency_buckets_s: Sequence[float] = DEFAULT_DECISION_LATENCY_BUCKETS_S) -> None:
        bounds = tuple(float(b) for b in latency_buckets_s)
        for index, bound in enumerate(bounds):
            if not (math.isfinite(bound) and bound > 0):
                raise ValueError(f"latency_buckets_s[{index}]: must be a positive finite number, got {bound!r}")
            if index and bound <= bounds[index - 1]:
                raise ValueError(
                    f"latency_buckets_s[{index}]: must be greater than the previous bound "
                    f"{bounds[index - 1]!r}, got {bound!r}"
                )
        self._upper_bounds_s = bounds
        self._lock = threading.Lock()
        # Per-bucket (not cumulative) counts, one more than the bounds for +Inf; made
        # cumulative only when a snapshot is taken, so an observation touches one slot.
        self._bucket_counts = [0] * (len(bounds) + 1)
        self._latency_sum_s = 0.0
        self._decisions_total = 0

    @property
    def upper_bounds_s(self) -> tuple[float, ...]:
        return self._upper_bounds_s

    def observe_decision(self, latency_seconds: float) -> None:
        """Count one scheduling decision that took ``latency_seconds`` (>= 0, finite).

        Raises ValueError for a negative or non-finite latency: the caller measures with
        a monotonic clock, so such a value is a bug there, not something to record.
        """
        latency_s = float(latency_seconds)
        if not (math.isfinite(latency_s) and latency_s >= 0):
            raise ValueError(f"latency_seconds: must be a finite number >= 0, got {latency_seconds!r}")
        # bisect_left: the first bound >= latency, so a latency equal to a bound counts
        # in that bound's bucket; past the last bound it lands in the +Inf slot.
        slot = bisect.bisect_left(self._upper_bounds_s, latency_s)
        with self._lock:
            self._bucket_counts[slot] += 1
            self._latency_sum_s += latency_s
            self._decisions_total += 1

    def snapshot(self) -> DecisionLatencySnapshot:
        with self._lock:
            per_bucket = list(self._bucket_counts)
            latency_sum_s = self._latency_sum_s
            decisions_total = self._decisions_total
        cumulative: list[int] = []
        running = 0
        for count in per_bucket[:-1]:
            running += count
            cumulative.append(running)
        return DecisionLatencySnapshot(
            decisions_total=decisions_total,
            latency_sum_s=latency_sum_s,
            upper_bounds_s=self._upper_bounds_s,
            cumulative_counts=tuple(cumulative),
        )


# ---------------------------------------------------------------- exposition format


def escape_label_value(value: str) -> str:
    """Escape a label value for the text format: backslash, double quote, line feed."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    # HELP lines escape only backslash and line feed (a quote is literal there).
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float | int) -> str:
    """A sample value as Prometheus writes it: integers plainly, ``+Inf``, ``NaN``."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return repr(number)


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{name}="{escape_label_value(value)}"' for name, value in pairs)
    return "{" + body + "}" if body else ""


class _Page:
    """Accumulates metric families; each family's HELP and TYPE come once, first."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self._lines.append(f"# HELP {name} {_escape_help(help_text)}")
        self._lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float | int, labels: Iterable[tuple[str, str]] = ()) -> None:
        self._lines.append(f"{name}{_labels(labels)} {format_value(value)}")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def _number(value: Any) -> float | int:
    """A status number as it is (an int stays an int, written without ``.0``); a missing
    or malformed one is NaN, not a crash.

    The status comes from the service; a scrape must never fail because one field is
    absent (NaN is Prometheus' own "no value" and shows as a gap in a graph).
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    return math.nan


#: the states of ``fairshare_node_health`` (``live.ray_health.STATES``; not imported:
#: this module needs no Ray)
NODE_STATES = ("alive", "unhealthy", "dead")


def render(snapshot: DecisionLatencySnapshot, status: Mapping[str, Any],
           counters: Mapping[str, Any] | None = None, health: Mapping[str, Any] | None = None) -> str:
    """The ``/metrics`` page for one decision snapshot, one ``service.status()``, the
    service's ``counters()`` and the ``ray`` part of its ``health()`` (the families of
    a missing one are left out; None for ``health`` also when the executor is not Ray).

    Families and samples come in a fixed order (labels sorted) so two scrapes of the
    same state are byte-identical.
    """
    page = _Page()

    page.family("fairshare_decisions_total", "counter",
                "Scheduling decisions made since the service started.")
    page.sample("fairshare_decisions_total", snapshot.decisions_total)

    name = "fairshare_decision_latency_seconds"
    page.family(name, "histogram", "Time one scheduling decision took, in seconds.")
    for bound, count in zip(snapshot.upper_bounds_s, snapshot.cumulative_counts):
        page.sample(f"{name}_bucket", count, [("le", format_value(bound))])
    page.sample(f"{name}_bucket", snapshot.decisions_total, [("le", "+Inf")])
    page.sample(f"{name}_sum", snapshot.latency_sum_s)
    page.sample(f"{name}_count", snapshot.decisions_total)

    page.family("fairshare_preemptions_total", "counter",
                "Task attempts stopped by fair-share preemption since the service started "
                "(0 when preemption is off).")
    page.sample("fairshare_preemptions_total", _number(status.get("preemptions_total") or 0))

    queues: Mapping[str, Mapping[str, Any]] = status.get("queues") or {}
    queue_paths = sorted(queues)

    page.family("fairshare_queue_dominant_share", "gauge",
                "Dominant share of a queue: kind=current (what it holds now) or "
                "kind=fair (what the policy entitles it to now).")
    for path in queue_paths:
        entry = queues[path]
        page.sample("fairshare_queue_dominant_share", _number(entry.get("current_dominant_share")),
                    [("queue", path), ("kind", "current")])
        page.sample("fairshare_queue_dominant_share", _number(entry.get("fair_dominant_share")),
                    [("queue", path), ("kind", "fair")])

    page.family("fairshare_queue_weight", "gauge", "Configured weight of a queue (relative to its siblings).")
    for path in queue_paths:
        page.sample("fairshare_queue_weight", _number(queues[path].get("weight")), [("queue", path)])

    page.family("fairshare_pending_tasks", "gauge", "Tasks waiting to be placed, per queue.")
    for path in queue_paths:
        page.sample("fairshare_pending_tasks", _number(queues[path].get("pending_tasks")), [("queue", path)])

    page.family("fairshare_queue_running_tasks", "gauge", "Tasks running now, per queue.")
    for path in queue_paths:
        page.sample("fairshare_queue_running_tasks", _number(queues[path].get("running_tasks")),
                    [("queue", path)])

    page.family("fairshare_running_tasks", "gauge", "Tasks running now on the whole cluster.")
    page.sample("fairshare_running_tasks", _number(status.get("running_tasks")))

    utilization: Mapping[str, Any] = status.get("utilization") or {}
    capacity: Mapping[str, Any] = status.get("capacity") or {}
    resources = list(status.get("resources") or sorted(set(utilization) | set(capacity)))

    page.family("fairshare_utilization", "gauge",
                "Fraction of the cluster's capacity of a resource allocated to running tasks (0..1).")
    for resource in resources:
        page.sample("fairshare_utilization", _number(utilization.get(resource)), [("resource", resource)])

    page.family("fairshare_capacity", "gauge", "Capacity of a resource over the nodes that are up, in its own unit.")
    for resource in resources:
        page.sample("fairshare_capacity", _number(capacity.get(resource)), [("resource", resource)])

    nodes: Sequence[Mapping[str, Any]] = status.get("nodes") or []
    page.family("fairshare_node_up", "gauge", "1 when the node is alive, 0 when it is not.")
    for node in sorted(nodes, key=lambda n: str(n.get("name", ""))):
        page.sample("fairshare_node_up", 1 if node.get("alive") else 0, [("node", str(node.get("name", "")))])

    if counters is not None:
        page.family("fairshare_task_attempts_total", "counter",
                    "Task attempts started by this service process (every start, re-runs included).")
        page.sample("fairshare_task_attempts_total", _number(counters.get("task_attempts_total")))
        requeued: Mapping[str, Any] = counters.get("tasks_requeued_total") or {}
        page.family("fairshare_tasks_requeued_total", "counter",
                    "Tasks put back to pending by this service process, by reason: node_lost (its node died "
                    "or stopped answering), infrastructure (Ray lost it), failed (its command failed or its "
                    "start was refused, with attempts left).")
        for reason in sorted(requeued):
            page.sample("fairshare_tasks_requeued_total", _number(requeued[reason]), [("reason", reason)])
        page.family("fairshare_service_starts_total", "counter",
                    "Starts of a service on this database, this one included (restarts: this minus one).")
        page.sample("fairshare_service_starts_total", _number(counters.get("service_starts_total")))

    if health is not None:
        page.family("fairshare_ray_reachable", "gauge",
                    "1 when Ray listed its nodes within the node timeout, else 0.")
        page.sample("fairshare_ray_reachable", 1 if health.get("reachable") else 0)
        states: Sequence[Mapping[str, Any]] = sorted(health.get("node_states") or [],
                                                     key=lambda n: str(n.get("name", "")))
        page.family("fairshare_node_health", "gauge",
                    "1 for the node's health state, 0 for the others: alive (answers its probes), unhealthy "
                    "(listed alive by Ray, no answer for the node timeout: out of scheduling), dead (Ray lists "
                    "it dead).")
        for node in states:
            for state in NODE_STATES:
                page.sample("fairshare_node_health", 1 if node.get("state") == state else 0,
                            [("node", str(node.get("name", ""))), ("state", state)])
        page.family("fairshare_node_last_answer_seconds", "gauge",
                    "Seconds since the node last answered a probe (NaN: never, or dead).")
        for node in states:
            page.sample("fairshare_node_last_answer_seconds", _number(node.get("last_answer_s")),
                        [("node", str(node.get("name", "")))])

    return page.text()


# ---------------------------------------------------------------- HTTP route


def install(app: Any, service: Any, *, authorize: Callable[[Any], Any] | None = None) -> None:
    """Add ``GET /metrics`` to the FastAPI ``app``.

    ``service`` provides ``status()`` and ``metrics`` (a :class:`Metrics`).
    ``authorize(request)`` checks the bearer token and raises the API's own 401 error
    when it is missing or unknown (``fairshare.live.api.authorize``, which ``create_app``
    passes). Without it, the token is checked against ``service.auth`` here and a
    refusal is a plain FastAPI 401.
    """
    from fastapi import Depends, Request
    from fastapi.responses import Response
    from fastapi.security import HTTPBearer

    check = authorize or _service_authorizer(service)
    # Declared (auto_error=False: ``check`` decides) so the OpenAPI document says this
    # route takes the same bearer token as the API.
    bearer = HTTPBearer(auto_error=False, description="a tenant's token, or the admin token")

    @app.get(
        "/metrics",
        tags=["observability"],
        summary="Prometheus metrics (text exposition format 0.0.4)",
        response_class=Response,
        dependencies=[Depends(bearer)],
        # 401 (and the API's other refusals) come from the app-level responses.
        responses={200: {"description": "The metrics page (docs/live.md, section Metrics).",
                         "content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    def get_metrics(request: Request) -> Response:
        check(request)
        counters = service.counters() if hasattr(service, "counters") else None
        health = service.health()[1].get("ray") if hasattr(service, "health") else None
        page = render(service.metrics.snapshot(), service.status(), counters, health)
        return Response(content=page, media_type=CONTENT_TYPE)


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
