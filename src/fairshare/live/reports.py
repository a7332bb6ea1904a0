"""What the executor reports, as the engine and the store are to see it: the filter in
front of ``Engine.step``.

An executor reports task ends and node changes (``Executor.poll``). Before they reach
the engine, ``ReportFilter.admit`` decides for each:

* **Fencing.** An end names its attempt (``TaskFinished.attempt``: which start of the
  task ended; the attempt travels with the launch, ``Launch.attempt``). An end whose
  task the scheduler no longer runs (lost with its node, already reported, stopped by
  preemption and not started again) or runs under another attempt (preempted or failed,
  then started again: this is the old start's late end) is dropped. An executor that
  names no attempt is taken to report the current one.
* **Adoption.** At a restart, tasks still running on the executor are adopted when
  their job arrives (``JobArrived.running``). An end of such a task reported before
  its job arrived waits for the next pass; a node lost meanwhile takes its adopted
  tasks back to pending in the store before the job arrives.
* **Failures.** A failed command is re-queued until it has failed ``max_attempts``
  times in this process, then it is ``failed`` (the engine is told it finished, so its
  job can end). An end that Ray or a lost node caused (``reason`` ``ray:...`` or
  ``node ...``) is re-queued without using an attempt. A cancelled job's ends are
  ``cancelled``.

The store outcome of each end (``Outcomes``) is written in the same pass, before any
launch of the pass is committed as running (a re-queued task may start again at once).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fairshare.engine.events import Event, ExecutorEvent, NodeLost, TaskFinished
from fairshare.engine.scheduler import Scheduler

#: why a task went back to pending (``/metrics``): its node was lost (dead, or not
#: answering: ``live.ray_health``); the runtime lost it (a Ray error, not an attempt);
#: its command failed, or its start was refused, with attempts left. (Preempted attempts
#: are counted apart.)
REQUEUE_REASONS = ("node_lost", "infrastructure", "failed")


@dataclass
class Admitted:
    """One pass's executor reports after the filter."""

    events: list[Event] = field(default_factory=list)  # for the engine, in the order reported
    #: store outcomes ``(task id, state, exit code, message[, attempt])`` (``Store.finish_tasks``)
    outcomes: list[tuple] = field(default_factory=list)
    acks: list[tuple[int, int]] = field(default_factory=list)  # (task id, attempt) the executor may forget
    jobs: set[str] = field(default_factory=set)  # jobs whose tasks ended


class ReportFilter:
    """The fencing, adoption and failure rules (module docstring), with what they need
    to remember between passes: the adopted tasks whose job has not arrived, and the
    command failures of each task in this process."""

    def __init__(self, max_attempts: int):
        self.max_attempts = max_attempts
        #: task id -> command failures in this process
        self.failures: dict[int, int] = {}
        #: job id -> task id -> (class index, node, attempt) of tasks adopted at a restart
        #: whose job has not arrived yet
        self.adopting: dict[int, dict[int, tuple[int, str, int]]] = {}
        self._adopting_ids: set[int] = set()
        #: tasks re-queued in this process, by why (``REQUEUE_REASONS``)
        self.requeued: dict[str, int] = dict.fromkeys(REQUEUE_REASONS, 0)

    def expect_adoption(self, adopted: dict[int, tuple[int, int, str, int]]) -> None:
        """task id -> (job id, class index, node, attempt) still running on the executor at
        a restart, before their jobs come through the inbox."""
        for task_id, (job_id, class_index, node, attempt) in adopted.items():
            self.adopting.setdefault(job_id, {})[task_id] = (class_index, node, attempt)
            self._adopting_ids.add(task_id)

    def take_adopted(self, job_id: int) -> dict[int, tuple[int, str, int]]:
        """The job's adopted tasks, handed to its arrival (``JobArrived.running``)."""
        tasks = self.adopting.pop(job_id, {})
        self._adopting_ids.difference_update(tasks)
        return tasks

    def admit(self, reports: list[ExecutorEvent], sch: Scheduler) -> tuple[Admitted, list[ExecutorEvent]]:
        """The pass's reports for the engine and the store, against the scheduler as it
        is before the pass; and the reports to hand in again at the next pass."""
        out = Admitted()
        later: list[ExecutorEvent] = []
        for ev in reports:
            if isinstance(ev, TaskFinished):
                if ev.task_id in self._adopting_ids:
                    later.append(ev)  # its job has not arrived yet (a restart's first pass)
                    continue
                if ev.attempt is not None:
                    out.acks.append((ev.task_id, ev.attempt))
                task = sch.tasks.get(ev.task_id)
                if task is None or (ev.attempt is not None and ev.attempt != task.attempt):
                    continue  # fenced: not the end of a start the scheduler runs
                self._translate(ev, task.job, sch.jobs[task.job].cancelled, out)
            elif isinstance(ev, NodeLost):
                for tasks in self.adopting.values():  # (adopted, their job not yet arrived)
                    for task_id in [t for t, (_k, node, _a) in tasks.items() if node == ev.name]:
                        del tasks[task_id]
                        self._adopting_ids.discard(task_id)
                        out.outcomes.append((task_id, "pending", None, f"node {ev.name} lost"))
                out.events.append(ev)
            else:
                out.events.append(ev)
        return out, later

    def _translate(self, ev: TaskFinished, job: str, cancelled: bool, out: Admitted) -> None:
        task_id = ev.task_id
        infrastructure = ev.reason.startswith("ray:") or ev.reason.startswith("node ")
        if ev.ok:
            mine, outcome = TaskFinished(task_id, True, attempt=ev.attempt), (task_id, "succeeded", 0, "")
        elif cancelled:
            mine, outcome = TaskFinished(task_id, False, ev.reason, ev.attempt), \
                (task_id, "cancelled", None, ev.reason)
        elif infrastructure or self.failures.get(task_id, 0) + 1 < self.max_attempts:
            if not infrastructure:
                self.failures[task_id] = self.failures.get(task_id, 0) + 1
            mine, outcome = TaskFinished(task_id, False, ev.reason, ev.attempt), \
                (task_id, "pending", exit_code(ev.reason), ev.reason)
            self.requeued["infrastructure" if infrastructure else "failed"] += 1
        else:
            # attempts used up: the scheduler counts the task as done (so its job can
            # finish); the store says failed
            mine, outcome = TaskFinished(task_id, True, ev.reason, ev.attempt), \
                (task_id, "failed", exit_code(ev.reason), ev.reason)
        if ev.attempt is not None:  # (recorded only if the row still runs that attempt)
            outcome = (*outcome, ev.attempt)
        out.events.append(mine)
        out.outcomes.append(outcome)
        out.jobs.add(job)

    def node_lost(self, node: str, tasks: tuple[int, ...], jobs: dict[int, str], sch: Scheduler,
                  out: Admitted) -> None:
        """The store outcomes of the running tasks a lost node took with it (``tasks``,
        from the applied ``NodeLost``; ``jobs``: task id -> job, read before the step)."""
        for task_id in tasks:
            job = jobs[task_id]
            out.jobs.add(job)
            if sch.jobs[job].cancelled:
                out.outcomes.append((task_id, "cancelled", None, f"node {node} lost"))
            else:
                out.outcomes.append((task_id, "pending", None, f"node {node} lost"))
                self.requeued["node_lost"] += 1


def exit_code(reason: str) -> int | None:
    """The exit status in an end's reason (``exit status N: ...``), if it has one."""
    if reason.startswith("exit status "):
        try:
            return int(reason.split()[2].rstrip(":"))
        except (IndexError, ValueError):
            return None
    return None
