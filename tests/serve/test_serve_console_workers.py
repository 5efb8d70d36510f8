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
    assert page.find(f"{row} .seen").text.endswith("s ago")

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
