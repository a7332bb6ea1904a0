"""The flat sorters' per-shape heaps pick as one heap over all jobs would.

``FlatSorter`` keeps each job's entry in the heap of the shape the engine filed it under
(``file_shape``) and a pick merges the heads of the shapes that may fit (``only_shapes``
less ``exclude_shape``); ``machinery/flat.py`` says why that is the single heap's walk.
Here it is checked against that walk written out: within a call, the jobs ``runnable`` is
asked about are, in order, the demanding jobs not excluded whose shape may fit, by the tie
rule (share rounded to ``DIGITS``, running tasks, arrival), up to the first that can run;
while jobs arrive, leave, change shape, start and finish tasks between and within calls.
"""

from __future__ import annotations

import random

import pytest

from fairshare.model import parse_scenario
from fairshare.policies import make_policy
from fairshare.policies.machinery.ties import DIGITS

SHAPES = [None, 0, 1, 2, 3, 4]


def walk_order(sorter, excluded, alive, dead):
    """The single heap's walk: every job it would ask ``runnable`` about, in order."""
    def may_fit(name):
        shape = sorter._shape_of.get(name)
        return shape not in dead and (alive is None or shape in alive)

    jobs = sorter.jobs
    names = [n for n, job in jobs.items() if job.demanding and n not in excluded and may_fit(n)]
    return sorted(names, key=lambda n: (round(sorter.share[n], DIGITS), jobs[n].running, jobs[n].order))


@pytest.mark.parametrize("policy", ["drf", "asset", "cpu", "collapsed"])
@pytest.mark.parametrize("seed", range(4))
def test_per_shape_heaps_ask_and_pick_as_one_heap(policy, seed):
    rng = random.Random(seed)
    sc = parse_scenario({"resources": ["cpu", "mem"], "cluster": {"capacity": {"cpu": 64, "mem": 64}},
                         "queues": [{"name": "a", "weight": 1}, {"name": "b", "weight": 3}], "jobs": []},
                        "<flat shapes>")
    sorter = make_policy(policy).online(sc.resources, sc.queues, sc.capacity)
    demand = {}
    count = 0
    picks = 0
    for _call in range(150):
        # between calls: arrivals, departures, refilings, tasks starting and finishing
        for _ in range(rng.randint(0, 4)):
            name = f"j{count}"
            count += 1
            demand[name] = (rng.choice([1.0, 2.0]), rng.choice([0.5, 1.0, 4.0]))
            sorter.add_job(name, rng.choice(["a", "b"]), rng.choice([1.0, 2.0]), demand[name])
            sorter.file_shape(name, rng.choice(SHAPES))
        names = list(sorter.jobs)
        for _ in range(rng.randint(0, 6)):
            if not names:
                break
            name = rng.choice(names)
            action = rng.random()
            if action < 0.1:
                sorter.remove_job(name)
                names.remove(name)
            elif action < 0.4:
                sorter.file_shape(name, rng.choice(SHAPES))
            elif action < 0.6:
                sorter.set_demanding(name, not sorter.jobs[name].demanding)
            elif action < 0.8:
                sorter.allocated(name, demand[name])
            elif sorter.jobs[name].running:
                sorter.released(name, demand[name])
        # a call: the shapes that may fit, then picks until nothing can run
        alive = set(rng.sample(SHAPES[1:], rng.randint(1, 4))) if rng.random() < 0.5 else None
        if alive is not None:
            sorter.only_shapes(alive)
        dead: set = set()
        excluded: set = set()
        can_run = {name for name in sorter.jobs if rng.random() < 0.3}
        for _pick in range(rng.randint(1, 5)):
            if rng.random() < 0.3:
                shape = rng.choice(SHAPES[1:])
                dead.add(shape)
                sorter.exclude_shape(shape, [])
            asked: list[str] = []
            dead_after: list[set] = []  # the dead shapes after each ``runnable`` call

            def runnable(name):
                asked.append(name)
                if name not in can_run:
                    if rng.random() < 0.5:  # (as the engine does: found unable to run, excluded)
                        excluded.add(name)
                        sorter.exclude(name)
                    shape = sorter._shape_of.get(name)
                    if shape is not None and rng.random() < 0.1:  # (its shape fits nowhere)
                        dead.add(shape)
                        sorter.exclude_shape(shape, [name])
                dead_after.append(set(dead))
                return name in can_run

            excluded_before, dead_now = set(excluded), set(dead)
            found = sorter.pick(runnable)
            # the single heap's walk, replayed: a job whose shape died on the way is passed
            expected: list[str] = []
            for name in walk_order(sorter, excluded_before, alive, set()):
                if sorter._shape_of.get(name) in dead_now:
                    continue
                expected.append(name)
                if len(expected) > len(asked) or name == found:
                    break
                dead_now = dead_after[len(expected) - 1]
            assert asked == expected
            assert found is None or found in can_run
            if found is None:
                break
            picks += 1
            sorter.allocated(found, demand[found])
            sorter.file_shape(found, rng.choice(SHAPES))  # (its next task's shape)
            can_run.discard(found)
        sorter.reset_excluded()
    assert picks > 50  # the run did pick
