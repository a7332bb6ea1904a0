"""The compiled sorter core (``policies/machinery/_hdrf_kernel.pyx``) against its
pure-Python reference, decision by decision and float by float.

``machinery/compiled.py`` gives the H-DRF sorters the compiled view maintenance where it is
built and the pure-Python methods otherwise (or with ``FAIRSHARE_PURE_PYTHON=1``). Here
both cores run in one process: each against the per-decision reference sorter (as
``test_online_parity.py`` runs the default one), and the two in lockstep on a full
cluster, where every share, usage and running sum of the view decided with must be the
same float. Without the compiled core (no C compiler at install time) its cases skip
and the pure-Python ones still run.
"""

from __future__ import annotations

import hashlib
import inspect
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay import lockstep
from strategies import scenarios
from test_online_parity import CASES, run, steady_run, steady_scenario

from fairshare.engine import Scheduler
from fairshare.policies import make_policy
from fairshare.policies import hdrf_online
from fairshare.policies.machinery import compiled

#: the policies whose sorter is ``HDRFSorter``, the one the compiled core serves
HDRF_CASES = [(policy, options) for policy, options in CASES if policy in ("hdrf", "hdrf-naive", "capacity")]
CORES = ["compiled", "pure-python"]
needs_compiled = pytest.mark.skipif(not compiled.available(), reason=f"{compiled.describe()}")


@pytest.fixture(params=CORES)
def core(request, monkeypatch):
    """Sorters built in this test use the given core (``FAIRSHARE_PURE_PYTHON``)."""
    if request.param == "compiled":
        if not compiled.available():
            pytest.skip(compiled.describe())
        monkeypatch.delenv(compiled.PURE_PYTHON_ENV, raising=False)
    else:
        monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1")
    return request.param


def test_the_core_is_built_where_a_compiler_is():
    # `make test` sets FAIRSHARE_REQUIRE_COMPILED=1 where a C compiler and the Python
    # headers are present (compiled.compiler_present): there the install must have built it
    if os.environ.get("FAIRSHARE_REQUIRE_COMPILED") != "1":
        pytest.skip("FAIRSHARE_REQUIRE_COMPILED is not 1 (make test sets it where a compiler is)")
    assert compiled.available(), compiled.describe()


@pytest.mark.parametrize("method", sorted(compiled.PORTED_FROM))
def test_the_kernel_ports_the_methods_as_they_are(method):
    # the compiled core repeats these methods statement for statement: one changed (a
    # merge, a fix) must be changed in _hdrf_kernel.pyx too before the digest is renewed
    cls, name = method.split(".")
    source = inspect.getsource(getattr(getattr(hdrf_online, cls), name))
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    assert digest == compiled.PORTED_FROM[method], \
        f"{method} changed since _hdrf_kernel.pyx ported it: mirror the change there, then set its digest to {digest}"


def test_the_sorter_uses_the_core_the_environment_asks_for(monkeypatch):
    sc = steady_scenario(0)

    def replay_of_a_new_sorter():
        sched = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy("hdrf"))
        return sched.sorter, sched.sorter.views._replay

    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1")
    sorter, replay_view = replay_of_a_new_sorter()
    assert replay_view == sorter._propagate
    assert "FAIRSHARE_PURE_PYTHON is set" in compiled.describe()
    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "0")  # ("0" does not force it)
    sorter, replay_view = replay_of_a_new_sorter()
    assert (replay_view != sorter._propagate) == compiled.available()
    assert ("sorter core: compiled" in compiled.describe()) == compiled.available()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_jobs=8, counts=True), seed=st.integers(0, 100))
@pytest.mark.parametrize("policy, options", HDRF_CASES)
def test_each_core_matches_the_reference(core, policy, options, sc, seed):
    assert run(sc, sc.cluster.nodes, policy, options, seed=seed) == \
        run(sc, sc.cluster.nodes, policy, options, reference=True, seed=seed)


@pytest.mark.parametrize("seed", [0, 2, 4, 7])  # (seeds whose clusters saturate in several ways)
def test_each_core_matches_the_reference_on_a_full_cluster(core, seed):
    sc = steady_scenario(seed)
    want, _ = steady_run(sc, "hdrf", reference=True, seed=seed, plain=False)
    got, seen = steady_run(sc, "hdrf", reference=False, seed=seed, plain=True)
    assert got == want
    assert len(seen["sets"]) >= 3 and seen["batches"] >= 20, seen  # (batched catch-ups ran)


def view_floats(sorter) -> tuple:
    """The current view, caught up, as exact bits: every share, usage and running sum."""
    view = sorter.view
    # (a job node has no running sums: None)
    bits = lambda xs: None if xs is None else [x.hex() if isinstance(x, float) else x for x in xs]  # noqa: E731
    return (bits(view.share), [bits(u) for u in view.usage], [bits(s) for s in view.s1],
            [bits(s) for s in view.s2], bits(view.low), list(view.unblocked))


@needs_compiled
@pytest.mark.parametrize("policy, options", HDRF_CASES)
def test_compiled_and_pure_python_hold_the_same_floats_event_by_event(monkeypatch, policy, options):
    sc = steady_scenario(4)
    scheds = {}
    for name in CORES:
        monkeypatch.setenv(compiled.PURE_PYTHON_ENV, "1" if name == "pure-python" else "0")
        scheds[name] = Scheduler(sc.resources, sc.cluster.nodes, sc.queues, make_policy(policy, **options))
        for job in sc.jobs:
            scheds[name].submit(job, 0.0)
    fast, pure = scheds["compiled"], scheds["pure-python"]
    assert fast.sorter.views._replay != fast.sorter._propagate  # (each runs the core meant)
    assert pure.sorter.views._replay == pure.sorter._propagate
    launches = 0
    for k, got in lockstep(fast, pure, 300, seed=4):
        assert view_floats(fast.sorter) == view_floats(pure.sorter), k
        launches += len(got)
    assert launches > 300
