"""What each live task runs: the command of its job's task class, resolved per launch.

The live service registers a job's commands when it admits the job; the executor looks
a launch's ``TaskSpec`` up here when it starts the task. Both get the same
``CommandBook`` through their constructors (``fairshare serve`` builds it), so the
executor needs no callback set on it and no reference back into the service.

A tenant with ``run_as`` (``AuthConfig.run_as``) has its commands run as that user, each
job in its own working directory ``WORKDIR/JOB`` (created by the node agent, owned by the
user, mode 0700); the other tenants' commands run as serve's user in serve's working
directory, as before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from fairshare.engine.scheduler import Launch
from fairshare.live.config import RayProgram, TaskCommand


@dataclass(frozen=True)
class TaskSpec:
    """What a launch runs."""

    argv: tuple[str, ...]
    shell: bool
    env: tuple[tuple[str, str], ...]
    cwd: str | None
    attempt: int = 1  # which start of the task this is (``Launch.attempt``)
    #: the operating-system user the command runs as (its tenant's ``run_as``; ``cwd`` is
    #: then the job's own directory, which the agent creates); None: the agent's user
    user: str | None = None


class CommandBook:
    """Job id (the scheduler's job name) -> its tenant and per-class commands."""

    def __init__(self, cwd: str | None = None, *, run_as: Mapping[str, str] | None = None,
                 workdir: str | None = None):
        """``run_as``: tenant -> user; ``workdir``: the root of the per-job working
        directories of those tenants (required with ``run_as``)."""
        if run_as and workdir is None:
            raise ValueError("a workdir is required for tenants with run_as")
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.run_as = dict(run_as or {})
        self.workdir = workdir
        self._jobs: dict[str, tuple[str, tuple[TaskCommand, ...]]] = {}
        self._programs: dict[str, RayProgram] = {}

    def register(self, job: str, tenant: str, commands: tuple[TaskCommand, ...],
                 program: RayProgram | None = None) -> None:
        """``program``: the job's Ray program (its tasks are the bundles of its placement
        group and have no commands)."""
        self._jobs[job] = (tenant, tuple(commands))
        if program is not None:
            self._programs[job] = program

    def forget(self, job: str) -> None:
        self._jobs.pop(job, None)
        self._programs.pop(job, None)

    def program(self, job: str) -> RayProgram | None:
        """The job's Ray program; None: a job of commands."""
        return self._programs.get(job)

    def program_env(self, launch: Launch) -> dict[str, str]:
        """A Ray program's environment: its job's identity (``FAIRSHARE_TASK_ID`` is the
        task whose output is the driver's: the job's first)."""
        return dict(self._env(launch, self._jobs[launch.job][0]))

    @staticmethod
    def _env(launch: Launch, tenant: str) -> tuple[tuple[str, str], ...]:
        return (("FAIRSHARE_TENANT", tenant), ("FAIRSHARE_JOB_ID", launch.job),
                ("FAIRSHARE_TASK_ID", str(launch.task_id)), ("FAIRSHARE_NODE", launch.node),
                ("FAIRSHARE_ATTEMPT", str(launch.attempt)))

    def jobs(self) -> set[str]:
        """The jobs whose commands are registered (admitted, not finished)."""
        return set(self._jobs)

    def spec(self, launch: Launch) -> TaskSpec:
        """The command of ``launch``'s class, with the task's identity in its environment."""
        tenant, commands = self._jobs[launch.job]
        cmd = commands[launch.class_index]
        attempt = launch.attempt  # (numbered by the scheduler, recorded by the store at commit)
        env = self._env(launch, tenant)
        user = self.run_as.get(tenant)
        if user is None:
            return TaskSpec(cmd.argv, cmd.shell, env, self.cwd, attempt)
        assert self.workdir is not None  # (checked at construction)
        return TaskSpec(cmd.argv, cmd.shell, env, os.path.join(self.workdir, launch.job), attempt, user)
