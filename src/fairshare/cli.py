"""The ``fairshare`` command (contract: "Package and command", ``allocate``, ``audit``).

Exit status: 0 success; 2 a user error (bad scenario file, unknown policy, an option the
chosen policy does not take, a policy with no meaning in the requested mode, argparse
usage errors); 1 an internal error (a short message asking for a report; the traceback
only with ``FAIRSHARE_DEBUG=1``). User errors never print a traceback.

The scenario argument ``default`` names the bundled example (``fairshare/data/default.yaml``,
DFF Sec. 4.1); write ``./default`` for a file of that name in the current directory.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources as importlib_resources
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


# Policy options: flag -> (constructor argument, value when the flag is given, argparse dest).
# A flag is accepted only for policies whose constructor takes that argument, so the
# error for `--no-rescale --policy drf` comes from the policy's own signature (its options
# are its constructor arguments) and new policy options need one line here.
POLICY_OPTIONS: dict[str, tuple[str, str]] = {
    "--no-rescale": ("rescale", "no_rescale"),
    "--no-ignore-blocked": ("ignore_blocked", "no_ignore_blocked"),
    "--slots": ("slots", "slots"),
    "--resource": ("resource", "resource"),
}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from fairshare import __version__

    parser = argparse.ArgumentParser(
        prog="fairshare",
        description="Multi-resource, hierarchical fair-share scheduling (DRF, H-DRF, DFF, Tan et al.).",
        epilog=f"SCENARIO is a YAML or JSON scenario file, or '{DEFAULT_SCENARIO}' for the bundled "
               "DFF Sec. 4.1 example. See docs/usage.md.",
    )
    parser.add_argument("--version", action="version", version=f"fairshare {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", metavar="SCENARIO",
                       help=f"scenario file (YAML or JSON), or '{DEFAULT_SCENARIO}' for the bundled example")
        p.add_argument("--policy", required=True, metavar="P", help="policy name (see `fairshare policies`)")
        p.add_argument("--discrete", action="store_true",
                       help="place whole tasks on the nodes (default: divisible, fluid tasks on the pooled capacity)")
        p.add_argument("--respect-counts", action="store_true",
                       help="cap each job at its task counts (default: every job always has a next task)")
        p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")

    alloc = sub.add_parser("allocate", help="compute a policy's static allocation",
                           description="The static allocation of a policy on a scenario.")
    common(alloc)
    opts = alloc.add_argument_group("policy options (only for the policies that take them)")
    # default=None everywhere: an option is passed to the policy only when given.
    opts.add_argument("--no-rescale", action="store_true", default=None,
                      help="hdrf: disable rescaling of demand vectors (H-DRF Sec. 3.4 ablation)")
    opts.add_argument("--no-ignore-blocked", action="store_true", default=None,
                      help="hdrf: do not ignore blocked nodes (H-DRF Sec. 3.4 ablation)")
    opts.add_argument("--slots", type=_positive_int, default=None, metavar="N", help="slots: slots per node")
    opts.add_argument("--resource", default=None, metavar="NAME",
                      help="cpu: the one resource to be fair on (default: the first listed)")

    aud = sub.add_parser("audit", help="check the papers' fairness properties for a policy",
                         description="Check the papers' fairness properties for a policy's static allocation.")
    common(aud)
    aud.add_argument("--max-jobs-searched", type=_positive_int, default=None, metavar="N",
                     help="bound on the jobs tried when searching for a witness (strategy-proofness, ...)")

    sub.add_parser("policies", help="list the registered policies with their citations",
                   description="List the registered policies, one per line, with the paper they implement.")
    return parser


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
    if "resource" in options and options["resource"] not in scenario.resources:
        raise CLIError(f"--resource: {options['resource']!r} is not a resource of this scenario "
                       f"(resources: {', '.join(scenario.resources)})")
    with _policy_errors(args):
        result = allocate(scenario, policy, discrete=args.discrete, respect_counts=args.respect_counts)
    if args.format == "json":
        _print_json(result.to_json())
    else:
        from fairshare.report.table import format_allocation

        sys.stdout.write(format_allocation(result, scenario, citation=REGISTRY[args.policy].citation,
                                           source=_display_name(args.scenario)))
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


COMMANDS = {"allocate": cmd_allocate, "audit": cmd_audit, "policies": cmd_policies}


# --- helpers --------------------------------------------------------------------------------

def _policy_options(args: argparse.Namespace) -> dict[str, Any]:
    """The policy options given on the command line, checked against the policy's signature."""
    from fairshare.policies import REGISTRY

    cls = REGISTRY.get(args.policy)
    options: dict[str, Any] = {}
    for flag, (param, dest) in POLICY_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if flag.startswith("--no-"):
            value = False  # `--no-rescale` means rescale=False
        if cls is not None and not _accepts(cls, param):
            takers = [n for n, c in REGISTRY.items() if _accepts(c, param)]
            raise CLIError(f"{flag} does not apply to --policy {args.policy} "
                           f"(it applies to: {', '.join(takers) or 'no policy'})")
        options[param] = value
    return options


def _accepts(func: Any, param: str) -> bool:
    """True when ``func`` (a callable, or a class via its constructor) takes keyword ``param``."""
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

    flag = f"--policy {args.policy}" + (" --discrete" if args.discrete else "")
    try:
        yield
    except PolicyModeError as exc:
        raise CLIError(f"{flag}: {exc}") from None
    except UnknownPolicyError as exc:
        raise CLIError(f"--policy: {exc}") from None
    except NotImplementedError:
        raise CLIError(f"--policy {args.policy}: not implemented in this build yet", EXIT_INTERNAL) from None


def load_scenario_argument(argument: str):
    """Load a scenario named as on the command line: a path, or ``default`` for the bundled one.

    Raises :class:`~fairshare.model.ScenarioError` like :func:`fairshare.model.load_scenario`.
    """
    from fairshare.model import load_scenario

    if argument != DEFAULT_SCENARIO:
        return load_scenario(argument)
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
        raise CLIError(f"{len(exc.errors)} problem{'s' if len(exc.errors) != 1 else ''} "
                       f"in {exc.source}; nothing was computed") from None


def _print_json(obj: Any) -> None:
    # Insertion order is the contract's key order (policy, mode, resources, ...), and the
    # scenario's order for resources, jobs and queues: stable without sort_keys.
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
