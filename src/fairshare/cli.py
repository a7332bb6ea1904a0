"""The ``fairshare`` command (contract: "Package and command", ``allocate``, ``audit``,
``simulate``, ``compare``).

Exit status: 0 success; 2 a user error (bad scenario file, unknown policy, an option the
chosen policy does not take, a policy with no meaning in the requested mode, argparse
usage errors); 1 an internal error (a short message asking for a report; the traceback
only with ``FAIRSHARE_DEBUG=1``). User errors never print a traceback.

The scenario argument ``default`` names the bundled example (``fairshare/data/default.yaml``,
DFF Sec. 4.1); write ``./default`` for a file of that name in the current directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import math
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

#: the literal scenario argument that selects the bundled example
DEFAULT_SCENARIO = "default"
DEBUG_ENV = "FAIRSHARE_DEBUG"
EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


class CLIError(Exception):
    """A problem to report in one message, without a traceback, with an exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE):
        super().__init__(message)
        self.status = status


def _number(convert: Callable[[str], Any], ok: Callable[[Any], bool], reason: str,
            out_of_range: str | None = None) -> Callable[[str], Any]:
    """An argparse ``type``: ``convert`` the text, refuse it unless ``ok``, saying ``reason``."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{reason}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{out_of_range or reason}, got {text!r}")
        return value

    return parse


_positive_int = _number(int, lambda v: v > 0, "must be a positive whole number")
_non_negative_int = _number(int, lambda v: v >= 0, "must be a whole number >= 0")
_positive_float = _number(float, lambda v: math.isfinite(v) and v > 0, "must be a number > 0")
_non_negative_float = _number(float, lambda v: math.isfinite(v) and v >= 0, "must be a number of seconds >= 0",
                              "must be a finite number of seconds >= 0")
#: the parser of each kind of policy option value (``policies.base.OptionValue``)
_OPTION_TYPES: dict[str, Callable[[str], Any] | None] = {
    "text": None, "resource": None, "choice": None, "positive_int": _positive_int, "positive_float": _positive_float,
    "non_negative_float": _non_negative_float,
}


def _policy_option_flags() -> dict[str, tuple[Any, list[str]]]:
    """Every policy option flag, from the policy classes' declarations (``Policy.options``):
    flag -> (its declaration, the names of the policies that take it), in registry order.
    A flag is accepted only for those policies, so ``--no-rescale --policy drf`` is an
    error, and a new policy option needs no line here."""
    from fairshare.policies import REGISTRY

    flags: dict[str, tuple[Any, list[str]]] = {}
    for name, cls in REGISTRY.items():
        for option in cls.options:
            if option.flag not in flags:
                flags[option.flag] = (option, [])
            elif flags[option.flag][0] != option:
                raise AssertionError(f"policies declare {option.flag} differently: "
                                     f"{flags[option.flag][0]} and {option}")
            flags[option.flag][1].append(name)
    return flags


def _dest(flag: str) -> str:
    """argparse's attribute for a flag (``--time-limit`` -> ``time_limit``)."""
    return flag.lstrip("-").replace("-", "_")


class _SuggestingParser(argparse.ArgumentParser):
    """argparse's parser, which adds to an invalid choice (a mistyped command, placement
    or trace kind) the closest valid one: ``invalid choice: 'simulat' (...); did you mean
    'simulate'?`` (Python 3.11's argparse has no suggestions of its own)."""

    def error(self, message: str):
        import difflib
        import re

        got = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if got:
            choices = re.findall(r"'([^']*)'", got.group(2))
            close = difflib.get_close_matches(got.group(1), choices, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)


class _DeferredParser(_SuggestingParser):
    """A subcommand's parser whose last arguments are added on first use (parsing, usage
    or help), by the functions given to :meth:`defer`, in order.

    The policy option flags come from the policy classes and ``--placement``'s choices from
    the engine, which import numpy and scipy: deferred, they are loaded only for the
    commands that take them, so ``--version``, ``--help`` and the HTTP clients start
    without them, and each command's usage and help are the same as if built at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deferred: list[Callable[[argparse.ArgumentParser], None]] = []

    def defer(self, *add_arguments: Callable[[argparse.ArgumentParser], None]) -> None:
        self._deferred.extend(add_arguments)

    def _complete(self) -> None:
        while self._deferred:
            self._deferred.pop(0)(self)

    def parse_known_args(self, args=None, namespace=None):
        self._complete()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._complete()
        return super().format_usage()

    def format_help(self) -> str:
        self._complete()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    from fairshare import __version__

    parser = _SuggestingParser(
        prog="fairshare",
        description="Multi-resource, hierarchical fair-share scheduling (DRF, H-DRF, DFF, Tan et al.).",
        epilog=f"SCENARIO is a YAML or JSON scenario file, or '{DEFAULT_SCENARIO}' for the bundled "
               "DFF Sec. 4.1 example. See docs/usage.md.",
    )
    parser.add_argument("--version", action="version", version=f"fairshare {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_DeferredParser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", metavar="SCENARIO",
                       help=f"scenario file (YAML or JSON), or '{DEFAULT_SCENARIO}' for the bundled example")
        p.add_argument("--policy", required=True, metavar="P", help="policy name (see `fairshare policies`)")
        p.add_argument("--discrete", action="store_true",
                       help="place whole tasks on the nodes (default: divisible, fluid tasks on the pooled capacity)")
        p.add_argument("--respect-counts", action="store_true",
                       help="cap each job at its task counts (default: every job always has a next task)")
        p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")

    def policy_options(p: argparse.ArgumentParser) -> None:
        opts = p.add_argument_group("policy options (only for the policies that take them)")
        # default=None everywhere: an option is passed to the policy only when given.
        for flag, (option, takers) in _policy_option_flags().items():
            help_text = f"{', '.join(takers)}: {option.help}"
            if option.value == "off":
                opts.add_argument(flag, action="store_true", default=None, help=help_text)
            else:
                opts.add_argument(flag, type=_OPTION_TYPES[option.value], default=None, metavar=option.metavar,
                                  choices=option.choices or None, help=help_text)

    alloc = sub.add_parser("allocate", help="compute a policy's static allocation",
                           description="The static allocation of a policy on a scenario.")
    common(alloc)
    alloc.add_argument("--explain", action="store_true",
                       help="also say, per job, what bounds it: a saturated resource, its queue's limit, its own "
                            "demand or the node fit (JSON: an \"explain\" key)")
    alloc.add_argument("--usage", metavar="FILE", default=None,
                       help="past usage to compute the entitlement with: a `simulate` summary.json, or a usage: "
                            "section (alone or in a scenario file); replaces the scenario's own usage: "
                            "(docs/usage.md, \"usage: past usage for allocate\")")
    alloc.defer(policy_options)

    expl = sub.add_parser("explain", help="why a job waits, what would start it, and when it will start",
                          description="Why job NAME is pending (or what bounds it in the static allocation, "
                                      "without --at), each reason with its numbers; the smallest changes that "
                                      "would start it now, each checked by deciding again; and its simulated "
                                      "start (docs/usage.md, \"Why is my job waiting?\").")
    common(expl)
    expl.add_argument("--job", required=True, metavar="NAME", help="the job to explain")
    expl.add_argument("--at", type=_non_negative_float, default=None, metavar="SECONDS",
                      help="explain the simulated state at this time (default: the static allocation)")
    expl.add_argument("--seed", type=_non_negative_int, default=0, metavar="N",
                      help="the simulation's random seed (sampled durations; default: 0)")

    def explain_placement(p: argparse.ArgumentParser) -> None:
        from fairshare.engine.placement import STRATEGIES

        p.add_argument("--placement", choices=STRATEGIES, default="first-fit",
                       help="node placement strategy of the simulation (default: first-fit)")

    expl.defer(explain_placement, policy_options)

    aud = sub.add_parser("audit", help="check the papers' fairness properties for a policy",
                         description="Check the papers' fairness properties for a policy's static allocation.")
    common(aud)
    aud.add_argument("--max-jobs-searched", type=_positive_int, default=None, metavar="N",
                     help="bound on the jobs tried when searching for a witness (strategy-proofness, ...)")

    def sim_common(p: argparse.ArgumentParser) -> None:
        from fairshare.engine.placement import STRATEGIES

        p.add_argument("--out", required=True, metavar="DIR",
                       help="directory for the results (created if missing; files in it are replaced)")
        p.add_argument("--seed", type=_non_negative_int, default=0, metavar="N",
                       help="seed of the run's random numbers (task durations); default 0")
        p.add_argument("--until", type=_non_negative_float, default=None, metavar="T",
                       help="stop at T simulated seconds (required when a job has unbounded task counts)")
        p.add_argument("--placement", choices=STRATEGIES, default="first-fit",
                       help="which node a task goes to (default: first-fit)")
        p.add_argument("--headroom", action="store_true",
                       help="keep room for the largest task on every node (H-DRF Sec. 5)")
        p.add_argument("--progress", action="store_true",
                       help="show a progress bar on stderr even when it is not a terminal")
        p.add_argument("--preempt", action="store_true",
                       help="fair-share preemption, with the scenario's preemption: settings or the defaults "
                            "(docs/usage.md; a scenario with a preemption: section preempts without the flag)")
        p.add_argument("--track-fair-share", action="store_true",
                       help="measure each queue's time below its fair share also without preemption "
                            "(summary.json: queues.*.time_below_fair_share)")
        p.add_argument("--reasons", action="store_true",
                       help="why jobs wait: per job, seconds pending by reason (summary.json: pending_by_reason) "
                            "and each change of its reason (timeline.csv: rows of kind reason, in a last column "
                            "reason); not with --stream")
        p.add_argument("--no-fairness-gap", action="store_true",
                       help="skip the fairness gap (it computes one static allocation per distinct set of "
                            "demanding jobs) and the terminal's fair-share column")
        p.add_argument("--format", choices=("table", "json"), default="table",
                       help="terminal output: the summary lines and per-queue table (default), or the "
                            "summary JSON (compare: compare.json's document) on stdout")

    simp = sub.add_parser("simulate", help="simulate a policy over time on the nodes",
                          description="Discrete-event simulation of a policy on the scenario's nodes: jobs arrive "
                                      "at their submit times, tasks run for their sampled durations. Writes "
                                      "summary.json, timeline.csv and report.html into --out. Task counts are "
                                      "always respected. Deterministic for a given --seed.")
    simp.add_argument("scenario", metavar="SCENARIO",
                      help=f"scenario file (YAML or JSON), or '{DEFAULT_SCENARIO}' for the bundled example")
    simp.add_argument("--policy", required=True, metavar="P", help="policy name (see `fairshare policies`)")

    def stream_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--stream", action="store_true",
                       help="bounded memory for large traces: jobs enter the simulator in submit order and leave "
                            "it when they finish; timeline.csv is written as the run goes and summary.json from "
                            "running totals; no fairness gap (null) and no report.html (docs/simulation.md)")

    def reference_option(default: str) -> Callable[[argparse.ArgumentParser], None]:
        def add(p: argparse.ArgumentParser) -> None:
            p.add_argument("--reference", metavar="POLICY", default=None,
                           help="measure the fairness gap against this policy's static allocation (with its "
                                f"default options), and show its fair shares; default: {default} "
                                "(summary.json: fairness_reference_policy)")
        return add

    simp.defer(sim_common, stream_option, policy_options,
               reference_option("the policy under test (its own static allocation; hdrf, or drf without "
                                "queues, for a policy that has none)"))

    comp = sub.add_parser("compare", help="simulate several policies on the same scenario and seed",
                          description="Simulate each policy on the same scenario, options and seed; writes each "
                                      "policy's results into DIR/POLICY/ and a side-by-side DIR/report.html and "
                                      "DIR/compare.json. A policy option applies to the listed policies that take "
                                      "it.")
    comp.add_argument("scenario", metavar="SCENARIO",
                      help=f"scenario file (YAML or JSON), or '{DEFAULT_SCENARIO}' for the bundled example")
    comp.add_argument("--policies", required=True, metavar="A,B,...",
                      help="comma-separated policy names (see `fairshare policies`)")
    comp.defer(sim_common, policy_options,
               reference_option("hdrf for every policy (drf for a scenario without queues)"))

    sub.add_parser("policies", help="list the registered policies with their citations",
                   description="List the registered policies, one per line, with the paper they implement.")
    schema = sub.add_parser("schema", help="print the JSON Schema of a scenario, config or job file",
                            description="Print the JSON Schema (draft 2020-12) of a scenario file, serve's "
                                        "config or a job file, for editors (docs/usage.md, \"JSON Schemas\").")
    schema.add_argument("document", choices=SCHEMA_DOCUMENTS, help="which file's schema")
    from fairshare.live.cli import add_parsers  # serve and its clients (docs/live.md)

    add_parsers(sub, _positive_int)

    trace = sub.add_parser("trace", help="convert real cluster traces into scenario files",
                           description="Convert real cluster traces into scenario files (docs/traces.md).")
    trace.defer(_add_trace_actions)
    imp = sub.add_parser("import", help="import a peer scheduler's queue configuration as a scenario file",
                         description="Import a YARN, Kueue, Slurm or YuniKorn queue configuration as a scenario "
                                     "file: its queues, weights, guarantees and limits on the cluster you give, and "
                                     "what it has that fairshare cannot express, as warnings. Every kind writes cpu in "
                                     "cores, memory in GiB and gpu in devices, as the trace converters do "
                                     "(docs/whatif.md).")
    imp.defer(_add_import_actions)
    whatif = sub.add_parser("whatif", help="replay your job history under your queue configuration: your scheduler "
                                           "against the proposed policies",
                            description="Replay a job history under an imported queue configuration, with the "
                                        "baseline that behaves like your scheduler (`current`) and the proposed "
                                        "policies, and report who gains and who loses if you switch "
                                        "(docs/whatif.md).")
    whatif.defer(_add_whatif_arguments)
    export = sub.add_parser("export", help="serve's job history (its --db store) as a scenario file",
                            description="Write the jobs `fairshare serve` ran (its SQLite store, opened read-only) "
                                        "as a scenario file: the `fairshare-db` trace kind (docs/traces.md).")
    export.defer(_add_export_arguments)
    completion = sub.add_parser("completion", help="print a shell completion script (bash or zsh)",
                                description="Print a completion script for the shell, generated from this "
                                            "command's options: commands, flags and their values (policy names "
                                            "for --policy). bash: `source <(fairshare completion bash)` (or save it "
                                            "in ~/.local/share/bash-completion/completions/fairshare); zsh: save "
                                            "`fairshare completion zsh` as _fairshare in a directory of $fpath.")
    completion.add_argument("shell", choices=("bash", "zsh"))
    return parser


def _add_trace_actions(trace: argparse.ArgumentParser) -> None:
    from fairshare.traces.cli import add_trace_actions  # `fairshare trace convert` (docs/traces.md)

    add_trace_actions(trace)


def _add_import_actions(parser: argparse.ArgumentParser) -> None:
    from fairshare.importers.cli import add_import_actions  # `fairshare import KIND` (docs/whatif.md)

    add_import_actions(parser)


def _add_whatif_arguments(whatif: argparse.ArgumentParser) -> None:
    from fairshare.whatif.cli import add_whatif_arguments  # `fairshare whatif` (docs/whatif.md)

    add_whatif_arguments(whatif)


def _add_export_arguments(export: argparse.ArgumentParser) -> None:
    from fairshare.traces.cli import add_export_arguments  # `fairshare export --db` (docs/traces.md)

    add_export_arguments(export)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (never raises for user errors)."""
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # usage errors (2), --help and --version (0)
            return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_USAGE)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        return COMMANDS[args.command](args)
    except CLIError as exc:
        _error(str(exc))
        return exc.status
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`fairshare ... | head`): stop quietly. Point stdout at
        # devnull so the interpreter's final flush does not complain again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_INTERNAL
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        if os.environ.get(DEBUG_ENV) == "1":
            traceback.print_exc()
        _error(f"internal error: {type(exc).__name__}: {exc}")
        print(f"please report this (with the command and the scenario file); "
              f"set {DEBUG_ENV}=1 to see the traceback", file=sys.stderr)
        return EXIT_INTERNAL


def _error(message: str) -> None:
    print(f"fairshare: error: {message}", file=sys.stderr)


# --- commands -------------------------------------------------------------------------------

def cmd_allocate(args: argparse.Namespace) -> int:
    from fairshare.api import allocate
    from fairshare.policies import REGISTRY

    options = _policy_options(args)
    policy = _make_policy(args.policy, options)
    scenario = _load(args.scenario)
    if args.usage is not None:
        scenario = _with_usage(scenario, args.usage)
    _check_resource_options(options, scenario)
    with _policy_errors(args):
        result = allocate(scenario, policy, discrete=args.discrete, respect_counts=args.respect_counts)
    bounds = None
    if args.explain:
        from fairshare.report.explain import static_bounds

        bounds = static_bounds(scenario, result, respect_counts=args.respect_counts)
    if args.format == "json":
        doc = result.to_json()
        if bounds is not None:
            doc["explain"] = bounds
        _print_json(doc)
    else:
        from fairshare.report.table import format_allocation

        sys.stdout.write(format_allocation(result, scenario, citation=REGISTRY[args.policy].citation,
                                           source=_display_name(args.scenario)))
        if bounds is not None:
            from fairshare.report.explain import bounds_text

            sys.stdout.write(bounds_text(bounds))
    return EXIT_OK


def _policy_and_scenario(args: argparse.Namespace):
    """The policy (with its command-line options) and the scenario, checked together."""
    options = _policy_options(args)
    policy = _make_policy(args.policy, options)
    scenario = _load(args.scenario)
    _check_resource_options(options, scenario)
    return policy, scenario


def cmd_explain(args: argparse.Namespace) -> int:
    from fairshare.api import allocate
    from fairshare.report import explain as report

    policy, scenario = _policy_and_scenario(args)
    if args.job not in {job.name for job in scenario.jobs}:
        raise CLIError(f"--job: no job named {args.job!r} in {_display_name(args.scenario)}")
    from fairshare.sim import SimOptions

    sim_options = SimOptions(seed=args.seed, placement=args.placement)
    with _policy_errors(args):
        if args.at is None:
            result = allocate(scenario, policy, discrete=args.discrete, respect_counts=args.respect_counts)
            doc = report.explain_static(scenario, result, args.job, respect_counts=args.respect_counts)
            doc["estimated_start"] = report.simulated_start(scenario, policy, args.job, sim_options)
        else:
            doc = report.explain_at(scenario, policy, args.job, args.at, sim_options)
    if args.format == "json":
        _print_json(doc)
    else:
        sys.stdout.write(report.explanation_text(doc))
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    _make_policy(args.policy, {})  # an unknown name is a usage error, before any work
    scenario = _load(args.scenario)
    try:
        # Imported here so `allocate` and `policies` work whatever state audit is in.
        from fairshare.audit import audit as run_audit
    except ImportError as exc:
        raise CLIError(f"audit is not available in this build ({exc})", EXIT_INTERNAL) from None
    kwargs: dict[str, Any] = {"respect_counts": args.respect_counts, "discrete": args.discrete}
    if args.max_jobs_searched is not None:
        if not _accepts(run_audit, "max_jobs_searched"):
            raise CLIError("--max-jobs-searched is not supported by this build's audit")
        kwargs["max_jobs_searched"] = args.max_jobs_searched
    with _policy_errors(args):
        report = run_audit(scenario, args.policy, **kwargs)
    if args.format == "json":
        _print_json(report.to_json())
    else:
        text = report.format_table()
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def cmd_policies(args: argparse.Namespace) -> int:
    from fairshare.policies import REGISTRY

    width = max(len(name) for name in REGISTRY)
    for name, cls in REGISTRY.items():
        print(f"{name.ljust(width)}  {cls.citation}")
    return EXIT_OK


def cmd_completion(args: argparse.Namespace) -> int:
    from fairshare.completion import SHELLS
    from fairshare.policies import REGISTRY

    sys.stdout.write(SHELLS[args.shell](build_parser(), list(REGISTRY)))
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    policy, scenario = _policy_and_scenario(args)
    _check_out(args.out)
    if args.stream:
        if args.reference is not None:
            raise CLIError("--reference does not apply to --stream (a streamed run has no fairness gap)")
        return _simulate_streaming(args, scenario, policy)
    fair = _reference_shares(args, scenario, args.reference)
    sim = _simulator(args, scenario, policy, f"--policy {args.policy}")
    out = _out_dir(args.out)
    result, summary = _run_one(args, sim, label="", reference=args.reference)
    _write_run(out, args, result, summary)
    _print_notes(result)
    if args.format == "json":
        _print_json(summary)
        return EXIT_OK
    from fairshare.report.terminal import simulate_text

    sys.stdout.write(simulate_text(summary, fair))
    print(f"report: {out / 'report.html'}")
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from fairshare.policies import REGISTRY, unknown_policy

    names = [n.strip() for n in args.policies.split(",")]
    if not all(names):
        raise CLIError(f"--policies: empty policy name in {args.policies!r} (write e.g. --policies drf,hdrf)")
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise CLIError(f"--policies: {unknown_policy(unknown[0])}" if len(unknown) == 1 else
                       f"--policies: unknown policy {', '.join(map(repr, unknown))}; known policies: "
                       f"{', '.join(REGISTRY)}")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CLIError(f"--policies: {', '.join(dupes)} listed twice")
    # Each option goes to the listed policies that take it; one that none takes is an error.
    per_policy: dict[str, dict[str, Any]] = {n: {} for n in names}
    for flag, (option, everyone) in _policy_option_flags().items():
        value = getattr(args, _dest(flag), None)
        if value is None:
            continue
        takers = [n for n in names if n in everyone]
        if not takers:
            raise CLIError(f"{flag} applies to none of --policies {args.policies} "
                           f"(it applies to: {', '.join(everyone) or 'no policy'})")
        for n in takers:
            per_policy[n][option.param] = False if option.value == "off" else value
    policies = {n: _make_policy(n, per_policy[n]) for n in names}
    scenario = _load(args.scenario)
    for n in names:
        _check_resource_options(per_policy[n], scenario)
    _check_out(args.out)
    # One reference for every row, so the fairness gaps can be compared across them.
    from fairshare.sim.metrics import reference_policy

    reference = args.reference if args.reference is not None else reference_policy(scenario)[0]
    fair = _reference_shares(args, scenario, reference)
    # Build every simulator first: a policy that refuses online mode stops us before any
    # run and before anything is written.
    sims = {n: _simulator(args, scenario, policies[n], f"--policies {n}") for n in names}
    out = _out_dir(args.out)
    from fairshare.report.html import compare_report
    from fairshare.sim.compare import comparison
    from fairshare.sim.output import summary_json

    from fairshare.report.terminal import compare_text, run_line

    runs = []
    width = max(len(n) for n in names)
    for n in names:
        result, summary = _run_one(args, sims[n], label=f"{n.ljust(width)} ", reference=reference)
        _write_run(out / n, args, result, summary, label=f"{n.ljust(width)} ")
        runs.append((n, result, summary))
        _print_notes(result, label=f"{n.ljust(width)}  ")
        if args.format == "table":  # (one line as each run ends)
            print(run_line(summary, label=f"{n.ljust(width)}  "), flush=True)
    shown = _display_name(args.scenario)
    doc = comparison(runs, scenario_name=shown)
    (out / "compare.json").write_text(summary_json(doc), encoding="utf-8")
    html_text = _steps(args).run("the comparison's report.html", compare_report, runs, scenario_name=shown,
                                 fair_shares=fair)
    (out / "report.html").write_text(html_text, encoding="utf-8")
    if args.format == "json":
        _print_json(doc)
        return EXIT_OK
    sys.stdout.write(compare_text([(n, s) for n, _, s in runs], fair))
    print(f"report: {out / 'report.html'}")
    return EXIT_OK


#: ``fairshare schema DOCUMENT``: the documents with a JSON Schema
SCHEMA_DOCUMENTS = ("scenario", "config", "jobs")


def cmd_schema(args: argparse.Namespace) -> int:
    """The JSON Schema of a document, rendered from its description (``model.schema``),
    which the loader reads its keys and enums from too."""
    from fairshare.model.schema import SCENARIO, json_schema

    if args.document == "scenario":
        doc = SCENARIO
    else:
        from fairshare.live.config import CONFIG, JOBS

        doc = CONFIG if args.document == "config" else JOBS
    _print_json(json_schema(doc, title=f"fairshare {args.document} file"))
    return EXIT_OK


COMMANDS = {"allocate": cmd_allocate, "audit": cmd_audit, "simulate": cmd_simulate, "compare": cmd_compare,
            "policies": cmd_policies, "schema": cmd_schema, "trace": lambda args: args.func(args),
            "import": lambda args: args.func(args),
            "whatif": lambda args: args.func(args),
            "export": lambda args: args.func(args),
            "completion": cmd_completion, "explain": cmd_explain}


def _live_command(name: str):
    """``serve`` and its clients (``submit``, ``jobs``, ``job``, ``cancel``, ``queues``,
    ``status``, ``logs``, ``why``) live in ``fairshare.live.cli``."""

    def run(args: argparse.Namespace) -> int:
        from fairshare.live.cli import COMMANDS as LIVE_COMMANDS, ClientError

        try:
            return LIVE_COMMANDS[name](args)
        except ClientError as exc:
            raise CLIError(str(exc), exc.status) from None

    return run


COMMANDS.update({name: _live_command(name)
                 for name in ("serve", "submit", "jobs", "job", "cancel", "queues", "status", "logs", "why")})


# --- simulation helpers ----------------------------------------------------------------------

def _check_resource_options(options: dict[str, Any], scenario) -> None:
    """Every given option declared to name a resource (value kind ``resource``) names one
    of the scenario's, before any work."""
    for flag, (option, _takers) in _policy_option_flags().items():
        value = options.get(option.param)
        if option.value == "resource" and value is not None and value not in scenario.resources:
            raise CLIError(f"{flag}: {value!r} is not a resource of this scenario "
                           f"(resources: {', '.join(scenario.resources)})")


def _check_out(text: str) -> None:
    from pathlib import Path

    if Path(text).exists() and not Path(text).is_dir():
        raise CLIError(f"--out: {text} exists and is not a directory")


def _out_dir(text: str):
    from pathlib import Path

    _check_out(text)
    out = Path(text)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"--out: cannot create {text}: {exc.strerror or exc}") from None
    return out


def _simulator(args: argparse.Namespace, scenario, policy, flag: str, *, arrivals=None, out=None):
    """A ready-to-run Simulator; its construction is where a policy refuses online mode.
    With ``arrivals``: a streaming one, writing into ``out`` (``simulate --stream``)."""
    from fairshare.model import ScenarioError
    from fairshare.model.scenario import PreemptionConfig
    from fairshare.policies.base import PolicyModeError
    from fairshare.sim import SimOptions, SimulationError, Simulator

    options = SimOptions(seed=args.seed, until=args.until, placement=args.placement, headroom=args.headroom,
                         preemption=(scenario.preemption or PreemptionConfig()) if args.preempt else None,
                         track_fair_share=args.track_fair_share, reasons=args.reasons)
    if args.reasons and arrivals is not None:
        raise CLIError("--reasons: not with --stream (the reasons are kept for the whole run)")
    try:
        if arrivals is None:
            return Simulator(scenario, policy, options)
        from fairshare.sim.stream import StreamingOutput

        # (the sink touches the disk only when the run starts: a policy that refuses online
        # mode stops us before anything is written)
        sink = StreamingOutput(scenario, out, scenario_name=_display_name(args.scenario))
        return Simulator(scenario, policy, options, arrivals=arrivals, sink=sink)
    except PolicyModeError as exc:
        raise CLIError(f"{flag}: {exc}") from None
    except SimulationError as exc:
        raise CLIError(f"--until: {exc}") from None
    except ScenarioError as exc:
        raise _settings_error(exc, args, flag) from None


def _simulate_streaming(args: argparse.Namespace, scenario, policy) -> int:
    """``simulate --stream``: the scenario's jobs streamed in submit order (ties in file
    order) into a ``Simulator`` with a ``StreamingOutput`` sink."""
    from dataclasses import replace

    from fairshare.sim.progress import ProgressBar
    from fairshare.sim.simulator import SimulationError, check_bounded

    try:
        check_bounded(scenario.jobs, args.until)
    except SimulationError as exc:
        raise CLIError(f"--until: {exc}") from None
    arrivals = sorted(scenario.jobs, key=lambda j: j.submit_s)
    empty = replace(scenario, jobs=())
    sim = _simulator(args, empty, policy, f"--policy {args.policy}", arrivals=arrivals, out=_out_dir(args.out))
    if _showing_progress(args):
        totals = [j.total_count for j in arrivals]
        sim.progress = ProgressBar(sys.stderr, until=args.until, total_tasks=None if None in totals else sum(totals))
    result = sim.run()
    if sim.progress is not None:
        sim.progress.close(result.end_time, result.tasks_completed)
    summary = sim.sink.finish(result)
    stale = sim.sink.out_dir / "report.html"
    if stale.exists():  # (an earlier run's: it would describe another run than these files)
        stale.unlink()
    _print_notes(result)
    if args.format == "json":
        _print_json(summary)
        return EXIT_OK
    from fairshare.report.terminal import run_line

    print(run_line(summary))
    print(f"summary: {sim.sink.paths['summary']}; timeline: {sim.sink.paths['timeline']} (streamed: no report.html)")
    return EXIT_OK


def _showing_progress(args: argparse.Namespace) -> bool:
    return bool(args.progress or sys.stderr.isatty())


def _steps(args: argparse.Namespace, label: str = ""):
    """The post-run steps' timer: a line per step on stderr when progress is shown."""
    from fairshare.sim.progress import Steps

    return Steps(sys.stderr if _showing_progress(args) else None, label=label)


def _run_one(args: argparse.Namespace, sim, *, label: str, reference: str | None):
    from fairshare.sim.metrics import summarize
    from fairshare.sim.progress import ProgressBar

    bar = None
    if _showing_progress(args):
        totals = [j.total_count for j in sim.scenario.jobs]
        total = None if any(t is None for t in totals) else sum(totals)
        bar = ProgressBar(sys.stderr, until=args.until, total_tasks=total, label=label)
        sim.progress = bar
    result = sim.run()
    if bar is not None:
        bar.close(result.end_time, result.tasks_completed)
    summary = _steps(args, label).run("summary" + ("" if args.no_fairness_gap else " and fairness gap"), summarize,
                                      result, fairness_gap=not args.no_fairness_gap,
                                      scenario_name=_display_name(args.scenario), reference=reference)
    return result, summary


def _write_run(out, args: argparse.Namespace, result, summary, label: str = "") -> None:
    from fairshare.policies import REGISTRY
    from fairshare.report.html import run_report
    from fairshare.sim.output import write_outputs

    steps = _steps(args, label)
    steps.run("summary.json and timeline.csv", write_outputs, out, result, summary)
    html_text = steps.run("report.html", run_report, result, summary, scenario_name=_display_name(args.scenario),
                          citation=REGISTRY[result.policy].citation)
    (out / "report.html").write_text(html_text, encoding="utf-8")


def _print_notes(result, label: str = "") -> None:
    for note in result.notes:
        print(f"{label}note: {note}", file=sys.stderr)


def _reference_shares(args: argparse.Namespace, scenario, reference: str | None):
    """Check the fairness reference before any run, and return the terminal's fair-share
    column: (reference policy, queue -> dominant share) of its static allocation with
    every job demanding (``reference`` None: the scenario's default reference). None with
    ``--no-fairness-gap``, for a scenario without queues, or when the default reference
    has no allocation for it. A ``--reference`` without a static allocation (timefair,
    slots) is refused: the gap could not be measured against it."""
    from fairshare.policies import REGISTRY, unknown_policy
    from fairshare.policies.base import PolicyModeError
    from fairshare.sim.metrics import queue_fair_shares, reference_policy

    chosen = args.reference
    if chosen is not None and chosen not in REGISTRY:
        raise CLIError(f"--reference: {unknown_policy(chosen)}")
    if args.no_fairness_gap or not (scenario.queues.paths or chosen is not None):
        return None
    try:
        fair = queue_fair_shares(scenario, reference)
    except PolicyModeError as exc:
        if chosen is None:
            return None
        raise CLIError(f"--reference {chosen}: {exc}; the fairness gap is measured against a static allocation "
                       f"(e.g. --reference {reference_policy(scenario)[0]})") from None
    return fair if scenario.queues.paths else None


# --- helpers --------------------------------------------------------------------------------

def _policy_options(args: argparse.Namespace) -> dict[str, Any]:
    """The policy options given on the command line, checked against the options the policy declares."""
    from fairshare.policies import REGISTRY

    known = args.policy in REGISTRY
    options: dict[str, Any] = {}
    for flag, (option, takers) in _policy_option_flags().items():
        value = getattr(args, _dest(flag), None)
        if value is None:
            continue
        if option.value == "off":
            value = False  # `--no-rescale` means rescale=False
        if known and args.policy not in takers:
            raise CLIError(f"{flag} does not apply to --policy {args.policy} "
                           f"(it applies to: {', '.join(takers) or 'no policy'})")
        options[option.param] = value
    return options


def _accepts(func: Any, param: str) -> bool:
    """True when ``func`` (a callable, or a class via its constructor) takes keyword ``param``."""
    import inspect

    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return False
    return param in sig.parameters or any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())


def _make_policy(name: str, options: dict[str, Any]):
    from fairshare.policies import UnknownPolicyError, make_policy

    try:
        return make_policy(name, **options)
    except UnknownPolicyError as exc:
        raise CLIError(f"--policy: {exc}") from None


@contextmanager
def _policy_errors(args: argparse.Namespace) -> Iterator[None]:
    """Turn a policy's refusals into user errors that name the flag responsible."""
    from fairshare.policies import UnknownPolicyError
    from fairshare.policies.base import PolicyModeError

    from fairshare.model import ScenarioError

    flag = f"--policy {args.policy}" + (" --discrete" if args.discrete else "")
    try:
        yield
    except PolicyModeError as exc:
        raise CLIError(f"{flag}: {exc}") from None
    except ScenarioError as exc:
        raise _settings_error(exc, args, flag) from None
    except UnknownPolicyError as exc:
        raise CLIError(f"--policy: {exc}") from None
    except NotImplementedError:
        raise CLIError(f"--policy {args.policy}: not implemented in this build yet", EXIT_INTERNAL) from None


def _settings_error(exc, args: argparse.Namespace, flag: str) -> CLIError:
    """The scenario's settings for the policy were refused (``peers:``, read by
    ``Policy.configured``): each problem on its own line, as the loader prints them."""
    from fairshare.model import ScenarioError

    named = ScenarioError(exc.errors, _display_name(args.scenario))
    print(str(named), file=sys.stderr)
    return CLIError(f"{flag}: {named.summary()}; nothing was computed")


def load_scenario_argument(argument: str):
    """Load a scenario named as on the command line: a path, ``default`` for the bundled one,
    or ``KIND:PATH`` for a trace (``fairshare trace convert`` with default options).

    Raises :class:`~fairshare.model.ScenarioError` like :func:`fairshare.model.load_scenario`.
    """
    from fairshare.model import load_scenario
    from fairshare.traces.cli import is_kind_path

    if is_kind_path(argument):  # KIND:PATH, a trace converted with default options (docs/traces.md)
        from fairshare.model import FieldError, ScenarioError
        from fairshare.traces import TraceError
        from fairshare.traces.cli import load_kind_path

        try:
            return load_kind_path(argument)
        except TraceError as exc:
            raise ScenarioError(FieldError("", str(exc)), argument) from None
    if argument != DEFAULT_SCENARIO:
        return load_scenario(argument)
    from importlib import resources as importlib_resources

    ref = importlib_resources.files("fairshare").joinpath("data/default.yaml")
    with importlib_resources.as_file(ref) as path:
        return load_scenario(path)


def _display_name(argument: str) -> str:
    return f"{DEFAULT_SCENARIO} (bundled: DFF Sec. 4.1 CPU+MIC cluster)" if argument == DEFAULT_SCENARIO else argument


def _load(argument: str):
    """Load the scenario named on the command line; ScenarioError becomes exit status 2."""
    from fairshare.model import ScenarioError

    try:
        return load_scenario_argument(argument)
    except ScenarioError as exc:
        # One problem per line, each "file: field.path: reason"; no prefix, so the lines
        # stay easy to grep and to jump to.
        print(str(exc), file=sys.stderr)
        raise CLIError(f"{exc.summary()}; nothing was computed") from None


def _with_usage(scenario, path: str):
    """``allocate --usage FILE``: the scenario with FILE's past usage; its problems exit 2
    as a scenario's do."""
    from fairshare.model import ScenarioError
    from fairshare.model.loader import with_usage_file

    try:
        return with_usage_file(scenario, path)
    except ScenarioError as exc:
        print(str(exc), file=sys.stderr)
        raise CLIError(f"{exc.summary()}; nothing was computed") from None


def _print_json(obj: Any) -> None:
    # Insertion order is the contract's key order (policy, mode, resources, ...), and the
    # scenario's order for resources, jobs and queues: stable without sort_keys.
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
