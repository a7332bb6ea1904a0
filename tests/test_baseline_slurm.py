"""``slurm-fairtree``: Slurm's Fair Tree ranking on the rules and example of its own
documentation, and simulated runs where decayed billing usage orders the jobs.

Sources (SchedMD/slurm, GPL-2 docs: rules paraphrased, not copied):
``doc/html/fair_tree.shtml`` ("Level Fairshare Calculation": LF = S / U; "Ties"; the
UserA/UserB example of "Overview for End Users"; "Level FS values are infinity if the
association has no usage") and ``src/plugins/priority/multifactor/fair_tree.c``
(``_calc_tree_fs``: fair-share factor = rank / user associations, the top user 1.0).
"""

from __future__ import annotations

import math

import pytest

from fairshare.model.errors import ScenarioError
from fairshare.model.loader import parse_scenario
from fairshare.policies import PolicyModeError, make_policy
from fairshare.policies.slurm_fairtree import Association, fair_tree_ranks, level_fairshare
from fairshare.sim import SimOptions
from fairshare.sim.simulator import simulate


def user(name, shares, usage):
    return Association(name, shares, usage, True)


def account(name, shares, *children):
    return Association(name, shares, sum(c.usage for c in children), False, tuple(children))


def test_level_fairshare_is_shares_over_usage_among_siblings():
    a, b, c = user("a", 1, 10), user("b", 1, 30), user("c", 2, 60)
    siblings = [a, b, c]
    # S = 1/4, 1/4, 2/4; U = 10/100, 30/100, 60/100
    assert level_fairshare(a, siblings) == pytest.approx(0.25 / 0.1)  # 2.5: under-served
    assert level_fairshare(b, siblings) == pytest.approx(0.25 / 0.3)  # 0.83: over-served
    assert level_fairshare(c, siblings) == pytest.approx(0.5 / 0.6)
    # no usage: infinity; no shares: 0 (fair_tree.c _calc_assoc_fs)
    idle = user("idle", 1, 0)
    assert level_fairshare(idle, [idle, a]) == math.inf
    assert level_fairshare(user("none", 0, 5), [user("none", 0, 5), a]) == 0.0


def test_the_docs_example_the_higher_account_ranks_all_its_users_first():
    # root => Acct1 => Acct12 => UserA, root => Acct1 => Acct16 => UserB (fair_tree.shtml):
    # Acct16 has the higher LF (equal shares, usage 10 against 30: LF 2.0 vs 0.67), so
    # UserB has the higher FairShare. Extra users in each account: every user of Acct16
    # still ranks above every user of Acct12, however little the Acct12 user used
    acct12 = account("Acct12", 1, user("UserA", 1, 0), user("UserA2", 1, 30))
    acct16 = account("Acct16", 1, user("UserB", 1, 9), user("UserB2", 1, 1))
    root = account("root", 1, account("Acct1", 1, acct12, acct16))
    factor, level = fair_tree_ranks(root)
    # Acct12: S 1/2, U 30/40 -> 2/3; Acct16: S 1/2, U 10/40 -> 2
    assert level["Acct12"] == pytest.approx(2 / 3) and level["Acct16"] == pytest.approx(2.0)
    # 4 users, ranks 4..1: UserB2 (LF 0.5/0.1 = 5), UserB (0.5/0.9), UserA (inf), UserA2 (0.5)
    assert factor == {"UserB2": 4 / 4, "UserB": 3 / 4, "UserA": 2 / 4, "UserA2": 1 / 4}


def test_tie_rules():
    # "Sibling users with the same Level Fairshare receive the same rank": u1, u2, u3
    # all at LF (1/3) / (10/30) = 1 share the top rank, 3 of 3
    tied = account("root", 1, user("u1", 1, 10), user("u2", 1, 10), user("u3", 1, 10))
    factor, _ = fair_tree_ranks(tied)
    assert factor == {"u1": 1.0, "u2": 1.0, "u3": 1.0}
    # "A user with the same Level Fairshare as a sibling account will receive the same
    # rank as its highest ranked user": u and account acc both at LF 1 (S 1/2, U 1/2);
    # users sort first: u gets rank 3/3, acc's best user (x: LF 0.5/0.25 = 2) ties with it,
    # y (0.5/0.75) comes next with rank 1 (the ranks without ties count down 3, 2, 1)
    root = account("root", 1, user("u", 1, 20), account("acc", 1, user("x", 1, 5), user("y", 1, 15)))
    factor, _ = fair_tree_ranks(root)
    assert factor == {"u": 1.0, "x": 1.0, "y": 1 / 3}
    # "Sibling accounts with the same Level Fairshare have their children lists merged
    # before sorting": p and q tie (LF 1); their users are ranked together by their own
    # LF: q's z (0.5/0.2 = 2.5) before p's v (0.5/0.4 = 1.25), then p's w, then q's t
    root = account("root", 1, account("p", 1, user("v", 1, 4), user("w", 1, 6)),
                   account("q", 1, user("z", 1, 2), user("t", 1, 8)))
    factor, level = fair_tree_ranks(root)
    assert level["p"] == level["q"] == 1.0
    assert sorted(factor, key=factor.get, reverse=True) == ["z", "v", "w", "t"]
    # (the ranks: z 4/4, v 3/4, w 2/4, t 1/4: without the merge, all of p's users would
    # rank before q's, p being listed first)
    assert factor["t"] == 0.25


def run(peers, jobs, until=None):
    doc = {"resources": ["cpu", "memory"],
           "cluster": {"nodes": [{"name": "n", "capacity": {"cpu": 4, "memory": 16}}]},
           "queues": [{"name": "phys", "children": [{"name": "alice"}]},
                      {"name": "chem", "children": [{"name": "bob"}]}],
           "jobs": jobs, "peers": {"slurm-fairtree": peers}}
    return simulate(parse_scenario(doc), "slurm-fairtree", SimOptions(until=until))


HISTORY = [
    # alice ran 4 CPU-only tasks for 100 s (400 CPU-s), bob one 16 GB memory-only task
    # for 100 s (1600 GB-s), both before the contest at t=200
    {"name": "past-alice", "queue": "phys.alice", "submit": 0,
     "tasks": [{"count": 4, "demand": {"cpu": 1, "memory": 0}, "duration": 100}]},
    {"name": "past-bob", "queue": "chem.bob", "submit": 100,
     "tasks": [{"count": 1, "demand": {"cpu": 0, "memory": 16}, "duration": 100}]},
    # at t=200 both submit, alice first: who runs first is the fair-share factor's call
    {"name": "alice-now", "queue": "phys.alice", "submit": 200,
     "tasks": [{"count": 4, "demand": {"cpu": 1, "memory": 1}, "duration": 50}]},
    {"name": "bob-now", "queue": "chem.bob", "submit": 200,
     "tasks": [{"count": 4, "demand": {"cpu": 1, "memory": 1}, "duration": 50}]},
]


def test_past_usage_orders_the_jobs_by_the_billing_weights():
    # billed on CPU (Slurm's default): alice used 400 CPU-s, bob 0: chem's LF is infinite,
    # bob's job takes the 4 CPUs first though alice's was listed first
    cpu = run({}, HISTORY)
    assert cpu.jobs["bob-now"].start == 200.0 and cpu.jobs["alice-now"].start == 250.0
    # billed on memory alone: bob used 1600 GB-s, alice 0: alice first
    memory = run({"billing_weights": {"memory": 1.0}}, HISTORY)
    assert memory.jobs["alice-now"].start == 200.0 and memory.jobs["bob-now"].start == 250.0
    # both: alice 400 x 1, bob 1600 x 0.25 = 400: equal usage and shares, LF 1 each, the
    # accounts tie and their users merge, tie again (rank 2/2 each): submission order,
    # alice first
    even = run({"billing_weights": {"cpu": 1.0, "memory": 0.25}}, HISTORY)
    assert even.jobs["alice-now"].start == 200.0 and even.jobs["bob-now"].start == 250.0


def test_half_life_decays_old_usage():
    # billed on memory: bob used 1600 GB-s long ago (0-100 s), alice 400 GB-s recently
    # (100-200 s). Without decay bob used more, so alice goes first; with a 10 s
    # half-life bob's old usage has all but vanished and alice's recent one has not
    jobs = [
        {"name": "old-bob", "queue": "chem.bob", "submit": 0,
         "tasks": [{"count": 1, "demand": {"cpu": 0, "memory": 16}, "duration": 100}]},  # 1600 GB-s at 0-100
        {"name": "new-alice", "queue": "phys.alice", "submit": 100,
         "tasks": [{"count": 1, "demand": {"cpu": 0, "memory": 4}, "duration": 100}]},  # 400 GB-s at 100-200
        {"name": "bob-now", "queue": "chem.bob", "submit": 200,
         "tasks": [{"count": 4, "demand": {"cpu": 1, "memory": 1}, "duration": 50}]},
        {"name": "alice-now", "queue": "phys.alice", "submit": 200,
         "tasks": [{"count": 4, "demand": {"cpu": 1, "memory": 1}, "duration": 50}]},
    ]
    # no decay (half_life 0): bob 1600 > alice 400: alice first
    kept = run({"billing_weights": {"memory": 1.0}, "half_life": 0}, jobs)
    assert kept.jobs["alice-now"].start == 200.0
    # half-life 10 s: at t=200 bob's usage is 16 x 10 / ln 2 x 2^-10 ~ 0.23 (it ended 100 s
    # = 10 half-lives ago), alice's 4 x 10 / ln 2 x (1 - 2^-10) ~ 57.7: bob first
    decayed = run({"billing_weights": {"memory": 1.0}, "half_life": 10}, jobs)
    assert decayed.jobs["bob-now"].start == 200.0 and decayed.jobs["alice-now"].start == 250.0


def test_no_static_allocation_and_no_fair_share_preemption():
    sc = parse_scenario({"cluster": {"capacity": {"cpu": 1}}, "jobs": []})
    with pytest.raises(PolicyModeError, match="no static allocation"):
        make_policy("slurm-fairtree").allocate(sc)


@pytest.mark.parametrize("peers, path", [
    ({"billing_weights": {"gpu": 1}}, "peers.slurm-fairtree.billing_weights.gpu"),
    ({"billing_weights": {"cpu": -1}}, "peers.slurm-fairtree.billing_weights.cpu"),
    ({"half_life": -5}, "peers.slurm-fairtree.half_life"),
    ({"users": {"phys.alice": "chem"}}, "peers.slurm-fairtree.users.phys.alice"),
    ({"users": {"phys": "root"}}, "peers.slurm-fairtree.users.phys"),
    ({"decay": 1}, "peers.slurm-fairtree.decay"),
])
def test_bad_settings_are_named_by_path(peers, path):
    with pytest.raises(ScenarioError) as info:
        run(peers, [])
    assert path in info.value.paths
