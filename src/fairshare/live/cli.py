"""``fairshare serve`` and its clients ``submit``, ``jobs``, ``job``, ``cancel``, ``queues``
(and ``queues set``), ``status``, ``logs`` (contract: "Live scheduling").

The clients go through :class:`fairshare.client.Client`, which uses only the standard
library (urllib): they need no Ray, FastAPI or uvicorn, and import nothing heavy of
fairshare (``submit`` reads its JOBFILE with the scenario loader's parser), so they start
at once. A refused request exits 2 with the server's field and reason; a server that
cannot be reached exits 1. ``submit`` sends an ``Idempotency-Key`` (a new UUID per
invocation) and retries, with the same key, on a lost connection, a 5xx or a 429 (up to
``--retries`` times, waiting 0.5, 1, 2, 4 ... s or the server's ``Retry-After``): a retry
of a submission the server committed but whose answer was lost gets the same job ids back
instead of creating the jobs twice. ``--server``, ``--token`` and ``--ca-cert`` default to
the environment variables ``FAIRSHARE_SERVER``, ``FAIRSHARE_TOKEN`` and
``FAIRSHARE_CA_CERT`` (an extension of the contract: a token on the command line is
visible to other users in ``ps``), then to the profile of the client configuration file
(``--profile``, ``FAIRSHARE_PROFILE``, its ``default_profile``; ``fairshare.client.settings``);
``--token-file`` reads the token from a file instead (its content, stripped), which ``ps``
does not show. ``jobs``, ``job``, ``queues`` and ``status`` take ``--watch [SECONDS]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from fairshare.client import (CA_CERT_ENV, PROFILE_ENV, SERVER_ENV, TOKEN_ENV, Client, Queue, Unreachable,
                              read_jobfile, read_token_file, settings)
from fairshare.client import ClientError as RequestError

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
#: how many of a job's tasks ``fairshare job`` reads by default (ten of the server's
#: default pages)
MAX_TASKS_SHOWN = 10_000
#: ``--watch``'s redraw period when none is given
WATCH_DEFAULT_S = 2.0
_sleep = time.sleep  # the tests replace it


class ClientError(Exception):
    def __init__(self, message: str, status: int = EXIT_USAGE):
        super().__init__(message)
        self.status = status


def _seconds_type(text: str) -> float:
    """``--watch``'s period: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


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
        """The server, token and profile options; ``inherited``: a sub-action's copies,
        which leave the values given before the action (``queues --token T set ...``)
        alone unless given again (argparse copies a sub-parser's defaults over its
        parent's)."""
        unset = argparse.SUPPRESS if inherited else None
        p.add_argument("--server", default=unset, metavar="URL",
                       help=f"the serve URL, e.g. http://127.0.0.1:8000 (default ${SERVER_ENV}, then the profile's "
                            "url)")
        token = p.add_mutually_exclusive_group()
        token.add_argument("--token", default=unset, metavar="T",
                           help=f"your API token (default ${TOKEN_ENV}, then the profile's token or token_file)")
        token.add_argument("--token-file", default=unset, metavar="PATH",
                           help="read the token from this file (its content, stripped)")
        p.add_argument("--ca-cert", default=unset, metavar="PEM",
                       help="trust this certificate authority for an https:// server (default "
                            f"${CA_CERT_ENV}, then the profile's ca_cert, then the system's)")
        p.add_argument("--profile", default=unset, metavar="NAME",
                       help=f"the client configuration file's profile (default ${PROFILE_ENV}, then its "
                            "default_profile; docs/live.md, Client profiles)")

    def watch(p: argparse.ArgumentParser) -> None:
        p.add_argument("--watch", type=_seconds_type, nargs="?", const=WATCH_DEFAULT_S, default=None,
                       metavar="SECONDS",
                       help=f"redraw every SECONDS (default {WATCH_DEFAULT_S:g}) until Ctrl-C")

    submit = sub.add_parser("submit", help="submit the jobs of a JOBFILE to serve",
                            description="JOBFILE (YAML or JSON) has a top-level `jobs:` list in the scenario "
                                        "format, each task class with a `command`. Prints one job id per line.")
    submit.add_argument("jobfile", metavar="JOBFILE", nargs="?",
                        help="the job file; with --ray, the program after `--` instead")
    submit.add_argument("--ray", action="store_true",
                        help="submit the program after `--` (python SCRIPT ... or python -m MODULE ...) as a Ray "
                             "program: fairshare submit --ray --bundle cpu=1 --queue Q -- python train.py")
    submit.add_argument("--bundle", action="append", default=[], metavar="R=N[,R=N]",
                        help="with --ray: one bundle of the program's placement group (repeat for more; "
                             "default one of cpu=1)")
    submit.add_argument("--queue", metavar="QUEUE", help="with --ray: the job's queue (default: the root)")
    submit.add_argument("--name", metavar="NAME", help="with --ray: the job's name")
    submit.add_argument("--priority", type=int, default=0, metavar="N", help="with --ray: its priority in its queue")
    submit.add_argument("--working-dir", metavar="DIR",
                        help="with --ray: uploaded to the cluster as the program's working directory")
    submit.add_argument("program", nargs="*", help=argparse.SUPPRESS)
    submit.add_argument("--retries", type=int, default=4, metavar="N",
                        help="retries (same Idempotency-Key) after a lost connection, a 5xx or a 429 (default 4)")
    client(submit)
    jobs = sub.add_parser("jobs", help="list your jobs on serve")
    jobs.add_argument("--format", choices=("table", "json"), default="table")
    watch(jobs)
    client(jobs)
    job = sub.add_parser("job", help="one job on serve: its summary and its tasks",
                         description="The job's summary and a table of its tasks (id, class, state, node, "
                                     "attempts, exit code, message), read page by page.")
    job.add_argument("job_id", metavar="ID", type=positive_int)
    job.add_argument("--max-tasks", type=positive_int, default=MAX_TASKS_SHOWN, metavar="N",
                     help=f"read at most N tasks (default {MAX_TASKS_SHOWN:,}); a cut list says so")
    job.add_argument("--format", choices=("table", "json"), default="table")
    watch(job)
    client(job)
    why = sub.add_parser("why", help="why a job on serve waits, what would start it, and when it will start",
                         description="The job's reasons with their numbers (GET /v1/jobs/{id}/explain), the "
                                     "changes that would start it now (each checked by deciding again) and its "
                                     "estimated start.")
    why.add_argument("job_id", metavar="JOB", type=positive_int)
    why.add_argument("--format", choices=("text", "json"), default="text")
    client(why)
    cancel = sub.add_parser("cancel", help="cancel jobs on serve")
    cancel.add_argument("job_ids", nargs="+", metavar="JOB", type=positive_int)
    client(cancel)
    queues = sub.add_parser("queues", help="current and fair dominant share of every queue; `queues set` changes one",
                            description="Every queue's weight, current and fair dominant share, tasks, guarantee "
                                        "and limit; with fairness.half_life, its effective dominant share "
                                        "(allocation plus decayed usage) and decayed average allocation. "
                                        "`fairshare queues set QUEUE ...` changes a queue (admin).")
    queues.add_argument("--format", choices=("table", "json"), default="table")
    watch(queues)
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
    watch(status)
    client(status)
    logs = sub.add_parser("logs", help="a task's output on serve (stdout and stderr), or each task's",
                          description="The output of a job's task (its latest attempt, or --attempt N), or, "
                                      "without TASK, of each task's latest attempt (with several tasks, each "
                                      "under a '==> task ID (attempt N) <==' header). Output beyond serve's "
                                      "bound per attempt is rotated away; a gap is said on stderr.")
    logs.add_argument("job_id", metavar="JOB", type=positive_int)
    logs.add_argument("task", metavar="TASK", type=positive_int, nargs="?", default=None)
    logs.add_argument("--attempt", type=positive_int, default=None, metavar="N",
                      help="this attempt of TASK (default: its latest)")
    logs.add_argument("--follow", "-f", action="store_true",
                      help="keep printing new output until every attempt shown (and, without TASK, the job) "
                           "has ended")
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
    import ssl

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
def _print_retry(message: str, wait_s: float) -> None:
    print(f"fairshare: {message}; retrying in {wait_s:g} s", file=sys.stderr)


def _client(args: argparse.Namespace, *, retries: int = 0) -> Client:
    """The client of a command: each setting from its flag, else the environment, else the
    profile (``--profile``, else ``$FAIRSHARE_PROFILE``, else the config file's
    ``default_profile``). The token: ``--token``, else ``--token-file``'s content
    (stripped), else ``$FAIRSHARE_TOKEN``, else the profile's; a missing, unreadable or
    empty token file is a usage error."""
    found = settings(profile=getattr(args, "profile", None))
    server = getattr(args, "server", None) or found.url
    where = f" or a profile's url in {found.config}"
    if not server:
        raise ClientError(f"--server: is required (or set ${SERVER_ENV},{where})")
    if not server.startswith(("http://", "https://")):
        raise ClientError(f"--server: must be an http:// or https:// URL, got {server!r}")
    if getattr(args, "token", None):
        token = args.token
    elif getattr(args, "token_file", None) is not None:
        token = read_token_file(args.token_file, "--token-file")
    elif found.token or found.token_file:
        token = found.read_token()
    else:
        raise ClientError(f"--token: is required (or --token-file, or set ${TOKEN_ENV}, or a profile's token_file "
                          f"in {found.config})")
    ca_cert = getattr(args, "ca_cert", None) or found.ca_cert
    try:
        return Client(server, token, ca_cert=ca_cert, retries=retries, sleep=lambda s: _sleep(s),
                      on_retry=_print_retry)
    except RequestError as exc:  # a bad setting: named as the flag that gives it
        message = str(exc)
        for argument, flag in (("ca_cert: ", "--ca-cert: "), ("url: ", "--server: ")):
            if message.startswith(argument):
                message = flag + message[len(argument):]
        raise ClientError(message) from None


def _exit_status(exc: RequestError) -> int:
    """A refusal (4xx) or bad input is the user's (2); no answer or a 5xx is not (1)."""
    if isinstance(exc, Unreachable) or (exc.status is not None and exc.status >= 500):
        return EXIT_INTERNAL
    return EXIT_USAGE


def _client_command(command):
    """A client command whose requests' errors exit as ``_exit_status`` says."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except RequestError as exc:
            raise ClientError(str(exc), _exit_status(exc)) from None

    run.__doc__ = command.__doc__
    return run


def _watching(command):
    """A client command that, given ``--watch [SECONDS]``, redraws its output every SECONDS
    until Ctrl-C (exit 0), like watch(1): the screen is cleared before each frame only on a
    terminal (a pipe or a file gets the frames one after another, each under a header
    line). A frame is drawn whole, from its output captured, so it does not flicker. An
    error on the first frame ends the command; on a later one it is shown in the frame
    (a server restarting is worth watching through)."""

    def run(args: argparse.Namespace) -> int:
        every_s = getattr(args, "watch", None)
        if every_s is None:
            return command(args)
        import contextlib
        import io

        tty = sys.stdout.isatty()
        frames = 0
        try:
            while True:
                frame = io.StringIO()
                try:
                    with contextlib.redirect_stdout(frame):
                        command(args)
                except ClientError as exc:
                    if not frames:
                        raise
                    frame.write(f"fairshare: error: {exc}\n")
                header = f"every {every_s:g} s: fairshare {args.command}    {time.strftime('%Y-%m-%d %H:%M:%S')}"
                sys.stdout.write(("\033[H\033[2J" if tty else "" if not frames else "\n")
                                 + header + "\n\n" + frame.getvalue())
                sys.stdout.flush()
                frames += 1
                _sleep(every_s)
        except KeyboardInterrupt:
            return EXIT_OK

    run.__doc__ = command.__doc__
    return run


@_client_command
def cmd_submit(args: argparse.Namespace) -> int:
    from fairshare.model.errors import ScenarioError

    if args.ray:
        jobs = [_ray_program_job(args)]
    else:
        if args.jobfile is None or args.program:
            raise ClientError("JOBFILE: give one job file (or --ray -- python PROGRAM ...)")
        try:
            jobs = read_jobfile(args.jobfile)
        except ScenarioError as exc:
            raise _problems(exc, "nothing was sent") from None
        _resolve_working_dirs(jobs, Path(args.jobfile).resolve().parent)
    if args.retries < 0:
        raise ClientError(f"--retries: must be >= 0, got {args.retries}")
    # one key for every attempt of this invocation: the server creates the jobs once
    for job_id in _client(args, retries=args.retries).submit(jobs).ids:
        print(job_id)
    return EXIT_OK


def _ray_program_job(args: argparse.Namespace) -> dict:
    """``submit --ray``'s job: the program after ``--`` (argparse puts its first word in
    JOBFILE when ``--`` comes first), one task class per distinct ``--bundle``."""
    from fairshare.ray import program_job

    words = ([args.jobfile] if args.jobfile is not None else []) + [w for w in args.program if w != "--"]
    if not words:
        raise ClientError("--ray: the program is missing: fairshare submit --ray [--bundle cpu=1] -- python "
                          "train.py")
    bundles = []
    for text in args.bundle or ["cpu=1"]:
        bundle = {}
        for item in text.split(","):
            resource, _, amount = item.partition("=")
            try:
                bundle[resource.strip()] = float(amount)
            except ValueError:
                raise ClientError(f"--bundle: expected RESOURCE=AMOUNT[,...], got {text!r}") from None
        bundles.append(bundle)
    runtime_env = {"working_dir": str(Path(args.working_dir).resolve())} if args.working_dir else None
    return program_job(shlex.join(words), bundles, queue=args.queue or "", name=args.name,
                       priority=args.priority, runtime_env=runtime_env)


def _resolve_working_dirs(jobs: list, base: Path) -> None:
    """A Ray program's relative ``runtime_env.working_dir`` is the job file's, not serve's."""
    for job in jobs:
        env = job.get("ray", {}).get("runtime_env") if isinstance(job, dict) and isinstance(job.get("ray"), dict) \
            else None
        if isinstance(env, dict) and isinstance(env.get("working_dir"), str) and env["working_dir"]:
            env["working_dir"] = str((base / env["working_dir"]).resolve())


@_watching
@_client_command
def cmd_jobs(args: argparse.Namespace) -> int:
    jobs = _client(args).jobs()
    if args.format == "json":
        print(json.dumps([j.raw for j in jobs], indent=2))
        return EXIT_OK
    rows = [("ID", "NAME", "QUEUE", "TENANT", "STATE", "DONE/TOTAL")]
    rows += [(str(j.id), j.name, j.queue or "(root)", j.tenant, j.state, f"{j.tasks_done}/{j.tasks_total}")
             for j in jobs]
    _table(rows)
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    client = _client(args)
    status = EXIT_OK
    for job_id in args.job_ids:
        try:
            job = client.cancel(job_id)[0]
            print(f"{job.id} {job.state}")
        except RequestError as exc:
            print(f"fairshare: error: job {job_id}: {exc}", file=sys.stderr)
            status = max(status, _exit_status(exc))
    return status


def cmd_queues(args: argparse.Namespace) -> int:
    if getattr(args, "queues_action", None) == "set":
        return cmd_queues_set(args)
    return _show_queues(args)


@_watching
@_client_command
def _show_queues(args: argparse.Namespace) -> int:
    _print_queues(_client(args).queues(), args.format)
    return EXIT_OK


@_client_command
def cmd_queues_set(args: argparse.Namespace) -> int:
    """``queues set QUEUE``: one ``PUT /v1/queues`` change document (live/queues.py),
    then the queues as the server has them after it."""
    bounds: dict[str, Any] = {}
    for bound in ("guarantee", "limit"):
        if getattr(args, f"no_{bound}"):
            bounds[bound] = None  # (null removes it)
        elif getattr(args, bound) is not None:
            bounds[bound] = _parse_amounts(f"--{bound}", getattr(args, bound))
    if args.weight is None and not bounds:
        raise ClientError("queues set: nothing to change (give --weight, --guarantee, --limit, --no-guarantee "
                          "or --no-limit)")
    _print_queues(_client(args).set_queue(args.queue, weight=args.weight, **bounds), getattr(args, "format", "table"))
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


@_watching
@_client_command
def cmd_job(args: argparse.Namespace) -> int:
    """``job ID``: the job and its tasks, ``tasks_next`` followed until ``--max-tasks``."""
    job = _client(args).job(args.job_id, max_tasks=args.max_tasks)
    if args.format == "json":
        print(json.dumps(job.raw, indent=2))
    else:
        summary = [("job", f"{job.id} {job.name}"), ("queue", job.queue or "(root)"),
                   ("tenant", job.tenant), ("state", job.state),
                   ("tasks", f"{job.tasks_done}/{job.tasks_total} done: {job.tasks_succeeded} succeeded, "
                             f"{job.tasks_failed} failed, {job.tasks_running} running"),
                   ("submitted", _clock(job.submitted_at)), ("finished", _clock(job.finished_at))]
        _table([(f"{key}:", value) for key, value in summary])
        print()
        rows = [("TASK", "CLASS", "STATE", "NODE", "ATTEMPTS", "EXIT", "MESSAGE")]
        rows += [(str(t.id), t.task_class, t.state, t.node or "-", str(t.attempts),
                  "-" if t.exit_code is None else str(t.exit_code), _one_line(t.message))
                 for t in job.tasks]
        _table(rows)
    if job.tasks_next is not None:
        print(f"fairshare: showing the first {len(job.tasks)} of {job.tasks_total} tasks (--max-tasks)",
              file=sys.stderr)
    return EXIT_OK


@_client_command
def cmd_why(args: argparse.Namespace) -> int:
    """``why JOB``: the explanation as sentences (``report.explain``), or its JSON."""
    from fairshare.report.explain import explanation_text

    doc = _client(args).explain(args.job_id)
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        start = doc["estimated_start"]
        text = explanation_text({**doc, "estimated_start": None}).splitlines()[:-1]
        text[0] = f"Job {doc['job']} is {doc['state']} at the scheduler's last decision."
        text.append("Estimated start: " + (_clock(start) if start is not None else
                                           "unknown (no run time known for the tasks ahead, or it fits nowhere)"))
        print("\n".join(text))
    return EXIT_OK


@_watching
@_client_command
def cmd_status(args: argparse.Namespace) -> int:
    """``status``: ``/healthz`` (503 is an answer: ``unavailable``), then ``/v1/status``."""
    state = _client(args).status()
    if args.format == "json":
        print(json.dumps(state.raw, indent=2))
    else:
        up = sum(1 for n in state.nodes if n.alive)
        _table([("health:", f"{state.health} ({state.health_detail})" if state.health_detail else state.health),
                ("policy:", state.policy),
                ("nodes:", f"{up} up, {len(state.nodes) - up} down"),
                ("tasks:", f"{state.running_tasks} running, {state.pending_tasks} pending"),
                ("decisions:", str(state.decisions_total)),
                ("preemptions:", "-" if state.preemptions_total is None else str(state.preemptions_total)),
                ("utilization:", ",".join(f"{r}={u:.1%}" for r, u in state.utilization.items()) or "-")])
        print()
        rows = [("NODE", "STATE", "CAPACITY", "USED")]
        rows += [(n.name, "up" if n.alive else "down", _amounts(n.capacity), _amounts(n.used)) for n in state.nodes]
        _table(rows)
    return EXIT_INTERNAL if state.health == "unavailable" else EXIT_OK


@_client_command
def cmd_logs(args: argparse.Namespace) -> int:
    """``logs JOB [TASK]``: a task attempt's output (``--attempt``; default its latest), or
    each task's latest attempt, under a ``==> task ID (attempt N) <==`` header (as tail
    does for several files) when the job has several tasks. ``--follow``: until every
    followed attempt (and, without TASK, the job) has ended."""
    if args.attempt is not None and args.task is None:
        raise ClientError("--attempt: needs TASK (an attempt of which task?)")
    client = _client(args)
    headers = args.task is None and client.job(args.job_id, max_tasks=1).tasks_total > 1
    shown: tuple[int, int] | None = None
    at_line_start = True
    for chunk in client.logs(args.job_id, args.task, args.attempt, follow=args.follow):
        if headers and shown != (chunk.task, chunk.attempt):
            sys.stdout.write(("" if shown is None else "\n" if at_line_start else "\n\n")
                             + f"==> task {chunk.task} (attempt {chunk.attempt}) <==\n")
            at_line_start = True
        shown = (chunk.task, chunk.attempt)
        if chunk.skipped:
            sys.stdout.flush()
            print(f"fairshare: {chunk.skipped} bytes of task {chunk.task} (attempt {chunk.attempt}) were dropped "
                  f"(rotated) before byte {chunk.offset}", file=sys.stderr)
        if chunk.data:
            sys.stdout.write(chunk.data)
            at_line_start = chunk.data.endswith("\n")
        if args.follow:
            sys.stdout.flush()
    return EXIT_OK


def _print_queues(queues: dict[str, Queue], format: str) -> None:
    if format == "json":
        print(json.dumps({path: q.raw for path, q in queues.items()}, indent=2))
        return
    # with decayed usage (fairness.half_life > 0): EFFECTIVE, the dominant share of the
    # allocation plus the decayed usage (what the order is by), and DECAYED, the decayed
    # average allocation per resource
    decayed = any(q.decayed_usage is not None for q in queues.values())
    rows = [("QUEUE", "WEIGHT", "CURRENT", "FAIR", "RUNNING", "PENDING", "GUARANTEE", "LIMIT", "BELOW_FAIR_S")
            + (("EFFECTIVE", "DECAYED") if decayed else ())]
    rows += [(path, f"{q.weight:g}", f"{q.current_dominant_share:.3f}", f"{q.fair_dominant_share:.3f}",
              str(q.running_tasks), str(q.pending_tasks), _amounts(q.guarantee), _amounts(q.limit),
              _seconds(q.time_below_fair_share))
             + ((_share(q.effective_dominant_share), _amounts(q.decayed_usage, ".3g")) if decayed else ())
             for path, q in queues.items()]
    _table(rows)


def _problems(exc: ScenarioError, consequence: str) -> ClientError:
    """A file's problems as ``allocate`` reports a scenario's: one ``FILE: FIELD.PATH:
    REASON`` line each on stderr (no prefix: easy to grep and to jump to), then the error
    ``N problems in FILE; CONSEQUENCE``, exit status 2."""
    print(exc.format(), file=sys.stderr)
    return ClientError(f"{exc.summary()}; {consequence}")


def _amounts(amounts: dict | None, spec: str = "g") -> str:
    """``cpu=4,gpu=1``; ``-`` for none (a server of an older version sends no field)."""
    return ",".join(f"{r}={v:{spec}}" for r, v in amounts.items()) if amounts else "-"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


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


COMMANDS = {"serve": cmd_serve, "submit": cmd_submit, "jobs": cmd_jobs, "job": cmd_job,
            "cancel": _client_command(cmd_cancel), "queues": cmd_queues, "status": cmd_status, "logs": cmd_logs,
            "why": cmd_why}
