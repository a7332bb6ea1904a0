"""``fairshare trace convert KIND PATH... -o SCENARIO`` and ``KIND:PATH`` scenario arguments.

:func:`add_trace_actions` adds the ``trace`` command's actions to its parser (the main
parser makes that parser, and calls this only when the command is used or its help shown);
:func:`load_kind_path` is what the main CLI calls for a ``KIND:PATH`` scenario argument
(convert with the kind's default options, in memory, then validate like any scenario).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fairshare.traces import KINDS, Conversion, TraceError, convert, write_scenario
from fairshare.traces.base import add_common_arguments, common_options

EXIT_OK, EXIT_USAGE = 0, 2


def add_trace_actions(trace: argparse.ArgumentParser) -> None:
    """``convert`` and its one subcommand per trace kind, with the kind's options."""
    trace_sub = trace.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    conv = trace_sub.add_parser("convert", help="convert a trace into a scenario file",
                                description="Convert a trace into a scenario file. Bad rows are counted and "
                                            "reported with their first line numbers (--strict: an error). "
                                            "Each kind's mapping is in docs/traces.md.")
    kinds = conv.add_subparsers(dest="kind", metavar="KIND", required=True)
    for name, module in KINDS.items():
        p = kinds.add_parser(name, help=module.SUMMARY, description=(module.__doc__ or "").strip(),
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("paths", nargs="+", metavar="PATH",
                       help="trace files, or a directory holding the kind's usual files")
        add_common_arguments(p)
        module.add_arguments(p)
        p.set_defaults(func=cmd_trace_convert)
    trace.set_defaults(func=cmd_trace_convert)


def add_export_arguments(export: argparse.ArgumentParser) -> None:
    """``fairshare export --db DB -o SCENARIO``: the ``fairshare-db`` kind under its own name."""
    module = KINDS["fairshare-db"]
    export.add_argument("--db", required=True, metavar="FILE", help="the SQLite file of `fairshare serve --db`")
    add_common_arguments(export)
    module.add_arguments(export)
    export.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    args.kind, args.paths = "fairshare-db", [args.db]
    return cmd_trace_convert(args)


def cmd_trace_convert(args: argparse.Namespace) -> int:
    module = KINDS[args.kind]
    try:
        common = common_options(args)
        options = module.options_from_args(args)
        show = args.progress or sys.stderr.isatty()
        result = convert(args.kind, args.paths, common, options, strict=args.strict,
                         progress_stream=sys.stderr if show and not args.quiet else None)
        _check_loads(result, args.output, full=not args.no_check)
        write_scenario(result.scenario, Path(args.output))
    except TraceError as exc:
        print(f"fairshare: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.quiet:
        print_summary(result, args.output)
    return EXIT_OK


def print_summary(result: Conversion, output: str, stream=None) -> None:
    stream = stream or sys.stdout
    print(f"converted {result.kind} -> {output}", file=stream)
    for key, value in result.stats.items():
        print(f"  {key}: {value:,}" if isinstance(value, int) else f"  {key}: {value}", file=stream)
    for note in result.notes:
        print(f"  note: {note}", file=stream)
    if result.bad.total:
        print(f"  bad data: {result.bad.total:,} rows skipped or repaired (--strict makes them errors):", file=stream)
        for line in result.bad.lines():
            print(f"    {line}", file=stream)
    else:
        print("  bad data: none", file=stream)


def _check_loads(result: Conversion, source: str, full: bool = True) -> None:
    """Validate the document with the scenario loader before writing it.

    A converter should never produce an invalid scenario; if it does, that is reported
    (as the loader's field paths) rather than written.
    """
    from fairshare.model import ScenarioError, parse_scenario

    if not result.scenario.get("jobs"):
        raise TraceError("nothing to convert: no job is left (check --window, --limit, --sample and the bad data "
                         "report)" + _bad_hint(result))
    if not full:
        return
    try:
        parse_scenario(result.scenario, source)
    except ScenarioError as exc:
        first = "; ".join(f"{e.path}: {e.reason}" for e in exc.errors[:3])
        raise TraceError(f"the converted scenario does not load ({len(exc.errors)} problems; first: {first}); "
                         "please report") from None


def _bad_hint(result: Conversion) -> str:
    return "" if not result.bad.total else " [" + "; ".join(result.bad.lines()[:3]) + "]"


def is_kind_path(argument: str) -> bool:
    kind, sep, _path = argument.partition(":")
    return bool(sep) and kind in KINDS


def load_kind_path(argument: str):
    """Convert ``KIND:PATH`` with default options and return the loaded Scenario.

    Raises TraceError for a conversion problem (its bad-data counts go to stderr).
    """
    from fairshare.model import parse_scenario

    kind, _, path = argument.partition(":")
    result = convert(kind, [path], progress_stream=sys.stderr if sys.stderr.isatty() else None)
    if result.bad.total:
        print(f"{argument}: bad data: {result.bad.total:,} rows skipped or repaired", file=sys.stderr)
        for line in result.bad.lines():
            print(f"  {line}", file=sys.stderr)
    if not result.scenario.get("jobs"):
        raise TraceError(f"{argument}: no job to simulate")
    return parse_scenario(result.scenario, argument)
