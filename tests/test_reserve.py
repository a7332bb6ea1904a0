"""Gang reservations (``gangs: {reserve_after: S}``; engine/reserve.py; docs/policies.md,
"Reservations: no gang starves"): the loader's section, worked cases with their
arithmetic (wait, shadow time, reserved idle capacity, backfill), the engine without
durations (serve: holds, no backfill), and the bound as a property: a gang's wait is at
most ``reserve_after + D_max``."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairshare.engine import Engine, JobArrived, Scheduler, TaskFinished
from fairshare.model import ScenarioError, parse_scenario
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, Simulator
from fairshare.sim.metrics import summarize

TWO_NODES = [{"name": "n0", "capacity": {"cpu": 4}}, {"name": "n1", "capacity": {"cpu": 4}}]
QUEUES = [{"name": "train"}, {"name": "batch", "order": "fifo"}]


def small(name, count, duration, *, submit=0.0, cpu=1):
    return {"name": name, "queue": "batch", "submit": submit,
            "tasks": [{"demand": {"cpu": cpu}, "count": count, "duration": duration}]}


def gang(name, count, duration, *, submit=0.0):
    return {"name": name, "queue": "train", "submit": submit, "gang": True,
            "tasks": [{"demand": {"cpu": 1}, "count": count, "duration": duration}]}


def doc(jobs, reserve_after=None, nodes=TWO_NODES):
    out = {"cluster": {"nodes": nodes}, "queues": QUEUES, "jobs": jobs}
    if reserve_after is not None:
        out["gangs"] = {"reserve_after": reserve_after}
    return out


def run(document, *, backfill=True, policy="drf"):
    """The run's summary and its reserve (None when off); ``backfill=False`` runs the
    reservation as serve does (no durations known ahead)."""
    sim = Simulator(parse_scenario(document), make_policy(policy), SimOptions(seed=3))
    if not backfill and sim.scheduler.reserve is not None:
        sim.scheduler.reserve.next_duration = None
    return summarize(sim.run(), fairness_gap=False), sim.scheduler.reserve


# --- the loader ----------------------------------------------------------------------------------

@pytest.mark.parametrize("section, path", [
    (5, "gangs"),
    ({"reserve_after": -1}, "gangs.reserve_after"),
    ({"reserve_after": "soon"}, "gangs.reserve_after"),
    ({"reserve_afer": 5}, "gangs.reserve_afer"),
])
def test_bad_gangs_section_names_its_path(section, path):
    document = doc([gang("g", 2, 10)])
    document["gangs"] = section
    with pytest.raises(ScenarioError) as got:
        parse_scenario(document)
    assert path in [e.path for e in got.value.errors]


def test_gangs_section_read():
    assert parse_scenario(doc([gang("g", 2, 10)], reserve_after=30)).gangs.reserve_after == 30
    assert parse_scenario(doc([gang("g", 2, 10)])).gangs is None
    # (the section without the key: no reservations, as without the section)
    document = doc([gang("g", 2, 10)])
    document["gangs"] = {}
    assert parse_scenario(document).gangs.reserve_after is None


# --- worked cases ------------------------------------------------------------------------------------

# 2 nodes x 4 CPUs. b1 (FIFO queue batch) runs 8 one-CPU tasks from 0, ending at
# 10, 20, ..., 80; b2 (at 0.5) has 20 tasks of 100 s waiting behind it; the 8-task gang g arrives
# at 1 in queue train (share 0: the policy asks it first, it never fits until 8 CPUs are free).
STREAM = [small("b1", 8, [10, 20, 30, 40, 50, 60, 70, 80]), small("b2", 20, 100, submit=0.5), gang("g", 8, 50, submit=1)]

CASES = [
    # (what, jobs, reserve_after, backfill, gang start, reserved_idle cpu-seconds)
    # without: b2 takes each CPU as b1 frees it, at 10..80, then every 100 s; 20 = 2 x 8 + 4
    # tasks: the CPUs freed at 10..40 run 3 of b2's (the last ends 40 + 300 = 340), those
    # at 50..80 run 2 (80 + 200 = 280): g starts at 340
    ("no reservation", STREAM, None, True, 340.0, None),
    # reserve_after 5: overdue at 6; the next round is at 10 (b1's first end): reserved,
    # the plan waits for b1's ends, shadow T* = 80 (all 8 CPUs); held: 1 CPU over
    # [10, 20), 2 over [20, 30), ..., 7 over [70, 80): 10 x (1 + ... + 7) = 280; b2's
    # tasks (100 s) cannot backfill: 10 + 100 > 80
    ("reserved", STREAM, 5, True, 80.0, 280.0),
    ("reserved, no backfill", STREAM, 5, False, 80.0, 280.0),
    # b3 (15 s, after b2 in the FIFO queue) backfills the CPU held at 10: it ends at 25 <= 80;
    # held: 0 over [10, 20), 1 over [20, 25), 2 over [25, 30), then 3..7: 5 + 10 + 10 x (3 + ... + 7)
    # = 5 + 10 + 250 = 265 (280 less b3's 15 CPU-seconds); g still starts at T* = 80
    ("backfill", STREAM + [small("b3", 1, 15, submit=2)], 5, True, 80.0, 265.0),
    # without backfill, b3 waits behind the reservation: the cost stays 280
    ("backfill off", STREAM + [small("b3", 1, 15, submit=2)], 5, False, 80.0, 280.0),
    # reserve_after 45: overdue at 46, reserved at the round at 50, when b2 already runs 4
    # tasks (started 10..40, ending 110..140): the plan waits for b1's ends at 60, 70, 80
    # and b2's at 110..140: T* = 140. Held: 1 over [50, 60), 2, 3 to 80, 4 over [80, 110),
    # then 5, 6, 7: 10 + 20 + 30 + 120 + 50 + 60 + 70 = 360. Wait 139 <= 45 + 100 (the bound)
    ("later reservation", STREAM, 45, True, 140.0, 360.0),
]


@pytest.mark.parametrize("what, jobs, reserve_after, backfill, start, idle", CASES, ids=[c[0] for c in CASES])
def test_worked_cases(what, jobs, reserve_after, backfill, start, idle):
    summary, reserve = run(doc(jobs, reserve_after), backfill=backfill)
    assert summary["jobs"]["g"]["gang_wait"] == pytest.approx(start - 1.0)
    if idle is None:
        assert "reserved_idle" not in summary and reserve is None
    else:
        assert summary["reserved_idle"] == {"cpu": pytest.approx(idle)}
        # (the simulator knows every end: the gang starts at the shadow time)
        assert [(name, shadow) for name, _at, shadow in reserve.history] == [("g", start)]


def test_reservation_made_at_the_round_it_is_overdue():
    # reserve_after 5: overdue at 6, no round until b1's first end at 10
    _summary, reserve = run(doc(STREAM, 5))
    assert [at for _g, at, _s in reserve.history] == [10.0]


def test_one_reservation_at_a_time_in_the_policys_order():
    # fifo: g1 (submitted at 1) before g2 (at 2). Both overdue at the round at 10; g1 is
    # reserved (T* = 80, b1's last end), starts at 80 and runs 50 s; at that same round g2
    # is reserved: its plan waits for g1's 8 tasks, T* = 80 + 50 = 130
    jobs = STREAM[:2] + [gang("g1", 8, 50, submit=1), gang("g2", 8, 50, submit=2)]
    summary, reserve = run(doc(jobs, 5), policy="fifo")
    assert [(name, at, shadow) for name, at, shadow in reserve.history] == [("g1", 10.0, 80.0), ("g2", 80.0, 130.0)]
    assert summary["jobs"]["g1"]["gang_wait"] == pytest.approx(80.0 - 1)
    # a gang one reservation precedes: wait <= reserve_after + 2 x D_max (docs): 128 <= 5 + 200
    assert summary["jobs"]["g2"]["gang_wait"] == pytest.approx(130.0 - 2)


class Recorder:
    """An executor that runs nothing (serve's view: no durations)."""

    def __init__(self, nodes):
        self._nodes = tuple(nodes)

    def nodes(self):
        return self._nodes

    def start(self, launch, now):
        pass

    def kill(self, task_id):
        pass

    def poll(self):
        return []


def test_engine_without_durations_holds_and_never_backfills():
    sc = parse_scenario(doc([small("b1", 8, 10), gang("g", 8, 10, submit=1), small("b2", 1, 1, submit=11)]))
    jobs = {job.name: job for job in sc.jobs}
    sch = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("drf"))
    reserve = sch.reserve_gangs(5)
    engine = Engine(sch, Recorder(sc.cluster.nodes))
    b1 = engine.step(0.0, [JobArrived(jobs["b1"])]).launches
    assert len(b1) == 8
    engine.step(1.0, [JobArrived(jobs["g"])])
    # at 10 one task of b1 ends: g is overdue (1 + 5 <= 10) and reserved; the CPU is held
    assert engine.step(10.0, [TaskFinished(b1[0].task_id)]).launches == []
    assert reserve.gang == "g" and reserve.shadow is None  # (no end known: no shadow time)
    # b2 arrives: the one free CPU is held, and nothing backfills without durations
    assert engine.step(11.0, [JobArrived(jobs["b2"])]).launches == []
    assert reserve.reserved_idle(11.0) == (1.0,)  # 1 CPU x (11 - 10)
    # the other 7 end at 20: g starts whole, before b2
    got = engine.step(20.0, [TaskFinished(t.task_id) for t in b1[1:]]).launches
    assert [launch.job for launch in got] == ["g"] * 8
    assert reserve.gang is None and reserve.reserved_idle(20.0) == (10.0,)  # 1 CPU x (20 - 10)


def test_without_gangs_section_the_scheduler_has_no_reserve():
    sim = Simulator(parse_scenario(doc(STREAM)), make_policy("drf"), SimOptions())
    assert sim.scheduler.reserve is None


# --- the bound, as a property ------------------------------------------------------------------------

@st.composite
def workloads(draw):
    nodes = [{"name": f"n{i}", "capacity": {"cpu": draw(st.integers(2, 6))}}
             for i in range(draw(st.integers(1, 3)))]
    smallest = min(n["capacity"]["cpu"] for n in nodes)
    total = sum(n["capacity"]["cpu"] for n in nodes)
    jobs = []
    for i in range(draw(st.integers(1, 8))):
        jobs.append(small(f"s{i}", draw(st.integers(1, 6)), draw(st.integers(1, 60)),
                          submit=draw(st.integers(0, 200)), cpu=draw(st.integers(1, smallest))))
    jobs.append(gang("g", draw(st.integers(1, total)), draw(st.integers(1, 60)), submit=draw(st.integers(0, 100))))
    return nodes, jobs, draw(st.integers(0, 100)), draw(st.sampled_from(["drf", "hdrf", "fifo"])), draw(st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_head_gang_wait_is_bounded(workload):
    """docs/policies.md, "The bound": one gang, so it is the head whenever it is overdue:
    its wait is at most reserve_after + D_max (D_max: the longest task of the workload)."""
    nodes, jobs, reserve_after, policy, backfill = workload
    summary, _reserve = run(doc(jobs, reserve_after, nodes), backfill=backfill, policy=policy)
    longest = max(j["tasks"][0]["duration"] for j in jobs)
    assert summary["jobs"]["g"]["gang_wait"] <= reserve_after + longest + 1e-9
    assert all(v >= 0 for v in summary["reserved_idle"].values())


# --- the reports -----------------------------------------------------------------------------------

def test_simulate_reports_reserved_idle(tmp_path, capsys):
    import json

    from fairshare.cli import main

    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(doc(STREAM, 5)))
    out = tmp_path / "out"
    assert main(["simulate", str(path), "--policy", "drf", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    # (the "reserved" case above: 280 CPU-seconds held)
    assert summary["reserved_idle"] == {"cpu": pytest.approx(280.0)}
    assert "reserved idle cpu 280 resource-s" in capsys.readouterr().out
    assert "reserved idle cpu" in (out / "report.html").read_text()
