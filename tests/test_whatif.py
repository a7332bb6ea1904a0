"""``fairshare whatif``: variants, history mapping, the numbers, the verdicts, the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fairshare.cli import main
from fairshare.model.loader import parse_scenario
from fairshare.policies import REGISTRY
from fairshare.sim import SimOptions, Simulator
from fairshare.policies import make_policy
from fairshare.whatif.analysis import (Change, QueueNumbers, changes, entitlement_steps, queue_numbers,
                                       queue_verdicts, verdict_lines)
from fairshare.whatif.run import WhatIfError, attach_history
from fairshare.whatif.variants import (Setting, VariantError, apply_setting, parse_policies, parse_vary,
                                       variants)

CONFIG = {
    "cluster": {"capacity": {"cpu": 12, "memory": 24}},
    "queues": [{"name": "a", "weight": 3},
               {"name": "b", "children": [{"name": "b1"}, {"name": "b2"}]}],
}


def job(name, queue, submit=0, count=4, duration=10, cpu=1, memory=1):
    return {"name": name, "queue": queue, "submit": submit,
            "tasks": [{"demand": {"cpu": cpu, "memory": memory}, "count": count, "duration": duration}]}


# --- variants ------------------------------------------------------------------------------------

def test_parse_vary_reads_yaml_scalars_and_names_the_flag_on_bad_input():
    assert parse_vary("fairness.half_life=0,86400,.inf") == ("fairness.half_life", [0, 86400, float("inf")])
    assert parse_vary("peers.yarn-fair.default_policy=drf,none") == ("peers.yarn-fair.default_policy", ["drf", None])
    for bad in ("fairness.half_life", "=1,2", "x=", "x=1,,2"):
        with pytest.raises(VariantError, match="--vary"):
            parse_vary(bad)


def test_apply_setting_reaches_a_nested_queue_by_its_dotted_path_and_copies_the_document():
    doc = {"queues": CONFIG["queues"], "jobs": []}
    out = apply_setting(doc, Setting("queue[b.b2].weight", 5))
    assert out["queues"][1]["children"][1]["weight"] == 5
    assert "weight" not in doc["queues"][1]["children"][1]  # the original is untouched
    out = apply_setting(doc, Setting("queue[a].limit.cpu", 4))
    assert out["queues"][0]["limit"] == {"cpu": 4}
    out = apply_setting({"fairness": {"half_life": 10}}, Setting("fairness.half_life", None))
    assert out["fairness"] == {}
    with pytest.raises(VariantError, match="no queue 'c'"):
        apply_setting(doc, Setting("queue[c].weight", 2))
    with pytest.raises(VariantError, match="not jobs"):
        apply_setting(doc, Setting("jobs.x", 2))


def test_policies_resolve_current_and_refuse_unknown_or_repeated_names():
    assert parse_policies("current,hdrf,drf", "fifo", REGISTRY) == ["fifo", "hdrf", "drf"]
    with pytest.raises(VariantError, match="no current scheduler"):
        parse_policies("current,hdrf", None, REGISTRY)
    with pytest.raises(VariantError, match="did you mean 'hdrf'"):
        parse_policies("hdfr", None, REGISTRY)
    with pytest.raises(VariantError, match="listed twice"):
        parse_policies("drf,current", "drf", REGISTRY)


def test_variants_put_every_plain_policy_first_then_each_varied_value():
    vs = variants(["fifo", "hdrf"], "fifo", [("fairness.half_life", [0, 60])])
    assert [v.label for v in vs] == ["current (fifo)", "hdrf", "current (fifo) fairness.half_life=0",
                                     "current (fifo) fairness.half_life=60", "hdrf fairness.half_life=0",
                                     "hdrf fairness.half_life=60"]
    assert len({v.slug for v in vs}) == len(vs)  # one output directory each


# --- the history onto the configuration -----------------------------------------------------------

def test_history_queues_map_by_table_path_then_unique_last_component():
    jobs = [job("j1", "root.a"), job("j2", "b.b1"), job("j3", "b2"), job("j4", "team-x")]
    doc, notes = attach_history(CONFIG, jobs, queue_map={"team-x": "a"}, importer_paths={"root.a": "a"})
    assert [j["queue"] for j in doc["jobs"]] == ["a", "b.b1", "b.b2", "a"]
    assert notes == []
    assert jobs[0]["queue"] == "root.a"  # the history's own list is not changed


def test_unmapped_history_queues_are_an_error_naming_them_unless_asked_otherwise():
    jobs = [job("j1", "nowhere"), job("j2", "nowhere"), job("j3", "a")]
    with pytest.raises(WhatIfError, match=r"2 jobs name queues .*'nowhere' \(2 jobs\).*--queue-map"):
        attach_history(CONFIG, jobs)
    doc, notes = attach_history(CONFIG, jobs, unmapped="drop")
    assert [j["name"] for j in doc["jobs"]] == ["j3"] and "left out" in notes[0]
    doc, notes = attach_history(CONFIG, jobs, unmapped="root")
    assert [j.get("queue") for j in doc["jobs"]] == [None, None, "a"] and "under the root" in notes[0]
    with pytest.raises(WhatIfError, match="--queue-map: 'x' maps to 'zz'"):
        attach_history(CONFIG, jobs, queue_map={"x": "zz"})


# --- the numbers --------------------------------------------------------------------------------------

def _run(doc, policy="hdrf"):
    scenario = parse_scenario(doc)
    return Simulator(scenario, make_policy(policy), SimOptions(seed=0, track_fair_share=True)).run()


def test_entitlement_is_the_hierarchical_share_guarantee_among_demanding_queues():
    # a (weight 3) demands from 0; b1 from 0; b2 joins at 5. H-DRF Sec. 3: the root's
    # children a and b split 3 : 1 -> a 3/4, b 1/4; below b, b1 alone gets all of b's 1/4
    # until b2 demands at 5, then b1 = b2 = 1/4 * 1/2 = 1/8.
    doc = dict(CONFIG, jobs=[job("ja", "a", count=40), job("j1", "b.b1", count=40),
                             job("j2", "b.b2", submit=5, count=40)])
    result = _run(doc)
    steps = entitlement_steps(parse_scenario(doc), result)
    # (until their last tasks start: then they stop demanding, and their entitlement ends)
    assert (steps["a"][0][0], steps["a"][1][0]) == (0.0, 0.75) and steps["a"][0][1] > 5
    assert (steps["b"][0][0], steps["b"][1][0]) == (0.0, 0.25) and steps["b"][0][1] > 5
    assert steps["b.b1"][0][:2] == [0.0, 5.0] and steps["b.b1"][1][:2] == [0.25, 0.125]
    assert steps["b.b2"][0][:2] == [0.0, 5.0] and steps["b.b2"][1][:2] == [0.0, 0.125]


def test_waits_are_start_minus_submit_per_queue_and_subtree():
    # 12 CPUs; ja's 12 one-CPU tasks of 10 s fill the cluster at 0 under fifo, so jb
    # (submitted at 1) starts at 10: wait 9; a's only job starts at once: wait 0.
    doc = dict(CONFIG, jobs=[job("ja", "a", count=12), job("jb", "b.b1", submit=1, count=2)])
    numbers = queue_numbers(_run(doc, "fifo"))
    assert (numbers["a"].wait_p50, numbers["a"].wait_p95) == (0.0, 0.0)
    assert numbers["b.b1"].wait_p50 == 9.0 and numbers["b"].wait_p95 == 9.0  # b's subtree holds jb
    assert numbers["b.b2"].jobs == 0 and numbers["b.b2"].wait_p50 is None
    # b.b1 demanded from 1 to 10 (pending, none running) with entitlement 1/4: short 9 s
    assert numbers["b.b1"].short_s == pytest.approx(9.0)


def test_verdicts_go_by_the_first_measure_that_moved_and_ignore_small_moves():
    def qn(path, p95, share):
        n = QueueNumbers(path)
        n.wait_p95, n.wait_p50, n.share_while_demanding = p95, p95, share
        return n

    base = {"a": qn("a", 100.0, 0.5), "b": qn("b", 10.0, 0.2), "c": qn("c", 1000.0, 0.3)}
    other = {"a": qn("a", 40.0, 0.45), "b": qn("b", 30.0, 0.25), "c": qn("c", 1010.0, 0.3)}
    moved = changes(base, other, ["a", "b", "c"])
    # c's 10 s on 1000 s is under 5%: not a change
    assert {(c.queue, c.measure) for c in moved} == {("a", "wait_p95"), ("a", "wait_p50"), ("a", "share_while_demanding"),
                                                     ("b", "wait_p95"), ("b", "wait_p50"), ("b", "share_while_demanding")}
    assert queue_verdicts(moved) == {"a": True, "b": False}  # by p95 wait: a 100 -> 40, b 10 -> 30
    lines = verdict_lines("current (x)", "hdrf", moved)
    assert lines[0] == "Switching from current (x) to hdrf: 1 queue(s) gain, 1 lose, the others do not move."
    assert lines[1].startswith("  a gains: p95 wait 100 s -> 40 s (-60%)")
    assert lines[2].startswith("  b loses: p95 wait 10 s -> 30 s (+200%)")
    assert Change("a", "share_while_demanding", 0.2, 0.3).gains


# --- the command -------------------------------------------------------------------------------------

def test_whatif_command_writes_the_report_and_its_numbers_match_the_runs(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(dict(CONFIG, jobs=[])))
    history = tmp_path / "history.yaml"
    history.write_text(yaml.safe_dump({"cluster": CONFIG["cluster"], "jobs": [
        job("ja", "a", count=24), job("jb", "b1", submit=1, count=6), job("jc", "b.b2", submit=2, count=6)]}))
    out = tmp_path / "out"
    status = main(["whatif", "--scenario", str(config), "--history", str(history), "--current", "fifo",
                   "--policies", "current,hdrf", "--vary", "queue[a].weight=1", "-o", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    doc = json.loads((out / "whatif.json").read_text())
    assert [v["label"] for v in doc["variants"]] == ["current (fifo)", "hdrf", "current (fifo) queue[a].weight=1",
                                                     "hdrf queue[a].weight=1"]
    assert printed.startswith("Switching from current (fifo) to hdrf:")
    # each variant's per-queue waits equal its own summary.json's jobs (start - submit)
    for variant in doc["variants"]:
        summary = json.loads((out / variant["outputs"] / "summary.json").read_text())
        jb = summary["jobs"]["jb"]
        assert variant["queues"]["b.b1"]["wait_p50"] == pytest.approx(jb["start"] - jb["submit"])
    # fifo (current) serves ja's 24 tasks first; hdrf gives b its quarter at once
    assert doc["variants"][0]["queues"]["b.b1"]["wait_p50"] > doc["variants"][1]["queues"]["b.b1"]["wait_p50"]
    audit = {v["label"]: v["audit"] for v in doc["variants"] if v["setting"] is None}
    assert audit["hdrf"]["available"] and "hierarchical_share_guarantee" in audit["hdrf"]["holds"]
    html = (out / "report.html").read_text()
    assert html.count("<svg") >= 5  # the waits, and a plot per queue: a, b, b.b1, b.b2
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["queue_a.svg", "queue_b.b1.svg", "queue_b.b2.svg",
                                                                 "queue_b.svg", "waits.svg"]
    assert "If you switch" in html


@pytest.mark.parametrize("argv, message", [
    (["--policies", "current,hdrf"], "no current scheduler"),
    (["--vary", "half_life"], "--vary: expected KEY=V1,V2"),
    (["--vary", "queue[zz].weight=2"], "no queue 'zz'"),
    (["--unmapped", "error", "--history-kind", "nope"], "--history-kind: unknown kind 'nope'"),
])
def test_whatif_errors_name_the_flag_and_write_nothing(tmp_path, capsys, argv, message):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(dict(CONFIG, jobs=[job("ja", "a")])))
    out = tmp_path / "out"
    status = main(["whatif", "--scenario", str(config), "--history", str(config), "-o", str(out), *argv])
    assert status == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


SWIM = Path(__file__).resolve().parents[2] / "shared" / "traces" / "swim-facebook" / "FB-2009_samples_24_times_1hr_0.tsv"
HADOOP = Path(__file__).resolve().parent / "data" / "peers" / "hadoop"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "whatif"


@pytest.mark.skipif(not SWIM.exists(), reason=f"{SWIM} is absent (../shared/traces holds the project's traces)")
def test_whatif_on_a_real_trace_under_an_imported_capacity_scheduler_config(tmp_path, capsys):
    """docs/whatif.md's example, on the trace's first hour: Facebook's 2009 jobs under the
    queues of Hadoop's TestRMWebServicesCapacitySched, current (capacity) against drf."""
    history = tmp_path / "fb2009-1h.yaml"
    assert main(["trace", "convert", "swim", str(SWIM), "--window", ":3600", "--machines", "10",
                 "-o", str(history), "--quiet"]) == 0
    jobs = yaml.safe_load(history.read_text())["jobs"]
    out = tmp_path / "out"
    status = main(["whatif", "--config", str(HADOOP / "capacity-scheduler-webservices-test.xml"),
                   "--kind", "yarn-capacity", "--nodes", str(EXAMPLES / "nodes-10.yaml"), "--history", str(history),
                   "--queue-map", str(EXAMPLES / "swim-queue-map.yaml"), "--policies", "current,drf", "-o", str(out)])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    doc = json.loads((out / "whatif.json").read_text())
    assert [v["label"] for v in doc["variants"]] == ["current (capacity)", "drf"]
    mapping = yaml.safe_load((EXAMPLES / "swim-queue-map.yaml").read_text())
    for variant in doc["variants"]:
        for size, queue in mapping.items():  # every history job lands in its mapped leaf
            assert variant["queues"][queue]["jobs"] == sum(1 for j in jobs if j["queue"] == size)
    queues = list(doc["variants"][0]["queues"])
    assert {p.name for p in (out / "plots").iterdir()} == {f"queue_{q}.svg" for q in queues} | {"waits.svg"}
    assert any("unsupported setting root.a.a1.user-limit-factor" in n for n in doc["notes"])


PEERS = Path(__file__).resolve().parent / "data" / "peers"


@pytest.mark.parametrize("kind, config, baseline, demand", [
    # (the YARN docs example limits its queues to 0 vcores: memory-only tasks; the Kueue
    # doc example gives quota on cpu only, so a memory request is never admitted)
    ("yarn-fair", "hadoop/fair-scheduler-docs-example.xml", "yarn-fair", {"cpu": 0, "memory": 1}),
    ("yarn-capacity", "hadoop/capacity-scheduler-webservices-test.xml", "capacity", {"cpu": 1, "memory": 1}),
    ("kueue", "kueue/borrowing-limit.yaml", "kueue", {"cpu": 1, "memory": 0}),
    ("slurm", "slurm/fair_tree_assoc.txt", "slurm-fairtree", {"cpu": 1, "memory": 1}),
    ("yunikorn", "yunikorn/queue-config-namespaces.yaml", "hdrf", {"cpu": 1, "memory": 1}),
])
def test_whatif_runs_each_importers_baseline_as_current(tmp_path, capsys, kind, config, baseline, demand):
    """Every config kind: the peers' own example imported, one small job per leaf queue,
    replayed under the kind's baseline as `current` and under drf."""
    from fairshare.importers import KINDS, ClusterSize, queue_entries

    cluster = {"cpu": 100.0, "memory": 1000.0}
    imported = KINDS[kind].read([str(PEERS / config)], ClusterSize(cluster))
    assert imported.policy == baseline

    paths = [path for path, entry in queue_entries(imported.queues) if not entry.get("children")]
    jobs = [job(f"j{k}", path, submit=k, count=3, **demand) for k, path in enumerate(paths)]
    history = tmp_path / "history.yaml"
    history.write_text(yaml.safe_dump({"jobs": jobs}))
    out = tmp_path / "out"
    status = main(["whatif", "--config", str(PEERS / config), "--kind", kind, "--cluster", "cpu=100,memory=1000",
                   "--history", str(history), "--policies", "current,drf", "-o", str(out)])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    doc = json.loads((out / "whatif.json").read_text())
    assert doc["base"] == f"current ({baseline})" and doc["source"]["current"] == baseline
    for variant in doc["variants"]:
        assert [variant["queues"][p]["jobs"] for p in paths] == [1] * len(paths)
        # one small job per leaf, far below the cluster and every quota: nothing waits
        assert all(variant["queues"][p]["wait_p95"] == 0.0 for p in paths)
