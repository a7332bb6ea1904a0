"""Gang placement: room for every pending task of a gang at once, or none.

A gang (``Job.gang``) is one decision: when the policy's order reaches it, the scheduler
asks :func:`place_gang` for a node for each of its pending tasks on the cluster as it is
now, and starts them all, or, when some task finds no room, starts none and passes to
the next job of the order (the gang is "blocked", as a job whose task fits nowhere:
dynamic H-DRF's rule of ignoring what cannot run, Bhattacharya et al. Sec. 4). A gang
never holds part of what it needs while it waits for the rest.

The search is a trial on the pool itself: each task is placed by placement's own rules
(``NodePool.place``: the strategy, headroom, devices, constraints) and taken, so the
next task sees what the earlier ones used; the trial is then given back whatever its
outcome (``Scheduler`` takes the nodes again for real, in the same order, so it finds
the same answer). Tasks go in class order, a class's tasks together. Greedy, like every
placement here: a gang that would fit only in another arrangement waits.

``pack``:

* ``None``: any nodes.
* ``("node", None)``: every task on one node: the first node, in cluster order, whose
  free capacity holds the gang's summed demand and where the trial succeeds.
* ``("attribute", NAME)``: every task on nodes sharing one value of attribute NAME
  (a rack): the groups in the order of their first node; within a group, each task on
  the first node of the group that holds it. Nodes without the attribute are never used.

A gang whose tasks could not fit even on the empty cluster is refused by the loader
(``model.loader_jobs.gang_room_problem``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from fairshare.engine.placement import DeviceAssignment, NodePool
from fairshare.model.cluster import satisfies
from fairshare.model.jobs import PACK_NODE, TaskClass
from fairshare.model.resources import Vector, fits

#: per class index, how many of the job's tasks of that class already run on a node
#: (``max_per_node``): ``running_on(class index, node)``
RunningOn = Callable[[int, int], int]


def gang_members(classes: Sequence[TaskClass], pending: Sequence[float]) -> list[int]:
    """The class index of each pending task of a gang, class order."""
    return [j for j, p in enumerate(pending) for _ in range(int(p))]


def place_gang(pool: NodePool, classes: Sequence[TaskClass], members: Sequence[int], demand: Vector,
               pack: tuple[str, str | None] | None, running_on: RunningOn) -> list[int] | None:
    """A node index for each of ``members`` (class indices), or None when they cannot
    all be placed now (module docstring). ``demand``: the members' summed demand. The
    pool is left as it was."""
    if pack is None:
        return _trial(pool, classes, members, None, running_on)
    alive = [i for i, st in enumerate(pool.states) if st.alive]
    if pack == PACK_NODE:
        for node in alive:
            if fits(demand, pool.available(node)):
                got = _trial(pool, classes, members, (node,), running_on)
                if got is not None:
                    return got
        return None
    groups: dict[str, list[int]] = {}
    for node in alive:
        value = pool.states[node].attrs.get(pack[1])
        if value is not None:
            groups.setdefault(value, []).append(node)
    for group in groups.values():
        got = _trial(pool, classes, members, tuple(group), running_on)
        if got is not None:
            return got
    return None


def _trial(pool: NodePool, classes: Sequence[TaskClass], members: Sequence[int], group: tuple[int, ...] | None,
           running_on: RunningOn) -> list[int] | None:
    """Place every member in turn (within ``group``, when given), taking what each uses;
    give it all back; the nodes, or None at the first member that finds no room."""
    taken: list[tuple[int, Vector, DeviceAssignment]] = []
    here: Counter = Counter()  # (class index, node) -> members placed there in this trial
    try:
        for j in members:
            cls = classes[j]
            limit = cls.max_per_node

            def allowed(node: int, j=j, limit=limit) -> bool:
                return limit is None or running_on(j, node) + here[(j, node)] < limit

            if group is None:
                node = pool.place(cls.demand, cls.constraints, None if limit is None else allowed)
            else:
                node = next((n for n in group if satisfies(pool.states[n].attrs, cls.constraints)
                             and pool.fits_on(n, cls.demand) and allowed(n)), None)
            if node is None:
                return None
            taken.append((node, cls.demand, pool.take(node, cls.demand)))
            here[(j, node)] += 1
        return [node for node, _d, _h in taken]
    finally:
        for node, demand, held in reversed(taken):
            pool.give_back(node, demand, held)
