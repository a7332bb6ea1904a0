"""What a what-if runs: the policies, and the settings ``--vary`` changes, as named variants.

A variant is one simulation of the same scenario document: a policy, and at most one
setting changed from the document (``--vary KEY=V1,V2``). ``current`` names the baseline
policy that behaves like the scheduler the configuration came from (``yarn-fair`` for a
fair-scheduler.xml, ``kueue`` for ClusterQueues ...); the first variant is the one every
other is compared with.

``--vary`` keys are paths into the scenario document:

* a top-level section's key: ``fairness.half_life``, ``preemption.after``,
  ``preemption.max_per_round``, ``gangs.reserve_after``;
* a queue's field: ``queue[ads.prod].weight``, ``queue[ads].guarantee.cpu``,
  ``queue[ads].limit.memory`` (the queue by its dotted path, in brackets, because the
  path has dots);
* a peer baseline's setting: ``peers.yarn-fair.default_policy``.

Values are YAML scalars (``1``, ``0.5``, ``.inf``, ``drf``); ``none`` removes the key.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from fairshare.importers.base import queue_entries

CURRENT = "current"

_QUEUE_KEY = re.compile(r"^queue\[(?P<path>[^\]]+)\]\.(?P<rest>.+)$")


class VariantError(ValueError):
    """A ``--policies`` or ``--vary`` value that cannot be run; the message names the flag."""


@dataclass(frozen=True)
class Setting:
    key: str  # as written after --vary
    value: Any  # parsed YAML scalar; None: remove the key

    @property
    def label(self) -> str:
        return f"{self.key}={_show(self.value)}"


@dataclass(frozen=True)
class Variant:
    policy: str  # a registered policy name (``current`` already resolved)
    setting: Setting | None = None
    current: bool = False  # the run the others are compared with

    @property
    def label(self) -> str:
        name = f"current ({self.policy})" if self.current else self.policy
        return name if self.setting is None else f"{name} {self.setting.label}"

    @property
    def slug(self) -> str:
        """A directory name for the variant's outputs."""
        base = "current" if self.current else self.policy
        if self.setting is None:
            return base
        return re.sub(r"[^A-Za-z0-9._=-]+", "_", f"{base}__{self.setting.key}={_show(self.setting.value)}")


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float) and value == float("inf"):
        return "inf"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _scalar(text: str) -> Any:
    import yaml

    if text.strip().lower() == "none":
        return None
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (int, float, str, bool)) else text


def parse_vary(text: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2`` -> (KEY, [values]); raises VariantError naming ``--vary``."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise VariantError(f"--vary: expected KEY=V1,V2 (e.g. fairness.half_life=0,86400), got {text!r}")
    parsed = [_scalar(v.strip()) for v in values.split(",")]
    if any(v == "" for v in parsed):
        raise VariantError(f"--vary {key}: an empty value in {values!r}")
    return key, parsed


def parse_policies(text: str, current_policy: str | None, registry) -> list[str]:
    """``--policies current,hdrf`` -> registered names, ``current`` resolved (first stays first)."""
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise VariantError(f"--policies: empty policy name in {text!r} (write e.g. --policies current,hdrf,drf)")
    out = []
    for name in names:
        if name == CURRENT:
            if current_policy is None:
                raise VariantError("--policies current: no current scheduler is known (give --kind with --config, "
                                   "or --current POLICY)")
            name = current_policy
        if name not in registry:
            from fairshare.policies import unknown_policy

            raise VariantError(f"--policies: {unknown_policy(name)}")
        if name in out:
            raise VariantError(f"--policies: {name} listed twice")
        out.append(name)
    return out


def variants(policies: list[str], current_policy: str | None, vary: list[tuple[str, list[Any]]]) -> list[Variant]:
    """Every policy once as the document says, then every policy with each varied value.

    The first variant is the comparison's base: ``current`` when it is listed, else the
    first policy."""
    out = [Variant(p, None, current=(p == current_policy)) for p in policies]
    if not any(v.current for v in out):
        out[0] = Variant(out[0].policy, None, current=False)
    for key, values in vary:
        for policy in policies:
            for value in values:
                out.append(Variant(policy, Setting(key, value), current=(policy == current_policy)))
    return out


def apply_setting(doc: dict[str, Any], setting: Setting) -> dict[str, Any]:
    """A copy of the scenario document with ``setting`` applied; VariantError naming the key."""
    doc = copy.deepcopy(doc)
    key = setting.key
    match = _QUEUE_KEY.match(key)
    if match:
        target = next((entry for path, entry in queue_entries(doc.get("queues") or [])
                       if path == match.group("path")), None)
        if target is None:
            raise VariantError(f"--vary {key}: no queue {match.group('path')!r} in the scenario")
        parts = match.group("rest").split(".")
    else:
        target = doc
        parts = key.split(".")
        if parts[0] in ("jobs", "cluster", "queues", "events"):
            raise VariantError(f"--vary {key}: varies a section's setting (fairness.half_life, "
                               f"preemption.after, queue[PATH].weight ...), not {parts[0]}")
    for part in parts[:-1]:
        nxt = target.get(part)
        if nxt is None:
            nxt = target[part] = {}
        if not isinstance(nxt, dict):
            raise VariantError(f"--vary {key}: {part} is not a mapping in the scenario")
        target = nxt
    if setting.value is None:
        target.pop(parts[-1], None)
    else:
        target[parts[-1]] = setting.value
    return doc
