"""Conformance suite: every registered policy passes the same checks.

Modelled on scikit-learn's ``estimator_checks`` and the Mesos sorter tests typed over all
sorters: a new policy registered in ``fairshare.policies.REGISTRY`` gets every check here
without writing a test. Policies without a static allocation must refuse it with
:class:`PolicyModeError`, never crash or return something made up. These are the static
checks; every policy with an online mode also runs through test_conformance_online.py.
"""

from __future__ import annotations

import copy
import sys

import pytest
from builders import job, q, scenario

from fairshare import allocate
from fairshare.policies import REGISTRY, make_policy
from fairshare.policies.base import PolicyModeError

ALL = sorted(REGISTRY)
#: policies whose static allocation ignores job weights by design
IGNORES_WEIGHTS = {"fifo"}
TOL = 1e-9


def mixed_scenario():
    """Hierarchy with an empty queue, a FIFO queue, zero demands, a multiclass job and
    heterogeneous nodes: the shapes every policy must cope with."""
    return scenario(
        nodes=[{"name": "cpu", "count": 2, "capacity": {"cpu": 16, "mem": 64}},
               {"name": "gpu", "count": 1, "capacity": {"cpu": 16, "mem": 64, "gpu": 4}}],
        queues=[q("prod", 2, q("web"), q("batch", 1, order="fifo")), q("dev"), q("empty")],
        jobs=[job("web1", {"cpu": 2, "mem": 4}, "prod.web"),
              job("etl1", {"cpu": 1, "mem": 8}, "prod.batch", submit=0),
              job("etl2", {"cpu": 4, "mem": 2}, "prod.batch", submit=10),
              job("train", {}, "dev", classes=[{"class": "gpu", "demand": {"cpu": 1, "gpu": 1}, "count": 10},
                                               {"class": "prep", "demand": {"cpu": 2, "mem": 2}, "count": 30}]),
              job("notebook", {"mem": 3}, "dev", weight=2),
              job("root_job", {"cpu": 1, "mem": 1})])


def static_or_refused(policy: str, sc, **kw):
    try:
        return allocate(sc, policy, **kw)
    except PolicyModeError as exc:
        assert policy in str(exc), "the refusal must name the policy"
        pytest.skip(f"{policy}: no allocation in this mode ({exc})")


@pytest.mark.parametrize("policy", ALL)
def test_registered_under_its_name_and_cites_its_paper(policy):
    cls = REGISTRY[policy]
    assert cls.name == policy
    assert cls.citation and any(ch.isdigit() for ch in cls.citation), "citation names a section"
    doc = sys.modules[cls.__module__].__doc__ or ""
    assert "Sec." in doc or "Alg." in doc or "baseline" in doc, f"{cls.__module__} docstring must cite the paper"
    make_policy(policy)  # default options construct


@pytest.mark.parametrize("discrete", [False, True], ids=["divisible", "discrete"])
@pytest.mark.parametrize("policy", ALL)
def test_capacity_never_exceeded_and_contract_shape(policy, discrete):
    sc = mixed_scenario()
    alloc = static_or_refused(policy, sc, discrete=discrete)
    for r, cap in enumerate(sc.capacity):
        assert sum(ja.allocation[r] for ja in alloc.jobs.values()) <= cap * (1 + TOL)
    out = alloc.to_json()
    assert set(out) >= {"policy", "mode", "resources", "capacity", "jobs", "queues", "utilization"}
    assert out["mode"] == ("discrete" if discrete else "divisible")
    assert set(out["jobs"]) == {j.name for j in sc.jobs}
    assert set(out["queues"]) == {"prod", "prod.web", "prod.batch", "dev", "empty"}
    assert out["queues"]["empty"]["dominant_share"] == 0
    for ja in out["jobs"].values():
        assert set(ja) >= {"tasks", "tasks_by_class", "allocation", "dominant_share"}
        assert ja["tasks"] == pytest.approx(sum(ja["tasks_by_class"].values()))
        assert all(x >= -1e-12 for x in ja["allocation"].values())


@pytest.mark.parametrize("policy", ALL)
def test_discrete_placement_matches_tasks_and_fits_nodes(policy):
    sc = mixed_scenario()
    alloc = static_or_refused(policy, sc, discrete=True)
    nodes = {n.name: n for n in sc.cluster.nodes}
    placed: dict[str, dict[str, int]] = {}
    for node_name, per_job in alloc.placement.items():
        used = [0.0] * sc.m
        for job_name, per_class in per_job.items():
            for cls in sc.job(job_name).classes:
                k = per_class.get(cls.name, 0)
                placed.setdefault(job_name, {}).setdefault(cls.name, 0)
                placed[job_name][cls.name] += k
                for r in range(sc.m):
                    used[r] += k * cls.demand[r]
        assert all(u <= c + 1e-9 for u, c in zip(used, nodes[node_name].capacity))
    for name, ja in alloc.jobs.items():
        for cls_name, k in ja.tasks_by_class.items():
            assert k == placed.get(name, {}).get(cls_name, 0)
            assert k == int(k), "whole tasks"


@pytest.mark.parametrize("policy", ALL)
def test_deterministic_and_does_not_mutate_the_scenario(policy):
    sc = mixed_scenario()
    before = copy.deepcopy(sc)
    first = static_or_refused(policy, sc)
    second = allocate(sc, policy)
    assert first.to_json() == second.to_json()
    assert repr(sc.jobs) == repr(before.jobs) and repr(sc.cluster) == repr(before.cluster)


@pytest.mark.parametrize("policy", ALL)
def test_no_jobs_gives_an_empty_allocation(policy):
    sc = scenario(capacity={"cpu": 4, "mem": 8}, queues=[q("a")], jobs=[])
    alloc = static_or_refused(policy, sc)
    assert alloc.jobs == {}
    assert alloc.utilization == (0.0, 0.0)
    assert alloc.queues["a"].dominant_share == 0


@pytest.mark.parametrize("policy", ALL)
def test_weights_are_respected(policy):
    # Two identical CPU-only jobs with weights 2 and 1 on 9 CPUs: weighted fairness gives
    # 2/3 and 1/3 of the CPUs -> 6 and 3 tasks (DRF Sec. 4.3; single resource: weighted
    # max-min fairness).
    sc = scenario(capacity={"cpu": 9, "mem": 9},
                  jobs=[job("heavy", {"cpu": 1}, weight=2), job("light", {"cpu": 1}, weight=1)])
    alloc = static_or_refused(policy, sc)
    heavy, light = alloc.jobs["heavy"].tasks, alloc.jobs["light"].tasks
    assert heavy + light == pytest.approx(9.0, rel=1e-9)
    if policy in IGNORES_WEIGHTS:
        return
    assert heavy == pytest.approx(6.0, rel=1e-7) and light == pytest.approx(3.0, rel=1e-7)


@pytest.mark.parametrize("policy", ALL)
def test_counts_are_caps_with_respect_counts(policy):
    # A job with count 0 gets nothing; one with count 2 at most 2 tasks; the rest goes on.
    sc = scenario(capacity={"cpu": 10, "mem": 10},
                  jobs=[job("none", {"cpu": 1}, count=0), job("two", {"cpu": 1, "mem": 1}, count=2),
                        job("open", {"cpu": 1, "mem": 1})])
    alloc = static_or_refused(policy, sc, respect_counts=True)
    assert alloc.jobs["none"].tasks == 0
    assert alloc.jobs["two"].tasks <= 2 + 1e-9


@pytest.mark.parametrize("policy", sorted(name for name, cls in REGISTRY.items()))
def test_unknown_options_are_refused(policy):
    with pytest.raises(ValueError, match=policy):
        make_policy(policy, no_such_option=True)
