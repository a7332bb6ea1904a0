"""The audit's answer: one verdict per property, as JSON (contract) and as a text table."""

from __future__ import annotations

import math
from dataclasses import dataclass

#: the properties of the contract (``fairshare audit``), in the order they are reported
PROPERTY_NAMES: tuple[str, ...] = (
    "sharing_incentive",
    "envy_freeness",
    "pareto_efficiency",
    "bottleneck_fairness",
    "strategy_proofness",
    "hierarchical_share_guarantee",
    "population_monotonicity",
)
#: the contract's properties and fairshare's extensions (reported where they apply)
ALL_PROPERTY_NAMES: tuple[str, ...] = PROPERTY_NAMES + ("guarantees_and_limits",)


@dataclass(frozen=True)
class PropertyResult:
    """The verdict on one property.

    ``holds`` is True, False, or None when the property does not apply to this scenario
    (e.g. bottleneck fairness without a common bottleneck). ``witness`` is None unless the
    property is violated; then it names the jobs (and queues) and the numbers that show
    it. ``detail`` says the same in words, or what was checked when it holds.
    """

    name: str
    holds: bool | None
    witness: dict | None
    detail: str

    @property
    def verdict(self) -> str:
        return {True: "HOLDS", False: "VIOLATED", None: "n/a"}[self.holds]

    def to_json(self) -> dict:
        return {"holds": self.holds, "witness": _jsonable(self.witness), "detail": self.detail}


@dataclass(frozen=True)
class AuditReport:
    policy: str
    mode: str  # "divisible" or "discrete"
    respect_counts: bool
    properties: dict[str, PropertyResult]

    def to_json(self) -> dict:
        """Exactly the contract's shape: ``{"policy", "properties": {NAME: {"holds", "witness", ...}}}``."""
        return {
            "policy": self.policy,
            "properties": {name: res.to_json() for name, res in self.properties.items()},
        }

    def violated(self) -> list[str]:
        return [name for name, res in self.properties.items() if res.holds is False]

    def format_table(self) -> str:
        """Plain text, one line per property: name, HOLDS / VIOLATED / n/a, the detail."""
        counts = ", respecting task counts" if self.respect_counts else ""
        lines = [f"audit of policy {self.policy} ({self.mode}{counts})"]
        width = max(len(name) for name in self.properties) if self.properties else 0
        for name, res in self.properties.items():
            lines.append(f"{name:<{width}}  {res.verdict:<8}  {res.detail}")
        return "\n".join(lines)


def _jsonable(value):
    """Plain JSON values: floats that are not finite become None, tuples lists."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    return x if math.isfinite(x) else None
