"""A validated scenario: resources, cluster, queue tree and jobs."""

from __future__ import annotations

from dataclasses import dataclass, replace

from fairshare.model.cluster import Cluster
from fairshare.model.jobs import Job
from fairshare.model.queues import QueueTree


@dataclass(frozen=True)
class Scenario:
    resources: tuple[str, ...]
    cluster: Cluster
    queues: QueueTree
    jobs: tuple[Job, ...]
    source: str = "<scenario>"

    @property
    def m(self) -> int:
        return len(self.resources)

    @property
    def capacity(self):
        return self.cluster.capacity

    def job(self, name: str) -> Job:
        for job in self.jobs:
            if job.name == name:
                return job
        raise KeyError(name)

    def without_job(self, name: str) -> "Scenario":
        return replace(self, jobs=tuple(j for j in self.jobs if j.name != name))

    def with_job(self, job: Job) -> "Scenario":
        """A copy with ``job`` replacing the job of the same name."""
        return replace(self, jobs=tuple(job if j.name == job.name else j for j in self.jobs))
