"""Queue guarantees and limits: validation, exact static allocations, the audit.

Semantics (docs/policies.md, "Guarantees and limits"; ``policies/machinery/bounds.py``): the
guarantees are filled first, innermost first, each queue capped at its guarantee; then
the policy shares fairly from there; a queue at its limit of r blocks its jobs that
need r. Expected numbers below show their arithmetic.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import pytest
from builders import job, q, scenario
from scipy.optimize import linprog

from fairshare.api import allocate
from fairshare.audit import audit
from fairshare.model import parse_scenario
from fairshare.model.errors import ScenarioError

BOUNDED_POLICIES = ["hdrf", "hdrf-naive", "capacity", "collapsed", "drf", "dff", "asset"]


def bounded(name: str, *children: dict, guarantee: dict | None = None, limit: dict | None = None,
            weight: float = 1) -> dict:
    d = q(name, weight, *children)
    if guarantee is not None:
        d["guarantee"] = guarantee
    if limit is not None:
        d["limit"] = limit
    return d


def queue_alloc(result, path: str) -> dict[str, float]:
    return dict(zip(result.resources, result.queues[path].allocation))


# --------------------------------------------------------------------------------------
# validation: every problem with its field path, before any work


def errors_of(queues, capacity=None, jobs=None) -> list[str]:
    data = {"cluster": {"capacity": capacity or {"cpu": 100, "mem": 100}},
            "jobs": jobs or [job("j", {"cpu": 1, "mem": 1})], "queues": queues}
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "<test>")
    return [str(e) for e in info.value.errors]


@pytest.mark.parametrize("queues, expected", [
    # guarantees of siblings must fit in their parent's guarantee: 40 + 30 = 70 > 60
    ([bounded("a", bounded("x", guarantee={"cpu": 40}), bounded("y", guarantee={"cpu": 30}),
              guarantee={"cpu": 60})],
     "queues[0].guarantee.cpu: the guarantees of the queues below 'a' add up to 70 cpu, more than its own "
     "guarantee of 60"),
    # ... and at the top in the cluster: 60 + 50 = 110 > 100
    ([bounded("a", guarantee={"cpu": 60}), bounded("b", guarantee={"cpu": 50})],
     "queues: the top-level queues' guarantees add up to 110 cpu, more than the cluster's 100"),
    # a queue without a guarantee passes its children's up: 70 + 40 = 110 > 100
    ([bounded("a", bounded("x", guarantee={"mem": 70})), bounded("b", guarantee={"mem": 40})],
     "queues: the top-level queues' guarantees add up to 110 mem, more than the cluster's 100"),
    # a guarantee must not exceed its own limit
    ([bounded("a", guarantee={"cpu": 60}, limit={"cpu": 50})],
     "queues[0].limit.cpu: its guarantee of 60 cpu exceeds its limit of 50"),
    # nor can a child's guarantee be honoured past an ancestor's limit
    ([bounded("a", bounded("x", guarantee={"cpu": 30}), limit={"cpu": 20})],
     "queues[0].limit.cpu: the guarantees of the queues below it add up to 30 cpu, more than its limit of 20"),
    ([bounded("a", guarantee={"gpu": 1})], "queues[0].guarantee.gpu: unknown resource 'gpu' (resources: cpu, mem)"),
    ([bounded("a", limit={"cpu": -1})], "queues[0].limit.cpu: must be >= 0, got -1"),
    ([bounded("a", limit=[4])], "queues[0].limit: must be a mapping of resource amounts"),
    ([bounded("a", guarantee={"cpu": "many"})], "queues[0].guarantee.cpu: must be a number, got 'many'"),
])
def test_invalid_bounds_are_refused_with_their_field_path(queues, expected):
    errors = errors_of(queues)
    assert any(e.startswith(expected) for e in errors), errors


def test_every_bound_problem_is_reported_at_once():
    errors = errors_of([bounded("a", guarantee={"cpu": 60, "gpu": 1}, limit={"cpu": 50}),
                        bounded("b", guarantee={"mem": -1})])
    assert len(errors) == 3, errors


def test_cli_refuses_bounds_with_exit_2(tmp_path, capsys):
    from fairshare.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text("cluster: {capacity: {cpu: 10}}\nqueues: [{name: a, guarantee: {cpu: 11}}]\n"
                    "jobs: [{name: j, queue: a, tasks: [{demand: {cpu: 1}}]}]\n")
    assert main(["allocate", str(path), "--policy", "hdrf"]) == 2
    err = capsys.readouterr().err
    assert "queues: the top-level queues' guarantees add up to 11 cpu, more than the cluster's 10" in err


# --------------------------------------------------------------------------------------
# exact static allocations, hand-computed


@dataclass(frozen=True)
class Case:
    name: str
    queues: list
    jobs: list
    policy: str
    expected: dict  # queue path -> {resource: amount}
    capacity: dict | None = None


ONE_TO_ONE = {"cpu": 1, "mem": 1}
CASES = [
    # a guaranteed 60 cpu; a and b each one job <1 cpu, 1 mem>. Guarantee phase: a -> 60.
    # Fair phase: b's share 0 < a's 0.6, b grows to 40 and the cluster is full (60 + 40).
    # (Without the guarantee both would get 50.)
    *[Case(f"floor-{p}", [bounded("a", guarantee={"cpu": 60}), bounded("b")],
           [job("j1", ONE_TO_ONE, "a"), job("j2", ONE_TO_ONE, "b")], p,
           {"a": {"cpu": 60, "mem": 60}, "b": {"cpu": 40, "mem": 40}}) for p in BOUNDED_POLICIES],
    # limit only, on an otherwise idle cluster: a alone never passes its limit of 30 cpu
    *[Case(f"cap-idle-{p}", [bounded("a", limit={"cpu": 30})], [job("j1", ONE_TO_ONE, "a")], p,
           {"a": {"cpu": 30, "mem": 30}}) for p in BOUNDED_POLICIES],
    # a limit on mem blocks only the jobs that need mem: a's j1 <1 cpu> keeps growing after
    # j2 <0, 1 mem> stops at 10 mem; b's j3 <1, 1>. H-DRF: a's share = max(cpu, mem) share;
    # j2 stops at mem 10 (share 0.1); then a (j1) and b grow at equal levels:
    # a = j1 cpu, b = j3 cpu = mem; cpu: j1 + j3 = 100 -> 50 each (mem 10 + 50 <= 100).
    Case("limit-blocks-only-its-resource-hdrf",
         [bounded("a", limit={"mem": 10}), bounded("b")],
         [job("j1", {"cpu": 1, "mem": 0}, "a"), job("j2", {"cpu": 0, "mem": 1}, "a"), job("j3", ONE_TO_ONE, "b")],
         "hdrf", {"a": {"cpu": 50, "mem": 10}, "b": {"cpu": 50, "mem": 50}}),
    # nested guarantees, innermost first: x (40 cpu) inside a (60 cpu), y unguaranteed.
    # Depth 2: x -> 40. Depth 1: inside a's 60, y (level 0) grows to 20. Fair phase: c
    # grows from 0 to a's level 0.6 (60 cpu); cpu is then full (60 + 40 = 100).
    Case("nested-hdrf",
         [bounded("a", bounded("x", guarantee={"cpu": 40}), bounded("y"), guarantee={"cpu": 60}), bounded("c")],
         [job("j1", ONE_TO_ONE, "a.x"), job("j2", ONE_TO_ONE, "a.y"), job("j3", ONE_TO_ONE, "c")],
         "hdrf", {"a": {"cpu": 60, "mem": 60}, "a.x": {"cpu": 40, "mem": 40}, "a.y": {"cpu": 20, "mem": 20},
                  "c": {"cpu": 40, "mem": 40}}),
    # the same under flat DRF: the guarantees are floors of the jobs of each queue; from
    # j1 = 40, j2 = 20, j3 = 0 DRF raises the lowest: j3 to 20, then j2 and j3 to 30
    # (40 + 30 + 30 = 100 cpu): x 40, y 30, a 70, c 30.
    Case("nested-drf",
         [bounded("a", bounded("x", guarantee={"cpu": 40}), bounded("y"), guarantee={"cpu": 60}), bounded("c")],
         [job("j1", ONE_TO_ONE, "a.x"), job("j2", ONE_TO_ONE, "a.y"), job("j3", ONE_TO_ONE, "c")],
         "drf", {"a": {"cpu": 70, "mem": 70}, "a.x": {"cpu": 40, "mem": 40}, "a.y": {"cpu": 30, "mem": 30},
                 "c": {"cpu": 30, "mem": 30}}),
    # a job that needs none of its queue's guaranteed resources gets nothing from it: a
    # guarantees 50 gpu, its job needs cpu only; both jobs share cpu equally (50 / 50).
    Case("guarantee-of-an-unused-resource-hdrf",
         [bounded("a", guarantee={"gpu": 5}), bounded("b")],
         [job("j1", {"cpu": 1, "gpu": 0}, "a"), job("j2", {"cpu": 1, "gpu": 0}, "b")],
         "hdrf", {"a": {"cpu": 50, "gpu": 0}, "b": {"cpu": 50, "gpu": 0}}, {"cpu": 100, "gpu": 10}),
    # weights still apply above the floor: a (weight 1) guaranteed 20, b weight 3.
    # From a = 20, b = 0: b reaches a's level 0.2/1 at 0.6... weighted levels a: u/1, b: u/3;
    # both grow with a/1 = b/3 and a + b = 100 -> a = 25, b = 75 (a's floor 20 < 25).
    Case("floor-below-weighted-share-hdrf",
         [bounded("a", guarantee={"cpu": 20}), bounded("b", weight=3)],
         [job("j1", ONE_TO_ONE, "a"), job("j2", ONE_TO_ONE, "b")],
         "hdrf", {"a": {"cpu": 25, "mem": 25}, "b": {"cpu": 75, "mem": 75}}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("discrete", [False, True], ids=["divisible", "discrete"])
def test_bounded_allocations_by_hand(case, discrete):
    sc = scenario(case.capacity or {"cpu": 100, "mem": 100}, case.jobs, case.queues)
    result = allocate(sc, case.policy, discrete=discrete)
    for path, want in case.expected.items():
        got = queue_alloc(result, path)
        for res, amount in want.items():
            # whole tasks of size 1 land exactly on these numbers
            assert got[res] == pytest.approx(amount, rel=1e-9, abs=1e-9), (path, res, got)


def test_allocate_json_shows_guarantee_limit_and_fair_share():
    sc = scenario({"cpu": 100, "mem": 100}, [job("j1", ONE_TO_ONE, "a"), job("j2", ONE_TO_ONE, "b")],
                  [bounded("a", guarantee={"cpu": 60}), bounded("b", limit={"mem": 30})])
    doc = allocate(sc, "hdrf", discrete=True).to_json()
    assert doc["queues"]["a"]["guarantee"] == {"cpu": 60.0} and doc["queues"]["a"]["limit"] == {}
    assert doc["queues"]["b"]["limit"] == {"mem": 30.0}
    # fair share, the exact divisible entitlement: a's guarantee first (60); then b grows
    # from 0 and stops at its mem limit 30 (level 0.3 < a's 0.6); a alone takes the rest
    # of the cpu, 100 - 30 = 70
    assert doc["queues"]["a"]["fair_share"]["cpu"] == pytest.approx(70.0)
    assert doc["queues"]["b"]["fair_share"]["mem"] == pytest.approx(30.0)


def test_unbounded_scenarios_report_empty_bounds():
    sc = scenario({"cpu": 10}, [job("j1", {"cpu": 1}, "a")], [q("a")])
    doc = allocate(sc, "hdrf").to_json()
    assert doc["queues"]["a"]["guarantee"] == {} and doc["queues"]["a"]["limit"] == {}
    assert doc["queues"]["a"]["fair_share"] == doc["queues"]["a"]["allocation"]


def test_policies_that_ignore_bounds_say_so():
    sc = scenario({"cpu": 10, "mem": 10}, [job("j1", ONE_TO_ONE, "a"), job("j2", ONE_TO_ONE, "b")],
                  [bounded("a", limit={"cpu": 2}), bounded("b")])
    result = allocate(sc, "ceei")
    assert any("does not model queue guarantees and limits" in n for n in result.notes)
    # and the audit catches what it did: a holds more than its limit
    report = audit(sc, "ceei", properties=["guarantees_and_limits"])
    res = report.properties["guarantees_and_limits"]
    assert res.holds is False and res.witness["queue"] == "a" and res.witness["limit"] == 2.0


# --------------------------------------------------------------------------------------
# the audit


@pytest.mark.parametrize("policy", BOUNDED_POLICIES)
@pytest.mark.parametrize("discrete", [False, True])
def test_audit_finds_bounds_honoured(policy, discrete):
    sc = scenario({"cpu": 100, "mem": 100},
                  [job("j1", ONE_TO_ONE, "a.x"), job("j2", {"cpu": 2, "mem": 1}, "a.y"),
                   job("j3", {"cpu": 1, "mem": 3}, "c"), job("j4", ONE_TO_ONE, "d", count=5)],
                  [bounded("a", bounded("x", guarantee={"cpu": 20}), bounded("y"), guarantee={"cpu": 45}),
                   bounded("c", limit={"mem": 30}), bounded("d", guarantee={"cpu": 10})])
    res = audit(sc, policy, discrete=discrete, respect_counts=True,
                properties=["guarantees_and_limits"]).properties["guarantees_and_limits"]
    assert res.holds is True, res.detail


def test_audit_guarantee_owed_only_up_to_what_the_jobs_can_use():
    # d's job runs 5 tasks at most (respect_counts): 5 cpu of its 10 are all it can use
    sc = scenario({"cpu": 10}, [job("j", {"cpu": 1}, "d", count=5), job("k", {"cpu": 1}, "e")],
                  [bounded("d", guarantee={"cpu": 10}), bounded("e")])
    res = audit(sc, "hdrf", respect_counts=True, properties=["guarantees_and_limits"])
    assert res.properties["guarantees_and_limits"].holds is True


def test_audit_not_applicable_without_bounds():
    sc = scenario({"cpu": 10}, [job("j", {"cpu": 1}, "a")], [q("a")])
    res = audit(sc, "hdrf", properties=["guarantees_and_limits"]).properties["guarantees_and_limits"]
    assert res.holds is None


# --------------------------------------------------------------------------------------
# property test against an independent reference: lexicographic max-min by LPs


def lexmaxmin_drf(capacity, demands, weights, lo, hi) -> list[float]:
    """Tasks per job maximising the sorted vector of weighted dominant shares
    ``s_i = x_i delta_i / w_i`` lexicographically, subject to capacity and
    ``lo_i <= x_i <= hi_i``: a sequence of LPs (maximise the common floor t of the
    unfrozen jobs' shares; freeze each job that cannot exceed max(t, its floor share)).
    Water-filling from the floors reaches this (max-min fairness with minimum rates)."""
    n, m = len(demands), len(capacity)
    delta = [max(d[r] / capacity[r] for r in range(m)) for d in demands]
    scale = [delta[i] / weights[i] for i in range(n)]  # share per task
    fixed: dict[int, float] = {}
    A_cap = np.array([[demands[i][r] for i in range(n)] + [0.0] for r in range(m)])
    while len(fixed) < n:
        free = [i for i in range(n) if i not in fixed]
        bounds = [(fixed[i], fixed[i]) if i in fixed else (lo[i], hi[i]) for i in range(n)] + [(None, None)]
        rows = [[0.0] * (n + 1) for _ in free]
        for k, i in enumerate(free):  # t - s_i <= 0, unless the floor already exceeds t
            rows[k][i] = -scale[i]
            rows[k][n] = 1.0
        A = np.vstack([A_cap, np.array(rows)])
        b = np.concatenate([np.array(capacity, dtype=float), np.zeros(len(free))])
        # t is capped by each free job's own share; jobs above the water have s_i >= lo_i share
        res = linprog(c=[0.0] * n + [-1.0], A_ub=A, b_ub=b, bounds=bounds, method="highs")
        assert res.status == 0, res.message
        t = res.x[n]
        for i in free:
            # can i exceed max(t, its floor share) with the others' shares kept >= t?
            floor_i = max(t, lo[i] * scale[i])
            rows2 = [row[:] for k, row in enumerate(rows) if free[k] != i]
            c = [0.0] * (n + 1)
            c[i] = -scale[i]
            A2 = np.vstack([A_cap] + ([np.array(rows2)] if rows2 else []))
            A2 = A2[:, :n + 1]
            b2 = np.concatenate([np.array(capacity, dtype=float), np.zeros(len(rows2))])
            bounds2 = bounds[:n] + [(t, t)]
            res2 = linprog(c=c, A_ub=A2, b_ub=b2, bounds=bounds2, method="highs")
            assert res2.status == 0, res2.message
            if -res2.fun <= floor_i * (1 + 1e-7) + 1e-9:
                fixed[i] = max(lo[i], min(hi[i], floor_i / scale[i]))
    return [fixed[i] for i in range(n)]


def random_bounded(rng: random.Random):
    """A flat random scenario, one job per queue, guarantees of cpu and limits; None
    when the floors' other resources do not fit (the reference assumes every floor met)."""
    resources = ["cpu", "mem", "gpu"]
    capacity = {"cpu": 100.0, "mem": 200.0, "gpu": 8.0}
    n = rng.randint(2, 5)
    queues, jobs = [], []
    lo, hi, demands, weights = [], [], [], []
    budget = dict(capacity)
    for i in range(n):
        d = {"cpu": rng.choice([0.5, 1, 2]), "mem": rng.choice([0, 1, 4]), "gpu": rng.choice([0, 0, 0.25])}
        w = rng.choice([1, 2])
        entry = bounded(f"q{i}")
        lo_i, hi_i = 0.0, math.inf
        if rng.random() < 0.5:  # a guarantee of cpu within what is left (one guarantee per queue)
            g = round(rng.uniform(0, budget["cpu"] * 0.4), 1)
            budget["cpu"] -= g
            entry["guarantee"] = {"cpu": g}
            lo_i = g / d["cpu"]
        if rng.random() < 0.4:  # a limit of mem, or of cpu when the job uses no mem
            res = "mem" if d["mem"] > 0 else "cpu"
            lim = round(rng.uniform(5, 60), 1)
            if res == "cpu" and "guarantee" in entry:
                lim = max(lim, entry["guarantee"]["cpu"])
            entry["limit"] = {res: lim}
            hi_i = lim / d[res]
        queues.append(entry)
        jobs.append(job(f"j{i}", d, f"q{i}", weight=w))
        lo.append(min(lo_i, hi_i))
        hi.append(hi_i)
        demands.append([d[r] for r in resources])
        weights.append(w)
    # the floors' other resources must fit too (the reference assumes every floor is met)
    floors_fit = all(sum(lo[i] * demands[i][r] for i in range(n)) <= capacity[res] * (1 - 1e-9)
                     for r, res in enumerate(resources))
    if not floors_fit:
        return None
    data = {"resources": resources, "cluster": {"capacity": capacity}, "jobs": jobs, "queues": queues}
    return data, capacity, resources, demands, weights, lo, hi


@pytest.mark.parametrize("seed", range(25))
def test_drf_with_bounds_matches_the_lexmaxmin_reference(seed):
    rng = random.Random(seed)
    drawn = None
    while drawn is None:  # (deterministic: the same seed draws the same scenario)
        drawn = random_bounded(rng)
    data, capacity, resources, demands, weights, lo, hi = drawn
    n = len(demands)
    sc = parse_scenario(data, "<random>")
    got = allocate(sc, "drf")
    want = lexmaxmin_drf([capacity[r] for r in resources], demands, weights, lo, [min(h, 1e6) for h in hi])
    for i in range(n):
        assert got.jobs[f"j{i}"].tasks == pytest.approx(want[i], rel=1e-6, abs=1e-6), (i, data)
