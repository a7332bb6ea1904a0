"""The domain model: resources, cluster, queue tree, jobs, scenarios and allocations.

Nothing in here knows about policies; everything above imports from here.
"""

from fairshare.model.allocation import Allocation, JobAllocation, QueueAllocation
from fairshare.model.cluster import Cluster, Node
from fairshare.model.errors import FieldError, ScenarioError
from fairshare.model.jobs import Duration, Job, TaskClass
from fairshare.model.queues import ROOT, QueueNode, QueueTree
from fairshare.model.scenario import Scenario

__all__ = [
    "Allocation", "JobAllocation", "QueueAllocation", "Cluster", "Node", "FieldError",
    "ScenarioError", "Duration", "Job", "TaskClass", "ROOT", "QueueNode", "QueueTree",
    "Scenario", "load_scenario", "parse_scenario",
]


def load_scenario(path):  # late import: the loader pulls in YAML
    from fairshare.model.loader import load_scenario as _load

    return _load(path)


def parse_scenario(data, source="<scenario>"):
    from fairshare.model.loader import parse_scenario as _parse

    return _parse(data, source)
