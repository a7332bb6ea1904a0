"""The scheduler's candidate path decides exactly as the plain one.

On a full cluster most jobs' next tasks fit nowhere. ``Scheduler.schedule`` then knows the
few shapes that can run (the shapes that fit on the nodes freed since the last call that
ended with nothing fitting, plus shapes new since; or, within a call, all shapes but those
found to fit nowhere) and lets the sorter choose among the jobs that want them
(``pick_among``) instead of descending past the others. Within a call, jobs found unable to run are
excluded from the sorter's descent, and the descent enters only subtrees holding a job whose
shape may fit (``only_shapes``, ``exclude_shape``: ``machinery.descent.ShapeIndex``). These
are shortcuts, not new rules: with them disabled (``pick_among_max = freed_scan_max = -1``,
``exclude``, ``exclude_shape`` and ``only_shapes`` no-ops) every launch must be the
same. The workloads below are random and meant to cover what can break it: hierarchies
with FIFO queues, multiclass jobs, placement constraints, per-node limits, node failures
and additions, headroom, the three placement strategies, finite and unbounded counts.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import random

import numpy as np
import pytest
from replay import replay

from fairshare.engine import Scheduler, fitmemo
from fairshare.model import parse_scenario
from fairshare.policies import make_policy
from fairshare.policies.machinery.descent import ShapeIndex, descend_tree, pick_among_tree

MODELS = ["T4", "V100", "A10"]


def random_scenario(seed: int, *, jobs: int = 24, nodes: int = 6):
    rng = random.Random(seed)
    res = ["cpu", "mem", "gpu"]

    def queue(name: str, depth: int) -> dict:
        node: dict = {"name": name, "weight": rng.choice([1, 1, 2, 3])}
        if depth < 2 and rng.random() < 0.7:
            node["children"] = [queue(f"{name}{k}", depth + 1) for k in range(rng.randint(1, 3))]
        elif rng.random() < 0.3:
            node["order"] = "fifo"
        return node

    queues = [queue(f"q{k}", 1) for k in range(rng.randint(1, 3))]
    paths: list[str] = []

    def collect(node: dict, prefix: str) -> None:
        path = f"{prefix}.{node['name']}" if prefix else node["name"]
        paths.append(path)
        for child in node.get("children", []):
            collect(child, path)

    for q in queues:
        collect(q, "")
    cluster = [{"name": f"n{i}", "capacity": {"cpu": rng.choice([4, 8]), "mem": rng.choice([8, 16]),
                                               "gpu": rng.choice([1, 2, 4])},
                "attributes": {"gpu_model": MODELS[i % len(MODELS)]}} for i in range(nodes)]
    job_list = []
    for i in range(jobs):
        classes = []
        for c in range(rng.choice([1, 1, 1, 2])):
            task: dict = {"class": f"c{c}",
                          "demand": {"cpu": rng.choice([0.5, 1, 2]), "mem": rng.choice([0, 1, 2, 4]),
                                     "gpu": rng.choice([0, 0, 1, 2])}}
            if rng.random() < 0.8:
                task["count"] = rng.randint(1, 12)
            if rng.random() < 0.2:
                task["constraints"] = {"gpu_model": rng.sample(MODELS, 2)}
            if rng.random() < 0.15:
                task["max_per_node"] = rng.choice([1, 2])
            classes.append(task)
        job_list.append({"name": f"j{i}", "queue": rng.choice(paths), "weight": rng.choice([1, 1, 2]),
                         "submit": rng.choice([0, 0, 0, 1, 2, 5]), "tasks": classes})
    sc = parse_scenario({"resources": res, "cluster": {"nodes": cluster}, "queues": queues, "jobs": job_list},
                        f"<candidates seed={seed}>")
    return sc


def run(sc, policy: str, *, candidates: bool, placement: str, headroom: bool, seed: int):
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy),
                      placement=placement, headroom=headroom)
    rng = random.Random(seed)
    lengths = {j.name: rng.choice([1.0, 1.5, 2.0, 3.0]) for j in sc.jobs}
    calls = {"among": 0, "excluded": 0, "shapes": 0}
    sorter = sched.sorter
    pick_among, exclude, exclude_shape, only_shapes = (sorter.pick_among, sorter.exclude, sorter.exclude_shape,
                                                       sorter.only_shapes)

    def counted(names, runnable, now=0.0):
        calls["among"] += 1
        return pick_among(names, runnable, now)

    def counted_exclude(name):
        calls["excluded"] += 1
        exclude(name)

    def counted_exclude_shape(shape, names):
        calls["excluded"] += 1
        exclude_shape(shape, names)

    def counted_only_shapes(shapes):
        calls["shapes"] += 1
        only_shapes(shapes)

    sorter.pick_among = counted
    sorter.exclude = counted_exclude
    sorter.exclude_shape = counted_exclude_shape
    sorter.only_shapes = counted_only_shapes
    if not candidates:  # the plain path: no candidate lists, no exclusion, no shape filter
        sched.pick_among_max = -1
        sched.freed_scan_max = -1
        sorter.exclude = lambda name: None
        sorter.exclude_shape = lambda shape, names: None
        sorter.only_shapes = lambda shapes: None
    events = [(2.0, "lose", "n1"), (4.0, "add", sc.cluster.nodes[1]), (3.0, "lose", "n4"), (7.0, "add", sc.cluster.nodes[4])]
    log = replay(sched, sc.jobs, lambda launch: lengths[launch.job], node_events=events, until=60.0)
    return log, calls


# the tree sorters (their own pick_among and exclusion) on more seeds; every other online
# policy on fewer (drf, asset, cpu and fifo have their own pick_among, the rest the default)
CASES = ([(policy, seed) for policy in ("hdrf", "dff", "capacity", "hdrf-naive") for seed in range(6)]
         + [(policy, seed) for policy in ("drf", "fifo", "asset", "cpu", "collapsed", "slots", "timefair")
            for seed in range(3)])


@pytest.mark.parametrize("policy, seed", CASES)
def test_candidate_path_launches_as_the_plain_path(policy, seed):
    placement = ["first-fit", "best-fit", "packing"][seed % 3]
    headroom = seed % 2 == 1
    sc = random_scenario(seed)
    fast, _ = run(sc, policy, candidates=True, placement=placement, headroom=headroom, seed=seed)
    plain, plain_calls = run(sc, policy, candidates=False, placement=placement, headroom=headroom, seed=seed)
    assert fast == plain
    assert plain_calls == {"among": 0, "excluded": 0, "shapes": 0}  # disabled really means disabled
    assert len(fast) > 50  # the run did work


@pytest.mark.parametrize("policy", ["hdrf", "dff"])
def test_candidate_path_and_exclusion_are_taken_on_a_full_cluster(policy):
    # without this the equivalence above could hold because the shortcuts never ran
    among = excluded = shapes = 0
    for seed in range(6):
        sc = random_scenario(seed)
        _, calls = run(sc, policy, candidates=True, placement="first-fit", headroom=False, seed=seed)
        among += calls["among"]
        excluded += calls["excluded"]
        shapes += calls["shapes"]
    assert among > 100
    assert excluded > 100
    assert shapes > 20  # descents told the candidates' shapes (too many for pick_among)


@pytest.mark.parametrize("policy", ["drf", "hdrf"])
def test_one_freed_node_and_a_new_shape_that_fits_before_it(policy):
    # After a quiet point one node is freed (the candidate path's one-node case: the
    # shapes that fit there start there) while a job of a new shape arrives: that shape
    # may fit on an earlier node, where first-fit must put it, not on the freed node
    spec = {"resources": ["cpu", "mem"],
            "cluster": {"nodes": [{"name": f"n{i}", "capacity": {"cpu": 4, "mem": 4}} for i in range(3)]},
            "queues": [{"name": "a"}, {"name": "b"}],
            "jobs": [{"name": "filler", "queue": "a", "tasks": [{"demand": {"cpu": 3, "mem": 1}, "count": 9}]},
                     {"name": "late", "queue": "b", "submit": 1,
                      "tasks": [{"demand": {"cpu": 1, "mem": 1}, "count": 3}]}]}
    sc = parse_scenario(spec, "<one freed node>")
    filler, late = sc.jobs

    def launches(candidates: bool) -> list[tuple]:
        sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy))
        if not candidates:
            sched.pick_among_max = -1
            sched.freed_scan_max = -1
            sched.sorter.exclude = lambda name: None
            sched.sorter.exclude_shape = lambda shape, names: None
            sched.sorter.only_shapes = lambda shapes: None
        sched.submit(filler, 0.0)
        out = [(0.0, x.job, x.node) for x in sched.schedule(0.0)]  # every node: 1 cpu left, quiet
        on_last = next(t.task_id for t in sched.tasks.values() if sched.pool.name(t.node_index) == "n2")
        sched.finish(on_last, 1.0)  # one freed node
        sched.submit(late, 1.0)
        out += [(1.0, x.job, x.node) for x in sched.schedule(1.0)]
        return out

    fast = launches(True)
    assert fast == launches(False)
    assert (1.0, "late", "n0") in fast  # the new shape's first fit comes before the freed node


def test_dff_files_its_jobs_shapes_and_never_a_history_leaf():
    # DFF's sorter indexes shapes as H-DRF's does (ShapeIndex); with decayed usage a queue's
    # hidden history leaf is added as a job node, but it is no job: no mask may count it
    sc = random_scenario(3)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("dff"), half_life=5.0)
    sorter = sched.sorter
    pick, seen = sorter.pick, {"restricted": 0}

    def checked_pick(runnable, now=0.0):
        filed = sorter._job_shape
        assert all(sorter.key[v] in sorter.jobs for v in filed)  # jobs only, never a history leaf
        root_mask = 0
        for shape in filed.values():
            root_mask |= 1 << shape
        assert sorter.shape_mask[0] == root_mask
        seen["restricted"] += sorter.alive_shapes[0] != -1
        return pick(runnable, now)

    sorter.pick = checked_pick
    rng = random.Random(3)
    lengths = {j.name: rng.choice([1.0, 1.5, 2.0, 3.0]) for j in sc.jobs}
    replay(sched, sc.jobs, lambda launch: lengths[launch.job], until=60.0)
    assert sorter._history  # some job finished: its queue has a history leaf
    assert not any(sorter.key[v] not in sorter.jobs for v in sorter._job_shape)
    assert seen["restricted"] > 0  # descents ran with the shapes restricted


# --- pick_among_tree: the descent's answer restricted to candidates ---------------------------

def random_tree(rng: random.Random, n: int):
    """A random tree for the descent: node 0 the root, parents before children, the leaves
    jobs, about 80% of them demanding. Returns (parent, kids, is_job, key, live)."""
    parent = [-1] + [rng.randrange(0, k) for k in range(1, n)]
    kids: list[list[int]] = [[] for _ in range(n)]
    for v in range(1, n):
        kids[parent[v]].append(v)
    is_job = [v > 0 and not kids[v] for v in range(n)]
    key = [f"v{v}" for v in range(n)]
    live = [0] * n
    for v in range(n):
        if is_job[v] and rng.random() < 0.8:
            a = v
            while a >= 0:
                live[a] += 1
                a = parent[a]
    return parent, kids, is_job, key, live


@pytest.mark.parametrize("seed", range(40))
def test_pick_among_tree_equals_the_descent(seed):
    rng = random.Random(seed)
    # a random tree, some FIFO queues
    n = rng.randint(3, 30)
    parent, kids, is_job, key, live = random_tree(rng, n)
    index = {key[v]: v for v in range(n)}
    share = [round(rng.choice([0.0, 0.1, 0.25, 0.5, 0.75]), 12) for _ in range(n)]
    running = [rng.randint(0, 3) for _ in range(n)]
    position = [kids[parent[v]].index(v) if v else 0 for v in range(n)]
    fifo = {v for v in range(1, n) if kids[v] and rng.random() < 0.3}
    heaps = [[(share[c], running[c], position[c], 0, c) for c in kids[v] if live[c] > 0] for v in range(n)]
    for h in heaps:
        h.sort()
    runnable_set = {key[v] for v in range(n) if is_job[v] and live[v] and rng.random() < 0.4}

    def fifo_jobs(v: int):
        return [c for c in kids[v] if is_job[c]] if v in fifo else None

    want = descend_tree(0, heaps, is_job=is_job, key=key, live=live, fifo_jobs=fifo_jobs,
                        version=[0] * n, present=[True] * n, runnable=lambda name: name in runnable_set)
    # any superset of the runnable jobs as candidates gives the same answer
    extra = {key[v] for v in range(n) if is_job[v] and rng.random() < 0.3}
    got = pick_among_tree(sorted(runnable_set | extra), index=index, parent=parent, live=live,
                          node_key=lambda v: (share[v], running[v], position[v]), fifo_jobs=fifo_jobs,
                          runnable=lambda name: name in runnable_set)
    assert got == want


# --- ShapeIndex: the descent enters only subtrees with a shape that may fit ---------------------

class _Index(ShapeIndex):
    """A bare ShapeIndex over a given tree (the sorters add it to their node table)."""

    def __init__(self, parent: list[int], key: list[str], is_job: list[bool]):
        self.parent = parent
        self.index = {k: v for v, k in enumerate(key)}
        self._init_shapes()
        for p, job in zip(parent, is_job):
            self._grow_shapes(p, job)

    def reset_excluded(self) -> None:  # (no TreeExclusion under it here)
        self.alive_shapes[0] = -1


@pytest.mark.parametrize("seed", range(100))
def test_shape_indexed_descent_equals_the_plain_descent(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 40)
    parent, kids, is_job, key, live = random_tree(rng, n)
    jobs = [v for v in range(n) if is_job[v]]
    index = _Index(parent, key, is_job)
    # file, refile and unfile jobs at random (the engine's _refile); the last filing counts
    shape_of: dict[int, int] = {}
    for _ in range(3 * len(jobs)):
        v = rng.choice(jobs)
        if rng.random() < 0.2:
            index._unfile_shape(v)
            shape_of.pop(v, None)
        else:
            shape_of[v] = rng.randrange(6)
            index.file_shape(key[v], shape_of[v])
    for v in range(n):  # each node's mask: the shapes filed below it, recounted
        below = set()
        for u, shape in shape_of.items():
            a = u
            while a >= 0 and a != v:
                a = parent[a]
            if a == v:
                below.add(shape)
        assert index.shape_mask[v] == sum(1 << s for s in below)
    position = [kids[parent[v]].index(v) if v else 0 for v in range(n)]
    share = [rng.choice([0.0, 0.25, 0.5]) for _ in range(n)]
    fifo = {v for v in range(1, n) if kids[v] and rng.random() < 0.3}
    heaps = [sorted((share[c], 0, position[c], 0, c) for c in kids[v] if live[c] > 0) for v in range(n)]
    alive = {s for s in range(6) if rng.random() < 0.5}
    # runnable: filed under a shape that may fit, and (node constraints, limits, gangs) a coin
    lucky = {key[v] for v in jobs if rng.random() < 0.6}
    dead_on_check = rng.randrange(6)  # a shape found to fit nowhere by the first check of it

    def fifo_jobs(v: int):
        return [c for c in kids[v] if is_job[c]] if v in fifo else None

    def descend(masks: bool) -> tuple[str | None, list[str]]:
        asked: list[str] = []
        index.reset_excluded()
        if masks:
            index.only_shapes(alive)
        found_dead: set[int] = set()

        def runnable(name: str) -> bool:
            asked.append(name)
            shape = shape_of.get(index.index[name])
            if shape is None or shape not in alive or shape in found_dead:
                return False
            if shape == dead_on_check:
                found_dead.add(shape)
                if masks:
                    index.exclude_shape(shape, ())
                return False
            return name in lucky

        kwargs = {"shapes": index, "node_key": lambda c: (share[c], 0, position[c])} if masks else {}
        got = descend_tree(0, [list(h) for h in heaps], is_job=is_job, key=key, live=live, fifo_jobs=fifo_jobs,
                           version=[0] * n, present=[True] * n, runnable=runnable, **kwargs)
        return got, asked

    want, asked_plain = descend(False)
    got, asked_indexed = descend(True)
    assert got == want
    # the index only skips: every job it asked about, the plain descent asked too, and none
    # of a shape that cannot fit
    assert set(asked_indexed) <= set(asked_plain)
    assert all(shape_of.get(index.index[name]) in alive for name in asked_indexed)


@pytest.mark.parametrize("seed", range(4))
def test_the_freed_node_scan_reads_each_shapes_filed_number(seed):
    # engine/fitmemo.py keeps each matrix column's filed number (Scheduler._refile gives
    # and takes them back as shapes' jobs come and go): at every scan it must be the
    # number the scheduler has filed that shape under (-1: none), and the re-check after
    # a launch keeps each shape's number with it
    sc = random_scenario(seed, jobs=30)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("drf"))
    fits = sched.fits
    scan_freed, restrict = fits.scan_freed, fits.restrict
    seen = {"scans": 0, "numbers": 0, "rechecks": 0}

    def checked_scan(mark, scan_max):
        got = scan_freed(mark, scan_max)
        if got is not None:
            seen["scans"] += 1
            for keys, _needs, numbers in got[0].values():
                assert numbers.tolist() == [sched._shape_ids.get(key, -1) for key in keys]
                seen["numbers"] += sum(number >= 0 for number in numbers.tolist())
        return got

    def checked_restrict(keys, needs, numbers, limits, whole):
        still = restrict(keys, needs, numbers, limits, whole)
        if whole is not None:  # the re-check after a launch (``still_fitting``'s test)
            number_of = dict(zip(keys, numbers.tolist()))
            assert still[2].tolist() == [number_of[key] for key in still[0]]
            seen["rechecks"] += 1
        return still

    fits.scan_freed, fits.restrict = checked_scan, checked_restrict
    rng = random.Random(seed)
    lengths = {j.name: rng.choice([1.0, 1.5, 2.0, 3.0]) for j in sc.jobs}
    events = [(2.0, "lose", "n1"), (4.0, "add", sc.cluster.nodes[1])]
    assert replay(sched, sc.jobs, lambda launch: lengths[launch.job], node_events=events, until=60.0)
    assert seen["scans"] > 20 and seen["numbers"] > 20 and seen["rechecks"] > 20


@pytest.mark.parametrize("seed", range(3))
def test_the_groups_by_number_follow_the_filing(seed):
    # Scheduler._decide reads the candidates of the one freed node's shapes by the numbers
    # the scan kept (``_groups_by_number``): at every call each filed number must lead to
    # its key's group, and a number taken back to none
    sc = random_scenario(seed, jobs=30)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
    decide, checked = sched._decide, {"calls": 0, "numbers": 0}

    def checked_decide(now, launches):
        by_number, ids = sched._groups_by_number, sched._shape_ids
        for key, number in ids.items():
            assert by_number[number] is sched._shape_jobs[key]
        assert sorted(by_number) == sorted(ids.values())  # (a number taken back: none)
        checked["calls"] += 1
        checked["numbers"] += len(ids)
        return decide(now, launches)

    sched._decide = checked_decide
    rng = random.Random(seed)
    lengths = {j.name: rng.choice([1.0, 1.5, 2.0, 3.0]) for j in sc.jobs}
    assert replay(sched, sc.jobs, lambda launch: lengths[launch.job], until=60.0)
    assert checked["calls"] > 20 and checked["numbers"] > 20



def saturated_scenario(seed: int, *, jobs: int = 40, nodes: int = 6):
    """Jobs of many tasks from a few shapes over four leaf queues, on a few equal nodes: a
    full cluster where each task end frees one node (the candidate path's one-node case)."""
    rng = random.Random(seed)
    shapes = [{"cpu": rng.choice([1, 2, 3]), "mem": rng.choice([1, 2, 4])} for _ in range(5)]
    spec = {"resources": ["cpu", "mem"],
            "cluster": {"nodes": [{"name": f"n{i}", "capacity": {"cpu": 8, "mem": 8}} for i in range(nodes)]},
            "queues": [{"name": a, "children": [{"name": f"{a}{b}", "weight": rng.choice([1, 2])} for b in "xy"]}
                       for a in "ab"],
            "jobs": [{"name": f"j{i}", "queue": f"{top}.{top}{rng.choice('xy')}", "submit": float(rng.randint(0, 5)),
                      "tasks": [{"demand": dict(rng.choice(shapes)), "count": 40}]}
                     for i, top in enumerate(rng.choice("ab") for _ in range(jobs))]}
    return parse_scenario(spec, "<saturated>")


@pytest.mark.parametrize("seed", range(3))
def test_the_one_freed_node_candidates_are_the_shapes_jobs(seed):
    # Scheduler._decide lists the one freed node's candidates in one call
    # (``fits.candidate_jobs``, from the numbers the scan read): each answer must be the
    # list the general path builds from the node's shape keys (each number >= 0 is its
    # key's: ``test_the_freed_node_scan_reads_each_shapes_filed_number``), their groups
    # shape by shape, None when too many for pick_among; and the call must be taken
    sc = saturated_scenario(seed)
    sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
    fits = sched.fits
    candidate_jobs = fits.candidate_jobs
    seen = {"lists": 0, "none": 0}

    def checked(numbers, groups_by_number, among_max, among_cost, filed):
        got = candidate_jobs(numbers, groups_by_number, among_max, among_cost, filed)
        key_of = {number: key for key, number in sched._shape_ids.items()}
        groups = [sched._shape_jobs[key_of[number]] for number in numbers.tolist() if number >= 0]
        n = sum(map(len, groups))
        want = None if n > among_max or n * n * among_cost > filed else [name for g in groups for name in g]
        assert got == want
        seen["none" if got is None else "lists"] += 1
        return got

    fits.candidate_jobs = checked
    rng = random.Random(seed)
    lengths = {j.name: rng.uniform(1.0, 3.0) for j in sc.jobs}  # (task ends apart: one node freed at a time)
    assert replay(sched, sc.jobs, lambda launch: lengths[launch.job], until=60.0)
    assert seen["lists"] > 20 and seen["none"] > 20


def test_the_candidate_kernel_ports_the_reference_as_it_is():
    # engine/_fit_kernel.pyx's candidate_jobs repeats candidate_jobs_reference: one changed
    # must be changed in the other too before the digest is renewed
    digest = hashlib.sha256(inspect.getsource(fitmemo.candidate_jobs_reference).encode()).hexdigest()[:16]
    assert digest == fitmemo.CANDIDATES_PORTED_FROM, \
        f"candidate_jobs_reference changed since _fit_kernel.pyx ported it: mirror the change there, " \
        f"then set its digest to {digest}"


@pytest.mark.skipif(fitmemo.compiled_candidate_jobs is None, reason="engine/_fit_kernel.pyx not built")
@pytest.mark.parametrize("seed", range(3))
def test_the_compiled_candidate_list_is_the_reference_one(seed):
    # the same list (or None) on random numbers: -1, numbers without a group, empty groups,
    # counts at and around both limits (among_max; n * n * among_cost against filed,
    # equality included), an infinite cost, a strided column of numbers
    rng = random.Random(seed)
    outcomes = set()
    for _ in range(500):
        groups = {i: {f"j{i}_{k}": None for k in range(rng.choice([0, 1, 2, 3, 5, 8]))}
                  for i in range(12) if rng.random() < 0.8}
        numbers = np.array([rng.choice([-1, *range(14)]) for _ in range(rng.randint(0, 10))], dtype=np.intp)
        if rng.random() < 0.3:
            numbers = np.repeat(numbers, 2)[::2]  # (a strided view, the same numbers)
        n = sum(len(groups.get(i, ())) for i in numbers.tolist())
        among_max = rng.choice([0, n - 1, n, n + 1, 1 << 30])
        among_cost = rng.choice([0.1, 0.5, 1 / 32, 0.0, math.inf])
        filed = rng.choice([0, n * n // 10, math.ceil(n * n * 0.1), n * n, 10_000])
        want = fitmemo.candidate_jobs_reference(numbers, groups, among_max, among_cost, filed)
        got = fitmemo.compiled_candidate_jobs(numbers, groups, among_max, among_cost, filed)
        assert got == want and type(got) is type(want)
        outcomes.add("none" if want is None else "empty" if not want else "list")
    assert outcomes == {"none", "empty", "list"}
