"""Every pending job's reasons are true at every decision (issue 21, "Done when").

The scenarios (hierarchy, limits, guarantees, fragmentation, gangs) run instant by
instant; after each decision every job still waiting is explained, and the test checks
each number on its own: the shares and weights recomputed from the running tasks, the
fit and shortfall from the nodes' capacities minus what runs on them, the limits and
guarantees from the queue tree, and each counterfactual applied to a copy, where a new
decision round must start the job.
"""

from __future__ import annotations

import copy
import json
import math

import pytest

from builders import job, q, scenario
from fairshare.cli import main
from fairshare.engine.explain import apply_change, explain
from fairshare.model import parse_scenario
from fairshare.policies import make_policy
from fairshare.sim import SimOptions, Simulator

ONLINE = ("drf", "hdrf", "dff", "fifo", "capacity", "asset", "timefair")


def _with_durations(sc_doc: dict) -> dict:
    for entry in sc_doc["jobs"]:
        for task in entry["tasks"]:
            task.setdefault("duration", 10 + 5 * len(entry["name"]))
            task.setdefault("count", 6)
    return sc_doc


def hierarchy():
    return {"cluster": {"nodes": [{"name": "n", "count": 2, "capacity": {"cpu": 8, "mem": 16}}]},
            "queues": [q("ads", 3, q("prod", 2), q("test")), q("dev")],
            "jobs": [job("A", {"cpu": 2, "mem": 2}, "ads.prod"), job("B", {"cpu": 3, "mem": 1}, "dev"),
                     job("C", {"cpu": 1, "mem": 4}, "ads.test", submit=5)]}


def limits():
    doc = hierarchy()
    doc["queues"][0]["limit"] = {"cpu": 6}
    return doc


def guarantees():
    doc = hierarchy()
    doc["queues"][1]["guarantee"] = {"cpu": 6}
    doc["jobs"][1]["submit"] = 8
    return doc


def fragmentation():
    return {"cluster": {"nodes": [{"name": "n", "count": 3, "capacity": {"cpu": 4, "mem": 8}}]},
            "jobs": [job("small", {"cpu": 3, "mem": 1}), job("big", {"cpu": 4, "mem": 4}, submit=1)]}


def gangs():
    doc = {"cluster": {"nodes": [{"name": "n", "count": 2, "capacity": {"cpu": 4, "gpu": 2}}]},
           "queues": [q("a"), q("b")],
           "jobs": [job("filler", {"cpu": 1, "gpu": 1}, "a"),
                    job("gang", {"cpu": 2, "gpu": 1}, "b", submit=2)]}
    doc["jobs"][1]["gang"] = True
    doc["jobs"][1]["tasks"][0]["count"] = 3
    return doc


SCENARIOS = {"hierarchy": hierarchy, "limits": limits, "guarantees": guarantees,
             "fragmentation": fragmentation, "gangs": gangs}


def _instants(doc: dict, policy: str):
    """The simulator's scheduler after each instant's decision (a run per instant, each
    stopped there: the same seed gives the same state)."""
    sc = parse_scenario(_with_durations(doc), "<test>")
    # the arrivals, and every 5 s (the durations are multiples of 5: every completion)
    for at in sorted({j.submit_s for j in sc.jobs} | {5.0 * k for k in range(16)}):
        sim = Simulator(sc, make_policy(policy), SimOptions(until=at))
        sim.run()
        yield sim.scheduler, sim.now


def _free(sch, node):
    """A node's free capacity recomputed from its capacity and the tasks on it."""
    free = list(sch.pool.states[node].node.capacity)
    for task in sch.tasks.values():
        if task.node_index == node:
            for r, d in enumerate(task.demand):
                free[r] -= d
    return free


def _usage(sch, match):
    out = [0.0] * sch.m
    for task in sch.tasks.values():
        if match(sch.jobs[task.job].job):
            for r, d in enumerate(task.demand):
                out[r] += d
    return out


def _check_reason(sch, name, reason):
    rt = sch.jobs[name]
    res = sch.resources
    kind = reason["kind"]
    if kind == "queue_limit":
        path = reason["queue"]
        usage = _usage(sch, lambda j: j.queue == path or j.queue.startswith(path + "."))
        r = res.index(reason["resource"])
        assert reason["usage"] == pytest.approx(usage[r])
        assert reason["limit"] == dict(sch.queues[path].limit)[reason["resource"]]
        assert usage[r] + reason["demand"] > reason["limit"]
    elif kind == "no_node_fits":
        cls = rt.job.classes[rt.shape_class]
        nodes = [n for n in range(len(sch.pool.states)) if sch.pool.alive(n)]
        frees = [_free(sch, n) for n in nodes]
        assert not any(all(d <= f + 1e-9 for d, f in zip(cls.demand, free)) for free in frees)
        total = [sum(f[r] for f in frees) for r in range(sch.m)]
        assert reason["fits_in_total"] == all(d <= t + 1e-9 for d, t in zip(cls.demand, total))
        best = sch.pool.index_of[reason["best_node"]]
        short = [max(0.0, d - f) for d, f in zip(cls.demand, _free(sch, best))]
        assert [reason["shortfall"][r] for r in res] == pytest.approx(short)
    elif kind == "gang_incomplete":
        pending = sum(int(p) for p in rt.pending)
        assert reason["tasks"] == pending
        # whole: no running task of the gang while it waits
        assert rt.running == 0
    elif kind == "behind_fair_share":
        for side, prefix in ((reason["behind"], ""), (reason["ahead"], "ahead_")):
            if side in sch.jobs and not (side in sch.queues and side == sch.jobs[side].job.queue):
                usage, weight = _usage(sch, lambda j, s=side: j.name == s), sch.jobs[side].job.weight
            else:
                usage = _usage(sch, lambda j, s=side: j.queue == s or j.queue.startswith(s + "."))
                weight = sch.queues[side].weight
            shares = [u / c for u, c in zip(usage, sch.pool.total_capacity)]
            assert reason[prefix + "dominant_share"] == pytest.approx(max(shares))
            assert reason[prefix + "weight"] == weight
            assert shares[res.index(reason[prefix + "dominant_resource"])] == pytest.approx(max(shares))
        if sch.policy.name == "drf":  # DRF's order: the lower weighted dominant share (ties: arrival)
            assert reason["ahead_dominant_share"] / reason["ahead_weight"] <= \
                reason["dominant_share"] / reason["weight"] + 1e-9
        assert sch.jobs[reason["ahead_job"]].demanding
    elif kind == "guarantee_owed":
        path = reason["queue"]
        usage = _usage(sch, lambda j: j.queue == path or j.queue.startswith(path + "."))
        for resource, amount in reason["usage"].items():
            assert amount == pytest.approx(usage[res.index(resource)])
            assert amount < reason["guarantee"][resource] == dict(sch.queues[path].guarantee)[resource]
    elif kind == "priority_held":
        assert all(sch.jobs[h].job.priority > rt.job.priority for h in reason["higher"])
    else:
        raise AssertionError(f"unknown reason {kind!r}")


@pytest.mark.parametrize("policy", ONLINE)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_reason_is_true_and_every_change_starts_the_job(name, policy):
    seen = set()
    for sch, now in _instants(SCENARIOS[name](), policy):
        for job_name, rt in sch.jobs.items():
            if rt.finished_at is not None or not rt.demanding:
                continue
            got = explain(sch, job_name, now)
            # a job waiting at a quiet point always has a blocker
            assert got.reasons, f"{job_name} waits at {now} with no reason"
            for reason in got.reasons:
                _check_reason(sch, job_name, reason)
                seen.add(reason["kind"])
            for change in got.would_start_if:
                trial = copy.deepcopy(sch)
                apply_change(trial, job_name, change, now)
                assert any(launch.job == job_name for launch in trial.schedule(now)), change
                seen.add(change["kind"])
    expected = {"hierarchy": {"no_node_fits", "behind_fair_share"}, "limits": {"queue_limit", "limit_raised"},
                "guarantees": {"no_node_fits", "guarantee_owed"}, "fragmentation": {"no_node_fits"},
                "gangs": {"gang_incomplete"}}[name]
    assert expected <= seen


def test_fragmentation_is_told_apart():
    """3 nodes of 4 cpu with a 3-cpu task on each: 3 cpu free in all, in 1-cpu pieces;
    a 2-cpu task fits in the total but on no node."""
    doc = {"cluster": {"nodes": [{"name": "n", "count": 3, "capacity": {"cpu": 4}}]},
           "jobs": [job("small", {"cpu": 3}, count=3), job("two", {"cpu": 2}, count=1, submit=1)]}
    for entry in doc["jobs"]:
        entry["tasks"][0]["duration"] = 100
    sc = parse_scenario(doc, "<test>")
    sim = Simulator(sc, make_policy("drf"), SimOptions(until=1))
    sim.run()
    got = explain(sim.scheduler, "two", 1.0)
    reason = got.reasons[0]
    assert reason["kind"] == "no_node_fits" and reason["fits_in_total"] is True
    assert reason["free"] == {"cpu": 3.0}  # (4 - 3) x 3
    assert reason["shortfall"] == {"cpu": 1.0}  # 2 - 1
    assert {c["kind"] for c in got.would_start_if} == {"smaller_demand", "tasks_ended"}


def test_cli_explain_json_follows_the_contract(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_with_durations(limits())))
    assert main(["explain", str(path), "--policy", "hdrf", "--job", "A", "--at", "5", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc)[:5] == ["job", "state", "reasons", "would_start_if", "estimated_start"]
    assert doc["reasons"][0]["kind"] == "queue_limit"
    assert doc["estimated_start"] is None or doc["estimated_start"] > 5
    assert main(["explain", str(path), "--policy", "hdrf", "--job", "nope"]) == 2
    assert "--job" in capsys.readouterr().err


def test_allocate_explain_names_the_saturated_resource_and_the_limit(capsys):
    """DRF Sec. 4.1 (9 cpu, 18 GB; A <1, 4>, B <3, 1>): both bounded when cpu saturates
    (3 + 6 = 9 cpu; memory 12 + 2 = 14 of 18), at 2/3 each; with a limit of 2 cpu on B's
    queue, B is bounded by it."""
    sc = scenario(capacity={"cpu": 9, "mem": 18}, queues=[q("a"), q("b")],
                  jobs=[job("A", {"cpu": 1, "mem": 4}, "a"), job("B", {"cpu": 3, "mem": 1}, "b")])
    from fairshare.api import allocate
    from fairshare.report.explain import static_bounds

    got = static_bounds(sc, allocate(sc, "drf"), respect_counts=False)
    assert [r["resource"] for r in got["A"]] == ["cpu"] and [r["resource"] for r in got["B"]] == ["cpu"]
    assert all(r["dominant_share"] == pytest.approx(2 / 3) for r in got["A"] + got["B"])
    doc = {"cluster": {"capacity": {"cpu": 9, "mem": 18}},
           "queues": [q("a"), {**q("b"), "limit": {"cpu": 2}}],
           "jobs": [job("A", {"cpu": 1, "mem": 4}, "a"), job("B", {"cpu": 3, "mem": 1}, "b")]}
    limited = parse_scenario(doc, "<test>")
    bounds = static_bounds(limited, allocate(limited, "hdrf"), respect_counts=False)
    assert {"kind": "queue_limit", "queue": "b", "resource": "cpu", "usage": pytest.approx(2.0),
            "limit": 2.0} in bounds["B"]
    assert not math.isnan(bounds["A"][0].get("dominant_share", 0.0))
