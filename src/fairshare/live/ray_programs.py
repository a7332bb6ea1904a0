"""Ray programs (a job's ``ray:``): the admitted gang reserved as a Ray placement group,
the program run inside it so that all of its Ray work stays there.

A Ray program's tasks are the *bundles* of its envelope: task class ``k`` asks for
``count`` bundles of ``demand``. The job is a gang (``config.parse_jobs``), so the
engine launches all of its tasks in one pass, each on the node placement chose. The
executor hands those launches here (``gather``); at its next ``poll`` the program starts:

1. **The placement group**, detached and named ``fs/<service id>/<job>/<task.attempt,...>``
   (``pg_name``: the service id, the job and the attempts it holds, so the next serve
   finds it at ``recover``), one bundle per task in task order: the task's demand mapped
   to Ray resources as the executor maps capacities (``fs_<r>`` on a local cluster;
   ``CPU``, ``GPU``, ``memory`` or the resource's own name on a cluster without them),
   plus ``NODE_PIN`` of the node's ``fs_node_<name>`` resource when the node has one, so
   each bundle lands on the node the engine chose and Ray's reservation is fairshare's
   decision, not a second one. Strategy (``strategy_for``): ``pack: node`` ->
   ``STRICT_PACK``; ``pack: {attribute}`` -> ``PACK`` (Ray knows no attribute; the pins
   put the bundles where the engine's attribute-aware placement put them, on pinned
   clusters it is exact, elsewhere an approximation); no ``pack`` -> ``PACK`` (soft, so
   it never contradicts the pins; the engine's first fit packs too).
2. **The driver**: a detached actor (``ProgramDriver``) of no resources scheduled in
   bundle 0 with ``placement_group_capture_child_tasks=True``, with the program's
   runtime environment. It runs the entrypoint *in its own process*, on its main thread
   (``runpy``, as ``python SCRIPT`` or ``python -m MODULE`` would, ``ray.init`` and
   ``ray.shutdown`` made no-ops while it runs): every task and actor the program creates
   is a child of an actor in the placement group, so Ray schedules it in the group, and
   it can take no more than the bundles hold. (A separate driver process, as ``ray job
   submit`` starts, connects as a new job outside any placement group: its work would
   escape, which is why the entrypoint must be a Python program.) The driver's stdout and
   stderr go to the task-output files of the job's first task (``live.task_output``), so
   ``fairshare logs`` reads them as a command's.

The program's end is the end of every one of its tasks: exit status 0, all succeed;
otherwise all fail (the engine re-runs the gang whole, up to ``max_attempts``). Once the
service has recorded the ends (``acknowledge``), the placement group and the driver go.

**Stop** (cancel, preemption, a failed sibling): ``kill`` of any of the program's tasks
reports that task's end at once (as for a command) and starts the stop once: SIGTERM to
the driver's process (the program may catch it and checkpoint), then, after the program's
grace (``RayProgram.grace_s``: its classes' largest ``checkpoint``, else 10 s) or as soon
as the driver returns, the placement group is removed (Ray kills every task and actor in
it) and the driver killed.

**Crash safety**: both are detached, so a ``kill -9`` of serve leaves the program
running. ``recover`` lists this service's placement groups; one whose every task the
database says runs (same attempts) is adopted, its driver found by name and waited on
(``wait``: queued behind ``run`` on the driver's one thread, it returns the exit status
once the program ends, or at once if it ended while serve was down); any other is removed.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fairshare.engine.events import TaskFinished
from fairshare.engine.scheduler import Launch
from fairshare.live.config import RayProgram
from fairshare.live.ray_local import NODE_MARK
from fairshare.live.task_output import DEFAULT_MAX_BYTES, OutputWriter

log = logging.getLogger(__name__)

#: the share of a node's ``fs_node_<name>`` marker (1 per node) one bundle takes to pin it
#: there: at most 1 / NODE_PIN = 1000 bundles per node (Ray keeps 4 decimals)
NODE_PIN = 0.001
#: the namespace of the drivers (the node agents')
NAMESPACE = "fairshare"
PG_PREFIX = "fs/"


# --- pure parts: names, bundles, strategy (unit-tested without Ray) ---------------------------
def pg_name(service_id: str, job: str, tasks: list[tuple[int, int]]) -> str:
    """The placement group's name: ``fs/<service id>/<job>/<task.attempt,...>``."""
    return f"{PG_PREFIX}{service_id}/{job}/" + ",".join(f"{t}.{a}" for t, a in tasks)


def parse_pg_name(name: str, service_id: str) -> tuple[str, list[tuple[int, int]]] | None:
    """``(job, [(task id, attempt), ...])`` of one of this service's placement groups, or None."""
    head = f"{PG_PREFIX}{service_id}/"
    if not name.startswith(head):
        return None
    job, _, tasks = name[len(head):].partition("/")
    try:
        pairs = [tuple(int(x) for x in item.split(".")) for item in tasks.split(",")]
    except ValueError:
        return None
    if not job or any(len(p) != 2 for p in pairs):
        return None
    return job, [(t, a) for t, a in pairs]


def strategy_for(pack: tuple[str, str | None] | None) -> str:
    """Ray's strategy for a gang's ``pack`` (module docstring)."""
    if pack is not None and pack[0] == "node":
        return "STRICT_PACK"
    return "PACK"


def bundle_for(demand: tuple[float, ...], resources: tuple[str, ...], mapping: Mapping[str, tuple[str, float]],
               node: str, pinned: bool) -> dict[str, float]:
    """One task's bundle: its demand in Ray's resources (``mapping``: resource -> (Ray
    name, Ray units per unit)), and the pin to its node when the node has a marker."""
    bundle: dict[str, float] = {}
    for r, amount in zip(resources, demand):
        if amount > 0:
            name, units = mapping[r]
            bundle[name] = bundle.get(name, 0.0) + round(amount * units, 4)
    if pinned:
        bundle[NODE_MARK + node] = NODE_PIN
    return bundle


def options_mapping(resources: tuple[str, ...], mapping: Mapping[str, tuple[str, float]]) -> dict[str, list]:
    """The mapping as the program sees it (``FAIRSHARE_RAY_RESOURCES``, read by
    ``fairshare.ray.options``): resource -> [Ray name, Ray units per unit]."""
    return {r: [mapping[r][0], mapping[r][1]] for r in resources}


# --- the driver (a Ray actor: runs on a worker) -----------------------------------------------
class ProgramDriver:
    """Runs one Ray program in its process (module docstring). One thread: ``wait``
    queues behind ``run``."""

    def __init__(self):
        self.code: int | None = None

    def run(self, program: RayProgram, env: dict[str, str], cwd: str | None, output_dir: str | None,
            output_task: tuple[int, int], output_max_bytes: int = DEFAULT_MAX_BYTES) -> int:
        import ray

        os.environ.update(env)
        if cwd is not None and "working_dir" not in program.runtime_env and os.path.isdir(cwd):
            os.chdir(cwd)
        writer = None
        if output_dir is not None:
            try:
                writer = OutputWriter(output_dir, output_task[0], output_task[1], output_max_bytes)
            except OSError as exc:
                log.warning("the program's output is not kept: %s", exc)
        pump = _redirect_output(writer) if writer is not None else None
        saved = (sys.argv, list(sys.path), ray.init, ray.shutdown)
        # (the program's signal handlers end with it: a SIGTERM after it, the removal's, is Ray's)
        handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
        ray.init = lambda *args, **kwargs: ray.get_runtime_context()  # (connected already, in the group)
        ray.shutdown = lambda *args, **kwargs: None
        try:
            self.code = _run_entrypoint(program)
        finally:
            sys.argv, sys.path[:], ray.init, ray.shutdown = saved[0], saved[1], saved[2], saved[3]
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            if pump is not None:
                pump()
        return self.code

    def wait(self) -> int | None:
        """The exit status, once ``run`` has returned (queued behind it)."""
        return self.code


def _run_entrypoint(program: RayProgram) -> int:
    """``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` in this process; its exit status."""
    import runpy
    import traceback

    try:
        if program.script is not None:
            sys.argv = [program.script, *program.args]
            sys.path.insert(0, os.path.dirname(os.path.abspath(program.script)))
            runpy.run_path(program.script, run_name="__main__")
        else:
            sys.argv = [program.module, *program.args]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(program.module, run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - the program's failure is its exit status
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _redirect_output(writer: OutputWriter):
    """File descriptors 1 and 2 into ``writer`` through a pipe (the program's prints and
    anything its libraries write); returns the function that puts them back."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)

    def pump() -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                writer.write(chunk)
        writer.close()

    thread = threading.Thread(target=pump, name="fairshare-output", daemon=True)
    thread.start()

    def restore() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        thread.join(timeout=10)

    return restore


def _signal(pid: int, signum: int) -> bool:
    """Run on the driver's node: send ``signum`` to its process."""
    try:
        os.kill(pid, signum)
        return True
    except ProcessLookupError:
        return False


# --- the executor's side ------------------------------------------------------------------------
@dataclass
class Program:
    """One start of a Ray program (``tasks``: (task id, attempt, node), task order)."""

    job: str
    tasks: list[tuple[int, int, str]]
    name: str = ""
    strategy: str = "PACK"
    bundles: list[dict[str, float]] = field(default_factory=list)
    pg: object = None
    driver: object = None
    ended: object = None  # the ``run``/``wait`` ref
    grace_s: float = 10.0
    stop_at: float | None = None  # stopping: when the group goes, whatever the driver does
    reported: bool = False  # the tasks' ends are handed to the loop
    acked: set = field(default_factory=set)

    def keys(self) -> set[tuple[int, int]]:
        return {(t, a) for t, a, _n in self.tasks}


class RayPrograms:
    """The executor's Ray programs (module docstring); called from the scheduling thread,
    except ``placement_group`` (API threads: reads only)."""

    def __init__(self, ray, resources: tuple[str, ...], mapping: Mapping[str, tuple[str, float]],
                 pinned: Callable[[], set[str]], output_dir: Callable[[], str | None], output_max_bytes: int,
                 cwd: str | None):
        """``pinned()``: the nodes that advertise their ``fs_node_`` marker;
        ``output_dir()``: the service's task-output directory (None: not kept)."""
        self.ray = ray
        self.resources = resources
        self.mapping = dict(mapping)
        self.pinned = pinned
        self.output_dir = output_dir
        self.output_max_bytes = output_max_bytes
        self.cwd = cwd
        self.service_id = ""
        self._driver_class = ray.remote(ProgramDriver)
        self._signal = ray.remote(num_cpus=0, max_retries=0)(_signal)
        self._gathering: dict[str, tuple[list[Launch], RayProgram, dict[str, str]]] = {}
        self.programs: dict[str, Program] = {}  # job -> its current start
        self._stopping: list[Program] = []
        self._by_task: dict[int, Program] = {}
        self._events: list[TaskFinished] = []

    # --- starts ------------------------------------------------------------------------------
    def gather(self, launch: Launch, program: RayProgram, env: dict[str, str]) -> None:
        """One task of a program's gang (they come together, in one pass); the program
        starts at the next ``poll``."""
        launches, _p, _e = self._gathering.setdefault(launch.job, ([], program, env))
        launches.append(launch)

    def _start(self, job: str, launches: list[Launch], program: RayProgram, env: dict[str, str]) -> None:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        launches = sorted(launches, key=lambda la: la.task_id)
        tasks = [(la.task_id, la.attempt, la.node) for la in launches]
        prog = Program(job, tasks, pg_name(self.service_id, job, [(t, a) for t, a, _ in tasks]),
                       strategy_for(program.pack), grace_s=program.grace_s)
        marked = self.pinned()
        prog.bundles = [bundle_for(la.demand, self.resources, self.mapping, la.node, la.node in marked)
                        for la in launches]
        prog.pg = placement_group(prog.bundles, strategy=prog.strategy, name=prog.name, lifetime="detached")
        runtime_env = dict(program.runtime_env)
        env = {**env, "FAIRSHARE_RAY_RESOURCES": _json(options_mapping(self.resources, self.mapping))}
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), **env}
        prog.driver = self._driver_class.options(
            name=prog.name + "/driver", namespace=NAMESPACE, lifetime="detached", num_cpus=0, max_restarts=0,
            runtime_env=runtime_env,
            scheduling_strategy=PlacementGroupSchedulingStrategy(prog.pg, placement_group_bundle_index=0,
                                                                 placement_group_capture_child_tasks=True)
        ).remote()
        prog.ended = prog.driver.run.remote(program, env, self.cwd, self.output_dir(),
                                            (tasks[0][0], tasks[0][1]), self.output_max_bytes)
        self._track(prog)
        log.info("job %s: Ray program started in placement group %s (%d bundles, %s)", job, prog.name,
                 len(prog.bundles), prog.strategy)

    def _track(self, prog: Program) -> None:
        self.programs[prog.job] = prog
        for t, _a, _n in prog.tasks:
            self._by_task[t] = prog

    # --- the seam's calls ----------------------------------------------------------------------
    def poll(self) -> list[TaskFinished]:
        gathering, self._gathering = self._gathering, {}
        for job, (launches, program, env) in gathering.items():
            try:
                self._start(job, launches, program, env)
            except Exception as exc:  # noqa: BLE001 - refused by Ray: every task fails (an attempt each)
                log.warning("job %s: its Ray program could not start: %r", job, exc)
                self._events.extend(TaskFinished(la.task_id, False, f"start refused by Ray: {exc!r}", la.attempt)
                                    for la in launches)
        events, self._events = self._events, []
        waiting = {p.ended: p for p in list(self.programs.values()) + self._stopping
                   if p.ended is not None}
        ready = self.ray.wait(list(waiting), num_returns=len(waiting), timeout=0)[0] if waiting else []
        now = time.monotonic()
        for ref in ready:
            prog = waiting[ref]
            prog.ended = None
            try:
                code = self.ray.get(ref)
                reason = "" if code == 0 else f"exit status {code}"
            except Exception as exc:  # noqa: BLE001 - the driver died (its node, or killed)
                code, reason = None, f"ray: the driver of job {prog.job} died: {_first_line(exc)}"
            if prog.stop_at is not None:
                prog.stop_at = now  # (stopping: ended early, the group goes now)
                continue
            prog.reported = True
            events.extend(TaskFinished(t, code == 0, reason, a) for t, a, _n in prog.tasks)
        for prog in list(self._stopping):
            if prog.stop_at is not None and now >= prog.stop_at:
                self._stopping.remove(prog)
                self._remove(prog)
        return events

    def kill(self, task_id: int) -> bool:
        """Whether ``task_id`` is a program's (then handled: module docstring, "Stop")."""
        for job, (launches, *_rest) in list(self._gathering.items()):
            for la in launches:
                if la.task_id == task_id:  # (not started yet: nothing to stop)
                    launches.remove(la)
                    self._events.append(TaskFinished(task_id, False, "cancelled", la.attempt))
                    if not launches:
                        del self._gathering[job]
                    return True
        prog = self._by_task.pop(task_id, None)
        if prog is None:
            return False
        attempt = next(a for t, a, _n in prog.tasks if t == task_id)
        if not prog.reported:
            self._events.append(TaskFinished(task_id, False, "cancelled", attempt))
        self._stop(prog, prog.grace_s)
        return True

    def lost(self, node: str) -> None:
        """``node`` is lost: a program with a bundle there stops at once (the loop
        re-queues the lost task; the engine kills the rest of the gang)."""
        for prog in list(self.programs.values()):
            if any(n == node for _t, _a, n in prog.tasks):
                self._stop(prog, 0.0)

    def _stop(self, prog: Program, grace_s: float) -> None:
        """Once per start: SIGTERM now, the group removed after ``grace_s`` (or when the
        driver returns)."""
        if prog.stop_at is not None or self.programs.get(prog.job) is not prog:
            return
        del self.programs[prog.job]
        if prog.ended is None:  # (ended already: nothing to wait for)
            prog.stop_at = time.monotonic()
        else:
            prog.stop_at = time.monotonic() + grace_s
            if grace_s > 0:
                self._terminate(prog)
        self._stopping.append(prog)

    def acknowledge(self, ends: list[tuple[int, int]]) -> None:
        """The program's ends recorded: its group and driver go."""
        for key in ends:
            prog = self._by_task.get(key[0])
            if prog is None or not prog.reported or key not in prog.keys():
                continue
            prog.acked.add(key)
            if prog.acked >= prog.keys():
                self._forget(prog)
                self._remove(prog)

    def _forget(self, prog: Program) -> None:
        for t, _a, _n in prog.tasks:
            if self._by_task.get(t) is prog:
                del self._by_task[t]
        if self.programs.get(prog.job) is prog:
            del self.programs[prog.job]

    def _terminate(self, prog: Program) -> None:
        """SIGTERM to the driver's process, through a task on its node."""
        from ray._private.state import actors
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        try:
            info = actors(prog.driver._actor_id.hex())
            pid, node_id = info["Pid"], info["Address"]["NodeID"]
            if pid:
                self._signal.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
                                     ).remote(pid, signal.SIGTERM)
        except Exception as exc:  # noqa: BLE001 - no signal: the group goes at the deadline all the same
            log.warning("job %s: no SIGTERM to its driver: %s", prog.job, _first_line(exc))

    def _remove(self, prog: Program) -> None:
        from ray.util.placement_group import remove_placement_group

        for what, undo in (("placement group", lambda: remove_placement_group(prog.pg)),
                           ("driver", lambda: self.ray.kill(prog.driver))):
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - gone already
                log.debug("job %s: removing its %s: %s", prog.job, what, exc)
        log.info("job %s: placement group %s removed", prog.job, prog.name)

    def running(self) -> int:
        """The programs' tasks running (stopping ones not counted)."""
        return sum(len(p.tasks) for p in self.programs.values())

    def shutdown(self, stop: bool) -> int:
        """A clean stop: the programs stay for the next serve (returns how many run);
        ``stop``: they are removed, placement groups and drivers."""
        if stop:
            for prog in list(self.programs.values()) + self._stopping:
                self._remove(prog)
            self.programs.clear()
            self._stopping.clear()
            return 0
        for prog in self._stopping:  # (their stop is decided: finish it now)
            self._remove(prog)
        self._stopping.clear()
        return len(self.programs)

    # --- restart -------------------------------------------------------------------------------
    def recover(self, service_id: str, running: dict[int, tuple[int, str]]) -> set[int]:
        """Adopt this service's placement groups whose tasks all still run (module
        docstring); remove the others. Returns the adopted task ids."""
        from ray._raylet import PlacementGroupID
        from ray.util.placement_group import PlacementGroup, placement_group_table

        self.service_id = service_id
        self.programs.clear()
        self._by_task.clear()
        self._stopping.clear()
        self._gathering.clear()
        adopted: set[int] = set()
        for pg_id, info in placement_group_table().items():
            parsed = parse_pg_name(info.get("name", ""), service_id)
            if parsed is None or info.get("state") == "REMOVED":
                continue
            job, pairs = parsed
            pg = PlacementGroup(PlacementGroupID(bytes.fromhex(pg_id)))
            driver = None
            try:
                driver = self.ray.get_actor(info["name"] + "/driver", namespace=NAMESPACE)
            except ValueError:
                pass
            whole = all(running.get(t, (None,))[0] == a for t, a in pairs)
            prog = Program(job, [(t, a, running.get(t, (a, ""))[1]) for t, a in pairs], info["name"],
                           info.get("strategy", "PACK"), [dict(b) for b in info.get("bundles", {}).values()],
                           pg, driver)
            if whole and driver is not None:
                prog.ended = driver.wait.remote()
                self._track(prog)
                adopted.update(t for t, _a in pairs)
            else:
                self._remove(prog)
        # drivers whose group is gone (a crash between the two removals)
        kept = {p.name + "/driver" for p in self.programs.values()}
        try:
            from ray.util import list_named_actors

            named = list_named_actors(all_namespaces=True)
        except Exception:  # noqa: BLE001
            named = []
        for entry in named:
            name = entry.get("name", "")
            if entry.get("namespace") == NAMESPACE and parse_pg_name(name.rsplit("/driver", 1)[0], service_id) \
                    and name not in kept:
                try:
                    self.ray.kill(self.ray.get_actor(name, namespace=NAMESPACE))
                except Exception as exc:  # noqa: BLE001
                    log.debug("driver %s: %s", name, exc)
        if adopted:
            log.info("adopted %d Ray program(s)", len(self.programs))
        return adopted

    # --- the API's view --------------------------------------------------------------------------
    def placement_group(self, job: str) -> dict | None:
        """The job's placement group: id, name, state (Ray's), strategy, bundles."""
        prog = self.programs.get(job)
        if prog is None:
            prog = next((p for p in reversed(list(self._stopping)) if p.job == job), None)
        if prog is None or prog.pg is None:
            return None
        from ray.util.placement_group import placement_group_table

        try:
            state = placement_group_table(prog.pg).get("state", "UNKNOWN")
        except Exception as exc:  # noqa: BLE001 - GCS unreachable now
            state = f"UNKNOWN ({_first_line(exc)})"
        return {"id": prog.pg.id.hex(), "name": prog.name, "state": state, "strategy": prog.strategy,
                "bundles": prog.bundles, "stopping": prog.stop_at is not None,
                "tasks": [t for t, _a, _n in prog.tasks]}


def _json(value) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"
