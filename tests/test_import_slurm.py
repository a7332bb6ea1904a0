"""The slurm config importer on `sacctmgr show assoc -P` output: the association tree of
Slurm's Fair Tree documentation (tests/data/peers/slurm/, GPL-2.0 docs, the short example
quoted; its header says which values are ours), and the column layouts sacctmgr writes
(default columns with -p, ParentName, tree indentation). Units: cpu in cores, mem MB ->
GiB (/1024), gres/gpu in devices."""

from __future__ import annotations

import pytest
from import_helpers import peer_file, round_trip, unsupported_paths

from fairshare.importers import KINDS, ClusterSize, ImportError_
from fairshare.importers import slurm

CLUSTER = ClusterSize({"cpu": 100, "memory": 1000, "gpu": 8})


def read_text(tmp_path, text: str):
    f = tmp_path / "assoc.txt"
    f.write_text(text)
    return slurm.read([str(f)], CLUSTER)


def test_registered_with_its_baseline():
    assert KINDS["slurm"] is slurm and slurm.POLICY == "slurm-fairtree"


def test_fair_tree_example():
    imported = slurm.read([peer_file("slurm", "fair_tree_assoc.txt")], CLUSTER)
    [acct1, root_user] = imported.queues
    acct12, acct16 = acct1["children"]
    # Share 30 and 10 -> weights; GrpTRES cpu=64,mem=256G,gres/gpu=4 -> 64 cores, 256 GiB, 4 GPUs
    assert (acct12["weight"], acct16["weight"]) == (30.0, 10.0)
    assert acct12["limit"] == {"cpu": 64.0, "memory": 256.0, "gpu": 4.0}
    assert acct12["children"] == [{"name": "UserA"}] and acct16["children"] == [{"name": "UserB"}]
    assert root_user == {"name": "root"}  # the root user of the root account: a top-level leaf
    assert imported.peers == {"slurm-fairtree": {"users": {"Acct1.Acct12.UserA": "Acct1.Acct12",
                                                           "Acct1.Acct16.UserB": "Acct1.Acct16"}}}
    assert imported.queue_paths["Acct12/UserA"] == "Acct1.Acct12.UserA"
    assert imported.queue_paths["Acct16"] == "Acct1.Acct16"
    assert unsupported_paths(imported) == [
        "line 11 (root/root).QOS", "line 15 (Acct12/UserA).MaxJobs", "line 15 (Acct12/UserA).QOS",
        "line 16 (Acct16/UserB).QOS", "line 16 (Acct16/UserB).Share"]  # the last: Share=parent, approximated
    # UserA and UserB both want cpu: shares 30:10 would give 75 and 25 of 100 cores, but
    # Acct12's GrpTRES caps it at 64, so Acct16 takes the other 36
    alloc = round_trip(imported, CLUSTER, {"Acct1.Acct12.UserA": {"cpu": 1}, "Acct1.Acct16.UserB": {"cpu": 1}})
    assert (alloc["Acct1.Acct12"]["cpu"], alloc["Acct1.Acct16"]["cpu"]) == pytest.approx((64, 36))


# sacctmgr's default columns for `show assoc -p` (a '|' ends each line), one user with
# two partition rows; no ParentName, so no tree (values ours)
HEADER = ("Cluster|Account|User|Partition|Share|Priority|GrpJobs|GrpTRES|GrpSubmit|GrpWall|GrpTRESMins|MaxJobs|"
          "MaxTRES|MaxTRESPerNode|MaxSubmit|MaxWall|MaxTRESMins|QOS|Def QOS|GrpTRESRunMins").split("|")


def row(**cells: str) -> str:
    return "|".join(cells.get(h.replace(" ", ""), "") for h in HEADER) + "|\n"


DEFAULT_COLUMNS = "|".join(HEADER) + "|\n" + "".join((
    row(Cluster="c", Account="root", Share="1"),
    row(Cluster="c", Account="physics", Share="2"),
    row(Cluster="c", Account="physics", User="alice", Partition="gpu", Share="1"),
    row(Cluster="c", Account="physics", User="alice", Partition="cpu", Share="5"),
    row(Cluster="c", Account="chem", Share="1", GrpTRES="mem=1000,node=2", GrpTRESMins="cpu=60000"),
))


def test_default_columns(tmp_path):
    imported = read_text(tmp_path, DEFAULT_COLUMNS)
    physics, chem = imported.queues
    assert physics == {"name": "physics", "weight": 2.0, "children": [{"name": "alice"}]}  # the first row's Share
    assert chem == {"name": "chem", "limit": {"memory": pytest.approx(1000 / 1024)}}  # mem=1000 is MB
    assert unsupported_paths(imported) == [
        "line 4 (physics/alice).Partition", "line 5 (physics/alice).Partition",
        "line 6 (chem).GrpTRESMins", "header", "line 6 (chem).GrpTRES.node"]


def test_tree_indentation(tmp_path):
    imported = read_text(tmp_path, "Account|User|Share|GrpTRES\nroot||1|\n physics||2|\n  theory||1|"
                                   "cpu=8,mem=2T,gres/gpu:a100=2\n  theory|bob.smith|1|\n chem||1|\n")
    physics, chem = imported.queues
    [theory] = physics["children"]
    assert theory["limit"] == {"cpu": 8.0, "memory": 2048.0}  # 2T = 2 * 1024 GiB
    assert theory["children"] == [{"name": "bob_smith"}]       # '.' separates queue paths
    assert chem == {"name": "chem"}
    assert imported.queue_paths["theory/bob.smith"] == "physics.theory.bob_smith"
    assert unsupported_paths(imported) == ["line 4 (theory).GrpTRES.gres/gpu:a100", "line 5 (theory/bob.smith).User"]


@pytest.mark.parametrize(("text", "where"), [
    ("User|Share\nalice|1\n", "line 1: the header has no Account column"),
    ("Account|User|Share\nroot||1\nphysics|1\n", "line 3: 2 fields, but the header has 3"),
    ("Account|User|Share\nphysics||lots\n", "line 2 (physics).Share: must be a number of shares or 'parent'"),
    ("Account|User|GrpTRES\nphysics||mem=5X\n", "line 2 (physics).GrpTRES.mem: '5X': the unit must be"),
    ("Account|User|GrpTRES\nphysics||cpu\n", "line 2 (physics).GrpTRES: 'cpu' is not TRES=amount"),
    ("Cluster|Account|User\na|root|\nb|root|\n", "associations of several clusters (a, b)"),
    ("Account|User|Par Name\nroot||\nx||y\ny||x\n", "line 3 (x).Par Name: accounts form a cycle: x -> y -> x"),
    ("Account|User|Par Name\nroot||\nx||nowhere\n", "line 3 (x).Par Name: parent account 'nowhere' has no row"),
    ("# only a comment\n", "no header line"),
])
def test_bad_input_names_file_field_and_reason(tmp_path, text, where):
    with pytest.raises(ImportError_) as err:
        read_text(tmp_path, text)
    assert str(err.value).startswith(str(tmp_path / "assoc.txt")) and where in str(err.value)
