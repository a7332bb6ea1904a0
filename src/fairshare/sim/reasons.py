"""Why jobs wait over a run (``simulate --reasons``): per job, seconds pending by reason,
and the moments its reason changes.

After every instant's decision the engine is at a quiet point; each job with tasks
waiting has a blocker there (``engine.explain.blocking_kind``: the first reason
``fairshare explain`` gives, without the jobs ahead or the counterfactuals). A job's
reason holds until the next instant, so its seconds are summed per kind
(``pending_by_reason`` in summary.json) and each change is a ``reason`` row of
timeline.csv (``reason`` column: the new kind, empty when no longer waiting).

Off unless asked: a run without it reads nothing and writes the files it always wrote.
"""

from __future__ import annotations

from fairshare.engine.explain import blocking_kinds
from fairshare.engine.scheduler import Scheduler


class ReasonBook:
    def __init__(self) -> None:
        #: job -> (its blocker's kind, since when)
        self._current: dict[str, tuple[str, float]] = {}
        #: job -> kind -> seconds pending with that blocker
        self.seconds: dict[str, dict[str, float]] = {}
        #: (time, job, kind or "" when it stopped waiting), in (time, job) order
        self.changes: list[tuple[float, str, str]] = []

    def observe(self, sch: Scheduler, t: float) -> None:
        """The blockers at the quiet point after instant ``t``."""
        now = blocking_kinds(sch)
        current = self._current
        for name in sorted(set(current) | set(now)):
            was = current.get(name)
            kind = now.get(name)
            if was is not None and was[0] == kind:
                continue
            if was is not None:
                self._close(name, was, t)
            self.changes.append((t, name, kind or ""))
            if kind is None:
                del current[name]
            else:
                current[name] = (kind, t)

    def end(self, t: float) -> None:
        """The run ended at ``t``: the reasons still open count up to it."""
        for name, was in sorted(self._current.items()):
            self._close(name, was, t)
        self._current.clear()

    def _close(self, name: str, was: tuple[str, float], t: float) -> None:
        kind, since = was
        by_kind = self.seconds.setdefault(name, {})
        by_kind[kind] = by_kind.get(kind, 0.0) + (t - since)
