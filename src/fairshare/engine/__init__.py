"""The scheduling engine shared by the simulator and the live runtime.

``Scheduler`` is pure: it is told about events (job submitted or cancelled, task
finished or failed, node added or lost) with the time they happened, and asked
``schedule(now)`` for the tasks to start. Which job goes next is the policy's online
sorter; which node is ``placement``. ``Engine`` (``engine.step``) is the one loop around
it: apply an instant's events, decide once, start the launches on an ``Executor``.
``engine.snapshot`` gives read-only views of what every job, queue and node holds.
Neither runtime contains policy logic.
"""

from fairshare.engine.events import (INSTANT_ORDER, Event, JobArrived, JobCancelled, NodeAdded, NodeLost, QueueChanged,
                                     TaskFinished, Wake, instant_rank)
from fairshare.engine.executor import Executor
from fairshare.engine.placement import STRATEGIES, NodePool
from fairshare.engine.scheduler import Launch, Scheduler
from fairshare.engine.snapshot import ChangeReader, Changes, Snapshot, UsageLedger
from fairshare.engine.step import Engine, Instant, Preempted, run_rounds

__all__ = ["ChangeReader", "Changes", "Engine", "Event", "Executor", "INSTANT_ORDER", "Instant", "JobArrived", "JobCancelled", "Launch",
           "NodeAdded", "NodeLost", "NodePool", "Preempted", "QueueChanged", "STRATEGIES", "Scheduler", "Snapshot",
           "TaskFinished", "UsageLedger", "Wake", "instant_rank", "run_rounds"]
