"""``Policy.configured(scenario)``: the hook through which a policy reads the scenario's
settings for it (the peer baselines: ``peers:``). Every other policy is returned as it is;
a baseline returns a new policy with the settings read, leaving the one it was asked on
with the peer's defaults (a policy object is reused across runs: the conformance checks
clone it, ``compare`` shares it)."""

from __future__ import annotations

import pytest

from fairshare.model.loader import parse_scenario
from fairshare.policies import REGISTRY, make_policy
from fairshare.policies.machinery.peers import PeerBaseline

PEERS = {"yarn-fair": {"default_policy": "drf"}, "kueue": {"fair_sharing": False},
         "slurm-fairtree": {"half_life": 60}}
SC = parse_scenario({"resources": ["cpu", "memory"], "cluster": {"capacity": {"cpu": 4, "memory": 8}},
                     "queues": [{"name": "a"}], "jobs": [], "peers": PEERS})


@pytest.mark.parametrize("name", [n for n in REGISTRY if not issubclass(REGISTRY[n], PeerBaseline)])
def test_other_policies_are_returned_as_they_are(name):
    policy = make_policy(name)
    assert policy.configured(SC) is policy


@pytest.mark.parametrize("name, field, configured_value", [
    ("yarn-fair", "default_policy", "drf"),
    ("kueue", "fair_sharing", False),
    ("slurm-fairtree", "half_life_s", 60.0),
])
def test_a_baseline_reads_its_section_into_a_new_policy(name, field, configured_value):
    policy = make_policy(name)
    default = getattr(policy.settings, field)
    configured = policy.configured(SC)
    assert configured is not policy and type(configured) is type(policy)
    assert getattr(configured.settings, field) == configured_value != default
    assert getattr(policy.settings, field) == default  # the original keeps the peer's defaults
    assert {n for n in REGISTRY if issubclass(REGISTRY[n], PeerBaseline)} == set(PEERS)
