"""Parity: the incremental online sorters decide exactly as the per-decision reference.

The reference (``Policy.reference_sorter``, ``policies/machinery/reference.py``) recomputes every share per decision, as the
papers' pseudo-code does; the fast sorters update only the changed path. On random
hierarchies, demands, counts, durations and node failures, both must produce the same
sequence of (time, job, class, node) launches.
"""

from __future__ import annotations

import dataclasses
import random
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from replay import replay
from strategies import scenarios

from fairshare.engine import Scheduler
from fairshare.model import Node
from fairshare.policies import hdrf_online, make_policy
from fairshare.policies.machinery import descent
from fairshare.policies.machinery.reference import ReferenceSorter
from fairshare.policies.machinery.views import EveryChild

# (policy, options): each incremental sorter against the same policy's reference sorter
# (Policy.reference_sorter: every share recomputed per decision by the policy's ShareRule)
CASES = [
    ("hdrf", {}),
    ("hdrf", {"rescale": False}),
    ("hdrf", {"ignore_blocked": False}),
    ("hdrf-naive", {}),
    ("capacity", {}),
    ("dff", {}),
    ("drf", {}),
    ("asset", {}),
    ("cpu", {}),
    ("cpu", {"resource": "mem"}),
    ("fifo", {}),
    ("collapsed", {}),
    ("slots", {}),
    ("slots", {"slots": 1}),
]


def run(sc, nodes, policy, options, reference=False, seed=0, node_events=()):
    sorter = None
    if reference:
        capacity = tuple(sum(n.capacity[r] for n in nodes) for r in range(sc.m))
        sorter = make_policy(policy, **options).reference_sorter(sc.resources, sc.queues, capacity)
        assert isinstance(sorter, ReferenceSorter)
    sched = Scheduler(sc.resources, nodes, sc.queues, make_policy(policy, **options), sorter=sorter)
    assert isinstance(sched.sorter, ReferenceSorter) == reference  # (each run uses the sorter meant)
    rng = random.Random(seed)
    lengths = {j.name: rng.choice([1, 2, 3, 5]) for j in sc.jobs}
    return replay(sched, sc.jobs, lambda launch: lengths[launch.job], node_events=node_events)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(max_jobs=8, counts=True), seed=st.integers(0, 100), k=st.integers(1, 4))
@pytest.mark.parametrize("policy, options", CASES)
def test_incremental_sorter_matches_reference(policy, options, sc, seed, k):
    rng = random.Random(seed)
    sc = dataclasses.replace(sc, jobs=tuple(dataclasses.replace(j, submit_s=float(rng.choice([0, 0, 1, 4])))
                                            for j in sc.jobs))
    per_node = tuple(max(c / k, max(j.classes[0].demand[r] for j in sc.jobs)) for r, c in enumerate(sc.capacity))
    nodes = tuple(Node(f"n{i}", per_node) for i in range(k))
    events = [(3.0, "lose", "n0"), (6.0, "add", nodes[0])] if k > 1 else []
    fast = run(sc, nodes, policy, options, seed=seed, node_events=events)
    slow = run(sc, nodes, policy, options, reference=True, seed=seed, node_events=events)
    assert fast == slow


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios(max_jobs=8, counts=True), seed=st.integers(0, 100))
@pytest.mark.parametrize("policy", ["hdrf", "capacity"])
def test_exact_resums_among_finished_jobs_match_reference(policy, sc, seed):
    """The H-DRF sorter rebuilds a node's running sums from its children every
    ``REBUILD_EVERY`` updates (``_resum``), over its children that are not tombstones
    (finished jobs keep their slot): with a re-sum at every other update, while jobs
    finish and leave tombstones, the decisions are still the reference's."""
    from fairshare.policies import hdrf_online

    rng = random.Random(seed)
    sc = dataclasses.replace(sc, jobs=tuple(dataclasses.replace(j, submit_s=float(rng.choice([0, 1, 2, 5])))
                                            for j in sc.jobs))
    nodes = (Node("n0", tuple(max(c / 2, max(j.classes[0].demand[r] for j in sc.jobs))
                              for r, c in enumerate(sc.capacity))),) * 1
    calls = []
    original = hdrf_online.HDRFSorter._resum

    def counted(self, view, p):
        calls.append(p)
        return original(self, view, p)

    with mock.patch.object(hdrf_online, "REBUILD_EVERY", 2), \
            mock.patch.object(hdrf_online.HDRFSorter, "_resum", counted):
        fast = run(sc, nodes, policy, {}, seed=seed)
    slow = run(sc, nodes, policy, {}, reference=True, seed=seed)
    assert fast == slow
    assume(calls)  # (only examples where re-sums ran count; none at all fails the test)


def test_resum_counts_a_removed_job_not_yet_reposted():
    # A counterexample hypothesis found for the test above (capacity, seed 76; the jobs
    # without tasks dropped). j4 (in q10.q22.q31) ends at t = 6 and is removed (a
    # tombstone, out of q31's children); capacity decides nothing while a resource is
    # saturated, so the view catches up only at t = 10, in one batch of j2, j0, j4 and j1
    # in which j0's repost re-sums q31 (every 2nd update) before j4's repost. The re-sum
    # left j4's usage out and j4's repost then took it out again: q31's mem usage went to
    # -1, q10.q22 ranked below q10.q20 and j0 launched where the reference launches j2.
    from builders import job, q, scenario

    from fairshare.policies import hdrf_online

    def demand(cpu=0, mem=0, gpu=0, disk=0):
        return {r: x for r, x in (("cpu", cpu), ("mem", mem), ("gpu", gpu), ("disk", disk)) if x}

    sc = scenario(capacity={"cpu": 4, "mem": 12, "gpu": 4, "disk": 4},
                  queues=[q("q10", 1, q("q20", 1, q("q30")), q("q21", 1, q("q30")), q("q22", 1, q("q30"), q("q31"))),
                          q("q11"), q("q12")],
                  jobs=[job("j0", demand(mem=1), "q10.q22.q31", count=4, submit=2),
                        job("j1", demand(mem=2), "q10.q22.q30", count=2, submit=5),
                        job("j2", demand(disk=1), "q10.q20", count=5, submit=5),
                        job("j3", demand(mem=1), count=2, submit=1),
                        job("j4", demand(mem=1), "q10.q22.q31", count=3, submit=2)])
    nodes = (Node("n0", (2.0, 6.0, 2.0, 3.0)),)
    lengths = {"j0": 3, "j1": 5, "j2": 5, "j3": 2, "j4": 3}
    unposted_at_resum = []
    original = hdrf_online.HDRFSorter._resum

    def counted(self, view, p):  # (the path this scenario is for: a re-sum before a removed job's repost)
        unposted_at_resum.extend(c for c in view.pending if self.parent[c] == p and not self.key[c]
                                 and any(view.contrib_vec[c * self.m:(c + 1) * self.m]))
        return original(self, view, p)

    def launches(reference: bool):
        sorter = make_policy("capacity").reference_sorter(sc.resources, sc.queues, nodes[0].capacity) \
            if reference else None
        sched = Scheduler(sc.resources, nodes, sc.queues, make_policy("capacity"), sorter=sorter)
        return replay(sched, sc.jobs, lambda launch: lengths[launch.job])

    with mock.patch.object(hdrf_online, "REBUILD_EVERY", 2), \
            mock.patch.object(hdrf_online.HDRFSorter, "_resum", counted):
        fast = launches(reference=False)
    assert unposted_at_resum
    assert fast == launches(reference=True)


def test_hdrf_section_3_3_naive_starves_hdrf_does_not():
    # H-DRF Sec. 3.3 on Fig. 4(a): 10 CPUs, 10 GPUs (10 nodes of <1, 1>), three unbounded
    # jobs. Both start at n1,1 = n2,1 = 5 CPUs and n2,2 = 10 GPUs (Fig. 4(b)). As n2,1's
    # tasks finish, naive H-DRF sees n2 at dominant share 1.0 (its GPUs) and hands every
    # freed CPU to n1,1 until n2,1 runs nothing; H-DRF rescales n2,2 to n2,1's share and
    # gives each freed CPU back to n2,1.
    from builders import job, q, scenario

    sc = scenario(capacity={"cpu": 10, "gpu": 10}, queues=[q("n1"), q("n2")],
                  jobs=[job("n11", {"cpu": 1}, "n1"), job("n21", {"cpu": 1}, "n2"), job("n22", {"gpu": 1}, "n2")])
    nodes = tuple(Node(f"n{i}", (1.0, 1.0)) for i in range(10))
    lengths = {"n11": 1000.0, "n22": 1000.0, "n21": 1.0}  # only n2,1's tasks finish and restart
    for policy, n21_running in (("hdrf", 5), ("hdrf-naive", 0)):
        sched = Scheduler(sc.resources, nodes, sc.queues, make_policy(policy))
        replay(sched, sc.jobs, lambda launch: lengths[launch.job], until=20)
        running = {name: sum(1 for t in sched.tasks.values() if t.job == name) for name in ("n11", "n21", "n22")}
        assert running["n21"] == n21_running, (policy, running)
        assert running["n22"] == 10


def test_headroom_keeps_room_for_the_largest_task_without_blocking_it():
    # H-DRF Sec. 5 headroom on one server <6 GB, 4 CPU, 1 GPU>; largest task <1.5 GB, 1 CPU,
    # 1 GPU> (max over a CPU job <1.5, 1, 0> and a GPU job <1, 0, 1>). A CPU task uses
    # 1.5 GB and 1 CPU, as much as the largest task, so it is not held back; a GPU task
    # uses 1 GPU (as large as the largest: may take the last GPU) and 1 GB (smaller than
    # 1.5: must leave 1.5 GB). The GPU task must run (the bug was needing 2 free GPUs).
    from builders import job, scenario

    sc = scenario(nodes=[{"name": "s", "capacity": {"mem": 6, "cpu": 4, "gpu": 1}}],
                  jobs=[job("cpu", {"mem": 1.5, "cpu": 1}, count=2), job("gpu", {"mem": 1, "gpu": 1}, count=1)])
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"), headroom=True)
    for j in sc.jobs:
        sched.submit(j, 0.0)
    started = sorted(launch.job for launch in sched.schedule(0.0))
    assert started == ["cpu", "cpu", "gpu"]  # memory 1.5 + 1.5 + 1 = 4 <= 6 - 1.5 headroom


# --- the saturated steady state: many saturated sets, views caught up in batches -------------

def steady_scenario(seed: int):
    """A random 3-level hierarchy on a cluster that the jobs more than fill: four
    resources, demands with zeros (so jobs block under different saturated sets), random
    queue and job weights, unbounded jobs (they stay demanding: a full cluster)."""
    from fairshare.model import parse_scenario

    rng = random.Random(seed)
    res = ["cpu", "mem", "gpu", "disk"]
    leaves: list[str] = []

    def grow(prefix: str, depth: int) -> list[dict]:
        out = []
        for k in range(rng.randint(2, 3)):
            path = f"{prefix}.q{k}" if prefix else f"q{k}"
            node: dict = {"name": f"q{k}", "weight": rng.choice([1, 1, 2, 3])}
            if depth < 3 and rng.random() < 0.8:
                node["children"] = grow(path, depth + 1)
            else:
                leaves.append(path)
            out.append(node)
        return out

    queues = grow("", 1)
    jobs = []
    for i in range(rng.randint(25, 40)):
        demand = {r: (0 if rng.random() < 0.3 else rng.choice([0.5, 1, 2, 4])) for r in res}
        if not any(demand.values()):
            demand[rng.choice(res)] = 1
        jobs.append({"name": f"j{i}", "queue": rng.choice(leaves), "weight": rng.choice([1, 1, 2]),
                     "tasks": [{"demand": demand}]})
    nodes = [{"name": f"n{i}", "capacity": {r: 8 for r in res}} for i in range(rng.randint(4, 8))]
    return parse_scenario({"resources": res, "cluster": {"nodes": nodes}, "queues": queues, "jobs": jobs},
                          f"<steady seed={seed}>")


def steady_run(sc, policy: str, *, reference: bool, seed: int, plain: bool):
    """Fill the cluster, then finish one running task at a time (a seeded choice) and
    refill, as ``benchmarks/bench_decisions.py`` does; a node is lost and comes back
    midway. Returns every launch and, for the incremental sorter, how often its
    views were caught up in a batch, its pick heaps renewed before a descent, and a
    candidate decision left the current view's catch-up for later (it read no key)."""
    sorter = None
    if reference:
        sorter = make_policy(policy).reference_sorter(sc.resources, sc.queues, sc.capacity)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy), sorter=sorter)
    if plain:  # every decision a descent (no candidate lists)
        sched.pick_among_max = -1
        sched.freed_scan_max = -1
    seen = {"batches": 0, "flushes": 0, "deferred": 0, "sets": set(), "every_child": 0}
    if not reference:
        # the pick heaps' renewal, as a descent reads a heap
        views, replay_view, flush = sched.sorter.views, sched.sorter.views._replay, sched.sorter._renew_deferred

        def counted_replay(view, leaves):
            seen["batches"] += len(leaves) > 1
            replay_view(view, leaves)

        def counted_flush(view, *nodes):
            seen["flushes"] += 1
            seen["every_child"] += isinstance(nodes[0], EveryChild)  # (H-DRF's marks standing for every child)
            flush(view, *nodes)

        views._replay = counted_replay
        sched.sorter._renew_deferred = counted_flush
        set_saturated = sched.sorter.set_saturated

        def counted_set(resources):
            seen["sets"].add(frozenset(resources))
            set_saturated(resources)

        sched.sorter.set_saturated = counted_set
        pick_among = sched.sorter.pick_among

        def counted_among(names, runnable, now=0.0):
            name = pick_among(names, runnable, now)
            # a decision that read no key leaves the current view's catch-up for later
            seen["deferred"] += bool(views.current.pending)
            return name

        sched.sorter.pick_among = counted_among
    for job in sc.jobs:
        sched.submit(job, 0.0)
    log = [(0.0, launch.job, launch.node) for launch in sched.schedule(0.0)]
    rng = random.Random(seed)
    lost = sc.cluster.nodes[1]
    for k in range(1, 400):
        now = float(k)
        if k == 150:
            sched.lose_node(lost.name, now)
        elif k == 250:
            sched.add_node(lost, now)
        elif sched.tasks:
            sched.finish(rng.choice(sorted(sched.tasks)), now)
        log.extend((now, launch.job, launch.node) for launch in sched.schedule(now))
    return log, seen


@pytest.mark.parametrize("policy", ["hdrf", "dff"])
@pytest.mark.parametrize("seed", [0, 2, 4, 7])  # (seeds whose clusters saturate in several ways)
def test_steady_state_on_a_full_cluster_matches_reference(policy, seed):
    # every launch of a fill and 400 completions equals the reference's, with the candidate
    # lists (pick_among) and without (every decision a descent of the pick heaps)
    sc = steady_scenario(seed)
    want, _ = steady_run(sc, policy, reference=True, seed=seed, plain=False)
    for plain in (False, True):
        got, seen = steady_run(sc, policy, reference=False, seed=seed, plain=plain)
        assert got == want, plain
        # what this test is for really happened: many saturated sets, views caught up in
        # batches (several leaves at once), pick heaps renewed after deferred re-keys (with
        # the candidate lists most decisions are not descents, so fewer renewals), and
        # (with the candidate lists) decisions that left the view's catch-up for later
        assert len(seen["sets"]) >= 3 and seen["batches"] >= 20, seen
        assert seen["flushes"] >= (20 if plain else 5), seen
        assert plain or seen["deferred"] >= 20, seen
    assert len(want) > 400


@pytest.mark.parametrize("policy", ["hdrf", "dff"])
@pytest.mark.parametrize("seed", [0, 4])
def test_queues_of_a_few_sub_queues_walked_by_the_index_give_the_reference(monkeypatch, policy, seed):
    # while the shapes are restricted, a queue of at most FEW_QUEUES sub-queues (these
    # scenarios' queues of queues) is walked by its sub-queues' keys read then, not by its
    # heap (``descend_tree``, ``ShapeIndex.few_queues``): the same decisions as the
    # reference, and as with every such queue's heap walked (FEW_QUEUES 0)
    sc = steady_scenario(seed)
    want, _ = steady_run(sc, policy, reference=True, seed=seed, plain=False)
    # every decision a descent (no candidate lists), the shapes restricted by the freed
    # nodes' scan as usual
    sorter_class = type(make_policy(policy).online(sc.resources, sc.queues, sc.capacity))
    monkeypatch.setattr(sorter_class, "among_max", -1)
    few_queues = descent.ShapeIndex.few_queues
    walked = [0]

    def counted(self, v):
        answer = few_queues(self, v)
        walked[0] += answer
        return answer

    monkeypatch.setattr(descent.ShapeIndex, "few_queues", counted)
    got, _ = steady_run(sc, policy, reference=False, seed=seed, plain=False)
    assert got == want
    assert walked[0] >= 20, walked  # (such walks happened)
    monkeypatch.setattr(descent, "FEW_QUEUES", 0)
    walked[0] = 0
    got, _ = steady_run(sc, policy, reference=False, seed=seed, plain=False)
    assert got == want and walked[0] == 0


@pytest.mark.parametrize("seed", [0, 2, 4, 7])
def test_hdrf_deferred_marks_standing_for_every_child_give_the_reference(monkeypatch, seed):
    # once a queue's deferred marks are as many as its children they stand for all of
    # them (``views.EveryChild``; from 8 children by default, from one here, so these
    # small queues convert): a descent reading its heap renews every child still there,
    # and the decisions stay the reference's, descents or candidate lists
    monkeypatch.setattr(hdrf_online, "EVERY_CHILD_MIN", 1)
    # (and every queue's heap walked: a queue of a few sub-queues is otherwise walked by
    # the index while the shapes are restricted, its heap not read, ``descent.FEW_QUEUES``)
    monkeypatch.setattr(descent, "FEW_QUEUES", 0)
    sc = steady_scenario(seed)
    want, _ = steady_run(sc, "hdrf", reference=True, seed=seed, plain=False)
    for plain in (False, True):
        got, seen = steady_run(sc, "hdrf", reference=False, seed=seed, plain=plain)
        assert got == want, plain
        assert seen["every_child"] >= (20 if plain else 1), seen  # (such renewals happened)


@pytest.mark.parametrize("policy", ["hdrf", "dff"])
@pytest.mark.parametrize("seed", [0, 4])
def test_a_tree_sorter_renews_a_heaps_pick_entries_only_when_a_descent_reads_it(policy, seed):
    # a re-keyed node's pick entry waits in its parent's ``deferred`` until a descent reads
    # that parent's heap, queues of queues included (not renewed before every descent): the
    # decisions are the reference's (the test above, ``plain``) while descents leave heaps
    # of queues with sub-queues unread and their children's entries deferred
    sc = steady_scenario(seed)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
    sched.pick_among_max = -1  # (every decision a descent)
    sched.freed_scan_max = -1
    sorter = sched.sorter
    read: list[int] = []
    renew = sorter._renew_deferred

    def counted_renew(view, nodes):
        read.append(sorter.parent[next(iter(nodes))])
        renew(view, nodes)

    sorter._renew_deferred = counted_renew
    for job in sc.jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)
    rng = random.Random(seed)
    left_unread = 0
    for k in range(1, 200):
        sched.finish(rng.choice(sorted(sched.tasks)), float(k))
        sched.schedule(float(k))
        view = sorter.views.current
        # after this call's descents: a queue with sub-queues whose children's entries wait
        left_unread += any(p in sorter.has_queues and nodes for p, nodes in view.deferred.items())
    # every heap read was renewed first (its children's entries), and some stayed unread
    assert read and set(read) <= {v for v in range(len(sorter.key)) if not sorter.is_job[v]}
    assert left_unread >= 20, left_unread


@pytest.mark.parametrize("seed", [0, 4])
def test_hdrf_rebuilds_queues_after_their_sub_queues(seed):
    # a view's rebuild takes the queues in ``queues_bottom_up`` (no walk of the whole tree):
    # every queue once, after each of its sub-queues; a rebuilt view is the view the
    # catch-ups kept (the same floats, pool heaps' current entries and deferred marks)
    sc = steady_scenario(seed)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
    sorter = sched.sorter
    queues = [v for v in range(len(sorter.key)) if not sorter.is_job[v]]
    order = sorter.queues_bottom_up
    assert sorted(order) == queues
    assert all(order.index(sorter.parent[q]) > order.index(q) for q in queues if q)
    for job in sc.jobs:
        sched.submit(job, 0.0)
    sched.schedule(0.0)
    rng = random.Random(seed)
    for k in range(1, 60):
        sched.finish(rng.choice(sorted(sched.tasks)), float(k))
        sched.schedule(float(k))
    kept = sorter.view
    fresh = sorter.views._make(kept.saturated)
    sorter.views._rebuild(fresh)
    m = sorter.m
    for q in queues:
        kept_row, fresh_row = kept.usage[q * m:(q + 1) * m], fresh.usage[q * m:(q + 1) * m]
        assert kept_row == pytest.approx(fresh_row, rel=1e-9, abs=1e-12), q
        assert kept.unblocked[q] == fresh.unblocked[q]
        assert set(fresh.deferred.get(q, ())) == {c for c in sorter.children[q] if sorter.live[c] > 0}
