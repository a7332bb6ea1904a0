"""``python -m fairshare.conformance [TARGET ...]``: run the conformance checks.

With no target: every registered policy and its declared variants. A target is a
registered name (``drf``), ``pkg.mod:ClassName`` or ``path/to/file.py:ClassName`` (a
``Policy`` subclass defined outside this package; its declared variants run too). One
progress line per check, a summary table at the end. Exit status 0 when every check
passed (or failed as its exemption says), 1 when one failed, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

from fairshare.conformance.suite import CHECKS, Report, check_policy, summary_table, variant_label
from fairshare.policies import REGISTRY, Policy


class TargetError(ValueError):
    """A target that names no policy class we can check."""


def _import_module(spec: str):
    if spec.endswith(".py") or "/" in spec or "\\" in spec:
        path = Path(spec)
        if not path.is_file():
            raise TargetError(f"no such file {str(path)!r}")
        sys.path.insert(0, str(path.resolve().parent))  # (its own imports of its neighbours)
        module_spec = importlib.util.spec_from_file_location(f"_conformance_target_{path.stem}", path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        module_spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if exc.name and (spec == exc.name or spec.startswith(exc.name + ".")):
            raise TargetError(f"module {spec!r} not found") from None
        raise


def resolve(target: str) -> tuple[str, type[Policy]]:
    """The label and policy class a target names; TargetError saying why not."""
    if ":" not in target:
        if target not in REGISTRY:
            raise TargetError(f"not a registered policy (known: {', '.join(sorted(REGISTRY))}); "
                              f"a policy elsewhere is given as pkg.mod:ClassName or path/to/file.py:ClassName")
        return target, REGISTRY[target]
    spec, _, class_name = target.rpartition(":")
    if not spec or not class_name:
        raise TargetError("expected pkg.mod:ClassName or path/to/file.py:ClassName")
    try:
        module = _import_module(spec)
    except TargetError:
        raise
    except Exception as exc:  # the module itself fails to import: its error, named
        raise TargetError(f"importing {spec!r} failed: {exc!r}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise TargetError(f"module {spec!r} has no {class_name!r}")
    if not (inspect.isclass(cls) and issubclass(cls, Policy)):
        raise TargetError(f"{class_name!r} is not a Policy subclass (fairshare.policies.Policy): {cls!r}")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise TargetError(f"{class_name!r} is abstract: it does not implement {missing}")
    return target, cls


def runs_of(label: str, cls: type[Policy]) -> list[tuple[str, type[Policy], dict]]:
    """The default options and every declared variant, each constructed once here so a
    variant that does not construct is a bad argument, not a failed check."""
    out = []
    for options in ({},) + tuple(cls.conformance_variants):
        try:
            cls(**options)
        except Exception as exc:
            raise TargetError(f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in options.items())}) "
                              f"cannot be constructed: {exc!r}") from None
        out.append((variant_label(label, options), cls, options))
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fairshare.conformance", description=__doc__.split("\n\n")[0],
                                epilog="checks: " + "; ".join(CHECKS))
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="a registered policy name, pkg.mod:ClassName or path/to/file.py:ClassName "
                        "(default: every registered policy)")
    p.add_argument("--check", action="append", dest="checks", metavar="NAME", choices=list(CHECKS),
                   help="run only this check (repeatable; default: all)")
    p.add_argument("--no-variants", action="store_true", help="run the default options only")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    runs = []
    try:
        for target in args.targets or sorted(REGISTRY):
            try:
                found = runs_of(*resolve(target))
            except TargetError as exc:
                raise TargetError(f"{target}: {exc}") from None
            runs.extend(found[:1] if args.no_variants else found)
    except TargetError as exc:
        print(f"python -m fairshare.conformance: error: {exc}", file=sys.stderr)
        return 2
    static = online = None
    if args.checks:
        static = [name for name in args.checks if CHECKS[name].kind == "static"]
        online = [name for name in args.checks if CHECKS[name].kind == "online"]
    reports: list[Report] = []
    for label, cls, options in runs:
        # variants are the online algorithm's switches: the static checks run on the defaults
        report = check_policy(lambda cls=cls, options=options: cls(**options), label=label,
                              static=False if options else static, online=online,
                              progress=lambda result: print(result.line(), flush=True))
        reports.append(report)
    print()
    print(summary_table(reports))
    failed = sum(not r.ok for report in reports for r in report.results)
    print(f"\n{len(reports)} policies, {sum(len(r.results) for r in reports)} checks: "
          + (f"{failed} failed" if failed else "all conform"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
