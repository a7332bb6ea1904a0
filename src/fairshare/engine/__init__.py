"""The scheduling loop shared by the simulator and the live runtime.

``Scheduler`` is pure: it is told about events (job submitted, task finished or failed,
node added or lost) with the time they happened, and asked ``schedule(now)`` for the
tasks to start. Which job goes next is the policy's online sorter; which node is
``placement``. Neither runtime contains policy logic.
"""

from fairshare.engine.placement import STRATEGIES, NodePool
from fairshare.engine.scheduler import Launch, Scheduler

__all__ = ["Launch", "NodePool", "STRATEGIES", "Scheduler"]
