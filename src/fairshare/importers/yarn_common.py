"""What the two YARN importers share: reading an XML file, YARN's resource names, numbers.

YARN names memory ``memory-mb`` and CPU ``vcores``; the scenario calls them ``memory``
and ``cpu``, in the units of every importer and trace converter (importers.quantities):
cores, and memory in GiB. YARN's ``memory-mb`` counts mebibytes (ResourceInformation's
unit ``Mi``), so an amount is converted as the SLS converter converts a container's
(traces/sls.py): MB / 1024 = GiB. Percentages are of the cluster, which ``--cluster`` or
``--nodes`` gives in GiB too (docs/whatif.md). Custom resource types keep their name
without YARN's ``yarn.io/`` prefix (``yarn.io/gpu`` -> ``gpu``) and their amount.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

from fairshare.importers.base import ImportError_

#: YARN resource name -> the scenario's
RESOURCE_NAMES = {"memory-mb": "memory", "memory": "memory", "vcores": "cpu", "cpu": "cpu"}
YARN_PREFIX = "yarn.io/"
#: YARN's memory-mb is in mebibytes: 1 GiB = 1024 MB
MB_PER_GIB = 1024


def resource_name(yarn_name: str) -> str:
    name = yarn_name.strip().lower()
    if name in RESOURCE_NAMES:
        return RESOURCE_NAMES[name]
    return name[len(YARN_PREFIX):] if name.startswith(YARN_PREFIX) else name


def in_scenario_units(resource: str, amount: float) -> float:
    """An absolute amount of a YARN resource (already named as the scenario names it) in
    the scenario's unit: memory from MB to GiB, the others as YARN counts them."""
    return amount / MB_PER_GIB if resource == "memory" else amount


def one_file(paths: list[str], kind: str) -> Path:
    """The single configuration file an importer takes."""
    if len(paths) != 1:
        raise ImportError_(f"{kind} reads one file, got {len(paths)}: {', '.join(paths) or 'none'}")
    return Path(paths[0])


def parse_xml(path: Path, root_tag: str) -> ET.Element:
    """The document's root element, which must be ``root_tag``."""
    try:
        root = ET.parse(path).getroot()
    except OSError as exc:
        raise ImportError_(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ET.ParseError as exc:
        raise ImportError_(f"{path}: not well-formed XML: {exc}") from None
    if root.tag != root_tag:
        raise ImportError_(f"{path}: {root.tag}: the document's root element must be <{root_tag}>")
    return root


def number(text: str | None, where: str, *, minimum: float = 0.0) -> float:
    """A finite number >= ``minimum`` from the file, or an error naming ``where``."""
    try:
        value = float((text or "").strip())
    except ValueError:
        raise ImportError_(f"{where}: must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < minimum:
        raise ImportError_(f"{where}: must be a finite number >= {minimum:g}, got {text!r}")
    return value


def percent_of(total: dict[str, float], percent: float, resource: str, where: str) -> float:
    """``percent`` % of the cluster's ``resource`` (the cluster must have it)."""
    if resource not in total:
        raise ImportError_(f"{where}: {percent:g}% of {resource}, but the cluster has no {resource} "
                           f"(resources: {', '.join(total) or 'none'}; give it with --nodes or --cluster)")
    return total[resource] * percent / 100.0


def tidy(amounts: dict[str, float]) -> dict[str, float]:
    """Amounts rounded to 12 significant digits: products of percentages such as
    ``0.795 * 0.6 * 100`` come out as ``47.699999999999996``, which reads as a typo."""
    return {res: float(f"{amount:.12g}") for res, amount in amounts.items()}

