"""Config importers: peer schedulers' queue configurations -> scenario documents.

``fairshare import KIND FILE... -o SCENARIO`` (docs/whatif.md). One module per kind, each
with ``NAME``, ``SUMMARY``, ``POLICY`` (its baseline policy's name) and
``read(paths, cluster: ClusterSize) -> ImportedConfig`` (raises ``ImportError_``); see
``importers.base``. :data:`KINDS` is the explicit registry (filled as kinds land).
"""

from __future__ import annotations

from types import ModuleType

from fairshare.importers import kueue, slurm, yarn_capacity, yarn_fair, yunikorn
from fairshare.importers.base import (ClusterSize, ImportedConfig, ImportError_, Unsupported, build_scenario,
                                      queue_entries)

KINDS: dict[str, ModuleType] = {module.NAME: module for module in (yarn_fair, yarn_capacity, kueue, slurm, yunikorn)}

__all__ = ["KINDS", "ClusterSize", "ImportError_", "ImportedConfig", "Unsupported", "build_scenario",
           "queue_entries"]
