"""What a run is asked and what it produces: ``SimOptions`` (``SimulationError`` when it
cannot run as asked), the timeline's ``Row``, each job's ``JobOutcome`` and the
``SimResult`` that ``sim.metrics`` and ``sim.output`` read.

Plain values, no behaviour: the simulator (``sim.simulator``) fills them, its sinks
(``sim.sink``, ``sim.stream``) hold or write them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fairshare.model.resources import Vector
from fairshare.model.scenario import PreemptionConfig, Scenario

class SimulationError(ValueError):
    """The simulation cannot run as asked (e.g. unbounded jobs without ``until``)."""


#: the ``entity`` of the cluster's timeline rows
CLUSTER = "cluster"
#: the ``kind`` of a preemption's timeline row: an event (tasks of the ``entity`` job
#: stopped at that time, and what they held), not a state that holds until a next row
PREEMPT = "preempt"


@dataclass(frozen=True)
class SimOptions:
    seed: int = 0
    until: float | None = None  # stop time in seconds; None: run until every job finished
    placement: str = "first-fit"  # engine.placement.STRATEGIES
    headroom: bool = False  # H-DRF Sec. 5: keep room for the largest task on every node
    #: fair-share preemption (``--preempt``): None uses the scenario's ``preemption:``
    #: section (off without one)
    preemption: PreemptionConfig | None = None
    #: measure each queue's time below its fair share also without preemption
    track_fair_share: bool = False
    #: why jobs wait (``sim.reasons``): ``pending_by_reason`` per job in summary.json,
    #: ``reason`` rows in timeline.csv (not with a streaming run)
    reasons: bool = False


@dataclass(frozen=True)
class JobOutcome:
    name: str
    queue: str
    submit: float
    submitted: bool  # False when the run stopped before its submit time
    start: float | None  # first task started
    finish: float | None  # last task done; None when unfinished at the end
    tasks_completed: int
    tasks_total: int | None  # None: unbounded


#: a timeline row: (time, kind, entity, running_tasks, dominant_share, allocation)
Row = tuple[float, str, str, int, float, Vector]
#: a queue's decayed usage at an instant (``sim.recorder.DecayedUsageRecorder``): (time,
#: queue, decayed_share, effective_share, decayed usage in resource-seconds)
DecayRow = tuple[float, str, float, float, Vector]
#: a job's demand change: (time, job, demanding)
DemandChange = tuple[float, str, bool]


@dataclass
class SimResult:
    """Everything a run produced; ``sim.metrics`` and ``sim.output`` derive the files from it."""

    scenario: Scenario
    policy: str
    params: dict
    options: SimOptions
    end_time: float  # the makespan: last job finish, or the stop time (``until``, last event)
    all_finished: bool
    rows: list[Row]  # in (time, kind, entity) order
    demand_changes: list[DemandChange]  # when a job's demanding changes
    capacity_changes: list[tuple[float, Vector]]  # (time, capacity of the nodes up); first at 0
    jobs: dict[str, JobOutcome]  # scenario order
    decisions: int = 0
    tasks_launched: int = 0
    tasks_completed: int = 0
    tasks_lost: int = 0  # running when their node failed (re-queued)
    tasks_stretched: int = 0  # launched on an over-subscribed node (slots only)
    notes: list[str] = field(default_factory=list)
    #: fair-share preemption: None when it was off; else tasks preempted in all
    preemptions: int | None = None
    tasks_preempted: dict[str, int] = field(default_factory=dict)  # per job
    work_lost: dict[str, float] = field(default_factory=dict)  # per job, task-seconds
    #: per queue, seconds below its fair share by more than the tolerance while demanding
    #: (with preemption on, or ``track_fair_share``; None otherwise)
    time_below_fair_share: dict[str, float] | None = None
    #: with ``SimOptions.reasons``: job -> reason kind -> seconds pending with it, and the
    #: reason changes (time, job, kind; "" when it stopped waiting); None otherwise
    pending_by_reason: dict[str, dict[str, float]] | None = None
    reason_changes: list[tuple[float, str, str]] | None = None
    #: a streaming run: ``rows``, ``demand_changes`` and ``jobs`` went to its sink
    streamed: bool = False
    #: gang reservations (``gangs: {reserve_after:}``): per resource, resource-seconds
    #: reserved for a gang and unused (``engine.reserve``); None when they were off
    reserved_idle: Vector | None = None
    #: decayed usage (``fairness: {half_life}`` above 0 and a policy with memory): per
    #: queue its samples at every instant (None: a streaming run keeps none) and its last
    #: sample, at the end time; None when there is no decayed usage
    decayed_usage: list[DecayRow] | None = None
    decayed_usage_end: dict[str, DecayRow] | None = None
