"""The runs list in a real headless browser (Debian's chromium driven by Selenium): a
search that reads on past what one request scans, the "tool used" filter, and columns
(steps, tokens, cost, start, duration) sorted by a click or the keyboard, at 1,280 px and
at a phone's width. Priced runs on a real worker, a real `agentq serve` and redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.test_serve_console import Page, ended, submit
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

PRICES = {"scripted:*": {"input": 2.0, "output": 10.0}}  # USD per million tokens
USAGE = {"input_tokens": 1000, "output_tokens": 100}  # $0.003 a step
SCAN = 25  # the runs one list request reads


@pytest.fixture
def priced(redis_url: str, tmp_path: Path) -> Iterator[ServeProcess]:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    worker = WorkerProcess(redis_url, "--tools", TOOLS, env={"AGENTQ_PRICES": str(prices)})
    wait_ready(worker)
    server = ServeProcess(redis_url, env={"AGENTQ_SERVE_LIST_SCAN_RUNS": str(SCAN)})
    yield server
    server.stop()
    worker.stop()


def adding(steps: int, **spec: Any) -> dict[str, Any]:
    add = {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}], "usage": USAGE}
    return scripted(*[add] * (steps - 1), {"text": "done", "usage": USAGE}, tools=["add"], **spec)


def test_search_reads_on_a_tool_filter_and_sorted_columns(
    priced: ServeProcess, browser: object
) -> None:
    from selenium.webdriver.common.keys import Keys

    page = Page(browser, priced.url)
    submit(priced, adding(3, id="needle"))  # the oldest: 3 steps, 3 calls of add
    submit(priced, adding(1, id="offered"))  # offered add, never called it
    with httpx.Client(base_url=priced.url, timeout=30) as http:
        for n in range(60):
            assert http.post(
                "/v1/runs", json=scripted({"text": "hi"}, id=f"bulk-{n:02}")
            ).is_success
    assert ended(priced, "bulk-59")["status"] == "succeeded"
    assert ended(priced, "needle")["usage"]["cost_usd"] == pytest.approx(0.009)

    # One request reads 25 runs: the needle, 61 runs back, is found by reading on.
    first = httpx.get(f"{priced.url}/v1/runs", params={"q": "needle"}, timeout=30).json()
    assert (first["runs"], first["scanned"]) == ([], SCAN)
    page.open("#/")
    page.until(lambda _: len(page.rows()) == 62)
    search = page.find("#filter-q")
    search.send_keys("needle\n")
    page.until(lambda _: page.rows() == ["needle"])
    page.text("#runs-searched", "62 runs searched")
    page.text('tr[data-run-id="needle"] .cost', "$0.009000")
    search.clear()
    search.send_keys("\n")
    page.until(lambda _: len(page.rows()) == 62)

    # "tool used": a run that called add, not one that was only offered it.
    page.find("#filter-tool").send_keys("add\n")
    page.until(lambda _: page.rows() == ["needle"])
    page.find("#filter-tool").clear()
    page.find("#filter-tool").send_keys("\n")
    page.until(lambda _: len(page.rows()) == 62)

    # Sorted by cost, largest first, by a click; by steps, smallest first, by the keyboard.
    page.click_until('#runs th[data-sort="cost"] button', lambda _: page.rows()[0] == "needle")
    assert page.attribute('#runs th[data-sort="cost"]', "aria-sort") == "descending"
    page.find('#runs th[data-sort="steps"] button').send_keys(Keys.ENTER)
    page.until(lambda _: page.rows()[0] == "needle")
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)  # the same header: reversed
    page.until(lambda _: page.rows()[-1] == "needle")
    assert page.attribute('#runs th[data-sort="steps"]', "aria-sort") == "ascending"
    page.text('tr[data-run-id="needle"] .steps', "2")
    assert page.read_text('tr[data-run-id="needle"] .duration').endswith(" s")

    # At a phone's width the table scrolls in its panel; the page itself does not.
    page.driver.set_window_size(390, 844)
    wide = "return [document.documentElement.scrollWidth, window.innerWidth]"
    page.until(lambda d: (lambda w: w[0] <= w[1])(d.execute_script(wide)))
    page.find('#runs th[data-sort="cost"] button').send_keys(Keys.ENTER)
    page.until(lambda _: page.rows()[0] == "needle")
