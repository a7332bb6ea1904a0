"""The policy seam: one class per policy, options as constructor arguments.

Every policy answers the static question ("with every job always demanding, what does
each job get?") divisibly via :meth:`Policy.allocate` and, where the paper's greedy rule
applies, with whole tasks on the nodes via :meth:`Policy.allocate_discrete` (DRF
Sec. 6.2). Online (which job's next task runs), :meth:`Policy.online` gives the policy's
sorter and :meth:`Policy.share_rule` its formulas for the per-decision reference sorter
(``policies/machinery/reference.py``). The engine asks a policy only through these methods and the
declared class attributes below, never by its name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal

from fairshare.model.allocation import Allocation
from fairshare.model.scenario import Scenario
from fairshare.policies.machinery.reference import ReferenceSorter, ShareRule
from fairshare.policies.online import OnlineSorter


class PolicyModeError(ValueError):
    """The policy has no meaning in the requested mode (contract: say so, exit 2)."""


#: how a policy option's value is read from the command line (the CLI maps each to its
#: parser and error message): ``off`` is a ``--no-...`` switch that sets the argument to
#: False; ``text`` any string; ``resource`` the name of one of the scenario's resources
#: (checked against the scenario before any work); ``choice`` one of ``choices``; the
#: numbers as named
OptionValue = Literal["off", "text", "resource", "choice", "positive_int", "positive_float", "non_negative_float"]


def refuse_gangs(scenario: Scenario, policy: str, why: str) -> None:
    """Raise :class:`PolicyModeError` naming the first gang of ``scenario``: for the static
    allocations that cannot keep a gang indivisible (``why``: the reason, cited)."""
    for i, job in enumerate(scenario.jobs):
        if job.gang:
            raise PolicyModeError(f"policy {policy!r} cannot allocate jobs[{i}] ({job.name!r}): it is a gang "
                                  f"(gang: true, all of its tasks or none), and {why}")


def refuse_usage(scenario: Scenario, policy: "Policy") -> None:
    """Raise :class:`PolicyModeError` when ``scenario`` has past usage (not all zero) and
    ``policy``'s static allocation cannot take it (:attr:`Policy.remembers_usage`)."""
    if scenario.usage is not None and not scenario.usage.is_zero() and not policy.remembers_usage:
        raise PolicyModeError(
            f"{scenario.usage.source}: policy {policy.name!r} has no static allocation with past usage (its order "
            f"is not a dominant share that history can be added to: docs/policies.md, \"Fairness with memory\"); "
            f"drop the usage or use drf, asset, cpu, collapsed, hdrf, hdrf-naive or capacity")


@dataclass(frozen=True)
class PolicyOption:
    """One constructor argument of a policy, as offered on the command line.

    A policy declares its options in :attr:`Policy.options`; the CLI builds its flags from
    those declarations (one flag per distinct ``flag``, its help prefixed with the
    policies that take it) and passes a given flag only to those policies.
    """

    param: str  # the constructor argument
    flag: str  # e.g. "--window"
    help: str
    value: OptionValue = "text"
    metavar: str | None = None
    choices: tuple[str, ...] = ()


class Policy(ABC):
    #: registry name, as used by ``--policy``
    name: ClassVar[str]
    #: paper, section and algorithm the policy implements
    citation: ClassVar[str]
    #: True when the policy reads the queue tree (hierarchical entitlements apply)
    hierarchical: ClassVar[bool] = False
    #: True when the policy's online share is usage over capacity (``max_r U_r / C_r``, a
    #: sum of those, or one resource of it): the engine then reports a constrained job's
    #: usage normalized to the capacity of the nodes it may use (docs/policies.md,
    #: "Constraints and fairness"). Declared per policy; the engine never tests names.
    share_is_usage_over_capacity: ClassVar[bool] = False
    #: True when the static allocation honours queue guarantees and limits
    #: (``policies/machinery/bounds.py``); otherwise a bounded scenario's allocation says
    #: it did not
    honours_queue_bounds: ClassVar[bool] = False
    #: True when the static allocation takes past usage (``Scenario.usage``, the ``usage:``
    #: section): each job (and queue) starts the filling with its average past allocation
    #: in its level (``policies/machinery/filling.py``, "History"), as the online sorters
    #: with memory add ``U / W``. The others refuse non-zero usage (:func:`refuse_usage`)
    remembers_usage: ClassVar[bool] = False
    #: the scenarios (``"flat"``: no queues, ``"hierarchical"``: queues) for which this
    #: policy's static allocation is the fairness gap's reference when a run's own policy
    #: has none (``sim/metrics.py``; ``slots``, ``timefair``): one registered policy
    #: declares each (drf, hdrf), so the simulator never picks a policy by its name
    fairness_reference: ClassVar[Literal["flat", "hierarchical"] | None] = None
    #: the constructor arguments offered as command-line flags (tests/test_cli.py checks
    #: they are exactly the constructor's arguments)
    options: ClassVar[tuple[PolicyOption, ...]] = ()
    #: option sets the conformance checks run besides the defaults (constructor
    #: arguments: the online algorithm's switches), as ``python -m fairshare.conformance``
    #: and tests/test_conformance_online.py do
    conformance_variants: ClassVar[tuple[dict, ...]] = ()
    #: conformance check name -> why it does not apply to this policy (a paper's section
    #: or a measurement). Not a skip: the check still runs and must fail, and one that
    #: passes is reported as "exemption no longer needed", a failure (docs/architecture.md,
    #: "Writing and checking a new policy"). A subclass inherits them like any attribute.
    conformance_exemptions: ClassVar[dict[str, str]] = {}

    def slots_per_node(self) -> int | None:
        """Slot scheduling: tasks per node counted by slots, resources ignored (None: the
        node's resources decide what fits, as for every policy of the papers)."""
        return None

    def params(self) -> dict:
        """Constructor arguments, for reports (scikit-learn's ``get_params``)."""
        return {}

    def configured(self, scenario: Scenario) -> Policy:
        """This policy with the settings it reads from ``scenario`` beyond its queues and
        jobs: the peer baselines read their section of ``peers:`` here (docs/policies.md,
        "Peer baselines"), raising ``ScenarioError`` with every bad ``peers.<peer>.<key>``.
        The runtimes call it where they build a scheduler from a scenario (the simulator,
        the conformance driver); the default is the policy itself, unchanged."""
        return self

    @abstractmethod
    def allocate(self, scenario: Scenario, *, respect_counts: bool = False) -> Allocation:
        """Exact divisible static allocation on the pooled capacity."""

    def allocate_discrete(self, scenario: Scenario, *, respect_counts: bool = False) -> Allocation:
        raise PolicyModeError(f"policy {self.name!r} has no discrete (whole-task) static allocation")

    def share_rule(self, resources: tuple[str, ...], *, slots_total: int = 1) -> ShareRule:
        """How this policy measures shares online, for :class:`ReferenceSorter` (the
        per-decision recomputation): the policy's own formulas, so the reference needs no
        branch per policy. ``slots_total`` is the cluster's slot count (slot scheduling).
        Policies with no online meaning raise :class:`PolicyModeError`."""
        raise PolicyModeError(f"policy {self.name!r} has no per-decision reference sorter")

    def reference_sorter(self, resources: tuple[str, ...], queues, capacity, *,
                         slots_total: int = 1) -> ReferenceSorter:
        """The straightforward online sorter (every share recomputed per decision, as the
        papers' pseudo-code): what the incremental sorters are tested and benchmarked
        against."""
        return ReferenceSorter(self.share_rule(resources, slots_total=slots_total), len(resources), queues,
                               capacity)

    def online(self, resources: tuple[str, ...], queues, capacity, *, slots_total: int = 1,
               nodes=None) -> OnlineSorter:
        """The online sorter that picks the next job (see ``policies/online.py``).

        The default is :meth:`reference_sorter`; policies with an incremental sorter
        override this. Policies with no online meaning raise :class:`PolicyModeError`.
        ``nodes`` (the cluster's ``Node`` list, optional) is for sorters that need per-node
        capacities (``timefair``'s N_i); others ignore it, and overrides must accept it.
        """
        return self.reference_sorter(resources, queues, capacity, slots_total=slots_total)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"
