"""The live service's inbox as engine events: what the API accepted since the last pass.

The API threads put three kinds of entries in the inbox, each already committed to the
store (a crash loses none of them):

* ``("submit", (job id, tenant, SubmittedJob, submitted_at))`` becomes ``JobArrived``:
  the job with the store's pending task rows as its task ids (in row order), their
  attempts so far, and the tasks adopted at a restart (``ReportFilter.take_adopted``) as
  its running ones; its commands go into the ``CommandBook`` and its submission time (wall
  clock, the store's) into ``submitted_at``, for the admission waits (``/metrics``);
* ``("cancel", job id)`` becomes ``JobCancelled`` (void when the job has finished);
* ``("queues", (changes, done))`` becomes one ``QueueChanged`` per change
  (``live.queues.queue_changes``); ``done`` is set once the pass has applied them.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from fairshare.engine.events import Event, JobArrived, JobCancelled, QueueChanged
from fairshare.engine.forecast import expected_seconds
from fairshare.live.commands import CommandBook
from fairshare.live.config import SubmittedJob
from fairshare.live.reports import ReportFilter
from fairshare.live.store import Store
from fairshare.model.jobs import Job


class Admission:
    def __init__(self, store: Store, commands: CommandBook, reports: ReportFilter):
        self.store = store
        self.commands = commands
        self.reports = reports
        #: job name -> when it was submitted (wall clock), while the engine holds the job
        self.submitted_at: dict[str, float] = {}
        #: job name -> per class, the mean of the ``duration`` its document gives (None:
        #: none given), while the engine holds the job (``engine.forecast``)
        self.estimates: dict[str, tuple[float | None, ...]] = {}

    def events(self, inbox: list, now: float, out: list[Event]) -> list[threading.Event]:
        """Append the inbox's events to ``out`` in arrival order; returns the ``done``
        signals of the queue changes, to set after the pass."""
        done: list[threading.Event] = []
        for kind, payload in inbox:
            if kind == "submit":
                job_id, tenant, submitted, submitted_at = payload
                self.submitted_at[str(job_id)] = submitted_at
                out.append(self.arrival(job_id, tenant, submitted, now))
            elif kind == "cancel":
                out.append(JobCancelled(str(payload)))
            elif kind == "queues":
                changes, signal = payload
                out.extend(QueueChanged(change) for change in changes)
                done.append(signal)
            else:
                raise ValueError(f"unknown inbox entry {kind!r}")
        return done

    def arrival(self, job_id: int, tenant: str, submitted: SubmittedJob, now: float) -> JobArrived:
        """A stored job as the scheduler is to see it: its pending rows, and its tasks
        adopted at a restart."""
        pending: list[list[int]] = [[] for _ in submitted.classes]
        attempts: list[tuple[int, int]] = []
        for t in self.store.tasks(job_id, state="pending"):
            pending[t.class_index].append(t.id)
            if t.attempts:
                attempts.append((t.id, t.attempts))
        adopted = self.reports.take_adopted(job_id)
        running = tuple((task_id, class_index, node, attempt)
                        for task_id, (class_index, node, attempt) in sorted(adopted.items()))
        counts = [len(ids) for ids in pending]
        for _task_id, class_index, _node, _attempt in running:
            counts[class_index] += 1
        classes = tuple(replace(c, count=counts[k]) for k, c in enumerate(submitted.classes))
        self.commands.register(str(job_id), tenant, submitted.commands, submitted.program)
        self.estimates[str(job_id)] = user_estimates(submitted)
        return JobArrived(Job(str(job_id), submitted.queue, submitted.weight, now, classes, gang=submitted.gang,
                              pack=submitted.pack, priority=submitted.priority),
                          task_ids=tuple(tuple(ids) for ids in pending), running=running,
                          attempts=tuple(attempts))


def user_estimates(submitted: SubmittedJob) -> tuple[float | None, ...]:
    """Per class, the mean run time its job document gives (``duration``), None where it
    gives none (the loader puts a default of 1 s there, which is no estimate)."""
    specs = submitted.spec.get("tasks") or ()
    return tuple(expected_seconds(cls.duration) if k < len(specs) and isinstance(specs[k], dict)
                 and "duration" in specs[k] else None for k, cls in enumerate(submitted.classes))
