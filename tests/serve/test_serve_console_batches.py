"""The console's batch page in a real headless browser (Debian's chromium driven by
Selenium): a batch's failed lines retried by a click become new runs, and a running batch
is cancelled by its button. A screenshot of the batch page for the docs."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.common.exceptions import TimeoutException

from tests.serve.test_serve_console import ARTIFACTS, Page
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration


def submit_batch(
    server: ServeProcess, batch_id: str, lines: list[dict[str, Any]], **query: Any
) -> None:
    body = "\n".join(json.dumps(line) for line in lines)
    created = httpx.post(
        f"{server.url}/v1/batches", params={"id": batch_id, **query}, content=body, timeout=30
    )
    assert created.status_code == 201, created.text


def line_runs(server: ServeProcess, batch_id: str) -> dict[int, str]:
    got = httpx.get(f"{server.url}/v1/batches/{batch_id}/results", timeout=30)
    rows = [json.loads(raw) for raw in got.text.splitlines()]
    return {row["line"]: row["run_id"] for row in rows}


@contextlib.contextmanager
def explained(server: ServeProcess, worker: WorkerProcess, *batch_ids: str) -> Iterator[None]:
    """A wait on the page that times out says what the API and the processes saw then:
    each batch as the API has it, and the end of the worker's and the server's logs."""
    try:
        yield
    except TimeoutException as exc:
        batches = {b: httpx.get(f"{server.url}/v1/batches/{b}", timeout=30).text for b in batch_ids}
        raise AssertionError(
            f"the page did not show what was awaited; the API: {batches}\n"
            f"worker log:\n{worker.log()[-4000:]}\nserver log:\n{server.log()[-4000:]}"
        ) from exc


def test_retry_a_batchs_failed_lines_and_cancel_a_running_batch(
    server: ServeProcess, worker: WorkerProcess, browser: object, tmp_path: Path
) -> None:
    with explained(server, worker, "mixed", "held"):
        retry_failed_lines_then_cancel_a_running_batch(server, browser, tmp_path)


def retry_failed_lines_then_cancel_a_running_batch(
    server: ServeProcess, browser: object, tmp_path: Path
) -> None:
    page = Page(browser, server.url)
    good = scripted({"text": "fine"}, prompt="{{q}}")
    # One step scripted, a tool call in it: the run asks for a second step and fails.
    bad = scripted(calls(("add", {"a": 1, "b": 2})), tools=["add"], prompt="{{q}}")
    specs = [good, bad, good, bad, good]
    submit_batch(
        server,
        "mixed",
        [{"custom_id": f"q{i}", "spec": spec, "vars": {"q": "x"}} for i, spec in enumerate(specs)],
    )

    page.open("#/batches/mixed")
    page.text("#batch-status", "done")
    page.text("#batch-counts", "3 succeeded · 2 failed · 0 cancelled")
    assert page.attribute(".progress", "aria-valuenow") == "100"
    assert "var(--error) 60% 100%" in str(page.attribute("#batch-bar", "style"))
    assert page.attribute("#batch-cancel", "hidden") is not None
    failed = {2: '#batch-failures tr[data-line="2"] a', 4: '#batch-failures tr[data-line="4"] a'}
    before = line_runs(server, "mixed")
    for line, link in failed.items():
        page.text(link, before[line])
    page.driver.set_window_size(1280, 560)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "console-batch.png"
    assert page.driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000

    # Retried: each failed line gets a new run (which fails again: the same spec), linked.
    page.click_until(
        "#batch-retry", lambda _: "2 failed line(s) requeued" in page.find("#batch-note").text
    )
    after: dict[int, str] = {}

    def relinked(_: Any) -> bool:
        after.update(line_runs(server, "mixed"))
        return all(
            after[line] != before[line] and page.find(link).text == after[line]
            for line, link in failed.items()
        )

    page.until(relinked)
    assert {line: after[line] for line in (1, 3, 5)} == {line: before[line] for line in (1, 3, 5)}
    page.text("#batch-status", "done")
    page.text("#batch-counts", "3 succeeded · 2 failed · 0 cancelled")
    page.click_until(failed[2], lambda d: d.current_url.endswith(f"#/runs/{after[2]}"))
    page.text("#run-status", "failed")

    # A running batch (its first line's call held in flight, one line at a time): cancelled.
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
        {"text": "never"},
        tools=["hold_until"],
        prompt="{{q}}",
    )
    submit_batch(
        server, "held", [{"spec": held, "vars": {"q": str(i)}} for i in range(3)], concurrency=1
    )
    try:
        page.open("#/batches/held")
        page.until(lambda _: started.exists())
        page.text("#batch-status", "running")
        page.text("#batch-counts", "1 running · 2 queued of 3")
        page.click_until("#batch-cancel", lambda _: page.find("#batch-status").text == "cancelled")
        page.text("#batch-counts", "0 succeeded · 0 failed · 3 cancelled")
        assert page.attribute("#batch-cancel", "hidden") is not None
    finally:
        gate.touch()
    info = httpx.get(f"{server.url}/v1/batches/held", timeout=30).json()
    assert info["status"] == "cancelled"
    assert info["counts"]["cancelled"] == 3
