"""The written tie rule, once, for every policy's online and whole-task decisions.

Siblings are compared by (share rounded to :data:`DIGITS` digits, running tasks in the
subtree, position among siblings), lowest first: the rounding lets float noise in two
computations of one share (running sums against a from-scratch sum) never decide, then
fewer running tasks, then listed first (queues in file order, jobs by arrival).

:func:`tie_key` is that key. The incremental sorters build it inline in their heap
entries (``(round(share, DIGITS), running, position, version, node)``): a call per heap
push costs several percent of a fill there (docs/performance.md), so they import
:data:`DIGITS` instead and write the same expression.
"""

from __future__ import annotations

#: digits a share is rounded to before shares are compared
DIGITS = 12


def share_key(share: float) -> float:
    """A share as the tie rule compares it."""
    return round(share, DIGITS)


def tie_key(share: float, running: int, position: int) -> tuple[float, int, int]:
    """The tie rule's sort key for one sibling (lowest first)."""
    return (round(share, DIGITS), running, position)
