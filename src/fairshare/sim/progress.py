"""A dependency-free progress bar for long simulations (``fairshare simulate --progress``).

It is the one place that reads the wall clock, and only to throttle itself and show the
elapsed time on the terminal: nothing it sees reaches ``summary.json`` or ``timeline.csv``.
On a terminal it redraws one line (``\\r``); on anything else (a log file) it writes a
line every few seconds.
"""

from __future__ import annotations

import time
from typing import TextIO

WIDTH = 28


#: the share of the work done before an ETA is shown (earlier, the rate says little)
ETA_AFTER = 0.02


def eta_text(frac: float, elapsed_s: float) -> str:
    """``", about 65 s left"`` (in the unit of the elapsed time beside it): the rest of the
    work at the rate so far; nothing before ``ETA_AFTER`` of it is done, or once it is all
    done."""
    if not ETA_AFTER <= frac < 1.0:
        return ""
    return f", about {elapsed_s * (1.0 - frac) / frac:,.0f} s left"


class Steps:
    """The steps after a run (its summary, its files, its report), one line each on the
    progress stream as each ends (``summary 1.1 s``): no silent wait after the bar's 100%.
    Disabled (``stream`` None) it only runs the steps."""

    def __init__(self, stream: TextIO | None, label: str = ""):
        self.stream = stream
        self.label = label

    def run(self, name: str, work, *args, **kwargs):
        """``work(*args, **kwargs)``, timed and reported as ``name``."""
        if self.stream is None:
            return work(*args, **kwargs)
        started = time.monotonic()
        self.stream.write(f"{self.label}{name}...")
        self.stream.flush()
        try:
            return work(*args, **kwargs)
        finally:
            self.stream.write(f" {time.monotonic() - started:,.1f} s\n")
            self.stream.flush()


class ProgressBar:
    def __init__(self, stream: TextIO, *, until: float | None = None, total_tasks: int | None = None,
                 label: str = ""):
        self.stream = stream
        self.until = until
        self.total_tasks = total_tasks
        self.label = label
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval = 0.1 if self.tty else 5.0
        self.started = time.monotonic()
        self._last = -1e9
        self._drawn = False

    def __call__(self, now: float, tasks_done: int) -> None:
        wall = time.monotonic()
        if wall - self._last < self.interval:
            return
        self._last = wall
        self._draw(now, tasks_done, wall)

    def _draw(self, now: float, tasks_done: int, wall: float) -> None:
        if self.until is not None and self.until > 0:
            frac = min(1.0, now / self.until)
            what = f"t={now:,.0f}/{self.until:,.0f} s, {tasks_done:,} tasks done"
        elif self.total_tasks:
            frac = min(1.0, tasks_done / self.total_tasks)
            what = f"{tasks_done:,}/{self.total_tasks:,} tasks, t={now:,.0f} s"
        else:
            frac = 0.0
            what = f"t={now:,.0f} s, {tasks_done:,} tasks done"
        filled = int(round(frac * WIDTH))
        bar = "#" * filled + "." * (WIDTH - filled)
        elapsed = wall - self.started
        text = f"{self.label}[{bar}] {100 * frac:5.1f}%  {what}  {elapsed:,.1f} s elapsed{eta_text(frac, elapsed)}"
        if self.tty:
            self.stream.write("\r" + text + "\x1b[K")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._drawn = True

    def close(self, now: float | None = None, tasks_done: int | None = None) -> None:
        """Draw the final state and end the line."""
        if now is not None and tasks_done is not None:
            self._draw(now, tasks_done, time.monotonic())
        if self._drawn and self.tty:
            self.stream.write("\n")
            self.stream.flush()
