"""Threads on the dashboard in a real headless browser (Debian's chromium driven by
Selenium): the tenant's threads listed, and a thread's page with its messages and its runs,
each with its status and cost, opened by keyboard, at 1,280 px and a phone's width. Priced
runs on a real worker, a real `agentq serve` and redis-server."""

from __future__ import annotations

import httpx
import pytest

from tests.serve.test_serve_console import Page, ended, submit
from tests.serve.test_serve_console_runs_list import USAGE, priced
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

__all__ = ["priced"]

pytestmark = pytest.mark.integration


def test_the_threads_list_and_a_threads_messages_runs_and_cost(
    priced: ServeProcess, browser: object
) -> None:
    from selenium.webdriver.common.keys import Keys

    created = httpx.post(f"{priced.url}/v1/threads", json={"id": "support"}, timeout=30)
    assert created.status_code == 201, created.text
    turns = [("first", "Where is my order?", "It shipped."), ("second", "When?", "Tuesday.")]
    for run_id, prompt, answer in turns:
        spec = scripted({"text": answer, "usage": USAGE}, id=run_id, prompt=prompt)
        submit(priced, {**spec, "thread_id": "support"})
        assert ended(priced, run_id)["status"] == "succeeded"

    page = Page(browser, priced.url)
    page.open("#/threads")
    row = '#threads tr[data-thread-id="support"]'
    page.text(f"{row} .status", "idle")
    page.find(row).send_keys(Keys.ENTER)
    page.until(lambda d: d.current_url.endswith("#/threads/support"))
    page.text("#thread-usage", "2 runs · 2200 tokens · $0.006000")
    for run_id, _, _ in turns:
        page.text(f'#thread-runs tr[data-run-id="{run_id}"] .cost', "$0.003000")
        page.text(f'#thread-runs tr[data-run-id="{run_id}"] .status', "succeeded")
    # The conversation so far: both turns, the second run's history included.
    page.text("#thread-messages", "Where is my order?")
    page.text('#thread-messages .message[data-role="assistant"]:last-child', "Tuesday.")

    # At a phone's width nothing overflows the page; a run opens from its row.
    page.driver.set_window_size(390, 844)
    wide = "return [document.documentElement.scrollWidth, window.innerWidth]"
    page.until(lambda d: (lambda w: w[0] <= w[1])(d.execute_script(wide)))
    page.click_until(
        '#thread-runs tr[data-run-id="second"] a', lambda d: d.current_url.endswith("#/runs/second")
    )
    page.text("#steps", "Tuesday.")
