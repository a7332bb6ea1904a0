"""Regenerate the results in docs/traces.md: each shared trace converted, then compared
across drf, hdrf, dff, timefair, capacity and fifo (``fairshare compare``).

For each trace in CASES: ``fairshare trace convert`` with the case's options (a window or
sample chosen so the six runs take minutes), ``fairshare compare`` with seed 0, then a
markdown table from ``compare.json`` and a plot (docs/img/traces_<kind>.svg). The
tables replace what is between ``<!-- results:KIND -->`` and ``<!-- /results:KIND -->``
in docs/traces.md, so the doc always shows what this script last measured.
A case is a kind with a slice of its trace; CASES says which and why.

Run from the repository root: ``.venv/bin/python examples/traces/make_results.py
[--only KIND ...] [--out out/traces]``. Needs ``../shared/traces``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "traces"
DOC = REPO / "docs" / "traces.md"
IMG = REPO / "docs" / "img"
POLICIES = ["drf", "hdrf", "dff", "timefair", "capacity", "fifo"]

# key -> (kind, input under ../shared/traces, convert options, what the slice is, in words)
CASES: dict[str, tuple[str, str, list[str], str]] = {
    "google2011": ("google2011", "google-2011/task_events-part-00000-of-00500.csv.gz",
                   ["--window", "600:2400", "--sample", "0.05", "--machines", "600"],
                   "part 0, the first 30 minutes of the trace (600-2,400 s), 5% of the jobs by hash, on 600 "
                   "machines of the trace's mix (about 5% of the cell)"),
    "alibaba-gpu2023": ("alibaba-gpu2023", "alibaba-gpu-2023/openb_pod_list_default.csv", ["--window", "9500000:"],
                        "the default pod list from 9.5e6 s on (99.7% of its pods are created after it), on the "
                        "1,523 real nodes"),
    "alibaba-gpu2023-nodes2": ("alibaba-gpu2023", "alibaba-gpu-2023/openb_pod_list_default.csv",
                               ["--window", "9500000:", "--node-sample", "0.02"],
                               "the same pods on a 2% hash sample of the nodes (29 nodes), so that pods queue: on "
                               "the full list, and still on 10% of it, no pod ever waits"),
    "alibaba-dlrm2025": ("alibaba-dlrm2025", "alibaba-dlrm-2025",
                         ["--group", "bucket", "--bucket-s", "86400", "--sample", "0.25", "--load", "1.0"],
                         "25% of the instances by hash, one job per (application, day), derived nodes sized so "
                         "the trace's own peak fills them (--load 1.0; at the default 0.8 no instance waits and "
                         "the six policies give identical results)"),
    "swim": ("swim", "swim-facebook/FB-2009_samples_24_times_1hr_0.tsv",
             ["--window", "0:21600", "--machines", "10"],
             "the first 6 hours of FB-2009 sample 0 on 10 nodes (80 cpu): at the default 600 nodes nothing "
             "ever waits"),
}


def sh(argv: list[str]) -> float:
    start = time.monotonic()
    print("$", " ".join(argv), flush=True)
    subprocess.run(argv, check=True, cwd=REPO)
    return time.monotonic() - start


def table(compare: dict) -> str:
    resources = compare["resources"]
    head = ["policy", *[f"util {r}" for r in resources], "mean completion (s)", "p95 completion (s)",
            "finished", "longest starvation (s)", "fairness gap"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 1 + "---:|" * (len(head) - 1)]
    for p in compare["policies"]:
        r = compare["results"][p]
        gap = r["fairness_gap"]["value"] if r.get("fairness_gap") else None
        cells = [p, *[f"{100 * r['utilization'][res]:.1f}%" for res in resources],
                 _num(r["completion_time_mean"]), _num(r["completion_time_p95"]),
                 f"{r['finished_jobs']}/{r['finished_jobs'] + r['unfinished_jobs']}",
                 _num(r["starvation"]["max_s"]), "-" if gap is None else f"{gap:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _num(x) -> str:
    return "-" if x is None else f"{x:,.0f}"


def plot(kind: str, compare: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = compare["policies"]
    resources = compare["resources"]
    res = compare["results"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    width = 0.8 / len(resources)
    for k, r in enumerate(resources):
        axes[0].bar([i + k * width for i in range(len(policies))],
                    [100 * res[p]["utilization"][r] for p in policies], width, label=r)
    axes[0].set_title("utilization (time-averaged, %)")
    axes[0].legend(fontsize=7)
    for ax, key, title in ((axes[1], "completion_time_mean", "mean completion (s)"),
                           (axes[2], "completion_time_p95", "p95 completion (s)")):
        ax.bar(range(len(policies)), [res[p][key] or 0 for p in policies], color="tab:gray")
        ax.set_title(title)
    for ax in axes:
        ax.set_xticks([i + (0.4 - width / 2 if ax is axes[0] else 0) for i in range(len(policies))])
        ax.set_xticklabels(policies, rotation=30, fontsize=8)
    fig.suptitle(f"{kind}: {compare['scenario']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def replace_block(text: str, kind: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- results:{re.escape(kind)} -->\n).*?(<!-- /results:{re.escape(kind)} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{DOC}: no <!-- results:{kind} --> block")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=list(CASES), default=None, metavar="CASE")
    ap.add_argument("--out", type=Path, default=REPO / "out" / "traces")
    args = ap.parse_args()
    if not TRACES.is_dir():
        sys.exit(f"the shared traces are not at {TRACES}")
    args.out.mkdir(parents=True, exist_ok=True)
    IMG.mkdir(parents=True, exist_ok=True)
    for key in args.only or CASES:
        kind, rel, options, words = CASES[key]
        scenario = args.out / f"{key}.json"
        convert_cmd = [sys.executable, "-m", "fairshare", "trace", "convert", kind, str(TRACES / rel), "-o",
                       str(scenario), *options]
        t_convert = sh(convert_cmd)
        out = args.out / key
        t_compare = sh([sys.executable, "-m", "fairshare", "compare", str(scenario), "--policies", ",".join(POLICIES),
                        "--out", str(out), "--seed", "0"])
        compare = json.loads((out / "compare.json").read_text())
        compare["scenario"] = f"{key} ({rel}, {' '.join(options)})"
        plot(key, compare, IMG / f"traces_{key}.svg")
        data = json.loads(scenario.read_text())
        tasks = sum(t["count"] for j in data["jobs"] for t in j["tasks"])
        nodes = sum(n.get("count", 1) for n in data["cluster"]["nodes"])
        shown_cmd = f"fairshare trace convert {kind} ../shared/traces/{rel} -o {key}.json {' '.join(options)}"
        body = (f"Slice: {words}. {len(data['jobs']):,} jobs, {tasks:,} tasks, {nodes:,} nodes. "
                f"Convert {t_convert:.0f} s, compare (six policies) {t_compare:.0f} s.\n\n"
                f"```console\n$ {shown_cmd}\n$ fairshare compare {key}.json --policies {','.join(POLICIES)} "
                f"--out out/{key} --seed 0\n```\n\n{table(compare)}\n\n"
                f"![{key} comparison](img/traces_{key}.svg)\n")
        # read-modify-write per case, so edits made meanwhile (or another run) are kept
        DOC.write_text(replace_block(DOC.read_text(encoding="utf-8"), key, body), encoding="utf-8")
        print(f"updated {DOC} ({key})", flush=True)


if __name__ == "__main__":
    main()
