"""The dashboard and /metrics of a real ``fairshare serve``, in a real browser.

One ``fairshare serve`` process for the module, on a real local Ray cluster (one raylet
per configured node, started by serve itself), with the three-node config of
``live_helpers.config_doc``. Two jobs whose tasks sleep hold a known state while Debian's
Chromium, driven by Playwright, reads the page. No browser is downloaded: the test uses
``/usr/bin/chromium`` (``make test`` installs it) and skips, saying so, without it.

The state, derived by hand (8 CPUs: cpu-node 4, mic-node 2, gpu-node 2; memory 8 each):

- alice submits ``train`` to ads.prod, 6 tasks of {cpu 1, memory 1}; alone in the
  cluster, all 6 start (first-fit: 4 on cpu-node, 2 on mic-node);
- then bob submits ``etl`` to dev, 5 tasks of {cpu 1, memory 2}: the 2 CPUs left
  (gpu-node) take 2 tasks, 3 wait.

The service never preempts, so that state holds while the tasks sleep.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from live_helpers import ADMIN, ALICE, BOB, config_doc, repo_root, serve_env, start_serve_on_a_free_port, stop_serve

CHROMIUM = Path("/usr/bin/chromium")
# The flags the machine's notes prescribe for headless Chromium as root on a closed
# network (without the background-networking ones it keeps trying to reach Google).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOT = repo_root() / "out" / "dashboard.png"
TASK_SLEEP_S = 300  # far longer than the module needs; the tasks are cancelled at the end
SERVE_START_TIMEOUT_S = 120
STATE_TIMEOUT_S = 60

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason=f"{CHROMIUM} is missing (make test installs Debian's chromium with apt-get; "
                              "that was impossible here)"),
]

# ---------------------------------------------------------------- the expected state

TRAIN = {"name": "train", "queue": "ads.prod",
         "tasks": [{"demand": {"cpu": 1, "memory": 1}, "count": 6, "command": ["sleep", str(TASK_SLEEP_S)]}]}
ETL = {"name": "etl", "queue": "dev",
       "tasks": [{"demand": {"cpu": 1, "memory": 2}, "count": 5, "command": ["sleep", str(TASK_SLEEP_S)]}]}

CPUS, MEMORY = 4 + 2 + 2, 8 + 8 + 8  # 8 CPUs, 24 memory

# path: (depth in the tree, current dominant share, fair dominant share, running, pending)
EXPECTED_QUEUES = {
    # alice's 6 tasks hold 6 of 8 CPUs (memory 6/24 is less): 6/8 = 0.75. Fair: ads and dev
    # weigh 1:1 and both are CPU-dominant with demand left at 4 CPUs each, so 4/8 = 0.5.
    "ads": (0, 6 / CPUS, 0.5, 6, 0),
    "ads.prod": (1, 6 / CPUS, 0.5, 6, 0),
    "ads.test": (1, 0.0, 0.0, 0, 0),  # no jobs
    # bob's 2 running tasks: max(2 CPUs / 8, 4 memory / 24) = 0.25; 5 - 2 = 3 wait.
    "dev": (0, 2 / CPUS, 0.5, 2, 3),
}
EXPECTED_UTILIZATION = {
    "cpu": (6 * 1 + 2 * 1) / CPUS,      # 8/8 = 1.0
    "memory": (6 * 1 + 2 * 2) / MEMORY,  # 10/24 = 0.41666... -> "41.7%"
    "mic": 0.0,
    "gpu": 0.0,
}
# first-fit walks the nodes in config order: train fills cpu-node (4) then mic-node (2)
EXPECTED_TRAIN_NODES = ["cpu-node"] * 4 + ["mic-node"] * 2


def pct(fraction: float) -> str:
    """The page's percentage format: one decimal (none of the values above is a tie)."""
    return f"{fraction * 100:.1f}%"


# ---------------------------------------------------------------- the server


@dataclass
class Serve:
    url: str
    process: subprocess.Popen
    log_path: Path

    def get(self, path: str, token: str | None = ADMIN) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(self.url + path, headers=headers, timeout=30)

    def post(self, path: str, body: dict | None, token: str) -> httpx.Response:
        return httpx.post(self.url + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("serve")
    config = workdir / "cluster.yaml"
    # the node sizes the expected numbers below are derived from, spelled out
    config.write_text(yaml.safe_dump(config_doc(cpu_node=4, mic_node=2, gpu_node=2), sort_keys=False))
    # (this tree's sources: the page under test is this tree's static files)
    process, port = start_serve_on_a_free_port(workdir, "serve.log", serve_env(), timeout_s=SERVE_START_TIMEOUT_S)
    server = Serve(f"http://127.0.0.1:{port}", process, workdir / "serve.log")
    try:
        yield server
    finally:
        _stop(server)
        stop_serve(server.process)  # (anything of its session still around)


def _stop(server: Serve) -> None:
    # Cancel first so the Ray workers end their `sleep` children, then a clean SIGTERM
    # (uvicorn stops, the service stops its loop and its local Ray cluster).
    if server.process.poll() is None:
        try:
            for job in server.get("/v1/jobs").json():
                server.post(f"/v1/jobs/{job['id']}/cancel", None, ADMIN)
        except (httpx.HTTPError, ValueError, TypeError):
            pass
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=30)


def _wait_for(server: Serve, what: str, predicate) -> dict:
    deadline = time.monotonic() + STATE_TIMEOUT_S
    status: dict = {}
    while time.monotonic() < deadline:
        status = server.get("/v1/status").json()
        if predicate(status):
            return status
        time.sleep(0.25)
    pytest.fail(f"timed out waiting for {what}; last status:\n{json.dumps(status, indent=1)}\n{server.log()}")


def _matches_expected(status: dict) -> bool:
    queues = status.get("queues", {})
    return all(
        path in queues
        and queues[path]["current_dominant_share"] == pytest.approx(current)
        and queues[path]["fair_dominant_share"] == pytest.approx(fair)
        and (queues[path]["running_tasks"], queues[path]["pending_tasks"]) == (running, pending)
        for path, (_, current, fair, running, pending) in EXPECTED_QUEUES.items()
    )


@pytest.fixture(scope="module")
def loaded(serve) -> dict:
    """Submit train, let it start alone, then etl; return the settled status."""
    response = serve.post("/v1/jobs", {"jobs": [TRAIN]}, ALICE)
    assert response.status_code == 201, response.text
    _wait_for(serve, "train's 6 tasks to run", lambda s: s.get("running_tasks") == 6)
    response = serve.post("/v1/jobs", {"jobs": [ETL]}, BOB)
    assert response.status_code == 201, response.text
    # the fair shares are refreshed every 0.5 s and the history sampled as often: wait
    # for both, and for two samples so the chart has a line
    status = _wait_for(serve, "the expected shares", _matches_expected)
    _wait_for(serve, "two history samples", lambda s: len(serve.get("/v1/history").json()) >= 2)
    return status


# ---------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.errors = []  # uncaught exceptions in the page's script
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    yield page
    context.close()


def sign_in(page, serve: Serve, token: str) -> None:
    page.goto(serve.url + "/")
    page.fill("#token-input", token)
    page.click("#token-submit")


def test_the_page_and_its_files_are_served_with_a_strict_policy(serve):
    for path, media in [("/", "text/html"), ("/dashboard/dashboard.js", "text/javascript"),
                        ("/dashboard/dashboard.css", "text/css")]:
        response = serve.get(path, token=None)  # no token: the files hold no data
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith(media), path
        assert "script-src 'self'" in response.headers["content-security-policy"], path
    # no outside resource: the machine (and a user's cluster) may have no internet
    assert "http" not in serve.get("/", token=None).text.replace("http://www.w3.org", "")
    # HEAD as GET, without the body, through the real server (uvicorn) too
    head = httpx.head(serve.url + "/", timeout=30)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == str(len(serve.get("/", token=None).content))


def test_a_wrong_token_shows_the_servers_reason(serve, page):
    sign_in(page, serve, "not-a-valid-token")
    error = page.locator("#error")
    error.wait_for(state="visible")
    assert "HTTP 401" in error.inner_text()
    assert "unknown token" in error.inner_text()
    assert page.locator("#token-form").is_visible()
    assert not page.locator("#dashboard").is_visible()
    assert page.evaluate("sessionStorage.getItem('fairshare.token')") is None  # a refused token is forgotten
    assert page.errors == []


def test_dashboard_shows_the_services_numbers(serve, loaded, page):
    sign_in(page, serve, ADMIN)
    page.wait_for_selector("body[data-ready='true']")
    page.locator("#dashboard").wait_for(state="visible")
    # the service's own view right after the page's: the state is settled, so they agree
    status = serve.get("/v1/status").json()

    # --- the queue tree: parents before children, current vs fair from the service
    rows = page.locator("#queue-tree tbody tr.queue")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.queue)") == ["ads", "ads.prod", "ads.test", "dev"]
    for path, (depth, current, fair, running, pending) in EXPECTED_QUEUES.items():
        served = status["queues"][path]
        assert (served["current_dominant_share"], served["fair_dominant_share"]) == pytest.approx((current, fair))
        row = page.locator(f"#queue-tree tr.queue[data-queue='{path}']")
        assert row.get_attribute("data-depth") == str(depth)
        assert float(row.get_attribute("data-current")) == served["current_dominant_share"]
        assert float(row.get_attribute("data-fair")) == served["fair_dominant_share"]
        assert row.locator("td.current").inner_text() == pct(current)
        assert row.locator("td.fair").inner_text() == pct(fair)
        assert row.locator("td.running").inner_text() == str(running)
        assert row.locator("td.pending").inner_text() == str(pending)
        # the blue bar's width is the current share of the bar's width (both measured in
        # one script call: the page redraws every 2 s, and a 0-wide fill has no box)
        bar_px, fill_px = row.evaluate("r => ['.share-bar', '.share-bar .current']"
                                       ".map(s => r.querySelector(s).getBoundingClientRect().width)")
        assert fill_px == pytest.approx(bar_px * current, abs=1.5)

    # --- utilization over time: one line per resource, ending at the current value
    assert page.locator("#summary-running").inner_text() == "8"  # 6 train + 2 etl
    assert page.locator("#summary-pending").inner_text() == "3"
    for resource, fraction in EXPECTED_UTILIZATION.items():
        assert status["utilization"][resource] == pytest.approx(fraction)
        line = page.locator(f"#utilization-chart polyline[data-series='{resource}']")
        assert int(line.get_attribute("data-samples")) >= 2
        assert float(line.get_attribute("data-last")) == pytest.approx(fraction)
        assert len(line.get_attribute("points").split()) >= 2
        legend = page.locator(f"#utilization-legend li[data-series='{resource}']").inner_text()
        assert legend == f"{resource} {pct(fraction)} now"

    # --- the jobs: a row each, with the service's numbers; train's tasks on click
    jobs = {job["name"]: job for job in serve.get("/v1/jobs").json()}
    for name, queue, tenant, total in [("train", "ads.prod", "alice", 6), ("etl", "dev", "bob", 5)]:
        row = page.locator(f"#jobs tr.job[data-job='{jobs[name]['id']}']")
        cells = [row.locator(f"td.{c}").inner_text() for c in ("name", "queue", "tenant", "state", "progress")]
        assert cells == [name, queue, tenant, "running", f"0 / {total}"]
    train_id = jobs["train"]["id"]
    page.click(f"#jobs tr.job[data-job='{train_id}']")
    tasks = page.locator(f"#jobs tr.tasks[data-job-tasks='{train_id}'] tr.task")
    tasks.first.wait_for()
    assert tasks.count() == 6
    assert tasks.locator("td.state").all_inner_texts() == ["running"] * 6
    assert tasks.locator("td.node").all_inner_texts() == EXPECTED_TRAIN_NODES
    assert page.locator(f"#jobs [data-job-why='{train_id}']").count() == 0  # every task started: no panel

    # --- why etl's 3 tasks wait: every CPU is taken, so no node fits its next task and not
    # even the free capacity in total would (cpu 0 free of 8); the panel says so
    etl_id = jobs["etl"]["id"]
    page.click(f"#jobs tr.job[data-job='{etl_id}']")
    reason = page.locator(f"#jobs [data-job-why='{etl_id}'] li.reason").first
    reason.wait_for()
    assert reason.get_attribute("data-kind") == "no_node_fits"
    assert reason.inner_text().startswith("no node fits its next task (1 cpu, 2 memory) among 3 eligible node(s)")
    assert "fragmentation" not in reason.inner_text()
    assert serve.get(f"/v1/jobs/{etl_id}/explain", token=BOB).json()["reasons"][0]["kind"] == "no_node_fits"

    # --- the nodes: first-fit filled every CPU
    # (memory: train's 1 per task, etl's 2 per task)
    for node, usage in [("cpu-node", "cpu 4/4, memory 4/8"), ("mic-node", "cpu 2/2, memory 2/8, mic 0/1"),
                        ("gpu-node", "cpu 2/2, memory 4/8, gpu 0/1")]:
        cells = page.locator(f"#nodes tr[data-node='{node}'] td").all_inner_texts()
        assert cells == [node, "up", usage]

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.errors == []


def test_a_failing_server_keeps_the_last_picture_and_says_so(serve, loaded, page):
    sign_in(page, serve, ADMIN)
    page.wait_for_selector("body[data-ready='true']")
    # From now on the browser gets a 503 for /v1/status (the server itself is untouched):
    # the page must say so, keep what it showed, and keep polling (not ask for a token).
    refusal = {"error": {"field": "", "reason": "scheduler restarting"},
               "errors": [{"field": "", "reason": "scheduler restarting"}]}
    page.route("**/v1/status", lambda route: route.fulfill(status=503, content_type="application/json",
                                                           body=json.dumps(refusal)))
    error = page.locator("#error")
    error.wait_for(state="visible")
    assert error.inner_text() == "Could not refresh: GET /v1/status: HTTP 503: scheduler restarting"
    assert page.locator("#dashboard").is_visible()
    assert page.locator("#queue-tree tr.queue[data-queue='dev'] td.current").inner_text() == pct(2 / CPUS)
    assert not page.locator("#token-form").is_visible()
    page.unroute("**/v1/status")
    error.wait_for(state="hidden")  # the next poll succeeds and clears the banner
    assert page.errors == []


def test_the_page_asks_for_one_page_of_the_newest_jobs(serve, loaded, page):
    # a poll every 2 s must not fetch every job the service has seen: one page, the newest
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/v1/jobs" in request.url else None)
    sign_in(page, serve, ADMIN)
    page.wait_for_selector("body[data-ready='true']")
    assert asked and all(url.endswith("/v1/jobs?order=newest&limit=200") for url in asked), asked
    assert page.locator("#jobs tr.job td.name").all_inner_texts() == ["train", "etl"]  # oldest first, as before
    assert not page.locator("#jobs-more").is_visible()  # 2 jobs: all of them are shown
    # a full page (200 jobs, newest first as the API sends it): shown oldest first, with a note
    full = [{"id": 1000 - k, "name": f"j{1000 - k}", "queue": "dev", "tenant": "bob", "state": "pending",
             "tasks_done": 0, "tasks_total": 1} for k in range(200)]
    page.route("**/v1/jobs?*", lambda route: route.fulfill(status=200, content_type="application/json",
                                                           body=json.dumps(full)))
    page.locator("#jobs-more").wait_for(state="visible")
    ids = page.locator("#jobs tr.job td.id").all_inner_texts()
    assert ids == [str(i) for i in range(801, 1001)]
    assert page.errors == []


def test_a_tenant_sees_only_its_own_jobs(serve, loaded, page):
    sign_in(page, serve, BOB)
    page.wait_for_selector("body[data-ready='true']")
    names = page.locator("#jobs tr.job td.name").all_inner_texts()
    assert names == ["etl"]
    # the queue tree is everyone's (the API's rule): all four queues
    assert page.locator("#queue-tree tr.queue").count() == len(EXPECTED_QUEUES)
    # "Change token" forgets it and asks again
    page.click("#sign-out")
    page.locator("#token-form").wait_for(state="visible")
    assert not page.locator("#dashboard").is_visible()
    assert page.evaluate("sessionStorage.getItem('fairshare.token')") is None
    assert page.errors == []


def test_metrics_of_the_running_service(serve, loaded):
    refused = serve.get("/metrics", token=None)
    assert refused.status_code == 401
    assert refused.json()["error"]["field"] == "Authorization"

    response = serve.get("/metrics", token=ALICE)  # any tenant's token will do
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(response.text) for s in family.samples}
    status = serve.get("/v1/status").json()
    # 8 decisions: one per task started (6 train + 2 etl); the histogram counts each
    assert samples[("fairshare_decisions_total", ())] == 8 == status["decisions_total"]
    assert samples[("fairshare_decision_latency_seconds_count", ())] == 8
    assert samples[("fairshare_decision_latency_seconds_bucket", (("le", "+Inf"),))] == 8
    assert samples[("fairshare_decision_latency_seconds_sum", ())] > 0
    assert samples[("fairshare_running_tasks", ())] == 8
    for path, (_, current, fair, running, pending) in EXPECTED_QUEUES.items():
        assert samples[("fairshare_queue_dominant_share_ratio", (("kind", "current"), ("queue", path)))] == \
            pytest.approx(current)
        assert samples[("fairshare_queue_dominant_share_ratio", (("kind", "fair"), ("queue", path)))] == \
            pytest.approx(fair)
        assert samples[("fairshare_queue_pending_tasks", (("queue", path),))] == pending
        assert samples[("fairshare_queue_running_tasks", (("queue", path),))] == running
    for resource, fraction in EXPECTED_UTILIZATION.items():
        assert samples[("fairshare_utilization_ratio", (("resource", resource),))] == pytest.approx(fraction)
    assert samples[("fairshare_capacity", (("resource", "cpu"),))] == CPUS
    for node in ("cpu-node", "mic-node", "gpu-node"):
        assert samples[("fairshare_node_up", (("node", node),))] == 1
    # etl is the one job with tasks waiting, blocked by no_node_fits
    assert {kind: samples[("fairshare_pending_jobs", (("reason", kind),))]
            for kind in ("priority_held", "queue_limit", "gang_incomplete", "no_node_fits")} == \
        {"priority_held": 0, "queue_limit": 0, "gang_incomplete": 0, "no_node_fits": 1}

