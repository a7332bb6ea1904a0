"""Jobs and their task classes (a multiclass workflow has several classes, Tan Sec. 3)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fairshare.model.resources import Vector


@dataclass(frozen=True)
class Duration:
    """How long a task runs: ``kind`` is ``fixed``, ``exponential``, ``uniform``,
    ``lognormal`` or ``list``; ``params`` holds its numbers (``value``; ``mean``;
    ``low``/``high``; ``mu``/``sigma``; ``values``)."""

    kind: str = "fixed"
    params: tuple[tuple[str, object], ...] = (("value", 1.0),)

    def param(self, name: str, default: object = None) -> object:
        return dict(self.params).get(name, default)


@dataclass(frozen=True)
class TaskClass:
    name: str
    demand: Vector  # per task, aligned with Scenario.resources
    count: int | None  # None: unbounded, the class always has a next task
    duration: Duration = field(default_factory=Duration)
    constraints: tuple[tuple[str, tuple[str, ...]], ...] = ()  # node attribute -> allowed values
    #: at most this many running tasks of this class of one job on one node (DLRM's
    #: ``max_instance_per_node``); None: no limit
    max_per_node: int | None = None
    #: seconds between checkpoints: a task stopped by preemption keeps the work up to its
    #: last checkpoint (restarts from there); None: it restarts from the beginning
    checkpoint: float | None = None


#: ``Job.pack``: every task of the gang on one node
PACK_NODE = ("node", None)


@dataclass(frozen=True)
class Job:
    name: str
    queue: str  # dotted queue path; "" = directly under the root
    weight: float
    submit_s: float
    classes: tuple[TaskClass, ...]
    #: all-or-nothing: every pending task starts in one decision, or none does (Volcano's
    #: PodGroup, Ray's placement groups); every class has a count (the loader checks)
    gang: bool = False
    #: where a gang's tasks go together: None (anywhere), ``PACK_NODE`` (one node) or
    #: ``("attribute", NAME)`` (nodes sharing one value of attribute NAME, e.g. a rack)
    pack: tuple[str, str | None] | None = None
    #: within its queue, a job of higher priority is served first (ties: the queue's
    #: order); fairness between queues does not see it
    priority: int = 0

    @property
    def total_count(self) -> int | None:
        """Total tasks over all classes, None when any class is unbounded."""
        counts = [c.count for c in self.classes]
        return None if any(c is None for c in counts) else sum(counts)  # type: ignore[misc]

    def gang_demand(self) -> Vector:
        """A gang's summed demand, every task of every class: what it takes in one
        decision (and what the sorters see it ask for, as one unit)."""
        m = len(self.classes[0].demand)
        return tuple(sum((c.count or 0) * c.demand[r] for c in self.classes) for r in range(m))

    def class_mix(self) -> tuple[float, ...]:
        """Fraction of the job's tasks in each class.

        A fixed-mix multiclass job runs its classes in proportion to their task counts
        (Tan Sec. 4: fixed ratios make a workflow equivalent to a single class). With any
        class unbounded, the classes are mixed equally. Only the ``slowdown`` policy
        chooses the mix itself.
        """
        counts = [c.count for c in self.classes]
        if any(c is None for c in counts) or sum(counts) == 0:  # type: ignore[arg-type]
            return tuple(1.0 / len(counts) for _ in counts)
        total = float(sum(counts))  # type: ignore[arg-type]
        return tuple(c / total for c in counts)  # type: ignore[operator]

    def composite_demand(self) -> Vector:
        """Resources of one 'composite task': the class demands weighted by ``class_mix``."""
        mix = self.class_mix()
        m = len(self.classes[0].demand)
        return tuple(sum(f * c.demand[r] for f, c in zip(mix, self.classes)) for r in range(m))
