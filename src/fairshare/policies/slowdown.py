"""Slowdown-equalising fair sharing for multiclass workflows (divisible tasks).

Tan, Zhang, Li, Wang, "Multi-resource fair sharing for multiclass workflows" (IBM
Research), Sec. 2 (illustrative example), Sec. 3 (model: per-task demand ``R_ij(r)`` of
class j of workflow i, operation point ``N_i = (N_i1..N_iJ)``, capacity Eq. (1)
``sum_i R_i N_i <= C``, "multiple rounds of job allocation") and Sec. 4 (Definition 1,
the slowdown, and the optimisation of the class mix), generalised from the paper's two
resources to any number of resources and classes.

Slowdown (Def. 1): ``eta_i(N_i) = inf{x : N_i / x in N_i^S}`` with
``N_i^S = {N : R_i N <= C, N >= 0}``, which is

    eta_i = max_r u_ir,    u_ir = sum_j R_ij(r) N_ij / C_r,

the dominant share of the workflow's total usage (Sec. 2 single-class example:
``eta = N_A / 8`` for A1 = (1 CPU, 125 GB) on (10, 1000)). Bigger is better: 1 means the
workflow runs as fast as it would alone. Unlike every other policy here a workflow mixes
its classes freely (Sec. 4: "a workflow has the flexibility to change the percentages of
running jobs of different classes"); ``Job.class_mix`` is not used.

Round 1 (Sec. 4, "maximize the slowdowns of all concurrent workflows", all equal):

    maximise eta  s.t.  max_r u_ir >= w_i' eta  for every workflow i,   Eq. (1),
                        N >= 0  (and N_ij <= count_ij with ``respect_counts``).

"Dominant share >= level" is a disjunction over resources, so this is a MILP (HiGHS via
``scipy.optimize.milp``): binaries ``z_ir`` (``sum_r z_ir = 1``) pick the resource on
which workflow i reaches the level. The textbook big-M form ``u_ir >= w_i' eta - (1 -
z_ir)`` is exact but its relaxation is so weak that HiGHS needed 36 s for 20 workflows.
We use instead (see ``_RoundModel._milp_stage1``):

* the Charnes-Cooper substitution ``s = 1/eta``, ``y = N/eta``, under which the level
  becomes the constant ``w_i'``: ``u_ir(y) >= w_i' z_ir`` is linear with no big-M, and the
  capacity ``sum u_r(y) <= s`` and counts ``y_ij <= count_ij s`` stay linear; minimise s;
* Balas' disjunctive copies ``y_i >= sum_r y_i^r`` with the level on ``u_ir(y_i^r)``, so
  the LP relaxation is the convex hull of each workflow's disjunction (in later rounds
  the fixed usage term ``c_ir s`` is not split over the copies, a slightly weaker but
  still exact form), few workflows are fractional and branch-and-bound explores a
  handful of nodes: 200 workflows x 3 classes x 4 resources typically take 0.1-2 s
  per MILP.

Complexity, and ``time_limit_s``. Exact slowdown equalisation is NP-hard: with two
resources and workflows whose classes each use one resource, ``(1, 0)`` and ``(0, 1)``,
workflow i reaches its level ``w_i' eta`` on one resource or the other, and the best
level is ``1 / min over the two-way splits of max(sum of w_i' per side)``, i.e.
PARTITION. So some instances make branch-and-bound slow (one random 200-workflow,
4-resource instance took 120 s to prove optimal). ``time_limit_s`` (per MILP, default
None = exact) stops HiGHS early; the binaries of its best point are then used as
usual and a note in the allocation gives the level found and HiGHS's proven upper
bound on the optimal level (that instance: within 1% after 2 s, 0.1% after 10 s).

Only resources that can be the workflow's dominant one get a binary: r is dropped when
another resource r' has at least r's usage in every class (then ``u_ir <= u_ir'``
always); a workflow left with one candidate (e.g. every single-class job) gets a plain
linear row, so all-single-class scenarios are pure LPs. ``eta <= 1 / max_i w_i'``
(a slowdown is at most 1).

How we read the points the paper leaves open:

* Weights. ``w_i' = w_i / max_k w_k``: workflow i's slowdown is held at ``w_i'`` times the
  common level, i.e. ``eta_i / w_i`` is equalised as in weighted DRF (Ghodsi et al.
  Sec. 4.3); the level is then the slowdown of the heaviest workflow. With
  equal weights this is the paper's "equal slowdowns".
* Tie rule among optimal mixes (``mix``, constructor argument). The maximal level rarely fixes the mixes (in
  Sec. 2's multiclass example B may run any mix of its three classes that gives it the
  level). A second problem fixes the level, holds every workflow's slowdown at exactly
  ``w_i' eta`` (``u_ir <= w_i' eta`` for all r) and then, by default (``mix="min-usage"``),
  *minimises* the total normalised usage ``sum_i sum_r u_ir``: the most efficient mixes,
  which leave the most for later rounds. ``mix="max-usage"`` maximises it instead, which
  is the paper's own last step of Sec. 4 ("increase the resource usage of r* ... adjust the
  mixing of the classes"). Any remaining tie is whichever optimal vertex HiGHS returns
  (deterministic for a given scenario).
* Rounds (Sec. 2 and Sec. 3, "allow multiple rounds of job allocation. In each round, we
  only consider those types of classes that can be further increased, constrained by
  fairness and the available leftover resources"). After a round: resources used to
  capacity are *saturated*; a class that demands a saturated resource, or has reached
  its count, cannot grow; a workflow with no class that can grow is frozen. The other
  workflows play the round-1 problem again on their totals: maximise a common level
  ``eta_k`` with ``max_r u_ir >= w_i' eta_k``, every ``N_ij`` at least its previous
  value, the classes that cannot grow fixed, then the same tie rule. All workflows still
  growing entered the round at the same weighted level, so this continues the water
  level of round 1 (the limit of giving the lowest-slowdown workflow the next sliver, as
  in DRF's progressive filling). A round raises the level until a resource saturates or
  a class reaches its count (otherwise every growing class could be scaled up), so there
  are at most (resources + classes) rounds that raise it.
* A round that cannot raise the level: a workflow whose dominant resources (the
  argmax of ``u_ir``) are used only by classes that can no longer grow cannot raise its
  slowdown without first bringing a non-dominant resource up to that level, and it can
  hold the common level down. If the level does not rise, such workflows are frozen
  (at their current point, even if some class of theirs could still use leftover
  resources: that would not lower their slowdown, Def. 1) and the round is replayed
  without them. If every growing workflow can raise its slowdown locally the level
  rises, so a replay always freezes someone and the loop ends. This cannot happen with
  single-class jobs (a class uses its own dominant resource) or when every class
  demands every resource (one round ends everything), the cases Tan Sec. 3-4 consider.

Precision: each MILP (``mip_rel_gap=0``) only chooses the binaries; with them fixed the problem is an LP,
solved with tight tolerances (``highs-ds``, feasibility 1e-10) and then *polished*: the
constraints and bounds active at the LP vertex are solved as a linear system (the level
of stage 1 and its fix in stage 2 left free), and the result replaces the LP's when it
satisfies every constraint to 1e-12. Sec. 2's numbers come out to machine precision.
Tiny negative increments are snapped to 0 and counts within 1e-9 of their cap to the cap.

Equivalence: with one class per job that demands every resource, round 1 saturates a
resource every job needs and the answer is weighted DRF (Tan Sec. 2: "the dominant
resource fairness allocates ... 40/9 jobs for A and 25/9 jobs for B"); with single-class
jobs the rounds continue exactly like DRF's progressive filling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
# (scipy is imported where it solves, not here: every command that lists the policies
# imports this module, and scipy.optimize costs a quarter of a second)

from fairshare.model.allocation import Allocation, build_allocation
from fairshare.model.scenario import Scenario
from fairshare.policies.base import Policy, PolicyModeError, PolicyOption, refuse_gangs

#: a resource used to within this fraction of its capacity is saturated
SAT_RTOL = 1e-9
#: a class within this (relative) of its count has reached it
CAP_RTOL = 1e-9
#: a round whose level rises by less than this (relative) did not raise it
LEVEL_RTOL = 1e-11
#: constraints with slack below this are treated as active when polishing an LP vertex
ACTIVE_TOL = 1e-9
#: the polished point must satisfy every constraint to this
POLISH_TOL = 1e-12
_LP_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
MIXES = ("min-usage", "max-usage")


class Slowdown(Policy):
    name = "slowdown"
    citation = ("Tan et al., 'Multi-resource fair sharing for multiclass workflows', Sec. 2 (example), "
                "Sec. 3 (model, Eq. 1, rounds), Sec. 4 (Def. 1 slowdown, optimal class mix)")
    options = (PolicyOption("mix", "--mix", "tie rule among optimal class mixes (docs/policies.md)",
                            value="choice", choices=MIXES),
               PolicyOption("time_limit_s", "--time-limit", "bound each MILP's solve time; the result then notes the gap",
                            value="positive_float", metavar="SECONDS"))

    def __init__(self, mix: str = "min-usage", time_limit_s: float | None = None):
        if mix not in MIXES:
            raise ValueError(f"mix must be one of {', '.join(MIXES)}, got {mix!r}")
        if time_limit_s is not None and not time_limit_s > 0:
            raise ValueError(f"time_limit_s must be > 0, got {time_limit_s!r}")
        self.mix = mix
        self.time_limit_s = time_limit_s

    def params(self) -> dict:
        return {"mix": self.mix, "time_limit_s": self.time_limit_s}

    def online(self, resources, queues, capacity, *, slots_total=1, nodes=None):
        raise PolicyModeError("policy 'slowdown' has no online meaning: its online, indivisible counterpart is timefair (Tan Sec. 5)")

    def allocate(self, scenario: Scenario, *, respect_counts: bool = False) -> Allocation:
        refuse_gangs(scenario, self.name, "all-or-nothing would turn the slowdown equalisation's linear programs "
                     "(Tan et al. Sec. 4) into integer ones; use a filling policy (drf, hdrf, ...), "
                     "which admits gangs whole")
        capacity = scenario.capacity
        m = scenario.m
        flows = []
        wmax = max((job.weight for job in scenario.jobs), default=1.0)
        for job in scenario.jobs:
            a = np.array([[c.demand[r] / capacity[r] if capacity[r] > 0 else 0.0 for r in range(m)]
                          for c in job.classes])
            caps = np.array([float(c.count) if respect_counts and c.count is not None else math.inf
                             for c in job.classes])
            flows.append(Workflow(job.name, job.weight / wmax, a, caps))
        result = equalize_slowdowns(flows, m, mix=self.mix, time_limit_s=self.time_limit_s)
        by_class = {f.name: tuple(float(v) for v in n) for f, n in zip(flows, result.tasks)}
        notes = []
        for k, rnd in enumerate(result.rounds, 1):
            sat = ", ".join(scenario.resources[r] for r in rnd.saturated) or "none"
            if rnd.stuck:
                what = f"level stays {rnd.level:.6g}; froze {', '.join(rnd.stuck)} (cannot raise its slowdown)"
            else:
                what = f"level {rnd.level:.6g} for {rnd.growing} workflow(s)"
            notes.append(f"slowdown round {k}: {what}; saturated so far: {sat}")
        notes.extend(f"slowdown: time_limit_s reached, not exact: {w}" for w in result.warnings)
        return build_allocation(scenario, self.name, "divisible", by_class, notes=notes)

    def allocate_discrete(self, scenario: Scenario, *, respect_counts: bool = False) -> Allocation:
        raise PolicyModeError(
            "policy 'slowdown' has no discrete (whole-task) static allocation: Tan et al. define "
            "slowdown equalisation for divisible jobs (Sec. 4) and treat whole tasks only online, "
            "by time averages (Sec. 5; see policy 'timefair')")


@dataclass(frozen=True)
class Workflow:
    """One workflow: ``a[j, r]`` = class j's per-task demand over capacity of r."""

    name: str
    weight: float  # normalised: w_i / max_k w_k, in (0, 1]
    a: np.ndarray  # (classes, m)
    cap: np.ndarray  # (classes,), inf = unbounded


@dataclass(frozen=True)
class Round:
    level: float  # the common level eta_k after the round (unchanged when it was replayed)
    growing: int  # workflows taking part
    stuck: tuple[str, ...]  # workflows frozen because the level could not rise
    saturated: tuple[int, ...]  # resources saturated after the round


@dataclass(frozen=True)
class SlowdownResult:
    tasks: list[np.ndarray]  # per workflow, per class
    rounds: list[Round]
    warnings: list[str]  # MILPs stopped by the time limit (empty: the result is exact)


def slowdown(a: np.ndarray, n: np.ndarray) -> float:
    """Def. 1: the dominant share ``max_r sum_j a_jr N_j`` of operation point ``n``."""
    return float((n @ a).max()) if len(n) else 0.0


def equalize_slowdowns(flows: list[Workflow], m: int, *, mix: str = "min-usage",
                       time_limit_s: float | None = None) -> SlowdownResult:
    """Run the rounds described in the module docstring; return tasks per class."""
    tasks = [np.zeros(len(f.a)) for f in flows]
    frozen = [False] * len(flows)
    rounds: list[Round] = []
    level = 0.0
    warnings: list[str] = []
    max_rounds = 2 * (sum(len(f.a) for f in flows) + m + len(flows)) + 4
    for _ in range(max_rounds):
        usage = _usage(flows, tasks, m)
        saturated = usage >= 1.0 - SAT_RTOL
        growable = []
        for i, f in enumerate(flows):
            g = ~(f.a[:, saturated] > 0).any(axis=1) & (tasks[i] < f.cap * (1.0 - CAP_RTOL))
            if frozen[i] or not g.any():
                frozen[i] = True
                g = np.zeros(len(f.a), dtype=bool)
            growable.append(g)
        active = [i for i in range(len(flows)) if not frozen[i]]
        if not active:
            break
        rm = _RoundModel(flows, tasks, growable, active, usage, m)
        eta, delta, limited = rm.solve(level, mix, time_limit_s)
        warnings.extend(f"round {len(rounds) + 1}: {w}" for w in limited)
        if delta is None:
            # The level cannot rise: freeze the workflows that cannot raise their own
            # slowdown locally (every dominant resource is used only by fixed classes).
            stuck = []
            for i in active:
                f = flows[i]
                u = tasks[i] @ f.a
                dom = u >= u.max() * (1.0 - 1e-12)
                if not (f.a[np.ix_(growable[i], dom)] > 0).any():
                    stuck.append(i)
            if not stuck:  # cannot happen (see docstring); never loop forever
                stuck = list(active)
            for i in stuck:
                frozen[i] = True
            rounds.append(Round(level, len(active), tuple(flows[i].name for i in stuck),
                                tuple(np.flatnonzero(saturated))))
            continue
        for i in active:
            n = tasks[i] + np.maximum(delta[i], 0.0)  # snap tiny negatives
            f = flows[i]
            near = np.isfinite(f.cap) & (n >= f.cap * (1.0 - CAP_RTOL))
            n[near] = f.cap[near]
            n = np.minimum(n, f.cap)
            tasks[i] = n
        level = eta
        usage = _usage(flows, tasks, m)
        rounds.append(Round(eta, len(active), (), tuple(np.flatnonzero(usage >= 1.0 - SAT_RTOL))))
    else:
        raise AssertionError(f"slowdown: no fixed point after {max_rounds} rounds")
    return SlowdownResult(tasks, rounds, warnings)


def _usage(flows: list[Workflow], tasks: list[np.ndarray], m: int) -> np.ndarray:
    u = np.zeros(m)
    for f, n in zip(flows, tasks):
        u += n @ f.a
    return u


class _RoundModel:
    """One round's optimisation over the increments ``d_ij >= 0`` of growable classes.

    LP variables: the increments (one per growable class of an active workflow), then the
    level ``eta``. MILP variables: the same (scaled, see :meth:`_milp_stage1`), then the
    binaries ``z_ir`` of the workflows with several candidate resources.
    """

    def __init__(self, flows, tasks, growable, active, usage, m):
        self.m = m
        self.var_of: list[tuple[int, int]] = []  # (workflow, class) per increment variable
        self.cols: dict[int, list[int]] = {}
        for i in active:
            self.cols[i] = []
            for j in np.flatnonzero(growable[i]):
                self.cols[i].append(len(self.var_of))
                self.var_of.append((i, int(j)))
        self.nd = nd = len(self.var_of)
        self.eta = nd  # index of the level (LP) or of s = 1/level (stage-1 MILP)
        self.flows, self.tasks, self.active = flows, tasks, active
        self.current = {i: tasks[i] @ flows[i].a for i in active}  # c_ir, usage so far
        # u_ir as sparse terms over the increment variables
        self.terms = {i: {r: [(v, float(flows[i].a[self.var_of[v][1], r])) for v in self.cols[i]
                              if flows[i].a[self.var_of[v][1], r] > 0] for r in range(m)} for i in active}
        # Candidate resources on which workflow i can reach the level: touched by a growing
        # class and not dominated (r' with at least r's usage in every growing class and so
        # far has u_ir' >= u_ir always; equal columns keep the first).
        self.cand: dict[int, list[int]] = {}
        self.zvar: dict[tuple[int, int], int] = {}
        nz = nd + 1
        for i in active:
            g = flows[i].a[growable[i]]
            c = self.current[i]
            touched = [r for r in range(m) if (g[:, r] > 0).any()]
            keep = []
            for r in touched:
                dominated = False
                for r2 in touched:
                    if r2 != r and (g[:, r2] >= g[:, r]).all() and c[r2] >= c[r]:
                        equal = (g[:, r2] == g[:, r]).all() and c[r2] == c[r]
                        if not equal or r2 < r:
                            dominated = True
                            break
                if not dominated:
                    keep.append(r)
            self.cand[i] = keep
            if len(keep) > 1:
                for r in keep:
                    self.zvar[(i, r)] = nz
                    nz += 1
        self.nvar = nz
        # Disjunctive (Balas) copies for the MILPs: d_i >= sum_r d_i^r, the copy for r
        # carrying the level on r. For binary z the chosen copy's level holds for d_i
        # (usage is monotone in d) and the other copies impose nothing. The sets
        # {d : u_ir(d) >= b} are upward closed, so ">=" gives the same relaxation as the
        # equality of the textbook hull: the convex hull of each workflow's disjunction,
        # which leaves few workflows fractional. A copy holds only the classes that use r.
        self.copy: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (i, r) -> [(copy var, base var)]
        nc = nz
        for i in active:
            if len(self.cand[i]) > 1:
                for r in self.cand[i]:
                    base = [v for v in self.cols[i] if flows[i].a[self.var_of[v][1], r] > 0]
                    self.copy[(i, r)] = [(nc + k, v) for k, v in enumerate(base)]
                    nc += len(base)
        self.nvar_milp = nc
        self.cap_rows = [r for r in range(m) if any(flows[i].a[j, r] > 0 for i, j in self.var_of)]
        self.free = 1.0 - usage  # leftover per resource
        self.gap = np.array([flows[i].cap[j] - tasks[i][j] for i, j in self.var_of], dtype=float)
        # the slowdown is at most 1, so w_i' eta <= 1 for every growing workflow
        self.eta_max = 1.0 / max(flows[i].weight for i in active)

    # --- the round problem as a MILP: only to choose the binaries --------------------------
    def _milp_stage1(self, level: float):
        """Max level, scaled by s = 1/eta, y = d/eta (Charnes-Cooper), which makes the
        disjunction linear without a big-M: for binary z,

            min s  s.t.  c_ir s + u_ir(y_i^r) >= w_i' z_ir,  sum_r z_ir = 1,
                         y_i = sum_r y_i^r,  sum_ij a_ijr y_ij <= free_r s,
                         y_ij <= gap_ij s,  y >= 0,

        is the round problem exactly (multiply through by eta; ``u_ir(y_i) >=
        u_ir(y_i^r)``). A big-M form ``u_ir >= w eta - (1 - z_ir)`` is also exact but its
        relaxation is so weak that HiGHS needs minutes at 20 workflows.
        """
        b = _Rows(self.nvar_milp)
        s = self.eta
        self._capacity_rows(b, s)
        for v in range(self.nd):
            if math.isfinite(self.gap[v]):
                b.add([(v, 1.0), (s, -self.gap[v])], -math.inf, 0.0)
        for i in self.active:
            w, c = self.flows[i].weight, self.current[i]
            cand = self.cand[i]
            if len(cand) == 1:
                r = cand[0]
                b.add(self.terms[i][r] + [(s, c[r])], w, math.inf)
            else:
                self._copy_rows(b, i, lambda r: [(s, c[r]), (self.zvar[(i, r)], -w)], lambda r: 0.0)
        lb = np.zeros(self.nvar_milp)
        ub = np.full(self.nvar_milp, math.inf)
        lb[s] = 1.0 / self.eta_max
        ub[s] = 1.0 / level if level > 0 else math.inf
        ub[self.nd + 1:self.nvar] = 1.0
        cost = np.zeros(self.nvar_milp)
        cost[s] = 1.0
        return cost, b, lb, ub

    def _milp_stage2(self, eta: float, mix: str):
        """Level fixed: the chosen resource's rows ``u_ir(d_i^r) >= (w_i' eta - c_ir) z_ir``
        are linear; every resource is held to ``u_ir(d_i) <= w_i' eta``; optimise usage."""
        b = _Rows(self.nvar_milp)
        self._capacity_rows(b, None)
        for i in self.active:
            w, c = self.flows[i].weight, self.current[i]
            cand = self.cand[i]
            if len(cand) == 1:
                r = cand[0]
                b.add(self.terms[i][r], w * eta - c[r], math.inf)
            else:
                self._copy_rows(b, i, lambda r: [(self.zvar[(i, r)], -(w * eta - c[r]))], lambda r: 0.0)
            for r in range(self.m):
                if self.terms[i][r]:
                    b.add(self.terms[i][r], -math.inf, w * eta - c[r])
        lb = np.zeros(self.nvar_milp)
        ub = np.full(self.nvar_milp, math.inf)
        ub[: self.nd] = self.gap
        lb[self.eta] = ub[self.eta] = eta
        ub[self.nd + 1:self.nvar] = 1.0
        cost = np.zeros(self.nvar_milp)
        cost[: self.nvar] = self._usage_cost(mix, self.nvar)
        return cost, b, lb, ub

    def _capacity_rows(self, b: "_Rows", s: int | None) -> None:
        """Eq. (1) on the resources the growing classes use (scaled by s when given)."""
        for r in self.cap_rows:
            ent = [(v, coef) for i in self.active for v, coef in self.terms[i][r]]
            if s is None:
                b.add(ent, -math.inf, self.free[r])
            else:
                b.add(ent + [(s, -self.free[r])], -math.inf, 0.0)

    def _copy_rows(self, b: "_Rows", i: int, extra, rhs) -> None:
        """Workflow i's disjunction over its candidate resources, with copies."""
        cand = self.cand[i]
        f = self.flows[i]
        parts: dict[int, list[tuple[int, float]]] = {v: [(v, 1.0)] for v in self.cols[i]}
        for r in cand:
            ent = [(cv, float(f.a[self.var_of[v][1], r])) for cv, v in self.copy[(i, r)]]
            b.add(ent + extra(r), rhs(r), math.inf)
            for cv, v in self.copy[(i, r)]:
                parts[v].append((cv, -1.0))
        b.add([(self.zvar[(i, r)], 1.0) for r in cand], 1.0, 1.0)
        for v, ent in parts.items():  # d_ij >= sum_r d_ij^r
            if len(ent) > 1:
                b.add(ent, 0.0, math.inf)

    # --- the round problem as an LP once the binaries are fixed ---------------------------
    def _lp_model(self, stage: int, zfix: dict[tuple[int, int], int] | None, eta_fix: float | None, mix: str):
        nvar = self.nd + 1
        b = _Rows(nvar)
        for r in self.cap_rows:
            b.add([(v, coef) for i in self.active for v, coef in self.terms[i][r]], -math.inf, self.free[r])
        for i in self.active:
            w, c = self.flows[i].weight, self.current[i]
            for r in self.cand[i]:
                if len(self.cand[i]) == 1 or zfix[(i, r)]:
                    b.add(self.terms[i][r] + [(self.eta, -w)], -c[r], math.inf)
            if stage == 2:
                for r in range(self.m):
                    if self.terms[i][r]:
                        b.add(self.terms[i][r] + [(self.eta, -w)], -math.inf, -c[r])
        lb = np.zeros(nvar)
        ub = np.full(nvar, math.inf)
        ub[: self.nd] = self.gap
        ub[self.eta] = self.eta_max
        if stage == 2:
            lb[self.eta] = ub[self.eta] = eta_fix
            cost = self._usage_cost(mix, nvar)
        else:
            cost = np.zeros(nvar)
            cost[self.eta] = -1.0
        return cost, b, lb, ub

    def _usage_cost(self, mix: str, nvar: int) -> np.ndarray:
        sign = 1.0 if mix == "min-usage" else -1.0
        cost = np.zeros(nvar)
        for v, (i, j) in enumerate(self.var_of):
            cost[v] = sign * float(self.flows[i].a[j].sum())
        return cost

    # --- solving ---------------------------------------------------------------------------
    def solve(self, level: float, mix: str, time_limit_s: float | None):
        """Return (level reached, increments per workflow or None if it cannot rise,
        what the time limit cut short)."""
        limited: list[str] = []
        zfix = None
        bound = None
        if self.zvar:
            zfix, bound = self._choose(*self._milp_stage1(level), time_limit_s)
            if zfix is None:  # no level above the current one is feasible
                return level, None, limited
        eta1 = self._lp_solve(1, zfix, None, mix)
        if bound is not None:  # the MILP minimised s = 1/eta: its dual bound caps the level
            best = f"{1.0 / bound:.6g}" if bound > 0 else "unknown"
            found = f"{eta1[self.eta]:.6g}" if eta1 is not None else "none"
            limited.append(f"level {found}, the optimal level is at most {best}")
        if eta1 is None or eta1[self.eta] <= level * (1.0 + LEVEL_RTOL) + 1e-15:
            return level, None, limited
        eta1 = float(eta1[self.eta])
        if self.zvar:
            z2, bound = self._choose(*self._milp_stage2(eta1, mix), time_limit_s)
            if z2 is None:  # eta1 a hair above what the MILP's tolerance allows
                z2, bound = self._choose(*self._milp_stage2(eta1 * (1.0 - 1e-9), mix), time_limit_s)
            if bound is not None:
                limited.append(f"the class mixes may not be the {mix} ones (tie rule)")
            zfix = z2 if z2 is not None else zfix
        x = self._lp_solve(2, zfix, eta1, mix)
        if x is None:
            raise AssertionError("slowdown: round LP (stage 2) infeasible")
        delta = {i: np.zeros(len(self.flows[i].a)) for i in self.active}
        for v, (i, j) in enumerate(self.var_of):
            delta[i][j] = x[v]
        return float(x[self.eta]), delta, limited

    def _choose(self, cost, rows, lb, ub, time_limit_s):
        """Solve a round MILP; return its binaries (None if infeasible) and, when the time
        limit stopped it, its dual bound (else None)."""
        a, lo, hi = rows.build()
        integrality = np.zeros(self.nvar_milp)
        integrality[self.nd + 1:self.nvar] = 1
        options = {"mip_rel_gap": 0.0}
        if time_limit_s is not None:
            options["time_limit"] = time_limit_s
        from scipy.optimize import Bounds, LinearConstraint, milp

        res = milp(cost, integrality=integrality, bounds=Bounds(lb, ub),
                   constraints=LinearConstraint(a, lo, hi), options=options)
        if res.x is None:
            if res.status == 1:
                raise RuntimeError(f"slowdown: the MILP found no feasible point within time_limit_s="
                                   f"{time_limit_s}; raise or drop the limit")
            return None, None  # infeasible: the level cannot rise
        bound = float(res.mip_dual_bound) if res.status == 1 and res.mip_dual_bound is not None else None
        if res.status == 1 and bound is None:
            bound = 0.0
        return {key: int(round(res.x[v])) for key, v in self.zvar.items()}, bound

    def _lp_solve(self, stage, zfix, eta_fix, mix):
        cost, rows, lb, ub = self._lp_model(stage, zfix, eta_fix, mix)
        a, lo, hi = rows.build()
        a = a.toarray()
        x = _lp(cost, a, lo, hi, lb, ub)
        if x is None and stage == 2:  # eta1 a hair above what these binaries allow
            lb[self.eta] = eta_fix * (1.0 - 1e-9)
            x = _lp(cost, a, lo, hi, lb, ub)
        if x is None:
            return None
        # the level is pinned by the active rows, not by its bound: polish it free
        return _polish(a, lo, hi, lb, ub, x, self.eta)


class _Rows:
    """Rows ``lo <= A x <= hi`` collected as sparse triplets."""

    def __init__(self, nvar: int):
        self.nvar = nvar
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []

    def add(self, entries, lo: float, hi: float) -> None:
        k = len(self.lo)
        for col, val in entries:
            self.r.append(k)
            self.c.append(col)
            self.v.append(val)
        self.lo.append(lo)
        self.hi.append(hi)

    def build(self):
        from scipy import sparse

        a = sparse.csr_array((self.v, (self.r, self.c)), shape=(len(self.lo), self.nvar))
        return a, np.array(self.lo, dtype=float), np.array(self.hi, dtype=float)


def _lp(c, a, lo, hi, lb, ub) -> np.ndarray | None:
    """``min c.x`` s.t. ``lo <= a x <= hi``, ``lb <= x <= ub`` by dual simplex (a vertex)."""
    from scipy.optimize import linprog

    up = np.isfinite(hi)
    dn = np.isfinite(lo)
    a_ub = np.vstack([a[up], -a[dn]])
    b_ub = np.concatenate([hi[up], -lo[dn]])
    res = linprog(c, A_ub=a_ub if len(b_ub) else None, b_ub=b_ub if len(b_ub) else None,
                  bounds=list(zip(lb, [None if not math.isfinite(u) else u for u in ub])),
                  method="highs-ds", options=_LP_OPTIONS)
    return res.x if res.status == 0 else None


def _polish(a, lo, hi, lb, ub, x, free_var: int) -> np.ndarray:
    """Solve the constraints active at LP vertex ``x`` exactly (minimum-norm correction).

    Variables at a bound are set to it; rows with slack below ``ACTIVE_TOL`` become
    equalities. ``free_var``'s own bounds are ignored (it is the level, pinned by the
    rows). The polished point is returned only if it satisfies everything to
    ``POLISH_TOL`` and moved less than 1e-7; otherwise ``x`` is returned as is.
    """
    x0 = x.copy()
    scale = np.maximum(1.0, np.abs(x0))
    at_lb = np.abs(x0 - lb) <= ACTIVE_TOL * scale
    at_ub = np.isfinite(ub) & (np.abs(ub - x0) <= ACTIVE_TOL * scale)
    at_lb[free_var] = at_ub[free_var] = False
    y = x0.copy()
    y[at_lb] = lb[at_lb]
    y[at_ub] = ub[at_ub]
    fixed = at_lb | at_ub
    ax = a @ x0
    act_hi = np.isfinite(hi) & (hi - ax <= ACTIVE_TOL)
    act_lo = np.isfinite(lo) & (ax - lo <= ACTIVE_TOL)
    act = act_hi | act_lo
    target = np.where(act_hi, hi, lo)[act]
    free_cols = np.flatnonzero(~fixed)
    if act.any() and len(free_cols):
        sub = a[np.ix_(act, free_cols)]
        resid = target - a[act] @ y
        corr, *_ = np.linalg.lstsq(sub, resid, rcond=None)
        y[free_cols] += corr
    # verify
    ay = a @ y
    ok = (np.all(ay <= hi + POLISH_TOL) and np.all(ay >= lo - POLISH_TOL)
          and np.all(np.abs(y - x0) <= 1e-7 * scale))
    bl = lb.copy()
    bu = ub.copy()
    bl[free_var], bu[free_var] = -math.inf, math.inf
    ok = ok and np.all(y >= bl - POLISH_TOL * scale) and np.all(y <= bu + POLISH_TOL * scale)
    if act.any():
        ok = ok and np.all(np.abs(ay[act] - target) <= POLISH_TOL)
    return y if ok else x0
