"""The console's workers page in a real headless browser (Debian's chromium driven by
Selenium): each live worker's host, pid, queues, tools, last heartbeat and the jobs it
runs, from the records the workers beat into Redis (`GET /v1/workers`)."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from tests.serve.test_serve_console import Page, submit
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration


def test_the_workers_page_shows_each_worker_and_its_jobs_in_flight(
    server: ServeProcess, worker: WorkerProcess, browser: object, tmp_path: Path
) -> None:
    page = Page(browser, server.url)
    page.open("#/workers")
    row = f'#workers tr[data-worker-id^="{socket.gethostname()}-{worker.proc.pid}-"]'
    page.text(f"{row} .host", socket.gethostname())
    page.text(f"{row} .pid", str(worker.proc.pid))
    page.text(f"{row} .queues", "model")
    page.text(f"{row} .tools", "hold_until")
    page.text(f"{row} .in-flight", "0 / 16")
    assert page.read_text(f"{row} .seen").endswith("s ago")

    # A call held in flight: the worker's next beat counts it; once released, none.
    started, gate = tmp_path / "started", tmp_path / "gate"
    held = scripted(
        {
            "tool_calls": [
                {
                    "id": "call-hold",
                    "name": "hold_until",
                    "input": {"started": str(started), "gate": str(gate)},
                }
            ]
        },
        {"text": "released"},
        tools=["hold_until"],
        id="held",
    )
    submit(server, held)
    try:
        page.until(lambda _: started.exists())
        page.text(f"{row} .in-flight", "1 / 16")
    finally:
        gate.touch()
    page.text(f"{row} .in-flight", "0 / 16")

    listed = httpx.get(f"{server.url}/v1/workers", timeout=30).json()
    assert [w["pid"] for w in listed] == [worker.proc.pid]
    assert "add" in listed[0]["tools"]


def test_the_workers_page_charts_queue_depths_over_time(
    redis_url: str, worker: WorkerProcess, browser: object, tmp_path: Path
) -> None:
    server = ServeProcess(redis_url, env={"AGENTQ_SERVE_DEPTH_SAMPLE_S": "0.5"})
    started, gate = tmp_path / "started", tmp_path / "gate"
    try:
        page = Page(browser, server.url)
        page.driver.set_window_size(390, 844)  # a phone's width
        page.open("#/workers")
        tools = '#depths li[data-queue="tools"]'
        page.text(f"{tools} .now", "0")
        held = scripted(
            {
                "tool_calls": [
                    {"name": "hold_until", "input": {"started": str(started), "gate": str(gate)}}
                ]
            },
            {"text": "released"},
            tools=["hold_until"],
            id="held",
        )
        submit(server, held)
        page.until(lambda _: started.exists())
        # The call runs: the tools queue's depth is 1 in a later sample, then 0 again.
        page.text(f"{tools} .now", "1")
        gate.touch()
        page.text(f"{tools} .now", "0")
        page.text(tools, "(peak 1)")
        line = page.find('#depths polyline[data-queue="tools"]')
        assert len(str(line.get_attribute("points")).split()) >= 3
        label = str(page.attribute("#depths svg", "aria-label"))
        assert "tools 0" in label
        assert "peak 1" in label
        wide = "return [document.documentElement.scrollWidth, window.innerWidth]"
        scroll, width = page.driver.execute_script(wide)
        assert scroll <= width
        history = httpx.get(f"{server.url}/v1/queues/history", timeout=30).json()
        assert history["interval_s"] == 0.5
        assert max(s["queues"]["tools"] for s in history["samples"]) == 1
    finally:
        gate.touch()
        server.stop()
