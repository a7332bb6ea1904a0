"""The sink in a second process (``sim.offload.OffloadedSink``).

The oracle is the same sink in the simulation's own process: the offloaded one must
write the same files byte for byte and complete the run's result the same way, whatever
the batch size (1: every call its own message; 3: batches that end mid-instant and
mid-departure; the default).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from functools import partial

import pytest

from fairshare.model.scenario import ClusterEvent, PreemptionConfig
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, SimulationError, Simulator
from fairshare.sim import offload
from fairshare.sim.offload import JobFacts, OffloadedSink
from fairshare.sim.sink import ResultCollector
from fairshare.sim.stream import StreamingOutput
from test_sim_stream import random_scenario


def streamed_files(tmp_path, scenario, policy: str, options: SimOptions, *, offload: int | None,
                   records: bool = False):
    """The streaming run's files (``offload``: the batch size of an ``OffloadedSink``, None
    for the sink in this process; ``records``: its child makes the timeline rows too) and
    its result."""
    empty = replace(scenario, jobs=())
    out = tmp_path / ("in-process" if offload is None else f"offload-{offload}-{records}")
    make = partial(StreamingOutput, empty, out, scenario_name="s")
    sink = make() if offload is None else OffloadedSink(make, batch=offload, records=records)
    with (sink if offload is not None else nullcontext()):
        result = Simulator(empty, make_policy(policy), options, arrivals=iter(scenario.jobs), sink=sink).run()
        sink.finish(result)
    files = {name: (out / name).read_bytes() for name in ("summary.json", "timeline.csv")}
    return files, result, sink


@pytest.mark.parametrize("policy", ["drf", "hdrf"])
@pytest.mark.parametrize("batch", [1, 3, 2048])
@pytest.mark.parametrize("records", [False, True])
def test_offloaded_sink_writes_the_same_files(tmp_path, policy, batch, records):
    sc = random_scenario(batch % 5)
    options = SimOptions(seed=4, until=60)
    here, result_here, sink_here = streamed_files(tmp_path, sc, policy, options, offload=None)
    there, result_there, sink_there = streamed_files(tmp_path, sc, policy, options, offload=batch,
                                                     records=records)
    assert here == there
    assert result_there.streamed and result_here.streamed  # (``complete``'s field came back)
    assert sink_there.rows_written == sink_here.rows_written > 0  # (the child sink's numbers, after finish)
    assert (result_there.tasks_completed, result_there.end_time) == (result_here.tasks_completed,
                                                                     result_here.end_time)


def test_offloaded_collector_completes_the_result(tmp_path):
    # ``complete`` in the child: what the collector puts into the result (rows, outcomes)
    # is set on the caller's result
    sc = random_scenario(2)
    empty = replace(sc, jobs=())
    options = SimOptions(seed=1, until=60)
    here = Simulator(empty, make_policy("drf"), options, arrivals=iter(sc.jobs), sink=ResultCollector()).run()
    with OffloadedSink(ResultCollector, batch=5) as sink:
        there = Simulator(empty, make_policy("drf"), options, arrivals=iter(sc.jobs), sink=sink).run()
    assert there.rows == here.rows and len(here.rows) > 10
    assert there.demand_changes == here.demand_changes
    assert list(there.jobs) == list(here.jobs) and there.jobs == here.jobs


class _FailingSink(ResultCollector):
    def job(self, index, job, outcome, tasks_preempted, work_lost):
        assert isinstance(job, JobFacts)  # (what crosses the pipe for a job)
        raise RuntimeError(f"no room for {job.name}")


def test_a_failure_in_the_child_is_raised_with_its_traceback():
    sc = random_scenario(0)
    empty = replace(sc, jobs=())
    with OffloadedSink(_FailingSink, batch=2) as sink:
        with pytest.raises(SimulationError, match=r"(?s)offloaded sink.*RuntimeError: no room for j"):
            Simulator(empty, make_policy("drf"), SimOptions(seed=0, until=60), arrivals=iter(sc.jobs),
                      sink=sink).run()


def test_bad_batch_and_use_after_close(tmp_path):
    with pytest.raises(ValueError, match="batch must be at least 1, got 0"):
        OffloadedSink(ResultCollector, batch=0)
    sink = OffloadedSink(ResultCollector)
    sink.close()
    sink.close()  # (idempotent)
    with pytest.raises(SimulationError, match="closed: cannot finish"):
        sink.finish(None)
    with pytest.raises(AttributeError, match="rows_written"):
        sink.rows_written


def test_a_recording_child_sees_a_node_lost_and_a_preemption_as_the_simulator_would(tmp_path):
    # ``records``: the rows made in the child from each ``Moved`` (capacity changes report
    # every job again, finished ones too; preemption rows ride along): the same files,
    # the same capacity changes in the result
    sc = random_scenario(3)
    sc = replace(sc, events=(ClusterEvent(time_s=7.0, kind="node_fail", node_name=sc.cluster.nodes[0].name),),
                 preemption=PreemptionConfig(after=1.0, tolerance=0.0))
    options = SimOptions(seed=2, until=60)
    here, result_here, _ = streamed_files(tmp_path, sc, "drf", options, offload=None)
    there, result_there, _ = streamed_files(tmp_path, sc, "drf", options, offload=2, records=True)
    assert here == there
    assert result_there.capacity_changes == result_here.capacity_changes and len(result_here.capacity_changes) == 2
    assert b",preempt," in here["timeline.csv"]


def test_plain_calls_cross_marshalled_and_others_pickled(tmp_path, monkeypatch):
    # the batches of a run cross marshalled (no pickled "calls" message); a value marshal
    # refuses (here: every batch, as if a NumPy float rode along) crosses pickled instead:
    # the same files either way
    sc = random_scenario(1)
    options = SimOptions(seed=3, until=60)
    here, _, _ = streamed_files(tmp_path, sc, "hdrf", options, offload=None)
    pickled_batches = []
    real_init = OffloadedSink.__init__

    def watched_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        send = self._conn.send

        def send_watched(message):
            if message[0] == "calls":
                pickled_batches.append(len(message[1]))
            send(message)

        self._conn.send = send_watched

    monkeypatch.setattr(OffloadedSink, "__init__", watched_init)
    there, _, _ = streamed_files(tmp_path, sc, "hdrf", options, offload=4, records=True)
    assert there == here and pickled_batches == []

    def refuse(value):
        raise ValueError("unmarshallable object")

    monkeypatch.setattr(offload.marshal, "dumps", refuse)
    (tmp_path / "offload-4-True").rename(tmp_path / "marshalled")
    there, _, _ = streamed_files(tmp_path, sc, "hdrf", options, offload=4, records=True)
    assert there == here and len(pickled_batches) > 5
