"""Competitive Equilibrium from Equal Incomes (CEEI), solved exactly.

Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of Multiple Resource Types",
NSDI 2011, Sec. 5.2: the CEEI allocation is the Nash bargaining solution, "the feasible
allocation that maximizes prod_i u_i(a_i)", with the utility of user i taken to be her
dominant share s_i. With Leontief tasks ``s_i = x_i * max_r d_ir / C_r`` is a constant
times the number of tasks ``x_i``, so the problem is the Eisenberg-Gale convex program

    maximise   sum_i w_i log x_i
    subject to sum_i x_i d_ir <= C_r        for every resource r   (prices p_r >= 0)
               0 <= x_i <= cap_i                                   (``respect_counts``)

How we read the paper:

* Incomes are the job weights ``w_i`` (equal weights = the paper's equal incomes, the
  weighted Nash product ``prod_i x_i^{w_i}`` otherwise). Queues are ignored (flat).
* A multiclass job buys composite tasks of its fixed mix (``Job.composite_demand``) and
  reports them per class by ``Job.class_mix``; only ``slowdown`` chooses a mix.
* ``respect_counts`` caps a job at its total count (``None`` = unbounded); a job capped
  at 0 takes no part.

How it is solved (exactly, not by an approximate generic solver). With demands normalised
by capacity, ``a_ir = d_ir / C_r``, the dual is the smooth convex problem over prices

    minimise_{p >= 0}  g(p) = sum_r p_r + sum_i h_i(a_i . p),
    h_i(q) = max_{0 <= x <= cap_i} (w_i log x - x q),   x_i(q) = min(cap_i, w_i / q),

whose gradient is ``1 - sum_i x_i a_ir`` (one minus the demand for resource r at prices
p). KKT: every priced resource is exactly cleared, no free resource is over-used
(DRF Sec. 5.2, "market clearance"). Since the number of resources m is small we
*enumerate* the priced set S (non-empty subsets of the resources some job uses, by
increasing size): on S the prices solve the square system ``grad_S g = 0``, which a damped
(semismooth, because of the caps' kinks) Newton iteration solves to machine precision;
S is accepted when its prices are all positive and the resources outside S are not
over-used. The optimal ``x`` is unique (strictly concave objective), so the first
accepted S is the answer; trying smaller sets first means a degenerate optimum (a
resource exactly cleared at price 0) is found with the smaller set. A priced set with
an optimal price vector always exists whose columns ``a_iS`` have full rank (move p
along a null direction until a price hits 0), which is the set the Newton system finds.
Cost: at most ``2^m - 1`` Newton solves of O(n m^2) each (63 for m = 6).

Caps are handled inside the same dual (``x_i = min(cap_i, w_i/(a_i . p))``), not by
"fix the capped jobs and re-solve": that loop needs the allocations of the other jobs to
be monotone in the resources left to them, and CEEI is not monotone (DRF Theorem 5:
user 3 leaving makes user 2 worse off), so a job fixed at its cap in one pass could want
less than its cap in the next. The dual handles every cap in one solve, and the KKT
check certifies the result.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from fairshare.model.allocation import Allocation, build_allocation
from fairshare.model.scenario import Scenario
from fairshare.policies.base import Policy, PolicyModeError, refuse_gangs
from fairshare.policies.machinery.tree import per_class

#: a resource outside the priced set may be used up to this much over capacity
#: (relative): the KKT tolerance of the answer
KKT_RTOL = 1e-12
#: Newton stops when no resource's excess demand exceeds this (relative to capacity)
GRAD_TOL = 1e-15
MAX_NEWTON_STEPS = 200


class CEEI(Policy):
    name = "ceei"
    citation = ("Ghodsi et al. NSDI'11, Sec. 5.2 (CEEI as the Nash bargaining solution with "
                "dominant-share utility), Sec. 6.1.2 Theorems 4-5")

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        raise PolicyModeError("policy 'ceei' has no online meaning: CEEI is a market equilibrium of a static allocation (DRF Sec. 5.2); it has no task-by-task online rule")

    def allocate(self, scenario: Scenario, *, respect_counts: bool = False) -> Allocation:
        refuse_gangs(scenario, self.name, "all-or-nothing would turn CEEI's convex program (the Eisenberg-Gale "
                     "equilibrium, DRF Sec. 5.2) into an integer one, with no equilibrium guaranteed; "
                     "use a filling policy (drf, hdrf, ...), which admits gangs whole")
        jobs = scenario.jobs
        capacity = scenario.capacity
        m = scenario.m
        n = len(jobs)
        a = np.zeros((n, m))
        w = np.zeros(n)
        cap = np.full(n, math.inf)
        for i, job in enumerate(jobs):
            d = job.composite_demand()
            # The loader rejects a demand on a resource of capacity 0, so the ratio exists.
            a[i] = [d[r] / capacity[r] if capacity[r] > 0 else 0.0 for r in range(m)]
            w[i] = job.weight
            if respect_counts and job.total_count is not None:
                cap[i] = float(job.total_count)
        x = eisenberg_gale(a, w, cap)
        tasks = {job.name: float(x[i]) for i, job in enumerate(jobs)}
        return build_allocation(scenario, self.name, "divisible", per_class(scenario, tasks))

    def allocate_discrete(self, scenario: Scenario, *, respect_counts: bool = False) -> Allocation:
        raise PolicyModeError(
            "policy 'ceei' has no discrete (whole-task) allocation: CEEI is a market equilibrium "
            "over divisible goods (Ghodsi et al. Sec. 5.2) and has no greedy whole-task rule; "
            "use the divisible allocation")


def eisenberg_gale(a: np.ndarray, w: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Tasks ``x`` maximising ``sum_i w_i log x_i`` s.t. ``a.T @ x <= 1``, ``0 <= x <= cap``.

    ``a[i, r]`` is job i's per-task demand as a fraction of resource r's capacity (rows
    non-zero), ``w > 0``, ``cap`` may hold ``inf``. Returns the unique optimum, exact to
    about ``1e-14`` relative, certified by the KKT conditions (module docstring).
    """
    n, m = a.shape
    x = np.zeros(n)
    live = cap > 0  # a job capped at 0 gets nothing and takes no part in the market
    if not live.any():
        return x
    a_l, w_l, cap_l = a[live], w[live], cap[live]
    used = [r for r in range(m) if (a_l[:, r] > 0).any()]
    unbounded = ~np.isfinite(cap_l)
    # Every job fits if none of its demands is priced: all capped, nothing contended.
    if not unbounded.any() and (a_l.T @ cap_l <= 1.0 + KKT_RTOL).all():
        x[live] = cap_l
        return x
    for size in range(1, len(used) + 1):
        for subset in itertools.combinations(used, size):
            cols = list(subset)
            sub = a_l[:, cols]
            # An unbounded job that uses no priced resource would take infinitely many tasks.
            if (unbounded & ~(sub > 0).any(axis=1)).any():
                continue
            p = _newton(sub, w_l, cap_l)
            if p is None or not (p > 0).all():
                continue
            xs = _demand(sub @ p, w_l, cap_l)
            usage = a_l.T @ xs
            if (usage <= 1.0 + KKT_RTOL).all():
                x[live] = xs
                return x
    raise AssertionError(  # the program is feasible and bounded: some S must satisfy KKT
        f"CEEI: no priced resource set satisfies the KKT conditions (n={n}, m={m})")


def _demand(q: np.ndarray, w: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Each job's tasks at price-per-task ``q``: ``min(cap, w / q)`` (``cap`` when q <= 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(q > 0, w / np.where(q > 0, q, 1.0), np.inf)
    return np.minimum(x, cap)


def _dual(p: np.ndarray, sub: np.ndarray, w: np.ndarray, cap: np.ndarray) -> float:
    """``g(p) = sum p + sum_i h_i(a_i . p)`` (``inf`` outside the domain)."""
    q = sub @ p
    x = _demand(q, w, cap)
    if not np.isfinite(x).all():
        return math.inf
    capped = x >= cap
    # uncapped: h = w log(w/q) - w; capped: h = w log(cap) - cap q (continuous at q = w/cap)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(capped, w * np.log(np.where(capped, cap, 1.0)) - np.where(capped, cap, 0.0) * q,
                     w * np.log(np.where(capped, 1.0, x)) - w)
    return float(p.sum() + h.sum())


def _newton(sub: np.ndarray, w: np.ndarray, cap: np.ndarray) -> np.ndarray | None:
    """Minimise the dual restricted to the columns ``sub`` over all of R^k (no sign
    constraint: a negative price just means this priced set is wrong). Returns the
    stationary prices, or None when the iteration does not converge (the restricted
    problem is unbounded or has no interior stationary point).

    Damped semismooth Newton: the Hessian counts the jobs on the smooth branch
    ``x = w/q``; where that is singular (a priced resource used only by capped jobs) the
    step is regularised (see :func:`_directions`). Once the capped set settles the
    iteration is plain Newton and converges quadratically to rounding level.
    """
    k = sub.shape[1]
    total = float(w.sum())
    p = np.full(k, total / k)
    g = _dual(p, sub, w, cap)
    if not math.isfinite(g):
        return None
    gnorm = math.inf
    for _ in range(MAX_NEWTON_STEPS):
        q = sub @ p
        x = _demand(q, w, cap)
        grad = 1.0 - sub.T @ x
        gnorm = float(np.abs(grad).max())
        if gnorm <= GRAD_TOL:
            return p
        accepted = False
        for newton, step in _directions(sub, w, q, x, cap, grad, p, total):
            slope = float(grad @ step)
            # Near the optimum g's change is below rounding, so a full Newton step that
            # halves the excess demand is taken even if g cannot tell the difference.
            if newton:
                cand = p + step
                g_new = _dual(cand, sub, w, cap)
                if math.isfinite(g_new) and np.abs(1.0 - sub.T @ _demand(sub @ cand, w, cap)).max() < 0.5 * gnorm:
                    accepted = True
                    break
            # Otherwise Armijo backtracking on g ...
            t = 1.0
            while t > 1e-20:
                cand = p + t * step
                g_new = _dual(cand, sub, w, cap)
                if math.isfinite(g_new) and g_new < g and g_new <= g + 1e-4 * t * slope:
                    accepted = True
                    break
                t *= 0.5
            if accepted:
                # ... and, for the fallback directions, expansion: where only capped jobs
                # use a priced resource g is linear, and the step should reach the kink.
                while not newton and t < 1e12:
                    bigger = p + 2.0 * t * step
                    if np.abs(bigger).max() > 1e12 * total:
                        break
                    g_big = _dual(bigger, sub, w, cap)
                    if not (math.isfinite(g_big) and g_big < g_new and g_big <= g + 2e-4 * t * slope):
                        break
                    t, cand, g_new = 2.0 * t, bigger, g_big
                break
        if not accepted:
            return p if gnorm <= 1e-11 else None
        p, g = cand, g_new
        if not np.isfinite(p).all() or np.abs(p).max() > 1e12 * total:
            return None  # running away: unbounded on this priced set
    return p if gnorm <= 1e-11 else None


def _directions(sub, w, q, x, cap, grad, p, total):
    """Candidate descent directions, best first.

    1. Newton on the smooth branch (the jobs below their cap give the curvature).
    2. Levenberg-Marquardt: the same Hessian plus a tiny ridge. Where only capped jobs use
       a priced resource g is linear along it (a flat direction of the Hessian); the
       ridge turns that into a very long step, which the backtracking line search cuts
       back to about the kink where a capped job leaves its cap.
    3. The curvature every job would have uncapped (positive definite), then the
       gradient: safeguards that always descend.
    """
    k = sub.shape[1]
    free = x < cap
    pos = q > 0
    curv = np.where(free & pos, w / np.where(pos, q, 1.0) ** 2, 0.0)
    hess = (sub * curv[:, None]).T @ sub
    if np.linalg.cond(hess) < 1e13:
        yield True, np.linalg.solve(hess, -grad)
    curv_all = np.where(pos, w / np.where(pos, q, 1.0) ** 2, 0.0)
    metric = (sub * curv_all[:, None]).T @ sub
    tr = float(np.trace(metric))
    if tr > 0:
        yield False, np.linalg.solve(hess + 1e-10 * tr / k * np.eye(k), -grad)
        yield False, np.linalg.solve(metric + 1e-9 * tr / k * np.eye(k), -grad)
    yield False, -grad * max(float(np.abs(p).max()), total / k)
