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
        text = f"{self.label}[{bar}] {100 * frac:5.1f}%  {what}  {wall - self.started:,.1f} s elapsed"
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
