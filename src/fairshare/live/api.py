"""The HTTP API of ``fairshare serve`` (FastAPI; OpenAPI at ``/openapi.json``).

Every route but ``/healthz`` needs ``Authorization: Bearer TOKEN`` (``live.auth``).
Every refusal is JSON ``{"error": {"field": PATH, "reason": TEXT}, "errors": [...]}``
with a 4xx status: 400 the body is not JSON, 401 no or unknown token, 403 not allowed
(queue not granted, not the admin), 404 no such job (also another tenant's job: its
existence is not revealed), task of the job or attempt with output, 413 the body is larger than ``MAX_BODY_BYTES``, 422 invalid
input (every problem, first one in ``error``), 429 over the tenant's submission rate or
pending-task cap (with ``Retry-After``). Request bodies are checked in this order: size
(before reading them), JSON, then ``config.request_problems`` (text and size limits) and
the loader that reads a job file or a config (``config.parse_jobs``: the scenario
loader's checks, with the same field paths) or a queue change (``queues``). That loader
is the one validation: the request bodies' schemas in the OpenAPI document are rendered
from the same description of the documents (``model.schema``: ``config.JOBS``,
``queues.QUEUE_CHANGES``), and the response models below only document the answers.

``POST /v1/jobs`` is the one route built for throughput: it is a coroutine (no thread
per request), answered by the ``SubmitRoute`` middleware before FastAPI's own layers,
validates on the event loop and awaits the store's writer, which commits every
submission waiting in one transaction (``store.Store.submit``); the answer (201) goes
out only after that commit.
"""

import asyncio
import json
import logging
import math
import re
import time
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from fairshare.live.auth import AuthError, Principal, SubmitRateLimiter
from fairshare.live.config import JOBS, MAX_BODY_BYTES, request_problems
from fairshare.live.queues import QUEUE_CHANGES
from fairshare.live.service import MAX_PAGE, TASKS_PAGE, LiveError, LiveService, submission_refusal
from fairshare.live.task_output import READ_DEFAULT, READ_MAX
from fairshare.model.errors import FieldError
from fairshare.model.schema import render

log = logging.getLogger(__name__)
MAX_ID = 2 ** 63 - 1  # SQLite's integer range


# --- request and response models (the OpenAPI schema) -----------------------------------------
class SubmitOut(BaseModel):
    ids: list[int]


class ErrorItem(BaseModel):
    field: str
    reason: str


class ErrorOut(BaseModel):
    error: ErrorItem
    errors: list[ErrorItem]


class JobOut(BaseModel):
    id: int
    name: str
    queue: str
    tenant: str
    state: Literal["pending", "running", "succeeded", "failed", "cancelled"]
    tasks_total: int
    tasks_done: int
    tasks_succeeded: int
    tasks_running: int
    tasks_failed: int
    submitted_at: float
    finished_at: float | None


class TaskOut(BaseModel):
    id: int
    class_: str = Field(alias="class")
    state: Literal["pending", "running", "succeeded", "failed", "cancelled"]
    node: str | None
    attempts: int
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    message: str | None
    preemptions: int = Field(0, description="attempts stopped by fair-share preemption (counted in attempts)")


class JobDetailOut(JobOut):
    weight: float
    spec: dict[str, Any]
    tasks: list[TaskOut]
    #: the cursor of the next page of tasks (``?tasks_after=``); null on the last page
    tasks_next: int | None = None
    gang: bool = Field(False, description="all of its tasks start together or none does")
    pack: str | dict[str, str] | None = Field(None, description="where a gang's tasks go together: node, "
                                                                "{attribute: NAME} or null")
    priority: int = Field(0, description="within its queue, higher is served first")
    placement_group: dict[str, Any] | None = Field(
        None, description="a Ray program's placement group (id, name, state, strategy, bundles); null for "
                          "a command job, or before its gang is admitted")


class AttemptLogOut(BaseModel):
    task: int
    attempt: int
    bytes: int = Field(description="bytes of output kept (the tail: at most serve's --output-max-bytes)")
    dropped: int = Field(description="bytes lost to rotation (before the first kept)")
    ended: bool = Field(description="the attempt has ended")


class JobLogsOut(BaseModel):
    job: int
    logs: list[AttemptLogOut] = Field(description="one per (task, attempt) with output kept, by task then attempt")


class TaskLogOut(BaseModel):
    job: int
    task: int
    attempt: int
    offset: int = Field(description="the byte offset of data in the attempt's whole output: the one asked for, "
                                    "or the first byte still kept if that is later")
    next_offset: int = Field(description="offset + bytes returned: where a follower reads next")
    dropped: int = Field(description="bytes lost to rotation before offset")
    data: str = Field(description="the bytes, UTF-8 decoded with replacement")
    ended: bool = Field(description="the attempt has ended: once a read returns fewer bytes than its limit, there "
                                    "is no more")


class ExplainOut(BaseModel):
    job: str = Field(description="the job id (the engine's name of the job)")
    state: Literal["pending", "running", "succeeded", "failed", "cancelled"]
    reasons: list[dict[str, Any]] = Field(
        description="why tasks of the job wait, each {kind, ...its numbers}: priority_held, queue_limit, "
                    "gang_incomplete, no_node_fits, then the jobs served first (guarantee_owed, "
                    "behind_fair_share); docs/policies.md, \"Why a job waits\"")
    would_start_if: list[dict[str, Any]] = Field(
        description="changes that would start it now, each checked by deciding again on a copy")
    estimated_start: float | None = Field(
        description="when it is expected to start (wall clock, seconds since the epoch), from a forward "
                    "simulation of the current state; null: running, done, or not known")


class QueueOut(BaseModel):
    weight: float
    current_dominant_share: float
    fair_dominant_share: float
    running_tasks: int
    pending_tasks: int
    guarantee: dict[str, float] = Field(default_factory=dict)
    limit: dict[str, float] = Field(default_factory=dict)
    allocated: dict[str, float] = Field(default_factory=dict,
                                        description="what its running tasks (its subtree's) hold, per resource")
    fair_share: dict[str, float] = Field(default_factory=dict,
                                         description="the allocation behind fair_dominant_share, per resource")
    time_below_fair_share: float | None = Field(None, description="seconds below its fair share by more than the "
                                                                  "preemption tolerance; null: preemption off")
    decayed_usage: dict[str, float] | None = Field(
        None, description="fairness.half_life: the decayed average allocation U/W of its subtree, per resource "
                          "(docs/live.md); null: half-life 0")
    effective_dominant_share: float | None = Field(
        None, description="fairness.half_life: the dominant share of allocated + decayed_usage, what the order "
                          "is by; null: half-life 0")


class NodeOut(BaseModel):
    name: str
    alive: bool
    capacity: dict[str, float]
    used: dict[str, float]


class FairnessOut(BaseModel):
    half_life: float | Literal["inf"] = Field(description="seconds of the decayed usage's half-life (0: no "
                                                          "memory; \"inf\": cumulative usage; docs/live.md)")


class StatusOut(BaseModel):
    time: float
    policy: str
    resources: list[str]
    capacity: dict[str, float]
    utilization: dict[str, float]
    queues: dict[str, QueueOut]
    pending_tasks: int
    running_tasks: int
    decisions_total: int
    preemptions_total: int | None = Field(None, description="attempts preempted; null: preemption off")
    nodes: list[NodeOut]
    fairness: FairnessOut | None = None



class HistoryOut(BaseModel):
    time: float
    utilization: dict[str, float]
    queues: dict[str, float]


class NodeHealthOut(BaseModel):
    name: str
    state: Literal["alive", "unhealthy", "dead"] = Field(
        description="alive: answers its probes; unhealthy: Ray lists it alive but it has not answered for the "
                    "node timeout (out of scheduling, its tasks re-queued); dead: Ray lists it dead or no longer")
    last_answer_s: float | None = Field(None, description="seconds since its last probe answer; null: none yet")
    waiting_s: float | None = Field(None, description="how long its unanswered probe has waited; null: none out")


class NodeCountsOut(BaseModel):
    alive: int
    unhealthy: int
    dead: int


class RayHealthOut(BaseModel):
    reachable: bool = Field(description="Ray listed its nodes within the node timeout")
    last_contact_s: float | None = Field(None, description="seconds since Ray last listed its nodes")
    error: str | None = Field(None, description="why the last listing failed; null: it did not")
    node_timeout_s: float
    nodes: NodeCountsOut
    node_states: list[NodeHealthOut]


class HealthOut(BaseModel):
    status: Literal["ok", "degraded", "unavailable"] = Field(
        description="ok; degraded (200): a node stopped answering or died; unavailable (503): the scheduling loop "
                    "stopped or Ray is unreachable")
    detail: str
    ray: RayHealthOut | None = Field(None, description="Ray's state; null when the executor is not Ray")


class _AsciiJSON(JSONResponse):
    """JSON with every non-ASCII character escaped: a refusal may quote a client's text,
    and text that is not valid Unicode (a lone surrogate) cannot be sent as UTF-8."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _errors(status: int, errors: list[FieldError], headers: dict[str, str] | None = None) -> JSONResponse:
    items = [{"field": e.path, "reason": e.reason} for e in errors] or [{"field": "", "reason": "refused"}]
    return _AsciiJSON(status_code=status, content={"error": items[0], "errors": items}, headers=headers)


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "null"}


def _field_path(loc: tuple) -> str:
    """pydantic's ``('body', 'jobs', 0, 'tasks', 0, 'demand', 'gpu')`` ->
    ``jobs[0].tasks[0].demand.gpu`` (union member tags such as ``list[str]`` dropped)."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and (part in _TYPE_TAGS or "[" in part):
            continue
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


#: every refusal the API answers, by status; each route lists the ones it can answer
#: (``_refusals``), so a client generated from the document handles those and no others
_REFUSALS: dict[int, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "the request body is not valid JSON, or nests arrays and objects "
                                            "deeper than a request may"},
    401: {"model": ErrorOut, "description": "missing or unknown bearer token"},
    403: {"model": ErrorOut, "description": "not allowed for this token"},
    404: {"model": ErrorOut, "description": "no such job (or not yours: another tenant's job is not revealed)"},
    413: {"model": ErrorOut, "description": f"the request body is larger than {MAX_BODY_BYTES} bytes"},
    422: {"model": ErrorOut, "description": "invalid input: every problem with its field path"},
    429: {"model": ErrorOut, "description": "over the tenant's submission rate or pending-task cap; retry after "
                                            "the Retry-After header's seconds",
          "headers": {"Retry-After": {"schema": {"type": "integer"},
                                      "description": "seconds to wait before retrying"}}},
}


def _refusals(*statuses: int, why: dict[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route that can refuse with ``statuses``; ``why``: status ->
    this route's own cause, instead of the general description."""
    why = why or {}
    return {status: {**_REFUSALS[status], **({"description": why[status]} if status in why else {})}
            for status in statuses}


def _operation_id(route: Any) -> str:
    """A route's operationId when it names none: its function's name in camelCase
    (``get_job`` -> ``getJob``), not FastAPI's ``get_job_v1_jobs__job_id__get``."""
    head, *rest = route.name.split("_")
    return head + "".join(word.capitalize() for word in rest)


#: what FastAPI would have written for POST /v1/jobs' parameters (its route reads them itself)
_SUBMIT_OPENAPI: dict[str, Any] = {
    "security": [{"HTTPBearer": []}],
    "parameters": [{
        "name": "Idempotency-Key", "in": "header", "required": False,
        "schema": {"type": "string", "maxLength": 255, "pattern": "^[\\x21-\\x7e]{1,255}$"},
        "description": "makes a retry safe: a request this tenant sent before with this key and the same body gets "
                       "that request's answer again, and creates nothing (same key, other body: 422)"}],
    "requestBody": {"required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SubmitIn"}}}},
}
#: what FastAPI would have written for PUT /v1/queues' body (its route reads it itself)
_QUEUES_OPENAPI: dict[str, Any] = {
    "requestBody": {"required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QueueChangeIn"}}}},
}
#: the deepest nesting of arrays and objects a request body may have: a job document is
#: about 5 levels deep and a queue change 4, so 64 leaves room and stops a body that
#: would exhaust the parser's recursion (it answered 500 before)
MAX_BODY_DEPTH = 64
_BRACKETS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def body_depth(raw: bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` in a JSON text (brackets inside strings not
    counted): one scan of the brackets and strings, no parse."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(raw):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


async def read_json(request: Request) -> Any:
    """A request's body as JSON, the same way on every route that takes one, whatever its
    Content-Type says: 400 naming ``body`` when it is not JSON or is nested deeper than
    ``MAX_BODY_DEPTH``."""
    raw = await request.body()
    # (counting brackets is cheap; the scan runs only for a body that could be too deep)
    depth = body_depth(raw) if raw.count(b"[") + raw.count(b"{") > MAX_BODY_DEPTH else 0
    if depth > MAX_BODY_DEPTH:
        raise LiveError(400, FieldError("body", f"is nested {depth} arrays or objects deep, more than "
                                                f"the {MAX_BODY_DEPTH} a request may have"))
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise LiveError(400, FieldError("body", f"is not valid JSON: {exc}")) from None


#: an Idempotency-Key: 1 to 255 visible ASCII characters (a UUID is the usual choice)
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is refused with 413 before it
    is read (``Content-Length``) or as soon as the bytes read pass the limit (a chunked
    body), so no request can make the service hold more than ``limit`` bytes of it."""

    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit():
                    await _errors(400, [FieldError("Content-Length", "must be a whole number of bytes")])(
                        scope, receive, send)
                    return
                if int(value) > self.limit:
                    await self._too_large(int(value))(scope, receive, send)
                    return
                await self.app(scope, receive, send)  # the server reads no more than it says
                return
        seen = 0
        limit = self.limit

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise StarletteHTTPException(413, f"must be at most {limit} bytes, got more")
            return message

        await self.app(scope, counted, send)

    def _too_large(self, size: int) -> JSONResponse:
        return _errors(413, [FieldError("body", f"must be at most {self.limit} bytes, got {size}")])


class HeadAsGet:
    """ASGI middleware: ``HEAD`` answered as ``GET`` without the body (RFC 9110, 9.3.2),
    on every route. FastAPI's routes answer only the methods they declare, so ``HEAD /``
    was a 405 for a monitor or a link checker that probes the dashboard; Starlette adds
    ``HEAD`` to its own routes the same way. The app sees a ``GET`` on a copy of the
    scope: the server's scope still says ``HEAD``, so it sends no body either."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: dict) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


class SubmitRoute:
    """ASGI middleware: ``POST /v1/jobs`` answered by ``submit`` here, inside ``BodyLimit``
    and outside FastAPI's exception middleware, routing and endpoint machinery, which
    cost as much per submission as the submission itself (docs/live.md, "Measured").
    The answers are the same: ``submit`` is the route's own handler (the route stays
    declared, for the OpenAPI document and for any request this does not take), and a
    refusal or an internal error is rendered by the same functions as the app's
    exception handlers. Only the exact path without a ``root_path`` is taken here; any
    other request goes on to the app unchanged."""

    def __init__(self, app: Any, submit: Any):
        self.app, self.submit = app, submit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/v1/jobs" \
                or scope.get("root_path"):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = await self.submit(request)
        except LiveError as exc:
            response = _errors(exc.status, exc.errors, exc.headers or None)
        except StarletteHTTPException as exc:  # BodyLimit's 413 of a chunked body
            response = _http_error_response(exc)
        except Exception as exc:  # noqa: BLE001 - what the app's handler of Exception answers
            response = _internal_error_response(exc)
        await response(scope, receive, send)


def _http_error_response(exc: StarletteHTTPException) -> JSONResponse:
    reason = exc.detail if isinstance(exc.detail, str) else "refused"
    field = "body" if exc.status_code in (400, 413) else ("path" if exc.status_code in (404, 405) else "")
    return _errors(exc.status_code, [FieldError(field, reason)])


def _internal_error_response(exc: Exception) -> JSONResponse:
    log.exception("internal error", exc_info=exc)
    return _errors(500, [FieldError("", f"internal error: {type(exc).__name__}")])


_bearer = HTTPBearer(auto_error=False, description="a tenant's token, or the admin token")


def authorize(request: Request) -> Principal:
    """The caller of ``request`` (its bearer token); 401 ``LiveError`` when there is none."""
    service: LiveService = request.app.state.service
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        token = ""
    try:
        return service.auth.authenticate(token.strip() or None)
    except AuthError as exc:
        raise LiveError(401, FieldError("Authorization", str(exc))) from None


async def _principal(request: Request,
                     _credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Principal:
    # a coroutine: FastAPI would run a plain function in a worker thread, for no gain here
    return authorize(request)


Caller = Annotated[Principal, Depends(_principal)]
JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="job id")]


def create_app(service: LiveService) -> FastAPI:
    app = FastAPI(title="fairshare serve", version="1",
                  description="Live multi-resource fair-share scheduling (docs/live.md).",
                  # (a route added without an operation_id still gets a readable one)
                  generate_unique_id_function=_operation_id)
    app.state.service = service
    rate = SubmitRateLimiter()

    @app.exception_handler(LiveError)
    async def _live_error(_request: Request, exc: LiveError) -> JSONResponse:
        return _errors(exc.status, exc.errors, exc.headers or None)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        if any(err.get("type") == "json_invalid" for err in exc.errors()):
            # not JSON at all (as opposed to JSON of the wrong shape, 422)
            reason = next(err.get("ctx", {}).get("error", "") for err in exc.errors()
                          if err.get("type") == "json_invalid")
            return _errors(400, [FieldError("body", f"is not valid JSON: {reason}".rstrip(": "))])
        return _errors(422, _pydantic_errors(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _http_error_response(exc)

    @app.exception_handler(Exception)
    async def _internal_error(_request: Request, exc: Exception) -> JSONResponse:
        return _internal_error_response(exc)

    @app.get("/healthz", response_model=HealthOut, tags=["service"], operation_id="getHealth",
             responses={503: {"model": HealthOut, "description": "the scheduling loop stopped or Ray is unreachable"}})
    def healthz() -> Response:
        """Health without a token: ``ok``; ``degraded`` (200) when a Ray node stopped
        answering or died; ``unavailable`` (503) when the scheduling loop stopped or Ray
        cannot be reached. ``ray`` gives Ray's state and each node's."""
        code, doc = service.health()
        return _AsciiJSON(HealthOut.model_validate(doc).model_dump(), status_code=code)

    @app.post("/v1/jobs", status_code=201, response_model=SubmitOut, tags=["jobs"], operation_id="submitJobs",
              responses=_refusals(400, 401, 403, 413, 422, 429, why={403: "a queue not granted to the tenant"}),
              openapi_extra=_SUBMIT_OPENAPI)
    async def submit_jobs(request: Request) -> Response:
        """Submit jobs (the scenario format, each task class with a command)."""
        return await submit(request)  # (SubmitRoute calls ``submit`` before this route is reached)

    async def submit(request: Request) -> Response:
        # The request is taken apart here rather than by FastAPI's parameters: the same
        # checks (the OpenAPI document above declares the body, the header and the token)
        # at a third of the cost per request, and the token is checked before the body is
        # read. Order: token (401), key (422), rate (429), JSON (400), shape (422), then
        # the service (422, 403, 429).
        caller = authorize(request)
        idempotency_key = request.headers.get("idempotency-key")
        if idempotency_key is not None and not _IDEMPOTENCY_KEY.match(idempotency_key):
            raise LiveError(422, FieldError("Idempotency-Key", "must be 1 to 255 visible ASCII characters "
                                                               "(e.g. a UUID)"))
        limits = None if caller.admin else service.auth.limits_of(caller.name)
        if limits is not None:
            wait = rate.take(caller.name, limits, time.monotonic())
            if wait > 0:
                retry = max(1, math.ceil(wait))
                raise LiveError(429, FieldError("rate", f"tenant {caller.name!r} may submit {limits.submit_rate:g} "
                                                        f"request(s)/s (bursts of {limits.submit_burst}): retry in "
                                                        f"{retry} s"), headers={"Retry-After": str(retry)})
        # (validated once, by the service: config.request_problems, then config.parse_jobs)
        document = await read_json(request)
        future = service.submit_future(caller, document, idempotency_key=idempotency_key)
        try:
            ids, _replayed = await asyncio.wrap_future(future)
        except Exception as exc:  # noqa: BLE001 - the store's refusals become HTTP refusals
            raise submission_refusal(exc) from None
        return Response(json.dumps({"ids": ids}, separators=(",", ":")), status_code=201,
                        media_type="application/json")

    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's document plus the schemas of the request bodies (their routes read
        the bodies themselves, so FastAPI does not list them), rendered from the documents'
        description (``model.schema``), as ``fairshare schema jobs`` renders them."""
        if app.openapi_schema is None:
            document = default_openapi()
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            defs: dict[str, Any] = {}
            for name, doc in (("SubmitIn", JOBS), ("QueueChangeIn", QUEUE_CHANGES)):
                render(doc.but(name), defs, "#/components/schemas/")
            clash = set(defs) & set(schemas)
            assert not clash, f"request schemas named as response models: {clash}"
            schemas.update(defs)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    # (the last added is the outermost: the size limit holds for the submissions too)
    app.add_middleware(SubmitRoute, submit=submit)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(HeadAsGet)

    @app.get("/v1/jobs", response_model=list[JobOut], tags=["jobs"], operation_id="listJobs",
             responses=_refusals(401, 422))
    def list_jobs(caller: Caller, limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE)] = None,
                  after: Annotated[int | None, Query(ge=0)] = None,
                  order: Annotated[Literal["oldest", "newest"], Query()] = "oldest") -> list[dict]:
        """Your jobs (the admin: every job), oldest first (``order=newest``: newest first);
        with ``limit`` a page of at most that many, after the job id ``after`` in that order
        (the last id of the previous page). The dashboard asks for the newest page."""
        return service.list_jobs(None if caller.admin else caller.name, after=after, limit=limit,
                                 newest=order == "newest")

    @app.get("/v1/jobs/{job_id}", response_model=JobDetailOut, tags=["jobs"], response_model_by_alias=True,
             operation_id="getJob", responses=_refusals(401, 404, 422))
    def get_job(job_id: JobId, caller: Caller,
                tasks_limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = TASKS_PAGE,
                tasks_after: Annotated[int | None, Query(ge=0)] = None) -> dict:
        """The job and one page of its tasks (``tasks_next``: the next page's cursor)."""
        return service.get_job(job_id, None if caller.admin else caller.name, tasks_after=tasks_after,
                               tasks_limit=tasks_limit)

    @app.post("/v1/jobs/{job_id}/cancel", response_model=JobDetailOut, tags=["jobs"], response_model_by_alias=True,
              operation_id="cancelJob", responses=_refusals(401, 404, 422))
    def cancel_job(job_id: JobId, caller: Caller) -> dict:
        """Cancel: pending tasks are dropped, running ones are interrupted."""
        return service.cancel(caller, job_id)

    @app.get("/v1/jobs/{job_id}/logs", response_model=JobLogsOut, tags=["jobs"], operation_id="listJobLogs",
             responses=_refusals(401, 404, 422))
    def get_job_logs(job_id: JobId, caller: Caller) -> dict:
        """The attempts of the job's tasks whose output is kept: size, bytes dropped by rotation, ended."""
        return service.job_logs(caller, job_id)

    @app.get("/v1/jobs/{job_id}/explain", response_model=ExplainOut, tags=["jobs"], operation_id="explainJob",
             responses=_refusals(401, 404, 422))
    def explain_job(job_id: JobId, caller: Caller) -> dict:
        """Why the job waits, what would start it now, and when it is expected to start (the document of
        ``fairshare explain --format json``, at the scheduler's last decision)."""
        return service.explain(caller, job_id)

    @app.get("/v1/jobs/{job_id}/tasks/{task_id}/logs", response_model=TaskLogOut, tags=["jobs"],
             operation_id="getTaskLog", responses=_refusals(401, 404, 422))
    def get_task_log(job_id: JobId, task_id: Annotated[int, Path(ge=1, le=MAX_ID, description="task id")],
                     caller: Caller, attempt: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
                     offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
                     limit: Annotated[int, Query(ge=1, le=READ_MAX)] = READ_DEFAULT) -> dict:
        """Bytes of one attempt's output (default: the task's latest attempt) from ``offset``; a follower
        reads again from ``next_offset`` until the attempt has ended and a read comes back short."""
        return service.task_log(caller, job_id, task_id, attempt=attempt, offset=offset, limit=limit)

    @app.get("/v1/queues", response_model=dict[str, QueueOut], tags=["queues"], operation_id="getQueues",
             responses=_refusals(401))
    def get_queues(caller: Caller) -> dict:
        """Each queue's weight, current and fair dominant share, running and pending tasks, guarantee,
        limit, fair share and time below it (docs/live.md)."""
        return service.queues()

    @app.put("/v1/queues", response_model=dict[str, QueueOut], tags=["queues"], openapi_extra=_QUEUES_OPENAPI,
             operation_id="updateQueues", responses=_refusals(400, 401, 403, 413, 422,
                                                               why={403: "not the admin token"}))
    async def put_queues(request: Request, caller: Caller) -> dict:
        """Admin only: change weights, add queues and set guarantees and limits at run time (kept across
        restarts)."""
        # the body is read as POST /v1/jobs reads its own (``read_json``: any Content-Type,
        # the same 400s), then checked by the one reader of change documents
        # (``service.update_queues``: live.queues)
        change = await read_json(request)
        problems = request_problems(change)  # NUL or lone surrogates in a queue path
        if problems:
            raise LiveError(422, problems)
        # (update_queues waits for the scheduling pass: off the event loop)
        return await run_in_threadpool(service.update_queues, caller, change)

    @app.get("/v1/status", response_model=StatusOut, tags=["service"], operation_id="getStatus",
             responses=_refusals(401))
    def get_status(caller: Caller) -> dict:
        return service.status()

    @app.get("/v1/history", response_model=list[HistoryOut], tags=["service"], operation_id="getHistory",
             responses=_refusals(401))
    def get_history(caller: Caller) -> list[dict]:
        return service.history()

    _install_optional(app, service, authorize)
    return app


def _pydantic_errors(errors: Any) -> list[FieldError]:
    """pydantic's errors (a query or path parameter's) as field paths and reasons, each once."""
    out = []
    for err in errors:
        path = _field_path(tuple(err.get("loc", ())))
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = "unknown key"
        elif err.get("type") == "missing":
            msg = "is required"
        out.append(FieldError(path, msg))
    return list(dict.fromkeys(out))


def _install_optional(app: FastAPI, service: LiveService, authorize) -> None:
    """The dashboard and /metrics, when their modules are present."""
    try:
        from fairshare.live import dashboard
    except ImportError:
        dashboard = None  # type: ignore[assignment]
    if dashboard is not None and hasattr(dashboard, "install"):
        dashboard.install(app, service)
    try:
        from fairshare.live import metrics
    except ImportError:
        metrics = None  # type: ignore[assignment]
    if metrics is not None and hasattr(metrics, "install"):
        try:
            metrics.install(app, service, authorize=authorize, route={"responses": _refusals(401)})
        except TypeError:  # an install without the authorize argument
            metrics.install(app, service)
