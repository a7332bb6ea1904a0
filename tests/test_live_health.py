"""Node health without Ray: the prober's rules (``live.ray_health``) on a fake Ray with a
hand-moved clock, ``/healthz`` (ok, degraded, 503) and the counters and node health in
``/metrics``. The real thing (a raylet stopped with SIGSTOP on a local cluster) is
``test_live_ray.py::test_a_hung_node_is_taken_out_its_tasks_rerun_once_and_it_comes_back``."""

from __future__ import annotations

import math

import pytest
from fastapi.testclient import TestClient

from fairshare.live.api import create_app
from fairshare.live.metrics import registry_for, render
from fairshare.live.ray_health import FIRST_ANSWER_S, TICK_S, NodeProber
from fairshare.live.service import LiveService
from fairshare.live.store import Store
from live_helpers import ADMIN, ALICE, ManualExecutor, job, make_config
from test_live_metrics import samples


class FakeRay:
    """What the prober uses of Ray: ``remote``, ``wait``, ``get``, ``cancel``. A probe is
    answered when the test says so (``answer``)."""

    def __init__(self):
        self.out: dict[object, str] = {}      # probe ref -> node id, unanswered
        self.results: dict[object, bool] = {}  # answered ref -> ok
        self.sent: list[str] = []             # node id of every probe sent
        self.cancelled: list[object] = []

    def remote(self, **_options):
        fake = self

        class Remote:
            def __init__(self, node_id=None):
                self.node_id = node_id

            def options(self, scheduling_strategy, runtime_env):
                assert runtime_env  # the probes' own worker pool
                return Remote(scheduling_strategy)

            def remote(self):
                ref = object()
                fake.out[ref] = self.node_id
                fake.sent.append(self.node_id)
                return ref

        return lambda _fn: Remote()

    def answer(self, node_id: str, ok: bool = True) -> None:
        for ref, nid in list(self.out.items()):
            if nid == node_id:
                del self.out[ref]
                self.results[ref] = ok

    def wait(self, refs, num_returns, timeout, fetch_local=True):
        assert timeout == 0  # never blocks the scheduling loop
        return [r for r in refs if r in self.results], [r for r in refs if r not in self.results]

    def get(self, ref, timeout=None):
        if not self.results[ref]:
            raise RuntimeError("WorkerCrashedError: the probe's worker died")
        return 4242

    def cancel(self, ref, force=False):
        self.cancelled.append(ref)
        self.out.pop(ref, None)


class Prober(NodeProber):
    def _pin(self, node_id: str):
        return node_id  # (the fake reads the node id from the strategy)


@pytest.fixture
def fake():
    return FakeRay()


def make(fake, timeout_s=4.0, interval_s=0.5):
    clock = [0.0]
    prober = Prober(fake, timeout_s=timeout_s, interval_s=interval_s, clock=lambda: clock[0])
    return prober, clock


def states(prober) -> dict[str, str]:
    return {n["name"]: n["state"] for n in prober.report()}


#: the fake clock's step between ticks: at least ``TICK_S`` (each tick does its work) and
#: a binary fraction, so that sums of steps are exact and the expected instants are too
STEP = 0.125
assert STEP >= TICK_S


def run(prober, clock, until: float, answer=lambda t: None) -> list[float]:
    """Tick every STEP up to ``until``, calling ``answer(t)`` before each tick; returns
    the instants of the ticks that changed a node's state."""
    changes = []
    while clock[0] < until:
        clock[0] += STEP
        answer(clock[0])
        if prober.tick():
            changes.append(clock[0])
    return changes


def test_a_node_that_answers_stays_alive_and_is_probed_at_the_interval(fake):
    prober, clock = make(fake)
    assert prober.update({"a": "A"}) == set()
    assert fake.sent == ["A"]
    run(prober, clock, 20.0, answer=lambda t: fake.answer("A"))
    assert states(prober) == {"a": "alive"}
    # each answer is seen one tick after its probe, the next probe goes 0.5 s after that:
    # one probe every 0.625 s, at 0, 0.625, ..., 20
    assert len(fake.sent) == 1 + int(20.0 / (STEP + 0.5))
    assert prober.declared_unhealthy == 0


def test_a_node_that_stops_answering_is_unhealthy_after_exactly_the_timeout(fake):
    prober, clock = make(fake, timeout_s=4.0)
    prober.update({"a": "A", "b": "B"})
    run(prober, clock, 1.0, answer=lambda t: (fake.answer("A"), fake.answer("B")))
    # b freezes: probes at 0 and 0.625 were answered, the one at 1.25 is not
    changes = run(prober, clock, 10.0, answer=lambda t: fake.answer("A"))
    first_unanswered = 1.25
    assert changes == [first_unanswered + 4.0]
    assert states(prober) == {"a": "alive", "b": "unhealthy"}
    assert prober.update({"a": "A", "b": "B"}) == {"b"}  # Ray still lists it alive: held out
    entry = next(n for n in prober.report() if n["name"] == "b")
    assert entry["waiting_s"] == pytest.approx(clock[0] - first_unanswered)
    assert prober.declared_unhealthy == 1


def test_a_node_comes_back_when_it_answers_and_a_stale_probe_is_replaced(fake):
    prober, clock = make(fake, timeout_s=2.0)
    prober.update({"b": "B"})
    run(prober, clock, 0.3, answer=lambda t: fake.answer("B"))
    run(prober, clock, 3.0)
    assert states(prober) == {"b": "unhealthy"}
    sent, cancelled = len(fake.sent), len(fake.cancelled)
    run(prober, clock, 6.0)  # still silent: the probe out is replaced every timeout
    assert len(fake.sent) > sent and len(fake.cancelled) > cancelled
    fake.answer("B")
    assert run(prober, clock, clock[0] + STEP) == [clock[0]]
    assert states(prober) == {"b": "alive"} and prober.recovered == 1
    assert prober.update({"b": "B"}) == set()


def test_a_failed_probe_is_no_answer(fake):
    prober, clock = make(fake, timeout_s=3.0)
    prober.update({"a": "A"})
    run(prober, clock, 0.5, answer=lambda t: fake.answer("A"))
    start = clock[0]
    # from now on every probe fails at once: each is sent again, the wait goes on
    changes = run(prober, clock, start + 5.0, answer=lambda t: fake.answer("A", ok=False))
    # (the wait starts with the first probe after the last answer, at most 0.5 s + a step
    # after ``start``)
    assert len(changes) == 1 and 3.0 <= changes[0] - start <= 3.0 + 0.5 + STEP
    assert states(prober) == {"a": "unhealthy"}


def test_a_new_node_gets_longer_for_its_first_answer(fake):
    prober, clock = make(fake, timeout_s=2.0)
    prober.update({"a": "A"})
    assert run(prober, clock, FIRST_ANSWER_S - 1.0) == []  # its worker may still be starting
    assert states(prober) == {"a": "alive"}
    assert run(prober, clock, FIRST_ANSWER_S + 1.0) == [FIRST_ANSWER_S]


def test_answers_are_read_before_deadlines_are_judged(fake):
    """A scheduling loop that did not look for a long while: the answer that came
    meanwhile counts, and no probe was waiting while none was out."""
    prober, clock = make(fake, timeout_s=2.0)
    prober.update({"a": "A"})
    fake.answer("A")
    clock[0] = 60.0
    assert prober.tick() is False and states(prober) == {"a": "alive"}
    clock[0] = 120.0
    fake.answer("A")
    assert prober.tick() is False and states(prober) == {"a": "alive"}


def test_nodes_ray_lists_dead_and_nodes_that_rejoin(fake):
    prober, clock = make(fake)
    prober.update({"a": "A", "b": "B"})
    clock[0] = 1.0
    prober.update({"a": "A"})
    assert states(prober) == {"a": "alive", "b": "dead"}
    assert fake.cancelled  # b's probe out was dropped
    clock[0] = 2.0
    prober.update({"a": "A", "b": "B2"})  # restarted: a new Ray node id, a new node
    assert states(prober) == {"a": "alive", "b": "alive"}
    assert fake.sent[-1] == "B2"


def test_health_says_ray_is_unreachable_when_nodes_are_not_listed_for_the_timeout(fake):
    prober, clock = make(fake, timeout_s=4.0)
    assert prober.health()["reachable"] is False  # never listed
    prober.update({"a": "A"})
    prober.listing_failed(ConnectionError("GCS\nunavailable"))  # one blip
    clock[0] = 4.0
    doc = prober.health()
    assert doc["reachable"] is True and doc["error"] == "ConnectionError: GCS"
    assert doc["nodes"] == {"alive": 1, "unhealthy": 0, "dead": 0} and doc["node_timeout_s"] == 4.0
    clock[0] = 4.5
    assert prober.health()["reachable"] is False and prober.health()["last_contact_s"] == 4.5
    prober.update({"a": "A"})
    assert prober.health()["reachable"] is True and prober.health()["error"] is None


@pytest.mark.parametrize("field, value", [("timeout_s", 0), ("timeout_s", math.nan), ("timeout_s", math.inf),
                                          ("interval_s", -1)])
def test_bad_settings_are_refused(fake, field, value):
    with pytest.raises(ValueError, match="node timeout" if field == "timeout_s" else "probe interval"):
        Prober(fake, **{field: value})


# --------------------------------------------------------------------- /healthz and /metrics
class HealthExecutor(ManualExecutor):
    def __init__(self, nodes, doc):
        super().__init__(nodes)
        self.doc = doc

    def health(self):
        return self.doc


def ray_doc(reachable=True, unhealthy=(), dead=(), alive=("cpu-node",)):
    nodes = ([{"name": n, "state": "alive", "last_answer_s": 0.2, "waiting_s": None} for n in alive]
             + [{"name": n, "state": "unhealthy", "last_answer_s": 12.0, "waiting_s": 11.5} for n in unhealthy]
             + [{"name": n, "state": "dead", "last_answer_s": None, "waiting_s": None} for n in dead])
    return {"reachable": reachable, "last_contact_s": 0.3 if reachable else 15.0,
            "error": None if reachable else "RpcError: GCS unavailable", "node_timeout_s": 10.0,
            "nodes": {"alive": len(alive), "unhealthy": len(unhealthy), "dead": len(dead)}, "node_states": nodes}


def client_for(tmp_path, doc):
    config = make_config()
    service = LiveService(config, Store(tmp_path / "fs.db"), HealthExecutor(config.nodes, doc), policy="hdrf")
    return service, TestClient(create_app(service), raise_server_exceptions=False)


@pytest.mark.parametrize("doc, code, status, words", [
    (ray_doc(), 200, "ok", "policy hdrf"),
    (ray_doc(unhealthy=("mic-node",)), 200, "degraded", "unhealthy node(s): mic-node"),
    (ray_doc(dead=("gpu-node",)), 200, "degraded", "dead node(s): gpu-node"),
    (ray_doc(reachable=False), 503, "unavailable", "Ray unreachable: its nodes were last listed 15.0 s ago "
                                                   "(RpcError: GCS unavailable)"),
])
def test_healthz_reports_rays_state(tmp_path, doc, code, status, words):
    _, client = client_for(tmp_path, doc)
    response = client.get("/healthz")  # no token
    assert response.status_code == code
    body = response.json()
    assert body["status"] == status and words in body["detail"]
    assert body["ray"] == doc


def test_healthz_without_ray_and_with_a_stopped_loop(tmp_path):
    config = make_config()
    service = LiveService(config, Store(tmp_path / "fs.db"), ManualExecutor(config.nodes), policy="hdrf")
    client = TestClient(create_app(service))
    assert client.get("/healthz").json() == {"status": "ok", "detail": "policy hdrf", "ray": None}
    service.loop_error = RuntimeError("boom")
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable" and "scheduling loop stopped" in response.json()["detail"]


def test_metrics_count_attempts_requeues_and_starts_and_show_node_health(tmp_path):
    doc = ray_doc(unhealthy=("mic-node",), dead=("gpu-node",))
    service, client = client_for(tmp_path, doc)
    service.store.begin_incarnation()  # a previous service on this database
    service.start()
    service.stop()  # (the test drives the passes itself)
    alice = service.auth.authenticate(ALICE)
    service.submit(alice, {"jobs": [job("a", "ads", 10, {"cpu": 1})]})
    service.step()  # 8 CPUs: 8 attempts start
    executor = service.executor
    on_mic = sorted(t for t, la in executor.running.items() if la.node == "mic-node")
    executor.lose("mic-node")
    first = min(executor.running)
    executor.finish(first, ok=False)  # attempts left: re-queued
    service.step()  # the lost and the failed tasks start again
    page = client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text
    parsed = samples(page)
    # 8 started; mic-node's 2 lost and 1 failed leave 5 running on the 6 CPUs left: 1 more
    assert parsed[("fairshare_task_attempts_total", ())] == len(executor.started) == 9
    assert parsed[("fairshare_tasks_requeued_total", (("reason", "node_lost"),))] == len(on_mic) == 2
    assert parsed[("fairshare_tasks_requeued_total", (("reason", "failed"),))] == 1
    assert parsed[("fairshare_tasks_requeued_total", (("reason", "infrastructure"),))] == 0
    assert parsed[("fairshare_service_starts_total", ())] == 2
    assert parsed[("fairshare_ray_reachable", ())] == 1
    health = {(labels[0][1], labels[1][1]): v for (name, labels), v in parsed.items()
              if name == "fairshare_node_health"}
    assert health == {("cpu-node", "alive"): 1, ("cpu-node", "unhealthy"): 0, ("cpu-node", "dead"): 0,
                      ("mic-node", "alive"): 0, ("mic-node", "unhealthy"): 1, ("mic-node", "dead"): 0,
                      ("gpu-node", "alive"): 0, ("gpu-node", "unhealthy"): 0, ("gpu-node", "dead"): 1}
    assert parsed[("fairshare_node_last_answer_seconds", (("node", "mic-node"),))] == 12.0
    assert math.isnan(parsed[("fairshare_node_last_answer_seconds", (("node", "gpu-node"),))])


def test_the_ray_families_are_left_out_without_ray(tmp_path):
    config = make_config()
    service = LiveService(config, Store(tmp_path / "fs.db"), ManualExecutor(config.nodes), policy="hdrf")
    page = render(registry_for(service))  # health() has no "ray" part: the executor is not Ray
    assert "fairshare_task_attempts_total" in page
    assert "fairshare_ray_reachable" not in page and "fairshare_node_health" not in page


def test_service_starts_are_counted_across_reopenings(tmp_path):
    # the start count is the incarnation (the fencing token), kept in the database
    service_ids = set()
    for expected in (1, 2, 3):
        store = Store(tmp_path / "fs.db")
        service_id, incarnation = store.begin_incarnation()
        assert incarnation == expected
        service_ids.add(service_id)
        store.close()
    assert len(service_ids) == 1  # one service id per database: it names the node agents
