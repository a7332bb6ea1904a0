"""The static checks: what every policy's static allocation must satisfy.

Each check builds its scenario, asks ``policy_factory()`` for the static allocation
(``fairshare.allocate`` with the policy object: divisible, or whole tasks on the nodes)
and raises ``AssertionError`` naming the policy and what went wrong. A policy without a
static allocation in the mode asked must refuse it with :class:`PolicyModeError` naming
itself, never crash or return something made up; the check then raises
:class:`NotApplicable` (reported as skipped, with the refusal).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

from fairshare.api import allocate
from fairshare.conformance.workloads import job, mixed_scenario, q, scenario
from fairshare.model.allocation import Allocation
from fairshare.model.resources import fit_limit
from fairshare.model.scenario import Scenario
from fairshare.policies import Policy, PolicyModeError

PolicyFactory = Callable[[], Policy]
TOL = 1e-9


class NotApplicable(Exception):
    """The check has nothing to say about this policy (it has no static allocation in
    the mode asked): a skip with the reason, neither a pass nor a failure."""


def static_or_refused(policy: Policy, sc: Scenario, **kw) -> Allocation:
    try:
        return allocate(sc, policy, **kw)
    except PolicyModeError as exc:
        assert policy.name in str(exc), f"{policy!r}: the refusal must name the policy: {exc}"
        raise NotApplicable(f"{policy.name}: no allocation in this mode ({exc})") from None


def _approx(got: float, want: float, rel: float = 1e-6) -> bool:
    """pytest.approx's default: relative ``rel``, absolute 1e-12."""
    return math.isclose(got, want, rel_tol=rel, abs_tol=1e-12)


def _check_capacity_and_contract_shape(policy_factory: PolicyFactory, discrete: bool) -> None:
    sc = mixed_scenario()
    policy = policy_factory()
    alloc = static_or_refused(policy, sc, discrete=discrete)
    for r, cap in enumerate(sc.capacity):
        used = sum(ja.allocation[r] for ja in alloc.jobs.values())
        assert used <= fit_limit(cap), f"{policy!r}: resource {sc.resources[r]} allocated {used} > capacity {cap}"
    out = alloc.to_json()
    missing = {"policy", "mode", "resources", "capacity", "jobs", "queues", "utilization"} - set(out)
    assert not missing, f"{policy!r}: the allocation's JSON lacks {sorted(missing)}"
    assert out["mode"] == ("discrete" if discrete else "divisible"), f"{policy!r}: mode {out['mode']!r}"
    assert set(out["jobs"]) == {j.name for j in sc.jobs}, f"{policy!r}: jobs {sorted(out['jobs'])}"
    assert set(out["queues"]) == {"prod", "prod.web", "prod.batch", "dev", "empty"}, \
        f"{policy!r}: queues {sorted(out['queues'])}"
    assert out["queues"]["empty"]["dominant_share"] == 0, f"{policy!r}: the empty queue has a share"
    for name, ja in out["jobs"].items():
        assert set(ja) >= {"tasks", "tasks_by_class", "allocation", "dominant_share"}, f"{policy!r}: job {name}: {ja}"
        assert _approx(ja["tasks"], sum(ja["tasks_by_class"].values())), \
            f"{policy!r}: job {name}'s tasks {ja['tasks']} are not the sum of its classes' {ja['tasks_by_class']}"
        assert all(x >= -1e-12 for x in ja["allocation"].values()), f"{policy!r}: job {name} allocation {ja}"


def check_capacity_and_contract_shape_divisible(policy_factory: PolicyFactory) -> None:
    """The divisible allocation of a mixed scenario (hierarchy, an empty queue, a FIFO
    queue, a multiclass job, heterogeneous nodes) stays within capacity and has the
    contract's JSON shape: every job and queue, tasks the sum of the classes' tasks, no
    negative allocation, the empty queue at 0."""
    _check_capacity_and_contract_shape(policy_factory, discrete=False)


def check_capacity_and_contract_shape_discrete(policy_factory: PolicyFactory) -> None:
    """The same for the whole-task allocation on the nodes (DRF Sec. 6.2)."""
    _check_capacity_and_contract_shape(policy_factory, discrete=True)


def check_discrete_placement_matches_tasks_and_fits_nodes(policy_factory: PolicyFactory) -> None:
    """The whole-task allocation's placement puts exactly each job's tasks of each class
    on the nodes, whole, and every node holds at most its capacity."""
    sc = mixed_scenario()
    policy = policy_factory()
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
        assert all(u <= fit_limit(c) for u, c in zip(used, nodes[node_name].capacity)), \
            f"{policy!r}: node {node_name} holds {used} > {nodes[node_name].capacity}"
    for name, ja in alloc.jobs.items():
        for cls_name, k in ja.tasks_by_class.items():
            assert k == placed.get(name, {}).get(cls_name, 0), \
                f"{policy!r}: {name}/{cls_name} has {k} tasks but {placed.get(name, {}).get(cls_name, 0)} placed"
            assert k == int(k), f"{policy!r}: {name}/{cls_name}: {k} tasks, not whole tasks"


def check_deterministic_and_does_not_mutate_the_scenario(policy_factory: PolicyFactory) -> None:
    """Two policy objects give the same allocation of one scenario, and leave it as it was."""
    sc = mixed_scenario()
    before = copy.deepcopy(sc)
    policy = policy_factory()
    first = static_or_refused(policy, sc)
    second = allocate(sc, policy_factory())
    assert first.to_json() == second.to_json(), f"{policy!r}: two allocations of one scenario differ"
    assert repr(sc.jobs) == repr(before.jobs) and repr(sc.cluster) == repr(before.cluster), \
        f"{policy!r}: the allocation mutated the scenario"


def check_no_jobs_gives_an_empty_allocation(policy_factory: PolicyFactory) -> None:
    """No jobs: no job in the allocation, utilization 0, the queue's share 0."""
    sc = scenario(capacity={"cpu": 4, "mem": 8}, queues=[q("a")], jobs=[])
    policy = policy_factory()
    alloc = static_or_refused(policy, sc)
    assert alloc.jobs == {}, f"{policy!r}: jobs {sorted(alloc.jobs)} with none submitted"
    assert alloc.utilization == (0.0, 0.0), f"{policy!r}: utilization {alloc.utilization} with no jobs"
    assert alloc.queues["a"].dominant_share == 0, f"{policy!r}: an empty queue has a share"


def check_weights_are_respected(policy_factory: PolicyFactory) -> None:
    """Two identical CPU-only jobs with weights 2 and 1 on 9 CPUs: weighted fairness gives
    2/3 and 1/3 of the CPUs -> 6 and 3 tasks (DRF Sec. 4.3; single resource: weighted
    max-min fairness), and every CPU is used."""
    sc = scenario(capacity={"cpu": 9, "mem": 9},
                  jobs=[job("heavy", {"cpu": 1}, weight=2), job("light", {"cpu": 1}, weight=1)])
    policy = policy_factory()
    alloc = static_or_refused(policy, sc)
    heavy, light = alloc.jobs["heavy"].tasks, alloc.jobs["light"].tasks
    assert _approx(heavy + light, 9.0, rel=1e-9), f"{policy!r}: {heavy} + {light} tasks on 9 CPUs"
    assert _approx(heavy, 6.0, rel=1e-7) and _approx(light, 3.0, rel=1e-7), \
        f"{policy!r}: weights 2 : 1 give {heavy} : {light} tasks, not 6 : 3"


def check_counts_are_caps_with_respect_counts(policy_factory: PolicyFactory) -> None:
    """With ``respect_counts``, a job with count 0 gets nothing and one with count 2 at
    most 2 tasks; the rest goes on."""
    sc = scenario(capacity={"cpu": 10, "mem": 10},
                  jobs=[job("none", {"cpu": 1}, count=0), job("two", {"cpu": 1, "mem": 1}, count=2),
                        job("open", {"cpu": 1, "mem": 1})])
    policy = policy_factory()
    alloc = static_or_refused(policy, sc, respect_counts=True)
    assert alloc.jobs["none"].tasks == 0, f"{policy!r}: a job of count 0 got {alloc.jobs['none'].tasks} tasks"
    assert alloc.jobs["two"].tasks <= 2 + 1e-9, f"{policy!r}: a job of count 2 got {alloc.jobs['two'].tasks} tasks"
