"""A run's sink in a second process: ``OffloadedSink`` (the simulation's other core).

A streaming replay is one Python thread: the engine's decisions, the simulator's instant
and the sink's work (``sim.stream.StreamingOutput``: the integrals per timeline row, the
timeline's CSV, each job's ``summary.json`` entry) one after the other. On a machine with
a second core the sink's share can run beside the rest: ``OffloadedSink`` builds the sink
in a child process (``make_sink()``, called there) and hands it every ``RunSink`` call,
in batches of ``batch`` calls pickled through a pipe. The child makes the same calls, in
the same order, on the same values (pickled and unpickled: equal floats, strings and
tuples), so the files are the in-process sink's byte for byte
(``tests/test_sim_offload.py``); the simulation itself never waits for the child except
when the pipe is full and at the end.

What crosses the pipe: an instant's rows, demand changes and capacity as the simulator
gives them, or with ``records=True`` what moved (``engine.snapshot.Moved``: the
changed jobs' running counts and usage, the moved queues' sums) from which a
``TimelineRecorder`` in the child makes the rows the simulator's own would
(``changes_of`` and the recorder are functions of what they are given, and the child
gets every ``Moved`` and every forgotten job in the simulator's order), so the
simulation's process neither works out the shares nor compares states; for a job's
outcome, its ``JobFacts`` (name, queue, gang: what ``StreamingOutput.job`` reads)
instead of the whole ``Job`` (a trace's job carries its duration lists). A batch of
calls holding only plain values (str, int, float, bool, None, tuples, lists) crosses
marshalled, about a quarter of pickle's cost and the same values back (floats to the
bit); any other batch is pickled. The run's ``SimResult`` at ``complete`` (the fields the child's sink set
come back and are set on the caller's result) and the result of ``finish``, with the
child sink's public numbers (``rows_written``) readable on the wrapper afterwards.
A failure in the child is raised in the caller at the next point that waits for it
(``complete``, ``finish``) as a ``SimulationError`` carrying the child's traceback.

Use it as a context manager (or call ``close``): a run stopped early (an exception, a
timeout) leaves a child to end.
"""

from __future__ import annotations

import gc
import marshal
import multiprocessing
import pickle
import traceback
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, NamedTuple

from fairshare.engine.snapshot import Moved, changes_of
from fairshare.model.jobs import Job
from fairshare.model.resources import Vector
from fairshare.sim.recorder import TimelineRecorder
from fairshare.sim.result import DemandChange, JobOutcome, Row, SimResult, SimulationError
from fairshare.sim.sink import RunSink

#: calls sent per message: large enough that pickling and the pipe cost little per call,
#: small enough that the child starts early and the buffer stays small
BATCH_CALLS = 2048

# the calls, as the first item of each buffered tuple
_RECORD, _END, _JOB, _MOVED, _FORGET = 0, 1, 2, 3, 4
#: a job's outcome crosses as the tuple of these fields (``JobOutcome(*values)`` there)
_OUTCOME = tuple(field.name for field in fields(JobOutcome))
#: the first byte of a marshalled batch of calls (a pickle starts with its PROTO, 0x80)
_MARSHALLED = b"M"


class JobFacts(NamedTuple):
    """The part of a ``Job`` a streaming sink reads about a job that left."""

    name: str
    queue: str
    gang: bool


def _start_method() -> str:
    # fork: the child starts at once with the caller's modules (no re-import, nothing to
    # pickle in ``make_sink``); spawn where fork does not exist
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


class OffloadedSink:
    """A ``RunSink`` that runs ``make_sink()``'s sink in a child process (module docstring)."""

    def __init__(self, make_sink: Callable[[], RunSink], *, batch: int = BATCH_CALLS, records: bool = False):
        """``records``: the child makes the timeline rows too (``records_changes``)."""
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        #: the simulator hands this sink each instant's ``Moved`` (``record_moved``) and the
        #: jobs it forgets (``forget_job``), not rows: the child's ``TimelineRecorder``
        #: makes the rows of them, as the simulator's would (``sim.recorder``)
        self.records_changes = records
        context = multiprocessing.get_context(_start_method())
        self._conn, child_end = context.Pipe()
        self._child = context.Process(target=_serve, args=(make_sink, child_end), daemon=True,
                                      name="fairshare-sink")
        self._child.start()
        child_end.close()
        self._batch = batch
        self._calls: list[tuple] = []
        self._numbers: dict[str, Any] = {}  # the child sink's public numbers, after ``finish``
        self._closed = False

    # --- RunSink ---------------------------------------------------------------------------------
    def record(self, t: float, rows: list[Row], demand_changes: list[DemandChange],
               capacity: Vector | None) -> None:
        calls = self._calls
        calls.append((_RECORD, t, rows, demand_changes, capacity))
        if len(calls) >= self._batch:
            self._flush()

    def record_moved(self, t: float, moved: Moved, extra: Sequence[Row], capacity: Vector | None) -> None:
        """``record`` of the rows the child's recorder makes of ``moved`` (with ``extra``
        rows among them: ``TimelineRecorder.record``); only with ``records``."""
        calls = self._calls
        calls.append((_MOVED, t, moved.capacity, moved.capacity_changed, moved.jobs, moved.queues, extra, capacity))
        if len(calls) >= self._batch:
            self._flush()

    def forget_job(self, name: str) -> None:
        """The child's recorder forgets a job (``TimelineRecorder.forget``), in call order."""
        self._calls.append((_FORGET, name))

    def end(self, end_time: float) -> None:
        self._calls.append((_END, end_time))

    def job(self, index: int, job: Job, outcome: JobOutcome, tasks_preempted: int | None,
            work_lost: float | None) -> None:
        calls = self._calls
        calls.append((_JOB, index, (job.name, job.queue, job.gang), tuple([getattr(outcome, name) for name in _OUTCOME]),
                      tasks_preempted, work_lost))
        if len(calls) >= self._batch:
            self._flush()

    def complete(self, result: SimResult) -> None:
        """The child's sink completes a copy of ``result``; what it set is set here too."""
        for name, value in self._ask("complete", result).items():
            setattr(result, name, value)

    # --- the end ---------------------------------------------------------------------------------
    def finish(self, result: SimResult) -> Any:
        """The child sink's ``finish`` (``StreamingOutput.finish``: write ``summary.json``) on
        the result it completed; its return value. The child then ends."""
        value, self._numbers = self._ask("finish", None)
        self.close()
        return value

    def __getattr__(self, name: str) -> Any:
        # (only for names not found on the wrapper: the child sink's numbers after finish)
        numbers = self.__dict__.get("_numbers", {})
        if name in numbers:
            return numbers[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (the child sink's public "
                             f"numbers are readable after finish)")

    def close(self) -> None:
        """End the child (at once if the run did not finish); idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._conn.send(("close", None))
        except OSError:
            pass  # (the child is gone already)
        self._child.join(timeout=5)
        if self._child.is_alive():
            self._child.terminate()
            self._child.join()
        self._conn.close()

    def __enter__(self) -> OffloadedSink:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --- the pipe --------------------------------------------------------------------------------
    def _flush(self) -> None:
        try:
            self._send_calls()
        except OSError as exc:  # the child died: its own error says why, if it could send it
            raise SimulationError(f"the offloaded sink's process ended: {self._child_error() or exc}") from None
        self._calls = []

    def _ask(self, what: str, payload: Any) -> Any:
        if self._closed:
            raise SimulationError(f"the offloaded sink is closed: cannot {what}")
        try:
            if self._calls:
                self._send_calls()
                self._calls = []
            self._conn.send((what, payload))
        except OSError:
            pass  # (the child ended: its error, if it sent one, is the answer below)
        try:
            status, value = self._conn.recv()
        except (EOFError, OSError):
            self.close()
            raise SimulationError("the offloaded sink's process ended without an answer") from None
        if status == "error":
            self.close()
            raise SimulationError(f"the offloaded sink failed in its process:\n{value}")
        return value

    def _send_calls(self) -> None:
        """The buffered calls: marshalled when every value in them is a plain ``str``,
        ``int``, ``float``, ``bool``, ``None``, tuple or list (marshal refuses subclasses:
        a NumPy float, a named tuple), about a quarter of pickle's cost; else pickled."""
        try:
            data = marshal.dumps(self._calls)
        except ValueError:
            self._conn.send(("calls", self._calls))
        else:
            self._conn.send_bytes(_MARSHALLED + data)

    def _child_error(self) -> str | None:
        try:
            if self._conn.poll(1):
                status, value = self._conn.recv()
                if status == "error":
                    return value
        except (EOFError, OSError):
            pass
        return None


def _serve(make_sink: Callable[[], RunSink], conn) -> None:
    """The child: build the sink, make every call it is sent, answer ``complete`` and ``finish``."""
    from fairshare.sim.simulator import SIM_GC_THRESHOLDS

    gc.set_threshold(*SIM_GC_THRESHOLDS)  # (the simulator's reasons hold here: many tuples, no cycles)
    try:
        sink = make_sink()
        recorder = TimelineRecorder()  # (``records``: the rows of each ``Moved``, made here)
        result: SimResult | None = None
        while True:
            data = conn.recv_bytes()
            if data[:1] == _MARSHALLED:
                what, payload = "calls", marshal.loads(memoryview(data)[1:])
            else:  # (``Connection.send``'s pickle)
                what, payload = pickle.loads(data)
            if what == "calls":
                record, end, job, rows_of = sink.record, sink.end, sink.job, recorder.record
                for call in payload:
                    kind = call[0]
                    if kind == _MOVED:
                        t = call[1]
                        moved = Moved(call[2], call[3], call[4], call[5])
                        rows, demand_changes, _ = rows_of(t, changes_of(moved), call[6])
                        record(t, rows, demand_changes, call[7])
                    elif kind == _RECORD:
                        record(call[1], call[2], call[3], call[4])
                    elif kind == _JOB:
                        job(call[1], JobFacts(*call[2]), JobOutcome(*call[3]), call[4], call[5])
                    elif kind == _FORGET:
                        recorder.forget(call[1])
                    else:
                        end(call[1])
            elif what == "complete":
                result = payload
                before = dict(vars(result))
                sink.complete(result)
                conn.send(("ok", {name: value for name, value in vars(result).items()
                                  if name not in before or value is not before[name]}))
            elif what == "finish":
                if result is None:
                    raise SimulationError("finish before complete: the run has not ended")
                value = sink.finish(result)
                numbers = {name: number for name, number in vars(sink).items()
                           if not name.startswith("_") and type(number) in (int, float, str, bool)}
                conn.send(("ok", (value, numbers)))
            else:  # close
                return
    except EOFError:
        return  # (the caller went away)
    except BaseException:
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass
