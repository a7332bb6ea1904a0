"""``fairshare import KIND FILE... -o SCENARIO``: a peer scheduler's queue configuration as a
scenario file (docs/whatif.md, "Importing your queue configuration").

:func:`add_import_actions` adds one action per registered kind (``importers.KINDS``) to the
``import`` parser; the main parser calls it only when the command is used or its help
shown. The cluster comes from ``--nodes FILE`` (a node list, or a scenario whose
``cluster:`` is taken) or ``--cluster RES=AMOUNT,...`` (one pooled capacity); the jobs from
``--jobs SCENARIO`` (its ``jobs:``) or none. The document is checked with the scenario
loader before it is written (atomically), so a bad input leaves nothing behind.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from fairshare.importers import KINDS, ClusterSize, ImportedConfig, ImportError_, build_scenario, queue_entries

EXIT_OK, EXIT_USAGE = 0, 2
#: ``--jobs`` value for a scenario without jobs (the default)
NO_JOBS = "none"
#: the queue paths the summary names (the scenario file has them all)
SHOWN_QUEUES = 20


def add_import_actions(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    for name, module in KINDS.items():
        p = kinds.add_parser(name, help=module.SUMMARY, description=(module.__doc__ or "").strip(),
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("paths", nargs="+", metavar="FILE", help="the configuration file(s)")
        p.add_argument("-o", "--output", required=True, metavar="SCENARIO",
                       help="the scenario file to write (.json: JSON, else YAML); replaced atomically")
        size = p.add_mutually_exclusive_group(required=True)
        size.add_argument("--nodes", metavar="FILE",
                          help="the cluster's nodes: a YAML/JSON node list [{name, count, capacity, attributes}], "
                               "or a scenario file whose cluster: is taken (memory in GiB)")
        size.add_argument("--cluster", metavar="RES=AMT,...",
                          help="one pooled capacity in cores, GiB and devices, e.g. cpu=96,memory=384,gpu=8")
        p.add_argument("--jobs", default=NO_JOBS, metavar="SCENARIO",
                       help=f"take the jobs of this scenario file (default: {NO_JOBS}, an empty jobs: list)")
        p.add_argument("--policy", metavar="NAME", default=None,
                       help="a policy to compare the baseline with: the summary prints both commands")
        p.add_argument("--strict", action="store_true",
                       help="a setting fairshare cannot express is an error (default: a warning on stderr)")
        p.add_argument("--quiet", action="store_true", help="no summary (warnings still go to stderr)")
        p.set_defaults(func=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    module = KINDS[args.kind]
    try:
        cluster = cluster_from_nodes(args.nodes) if args.nodes else cluster_from_text(args.cluster)
        imported = module.read(list(args.paths), cluster)
        check_resources(imported, cluster)
        for problem in imported.unsupported:
            print(f"warning: {problem}", file=sys.stderr)
        if args.strict and imported.unsupported:
            raise ImportError_(f"--strict: {len(imported.unsupported)} setting(s) fairshare cannot express (the "
                               "warnings above); nothing was written")
        doc = build_scenario(imported, cluster, jobs_from(args.jobs))
        check_loads(doc, args.output)
        from fairshare.traces import TraceError, write_scenario

        try:
            write_scenario(doc, Path(args.output))
        except TraceError as exc:
            raise ImportError_(str(exc)) from None
    except ImportError_ as exc:
        print(f"fairshare: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.quiet:
        print_summary(imported, doc, args.output, args.policy)
    return EXIT_OK


def print_summary(imported: ImportedConfig, doc: dict[str, Any], output: str, compare: str | None,
                  stream=None) -> None:
    stream = stream or sys.stdout
    paths = list(_queue_paths(imported.queues))
    leaves = sum(1 for _path, leaf in paths if leaf)
    print(f"imported {imported.kind} -> {output}", file=stream)
    shown = ", ".join(p for p, _ in paths[:SHOWN_QUEUES]) + (", ..." if len(paths) > SHOWN_QUEUES else "")
    print(f"  queues: {len(paths)} ({leaves} leaves): {shown or 'none'}", file=stream)
    bounded = [p for p, q in queue_entries(imported.queues) if q.get("guarantee") or q.get("limit")]
    print(f"  with a guarantee or limit: {len(bounded)}", file=stream)
    if imported.preemption is not None:
        print(f"  preemption: after {imported.preemption.get('after', 'default')} s", file=stream)
    print(f"  jobs: {len(doc['jobs'])}", file=stream)
    print(f"  baseline policy: {imported.policy} (fairshare simulate {output} --policy {imported.policy} ...)",
          file=stream)
    if compare:
        print(f"  compare with: fairshare compare {output} --policies {imported.policy},{compare} --out DIR",
              file=stream)
    for note in imported.notes:
        print(f"  note: {note}", file=stream)
    print(f"  unsupported settings: {len(imported.unsupported)}" +
          (" (warnings on stderr; --strict makes them errors)" if imported.unsupported else ""), file=stream)


def _queue_paths(queues: list[dict[str, Any]]):
    for path, q in queue_entries(queues):
        yield path, not q.get("children")


# --- the cluster and the jobs ------------------------------------------------------------------

def cluster_from_text(text: str) -> ClusterSize:
    """``--cluster cpu=96,memory=384``: one pooled capacity (memory in GiB)."""
    total: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        name, sep, amount = part.partition("=")
        if not sep or not name.strip():
            raise ImportError_(f"--cluster: {part!r} is not RES=AMOUNT (e.g. --cluster cpu=96,memory=384)")
        total[name.strip()] = _amount(amount, f"--cluster: {name.strip()}")
    return ClusterSize(total=total)


def cluster_from_nodes(path_text: str) -> ClusterSize:
    """``--nodes FILE``: a node list, or a scenario file whose ``cluster:`` is taken."""
    return cluster_from_document(_read_document(Path(path_text), "--nodes"), f"--nodes: {path_text}")


def cluster_from_document(data: Any, source: str) -> ClusterSize:
    """The cluster of a parsed node list or scenario document (its ``cluster:``: nodes or a
    pooled capacity), checked; ``source`` starts each message (``--nodes: FILE``)."""
    if isinstance(data, dict):
        cluster = data.get("cluster")
        if not isinstance(cluster, dict):
            raise ImportError_(f"{source}: cluster: a scenario file needs a cluster: mapping "
                               "(or give a node list)")
        if "capacity" in cluster:
            capacity = cluster["capacity"]
            if not isinstance(capacity, dict):
                raise ImportError_(f"{source}: cluster.capacity: must be a mapping RES: AMOUNT")
            return ClusterSize(total={str(r): _amount(a, f"{source}: cluster.capacity.{r}")
                                      for r, a in capacity.items()})
        data, where = cluster.get("nodes"), "cluster.nodes"
    else:
        where = ""
    if not isinstance(data, list) or not data:
        raise ImportError_(f"{source}: {where or '(top level)'}: must be a non-empty list of nodes "
                           "{name, count, capacity}")
    total: dict[str, float] = {}
    for i, node in enumerate(data):
        at = f"{source}: {where}[{i}]"
        if not isinstance(node, dict) or not isinstance(node.get("capacity"), dict):
            raise ImportError_(f"{at}.capacity: each node needs a capacity mapping RES: AMOUNT")
        count = node.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            raise ImportError_(f"{at}.count: must be a whole number > 0, got {count!r}")
        for res, amount in node["capacity"].items():
            total[str(res)] = total.get(str(res), 0.0) + count * _amount(amount, f"{at}.capacity.{res}")
    return ClusterSize(total=total, nodes=data)


def jobs_from(argument: str) -> list[dict[str, Any]]:
    """``--jobs SCENARIO``: that file's ``jobs:`` as written (checked with the rest), or none."""
    if argument == NO_JOBS:
        return []
    data = _read_document(Path(argument), "--jobs")
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        raise ImportError_(f"--jobs: {argument}: jobs: a scenario file with a jobs: list")
    return jobs


def _read_document(path: Path, flag: str) -> Any:
    """The YAML or JSON file, parsed by the scenario loader's reader (its strict YAML:
    duplicate keys refused); every failure an error naming ``flag`` and the file."""
    from fairshare.model.errors import ScenarioError
    from fairshare.model.loader import read_document

    try:
        return read_document(path, what=f"{flag} file")
    except ScenarioError as exc:
        raise ImportError_(f"{flag}: {exc}") from None


def _amount(value: Any, where: str) -> float:
    try:
        amount = float(value)
    except (TypeError, ValueError):
        raise ImportError_(f"{where}: must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(amount) or amount < 0:
        raise ImportError_(f"{where}: must be a finite number >= 0, got {value!r}")
    return amount


# --- checks ------------------------------------------------------------------------------------

def check_resources(imported: ImportedConfig, cluster: ClusterSize) -> None:
    """Every resource the configuration names is one the cluster has."""
    missing = [r for r in imported.resources if r not in cluster.total]
    if missing:
        raise ImportError_(f"the configuration names {', '.join(missing)}, which the cluster does not have "
                           f"(cluster: {', '.join(cluster.total) or 'nothing'}); add it with --nodes or --cluster")


def check_loads(doc: dict[str, Any], output: str) -> None:
    """The scenario loader accepts the document (else its first problems, and nothing is written)."""
    from fairshare.model import ScenarioError, parse_scenario

    try:
        parse_scenario(doc, output)
    except ScenarioError as exc:
        first = "; ".join(f"{e.path}: {e.reason}" for e in exc.errors[:3])
        raise ImportError_(f"the imported scenario does not load ({len(exc.errors)} problem(s); first: {first}); "
                           "nothing was written") from None
