"""Screenshots of every page of `lavaflow dashboard`, for docs/dashboard.md and the README.

Runs the cluster of the browser tests (tests/dashboard_cluster.py: the API double, a lavaflow
scheduler with the elastic action, the controllers, a fake kubelet) with the dashboard in front
of it, submits a few jobs (an elastic one that a second one shrinks, a gang too big to fit, small
ones), and has Debian's Chromium (Playwright) photograph each page; then the elastic job page of a
simulation (`--from`, examples/elastic-pytorch.yaml). PNGs go to docs/dashboard/.

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs/dashboard]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from playwright.sync_api import sync_playwright  # noqa: E402

from dashboard_cluster import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    DashboardCluster,
    cpu_job,
    elastic_job,
    free_port,
)

PAGES = [
    ("queues", "/queues"),
    ("queue", "/queues/vision"),
    ("jobs", "/jobs"),
    ("job-pending", "/jobs/default/too-big"),
    ("nodes", "/nodes"),
    ("elastic", "/elastic"),
    ("elastic-job", "/elastic/default/big"),
]


def shoot(browser, url: str, path: Path, height: int = 760) -> None:
    page = browser.new_page(viewport={"width": 1200, "height": height})
    page.goto(url)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(path), full_page=False)
    page.close()
    print(f"{path} ({path.stat().st_size // 1024} KiB)")


def simulation_server(result: Path, at: float | None) -> tuple[str, threading.Event]:
    """`lavaflow dashboard --from result` in a thread; its URL and the event that stops it."""
    from lavaflow.dashboard.app import Dashboard, make_app, server
    from lavaflow.dashboard.from_result import read_result, state_from_result

    state = state_from_result(read_result(result), result.name, at)
    port = free_port()
    srv = server(make_app(Dashboard(state)), "127.0.0.1", port)
    stop = threading.Event()

    async def run() -> None:
        task = asyncio.create_task(srv.serve())
        while not stop.is_set():
            await asyncio.sleep(0.05)
        srv.should_exit = True
        await task

    threading.Thread(target=lambda: asyncio.run(run()), daemon=True).start()
    while not srv.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}", stop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        with DashboardCluster() as dc:
            dc.create_workload(cpu_job("etl", "default", 3, "2", duration="300s"))
            time.sleep(3)
            dc.create([elastic_job("small", 2, 4, "300s", epochs=10)])
            time.sleep(3)
            for name, path in PAGES:
                shoot(browser, dc.url + path, args.out / f"{name}.png")
        result = args.out / "elastic-pytorch.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "lavaflow.cli",
                "simulate",
                str(ROOT / "examples/elastic-pytorch.yaml"),
                "--output",
                "json",
                "--cluster-state",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        result.write_text(proc.stdout)
        try:
            json.loads(proc.stdout)
            url, stop = simulation_server(result, None)
            shoot(browser, url + "/elastic/default/resnet50-elastic", args.out / "simulation-elastic-job.png")
            stop.set()
        finally:
            result.unlink()
        browser.close()


if __name__ == "__main__":
    main()
