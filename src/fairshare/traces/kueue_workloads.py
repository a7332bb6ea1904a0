"""Kueue job history: ``kubectl get workloads -A -o json`` -> scenario.

Read with the history kinds' shared rules (``traces/history.py``,
docs/traces.md#kueue-workloads). The input is a Kubernetes ``List`` of
``kueue.x-k8s.io`` Workload objects (a JSON array of them, or one per line, is read
too). It is streamed: the ``items`` are cut out of the text one at a time and decoded
alone, so memory holds one Workload, whatever the size of the list.

- **Job**: one per Workload (``namespace/name``); submit ``metadata.creationTimestamp``.
- **Tasks**: one class per ``spec.podSets[]``, ``count`` pods (the admitted count,
  ``status.admission.podSetAssignments[].count``, when it differs: partial admission);
  a pod's demand is the sum of its containers' ``resources.requests`` (``limits`` where a
  request is absent, as Kubernetes defaults it): ``cpu``, ``memory`` in GiB, and every
  ``*/gpu`` resource as ``gpu``.
- **Times**: start = the ``Admitted`` condition's ``lastTransitionTime`` (status True),
  end = the ``Finished`` condition's; a Workload never admitted is counted, not
  converted; admitted and not finished is censored. An evicted and re-admitted Workload
  keeps its last admission (the run that finished).
- **Queues**: ``--queue clusterqueue`` (default: ``status.admission.clusterQueue``) or
  ``localqueue`` (``namespace/spec.queueName``, a dotted ``namespace.queue`` in the
  scenario); then ``--queue-map`` (its keys are these names).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairshare.traces.base import CommonOptions, Conversion
from fairshare.traces.common import BadData, LineReader, Progress, TraceError, clean_name
from fairshare.traces.history import (HistoryOptions, Run, add_history_arguments, convert_history, history_options,
                                      parse_time, quantity)

NAME = "kueue-workloads"
SUMMARY = "Kueue job history: kubectl get workloads -A -o json (admission and finish times, pod requests)"
GIB = 2**30
MAX_ITEM_CHARS = 64 << 20  # one Workload larger than this is not a Workload


@dataclass
class Options(HistoryOptions):
    queue: str = "clusterqueue"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = add_history_arguments(parser, "kueue-workloads options")
    g.add_argument("--queue", choices=("clusterqueue", "localqueue"), default="clusterqueue",
                   help="the queue of a workload: its ClusterQueue (default) or namespace/LocalQueue")


def options_from_args(ns: argparse.Namespace) -> Options:
    return Options(**history_options(ns), queue=ns.queue)


def default_inputs(directory: Path) -> list[Path]:
    return sorted([*directory.glob("*.json"), *directory.glob("*.json.gz")])


def iter_items(path: Path, bad: BadData, progress: Progress | None = None,
               base_bytes: int = 0) -> Iterator[tuple[int, Any]]:
    """``(first line, item)`` for each element of the top-level ``items`` array (a List),
    or of a top-level array, or each top-level object (one per line), read incrementally.

    A scanner follows strings and nesting one line at a time (jumping from one ``"``,
    ``\\``, bracket or brace to the next: the text between them is never looked at); the
    text of one item is kept until it closes, then decoded. An item that does not decode
    is counted with its line; a file that ends inside one is counted as truncated.
    """
    depth = 0  # nesting of the whole document
    item_depth: int | None = None  # the depth at which items are elements
    in_string = False
    skip_to = -1  # the character after a backslash inside a string
    string_start = 0
    last_key = ""  # the last string closed at depth 1 (to find "items")
    pieces: list[str] = []
    start = size = 0
    reader = LineReader(path, bad, progress, base_bytes)
    for line in reader:
        text = line.text
        begin = 0 if pieces else None  # where this line's part of an open item starts
        for match in _STRUCTURE.finditer(text):
            i = match.start()
            ch = text[i]
            if i < skip_to:
                continue
            if in_string:
                if ch == "\\":
                    skip_to = i + 2
                elif ch == '"':
                    in_string = False
                    if depth == 1 and not pieces:
                        last_key = text[string_start:i]
                continue
            if ch == '"':
                in_string, string_start = True, i + 1
            elif ch in "[{":
                if depth == 0 and ch == "[":
                    item_depth = 1  # a top-level array: its elements are the items
                elif depth == 1 and ch == "[" and last_key == "items" and item_depth is None:
                    item_depth = 2
                elif depth == 0 and ch == "{" and item_depth is None and _looks_like_item(text):
                    item_depth = 0  # objects one after the other
                if item_depth is not None and depth == item_depth and not pieces:
                    begin, start = i, line.number
                depth += 1
            elif ch in "]}":
                depth -= 1
                if item_depth is not None and depth == item_depth and begin is not None:
                    pieces.append(text[begin:i + 1])
                    yield from _decode(path, start, "\n".join(pieces), bad)
                    pieces, size, begin = [], 0, None
                if item_depth is not None and depth < item_depth:
                    item_depth = None if depth == 0 else item_depth
        skip_to = -1
        if begin is not None:
            pieces.append(text[begin:])
            size += len(text) - begin
            if size > MAX_ITEM_CHARS:
                bad.add("unparsable JSON", f"{path}:{start}", f"one item longer than {MAX_ITEM_CHARS:,} characters")
                return
    if pieces:
        bad.add("truncated or corrupt file", f"{path}:{start}", "the file ends inside a Workload")


#: the characters the item scanner stops at
_STRUCTURE = re.compile(r'["\\\[\]{}]')


def _looks_like_item(text: str) -> bool:
    """A top-level object on one line is an item (one Workload per line); a List is not
    (one on one line, ``jq -c``, has its ``items``; a pretty-printed one opens with ``{``)."""
    compact = text.replace(" ", "")
    return ('"kind":"Workload"' in compact or '"metadata"' in text) and '"items":[' not in compact


def _decode(path: Path, line: int, text: str, bad: BadData) -> Iterator[tuple[int, Any]]:
    try:
        yield line, json.loads(text)
    except json.JSONDecodeError as exc:
        bad.add("unparsable JSON", f"{path}:{line + exc.lineno - 1}", exc.msg)


def pod_demand(template: dict) -> dict[str, float]:
    """A pod template's demand: its containers' requests (or limits) summed; ValueError
    names the quantity that does not parse."""
    total: dict[str, float] = {}
    spec = template.get("spec") or {}
    for container in spec.get("containers") or []:
        resources = (container or {}).get("resources") or {}
        amounts = dict(resources.get("limits") or {})
        amounts.update(resources.get("requests") or {})
        for name, value in amounts.items():
            resource = "gpu" if name.endswith("/gpu") else name
            if resource not in ("cpu", "memory", "gpu"):
                continue
            try:
                amount = quantity(value)
            except ValueError:
                raise ValueError(f"containers[{container.get('name', '?')}].resources {name}: {value!r}") from None
            total[resource] = total.get(resource, 0.0) + (amount / GIB if resource == "memory" else amount)
    return total


def condition_time(workload: dict, kind: str) -> float | None:
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return parse_time(str(condition.get("lastTransitionTime") or ""))
    return None


def workload_runs(workload: Any, where: str, opts: Options, bad: BadData) -> Iterator[Run]:
    """The runs of one Workload (one per pod set); problems go to ``bad`` with their field."""
    if not isinstance(workload, dict) or workload.get("kind", "Workload") != "Workload":
        bad.add("not a Workload", where, f"kind {workload.get('kind') if isinstance(workload, dict) else None!r}")
        return
    meta = workload.get("metadata") or {}
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    namespace, name = str(meta.get("namespace", "default")), str(meta.get("name", ""))
    try:
        submit = parse_time(str(meta.get("creationTimestamp") or ""))
        start = condition_time(workload, "Admitted")
        end = condition_time(workload, "Finished")
    except ValueError as exc:
        bad.add("unparsable field", where, f"{namespace}/{name}: a timestamp: {exc}")
        return
    if submit is None:
        bad.add("missing field", where, f"{namespace}/{name}: metadata.creationTimestamp")
        return
    admission = status.get("admission") or {}
    if opts.queue == "clusterqueue":
        queue = admission.get("clusterQueue")
    else:
        queue = f"{namespace}/{spec['queueName']}" if spec.get("queueName") else None
    admitted_counts = {a.get("name"): a.get("count") for a in admission.get("podSetAssignments") or []}
    pod_sets = spec.get("podSets") or []
    if not pod_sets:
        bad.add("missing field", where, f"{namespace}/{name}: spec.podSets")
        return
    job_key = f"{namespace}/{name}"
    for k, pod_set in enumerate(pod_sets):
        field = f"{namespace}/{name}: spec.podSets[{k}]"
        try:
            demand = pod_demand(pod_set.get("template") or {})
            count = int(admitted_counts.get(pod_set.get("name")) or pod_set.get("count", 1))
        except (ValueError, TypeError, AttributeError) as exc:
            bad.add("unparsable field", where, f"{field}: {exc}")
            continue
        if count < 1:
            continue
        yield Run(job_key, clean_name(f"{namespace}-{name}"), queue, submit,
                  start, end, demand, where, count=count,
                  class_name=clean_name(str(pod_set.get("name", f"ps{k}"))) if len(pod_sets) > 1 else None)


def convert(inputs: list[Path], common: CommonOptions, opts: Options, bad: BadData,
            progress: Progress | None = None) -> Conversion:
    if not inputs:
        raise TraceError("kueue-workloads: no input file")

    def runs(bad: BadData, progress: Progress | None) -> Iterator[Run]:
        done_bytes = 0
        for path in inputs:
            for line, workload in iter_items(path, bad, progress, done_bytes):
                yield from workload_runs(workload, f"{path}:{line}", opts, bad)
            done_bytes += path.stat().st_size

    return convert_history(NAME, runs, common, opts, bad, progress,
                           notes=["start = Admitted, end = Finished (conditions' lastTransitionTime); pod demand = "
                                  "the containers' requests; cpu, memory (GiB), */gpu as gpu"])

