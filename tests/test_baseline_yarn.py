"""``yarn-fair``: YARN FairScheduler's comparators, on the cases of Hadoop's own tests and
docs, and a simulated run that serves a queue's min share first.

Sources (Apache Hadoop, Apache-2.0), ``hadoop-yarn-server-resourcemanager``:
``src/test/java/.../scheduler/fair/policies/TestDominantResourceFairnessPolicy.java``
(``comparator.compare(s1, s2) < 0``: s1 gets a container first; resources in YARN's
order, memory then vcores) and the ``FairShareComparator`` javadoc of
``src/main/java/.../scheduler/fair/policies/FairSharePolicy.java``.
"""

from __future__ import annotations

import pytest

from fairshare.model.errors import ScenarioError
from fairshare.model.loader import parse_scenario
from fairshare.policies import make_policy
from fairshare.policies.yarn_fair import drf_key, fair_key
from fairshare.sim import SimOptions
from fairshare.sim.simulator import simulate

NO_MIN = (0.0, 0.0)


def drf_first(cluster, s1, s2) -> bool:
    """Whether s1 = (usage, weight, min share) goes before s2 on ``cluster``."""
    (u1, w1, m1), (u2, w2, m2) = s1, s2
    return drf_key(u1, m1, cluster, w1) < drf_key(u2, m2, cluster, w2)


# (test name in TestDominantResourceFairnessPolicy, cluster <mem, vcores>, s1, s2), each
# schedulable (usage, weight, min share); s1 must come first
DRF_CASES = [
    # shares <1000/8000, 1/4> = (.125, .25) and (.25, .25): dominant .25 = .25, then .125 < .25
    ("testSameDominantResource", (8000, 4), ((1000, 1), 1, NO_MIN), ((2000, 1), 1, NO_MIN)),
    # (.5, .375) against (.25, .625): dominant .5 < .625
    ("testDifferentDominantResource", (8000, 8), ((4000, 3), 1, NO_MIN), ((2000, 5), 1, NO_MIN)),
    # s1: dominant vcores 5/8, 5 < min 6: needy; s2 has no min share: s1 first
    ("testOneIsNeedy", (8000, 8), ((2000, 5), 1, (0, 6)), ((4000, 3), 1, NO_MIN)),
    # no min shares: dominant 2000/8000 < 4000/8000
    ("testBothAreNeedy, part 1", (8000, 100), ((2000, 5), 1, NO_MIN), ((4000, 3), 1, NO_MIN)),
    # both needy on memory: min share ratios 2000/3000 = 2/3 < 4000/5000 = 4/5
    ("testBothAreNeedy, part 2", (8000, 100), ((2000, 5), 1, (3000, 6)), ((4000, 3), 1, (5000, 4))),
    # weight 2: (3000/16000, 1/16) = (.1875, .0625) against (.25, .125)
    ("testEvenWeightsSameDominantResource, 1", (8000, 8), ((3000, 1), 2, NO_MIN), ((2000, 1), 1, NO_MIN)),
    # weight 2: (1000/16000, 3/16) -> .1875 against (1000/8000, 2/8) -> .25
    ("testEvenWeightsSameDominantResource, 2", (8000, 8), ((1000, 3), 2, NO_MIN), ((1000, 2), 1, NO_MIN)),
    # .1875 against (2000/8000, 1/8) -> .25
    ("testEvenWeightsDifferentDominantResource, 1", (8000, 8), ((1000, 3), 2, NO_MIN), ((2000, 1), 1, NO_MIN)),
    # .1875 against (1000/8000, 2/8) -> .25
    ("testEvenWeightsDifferentDominantResource, 2", (8000, 8), ((3000, 1), 2, NO_MIN), ((1000, 2), 1, NO_MIN)),
    # on <8000, 6>: (1/4, 1/6) against (1/8, 1/3): 1/4 < 1/3
    ("testCompareSchedulablesWithClusterResourceChanges, 2", (8000, 6), ((2000, 1), 1, NO_MIN),
     ((1000, 2), 1, NO_MIN)),
    # on <4000, 5>: s2 = (1/4, 2/5) before s1 = (1/2, 1/5): 2/5 < 1/2
    ("testCompareSchedulablesWithClusterResourceChanges, 1", (4000, 5), ((1000, 2), 1, NO_MIN),
     ((2000, 1), 1, NO_MIN)),
]


@pytest.mark.parametrize("case, cluster, s1, s2", DRF_CASES, ids=[c[0] for c in DRF_CASES])
def test_drf_comparator_orders_as_hadoops_tests(case, cluster, s1, s2):
    assert drf_first(cluster, s1, s2)
    assert not drf_first(cluster, s2, s1)


def test_fair_comparator_javadoc_example():
    # FairShareComparator's javadoc: "if job A has 8 out of a min share of 10 tasks and job
    # B has 50 out of a min share of 100, then job B is scheduled next, because B is at 50%
    # of its min share and A is at 80%"
    a, b = fair_key(8, 10, 1), fair_key(50, 100, 1)
    assert a == (0, 0.8) and b == (0, 0.5) and b < a
    # above its min share a schedulable is compared by usage / weight: 30 / 3 = 10 < 20 / 1
    assert fair_key(30, 10, 3) == (1, 10.0) < fair_key(20, 0, 1) == (1, 20.0)
    # needy (below its min share) goes before any schedulable that is not
    assert fair_key(99, 100, 1) < fair_key(0.5, 0, 1)


def run(queues, jobs, peers=None, until=None):
    doc = {"resources": ["cpu", "memory"],
           "cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 8, "memory": 32}}]},
           "queues": queues, "jobs": jobs}
    if peers is not None:
        doc["peers"] = {"yarn-fair": peers}
    return simulate(parse_scenario(doc), "yarn-fair", SimOptions(until=until))


def queue_rows(result, queue):
    return [(t, n) for t, kind, entity, n, _share, _alloc in result.rows if kind == "queue" and entity == queue]


def test_min_share_is_served_first():
    # b fills the 8 CPUs from t=0 with 10 s tasks; a (min share 6 CPUs, 24 GB) arrives at
    # t=5. At t=10 the 8 freed slots go to a first, up to its min share (6), then by
    # usage / weight: a at 24 GB (needy no more, 24 / 1) against b at 0: b gets the last 2
    result = run([{"name": "a", "guarantee": {"cpu": 6, "memory": 24}}, {"name": "b"}],
                 [{"name": "jb", "queue": "b", "submit": 0,
                   "tasks": [{"count": 30, "demand": {"cpu": 1, "memory": 4}, "duration": 10}]},
                  {"name": "ja", "queue": "a", "submit": 5,
                   "tasks": [{"count": 30, "demand": {"cpu": 1, "memory": 4}, "duration": 10}]}])
    assert dict(queue_rows(result, "a"))[10.0] == 6
    assert dict(queue_rows(result, "b"))[10.0] == 2


def test_fair_policy_compares_memory_alone_and_drf_all_resources():
    # two queues, equal weights: a's tasks need 1 CPU + 1 GB, b's 1 CPU + 4 GB. fair
    # (default: memory alone) equalises memory, so a runs more tasks; drf equalises
    # dominant shares (a's CPU 1/8 per task, b's CPU and memory 1/8 = 4/32): 4 and 4
    jobs = [{"name": "ja", "queue": "a", "submit": 0, "tasks": [{"count": 100, "demand": {"cpu": 1, "memory": 1},
                                                                 "duration": 10}]},
            {"name": "jb", "queue": "b", "submit": 0, "tasks": [{"count": 100, "demand": {"cpu": 1, "memory": 4},
                                                                 "duration": 10}]}]
    queues = [{"name": "a"}, {"name": "b"}]
    fair = run(queues, jobs, until=5)
    a, b = dict(queue_rows(fair, "a"))[0.0], dict(queue_rows(fair, "b"))[0.0]
    # picks by memory held (ties: queue name, a first): a 0->1, b 0->4, a 1->2->3->4,
    # a (4 = 4, tie) ->5, b 4->8, a 5->6: the 8 CPUs are full with a 6 tasks, b 2
    assert (a, b) == (6, 2)
    drf = run(queues, jobs, peers={"default_policy": "drf"}, until=5)
    # cpu shares a/8 against b's dominant share max(b/8, 4b/32) = b/8: equal, 4 and 4
    assert dict(queue_rows(drf, "a"))[0.0] == dict(queue_rows(drf, "b"))[0.0] == 4


def test_fifo_leaf_runs_its_jobs_in_submission_order():
    jobs = [{"name": "first", "queue": "a", "submit": 0, "weight": 1,
             "tasks": [{"count": 16, "demand": {"cpu": 1, "memory": 1}, "duration": 10}]},
            {"name": "second", "queue": "a", "submit": 0, "weight": 5,
             "tasks": [{"count": 16, "demand": {"cpu": 1, "memory": 1}, "duration": 10}]}]
    result = run([{"name": "a"}], jobs, peers={"queue_policies": {"a": "fifo"}})
    # first holds all 8 slots until its 16 tasks are done, whatever second's weight
    assert result.jobs["first"].finish == 20.0 and result.jobs["second"].start == 20.0


@pytest.mark.parametrize("peers, path", [
    ({"default_policy": "lottery"}, "peers.yarn-fair.default_policy"),
    ({"queue_policies": {"nope": "drf"}}, "peers.yarn-fair.queue_policies.nope"),
    ({"queue_policies": {"p": "fifo"}}, "peers.yarn-fair.queue_policies.p"),  # fifo on a parent
    ({"queue_policies": {"p.c": "drf"}}, "peers.yarn-fair.queue_policies.p.c"),  # drf under fair
    ({"memory_resource": "ram"}, "peers.yarn-fair.memory_resource"),
    ({"preemption_threshold": {"p": 2}}, "peers.yarn-fair.preemption_threshold.p"),
    ({"min_share_preemption_timeout": {"p": -1}}, "peers.yarn-fair.min_share_preemption_timeout.p"),
    ({"bogus": 1}, "peers.yarn-fair.bogus"),
])
def test_bad_settings_are_named_by_path(peers, path):
    doc = {"resources": ["cpu", "memory"], "cluster": {"capacity": {"cpu": 4, "memory": 8}},
           "queues": [{"name": "p", "children": [{"name": "c"}]}], "jobs": [], "peers": {"yarn-fair": peers}}
    with pytest.raises(ScenarioError) as info:
        make_policy("yarn-fair").configured(parse_scenario(doc))
    assert path in info.value.paths
