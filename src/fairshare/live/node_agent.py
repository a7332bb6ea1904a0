"""The per-node agent that runs live tasks' commands (like slurmd on a Slurm node).

``RayExecutor`` starts one agent per Ray node as a *detached, named* Ray actor pinned to
that node (``ray_executor``), so the agent, and the commands it started, outlive the
``fairshare serve`` process that created it: a restarted serve finds the agents again
by name, lists what they run and adopts it instead of running it a second time.

This module holds the agent's logic as a plain class (no Ray import; the unit tests
drive it directly). Each command runs as a subprocess keyed by ``(task id, attempt)``:

- in its own session (``kill`` stops the command's whole process group), and with a
  parent-death signal (Linux ``PR_SET_PDEATHSIG``, set by ``setpriv --pdeathsig``):
  if the agent dies (its node died, or it was killed), its commands die with it. The
  signal fires when the *thread* that forked the child ends, so each command is forked
  by a thread that lives until the command ends (``_Run._main``).
- its result (exit code, output tail) is kept until serve acknowledges it (``reports``
  with ``ack``) after recording it in its database: a serve that dies between the
  command's end and that record finds the result here after its restart.
- its whole output (stdout and stderr merged) goes, as it comes, to the attempt's files
  under ``output_dir`` (``live.task_output``: bounded, rotated, the tail kept), which
  outlive the attempt, the agent and serve; ``output_list`` and ``output_read`` read
  them for a serve on another machine.

A command with a ``user`` (its tenant's ``run_as``) runs as that user: its uid, primary
gid and the user's groups (``Popen``'s ``user``, ``group``, ``extra_groups``), ``HOME``,
``USER`` and ``LOGNAME`` set, in its job's directory (``_as_user``). That needs the agent
to run as root; such a start is forked, not vforked (CPython does not vfork a child that
changes its ids).

Fencing: serve's *incarnation* (a counter in its database, incremented at each start)
comes with every call that can start work or drop results. The agent remembers the
newest incarnation it has seen and refuses ``run`` and ``ack`` from an older one, so a
message of a dead serve still in flight (or a zombie serve) cannot start work after
the new serve listed the agent (``hello``), nor drop a result the new serve needs.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import signal
import stat
import subprocess
import threading
import time

from fairshare.live.task_output import DEFAULT_MAX_BYTES, OutputFiles, OutputWriter

log = logging.getLogger(__name__)

OUTPUT_TAIL = 2000  # characters of a task's output kept with its record
#: bytes read from a command's pipe at a time
PIPE_CHUNK = 65536

#: what ``run`` answers
STARTED, REFUSED, FENCED, STALE = "started", "refused", "fenced", "stale"


#: util-linux ``setpriv``: sets the parent-death signal and execs the command. Through
#: it the command is started without a ``preexec_fn``, which makes Python fork the whole
#: agent (a Ray worker, big and threaded) instead of using vfork: measured in the agent
#: on this 2-core machine, 13 ms per start with a ``preexec_fn``, 0.2 ms without.
SETPRIV = shutil.which("setpriv")


def _die_with_parent_hook():
    """Without ``setpriv``: a ``preexec_fn`` that sets the parent-death signal (Linux
    ``prctl(PR_SET_PDEATHSIG)``); libc is loaded here, before the fork, so the child only
    makes one system call. None where there is no prctl (the commands may then outlive
    a killed agent)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1

    return hook


def _command(argv: list[str], shell: bool, env: dict[str, str]) -> tuple[list[str], object]:
    """``(args, preexec_fn)`` that run the command with SIGKILL as its parent-death signal.
    Raises ``OSError`` when a command (not a shell script) is not found or not executable,
    as ``Popen`` would."""
    if shell:
        args = ["/bin/sh", "-c", argv[0] if len(argv) == 1 else " ".join(argv)]
    else:
        found = shutil.which(argv[0], path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(f"not found, or not executable: {argv[0]!r}")
        args = list(argv)
    if SETPRIV is not None:
        return [SETPRIV, "--pdeathsig", "KILL", "--", *args], None
    return args, _die_with_parent_hook()


_WORKDIR_LOCK = threading.Lock()


def _as_user(user: str, workdir: str, env: dict[str, str]) -> dict:
    """``Popen``'s arguments that run a command as ``user``, whose working directory is
    ``workdir`` (its job's): created here if missing, owned by the user, mode 0700, under
    a parent owned by the agent's user (0711: others may pass through, not list it).
    Sets the user's ``HOME``, ``USER`` and ``LOGNAME`` in ``env``. Raises ``OSError``
    with the reason when the command cannot run so (``run`` then refuses it)."""
    if os.geteuid() != 0:
        raise OSError(f"run_as {user!r}: the node agent runs as uid {os.geteuid()}, not root, "
                      "so it cannot run commands as another user")
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise OSError(f"run_as {user!r}: no such user on this node") from None
    with _WORKDIR_LOCK:  # (two tasks of a job starting at once: one makes it, both see it the user's)
        os.makedirs(os.path.dirname(workdir), mode=0o711, exist_ok=True)
        try:
            os.mkdir(workdir, 0o700)
            os.chown(workdir, entry.pw_uid, entry.pw_gid)
            os.chmod(workdir, 0o700)  # (mkdir's mode is cut by the umask)
        except FileExistsError:  # an earlier task of the job made it: it must be the user's own
            st = os.lstat(workdir)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != entry.pw_uid:
                raise OSError(f"run_as {user!r}: {workdir} exists and is not a directory of {user!r}") from None
    env.update(HOME=entry.pw_dir, USER=user, LOGNAME=user)
    return {"user": entry.pw_uid, "group": entry.pw_gid,
            "extra_groups": os.getgrouplist(user, entry.pw_gid)}


class _Run:
    """One command of one attempt: forked, waited for and reaped by its own thread."""

    def __init__(self, task_id: int, attempt: int, incarnation: int):
        self.task_id = task_id
        self.attempt = attempt
        self.incarnation = incarnation
        self.pid: int | None = None
        self.code: int | None = None  # None while running
        self.output = ""
        self.seq = 0  # its place in the order of ends (0: running)
        self.forget_when_done = False  # acknowledged (or dropped) while still running
        self.killed = False
        self._started = threading.Event()
        self.error: str | None = None
        self.user: str | None = None  # the user it runs as (None: the agent's)

    def snapshot(self) -> tuple:
        return (self.task_id, self.attempt, self.incarnation, self.pid, self.code, self.seq)

    def start(self, argv: list[str], shell: bool, env: dict[str, str], cwd: str | None,
              on_end, output: OutputWriter | None = None) -> None:
        thread = threading.Thread(target=self._main, args=(argv, shell, env, cwd, on_end, output),
                                  name=f"task-{self.task_id}-{self.attempt}", daemon=True)
        thread.start()
        self._started.wait()

    def _main(self, argv, shell, env, cwd, on_end, output: OutputWriter | None) -> None:
        full_env = dict(os.environ)
        full_env.update(env)
        try:
            as_user = _as_user(self.user, cwd, full_env) if self.user is not None else {}
            if cwd is not None and not os.path.isdir(cwd):
                cwd = None
            args, hook = _command(argv, shell, full_env)
            # its own session: ``kill`` signals the command's whole process group
            proc = subprocess.Popen(args, env=full_env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=hook,
                                    **as_user)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:  # not found, not executable, ...
            self.error = f"cannot run {argv[0]!r}: {exc}"
            if output is not None:
                output.write(self.error.encode("utf-8", "replace") + b"\n")
                output.close()
            self._started.set()
            on_end(self, 127, self.error)
            return
        self.pid = proc.pid
        if self.killed:  # killed while it was being forked
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._started.set()
        # the output as it comes: to the attempt's files, and its tail for the record
        # (4 bytes per character at most: the tail decodes to OUTPUT_TAIL characters)
        tail = b""
        try:
            while chunk := proc.stdout.read1(PIPE_CHUNK):
                if output is not None:
                    try:
                        output.write(chunk)
                    except OSError as exc:  # a full disk: the command runs on, unrecorded
                        output.close()
                        output = None
                        tail += f"\n[fairshare: output no longer kept: {exc}]\n".encode()
                tail = (tail + chunk)[-4 * OUTPUT_TAIL:]
        finally:
            proc.stdout.close()
            if output is not None:
                output.close()
        code = proc.wait()
        on_end(self, code, tail.decode("utf-8", "replace")[-OUTPUT_TAIL:])


class NodeAgent:
    """The agent of one node (module docstring). Every method is safe to call from
    several threads at once (Ray runs the actor with ``max_concurrency`` > 1)."""

    def __init__(self, node: str, output_dir: str | None = None, output_max_bytes: int = DEFAULT_MAX_BYTES):
        """``output_dir``: where each attempt's output goes (``live.task_output``; None:
        nowhere, only the tail of the record)."""
        self.node = node
        self.output_dir = output_dir
        self.output_max_bytes = output_max_bytes
        self.incarnation = 0  # the newest serve incarnation seen
        self._lock = threading.Condition()
        self._runs: dict[int, _Run] = {}  # task id -> its newest attempt here
        self._seq = 0

    # --- calls from serve ------------------------------------------------------------------------
    def hello(self, incarnation: int) -> dict:
        """A (re)started serve introduces itself: from now on older incarnations are
        fenced off. Returns what the agent holds: ``runs`` as ``(task id, attempt,
        incarnation, pid, exit code or None while running, seq)``."""
        with self._lock:
            if incarnation < self.incarnation:
                return {"fenced": True, "incarnation": self.incarnation, "runs": []}
            self.incarnation = incarnation
            return {"fenced": False, "incarnation": incarnation, "node": self.node, "pid": os.getpid(),
                    "runs": [r.snapshot() for r in self._runs.values()]}

    def run(self, task_id: int, attempt: int, incarnation: int, argv: list[str], shell: bool,
            env: dict[str, str], cwd: str | None, user: str | None = None) -> tuple[str, str]:
        """Start attempt ``attempt`` of task ``task_id``: ``(STARTED, pid)``; ``(REFUSED,
        reason)`` when the command cannot be started (its end is reported, as exit status
        127); ``(FENCED, ...)`` for an older incarnation; ``(STALE, ...)`` when a newer
        attempt of the task is already here. A repeated call is answered as the first.
        ``user``: run it as that user, in ``cwd`` (its job's directory; ``_as_user``)."""
        with self._lock:
            if incarnation < self.incarnation:
                return FENCED, f"incarnation {incarnation} < {self.incarnation}"
            self.incarnation = incarnation
            old = self._runs.get(task_id)
            if old is not None:
                if old.attempt == attempt:
                    return (REFUSED, old.error) if old.error else (STARTED, str(old.pid))
                if old.attempt > attempt:
                    return STALE, f"attempt {old.attempt} of task {task_id} is here"
                if old.code is None:  # an older attempt still running: never two at once
                    self._kill(old)
            run = _Run(task_id, attempt, incarnation)
            run.user = user
            self._runs[task_id] = run
        output = None
        if self.output_dir is not None:
            try:
                output = OutputWriter(self.output_dir, task_id, attempt, self.output_max_bytes)
            except OSError as exc:  # the command runs without its output kept
                log.warning("node %s: task %d attempt %d: its output is not kept: %s", self.node, task_id, attempt,
                            exc)
        run.start(list(argv), bool(shell), dict(env), cwd, self._ended, output)
        return (REFUSED, run.error) if run.error else (STARTED, str(run.pid))

    def kill(self, task_id: int, attempt: int, incarnation: int) -> bool:
        """Stop that attempt's command (its process group, SIGKILL); its end is still
        reported. False when that attempt is not running here."""
        with self._lock:
            if incarnation < self.incarnation:
                return False
            run = self._runs.get(task_id)
            if run is None or run.attempt != attempt or run.code is not None:
                return False
            self._kill(run)
            return True

    def drop(self, task_id: int, attempt: int, incarnation: int) -> bool:
        """Serve does not want this attempt (its database says the task is not running
        it): kill it if it runs, and forget it once ended, unreported."""
        with self._lock:
            if incarnation < self.incarnation:
                return False
            run = self._runs.get(task_id)
            if run is None or run.attempt != attempt:
                return False
            if run.code is None:
                run.forget_when_done = True
                self._kill(run)
            else:
                del self._runs[task_id]
            return True

    def reports(self, incarnation: int, ack: list[tuple[int, int]], after_seq: int,
                wait_s: float) -> tuple[int, list[tuple]]:
        """Acknowledge ``ack`` (``(task id, attempt)`` serve has recorded: forgotten), then
        return the ends with ``seq`` above ``after_seq`` as ``(task id, attempt, exit code,
        output, seq)``, waiting up to ``wait_s`` for one (a long poll). Returns ``(newest
        incarnation seen, ends)``; acknowledgements of an older incarnation are ignored."""
        deadline = time.monotonic() + wait_s
        with self._lock:
            if incarnation >= self.incarnation:
                self.incarnation = incarnation
                for task_id, attempt in ack:
                    run = self._runs.get(task_id)
                    if run is not None and run.attempt == attempt:
                        if run.code is None:
                            run.forget_when_done = True
                        else:
                            del self._runs[task_id]
            while True:
                ends = [(r.task_id, r.attempt, r.code, r.output, r.seq) for r in self._runs.values()
                        if r.code is not None and r.seq > after_seq]
                left = deadline - time.monotonic()
                if ends or left <= 0:
                    return self.incarnation, sorted(ends, key=lambda e: e[4])
                self._lock.wait(left)

    def running(self) -> int:
        """Commands running now."""
        with self._lock:
            return sum(1 for r in self._runs.values() if r.code is None)

    def output_list(self, task_ids: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
        """``OutputFiles.list`` of this node's output (serve on another machine reads here)."""
        return {} if self.output_dir is None else OutputFiles(self.output_dir).list(task_ids)

    def output_read(self, task_id: int, attempt: int, offset: int, limit: int):
        """``OutputFiles.read`` of this node's output."""
        return None if self.output_dir is None else OutputFiles(self.output_dir).read(task_id, attempt, offset, limit)

    def ping(self) -> str:
        return self.node

    # --- internals -------------------------------------------------------------------------------
    def _kill(self, run: _Run) -> None:
        run.killed = True
        if run.pid is not None:
            try:
                os.killpg(run.pid, signal.SIGKILL)  # the command is its group's leader (setsid)
            except (ProcessLookupError, PermissionError):
                pass

    def _ended(self, run: _Run, code: int, output: str) -> None:
        with self._lock:
            if run.killed and code >= 0:
                code = -signal.SIGKILL  # (a command that exits on its own as it is killed)
            run.code, run.output = code, output
            self._seq += 1
            run.seq = self._seq
            if run.forget_when_done and self._runs.get(run.task_id) is run:
                del self._runs[run.task_id]
            self._lock.notify_all()
