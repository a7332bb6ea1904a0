"""Plots of simulation runs, rendered by matplotlib (Agg) to SVG text for inlining.

Each function takes plain series (no simulator types) and returns an ``<svg>`` string.
Step functions with many changes are averaged over :data:`BINS` equal time bins before
plotting (exactly: the integral over each bin divided by its width), so a 100,000-task
run still gives a small, legible figure; the title says when that happened.
SVG output is deterministic (fixed hash salt, no date), so a report differs only where
the run does.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import numpy as np

#: above this many change points a series is bin-averaged before plotting
MAX_POINTS = 2000
BINS = 1000

_STYLE_DONE = False


def _plt():
    global _STYLE_DONE
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if not _STYLE_DONE:
        matplotlib.rcParams.update({
            "svg.hashsalt": "fairshare",  # stable element ids: same run, same bytes
            "svg.fonttype": "none",  # text as <text>: smaller, selectable
            "font.size": 9,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "legend.fontsize": 8,
            "legend.frameon": False,
        })
        _STYLE_DONE = True
    return plt


def _svg(fig) -> str:
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    text = text[start:] if start >= 0 else text
    # drop the RDF <metadata> block (links to outside vocabularies; not needed inline)
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)


def step_series(times: Sequence[float], values: Sequence[float], end: float) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(x, y, binned)`` ready for ``ax.step(x, y, where="post")``: the step function that
    takes ``values[i]`` from ``times[i]`` to ``times[i+1]`` (the last one to ``end``),
    bin-averaged when it has more than :data:`MAX_POINTS` changes."""
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    if t.size == 0:
        return np.array([0.0, end]), np.array([0.0, 0.0]), False
    if t.size <= MAX_POINTS or end <= t[0]:
        return np.append(t, max(end, t[-1])), np.append(v, v[-1]), False
    # exact bin averages: F(t) = integral of the step function is linear between changes
    widths = np.diff(np.append(t, end))
    cum = np.concatenate(([0.0], np.cumsum(v * widths)))
    knots = np.append(t, end)
    edges = np.linspace(t[0], end, BINS + 1)
    f = np.interp(edges, knots, cum)
    means = np.diff(f) / np.diff(edges)
    return edges, np.append(means, means[-1]), True


def _time_axis(ax, end: float) -> None:
    ax.set_xlim(0, end if end > 0 else 1)
    ax.set_xlabel("simulated time (s)")


def _colors(n: int):
    plt = _plt()
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


#: line styles cycled when overlaid series may coincide (policies in a comparison)
DASHES = ("-", (0, (5, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (3, 3)))


def lines_over_time(series: dict[str, tuple[Sequence[float], Sequence[float]]], end: float, *, title: str,
                    ylabel: str, percent: bool = False, width: float = 7.5, height: float = 3.0,
                    dashed: bool = False, marks: Sequence[float] = (), marks_label: str = "preemption") -> str:
    """One step line per named series ``(times, values)`` over ``[0, end]``. ``dashed``
    cycles line styles so that coinciding series stay visible; ``marks`` are times drawn
    as thin vertical lines (preemptions), one legend entry for all."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(width, height))
    binned_any = False
    top = 0.0
    for k, ((name, (times, values)), color) in enumerate(zip(series.items(), _colors(len(series)))):
        x, y, binned = step_series(times, values, end)
        binned_any |= binned
        if percent:
            y = 100.0 * y
        top = max(top, float(np.max(y)) if y.size else 0.0)
        ax.step(x, y, where="post", label=name, color=color, linewidth=1.6 if dashed else 1.2,
                linestyle=DASHES[k % len(DASHES)] if dashed else "-")
    if marks:
        for k, t in enumerate(sorted(set(marks))):
            ax.axvline(t, color="#c0392b", linewidth=0.6, alpha=0.5, linestyle=":",
                       label=f"{marks_label} ({len(set(marks))} instants)" if k == 0 else None)
    _time_axis(ax, end)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, top * 1.06 if top > 0 else 1.0)  # a line at the maximum stays visible
    if binned_any:
        title += f" (averaged over {BINS} time bins)"
    ax.set_title(title)
    if series:
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), ncol=1 if len(series) <= 12 else 2)
    return _svg(fig)


def samples_over_time(series: dict[str, tuple[Sequence[float], Sequence[float]]], end: float, *, title: str,
                      ylabel: str, percent: bool = False, width: float = 7.5, height: float = 3.0) -> str:
    """One line per named series of point samples ``(times, values)`` (a quantity that
    changes between samples, such as decayed usage: not a step function), joined
    straight; more than :data:`MAX_POINTS` samples are thinned to every k-th (the last kept)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(width, height))
    top = 0.0
    for (name, (times, values)), color in zip(series.items(), _colors(len(series))):
        t = np.asarray(times, dtype=float)
        y = np.asarray(values, dtype=float) * (100.0 if percent else 1.0)
        if t.size > MAX_POINTS:
            keep = np.unique(np.append(np.arange(0, t.size, -(-t.size // MAX_POINTS)), t.size - 1))
            t, y = t[keep], y[keep]
        top = max(top, float(np.max(y)) if y.size else 0.0)
        ax.plot(t, y, label=name, color=color, linewidth=1.2)
    _time_axis(ax, end)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, top * 1.06 if top > 0 else 1.0)
    ax.set_title(title)
    if series:
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), ncol=1 if len(series) <= 12 else 2)
    return _svg(fig)


def cdf(samples: dict[str, Sequence[float]], *, title: str, xlabel: str, totals: dict[str, int] | None = None,
        width: float = 7.5, height: float = 3.0) -> str:
    """Empirical CDFs, one step line per named sample. With ``totals`` the curve is the
    fraction of *all* jobs (unfinished ones never reach it: the curve stops below 1)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(width, height))
    for k, ((name, values), color) in enumerate(zip(samples.items(), _colors(len(samples)))):
        xs = np.sort(np.asarray(values, dtype=float))
        n = (totals or {}).get(name, xs.size) or 1
        if xs.size == 0:
            ax.plot([], [], label=f"{name} (none finished)", color=color)
            continue
        ys = np.arange(1, xs.size + 1) / n
        ax.step(np.concatenate(([0.0], xs)), np.concatenate(([0.0], ys)), where="post", label=name,
                color=color, linewidth=1.6, linestyle=DASHES[k % len(DASHES)])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.05)
    ax.set_xlim(left=0)
    ax.set_title(title)
    if samples:
        ax.legend(loc="lower right")
    return _svg(fig)


def bars(groups: Sequence[str], series: dict[str, Sequence[float]], *, title: str, ylabel: str,
         width: float = 7.5, height: float = 3.0) -> str:
    """Grouped bars: one group per label in ``groups``, one bar per named series."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(width, height))
    k = max(1, len(series))
    x = np.arange(len(groups))
    w = 0.8 / k
    for i, ((name, values), color) in enumerate(zip(series.items(), _colors(len(series)))):
        ax.bar(x + (i - (k - 1) / 2) * w, [v if v is not None else 0.0 for v in values], w, label=name, color=color)
    ax.set_xticks(x, list(groups), rotation=30 if len(groups) > 6 else 0, ha="right" if len(groups) > 6 else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _svg(fig)
