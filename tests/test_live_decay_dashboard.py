"""The dashboard's queue table with decayed usage (``fairness: {half_life}``): one more
column, each queue's effective dominant share (allocation plus decayed usage) as
``/v1/status`` gives it, the decayed average allocation in its tooltip; without a
half-life the column stays hidden. serve's API runs in a thread on ``ManualExecutor``
(no Ray); Debian's Chromium, driven by Playwright, reads the page (skipped without it,
as in test_live_dashboard.py)."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from live_helpers import ADMIN, api_in_thread, job, make_config, wait_for
from test_live_dashboard import CHROMIUM, CHROMIUM_ARGS, pct

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (make test installs it)")


@pytest.mark.parametrize("half_life", [600.0, 0.0])
def test_the_queue_table_shows_the_effective_share_with_a_half_life(tmp_path, half_life):
    from playwright.sync_api import sync_playwright

    config = replace(make_config(), half_life=half_life)
    with api_in_thread(tmp_path / "fs.db", config) as (url, svc), sync_playwright() as playwright:
        headers = {"Authorization": f"Bearer {ADMIN}"}
        httpx.post(url + "/v1/jobs", json={"jobs": [job("d", "dev", 2, {"cpu": 1})]}, headers=headers,
                   timeout=10).raise_for_status()
        wait_for(lambda: svc.queues()["dev"]["running_tasks"] == 2, 20, "dev's tasks to start")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url + "/")
            page.fill("#token-input", ADMIN)
            page.click("#token-submit")
            page.wait_for_selector("body[data-ready='true']")
            row = page.locator("#queue-tree tr.queue[data-queue='dev']")
            row.wait_for()
            header = page.locator("#queue-tree th.decayed")
            if not half_life:
                assert header.is_hidden() and row.locator("td.effective").count() == 0
                assert row.get_attribute("data-effective") is None
                return
            assert header.is_visible()
            shown = float(row.get_attribute("data-effective"))
            assert shown > 0
            cell = row.locator("td.effective")
            assert cell.inner_text() == pct(shown)
            assert cell.get_attribute("title").startswith("decayed average allocation: cpu ")
            assert errors == []
        finally:
            browser.close()
