"""The numbers and phrases of the checks' human ``detail`` strings."""

from __future__ import annotations

import math

from fairshare.audit.properties.context import AuditContext
from fairshare.model.jobs import Job
from fairshare.model.resources import Vector


def number(x: float) -> str:
    """A number for the human detail strings."""
    if x is None or (isinstance(x, float) and math.isinf(x)):
        return "unbounded"
    return f"{x:.4g}"


def counted(n: int, noun: str) -> str:
    """``n`` and the noun, plural unless ``n`` is 1: "1 job", "3 jobs"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def queue_note(ctx: AuditContext, job: Job) -> str:
    """Why a job of a ``fifo`` queue may fall short: the queue's order, not the policy."""
    if job.queue and ctx.scenario.queues[job.queue].order == "fifo":
        return f" (job {job.name} sits in fifo queue {job.queue}, which gives up fairness among its jobs)"
    return ""


def vector(ctx: AuditContext, v: Vector) -> str:
    """A resource vector with its resources' names: ``<1 cpu, 4 mem>``."""
    return "<" + ", ".join(f"{number(x)} {res}" for x, res in zip(v, ctx.scenario.resources)) + ">"
