"""The simulator's side of the executor seam (``engine.executor.Executor``).

Starting a task samples its duration and pushes its completion (a ``TaskFinished``
event) onto the simulator's event heap; completions come back through that heap, so
``poll`` has nothing to report. Everything it needs comes through its constructor.

Slot scheduling (policy ``slots``) places tasks by slot count, ignoring their resources,
so a node can hold more than it has (DRF Sec. 7.2, H-DRF Sec. 5.3). We model the cost of
that as thrashing: a task launched on a node whose over-subscription factor
``max_r used_r / capacity_r`` (after the instant's launches) is ``f > 1`` runs ``f`` times
longer. The factor is fixed at launch: tasks already running are not slowed further, and
a task does not speed up when its neighbours leave. Resources the node does not have at
all are left out of the factor (the model cannot say how slow "no GPU" is).

A gang's tasks are one program (a distributed job): one duration is drawn per start of
the gang, for the first of its tasks to start (its class, checkpoint credit and stretch),
and all the tasks started with it end together then; so a gang's running tasks go from
all to none at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fairshare.engine.events import TaskFinished
from fairshare.engine.executor import ExecutorDefaults
from fairshare.engine.scheduler import Launch
from fairshare.model.cluster import Node
from fairshare.model.jobs import Job
from fairshare.sim.durations import MIN_DURATION_S, DurationSampler
from fairshare.sim.events import TASK_END, EventQueue


class SimulatedExecutor(ExecutorDefaults):
    def __init__(self, nodes: tuple[Node, ...], events: EventQueue, durations: DurationSampler,
                 jobs: Mapping[str, Job], clock: Callable[[], float],
                 oversubscription: Callable[[str], float] | None = None, *,
                 credits: dict[tuple[str, int], list[float]] | None = None):
        """``clock``: the simulated now (a kill ends its task at once);
        ``oversubscription(node)``: the node's factor now (slot scheduling only, else None);
        ``credits``: per (job, class index), work kept by checkpoints of preempted tasks,
        taken in order by the next tasks of that job and class to start (they run that
        much shorter)."""
        self._nodes = tuple(nodes)
        self.events = events
        self.durations = durations
        self.jobs = jobs
        self.clock = clock
        self.oversubscription = oversubscription
        self.credits = credits if credits is not None else {}
        self.launched = 0
        self.stretched = 0  # launched on an over-subscribed node (slots only)
        # the over-subscription factor per node, fixed for one instant: every launch of
        # the instant is already taken from the pool when the first one starts
        self._stretch: dict[str, float] = {}
        self._stretch_at: float | None = None
        # the gang last started: (job, time) and when its tasks end
        self._gang_start: tuple[str, float] | None = None
        self._gang_end = 0.0

    def nodes(self) -> tuple[Node, ...]:
        return self._nodes

    def poll(self) -> list:
        return []

    def start(self, launch: Launch, now: float) -> None:
        job = self.jobs[launch.job]
        if job.gang and self._gang_start == (launch.job, now):  # (a gang's tasks start in a row)
            self.launched += 1
            self.events.push(self._gang_end, TASK_END, TaskFinished(launch.task_id))
            return
        duration = self.durations.sample(job, launch.class_index)
        # (no tuple built and looked up when no checkpoint kept anything: the usual case)
        kept = self.credits.get((launch.job, launch.class_index)) if self.credits else None
        if kept:  # a preempted task's checkpointed work: this attempt resumes from there
            duration = max(MIN_DURATION_S, duration - kept.pop(0))
        if self.oversubscription is not None:
            # thrashing model (module docstring)
            if self._stretch_at != now:
                self._stretch, self._stretch_at = {}, now
            factor = self._stretch.get(launch.node)
            if factor is None:
                factor = self._stretch[launch.node] = self.oversubscription(launch.node)
            if factor > 1.0:
                duration *= factor
                self.stretched += 1
        self.launched += 1
        if job.gang:
            self._gang_start, self._gang_end = (launch.job, now), now + duration
        self.events.push(now + duration, TASK_END, TaskFinished(launch.task_id))

    def task_ends(self) -> dict[int, float]:
        """When each running task ends (its queued completion; a kill's, if earlier)."""
        ends: dict[int, float] = {}
        for time, payload in self.events.entries():
            if isinstance(payload, TaskFinished):
                got = ends.get(payload.task_id)
                if got is None or time < got:
                    ends[payload.task_id] = time
        return ends

    def next_duration(self, job_name: str, class_index: int) -> float | None:
        """How long the job's next task of that class will run once started (``start``'s
        own sample, drawn ahead, less a checkpoint's credit); None under slot scheduling,
        where the node's over-subscription at the start stretches it."""
        if self.oversubscription is not None:
            return None
        job = self.jobs[job_name]
        duration = self.durations.peek(job, class_index)
        kept = self.credits.get((job_name, class_index))
        return max(MIN_DURATION_S, duration - kept[0]) if kept else duration

    def kill(self, task_id: int) -> None:
        """The task ends now, failed; its scheduled completion is then void (the
        scheduler no longer runs it)."""
        self.events.push(self.clock(), TASK_END, TaskFinished(task_id, ok=False, reason="cancelled"))
