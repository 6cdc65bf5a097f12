"""`lavaflow dashboard` in a real browser: Debian's Chromium driven by Playwright, against the API
double with a running lavaflow scheduler, controllers and fake kubelet (tests/dashboard_cluster.py).

A user follows a queue to its pending job and reads why it waits (the PodGroup condition's own
words), watches an elastic job's page while another job arrives and sees the resize appear
without reloading (server-sent events from the watches), and finds the forecast column.
"""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("starlette", reason="the dashboard extra is not installed (pip install 'lavaflow[dashboard]')")
pytest.importorskip("uvicorn", reason="the dashboard extra is not installed (pip install 'lavaflow[dashboard]')")

if not os.access("/usr/bin/chromium", os.X_OK):
    pytest.skip(
        "Debian's Chromium is not installed (/usr/bin/chromium): apt-get install chromium (.ci/run does)",
        allow_module_level=True,
    )

from playwright.sync_api import expect, sync_playwright  # noqa: E402

from dashboard_cluster import CHROMIUM, CHROMIUM_ARGS, DashboardCluster, elastic_job  # noqa: E402
from lavaflow.dashboard.forecast_column import forecast_entry  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with DashboardCluster() as dc:
        dc.create_workload()
        deadline = time.monotonic() + 20
        st = dc.live.state
        while time.monotonic() < deadline:
            big = st.elastic.get("default/big")
            waiting = st.jobs.get("default/too-big")
            if big and big.history and waiting is not None and waiting.conditions:
                break
            time.sleep(0.05)
        yield dc


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    pg.set_default_timeout(15000)
    yield pg
    pg.close()


def _podgroup_message(dc: DashboardCluster, job: str) -> str:
    """The Unschedulable condition's message on the job's PodGroup, as the API server holds it."""
    groups = dc.call(dc.cluster.objects("PodGroup", "default"))
    pg = next(g for g in groups if g["metadata"]["name"].startswith(job + "-"))
    cond = next(c for c in pg["status"]["conditions"] if c["type"] == "Unschedulable" and c["status"] == "True")
    return cond["message"]


def test_queue_to_job_to_why_pending(cluster, page):
    page.goto(cluster.url + "/queues")
    # the tree: vision under research under root, with its weight and its pending job
    row = page.locator("tr", has=page.get_by_role("link", name="vision", exact=True))
    expect(row).to_contain_text("default/too-big")
    page.get_by_role("link", name="vision", exact=True).click()
    expect(page).to_have_url(cluster.url + "/queues/vision")
    expect(page.locator("h1")).to_have_text("queue vision")
    page.get_by_role("link", name="default/too-big", exact=True).click()
    expect(page).to_have_url(cluster.url + "/jobs/default/too-big")
    expect(page.locator("h1")).to_have_text("job default/too-big")
    why = page.locator("#why").inner_text()
    assert why == _podgroup_message(cluster, "too-big")
    assert "2/2 tasks in gang unschedulable" in why
    # the job that runs says nothing of the kind
    page.goto(cluster.url + "/jobs/default/fits")
    expect(page.locator("h1")).to_have_text("job default/fits")
    assert page.locator("#why").count() == 0
    # ... and each of its pods has a page of its own, naming its node
    page.get_by_role("link", name="fits-worker-0", exact=True).click()
    expect(page).to_have_url(cluster.url + "/pods/default/fits-worker-0")
    expect(page.locator("table.kv")).to_contain_text("Running")
    node = cluster.live.state.pods["default/fits-worker-0"].node
    expect(page.get_by_role("link", name=node, exact=True)).to_have_count(1)


def test_an_elastic_resize_appears_live(cluster, page):
    page.goto(cluster.url + "/elastic/default/big")
    rows = page.locator("tr.resize")
    expect(rows.first).to_contain_text("started with 8 worker(s)")
    before = rows.count()
    page.evaluate("window.__notReloaded = true")
    cluster.create([elastic_job("small", 2, 4, "300s", epochs=10)])
    expect(rows).to_have_count(before + 1, timeout=20000)
    expect(rows.last).to_contain_text("resized 8 → 4 workers")
    expect(rows.last).to_contain_text("small")  # the reason names who the GPUs went to
    assert page.evaluate("window.__notReloaded === true"), "the page was reloaded instead of updated"
    expect(page.locator("#live")).to_contain_text("live")
    # the elastic list shows the job's changes too
    page.goto(cluster.url + "/elastic")
    expect(page.locator("tr", has=page.get_by_role("link", name="default/big"))).to_contain_text("resized 8 → 4")


def test_jobs_have_a_forecast_column(cluster, page):
    page.goto(cluster.url + "/jobs")
    expect(page.locator("th", has_text="forecast start")).to_have_count(1)
    cell = page.locator("tr", has=page.get_by_role("link", name="default/too-big")).locator("td.forecast")
    if forecast_entry() is None:
        expect(cell).to_have_text("—")
    else:  # (lavaflow.forecast is installed: its prediction replaces the dash once worked out)
        expect(cell).not_to_have_text("—", timeout=20000)
