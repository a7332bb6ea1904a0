"""``fairshare serve`` and its clients ``submit``, ``jobs``, ``job``, ``cancel``, ``queues``
(and ``queues set``), ``status``, ``logs`` (contract: "Live scheduling").

The clients use only the standard library (urllib): they need no Ray, FastAPI or
uvicorn, and import nothing of fairshare at start (``submit`` reads its JOBFILE with the
scenario loader's parser), so they start at once. A refused request exits 2 with the server's field and reason; a server that
cannot be reached exits 1. ``submit`` sends an ``Idempotency-Key`` (a new UUID per
invocation) and retries, with the same key, on a lost connection, a 5xx or a 429 (up to
``--retries`` times, waiting 0.5, 1, 2, 4 ... s or the server's ``Retry-After``): a
retry of a submission the server committed but whose answer was lost gets the same job
ids back instead of creating the jobs twice. ``--server`` and ``--token`` default to the environment
variables ``FAIRSHARE_SERVER`` and ``FAIRSHARE_TOKEN`` (an extension of the contract:
a token on the command line is visible to other users in ``ps``); ``--token-file`` reads
the token from a file instead (its content, stripped), which ``ps`` does not show.
An ``https://`` server is trusted through the system's certificate authorities, or
``--ca-cert FILE``'s (a self-signed serve ``--tls-cert``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import ssl  # (urllib imports it anyway)
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
#: how many of a job's tasks ``fairshare job`` reads by default (ten of the server's
#: default pages), and the most one page may hold (the server's ``MAX_PAGE``)
MAX_TASKS_SHOWN, MAX_TASKS_PAGE = 10_000, 10_000
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
    serve.add_argument("--output-dir", default=None, metavar="DIR",
                       help="where each task attempt's output is kept, on the node that runs it (default: DB.output "
                            "next to the database; with --ray-address the same path on every node)")
    serve.add_argument("--output-max-bytes", type=positive_int, default=None, metavar="N",
                       help="output kept per attempt: beyond it the oldest half is dropped, the tail kept "
                            "(default 8 MiB)")
    serve.add_argument("--stop-commands-on-exit", action="store_true",
                       help="on a clean stop (SIGTERM, Ctrl-C) kill the running commands (the next serve runs them "
                            "again); without it they run on and the next serve adopts them, as after a crash")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                       help="the least severe log lines shown (default info; debug adds the HTTP access lines)")
    serve.add_argument("--log-format", default="text", choices=("text", "json"),
                       help="text lines, or one JSON object per line (time, level, logger, message and any extra "
                            "fields); for every log line of serve, the HTTP server's included")
    serve.add_argument("--workdir", default=None, metavar="DIR",
                       help="root of the per-job working directories of the tenants with run_as (required with "
                            "them; created mode 0711 on each node, each job's directory owned by its user, 0700)")
    serve.add_argument("--tls-cert", default=None, metavar="FILE",
                       help="serve HTTPS with this PEM certificate (chain); needs --tls-key")
    serve.add_argument("--tls-key", default=None, metavar="FILE", help="the PEM private key of --tls-cert")

    def client(p: argparse.ArgumentParser, *, inherited: bool = False) -> None:
        """The server and token options; ``inherited``: a sub-action's copies, which leave
        the values given before the action (``queues --token T set ...``) alone unless
        given again (argparse copies a sub-parser's defaults over its parent's)."""
        unset = argparse.SUPPRESS if inherited else None
        p.add_argument("--server", default=argparse.SUPPRESS if inherited else os.environ.get(SERVER_ENV),
                       metavar="URL",
                       help=f"the serve URL, e.g. http://127.0.0.1:8000 (default ${SERVER_ENV})")
        token = p.add_mutually_exclusive_group()
        token.add_argument("--token", default=unset, metavar="T", help=f"your API token (default ${TOKEN_ENV})")
        token.add_argument("--token-file", default=unset, metavar="PATH",
                           help="read the token from this file (its content, stripped)")
        p.add_argument("--ca-cert", default=argparse.SUPPRESS if inherited else None, metavar="FILE",
                       help="trust the https server whose certificate this PEM file (or the CA in it) signs")

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
    job = sub.add_parser("job", help="one job on serve: its summary and its tasks",
                         description="The job's summary and a table of its tasks (id, class, state, node, "
                                     "attempts, exit code, message), read page by page.")
    job.add_argument("job_id", metavar="ID", type=positive_int)
    job.add_argument("--max-tasks", type=positive_int, default=MAX_TASKS_SHOWN, metavar="N",
                     help=f"read at most N tasks (default {MAX_TASKS_SHOWN:,}); a cut list says so")
    job.add_argument("--format", choices=("table", "json"), default="table")
    client(job)
    cancel = sub.add_parser("cancel", help="cancel jobs on serve")
    cancel.add_argument("job_ids", nargs="+", metavar="JOB", type=positive_int)
    client(cancel)
    queues = sub.add_parser("queues", help="current and fair dominant share of every queue; `queues set` changes one",
                            description="Every queue's weight, current and fair dominant share, tasks, guarantee "
                                        "and limit. `fairshare queues set QUEUE ...` changes a queue (admin).")
    queues.add_argument("--format", choices=("table", "json"), default="table")
    client(queues)
    queue_actions = queues.add_subparsers(dest="queues_action", metavar="ACTION")
    queue_set = queue_actions.add_parser(
        "set", help="change a queue's weight, guarantee or limit (admin; PUT /v1/queues)",
        description="Change a queue's weight, guarantee or limit (admin only; kept across restarts), then print "
                    "the queues. A --guarantee or --limit replaces the queue's whole guarantee or limit: give "
                    "every resource it should bound.")
    queue_set.add_argument("queue", metavar="QUEUE", help="the queue's dotted path, e.g. ads.prod")
    queue_set.add_argument("--weight", type=float, default=None, metavar="W", help="the queue's new weight")
    for bound in ("guarantee", "limit"):
        group = queue_set.add_mutually_exclusive_group()
        group.add_argument(f"--{bound}", action="append", default=None, metavar="RES=AMOUNT",
                           help=f"the new {bound}, one resource per flag (repeat it: --{bound} cpu=4 "
                                f"--{bound} gpu=1)")
        group.add_argument(f"--no-{bound}", action="store_true", help=f"remove the queue's {bound}")
    queue_set.add_argument("--format", choices=("table", "json"), default=argparse.SUPPRESS,
                           help="how to print the queues after the change (default table)")
    client(queue_set, inherited=True)
    status = sub.add_parser("status", help="the service's state: health, policy, nodes, tasks, decisions",
                            description="The service's health (GET /healthz) and state (GET /v1/status): "
                                        "policy, nodes up and down, running and pending tasks, decisions. "
                                        "Exits 1 when the health is `unavailable`.")
    status.add_argument("--format", choices=("table", "json"), default="table")
    client(status)
    logs = sub.add_parser("logs", help="a job's task output on serve (--follow: as it comes)",
                          description="The output (stdout and stderr) of a job's tasks: with TASK that task's, "
                                      "else every task's latest attempt, each under a '==> task ID (attempt N) <==' "
                                      "header when there are several. --follow polls until each has ended.")
    logs.add_argument("job_id", metavar="JOB", type=positive_int)
    logs.add_argument("task_id", metavar="TASK", type=positive_int, nargs="?")
    logs.add_argument("--attempt", type=positive_int, default=None, metavar="N",
                      help="that attempt of TASK (default its latest)")
    logs.add_argument("--follow", "-f", action="store_true", help="print new output as it comes, until it ends")
    client(logs)


# --- serve ---------------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    from fairshare.live.config import load_config
    from fairshare.live.store import Store, StoreError
    from fairshare.model.errors import ScenarioError
    from fairshare.policies import REGISTRY, make_policy
    from fairshare.policies.base import PolicyModeError

    configure_logging(args.log_level, args.log_format)
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
    tls = tls_options(args.tls_cert, args.tls_key)
    _check_isolation(args, config.auth.run_as)
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
    from fairshare.live.isolation import create_private

    try:  # (the database's -wal and -shm files get its mode from SQLite)
        create_private(args.db)
        create_private(f"{args.db}.lock")
    except OSError as exc:
        raise ClientError(f"--db: cannot create {args.db}: {exc.strerror or exc}") from None
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
    # what each task runs: filled by the service, read by the executor
    commands = CommandBook(run_as=config.auth.run_as,
                           workdir=os.path.abspath(args.workdir) if args.workdir is not None else None)
    progress = logging.getLogger("fairshare.serve")
    t0 = time.monotonic()
    if args.ray_address:
        progress.info("attaching to the Ray cluster at %s...", args.ray_address)
    else:
        progress.info("starting Ray: a local cluster of %d node(s), or re-attaching to this database's "
                      "(30-70 s to start on a busy machine)...", len(config.nodes))
    # a local cluster is recorded next to the database, to re-attach to it after a restart;
    # the tasks' output is kept next to it too (docs/live.md, Task output)
    output_dir = os.path.abspath(args.output_dir or f"{args.db}.output")
    from fairshare.live.task_output import DEFAULT_MAX_BYTES, MIN_MAX_BYTES

    output_max = DEFAULT_MAX_BYTES if args.output_max_bytes is None else args.output_max_bytes
    if output_max < MIN_MAX_BYTES:
        store.close()
        raise ClientError(f"--output-max-bytes: must be >= {MIN_MAX_BYTES}, got {output_max}")
    try:  # readable by serve's user only: it holds every tenant's output
        os.makedirs(output_dir, mode=0o700, exist_ok=True)
        os.chmod(output_dir, 0o700)
    except OSError as exc:
        store.close()
        raise ClientError(f"--output-dir: cannot create {output_dir}: {exc.strerror or exc}") from None
    executor = RayExecutor(config.resources, config.nodes, commands=commands, address=args.ray_address,
                           state_file=None if args.ray_address else f"{args.db}.ray.json",
                           node_timeout_s=node_timeout, output_dir=output_dir, output_max_bytes=output_max)
    progress.info("Ray is up: %d node(s) (%.0f s)", len(executor.nodes()), time.monotonic() - t0)
    service = None
    try:
        service = LiveService(config, store, executor, policy=args.policy, placement=args.placement,
                              max_attempts=args.max_attempts, commands=commands)
        app = create_app(service)
        service.start()
        adopted, requeued = service.recovered
        progress.info("node agents on %d node(s); recovered %d running task(s) from the agents, re-queued %d",
                      len(executor.nodes()), adopted, requeued)
        tune_gc()
        tune_switching()
        server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level=args.log_level,
                                               access_log=args.log_level == "debug", **tls))
        names = ", ".join(n.name for n in executor.nodes())
        progress.info("policy %s, nodes %s, db %s, task output in %s", args.policy, names, args.db, output_dir)
        progress.info("listening on %s://%s:%d", "https" if tls else "http", args.host, port)
        server.run(sockets=[sock])  # uvicorn handles SIGINT and SIGTERM: a clean stop
    finally:
        if service is not None:
            service.stop()
        executor.shutdown(stop_commands=args.stop_commands_on_exit)
        store.close()
    return EXIT_OK


#: the attributes every ``logging.LogRecord`` has: the others are a line's extra fields
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (ISO 8601, UTC), ``level``, ``logger``,
    ``message``, any extra fields of the record (``log.info(..., extra={...})``), and
    ``exception`` (the traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                       + f".{int(record.msecs):03d}Z",
               "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and key not in doc:
                doc[key] = value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


#: the text format of every log line of serve
TEXT_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, format: str) -> None:
    """One handler on stderr for every logger of the process (fairshare's, uvicorn's,
    which propagate to the root once uvicorn is told ``log_config=None``), in one format.
    uvicorn's loggers get their own level set here: by default they keep WARNING."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter() if format == "json" else logging.Formatter(TEXT_LOG_FORMAT))
    handler.set_name("fairshare")
    root = logging.getLogger()
    for old in list(root.handlers):  # (ours from an earlier call; others, e.g. a test's capture, stay)
        if old.get_name() == "fairshare":
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).setLevel(level.upper())


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


def tls_options(cert: str | None, key: str | None) -> dict[str, str]:
    """uvicorn's options for HTTPS with ``--tls-cert``/``--tls-key`` (none: plain HTTP),
    checked here, before anything starts: both or neither, readable, a certificate and
    its (unencrypted) private key."""
    if cert is None and key is None:
        return {}
    if key is None:
        raise ClientError("--tls-key: is required with --tls-cert")
    if cert is None:
        raise ClientError("--tls-cert: is required with --tls-key")
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise ClientError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_verify_locations(cafile=cert)
    except ssl.SSLError as exc:
        raise ClientError(f"--tls-cert: {cert} holds no PEM certificate ({exc.reason or exc})") from None
    try:  # (a password callback, so that an encrypted key is refused instead of prompted for)
        context.load_cert_chain(cert, key, password=lambda: b"")
    except ssl.SSLError as exc:
        raise ClientError(f"--tls-key: {key} is not the unencrypted PEM private key of --tls-cert's certificate "
                          f"({exc.reason or exc})") from None
    return {"ssl_certfile": cert, "ssl_keyfile": key}


def _check_isolation(args: argparse.Namespace, run_as: dict[str, str]) -> None:
    """With ``run_as`` tenants: serve runs as root (to start commands as their users),
    has a ``--workdir``, and refuses files with secrets that other users may read.
    Without: such files are only warned about (every command runs as serve's user, which
    reads them anyway)."""
    from fairshare.live.isolation import open_to_others, prepare_workdir

    if run_as:
        tenant, user = next(iter(run_as.items()))
        if os.geteuid() != 0:
            raise ClientError(f"--config: tenant {tenant!r} has run_as {user!r}: serve must run as root to run "
                              f"commands as other users (it runs as uid {os.geteuid()})")
        if args.workdir is None:
            raise ClientError("--workdir: is required when a tenant has run_as (the root of the per-job working "
                              "directories)")
        try:
            prepare_workdir(os.path.abspath(args.workdir))
        except ValueError as exc:
            raise ClientError(f"--workdir: {exc}") from None
    db = args.db
    for path, mode in open_to_others([args.config, db, f"{db}-wal", f"{db}-shm", args.tls_key]):
        if run_as:
            flag = {args.config: "--config", args.tls_key: "--tls-key"}.get(path, "--db")
            raise ClientError(f"{flag}: {path} is open to other users (mode {mode:04o}), and tenants with run_as "
                              f"must not read it: chmod 600 {path}")
        logging.getLogger("fairshare.serve").warning("%s is open to other users (mode %04o): chmod 600 %s (with "
                                                     "run_as tenants, serve refuses to start)", path, mode, path)


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


def _token(args: argparse.Namespace) -> str:
    """The token: ``--token``, else ``--token-file``'s content (stripped), else
    ``$FAIRSHARE_TOKEN``. A missing, unreadable or empty token file is a usage error."""
    if getattr(args, "token", None):
        return args.token
    path = getattr(args, "token_file", None)
    if path is None:
        token = os.environ.get(TOKEN_ENV)
        if not token:
            raise ClientError(f"--token: is required (or --token-file, or set ${TOKEN_ENV})")
        return token
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"--token-file: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not token:
        raise ClientError(f"--token-file: {path} is empty")
    if os.stat(path).st_mode & 0o007:
        print(f"fairshare: warning: --token-file: {path} may be read by other users (chmod 600 {path})",
              file=sys.stderr)
    return token


def _request_once(args: argparse.Namespace, method: str, path: str, body: Any, headers: dict[str, str],
                  answered: tuple[int, ...] = ()) -> Any:
    """One API call's JSON answer; an error status in ``answered`` is returned as an
    answer (``/healthz`` answers 503 with its document), any other raises."""
    if not args.server:
        raise ClientError(f"--server: is required (or set ${SERVER_ENV})")
    token = _token(args)
    url = args.server.rstrip("/") + path
    if not url.startswith(("http://", "https://")):
        raise ClientError(f"--server: must be an http:// or https:// URL, got {args.server!r}")
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                          "Accept": "application/json", **headers})
    # (no --ca-cert: urllib's default, the system's certificate authorities)
    https = {"context": _ca_context(args.ca_cert)} if getattr(args, "ca_cert", None) and url.startswith("https://") \
        else {}
    try:
        with urllib.request.urlopen(req, timeout=60, **https) as resp:  # noqa: S310 - the user's own server URL
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        if exc.code in answered:
            try:
                return json.loads(exc.read())
            except ValueError:
                pass  # not a fairshare server's answer: reported below
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
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ssl.SSLCertVerificationError):  # (no retry cures it)
            raise ClientError(f"cannot trust {args.server}: {reason.verify_message} (give its certificate or CA "
                              f"with --ca-cert FILE)", EXIT_INTERNAL) from None
        raise _Retryable(f"cannot reach {args.server}: {reason}", EXIT_INTERNAL) from None


def _ca_context(path: str):
    """An SSL context that trusts the certificates of the PEM file ``path``."""
    try:
        return ssl.create_default_context(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise ClientError(f"--ca-cert: cannot read a PEM certificate from {path}: "
                          f"{getattr(exc, 'strerror', None) or getattr(exc, 'reason', None) or exc}") from None


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
    if getattr(args, "queues_action", None) == "set":
        return cmd_queues_set(args)
    _print_queues(_request(args, "GET", "/v1/queues"), args.format)
    return EXIT_OK


def cmd_queues_set(args: argparse.Namespace) -> int:
    """``queues set QUEUE``: one ``PUT /v1/queues`` change document (live/queues.py),
    then the queues as the server has them after it."""
    change: dict[str, Any] = {}
    if args.weight is not None:
        change["weights"] = {args.queue: args.weight}
    bounds: dict[str, dict[str, float] | None] = {}
    for bound in ("guarantee", "limit"):
        if getattr(args, f"no_{bound}"):
            bounds[bound] = None  # (null removes it)
        elif getattr(args, bound) is not None:
            bounds[bound] = _parse_amounts(f"--{bound}", getattr(args, bound))
    if bounds:
        change["bounds"] = {args.queue: bounds}
    if not change:
        raise ClientError("queues set: nothing to change (give --weight, --guarantee, --limit, --no-guarantee "
                          "or --no-limit)")
    _print_queues(_request(args, "PUT", "/v1/queues", change), getattr(args, "format", "table"))
    return EXIT_OK


def _parse_amounts(flag: str, items: list[str]) -> dict[str, float]:
    """``["cpu=4", "gpu=1"]`` as ``{"cpu": 4.0, "gpu": 1.0}``; the server checks the
    resources and amounts, this only the form."""
    amounts: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            amount = float(value)
        except ValueError:
            amount = None
        if not sep or not name or amount is None:
            raise ClientError(f"{flag}: must be RES=AMOUNT (e.g. cpu=4), got {item!r}")
        if name in amounts:
            raise ClientError(f"{flag}: {name} given twice")
        amounts[name] = amount
    return amounts


def cmd_job(args: argparse.Namespace) -> int:
    """``job ID``: the job and its tasks, ``tasks_next`` followed until ``--max-tasks``."""
    job = _request(args, "GET", f"/v1/jobs/{args.job_id}?tasks_limit={min(args.max_tasks, MAX_TASKS_PAGE)}")
    tasks = job["tasks"]
    while job.get("tasks_next") is not None and len(tasks) < args.max_tasks:
        page = min(args.max_tasks - len(tasks), MAX_TASKS_PAGE)
        job = _request(args, "GET", f"/v1/jobs/{args.job_id}?tasks_after={job['tasks_next']}&tasks_limit={page}")
        tasks += job["tasks"]
    cut = job.get("tasks_next") is not None
    job = {**job, "tasks": tasks, "tasks_next": job.get("tasks_next")}
    if args.format == "json":
        print(json.dumps(job, indent=2))
    else:
        summary = [("job", f"{job['id']} {job['name']}"), ("queue", job["queue"] or "(root)"),
                   ("tenant", job["tenant"]), ("state", job["state"]),
                   ("tasks", f"{job['tasks_done']}/{job['tasks_total']} done: {job['tasks_succeeded']} succeeded, "
                             f"{job['tasks_failed']} failed, {job['tasks_running']} running"),
                   ("submitted", _clock(job["submitted_at"])), ("finished", _clock(job["finished_at"]))]
        _table([(f"{key}:", value) for key, value in summary])
        print()
        rows = [("TASK", "CLASS", "STATE", "NODE", "ATTEMPTS", "EXIT", "MESSAGE")]
        rows += [(str(t["id"]), t["class"], t["state"], t["node"] or "-", str(t["attempts"]),
                  "-" if t["exit_code"] is None else str(t["exit_code"]), _one_line(t["message"]))
                 for t in tasks]
        _table(rows)
    if cut:
        print(f"fairshare: showing the first {len(tasks)} of {job['tasks_total']} tasks (--max-tasks)",
              file=sys.stderr)
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """``status``: ``/healthz`` (503 is an answer: ``unavailable``), then ``/v1/status``."""
    health = _request_once(args, "GET", "/healthz", None, {}, answered=(503,))
    state = _request(args, "GET", "/v1/status")
    if args.format == "json":
        print(json.dumps({"health": health, "status": state}, indent=2))
    else:
        up = sum(1 for n in state["nodes"] if n["alive"])
        preemptions = state.get("preemptions_total")
        _table([("health:", f"{health['status']} ({health['detail']})" if health.get("detail") else health["status"]),
                ("policy:", state["policy"]),
                ("nodes:", f"{up} up, {len(state['nodes']) - up} down"),
                ("tasks:", f"{state['running_tasks']} running, {state['pending_tasks']} pending"),
                ("decisions:", str(state["decisions_total"])),
                ("preemptions:", "-" if preemptions is None else str(preemptions)),
                ("utilization:", ",".join(f"{r}={u:.1%}" for r, u in state["utilization"].items()) or "-")])
        print()
        rows = [("NODE", "STATE", "CAPACITY", "USED")]
        rows += [(n["name"], "up" if n["alive"] else "down", _amounts(n["capacity"]), _amounts(n["used"]))
                 for n in state["nodes"]]
        _table(rows)
    return EXIT_INTERNAL if health["status"] == "unavailable" else EXIT_OK


#: how often ``logs --follow`` asks for more, and the bytes one read asks for
FOLLOW_EVERY_S, LOG_READ_BYTES = 1.0, 1 << 20


def cmd_logs(args: argparse.Namespace) -> int:
    """``logs JOB [TASK]``: the attempt's output (``GET .../tasks/{task}/logs``, read on
    from ``next_offset`` until a read comes back short); without TASK each task's latest
    attempt of ``GET /v1/jobs/{id}/logs``, under a header when there are several.
    ``--follow``: again every ``FOLLOW_EVERY_S`` until every attempt has ended."""
    if args.attempt is not None and args.task_id is None:
        raise ClientError("--attempt: needs a TASK")
    if args.task_id is not None:
        attempts: dict[int, int | None] = {args.task_id: args.attempt}
    else:
        attempts = {}
        for entry in _request(args, "GET", f"/v1/jobs/{args.job_id}/logs")["logs"]:
            attempts[entry["task"]] = max(attempts.get(entry["task"]) or 0, entry["attempt"])
        if not attempts:
            print(f"fairshare: job {args.job_id} has no task output yet", file=sys.stderr)
            return EXIT_OK
    several = len(attempts) > 1
    offsets = dict.fromkeys(attempts, 0)
    ended: set[int] = set()
    shown = None  # the task whose output was printed last (its header is up)
    while True:
        for task_id in sorted(attempts):
            if task_id in ended:
                continue
            while True:
                query = f"offset={offsets[task_id]}&limit={LOG_READ_BYTES}"
                if attempts[task_id] is not None:
                    query += f"&attempt={attempts[task_id]}"
                got = _request(args, "GET", f"/v1/jobs/{args.job_id}/tasks/{task_id}/logs?{query}")
                attempts[task_id] = got["attempt"]  # (followed: the attempt read first, not a newer one)
                if several and shown != task_id and (got["data"] or not args.follow):
                    print(f"{'' if shown is None else chr(10)}==> task {task_id} (attempt {got['attempt']}) <==",
                          flush=True)
                    shown = task_id
                if got["data"]:
                    sys.stdout.write(got["data"])
                    sys.stdout.flush()
                offsets[task_id] = got["next_offset"]
                if got["next_offset"] - got["offset"] < LOG_READ_BYTES:  # no more for now
                    if got["ended"]:
                        ended.add(task_id)
                    break
        if not args.follow or len(ended) == len(attempts):
            return EXIT_OK
        _sleep(FOLLOW_EVERY_S)


def _print_queues(queues: dict[str, Any], format: str) -> None:
    if format == "json":
        print(json.dumps(queues, indent=2))
        return
    rows = [("QUEUE", "WEIGHT", "CURRENT", "FAIR", "RUNNING", "PENDING", "GUARANTEE", "LIMIT", "BELOW_FAIR_S")]
    rows += [(path, f"{q['weight']:g}", f"{q['current_dominant_share']:.3f}", f"{q['fair_dominant_share']:.3f}",
              str(q["running_tasks"]), str(q["pending_tasks"]), _amounts(q.get("guarantee")),
              _amounts(q.get("limit")), _seconds(q.get("time_below_fair_share")))
             for path, q in queues.items()]
    _table(rows)


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


def _clock(epoch_s: float | None) -> str:
    """A server time as local ``YYYY-MM-DD HH:MM:SS``; ``-`` for none (not finished)."""
    return "-" if epoch_s is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_s))


def _one_line(text: str | None, width: int = 60) -> str:
    """A task's message on one table line: its last line (a command's output ends with
    the reason), cut to ``width`` characters; ``-`` for none."""
    if not text or not text.strip():
        return "-"
    last = text.strip().splitlines()[-1]
    return last if len(last) <= width else last[:width - 3] + "..."


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


COMMANDS = {"serve": cmd_serve, "submit": cmd_submit, "jobs": cmd_jobs, "job": cmd_job, "cancel": cmd_cancel,
            "queues": cmd_queues, "status": cmd_status, "logs": cmd_logs}
