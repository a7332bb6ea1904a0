"""Static allocation with past usage (the ``usage:`` section, ``allocate --usage``).

Each job (and queue) enters the progressive filling with its average past allocation
``p`` counted in its level: DRF's level is ``max_r (x d_r + p_r) / C_r`` (docs/policies.md,
"Fairness with memory"), so the expected numbers below are worked by hand, breakpoint by
breakpoint, as the exact filling computes them.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import scenarios

from fairshare.api import allocate
from fairshare.cli import main
from fairshare.model.errors import ScenarioError
from fairshare.model.loader import parse_scenario
from fairshare.model.loader import with_usage_file
from fairshare.model.usage import PastUsage, decayed_time
from fairshare.policies import REGISTRY, PolicyModeError, make_policy
from fairshare.policies.machinery.decay import DecayLedger
from fairshare.policies.machinery.filling import fill
from fairshare.policies.machinery.reference_fill import reference_fill

#: DRF Sec. 4.1's cluster and jobs: <9 CPU, 18 GB>, A <1 CPU, 4 GB>, B <3 CPU, 1 GB>;
#: without history both reach 2/3 (A 3 tasks, B 2)
DRF_41 = {"cluster": {"capacity": {"cpu": 9, "mem": 18}},
          "jobs": [{"name": "A", "tasks": [{"demand": {"cpu": 1, "mem": 4}}]},
                   {"name": "B", "tasks": [{"demand": {"cpu": 3, "mem": 1}}]}]}

#: two queues of one job each, both jobs <1 CPU, 1 GB>, on <12 CPU, 24 GB>
TWO_QUEUES = {"cluster": {"capacity": {"cpu": 12, "mem": 24}},
              "queues": [{"name": "ads"}, {"name": "dev"}],
              "jobs": [{"name": "A", "queue": "ads", "tasks": [{"demand": {"cpu": 1, "mem": 1}}]},
                       {"name": "B", "queue": "dev", "tasks": [{"demand": {"cpu": 1, "mem": 1}}]}]}


def with_usage(doc: dict, usage: dict | None) -> dict:
    return {**doc, "usage": usage} if usage is not None else dict(doc)


def tasks(doc: dict, policy: str, *, discrete: bool = False) -> dict[str, float]:
    alloc = allocate(parse_scenario(doc, "<test>"), policy, discrete=discrete)
    return {name: ja.tasks for name, ja in alloc.jobs.items()}


CASES = [
    # (name, doc, policy, usage, expected tasks)
    ("A's 3 CPU of history is caught up exactly at the old answer", DRF_41, "drf",
     # A's level max((x + 3)/9, 4x/18): CPU while x < 3. B alone to y/3 = 3/9 (y = 1),
     # then both: x + 3 = 3y and x + 3y = 9 (CPU full) -> x = 3, y = 2, where A's CPU
     # and memory terms meet (6/9 = 12/18): the history is spent, the answer is DRF's.
     {"average": True, "jobs": {"A": {"cpu": 3}}}, {"A": 3.0, "B": 2.0}),
    ("A's 6 CPU of history costs it tasks", DRF_41, "drf",
     # B alone to y/3 = 6/9 (y = 2, 6 CPU), then (x + 6)/9 = y/3 and x + 3y = 9:
     # x + 6 = 3y = 9 - x -> x = 1.5, y = 2.5; both at 7.5/9 (A's CPU term still dominant).
     {"average": True, "jobs": {"A": {"cpu": 6}}}, {"A": 1.5, "B": 2.5}),
    ("history on memory", DRF_41, "drf",
     # A's level max(x/9, (4x + 6)/18): memory always. B to y/3 = 6/18 (y = 1), then
     # (4x + 6)/18 = y/3 -> 4x + 6 = 6y, with x + 3y = 9: x + 2x + 3 = 9 -> x = 2, y = 7/3.
     {"average": True, "jobs": {"A": {"mem": 6}}}, {"A": 2.0, "B": 7.0 / 3.0}),
    ("a leaf's dominant resource switches", {**DRF_41, "jobs": [
        {"name": "A", "tasks": [{"demand": {"cpu": 1, "mem": 0.5}}]},
        {"name": "B", "tasks": [{"demand": {"cpu": 1}}]}],
        "cluster": {"capacity": {"cpu": 12, "mem": 24}}}, "drf",
     # A's level max(x/12, (x/2 + 3)/24): memory while x < 2. B to y/12 = 3/24 (y = 1.5);
     # together at level L: A x = 48L - 6 (memory), B y = 12L, until x = 2 at L = 1/6
     # (y = 2, 4 CPU used); then A's CPU term leads: x = y = 12L, CPU full at L = 1/2:
     # x = y = 6. (Without the switch, A would keep its memory rate: x = 8.4, y = 3.6.)
     {"average": True, "jobs": {"A": {"mem": 3}}}, {"A": 6.0, "B": 6.0}),
    ("history on a resource the job does not demand absorbs", {**DRF_41, "jobs": [
        {"name": "A", "tasks": [{"demand": {"cpu": 1}}]},
        {"name": "B", "tasks": [{"demand": {"cpu": 1, "mem": 1}}]}],
        "cluster": {"capacity": {"cpu": 10, "mem": 10}}}, "drf",
     # A's level max(x/10, 7/10) stays 0.7 until x = 7. B to y/10 = 0.7 (y = 7); then A,
     # level constant, is the lowest at every epsilon step: it takes the 3 CPU left.
     {"average": True, "jobs": {"A": {"mem": 7}}}, {"A": 3.0, "B": 7.0}),
    ("hdrf: a queue's history", TWO_QUEUES, "hdrf",
     # ads at (x + 4)/12 (CPU), dev at y/12: dev alone to 4, then x + 4 = y, x + y = 12:
     # x = 4, y = 8.
     {"average": True, "queues": {"ads": {"cpu": 4}}}, {"A": 4.0, "B": 8.0}),
    ("hdrf: a queue's history on memory, its share switching never reached", {**TWO_QUEUES, "jobs": [
        {"name": "A", "queue": "ads", "tasks": [{"demand": {"cpu": 1, "mem": 0.5}}]},
        {"name": "B", "queue": "dev", "tasks": [{"demand": {"cpu": 1, "mem": 1}}]}]}, "hdrf",
     # ads at max(x/12, (x/2 + 12)/24): memory while x < 8. dev (y/12) alone to 1/2
     # (y = 6), then (x/2 + 12)/24 = y/12 -> x/2 + 12 = 2y, x + y = 12: 2.5x = 12 ->
     # x = 4.8, y = 7.2, both at 0.6.
     {"average": True, "queues": {"ads": {"mem": 12}}}, {"A": 4.8, "B": 7.2}),
    ("hdrf: a queue's history counts its job's", TWO_QUEUES, "hdrf",
     # ads has no entry: its history is its job A's, 4 CPU: as the queue case above.
     {"average": True, "jobs": {"A": {"cpu": 4}}}, {"A": 4.0, "B": 8.0}),
    ("hdrf-naive and capacity read queue history too", TWO_QUEUES, "hdrf-naive",
     {"average": True, "queues": {"ads": {"cpu": 4}}}, {"A": 4.0, "B": 8.0}),
    ("capacity", TWO_QUEUES, "capacity",
     {"average": True, "queues": {"ads": {"cpu": 4}}}, {"A": 4.0, "B": 8.0}),
    ("collapsed: flat over jobs, a job's history", TWO_QUEUES, "collapsed",
     # collapsed weights 1/2 each: levels (x + 4)/6 and y/6: as hdrf's, x = 4, y = 8
     {"average": True, "jobs": {"A": {"cpu": 4}}}, {"A": 4.0, "B": 8.0}),
    ("cpu: only the CPU history counts", DRF_41, "cpu",
     # levels (x + 3)/9 and 3y/9; B alone to 1 task, then x + 3 = 3y, x + 3y = 9 -> x = 3,
     # y = 2 (memory 12 + 2 fits); A's memory history is not looked at by cpu
     {"average": True, "jobs": {"A": {"cpu": 3, "mem": 18}}}, {"A": 3.0, "B": 2.0}),
    ("asset: the sum of shares", DRF_41, "asset",
     # levels sum_r (x d_r + p_r)/C_r: A x/9 + 4x/18 + 3/9 = (x + 1)/3, B 3y/9 + y/18 = 7y/18.
     # B alone to 7y/18 = 1/3 (y = 6/7), then (x + 1)/3 = 7y/18 -> 7y = 6x + 6; CPU fills
     # first: x + 3y = 9 -> 7x + 18x + 18 = 63 -> x = 1.8, y = 2.4 (memory 7.2 + 2.4).
     {"average": True, "jobs": {"A": {"cpu": 3}}}, {"A": 1.8, "B": 2.4}),
]


@pytest.mark.parametrize("name,doc,policy,usage,expected", CASES, ids=[c[0] for c in CASES])
def test_entitlement_with_history_by_hand(name, doc, policy, usage, expected):
    got = tasks(with_usage(doc, usage), policy)
    assert got == pytest.approx(expected, rel=1e-9)


def test_the_history_moves_the_answer_and_is_reported():
    """JSON: the contract's keys as they were, plus ``usage`` and per job and queue
    ``past_usage`` (a queue's is its subtree's: ads has A's 4 CPU)."""
    plain = allocate(parse_scenario(TWO_QUEUES, "<t>"), "hdrf").to_json()
    remembered = allocate(parse_scenario(with_usage(TWO_QUEUES, {"average": True, "jobs": {"A": {"cpu": 4}}}),
                                         "<t>"), "hdrf").to_json()
    assert plain["jobs"]["A"]["tasks"] == pytest.approx(6.0) and remembered["jobs"]["A"]["tasks"] == pytest.approx(4)
    assert set(remembered) == set(plain) | {"usage"}
    assert remembered["usage"] == {"given_as": "average", "source": "usage"}
    assert remembered["jobs"]["A"]["past_usage"] == {"cpu": 4.0, "mem": 0.0}
    assert remembered["jobs"]["B"]["past_usage"] == {"cpu": 0.0, "mem": 0.0}
    assert remembered["queues"]["ads"]["past_usage"] == {"cpu": 4.0, "mem": 0.0}
    for name, entry in remembered["jobs"].items():
        assert set(entry) == set(plain["jobs"][name]) | {"past_usage"}


def test_discrete_greedy_starts_from_the_history():
    """Whole tasks (DRF Sec. 6.2) with A's 6 CPU of history: B takes tasks while A's
    6/9 leads (2 tasks, 2/3); at the tie the one with fewer tasks, A, goes first (7/9),
    then B's third task (3 CPU) no longer fits the 2 CPU left, and A takes them: 3 and 2."""
    got = tasks(with_usage(DRF_41, {"average": True, "jobs": {"A": {"cpu": 6}}}), "drf", discrete=True)
    assert got == {"A": 3.0, "B": 2.0}
    got = tasks(with_usage(TWO_QUEUES, {"average": True, "queues": {"ads": {"cpu": 4}}}), "hdrf", discrete=True)
    assert got == {"A": 4.0, "B": 8.0}  # (dev alone to 4 tasks, then one each in turn)


def test_resource_seconds_are_averaged_as_the_online_ledger_does():
    """``over`` T with half-life h: the average is U / W with W the ledger's weight."""
    for h, over in ((3600.0, 7200.0), (3600.0, 60.0), (math.inf, 500.0)):
        w = DecayLedger(h, 1)
        w.charge("a", 0.0, [1.0])
        assert decayed_time(h, over) == pytest.approx(w.weight(over), rel=1e-12)
        # a job that held 6 CPU all along has U = 6 W: its average is 6, as given directly
        u = 6 * decayed_time(h, over)
        half = "inf" if math.isinf(h) else h
        by_seconds = tasks(with_usage(DRF_41, {"over": over, "half_life": half, "jobs": {"A": {"cpu": u}}}), "drf")
        assert by_seconds == pytest.approx({"A": 1.5, "B": 2.5}, rel=1e-9)


def test_half_life_defaults_to_the_scenarios():
    """No ``usage.half_life``: fairness.half_life when above 0, else no decay (W = over)."""
    h, over = 1000.0, 3000.0
    u = 6 * decayed_time(h, over)  # 6 CPU on average under half-life h
    doc = with_usage(DRF_41, {"over": over, "jobs": {"A": {"cpu": u}}})
    assert tasks({**doc, "fairness": {"half_life": h}}, "drf") == pytest.approx({"A": 1.5, "B": 2.5})
    # without fairness the same U is plain resource-seconds over 3000 s: 6 * 0.583 CPU
    assert parse_scenario(doc, "<t>").usage.jobs["A"][0] == pytest.approx(u / over)


ZERO_USAGE = {"average": True, "jobs": {"A": {"cpu": 0}}, "queues": {"ads": {"cpu": 0, "mem": 0}}}


@pytest.mark.parametrize("policy", sorted(REGISTRY))
@pytest.mark.parametrize("discrete", [False, True])
def test_zero_usage_is_todays_allocation(policy, discrete):
    """All-zero usage changes nothing, for every policy (and none refuses it)."""
    doc = {**TWO_QUEUES, "queues": [{"name": "ads", "weight": 2, "limit": {"cpu": 9}}, {"name": "dev"}],
           "jobs": TWO_QUEUES["jobs"] + [{"name": "C", "queue": "dev", "tasks": [{"demand": {"cpu": 2, "mem": 1}}]}]}
    outcomes = []
    for usage in (None, ZERO_USAGE, {"average": True}):
        try:
            out = allocate(parse_scenario(with_usage(doc, usage), "<t>"), policy, discrete=discrete).to_json()
        except PolicyModeError as exc:  # (no static allocation in this mode: the same refusal)
            outcomes.append(("refused", str(exc)))
            continue
        out.pop("usage", None)
        for section in ("jobs", "queues"):
            for entry in out[section].values():
                entry.pop("past_usage", None)
        outcomes.append(("allocated", json.dumps(out, sort_keys=True)))
    assert outcomes[1] == outcomes[0] and outcomes[2] == outcomes[0]


@pytest.mark.parametrize("policy", ["dff", "fifo", "ceei", "slowdown", "timefair", "slots"])
def test_policies_without_memory_refuse_usage(policy):
    sc = parse_scenario(with_usage(DRF_41, {"average": True, "jobs": {"A": {"cpu": 1}}}), "<t>")
    with pytest.raises(PolicyModeError, match=r"usage: policy .* has no static allocation with past usage"):
        allocate(sc, make_policy(policy, **({"slots": 2} if policy == "slots" else {})))


def test_flat_policies_say_queue_history_is_not_used():
    sc = parse_scenario(with_usage(TWO_QUEUES, {"average": True, "queues": {"ads": {"cpu": 4}}}), "<t>")
    alloc = allocate(sc, "drf")
    assert {ja.tasks for ja in alloc.jobs.values()} == {6.0}
    assert any("usage.queues is ignored" in note for note in alloc.notes)
    assert not allocate(sc, "hdrf").notes


BAD = [
    # (usage section, the field path of the problem)
    ({"average": True, "jobs": {"Z": {"cpu": 1}}}, "usage.jobs.Z"),
    ({"average": True, "queues": {"ads.x": {"cpu": 1}}}, "usage.queues.ads.x"),
    ({"average": True, "jobs": {"A": {"cpu": -1}}}, "usage.jobs.A.cpu"),
    ({"average": True, "jobs": {"A": {"gpu": 1}}}, "usage.jobs.A.gpu"),
    ({"average": True, "jobs": {"A": 3}}, "usage.jobs.A"),
    ({"jobs": {"A": {"cpu": 1}}}, "usage"),
    ({"average": True, "over": 10}, "usage.average"),
    ({"average": "yes"}, "usage.average"),
    ({"average": False, "over": 10}, "usage.average"),
    ({"average": True, "half_life": 10}, "usage.half_life"),
    ({"over": 0}, "usage.over"),
    ({"over": 10, "half_life": 0}, "usage.half_life"),
    ({"over": 10, "half": 5}, "usage.half"),
    ({"average": True, "queues": {"ads": {"cpu": 1}}, "jobs": {"A": {"cpu": 2}}}, "usage.queues.ads.cpu"),
    ([1], "usage"),
]


@pytest.mark.parametrize("usage,path", BAD, ids=[p for _, p in BAD])
def test_bad_usage_names_the_field(usage, path):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(with_usage(TWO_QUEUES, usage), "<t>")
    assert path in [e.path for e in err.value.errors]


# --- allocate --usage FILE ---------------------------------------------------------------------

def write(tmp_path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_usage_from_a_previous_run(tmp_path, capsys):
    """A run where only A ran (24 one-CPU, one-GB tasks of 10 s on 12 CPU: two waves,
    makespan 20, 12 CPU all along): 240 CPU-s over 20 s, an average of 12 CPU for A and
    for ads. On TWO_QUEUES ads starts at (x + 12)/12 >= 1: dev takes all 12 CPU, A none.
    B, not in the run, has no history; its queue dev neither."""
    run = {**TWO_QUEUES, "jobs": [{"name": "A", "queue": "ads",
                                   "tasks": [{"demand": {"cpu": 1, "mem": 1}, "count": 24, "duration": 10}]}]}
    scenario_file = write(tmp_path, "run.json", run)
    assert main(["simulate", scenario_file, "--policy", "hdrf", "--out", str(tmp_path / "out")]) == 0
    summary = str(tmp_path / "out" / "summary.json")
    capsys.readouterr()  # (the run's own report)
    assert main(["allocate", write(tmp_path, "now.json", TWO_QUEUES), "--policy", "hdrf", "--usage", summary,
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {n: e["tasks"] for n, e in out["jobs"].items()} == pytest.approx({"A": 0.0, "B": 12.0})
    assert out["queues"]["ads"]["past_usage"] == pytest.approx({"cpu": 12.0, "mem": 12.0})
    assert out["queues"]["dev"]["past_usage"] == {"cpu": 0.0, "mem": 0.0}
    assert out["usage"] == {"given_as": "resource_seconds", "over": 20.0, "half_life": "inf", "source": summary}


def test_a_run_remembers_jobs_that_have_left(tmp_path):
    """Jobs of the run missing from the scenario count in their queues only."""
    run = {**TWO_QUEUES, "jobs": [{"name": "old", "queue": "ads",
                                   "tasks": [{"demand": {"cpu": 1, "mem": 1}, "count": 24, "duration": 10}]}]}
    assert main(["simulate", write(tmp_path, "run.json", run), "--policy", "hdrf", "--out", str(tmp_path / "o")]) == 0
    sc = with_usage_file(parse_scenario(TWO_QUEUES, "<t>"), tmp_path / "o" / "summary.json")
    assert sc.usage.jobs == {} and sc.usage.queues["ads"] == pytest.approx((12.0, 12.0))


def test_usage_file_forms(tmp_path):
    """The section alone, or inside a document (a scenario file); it replaces the scenario's."""
    section = {"average": True, "jobs": {"A": {"cpu": 6}}}
    base = parse_scenario(with_usage(DRF_41, {"average": True, "jobs": {"B": {"cpu": 1}}}), "<t>")
    for doc in (section, {"usage": section}, with_usage(DRF_41, section)):
        sc = with_usage_file(base, write(tmp_path, "u.json", doc))
        assert sc.usage.jobs == {"A": (6.0, 0.0)}


def test_bad_usage_file_exits_2_naming_file_and_field(tmp_path, capsys):
    scenario_file = write(tmp_path, "s.json", DRF_41)
    bad = write(tmp_path, "u.json", {"average": True, "jobs": {"Z": {"cpu": 1}}})
    assert main(["allocate", scenario_file, "--policy", "drf", "--usage", bad]) == 2
    assert f"{bad}: usage.jobs.Z: unknown job 'Z'" in capsys.readouterr().err
    empty_run = write(tmp_path, "summary.json", {"makespan": 0, "jobs": {}})
    assert main(["allocate", scenario_file, "--policy", "drf", "--usage", empty_run]) == 2
    assert "makespan" in capsys.readouterr().err
    assert main(["allocate", scenario_file, "--policy", "dff", "--usage",
                 write(tmp_path, "v.json", {"average": True, "jobs": {"A": {"cpu": 1}}})]) == 2
    assert "has no static allocation with past usage" in capsys.readouterr().err


def test_table_shows_the_history(tmp_path, capsys):
    doc = with_usage(TWO_QUEUES, {"average": True, "queues": {"ads": {"cpu": 4}}})
    assert main(["allocate", write(tmp_path, "s.json", doc), "--policy", "hdrf", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "past share" in out and "history:" in out
    ads_row = next(line for line in out.splitlines() if line.startswith("ads"))
    assert ads_row.split()[-1] == "33.33%"  # 4 of 12 CPU


def test_simulate_ignores_the_static_history(tmp_path):
    """The simulator keeps its own history from its start: the section changes nothing."""
    run = {**TWO_QUEUES, "jobs": [{**j, "tasks": [{"demand": {"cpu": 1, "mem": 1}, "count": 12, "duration": 10}]}
                                  for j in TWO_QUEUES["jobs"]]}
    outs = []
    for k, doc in enumerate((run, with_usage(run, {"average": True, "queues": {"ads": {"cpu": 4}}}))):
        assert main(["simulate", write(tmp_path, f"r{k}.json", doc), "--policy", "hdrf",
                     "--out", str(tmp_path / f"o{k}")]) == 0
        summary = json.loads((tmp_path / f"o{k}" / "summary.json").read_text())
        outs.append((summary["jobs"], summary["queues"], summary.get("fairness_gap")))
    assert outs[0] == outs[1]


# --- the exact filling against the literal epsilon process, with history ------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(max_jobs=4, max_depth=2), data=st.data())
@pytest.mark.parametrize("policy", ["drf", "hdrf", "asset", "hdrf-naive"])
def test_exact_history_matches_epsilon_reference(policy, sc, data):
    """Random history on jobs and queues (a queue's total = its jobs' plus its own extra,
    as a queue remembers jobs that left): the exact filling (breakpoints) and H-DRF Alg. 1
    run literally, epsilon by epsilon, from the same offsets agree within O(epsilon)."""
    amount = st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.5, 6.0])
    jobs_past = {job.name: tuple(data.draw(amount) for _ in sc.resources) for job in sc.jobs}
    extra = {path: tuple(data.draw(amount) for _ in sc.resources) for path in sc.queues.paths}
    totals = PastUsage(jobs_past, {}).queue_totals(sc.jobs, sc.queues, sc.m)
    queues_past = {q: tuple(t + math.fsum(e[r] for p, e in extra.items() if p == q or p.startswith(q + "."))
                            for r, t in enumerate(totals[q])) for q in sc.queues.paths}
    remembered = replace(sc, usage=PastUsage(jobs_past, queues_past))
    pol = make_policy(policy)
    tree = pol.tree_with_history(remembered, False)
    exact = fill(tree, pol.rule).tasks
    approx = reference_fill(tree, pol.rule, epsilon=2e-3)
    for job in sc.jobs:
        per_task = max(d / c for d, c in zip(job.composite_demand(), sc.capacity))
        assert exact[job.name] * per_task == pytest.approx(approx[job.name] * per_task, abs=0.03)


# --- the static entitlement is what the online sorter with memory fills to --------------------

DAY = 86400.0


def online_fill(doc: dict, policy: str, k: int, *, before: tuple[str, str, tuple], over: float,
                half_life: float) -> dict[str, float]:
    """The policy's online sorter with memory (half-life ``half_life``): ``before`` = (job,
    queue, vector) held that vector over [0, over] and left (a job of the same name
    continues its history; another name leaves it to the queue, H-DRF's hidden leaf);
    then at ``over`` it fills the empty cluster with tasks 1/k of the jobs' size, lowest
    key first, while they fit. Returns whole-size tasks per job."""
    sc = parse_scenario(doc, "<t>")
    sorter = make_policy(policy).online(sc.resources, sc.queues, sc.capacity)
    sorter.set_half_life(half_life)
    name, queue, vector = before
    sorter.add_job(name, queue, 1.0, vector)
    sorter.allocated(name, vector, 0.0)
    sorter.released(name, vector, over)
    if name not in {job.name for job in sc.jobs}:
        sorter.remove_job(name)
    demand = {job.name: tuple(d / k for d in job.composite_demand()) for job in sc.jobs}
    for job in sc.jobs:
        if job.name != name:
            sorter.add_job(job.name, job.queue, job.weight, demand[job.name])
    free = list(sc.capacity)
    got = {job.name: 0 for job in sc.jobs}

    def fits(job_name: str) -> bool:
        return all(d <= f + 1e-9 for d, f in zip(demand[job_name], free))

    while (picked := sorter.pick(fits, over)) is not None:
        sorter.allocated(picked, demand[picked], over)
        free = [f - d for f, d in zip(free, demand[picked])]
        got[picked] += 1
    return {n: c / k for n, c in got.items()}


@pytest.mark.parametrize("half_life", [DAY, math.inf])
@pytest.mark.parametrize("policy,doc,before,static_usage", [
    # A held 6 CPU for 3 days, then nothing: its decayed average is 6 CPU (U = 6 W)
    ("drf", DRF_41, ("A", "", (6.0, 0.0)), {"jobs": {"A": {"cpu": 6.0}}}),
    # a job of queue ads that has left held 4 CPU: the queue remembers it (hidden leaf)
    ("hdrf", TWO_QUEUES, ("old", "ads", (4.0, 0.0)), {"queues": {"ads": {"cpu": 4.0}}}),
])
def test_online_memory_fills_to_the_static_entitlement(policy, doc, before, static_usage, half_life):
    """The static answer with history (given as resource-seconds U = 6 W over 3 days) is
    the online policy's at that instant, to within a task of 1/k: the two agree."""
    over, k = 3 * DAY, 40
    w = decayed_time(half_life, over)
    usage = {"over": over, "half_life": "inf" if math.isinf(half_life) else half_life,
             **{section: {name: {res: x * w for res, x in amounts.items()} for name, amounts in entries.items()}
                for section, entries in static_usage.items()}}
    static = tasks(with_usage(doc, usage), policy)
    online = online_fill(doc, policy, k, before=before, over=over, half_life=half_life)
    assert online == pytest.approx(static, abs=2 / k)


@pytest.mark.parametrize("usage,loader_accepts", [
    ({"average": True, "jobs": {"A": {"cpu": 3}}}, True),
    ({"over": 3600, "half_life": 600, "queues": None, "jobs": {"A": {"cpu": 3}}}, True),
    ({"average": True, "jobs": {"A": {"cpu": -3}}}, False),
    ({"average": True, "over": 3600}, False),
    ({"jobs": {"A": {"cpu": 3}}}, False),
    ({"over": 0}, False),
])
def test_the_schema_never_refuses_what_the_loader_accepts(usage, loader_accepts):
    """``fairshare schema scenario`` describes the section (model/schema.py): a document
    the loader accepts passes it; these bad ones fail both."""
    import jsonschema

    from fairshare.model.schema import SCENARIO, json_schema

    doc = with_usage(DRF_41, usage)
    try:
        parse_scenario(doc, "<t>")
        accepted = True
    except ScenarioError:
        accepted = False
    assert accepted == loader_accepts
    schema_ok = jsonschema.Draft202012Validator(json_schema(SCENARIO)).is_valid(doc)
    assert schema_ok == loader_accepts


def test_the_refusal_names_exactly_the_policies_with_memory():
    sc = parse_scenario(with_usage(DRF_41, {"average": True, "jobs": {"A": {"cpu": 1}}}), "<t>")
    with pytest.raises(PolicyModeError) as err:
        allocate(sc, "dff")
    named = err.value.args[0].rpartition("use ")[2].replace(" or ", ", ").split(", ")
    assert set(named) == {name for name, cls in REGISTRY.items() if cls.remembers_usage}
