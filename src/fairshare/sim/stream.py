"""A streaming run's result files, written as the run goes (``Simulator(arrivals=, sink=)``).

``StreamingOutput`` is the simulator's other ``RunSink`` (``sim.sink``; the in-memory
``ResultCollector`` is the first): it writes every timeline row to ``timeline.csv`` as it
is produced (or drops it: ``timeline=False``), keeps running accumulators in place of the
recorded lists an up-front run summarizes afterwards (``sim.metrics``), and writes
``summary.json`` at the end. What it keeps is per job *in the system* (its last row, its
integrals, its starvation clock), per queue, and a few numbers per job that left (its
completion time, an offset into a spool file): memory bounded by the jobs in the system,
plus 24 bytes per job of the workload.

The files are the up-front run's, byte for byte, when the jobs arrive in scenario order
and the fairness gap is off (``tests/test_sim_stream.py``): the same integrals, summed in
the same order (each entity's rows in time order); starvation from the same demand
changes and rows; each job's ``summary.json`` entry built by ``sim.metrics.job_entry``
when it leaves, spooled to a temporary file, and copied into ``summary.json`` in arrival
order at the end. The fairness gap is ``null``: it needs a static allocation per distinct
set of demanding jobs, which at the sizes streaming is for is not a summary but the run's
main cost. There is no ``report.html`` (its plots read the whole timeline).
"""

from __future__ import annotations

import csv
import json
import math
import tempfile
from array import array
from json.encoder import encode_basestring_ascii
from pathlib import Path

from fairshare.model.jobs import Job
from fairshare.model.resources import Vector
from fairshare.model.scenario import Scenario
from fairshare.sim.metrics import Integral, capacity_integral, decayed_at_end, document, job_entry, queue_entry
from fairshare.sim.output import TIMELINE_HEAD, fmt_amount, fmt_time, summary_json
from fairshare.sim.result import CLUSTER, PREEMPT, DemandChange, JobOutcome, Row, SimResult

#: where the spooled job entries go in the summary's text (``json.dumps`` of the
#: document with an empty ``jobs``: the one line at the top level that says so)
_JOBS_PLACEHOLDER = '\n  "jobs": {},\n'


def entry_text(name: str, entry: dict) -> str:
    """``name: entry`` as ``summary.json`` holds it under ``jobs`` (indented 4 more):
    ``json.dumps(entry, indent=2, allow_nan=False)``'s text, built here from each
    value's own JSON text. With ``indent`` ``json`` runs its pure-Python encoder, the
    larger part of a job's departure (about 2x the C encoder's time; a full-size Google
    replay writes 672,000 entries). An entry of scalars and one level of mappings of
    scalars (``sim.metrics.job_entry``'s) is laid out here, what json writes char for
    char (``tests/test_sim_stream.py``); anything else, or a float JSON refuses, goes to
    ``json.dumps`` itself."""
    items = []
    for key, value in entry.items():
        text = _scalar_json(value)
        if text is None:
            if type(value) is not dict or not value:
                return _entry_text_by_json(name, entry)
            inner = []
            for k, v in value.items():
                got = _scalar_json(v)
                if got is None or type(k) is not str:
                    return _entry_text_by_json(name, entry)
                inner.append("\n        " + encode_basestring_ascii(k) + ": " + got)
            text = "{" + ",".join(inner) + "\n      }"
        if type(key) is not str:
            return _entry_text_by_json(name, entry)
        items.append("\n      " + encode_basestring_ascii(key) + ": " + text)
    if not items:
        return _entry_text_by_json(name, entry)
    return "    " + json.dumps(name) + ": {" + ",".join(items) + "\n    }"


def _entry_text_by_json(name: str, entry: dict) -> str:
    return "    " + json.dumps(name) + ": " + json.dumps(entry, indent=2, allow_nan=False).replace("\n", "\n    ")


def _scalar_json(value) -> str | None:
    """A scalar's JSON text as ``json`` writes it (its own type tests, in its order); None
    for anything else and for a float that is not finite (json's error, not ours)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return float.__repr__(value) if math.isfinite(value) else None
    return None


class StreamingOutput:
    """The ``RunSink`` that writes ``timeline.csv`` and ``summary.json`` into ``out_dir``."""

    def __init__(self, scenario: Scenario, out_dir: Path, *, timeline: bool = True,
                 scenario_name: str | None = None):
        self.scenario = scenario
        self.names = tuple(scenario.resources)
        self.m = scenario.m
        self.scenario_name = scenario_name
        self.out_dir = Path(out_dir)
        self.paths = {"summary": self.out_dir / "summary.json"}
        if timeline:
            self.paths["timeline"] = self.out_dir / "timeline.csv"
        # (the files are opened by the first ``record``: nothing is written before the run)
        self._opened = False
        self._timeline_file = None
        self._timeline = None
        self._spool = None
        self.rows_written = 0  # timeline rows produced (written or not)
        # per (kind, entity): [its last row, its integrals]; jobs only while in the system
        self._entities: dict[tuple[str, str], list] = {}
        # starvation: per job in the system
        self._demanding: dict[str, bool] = {}
        self._running: dict[str, int] = {}
        self._starving_since: dict[str, float] = {}
        self._longest: dict[str, float] = {}
        self._starved: tuple[float, int, str] | None = None  # (longest, -index, job): the max
        # per queue path: the first submit and the last stop of the jobs below it
        self._queue_paths = frozenset(scenario.queues.paths)
        self._above: dict[str, tuple[str, ...]] = {}
        self._first_submit: dict[str, float] = {}
        self._last_stop: dict[str, float] = {}
        self._completion = array("d")  # finish - submit of the finished jobs, arrival order
        self._work_lost: list[float] = []  # per job preempted, its work lost
        self._jobs = 0
        # the job entries: text spooled to a temporary file (``_spool``), found by arrival index
        self._offsets = array("q")
        self._lengths = array("q")
        self._end: float | None = None

    def _open(self) -> None:
        self._opened = True
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if "timeline" in self.paths:
            self._timeline_file = open(self.paths["timeline"], "w", encoding="utf-8", newline="",
                                       buffering=1 << 20)
            self._timeline = csv.writer(self._timeline_file, lineterminator="\n")
            self._timeline.writerow(TIMELINE_HEAD + self.names)
        self._spool = tempfile.TemporaryFile(mode="w+b", dir=self.out_dir, prefix=".summary-jobs-")

    # --- RunSink ---------------------------------------------------------------------------------
    def record(self, t: float, rows: list[Row], demand_changes: list[DemandChange],
               capacity: Vector | None) -> None:
        if not self._opened:
            self._open()
        touched: set[str] = set()
        demanding = self._demanding
        for _t, name, flag in demand_changes:
            demanding[name] = flag
            touched.add(name)
        entities = self._entities
        writer = self._timeline
        running = self._running
        m = self.m
        self.rows_written += len(rows)
        for row in rows:
            if writer is not None:
                writer.writerow([fmt_time(row[0]), row[1], row[2], row[3], fmt_amount(row[4]),
                                 *(fmt_amount(a) for a in row[5])])
            kind = row[1]
            if kind == PREEMPT:
                continue  # (an event, not a state that holds until the next row)
            key = (kind, row[2])
            got = entities.get(key)
            if got is None:
                entities[key] = [row, Integral(0.0, [0.0] * m, 0.0)]
            else:
                # (``_close(got, row[0])`` inlined: this runs for every row)
                last, acc = got
                dt = row[0] - last[0]
                if dt > 0:
                    acc.running += last[3] * dt
                    acc.dominant_share += last[4] * dt
                    alloc = last[5]
                    allocation = acc.allocation
                    for r in range(m):
                        allocation[r] += alloc[r] * dt
                got[0] = row
            if kind == "job":
                running[row[2]] = row[3]
                touched.add(row[2])
        # (sim.metrics.replay: a job starves while demanding and running nothing)
        for name in touched:
            starving = demanding.get(name, False) and self._running.get(name, 0) == 0
            since = self._starving_since.get(name)
            if starving and since is None:
                self._starving_since[name] = t
            elif not starving and since is not None:
                self._longest[name] = max(self._longest.get(name, 0.0), t - since)
                del self._starving_since[name]

    def end(self, end_time: float) -> None:
        self._end = end_time

    def job(self, index: int, job: Job, outcome: JobOutcome, tasks_preempted: int | None,
            work_lost: float | None) -> None:
        if not self._opened:
            self._open()
        name = job.name
        finish = outcome.finish
        got = self._entities.pop(("job", name), None)
        zero = Integral(0.0, [0.0] * self.m, 0.0)
        if got is not None:
            # a finished job's last row is its state at the finish, nothing running: closing
            # it there adds what closing it at the end would (zero)
            self._close(got, finish if finish is not None else self._stop())
        since = self._starving_since.pop(name, None)
        longest = self._longest.pop(name, 0.0)
        if since is not None:  # (still starving: only a job left unfinished at the end)
            longest = max(longest, self._stop() - since)
        self._demanding.pop(name, None)
        self._running.pop(name, None)
        end = self._end if self._end is not None else 0.0  # (read only for an unfinished job)
        entry = job_entry(job.queue, outcome, got[1] if got is not None else zero, self.names, end, longest,
                          tasks_preempted, work_lost, gang=job.gang)
        text = entry_text(name, entry).encode("utf-8")
        while len(self._offsets) <= index:
            self._offsets.append(-1)
            self._lengths.append(0)
        self._offsets[index] = self._spool.tell()
        self._lengths[index] = len(text)
        self._spool.write(text)
        self._jobs += 1
        if finish is not None:
            self._completion.append(finish - outcome.submit)
        if work_lost:
            self._work_lost.append(work_lost)
        best = self._starved
        if best is None or (longest, -index) > best[:2]:
            self._starved = (longest, -index, name)
        if outcome.submitted:
            stop = finish if finish is not None else self._stop()
            for path in self._queues_above(job.queue):
                first = self._first_submit.get(path)
                if first is None or outcome.submit < first:
                    self._first_submit[path] = outcome.submit
                last = self._last_stop.get(path)
                if last is None or stop > last:
                    self._last_stop[path] = stop

    def complete(self, result: SimResult) -> None:
        result.streamed = True  # (its rows, demand changes and jobs are in the files: ``finish``)

    # --- the end ---------------------------------------------------------------------------------
    def finish(self, result: SimResult) -> dict:
        """Close the timeline, write ``summary.json`` (every job's entry, in arrival order)
        and return the summary without its ``jobs`` (an empty mapping: they are in the file)."""
        if not self._opened:
            self._open()
        if self._timeline_file is not None:
            self._timeline_file.close()
            self._timeline_file = None
        end = result.end_time
        zero = Integral(0.0, [0.0] * self.m, 0.0)
        ints: dict[tuple[str, str], Integral] = {}
        for key, got in self._entities.items():
            if key[0] != "job":
                self._close(got, end)
                ints[key] = got[1]
        queues = {}
        for path in self.scenario.queues.paths:
            first = self._first_submit.get(path)
            span = self._last_stop[path] - first if first is not None else 0.0
            queues[path] = queue_entry(ints.get(("queue", path), zero), span, self.names,
                                       None if result.time_below_fair_share is None
                                       else result.time_below_fair_share.get(path, 0.0),
                                       decayed=decayed_at_end(result, path))
        best = self._starved
        starvation = {"max_s": best[0] if best is not None else 0.0,
                      "job": best[2] if best is not None and best[0] > 0 else None}
        summary = document(result, ints.get(("cluster", CLUSTER), zero), capacity_integral(result), {}, queues,
                           self._completion, self._jobs, starvation, None, self.scenario_name,
                           math.fsum(self._work_lost))
        head, placeholder, tail = summary_json(summary).partition(_JOBS_PLACEHOLDER)
        if not placeholder:
            raise AssertionError("summary.json: the jobs' place was not found")
        with open(self.paths["summary"], "wb") as out:
            out.write(head.encode("utf-8"))
            if self._jobs:
                out.write(b'\n  "jobs": {\n')
                spool = self._spool
                for k in range(len(self._offsets)):
                    if k:
                        out.write(b",\n")
                    spool.seek(self._offsets[k])
                    out.write(spool.read(self._lengths[k]))
                out.write(b"\n  },\n")
            else:
                out.write(placeholder.encode("utf-8"))
            out.write(tail.encode("utf-8"))
        self._spool.close()
        return summary

    # --- helpers ---------------------------------------------------------------------------------
    def _close(self, got: list, until: float) -> None:
        """Add the entity's last row, held until ``until``, to its integrals (the order
        of ``sim.metrics.integrals``: same floats)."""
        row, acc = got
        dt = until - row[0]
        if dt <= 0:
            return
        acc.running += row[3] * dt
        acc.dominant_share += row[4] * dt
        alloc = row[5]
        allocation = acc.allocation
        for r in range(self.m):
            allocation[r] += alloc[r] * dt

    def _stop(self) -> float:
        if self._end is None:
            raise AssertionError("an unfinished job's outcome came before the run's end")
        return self._end

    def _queues_above(self, queue: str) -> tuple[str, ...]:
        """The queue paths a job of ``queue`` counts in: its own and its ancestors' (the
        ones ``sim.metrics.summarize`` finds by prefix)."""
        got = self._above.get(queue)
        if got is None:
            parts = queue.split(".") if queue else []
            got = tuple(p for p in (".".join(parts[:k]) for k in range(1, len(parts) + 1)) if p in self._queue_paths)
            self._above[queue] = got
        return got
