"""``fairshare whatif``: replay your job history under your queue configuration, with your
scheduler's own semantics (``current``) and the proposed policies (docs/whatif.md).

Layering: the main CLI adds these arguments only when the command is used or its help
shown (``add_whatif_arguments``); this module imports ``importers``, ``traces``, ``sim``
and ``report``, never the other way.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from fairshare.whatif.run import UNMAPPED, WhatIfError

EXIT_OK, EXIT_USAGE = 0, 2
HISTORY_SCENARIO = "scenario"


def add_whatif_arguments(p: argparse.ArgumentParser) -> None:
    config = p.add_argument_group("the queue configuration (one of)")
    config.add_argument("--config", nargs="+", metavar="FILE",
                        help="your scheduler's queue configuration files (with --kind)")
    config.add_argument("--kind", metavar="KIND",
                        help="the configuration's format: a `fairshare import` kind (yarn-fair, yarn-capacity, "
                             "kueue, slurm, yunikorn)")
    config.add_argument("--scenario", metavar="FILE",
                        help="a fairshare scenario whose cluster and queues are the configuration (its jobs are "
                             "the history when --history is not given)")
    cluster = p.add_argument_group("the cluster (default: the history's, when it has one)")
    cluster.add_argument("--nodes", metavar="FILE",
                         help="a node list in the scenario format (YAML/JSON list, or a scenario whose cluster is "
                              "taken)")
    cluster.add_argument("--cluster", metavar="RES=AMT,...", help="one pooled capacity, e.g. cpu=512,memory=2048")
    hist = p.add_argument_group("the job history")
    hist.add_argument("--history", nargs="+", metavar="PATH", help="the job history files")
    hist.add_argument("--history-kind", metavar="KIND", default=None,
                      help="its format: a `fairshare trace convert` kind (sacct, kueue-workloads, csv, "
                           "fairshare-db, google2011, ...) or `scenario` (the jobs of a scenario file; default)")
    hist.add_argument("--queue-map", metavar="FILE",
                      help="YAML/JSON mapping of the history's queue names to the configuration's queues")
    hist.add_argument("--unmapped", choices=UNMAPPED, default="error",
                      help="jobs whose queue maps to none: an error (default), under the root, or left out")
    p.add_argument("--policies", default=None,
                   help="comma-separated: `current` (the baseline behaving like your scheduler) and the "
                        "policies to compare (default: current,hdrf,drf; hdrf,drf when no current is known)")
    p.add_argument("--current", metavar="POLICY",
                   help="the baseline policy standing for your scheduler (default: the importer's)")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2",
                   help="also run each policy with a setting changed, once per value: fairness.half_life, "
                        "preemption.after, queue[PATH].weight, peers.yarn-fair.default_policy ... (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="the simulation seed (same for every variant)")
    p.add_argument("--until", type=float, default=None, help="stop every run at this time (seconds)")
    p.add_argument("--no-audit", action="store_true",
                   help="skip the audit of each policy's static allocation at the busiest instant")
    p.add_argument("--format", choices=("table", "json"), default="table", help="what to print (default table)")
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="directory for report.html, whatif.json, plots/*.svg and each variant's summary.json/timeline.csv")
    p.set_defaults(func=cmd_whatif)


def _read_mapping(path: str, flag: str) -> Any:
    from fairshare.model.errors import ScenarioError
    from fairshare.model.loader import read_document

    try:
        return read_document(path, what=flag)
    except ScenarioError as exc:
        raise WhatIfError(f"{flag}: {exc}") from None


def _cluster(args: argparse.Namespace, history_doc: dict[str, Any] | None):
    from fairshare.importers import ImportError_
    from fairshare.importers.cli import cluster_from_document, cluster_from_nodes, cluster_from_text

    if args.nodes and args.cluster:
        raise WhatIfError("--nodes and --cluster: give one")
    has_own = isinstance((history_doc or {}).get("cluster"), dict)
    try:
        if args.nodes:
            return cluster_from_nodes(args.nodes)
        if args.cluster:
            return cluster_from_text(args.cluster)
        if has_own:
            return cluster_from_document(history_doc, "--history")
    except ImportError_ as exc:
        raise WhatIfError(str(exc)) from None
    raise WhatIfError("the cluster: give --nodes FILE or --cluster RES=AMT,... (the history has no cluster)")


def _history(args: argparse.Namespace) -> tuple[dict[str, Any] | None, list[str]]:
    """The history as a scenario document (its jobs, and its cluster when it has one)."""
    if not args.history:
        return None, []
    kind = args.history_kind or HISTORY_SCENARIO
    if kind == HISTORY_SCENARIO:
        if len(args.history) != 1:
            raise WhatIfError("--history: one scenario file (or give --history-kind for a trace's files)")
        doc = _read_mapping(args.history[0], "--history")
        if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
            raise WhatIfError(f"--history: {args.history[0]}: a scenario with a jobs list (or give --history-kind)")
        return doc, []
    from fairshare.traces import KINDS, TraceError, convert

    if kind not in KINDS:
        raise WhatIfError(f"--history-kind: unknown kind {kind!r}; known: {HISTORY_SCENARIO}, {', '.join(KINDS)}")
    try:
        conversion = convert(kind, args.history, progress_stream=sys.stderr if sys.stderr.isatty() else None)
    except TraceError as exc:
        raise WhatIfError(f"--history: {exc}") from None
    return conversion.scenario, [f"history: {n}" for n in conversion.notes]


def _config(args: argparse.Namespace, history_doc: dict[str, Any] | None):
    """(config document without jobs, current policy, importer's path table, notes)."""
    if args.scenario and args.config:
        raise WhatIfError("--scenario and --config: give one")
    if args.scenario:
        doc = _read_mapping(args.scenario, "--scenario")
        if not isinstance(doc, dict):
            raise WhatIfError(f"--scenario: {args.scenario}: not a scenario mapping")
        return dict(doc), args.current, {}, []
    if not args.config or not args.kind:
        raise WhatIfError("the configuration: give --config FILE... with --kind KIND, or --scenario FILE")
    from fairshare.importers import KINDS, ImportError_, build_scenario

    if args.kind not in KINDS:
        raise WhatIfError(f"--kind: unknown kind {args.kind!r}; known: {', '.join(KINDS) or 'none'}")
    module = KINDS[args.kind]
    cluster = _cluster(args, history_doc)
    try:
        imported = module.read(list(args.config), cluster)
    except ImportError_ as exc:
        raise WhatIfError(f"--config: {exc}") from None
    notes = [f"unsupported setting {u}" for u in imported.unsupported]
    return build_scenario(imported, cluster), args.current or imported.policy, dict(imported.queue_paths), notes


def cmd_whatif(args: argparse.Namespace) -> int:
    try:
        return _whatif(args)
    except WhatIfError as exc:
        print(f"fairshare: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _whatif(args: argparse.Namespace) -> int:
    from fairshare.policies import REGISTRY
    from fairshare.sim.output import summary_json, write_outputs
    from fairshare.whatif.analysis import queue_paths
    from fairshare.whatif.report import figures, html_report, terminal_text, whatif_document
    from fairshare.whatif.run import attach_history, audit_at_snapshot, load_variant, run_variant, snapshot_scenario
    from fairshare.whatif.variants import VariantError, parse_policies, parse_vary, variants

    try:
        vary = [parse_vary(v) for v in args.vary]
    except VariantError as exc:
        raise WhatIfError(str(exc)) from None
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise WhatIfError(f"-o: {out} exists and is not a directory")
    history_doc, notes = _history(args)
    config_doc, current, importer_paths, config_notes = _config(args, history_doc)
    notes = config_notes + notes
    if args.nodes or args.cluster:
        if args.scenario:
            config_doc["cluster"] = _cluster(args, history_doc).section()
    try:
        chosen_policies = args.policies or ("current,hdrf,drf" if current else "hdrf,drf")
        policies = parse_policies(chosen_policies, current, REGISTRY)
    except VariantError as exc:
        raise WhatIfError(str(exc)) from None
    if history_doc is not None:
        queue_map = _read_mapping(args.queue_map, "--queue-map") if args.queue_map else None
        if queue_map is not None and not isinstance(queue_map, dict):
            raise WhatIfError(f"--queue-map: {args.queue_map}: must be a mapping of history queue -> queue")
        doc, map_notes = attach_history(config_doc, history_doc["jobs"], queue_map=queue_map,
                                        importer_paths=importer_paths, unmapped=args.unmapped)
        notes += map_notes
        if "resources" not in config_doc and "resources" in history_doc:
            doc["resources"] = history_doc["resources"]
    else:
        if not args.scenario:
            raise WhatIfError("--history: the job history to replay (or --scenario with jobs)")
        doc = config_doc
    if not doc.get("jobs"):
        raise WhatIfError("the history has no jobs to replay")
    chosen = variants(policies, current, vary)
    source = {"config": " ".join(args.config or [args.scenario or ""]), "kind": args.kind or "scenario",
              "history": " ".join(args.history or []), "history_kind": args.history_kind or HISTORY_SCENARIO,
              "current": current}
    scenarios = [load_variant(doc, v, source=str(args.scenario or (args.config or ["whatif"])[0])) for v in chosen]
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    width = max(len(v.label) for v in chosen)
    for variant, scenario in zip(chosen, scenarios):
        started = time.perf_counter()
        run = run_variant(scenario, variant, seed=args.seed, until=args.until)
        write_outputs(out / variant.slug, run.result, run.summary)
        runs.append(run)
        if args.format == "table":
            print(f"{variant.label.ljust(width)}  simulated {len(scenario.jobs):,} jobs in "
                  f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    snapshot_time = None
    if not args.no_audit:
        snap = snapshot_scenario(scenarios[0], runs[0].result, max_jobs=24)
        if snap is not None:
            snapshot, snapshot_time = snap
            audited: dict[str, Any] = {}
            for run in runs:
                if run.variant.setting is None:
                    policy = run.variant.policy
                    audited.setdefault(policy, audit_at_snapshot(snapshot, policy))
                    run.audit = audited[policy]
    queues = queue_paths(scenarios[0])
    doc_out = whatif_document(runs, queues=queues, notes=notes, seed=args.seed, until=args.until, source=source,
                              snapshot_time=snapshot_time)
    (out / "whatif.json").write_text(summary_json(doc_out), encoding="utf-8")
    svgs = figures(runs, queues)
    plots = out / "plots"
    plots.mkdir(exist_ok=True)
    for stem, svg in svgs.items():
        (plots / f"{stem}.svg").write_text(svg, encoding="utf-8")
    html = html_report(runs, doc_out, queues=queues, title="fairshare what-if", svgs=svgs)
    (out / "report.html").write_text(html, encoding="utf-8")
    if args.format == "json":
        sys.stdout.write(summary_json(doc_out))
    else:
        sys.stdout.write(terminal_text(doc_out))
        print(f"report: {out / 'report.html'}")
    return EXIT_OK
