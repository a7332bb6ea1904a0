"""A Python client for ``fairshare serve``'s HTTP API (docs/live.md, "Python client").

    from fairshare.client import Client

    client = Client("https://sched.example:8000", token="...", ca_cert="ca.pem")
    ids = client.submit("jobs.yaml").ids
    for job in client.wait(ids, timeout=600):
        print(job.id, job.state)
    for chunk in client.logs(ids[0], follow=True):
        print(chunk.data, end="")

The ``fairshare`` command's clients (``submit``, ``jobs``, ``job``, ``cancel``, ``queues``,
``status``, ``logs``) go through this class. It uses the standard library only (urllib,
tomllib): importing it loads no numpy, scipy, YAML parser, FastAPI or pydantic, so a
script or a notebook that only talks to serve starts at once. (``submit`` given a file
path reads it with the scenario loader's parser, which loads PyYAML then.)

Retries and idempotency: ``submit`` sends an ``Idempotency-Key`` (a new UUID per call) and
retries, with the same key, after a lost connection, a 5xx or a 429, up to ``retries``
times, waiting 0.5, 1, 2, 4 ... s (at most 30 s) or the server's ``Retry-After``: a retry
of a submission the server committed but whose answer was lost gets the same job ids back
instead of creating the jobs twice. The other calls are tried once.

Every refusal raises :class:`ClientError` with the HTTP status and the server's field
errors; a server that cannot be reached raises :class:`Unreachable` (a ``ClientError``
without a status).
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: first wait before a retry of ``submit`` (doubled each time), and the longest wait
RETRY_FIRST_S, RETRY_MAX_S = 0.5, 30.0
#: the most tasks one page of ``GET /v1/jobs/{id}`` may hold (the server's ``MAX_PAGE``)
MAX_TASKS_PAGE = 10_000
#: job and task states after which nothing changes
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})
#: bytes asked for per ``GET .../logs`` (the server's default page; it allows 1 MiB)
LOG_PAGE_BYTES = 65_536
#: the client configuration file under ``$XDG_CONFIG_HOME`` (default ``~/.config``)
CONFIG_RELATIVE = Path("fairshare") / "client.toml"
PROFILE_KEYS = ("url", "token", "token_file", "ca_cert")
SERVER_ENV, TOKEN_ENV, CA_CERT_ENV, PROFILE_ENV = ("FAIRSHARE_SERVER", "FAIRSHARE_TOKEN", "FAIRSHARE_CA_CERT",
                                                   "FAIRSHARE_PROFILE")


# --- errors ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FieldProblem:
    """One problem the server found: the request field (``jobs[0].queue``; empty for the
    request as a whole) and the reason."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


class ClientError(Exception):
    """A refused request (``status``: the HTTP status, ``errors``: the server's field
    problems) or a request refused before it was sent (``status`` None: bad input)."""

    def __init__(self, message: str, status: int | None = None, errors: tuple[FieldProblem, ...] = (),
                 retry_after_s: float | None = None):
        super().__init__(message)
        self.status = status
        self.errors = errors
        #: the server's ``Retry-After`` on a 429 or 503, if it sent one
        self.retry_after_s = retry_after_s

    @property
    def retryable(self) -> bool:
        """A retry may cure it: no answer, a 5xx or a 429."""
        return self.status is not None and (self.status >= 500 or self.status == 429)


class Unreachable(ClientError):
    """No answer: the server refused the connection, timed out or cut it."""

    @property
    def retryable(self) -> bool:
        return True


class Untrusted(Unreachable):
    """An https server whose certificate the client cannot verify (no retry cures it)."""

    @property
    def retryable(self) -> bool:
        return False


# --- typed results -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """One task of a job (``GET /v1/jobs/{id}``'s ``tasks``); ``task_class``: the API's ``class``."""

    id: int
    task_class: str
    state: str
    node: str | None
    attempts: int
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    message: str | None
    preemptions: int = 0

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Task:
        return cls(id=doc["id"], task_class=doc["class"], state=doc["state"], node=doc.get("node"),
                   attempts=doc["attempts"], started_at=doc.get("started_at"), finished_at=doc.get("finished_at"),
                   exit_code=doc.get("exit_code"), message=doc.get("message"), preemptions=doc.get("preemptions", 0))


@dataclass(frozen=True)
class Job:
    """A job as serve reports it; ``weight``, ``spec`` and ``tasks`` only from :meth:`Client.job`
    (``tasks_next``: the cursor past the tasks read, None when all were). ``raw``: the
    server's document, as sent (``fairshare job --format json`` prints it)."""

    id: int
    name: str
    queue: str
    tenant: str
    state: str
    tasks_total: int
    tasks_done: int
    tasks_succeeded: int
    tasks_running: int
    tasks_failed: int
    submitted_at: float
    finished_at: float | None
    weight: float | None = None
    spec: dict[str, Any] | None = None
    tasks: tuple[Task, ...] = ()
    tasks_next: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Job:
        return cls(id=doc["id"], name=doc["name"], queue=doc["queue"], tenant=doc["tenant"], state=doc["state"],
                   tasks_total=doc["tasks_total"], tasks_done=doc["tasks_done"],
                   tasks_succeeded=doc["tasks_succeeded"], tasks_running=doc["tasks_running"],
                   tasks_failed=doc["tasks_failed"], submitted_at=doc["submitted_at"],
                   finished_at=doc.get("finished_at"), weight=doc.get("weight"), spec=doc.get("spec"),
                   tasks=tuple(Task.from_json(t) for t in doc.get("tasks", ())), tasks_next=doc.get("tasks_next"),
                   raw=doc)


@dataclass(frozen=True)
class Queue:
    """One queue of ``GET /v1/queues`` (docs/live.md): shares are dominant shares in [0, 1];
    ``time_below_fair_share`` None when preemption is off. ``decayed_usage`` (resource ->
    decayed average allocation) and ``effective_dominant_share`` (of allocation plus
    decayed usage): None without decayed usage (half-life 0, or an older server)."""

    path: str
    weight: float
    current_dominant_share: float
    fair_dominant_share: float
    running_tasks: int
    pending_tasks: int
    guarantee: dict[str, float]
    limit: dict[str, float]
    fair_share: dict[str, float]
    time_below_fair_share: float | None
    decayed_usage: dict[str, float] | None = None
    effective_dominant_share: float | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, path: str, doc: dict[str, Any]) -> Queue:
        return cls(path=path, weight=doc["weight"], current_dominant_share=doc["current_dominant_share"],
                   fair_dominant_share=doc["fair_dominant_share"], running_tasks=doc["running_tasks"],
                   pending_tasks=doc["pending_tasks"], guarantee=doc.get("guarantee") or {},
                   limit=doc.get("limit") or {}, fair_share=doc.get("fair_share") or {},
                   time_below_fair_share=doc.get("time_below_fair_share"), decayed_usage=doc.get("decayed_usage"),
                   effective_dominant_share=doc.get("effective_dominant_share"), raw=doc)


def _queues(doc: dict[str, Any]) -> dict[str, Queue]:
    return {path: Queue.from_json(path, q) for path, q in doc.items()}


@dataclass(frozen=True)
class Node:
    name: str
    alive: bool
    capacity: dict[str, float]
    used: dict[str, float]


@dataclass(frozen=True)
class Status:
    """``GET /healthz`` and ``GET /v1/status`` together. ``health``: ok, degraded or
    unavailable (``/healthz`` answers the last with a 503, which is an answer here, not an
    error); ``preemptions_total`` None when preemption is off. ``raw``: ``{"health": ...,
    "status": ...}``, the two documents as sent."""

    health: str
    health_detail: str
    policy: str
    resources: tuple[str, ...]
    utilization: dict[str, float]
    running_tasks: int
    pending_tasks: int
    decisions_total: int
    preemptions_total: int | None
    nodes: tuple[Node, ...]
    queues: dict[str, Queue]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, health: dict[str, Any], state: dict[str, Any]) -> Status:
        return cls(health=health["status"], health_detail=health.get("detail") or "", policy=state["policy"],
                   resources=tuple(state.get("resources", ())), utilization=state["utilization"],
                   running_tasks=state["running_tasks"], pending_tasks=state["pending_tasks"],
                   decisions_total=state["decisions_total"], preemptions_total=state.get("preemptions_total"),
                   nodes=tuple(Node(n["name"], n["alive"], n["capacity"], n["used"]) for n in state["nodes"]),
                   queues=_queues(state.get("queues", {})), raw={"health": health, "status": state})


@dataclass(frozen=True)
class SubmitResult:
    """The new jobs' ids, in the order submitted, and the ``Idempotency-Key`` that created
    them (a retry with it gets the same ids)."""

    ids: tuple[int, ...]
    idempotency_key: str


@dataclass(frozen=True)
class LogEntry:
    """One task attempt with output kept (``GET /v1/jobs/{id}/logs``): ``bytes`` kept,
    ``dropped`` lost to rotation, ``ended`` once the attempt has ended."""

    task: int
    attempt: int
    bytes: int
    dropped: int
    ended: bool


@dataclass(frozen=True)
class LogChunk:
    """Output of one task attempt from byte ``offset`` to ``next_offset`` (of the attempt's
    whole output). ``skipped``: bytes lost to rotation between the offset asked for and
    ``offset`` (the follower fell behind, or the first bytes are gone)."""

    job: int
    task: int
    attempt: int
    offset: int
    next_offset: int
    data: str
    ended: bool
    skipped: int = 0


#: ``set_queue``'s default for a guarantee or limit: left as it is
UNCHANGED: Any = type("Unchanged", (), {"__repr__": lambda self: "UNCHANGED"})()


# --- the client ---------------------------------------------------------------------------------
class Client:
    """``fairshare serve``'s API at ``url`` (``http://`` or ``https://``), as the holder of
    ``token``. ``ca_cert``: a PEM file of the certificate authority to trust for an
    ``https`` server (default: the system's). ``retries``: how often ``submit`` tries
    again (see the module's docstring); ``sleep`` and ``on_retry(message, wait_s)`` are
    called between the tries (the default ``on_retry`` logs a warning)."""

    def __init__(self, url: str, token: str, *, ca_cert: str | os.PathLike | None = None, timeout_s: float = 60.0,
                 retries: int = 4, sleep: Callable[[float], None] = time.sleep,
                 on_retry: Callable[[str, float], None] | None = None):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ClientError(f"url: must be an http:// or https:// URL, got {url!r}")
        if not token:
            raise ClientError("token: is required")
        if retries < 0:
            raise ClientError(f"retries: must be >= 0, got {retries}")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.retries = retries
        self._sleep = sleep
        self._on_retry = on_retry or _log_retry
        self._context = _tls_context(ca_cert) if ca_cert is not None else None

    @classmethod
    def from_profile(cls, name: str | None = None, *, config: str | os.PathLike | None = None,
                     **options: Any) -> Client:
        """A client from the environment and the configuration file's profile (see
        :func:`settings`): ``$FAIRSHARE_SERVER`` > the profile's ``url``, and so on."""
        found = settings(profile=name, config=config)
        if not found.url:
            raise ClientError(f"url: none given (set ${SERVER_ENV} or a profile's url in {found.config})")
        return cls(found.url, found.read_token(), ca_cert=found.ca_cert, **options)

    # --- jobs
    def submit(self, jobs: list[dict[str, Any]] | str | os.PathLike) -> SubmitResult:
        """Submit ``jobs`` (the job file format's ``jobs:`` list, or the path of a job file);
        retried with one ``Idempotency-Key`` (see the module's docstring)."""
        if isinstance(jobs, (str, os.PathLike)):
            jobs = _jobfile_as_client_error(jobs)
        key = str(uuid.uuid4())
        delay = RETRY_FIRST_S
        for attempt in range(self.retries + 1):
            try:
                out = self.request("POST", "/v1/jobs", {"jobs": jobs}, headers={"Idempotency-Key": key})
                return SubmitResult(tuple(out["ids"]), key)
            except ClientError as exc:
                if not exc.retryable:
                    raise
                if attempt == self.retries:
                    if not self.retries:
                        raise
                    raise type(exc)(f"{exc} (after {self.retries} retries)", exc.status, exc.errors,
                                    exc.retry_after_s) from None
                wait = min(RETRY_MAX_S, exc.retry_after_s if exc.retry_after_s is not None else delay)
                self._on_retry(str(exc), wait)
                self._sleep(wait)
                delay *= 2
        raise AssertionError("unreachable")

    def jobs(self) -> list[Job]:
        """Your jobs (the admin: every job), oldest first."""
        return [Job.from_json(j) for j in self.request("GET", "/v1/jobs")]

    def job(self, job_id: int, *, max_tasks: int = 10_000) -> Job:
        """The job with its first ``max_tasks`` tasks, read page by page (``tasks_next``
        not None: more were left)."""
        if max_tasks < 1:
            raise ClientError(f"max_tasks: must be >= 1, got {max_tasks}")
        doc = self.request("GET", f"/v1/jobs/{int(job_id)}?tasks_limit={min(max_tasks, MAX_TASKS_PAGE)}")
        tasks = doc["tasks"]
        while doc.get("tasks_next") is not None and len(tasks) < max_tasks:
            page = min(max_tasks - len(tasks), MAX_TASKS_PAGE)
            doc = self.request("GET", f"/v1/jobs/{int(job_id)}?tasks_after={doc['tasks_next']}&tasks_limit={page}")
            tasks += doc["tasks"]
        return Job.from_json({**doc, "tasks": tasks, "tasks_next": doc.get("tasks_next")})

    def explain(self, job_id: int) -> dict[str, Any]:
        """Why the job waits (``GET /v1/jobs/{id}/explain``): the ``fairshare explain
        --format json`` document, ``estimated_start`` on the wall clock."""
        return self.request("GET", f"/v1/jobs/{int(job_id)}/explain")

    def cancel(self, job_ids: int | Iterable[int]) -> list[Job]:
        """Cancel each job (pending tasks dropped, running ones stopped); their states after.
        Stops at the first refusal (a job that is not yours answers 404)."""
        ids = [job_ids] if isinstance(job_ids, int) else list(job_ids)
        return [Job.from_json(self.request("POST", f"/v1/jobs/{int(i)}/cancel")) for i in ids]

    def wait(self, job_ids: int | Iterable[int], *, timeout_s: float | None = None,
             poll_s: float = 1.0) -> list[Job]:
        """Poll the jobs every ``poll_s`` until every one has ended (succeeded, failed or
        cancelled); their last states, in the order given. ``TimeoutError`` after
        ``timeout_s`` (None: no limit)."""
        ids = [job_ids] if isinstance(job_ids, int) else list(job_ids)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        done: dict[int, Job] = {}
        while True:
            for job_id in ids:
                if job_id not in done:
                    # (one task per page: the states, not the task list)
                    job = Job.from_json(self.request("GET", f"/v1/jobs/{int(job_id)}?tasks_limit=1"))
                    if job.terminal:
                        done[job_id] = job
            if len(done) == len(ids):
                return [done[i] for i in ids]
            if deadline is not None and time.monotonic() + poll_s > deadline:
                left = ", ".join(str(i) for i in ids if i not in done)
                raise TimeoutError(f"jobs {left} still running after {timeout_s:g} s")
            self._sleep(poll_s)

    # --- queues and status
    def queues(self) -> dict[str, Queue]:
        """Every queue by dotted path, in the tree's order."""
        return _queues(self.request("GET", "/v1/queues"))

    def set_queue(self, path: str, *, weight: float | None = None, guarantee: Any = UNCHANGED,
                  limit: Any = UNCHANGED) -> dict[str, Queue]:
        """Change a queue (admin only; kept across restarts): its ``weight``, and its whole
        ``guarantee`` or ``limit`` (resource -> amount; None removes it; left out: kept).
        Returns every queue after the change."""
        change: dict[str, Any] = {}
        if weight is not None:
            change["weights"] = {path: weight}
        bounds = {name: value for name, value in (("guarantee", guarantee), ("limit", limit))
                  if value is not UNCHANGED}
        if bounds:
            change["bounds"] = {path: bounds}
        if not change:
            raise ClientError("set_queue: nothing to change (give weight, guarantee or limit)")
        return _queues(self.request("PUT", "/v1/queues", change))

    def set_half_life(self, half_life: float) -> dict[str, Queue]:
        """Change the half-life of decayed usage (admin only; kept across restarts; seconds,
        ``math.inf`` for cumulative usage, 0 for none). Each queue's decayed average
        allocation carries over (docs/live.md). Returns every queue after the change."""
        value: float | str = "inf" if half_life == math.inf else half_life
        return _queues(self.request("PUT", "/v1/queues", {"fairness": {"half_life": value}}))

    def status(self) -> Status:
        """The service's health and state (an ``unavailable`` health is an answer)."""
        health = self.request("GET", "/healthz", answered=(503,))
        return Status.from_json(health, self.request("GET", "/v1/status"))

    # --- task output (the logs contract: docs/live.md, "Task output")
    def log_entries(self, job_id: int) -> list[LogEntry]:
        """Every task attempt of the job with output kept, by task then attempt."""
        doc = self.request("GET", f"/v1/jobs/{int(job_id)}/logs")
        return [LogEntry(e["task"], e["attempt"], e["bytes"], e["dropped"], e["ended"]) for e in doc["logs"]]

    def log_chunk(self, job_id: int, task_id: int, *, attempt: int | None = None, offset: int = 0,
                  limit: int = LOG_PAGE_BYTES) -> LogChunk:
        """One page of a task attempt's output from byte ``offset`` (``attempt`` None: the
        latest)."""
        query = {"offset": offset, "limit": limit, **({"attempt": attempt} if attempt is not None else {})}
        doc = self.request("GET", f"/v1/jobs/{int(job_id)}/tasks/{int(task_id)}/logs?"
                                  + urllib.parse.urlencode(query))
        return LogChunk(job=doc["job"], task=doc["task"], attempt=doc["attempt"], offset=doc["offset"],
                        next_offset=doc["next_offset"], data=doc["data"], ended=doc["ended"],
                        skipped=max(0, doc["offset"] - offset))

    def logs(self, job_id: int, task: int | None = None, attempt: int | None = None, *, follow: bool = False,
             poll_s: float = 1.0) -> Iterator[LogChunk]:
        """The output of one task attempt (``task`` given; ``attempt`` None: its latest) or
        of each task's latest attempt (``task`` None), as chunks in order: all of one
        attempt, then the next, each attempt's first chunk yielded even when empty.
        ``follow``: keep polling every ``poll_s`` for more, until every followed attempt
        has ended and been read to its end (with ``task`` None, also until the job has
        ended: tasks that start later are followed too)."""
        if task is None and attempt is not None:
            raise ClientError("attempt: needs a task")
        offsets: dict[tuple[int, int | None], int] = {}  # (task, attempt) -> the next byte to read
        ended: set[tuple[int, int | None]] = set()  # attempts ended and read to their end
        while True:
            # (a job is seen ended before its attempts are listed: none can appear after that)
            job_over = follow and task is None and self._job_ended(job_id)
            targets = [(task, attempt)] if task is not None else self._latest_attempts(job_id)
            for task_id, number in targets:
                if (task_id, number) in ended:
                    continue
                first = (task_id, number) not in offsets
                offset = offsets.get((task_id, number), 0)
                while True:
                    chunk = self.log_chunk(job_id, task_id, attempt=number, offset=offset)
                    number = chunk.attempt  # (the latest, when none was asked for: kept from now on)
                    offset = offsets[task_id, number] = chunk.next_offset
                    if chunk.next_offset > chunk.offset or first:
                        yield chunk
                    first = False
                    if chunk.next_offset - chunk.offset < LOG_PAGE_BYTES:  # at the end of what is kept now
                        if chunk.ended:
                            ended.add((task_id, number))
                        break
                if task is not None:
                    attempt = number
            if not follow:
                return
            if all((t, n if task is None else attempt) in ended for t, n in targets) and (task is not None or job_over):
                return
            self._sleep(poll_s)

    def _latest_attempts(self, job_id: int) -> list[tuple[int, int]]:
        """Each task with output kept and its latest attempt, by task."""
        latest: dict[int, int] = {}
        for entry in self.log_entries(job_id):
            latest[entry.task] = max(entry.attempt, latest.get(entry.task, 0))
        return sorted(latest.items())

    def _job_ended(self, job_id: int) -> bool:
        return Job.from_json(self.request("GET", f"/v1/jobs/{int(job_id)}?tasks_limit=1")).terminal

    # --- the transport
    def request(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
                answered: tuple[int, ...] = ()) -> Any:
        """One API call's JSON answer, tried once; an error status in ``answered`` is
        returned as an answer (``/healthz`` answers 503 with its document), any other
        raises :class:`ClientError` (:class:`Unreachable` without an answer)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json", "Accept": "application/json",
                                              **(headers or {})})
        tls = {"context": self._context} if self._context is not None else {}
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s, **tls) as resp:  # noqa: S310 - the user's URL
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            if exc.code in answered:
                try:
                    return json.loads(raw)
                except ValueError:
                    pass  # not a fairshare server's answer: reported below
            raise _refusal(exc.code, exc.reason, raw, exc.headers) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if type(reason).__name__ == "SSLCertVerificationError":  # (ssl is imported by urllib already)
                raise Untrusted(f"cannot trust {self.url}: {reason.verify_message} (give its certificate or CA "
                                f"with --ca-cert FILE)") from None
            raise Unreachable(f"cannot reach {self.url}: {reason}") from None


def _refusal(code: int, reason: Any, raw: bytes, headers: Any) -> ClientError:
    """A non-2xx answer as a ClientError: the server's field problems (``{"errors": [...]}``),
    else the HTTP reason (not a fairshare server's answer)."""
    try:
        payload = json.loads(raw)
        items = payload.get("errors") or [payload["error"]]
        errors = tuple(FieldProblem(i.get("field") or "", str(i["reason"])) for i in items)
    except (ValueError, AttributeError, KeyError, TypeError):
        errors = (FieldProblem("", str(reason)),)
    retry_after = headers.get("Retry-After", "") if headers else ""
    message = f"the server refused ({code}):\n  " + "\n  ".join(map(str, errors))
    return ClientError(message, code, errors, float(retry_after) if retry_after.isdigit() else None)


def _log_retry(message: str, wait_s: float) -> None:
    import logging

    logging.getLogger(__name__).warning("%s; retrying in %g s", message, wait_s)


def _tls_context(ca_cert: str | os.PathLike):
    import ssl

    try:
        return ssl.create_default_context(cafile=os.fspath(ca_cert))
    except (OSError, ssl.SSLError) as exc:
        raise ClientError(f"ca_cert: cannot use {ca_cert}: {getattr(exc, 'strerror', None) or exc}") from None


# --- job files ----------------------------------------------------------------------------------
def read_jobfile(path: str | os.PathLike) -> list[dict[str, Any]]:
    """A job file's ``jobs:`` list (YAML or JSON, the scenario format's jobs, each task class
    with a ``command``). Raises ``ScenarioError`` for text that does not parse (with its
    line) and :class:`ClientError` for a missing file or a wrong shape. The server checks
    the jobs themselves."""
    from fairshare.model.loader import parse_text

    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"{source}: cannot read: {exc}") from None
    doc = parse_text(text, source, json_first=Path(source).suffix.lower() == ".json")
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ClientError(f"{source}: jobs: a JOBFILE needs a top-level `jobs:` list")
    extra = sorted(k for k in doc if k != "jobs")
    if extra:
        raise ClientError(f"{source}: {extra[0]}: unknown key (allowed: jobs)")
    return doc["jobs"]


def _jobfile_as_client_error(path: str | os.PathLike) -> list[dict[str, Any]]:
    from fairshare.model.errors import ScenarioError

    try:
        return read_jobfile(path)
    except ScenarioError as exc:
        raise ClientError(str(exc), errors=tuple(FieldProblem(e.path, e.reason) for e in exc.errors)) from None


# --- the configuration file ---------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """Where to connect and as whom, from the environment over a profile (:func:`settings`).
    ``config``: the file read (or that would be); ``profile``: the profile used, if any."""

    url: str | None
    token: str | None
    token_file: str | None
    ca_cert: str | None
    config: Path
    profile: str | None

    def read_token(self) -> str:
        """``token``, else ``token_file``'s content (stripped)."""
        if self.token:
            return self.token
        if not self.token_file:
            raise ClientError(f"token: none given (set ${TOKEN_ENV} or a profile's token_file in {self.config})")
        return read_token_file(self.token_file, "token_file")


def read_token_file(path: str, what: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"{what}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not token:
        raise ClientError(f"{what}: {path} is empty")
    if os.stat(path).st_mode & 0o007:
        import sys

        print(f"fairshare: warning: {what}: {path} may be read by other users (chmod 600 {path})", file=sys.stderr)
    return token


def config_path(environ: dict[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/fairshare/client.toml`` (default ``~/.config/...``)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / CONFIG_RELATIVE


def load_profile(name: str | None = None, *, config: str | os.PathLike | None = None) -> tuple[str | None, dict]:
    """The profile ``name`` of the configuration file (None: its ``default_profile``, if
    any) as ``(name, {key: value})``, paths resolved against the file's directory; ``(None,
    {})`` when no profile applies. Every problem raises :class:`ClientError` naming the file
    and the key."""
    path = Path(config) if config is not None else config_path()
    if not path.exists():
        if name is not None:
            raise ClientError(f"profile {name!r}: {path} does not exist")
        return None, {}
    import tomllib

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ClientError(f"{path}: invalid TOML: {exc}") from None
    extra = sorted(set(doc) - {"default_profile", "profiles"})
    if extra:
        raise ClientError(f"{path}: {extra[0]}: unknown key (allowed: default_profile, profiles)")
    profiles = doc.get("profiles", {})
    if not isinstance(profiles, dict) or not all(isinstance(p, dict) for p in profiles.values()):
        raise ClientError(f"{path}: profiles: must be tables, e.g. [profiles.prod]")
    default = doc.get("default_profile")
    if default is not None and not isinstance(default, str):
        raise ClientError(f"{path}: default_profile: must be a profile name, got {default!r}")
    chosen = name if name is not None else default
    if chosen is None:
        return None, {}
    if chosen not in profiles:
        key = "default_profile" if name is None else "profile"
        raise ClientError(f"{path}: {key}: no profile {chosen!r} (profiles: {', '.join(profiles) or 'none'})")
    profile = profiles[chosen]
    if "token" in profile and "token_file" in profile:
        raise ClientError(f"{path}: profiles.{chosen}.token_file: give token or token_file, not both")
    for key, value in profile.items():
        if key not in PROFILE_KEYS:
            raise ClientError(f"{path}: profiles.{chosen}.{key}: unknown key (allowed: {', '.join(PROFILE_KEYS)})")
        if not isinstance(value, str) or not value:
            raise ClientError(f"{path}: profiles.{chosen}.{key}: must be a non-empty string, got {value!r}")
    resolved = dict(profile)
    for key in ("token_file", "ca_cert"):
        if key in resolved:  # (relative to the file, as the user reads it)
            resolved[key] = str(path.parent / Path(resolved[key]).expanduser())
    return chosen, resolved


def settings(*, profile: str | None = None, config: str | os.PathLike | None = None,
             environ: dict[str, str] | None = None) -> Settings:
    """The environment over the profile: ``$FAIRSHARE_SERVER`` > ``url``, ``$FAIRSHARE_TOKEN``
    > ``token`` / ``token_file``, ``$FAIRSHARE_CA_CERT`` > ``ca_cert``; the profile is
    ``profile``, else ``$FAIRSHARE_PROFILE``, else the file's ``default_profile``."""
    env = os.environ if environ is None else environ
    path = Path(config) if config is not None else config_path(env)
    name, found = load_profile(profile if profile is not None else env.get(PROFILE_ENV) or None, config=path)
    token = env.get(TOKEN_ENV) or found.get("token")
    return Settings(url=env.get(SERVER_ENV) or found.get("url"), token=token,
                    token_file=None if env.get(TOKEN_ENV) else found.get("token_file"),
                    ca_cert=env.get(CA_CERT_ENV) or found.get("ca_cert"), config=path, profile=name)
