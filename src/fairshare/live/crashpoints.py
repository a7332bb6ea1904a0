"""Crash points for the crash-point test (``tests/test_live_crash.py``).

``FAIRSHARE_CRASH_AT=<point>:<n>`` in serve's environment makes the ``n``-th pass
through ``crash_point(<point>)`` kill the process with a real SIGKILL (no exception, no
cleanup, nothing flushed): the test then restarts serve on the same database and checks
that nothing was lost or run twice. Without the variable ``crash_point`` does nothing
but compare one global to None.

The points, in a task's order: ``accepting`` (a submission validated, not yet
committed), ``stored`` (committed, the client not yet answered), ``decided`` (launches
decided, not yet marked running), ``handed`` (marked running and handed to Ray),
``running`` (the node agent said the command started), ``finished`` (the agent reported
the command's end, serve has not recorded it), ``recorded`` (recorded, the agent not yet
told).
"""

from __future__ import annotations

import os
import signal
import threading

POINTS = ("accepting", "stored", "decided", "handed", "running", "finished", "recorded")


def _parse(value: str | None) -> tuple[str, int] | None:
    if not value:
        return None
    point, _, n = value.partition(":")
    if point not in POINTS or not n.isdigit() or int(n) < 1:
        raise ValueError(f"FAIRSHARE_CRASH_AT: expected <point>:<n> with point one of {', '.join(POINTS)} "
                         f"and n >= 1, got {value!r}")
    return point, int(n)


_ARMED = _parse(os.environ.get("FAIRSHARE_CRASH_AT"))
_seen = 0
_lock = threading.Lock()


def crash_point(name: str) -> None:
    """SIGKILL this process at the armed point's ``n``-th pass (module docstring)."""
    global _seen
    if _ARMED is None or _ARMED[0] != name:
        return
    with _lock:
        _seen += 1
        if _seen == _ARMED[1]:
            os.kill(os.getpid(), signal.SIGKILL)
