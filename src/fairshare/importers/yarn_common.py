"""What the two YARN importers share: reading an XML file, YARN's resource names, numbers.

YARN names memory ``memory-mb`` (megabytes) and CPU ``vcores``; the scenario calls them
``memory`` and ``cpu``, so an imported scenario's memory is in MB and ``--cluster`` or
``--nodes`` must give memory in MB too (docs/whatif.md). Custom resource types keep their
name without YARN's ``yarn.io/`` prefix (``yarn.io/gpu`` -> ``gpu``).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

from fairshare.importers.base import ImportError_

#: YARN resource name -> the scenario's
RESOURCE_NAMES = {"memory-mb": "memory", "memory": "memory", "vcores": "cpu", "cpu": "cpu"}
YARN_PREFIX = "yarn.io/"


def resource_name(yarn_name: str) -> str:
    name = yarn_name.strip().lower()
    if name in RESOURCE_NAMES:
        return RESOURCE_NAMES[name]
    return name[len(YARN_PREFIX):] if name.startswith(YARN_PREFIX) else name


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

