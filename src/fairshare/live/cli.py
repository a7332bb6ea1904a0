"""``fairshare serve`` and its clients ``submit``, ``jobs``, ``cancel``, ``queues``
(contract: "Live scheduling").

The clients use only the standard library (urllib): they need no Ray, FastAPI or
uvicorn, and import nothing of fairshare at start (``submit`` reads its JOBFILE with the
scenario loader's parser), so they start at once. A refused request exits 2 with the server's field and reason; a server that
cannot be reached exits 1. ``submit`` sends an ``Idempotency-Key`` (a new UUID per
invocation) and retries, with the same key, on a lost connection, a 5xx or a 429 (up to
``--retries`` times, waiting 0.5, 1, 2, 4 ... s or the server's ``Retry-After``): a
retry of a submission the server committed but whose answer was lost gets the same job
ids back instead of creating the jobs twice. ``--server`` and ``--token`` default to the environment
variables ``FAIRSHARE_SERVER`` and ``FAIRSHARE_TOKEN`` (an extension of the contract:
a token on the command line is visible to other users in ``ps``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
SERVER_ENV, TOKEN_ENV = "FAIRSHARE_SERVER", "FAIRSHARE_TOKEN"
#: first wait before a retry of ``submit`` (doubled each time), and the longest wait
RETRY_FIRST_S, RETRY_MAX_S = 0.5, 30.0
_sleep = time.sleep  # the tests replace it


class ClientError(Exception):
    def __init__(self, message: str, status: int = EXIT_USAGE):
        super().__init__(message)
        self.status = status


def add_parsers(sub: argparse._SubParsersAction, positive_int) -> None:
    serve = sub.add_parser("serve", help="run the live scheduler (HTTP API, Ray executor)",
                           description="The scheduler as a long-running service: an HTTP API (OpenAPI at "
                                       "/openapi.json) in front of the same policy code the simulator uses, "
                                       "running tasks on Ray. Without --ray-address it starts a local Ray "
                                       "cluster whose nodes mirror the configured nodes. See docs/live.md.")
    serve.add_argument("--config", required=True, metavar="CLUSTER.yaml",
                       help="resources, cluster (nodes), queues and auth (tenants, token hashes, grants)")
    serve.add_argument("--ray-address", default=None, metavar="ADDR",
                       help="attach to this Ray cluster (e.g. 10.0.0.1:6379) and discover its nodes")
    serve.add_argument("--db", default="fairshare.db", metavar="FILE",
                       help="SQLite database of jobs and tasks (default: fairshare.db; created if missing)")
    serve.add_argument("--port", type=int, default=8000, metavar="N", help="HTTP port (default 8000)")
    serve.add_argument("--host", default="127.0.0.1", metavar="HOST",
                       help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--policy", default="hdrf", metavar="P",
                       help="online policy (default hdrf; see `fairshare policies`)")
    serve.add_argument("--placement", default="first-fit", choices=("first-fit", "best-fit", "packing"),
                       help="which node a task goes to (default first-fit)")
    serve.add_argument("--max-attempts", type=positive_int, default=3, metavar="N",
                       help="runs of a task whose command fails before it is marked failed (default 3)")
    serve.add_argument("--node-timeout", type=float, default=None, metavar="SECONDS",
                       help="a Ray node that does not answer a probe (a tiny task pinned to it) for this long is "
                            "taken out of scheduling and its tasks re-queued, as if it had died; it comes back "
                            "when it answers again (default 10; see docs/live.md, Node health)")

    def client(p: argparse.ArgumentParser) -> None:
        p.add_argument("--server", default=os.environ.get(SERVER_ENV), metavar="URL",
                       help=f"the serve URL, e.g. http://127.0.0.1:8000 (default ${SERVER_ENV})")
        p.add_argument("--token", default=os.environ.get(TOKEN_ENV), metavar="T",
                       help=f"your API token (default ${TOKEN_ENV})")

    submit = sub.add_parser("submit", help="submit the jobs of a JOBFILE to serve",
                            description="JOBFILE (YAML or JSON) has a top-level `jobs:` list in the scenario "
                                        "format, each task class with a `command`. Prints one job id per line.")
    submit.add_argument("jobfile", metavar="JOBFILE")
    submit.add_argument("--retries", type=int, default=4, metavar="N",
                        help="retries (same Idempotency-Key) after a lost connection, a 5xx or a 429 (default 4)")
    client(submit)
    jobs = sub.add_parser("jobs", help="list your jobs on serve")
    jobs.add_argument("--format", choices=("table", "json"), default="table")
    client(jobs)
    cancel = sub.add_parser("cancel", help="cancel jobs on serve")
    cancel.add_argument("job_ids", nargs="+", metavar="JOB", type=positive_int)
    client(cancel)
    queues = sub.add_parser("queues", help="current and fair dominant share of every queue")
    queues.add_argument("--format", choices=("table", "json"), default="table")
    client(queues)


# --- serve ---------------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    from fairshare.live.config import load_config
    from fairshare.live.store import Store, StoreError
    from fairshare.model.errors import ScenarioError
    from fairshare.policies import REGISTRY, make_policy
    from fairshare.policies.base import PolicyModeError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not (0 <= args.port <= 65535):
        raise ClientError(f"--port: must be 0..65535, got {args.port}")
    from fairshare.live.ray_health import DEFAULT_NODE_TIMEOUT_S

    node_timeout = DEFAULT_NODE_TIMEOUT_S if args.node_timeout is None else args.node_timeout
    if not (0 < node_timeout < float("inf")):
        raise ClientError(f"--node-timeout: must be a positive number of seconds, got {args.node_timeout}")
    if args.policy not in REGISTRY:
        raise ClientError(f"--policy: unknown policy {args.policy!r}; known: {', '.join(REGISTRY)}")
    try:
        config = load_config(args.config)
    except ScenarioError as exc:
        raise _problems(exc, "nothing was started") from None
    try:
        import fastapi  # noqa: F401
        import ray  # noqa: F401
        import uvicorn
    except ImportError as exc:
        raise ClientError(f"serve needs the live extra: pip install 'fairshare[live]' ({exc})") from None
    try:
        make_policy(args.policy).online(config.resources, config.tree(), (1.0,) * len(config.resources),
                                        nodes=config.nodes)
        if config.preemption is not None:  # (preemption needs the policy's fair shares)
            from fairshare.engine.preemption import Preemptor

            Preemptor(config.preemption, make_policy(args.policy), config.resources)
    except PolicyModeError as exc:
        raise ClientError(f"--policy: {exc}") from None
    db_lock = _lock_database(args.db)  # noqa: F841 - held (open) for the life of the process
    try:
        store = Store(args.db)
    except StoreError as exc:
        raise ClientError(f"--db: {exc}") from None
    from fairshare.live.api import create_app
    from fairshare.live.commands import CommandBook
    from fairshare.live.ray_executor import RayExecutor
    from fairshare.live.service import LiveService

    # bind before starting Ray: a port in use is a user error, reported at once
    try:
        sock = listen_socket(args.host, args.port)
    except OSError as exc:
        store.close()
        raise ClientError(f"--port: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    port = sock.getsockname()[1]
    commands = CommandBook()  # what each task runs: filled by the service, read by the executor
    # a local cluster is recorded next to the database, to re-attach to it after a restart
    executor = RayExecutor(config.resources, config.nodes, commands=commands, address=args.ray_address,
                           state_file=None if args.ray_address else f"{args.db}.ray.json",
                           node_timeout_s=node_timeout)
    service = None
    try:
        service = LiveService(config, store, executor, policy=args.policy, placement=args.placement,
                              max_attempts=args.max_attempts, commands=commands)
        app = create_app(service)
        service.start()
        tune_gc()
        tune_switching()
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        names = ", ".join(n.name for n in executor.nodes())
        print(f"fairshare serve: policy {args.policy}, nodes {names}, db {args.db}", file=sys.stderr)
        print(f"fairshare serve: listening on http://{args.host}:{port}", file=sys.stderr, flush=True)
        server.run(sockets=[sock])  # uvicorn handles SIGINT and SIGTERM: a clean stop
    finally:
        if service is not None:
            service.stop()
        executor.shutdown()
        store.close()
    return EXIT_OK


#: the garbage collector's thresholds while serving (Python's default: 700, 10, 10)
SERVE_GC_THRESHOLDS = (10_000, 20, 20)


def tune_gc() -> None:
    """Make the cyclic garbage collector pause serve less often, for less.

    Every request leaves some cyclic garbage (asyncio and FastAPI objects), and with the
    default thresholds a full collection ran every few hundred submissions and walked
    everything alive, the modules loaded at start (Ray, FastAPI, pydantic) included:
    140-190 ms with every thread stopped, the tail latency of a submission burst. So the
    objects alive once serve is up are frozen (never collected: they are not garbage)
    and the young generation is collected after 10,000 net allocations instead of 700.
    Measured on the submission benchmark without Ray (``bench_live.py --only submit
    --no-ray``, 32 clients): 428/s with a p99 of 422 ms before, 1,500/s with 54 ms after,
    at the same machine load."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVE_GC_THRESHOLDS)


#: how long a thread may hold the interpreter lock while another waits for it, while
#: serving (Python's default: 5 ms)
SERVE_SWITCH_INTERVAL_S = 0.001


def tune_switching() -> None:
    """Let a thread that waits for the interpreter lock have it sooner.

    serve's threads hand work to each other (the event loop to the store's writer, the
    writer back to the event loop and on to the scheduling loop), and the writer takes
    the lock again after each SQLite statement: with the default 5 ms switch interval, a
    thread back from a statement could wait up to 5 ms behind another busy thread each
    time, and a batch of 32 submissions (about 200 statements) took 20-180 ms where its
    statements take a few. Measured with 32 clients submitting on the local Ray cluster
    (two pairs of runs, alternating, load average 19-24 from other jobs on the two
    cores): 587/s and 889/s with a p99 of 212 and 138 ms at 1 ms, against 366/s and
    574/s with 274 and 237 ms at 5 ms."""
    sys.setswitchinterval(SERVE_SWITCH_INTERVAL_S)


def listen_socket(host: str, port: int):
    """The server's listening TCP socket, made with ``proto=IPPROTO_TCP``: asyncio sets
    TCP_NODELAY on accepted connections only when the socket says it is TCP, and
    ``socket.create_server`` leaves ``proto`` 0. Without TCP_NODELAY, a keep-alive client
    waits for the delayed ACK (about 40 ms) on every request whose answer is written in
    two pieces (headers, then body)."""
    import socket

    family, kind, _proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                              flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def _lock_database(db: str):
    """One serve per database: an exclusive lock on ``DB.lock`` (released by the kernel
    when the process ends, even on kill -9), so a second serve cannot re-queue the first
    one's running tasks."""
    import fcntl

    try:
        handle = open(f"{db}.lock", "a+")  # noqa: SIM115 - kept open on purpose
    except OSError as exc:
        raise ClientError(f"--db: cannot create {db}.lock: {exc.strerror or exc}") from None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise ClientError(f"--db: {db} is in use by another fairshare serve") from None
    return handle


# --- clients --------------------------------------------------------------------------------------
class _Retryable(ClientError):
    """A failure a retry may cure: no answer, a 5xx, a 429 (``wait``: its Retry-After)."""

    def __init__(self, message: str, status: int, wait: float | None = None):
        super().__init__(message, status)
        self.wait = wait


def _request(args: argparse.Namespace, method: str, path: str, body: Any = None, *,
             headers: dict[str, str] | None = None, retries: int = 0) -> Any:
    """One API call; with ``retries``, the same request again after a lost connection, a
    5xx or a 429, waiting ``RETRY_FIRST_S`` doubled each time (or the ``Retry-After``)."""
    delay = RETRY_FIRST_S
    for attempt in range(retries + 1):
        try:
            return _request_once(args, method, path, body, headers or {})
        except _Retryable as exc:
            if attempt == retries:
                raise ClientError(str(exc) + (f" (after {retries} retries)" if retries else ""), exc.status) from None
            wait = min(RETRY_MAX_S, exc.wait if exc.wait is not None else delay)
            print(f"fairshare: {exc}; retrying in {wait:g} s", file=sys.stderr)
            _sleep(wait)
            delay *= 2
    raise AssertionError("unreachable")


def _request_once(args: argparse.Namespace, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    if not args.server:
        raise ClientError(f"--server: is required (or set ${SERVER_ENV})")
    if not args.token:
        raise ClientError(f"--token: is required (or set ${TOKEN_ENV})")
    url = args.server.rstrip("/") + path
    if not url.startswith(("http://", "https://")):
        raise ClientError(f"--server: must be an http:// or https:// URL, got {args.server!r}")
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"Bearer {args.token}", "Content-Type": "application/json",
                                          "Accept": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - the user's own server URL
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            payload = json.loads(exc.read())
            items = payload.get("errors") or [payload["error"]]
            lines = [f"{i['field']}: {i['reason']}" if i.get("field") else str(i["reason"]) for i in items]
        except (ValueError, AttributeError, KeyError, TypeError):  # not a fairshare server's answer
            lines = [str(exc.reason)]
        message = f"the server refused ({exc.code}):\n  " + "\n  ".join(lines)
        if exc.code >= 500 or exc.code == 429:
            retry_after = exc.headers.get("Retry-After", "") if exc.headers else ""
            raise _Retryable(message, EXIT_INTERNAL if exc.code >= 500 else EXIT_USAGE,
                             float(retry_after) if retry_after.isdigit() else None) from None
        raise ClientError(message, EXIT_USAGE if 400 <= exc.code < 500 else EXIT_INTERNAL) from None
    except (urllib.error.URLError, OSError) as exc:
        raise _Retryable(f"cannot reach {args.server}: {getattr(exc, 'reason', exc)}", EXIT_INTERNAL) from None


def cmd_submit(args: argparse.Namespace) -> int:
    from fairshare.model.errors import ScenarioError
    from fairshare.model.loader import parse_text

    path = Path(args.jobfile)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"{args.jobfile}: cannot read: {exc}") from None
    try:
        doc = parse_text(text, args.jobfile, json_first=path.suffix.lower() == ".json")
    except ScenarioError as exc:
        raise _problems(exc, "nothing was sent") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ClientError(f"{args.jobfile}: jobs: a JOBFILE needs a top-level `jobs:` list")
    extra = sorted(k for k in doc if k != "jobs")
    if extra:
        raise ClientError(f"{args.jobfile}: {extra[0]}: unknown key (allowed: jobs)")
    if args.retries < 0:
        raise ClientError(f"--retries: must be >= 0, got {args.retries}")
    # one key for every attempt of this invocation: the server creates the jobs once
    out = _request(args, "POST", "/v1/jobs", {"jobs": doc["jobs"]},
                   headers={"Idempotency-Key": str(uuid.uuid4())}, retries=args.retries)
    for job_id in out["ids"]:
        print(job_id)
    return EXIT_OK


def cmd_jobs(args: argparse.Namespace) -> int:
    jobs = _request(args, "GET", "/v1/jobs")
    if args.format == "json":
        print(json.dumps(jobs, indent=2))
        return EXIT_OK
    rows = [("ID", "NAME", "QUEUE", "TENANT", "STATE", "DONE/TOTAL")]
    rows += [(str(j["id"]), j["name"], j["queue"] or "(root)", j["tenant"], j["state"],
              f"{j['tasks_done']}/{j['tasks_total']}") for j in jobs]
    _table(rows)
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for job_id in args.job_ids:
        try:
            job = _request(args, "POST", f"/v1/jobs/{job_id}/cancel")
            print(f"{job['id']} {job['state']}")
        except ClientError as exc:
            print(f"fairshare: error: job {job_id}: {exc}", file=sys.stderr)
            status = max(status, exc.status)
    return status


def cmd_queues(args: argparse.Namespace) -> int:
    queues = _request(args, "GET", "/v1/queues")
    if args.format == "json":
        print(json.dumps(queues, indent=2))
        return EXIT_OK
    rows = [("QUEUE", "WEIGHT", "CURRENT", "FAIR", "RUNNING", "PENDING", "GUARANTEE", "LIMIT", "BELOW_FAIR_S")]
    rows += [(path, f"{q['weight']:g}", f"{q['current_dominant_share']:.3f}", f"{q['fair_dominant_share']:.3f}",
              str(q["running_tasks"]), str(q["pending_tasks"]), _amounts(q.get("guarantee")),
              _amounts(q.get("limit")), _seconds(q.get("time_below_fair_share")))
             for path, q in queues.items()]
    _table(rows)
    return EXIT_OK


def _problems(exc: ScenarioError, consequence: str) -> ClientError:
    """A file's problems as ``allocate`` reports a scenario's: one ``FILE: FIELD.PATH:
    REASON`` line each on stderr (no prefix: easy to grep and to jump to), then the error
    ``N problems in FILE; CONSEQUENCE``, exit status 2."""
    print(exc.format(), file=sys.stderr)
    return ClientError(f"{exc.summary()}; {consequence}")


def _amounts(amounts: dict | None) -> str:
    """``cpu=4,gpu=1``; ``-`` for none (a server of an older version sends no field)."""
    return ",".join(f"{r}={v:g}" for r, v in amounts.items()) if amounts else "-"


def _seconds(value: float | None) -> str:
    """Seconds below the fair share; ``-`` when preemption is off (null)."""
    return "-" if value is None else f"{value:.1f}"


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


COMMANDS = {"serve": cmd_serve, "submit": cmd_submit, "jobs": cmd_jobs, "cancel": cmd_cancel, "queues": cmd_queues}
