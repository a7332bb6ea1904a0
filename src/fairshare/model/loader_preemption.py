"""The scenario loader's ``preemption:`` section: fair-share preemption's settings
(docs/usage.md; the rules in docs/policies.md, "Fair-share preemption")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fairshare.model.loader_fields import Collector, show
from fairshare.model.scenario import PREEMPTION_RULES, PreemptionConfig
from fairshare.model.schema import PREEMPTION, keys

PREEMPTION_KEYS = keys(PREEMPTION)


def parse_preemption(col: Collector, raw: Any) -> PreemptionConfig | None:
    """``preemption:`` (optional): ``after`` seconds >= 0, ``tolerance`` in [0, 1),
    ``max_per_round`` a whole number >= 1, ``rule`` ``loop-free`` or ``naive``,
    ``within_queue`` a boolean, ``round`` seconds > 0 (absent: none); each
    defaults to :class:`PreemptionConfig`'s. ``preemption: {}`` turns it on with the
    defaults."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        col.add("preemption", f"must be a mapping like {{after: 30}}, got {show(raw)}")
        return None
    col.unknown_keys(raw, PREEMPTION_KEYS, "preemption")
    default = PreemptionConfig()
    after = col.number(raw.get("after", default.after), "preemption.after", minimum=0.0)
    tolerance = col.number(raw.get("tolerance", default.tolerance), "preemption.tolerance", minimum=0.0)
    if tolerance is not None and tolerance >= 1:
        col.add("preemption.tolerance", f"must be < 1 (a dominant share), got {tolerance:g}")
        tolerance = None
    most = col.number(raw.get("max_per_round", default.max_per_round), "preemption.max_per_round",
                      positive=True, integer=True)
    rule = raw.get("rule", default.rule)
    if rule not in PREEMPTION_RULES:
        col.add("preemption.rule", f"must be one of {', '.join(PREEMPTION_RULES)}, got {show(rule)}")
        rule = None
    within_queue = raw.get("within_queue", default.within_queue)
    if not isinstance(within_queue, bool):
        col.add("preemption.within_queue", f"must be true or false, got {show(within_queue)}")
        within_queue = None
    pace = None  # (absent: a round at every decision, as before the key)
    if "round" in raw:
        pace = col.number(raw["round"], "preemption.round", positive=True)
        if pace is None:
            return None
    if None in (after, tolerance, most, rule, within_queue):
        return None
    return PreemptionConfig(after, tolerance, int(most), rule, within_queue, pace)
