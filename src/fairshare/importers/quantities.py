"""What the Kubernetes-side importers (``kueue``, ``yunikorn``) and ``slurm`` share: amounts
written as quantity strings, resource names, queue names, and the cluster's resources.

**Units in the scenario** (the ones the trace converters use too): ``cpu`` in cores,
``memory`` in GiB (2**30 bytes), ``gpu`` in devices, any other resource as counted by
the peer. The cluster the user gives (``--cluster cpu=64,memory=256``) is read in the
same units.

**Quantities** follow Kubernetes' ``resource.Quantity`` grammar (``9``, ``500m``,
``36Gi``, ``1G``, ``1.5``, ``2e3``): a decimal number, then a binary suffix (``Ki`` ..
``Ei``: powers of 1024), a decimal one (``n u m k M G T P E``: powers of 1000) or an
exponent (``e3``). They are parsed exactly (:class:`fractions.Fraction`) and turned
into a float once, after the unit change, so ``36Gi`` of memory is exactly ``36.0``.
YuniKorn's queue resources use the same grammar (its docs, "Resources").

**Resource names** in the scenario are plain words: a name qualified by a domain, as
Kubernetes extended resources are (``nvidia.com/gpu``), keeps the part after the
``/``; ``nvidia.com/gpu`` and ``amd.com/gpu`` both become ``gpu`` (GPUs counted in
devices). Dots are replaced by ``_`` (a dot separates queue paths and field paths).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import yaml

from fairshare.importers.base import ClusterSize, ImportedConfig, ImportError_

GIB = 2 ** 30

_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_DECIMAL = {"n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000), "": 1,
            "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")

#: a peer's resource name -> the scenario's, where the rule below does not give it
_RENAMED = {"vcore": "cpu"}


def parse_quantity(raw: Any, where: str) -> Fraction:
    """A Kubernetes quantity (a YAML number or a string such as ``36Gi``), exactly; raises
    :class:`ImportError_` naming ``where`` (``FILE: PATH``) for anything else or a
    negative amount."""
    if isinstance(raw, bool) or raw is None:
        raise ImportError_(f"{where}: must be a quantity like 9, 500m or 36Gi, got {raw!r}")
    if isinstance(raw, int):
        value = Fraction(raw)
    elif isinstance(raw, float):
        value = Fraction(str(raw))  # the decimal the file wrote, not the binary float's expansion
    else:
        match = _QUANTITY.match(str(raw).strip())
        if match is None:
            raise ImportError_(f"{where}: must be a quantity like 9, 500m or 36Gi, got {raw!r}")
        number, suffix = match.group(1), match.group(2) or ""
        value = Fraction(number)
        if suffix in _BINARY:
            value *= _BINARY[suffix]
        elif suffix[:1] in ("e", "E"):
            value *= Fraction(10) ** int(suffix[1:])
        else:
            value *= _DECIMAL[suffix]
    if value < 0:
        raise ImportError_(f"{where}: must be >= 0, got {raw!r}")
    return value


def scenario_resource(name: str) -> str:
    """The scenario's name of a peer's resource (module docstring): ``nvidia.com/gpu`` ->
    ``gpu``, ``vcore`` -> ``cpu``, ``cpu`` and ``memory`` unchanged."""
    name = _RENAMED.get(name, name)
    return name.rsplit("/", 1)[-1].replace(".", "_")


def scenario_amount(resource: str, amount: Fraction) -> float:
    """A quantity in the peer's base unit (bytes for memory) in the scenario's unit
    (GiB for memory; cores and devices as they are)."""
    return float(amount / GIB) if resource == "memory" else float(amount)


def queue_name(raw: Any, where: str, imported: ImportedConfig) -> str:
    """A queue's name in the scenario: the peer's name, with each ``.`` (the scenario's
    path separator; Kubernetes names and Slurm user names may have them) replaced by
    ``_`` and a warning."""
    if not isinstance(raw, str) or not raw.strip():
        raise ImportError_(f"{where}: must be a non-empty name, got {raw!r}")
    if "." in raw:
        renamed = raw.replace(".", "_")
        imported.warn(where, f"name {raw!r} has '.', which separates queue paths; the queue is named {renamed!r}")
        return renamed
    return raw


def positive_weight(value: float, where: str, imported: ImportedConfig) -> float:
    """A weight the scenario accepts (> 0): a peer's weight 0 ("borrow only what nobody
    else wants", in Kueue and Slurm) becomes 1e-6 of its siblings' scale, with a warning."""
    if value > 0:
        return value
    imported.warn(where, "weight 0 (takes only what no sibling wants) is approximated by weight 1e-6")
    return 1e-6


def cluster_amounts(amounts: Mapping[str, float], where: str, cluster: ClusterSize,
                    imported: ImportedConfig) -> dict[str, float]:
    """``amounts`` without the resources the cluster does not have (a quota on ``pods``
    or ``ephemeral-storage`` when the cluster lists cpu and memory), each dropped one
    named in a warning; every resource named is noted in ``imported.resources``."""
    kept: dict[str, float] = {}
    for res, amount in amounts.items():
        if res not in imported.resources:
            imported.resources.append(res)
        if res in cluster.total:
            kept[res] = amount
        elif not any(u.path == f"{where}.{res}" for u in imported.unsupported):  # (said once per place)
            imported.warn(f"{where}.{res}", f"the cluster has no resource {res!r} "
                                            f"(it has {', '.join(cluster.total)}); its amounts are ignored")
    return kept


def check_guarantees_fit(imported: ImportedConfig, cluster: ClusterSize, source: str, what: str) -> None:
    """Refuse top-level guarantees the cluster cannot hold (the scenario loader would
    refuse the file): the message says what the peer calls them and how to fix it."""
    for res, size in cluster.total.items():
        total = sum(q.get("guarantee", {}).get(res, 0.0) for q in imported.queues)
        if total > size * (1 + 1e-9):
            raise ImportError_(f"{source}: the top-level {what} add up to {total:g} {res}, more than the cluster's "
                               f"{size:g}: give the cluster's real size (a node list, or larger sizes)")


def yaml_documents(path: str) -> list[Any]:
    """Every YAML document of one file (``---`` separated; empty ones skipped); a file
    that does not parse raises :class:`ImportError_` naming the line."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [doc for doc in yaml.safe_load_all(fh) if doc is not None]
    except OSError as exc:
        raise ImportError_(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise ImportError_(f"{path}: {line}not valid YAML: {getattr(exc, 'problem', None) or exc}") from None


def mapping_at(raw: Any, where: str, example: str) -> Mapping:
    """``raw`` when it is a mapping (absent: empty), else :class:`ImportError_`."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ImportError_(f"{where}: must be a mapping like {example}, got {raw!r}")
    return raw


def list_at(raw: Any, where: str, example: str) -> list:
    """``raw`` when it is a list (absent: empty), else :class:`ImportError_`."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ImportError_(f"{where}: must be a list like {example}, got {raw!r}")
    return raw
