"""The console's actions and navigation in a real headless browser (Debian's chromium
driven by Selenium): cancel a running run, replay, fork and retry a finished one, a
failed step drawn as failed, a parent run to its child and back, paging past 100 runs
and finding one by id. Screenshots of the run page and the runs list for the docs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fake_http import Recorded, Reply
from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn, render
from tests.support.infra import REPO, TOOLS, WorkerProcess, wait_ready
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration

ARTIFACTS = REPO / "test-artifacts"


# Reads of an element redrawn between its find and its read, before a test gives up.
REREADS = 20


class Page:
    """A browser on the dashboard, and the two ways a test waits on a page that redraws
    live: for what it shows, and for an action's effect (an element replaced under a
    click, or not shown yet, did nothing: the click is tried again)."""

    def __init__(self, browser: object, url: str) -> None:
        from selenium.webdriver.remote.webdriver import WebDriver

        assert isinstance(browser, WebDriver)
        self.driver = browser
        self.url = url

    def open(self, fragment: str) -> None:
        self.driver.get(f"{self.url}/{fragment}")

    def until(self, check: Callable[[Any], object]) -> Any:
        from selenium.common.exceptions import (
            NoSuchElementException,
            StaleElementReferenceException,
        )
        from selenium.webdriver.support.ui import WebDriverWait

        ignored = (StaleElementReferenceException, NoSuchElementException)
        return WebDriverWait(self.driver, 60, poll_frequency=0.2, ignored_exceptions=ignored).until(
            check
        )

    def text(self, css: str, wanted: str) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as when

        self.until(when.text_to_be_present_in_element((By.CSS_SELECTOR, css), wanted))

    def click_until(self, css: str, arrived: Callable[[Any], object]) -> None:
        from selenium.common.exceptions import ElementNotInteractableException
        from selenium.webdriver.common.by import By

        def attempt(driver: Any) -> object:
            if not arrived(driver):
                try:
                    driver.find_element(By.CSS_SELECTOR, css).click()
                except ElementNotInteractableException:
                    return False
            return arrived(driver)

        self.until(attempt)

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.until(lambda driver: driver.find_element(By.CSS_SELECTOR, css))

    def attribute(self, css: str, name: str) -> str | None:
        value = self._read(css, lambda element: element.get_attribute(name))
        return None if value is None else str(value)

    def read_text(self, css: str) -> str:
        """What an element shows now (no wait for it to change)."""
        return str(self._read(css, lambda element: element.text))

    def _read(self, css: str, read: Callable[[Any], Any]) -> Any:
        """One read of an element the page may redraw between finding it and reading
        it (a live page replaces its rows as events arrive): found again then."""
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.common.by import By

        for _ in range(REREADS):
            try:
                return read(self.driver.find_element(By.CSS_SELECTOR, css))
            except StaleElementReferenceException:
                continue
        raise AssertionError(f"{css} was redrawn under each of {REREADS} reads")

    def run_shown(self) -> str:
        """The run the page shows, from its URL (`#/runs/ID`)."""
        return str(self.driver.current_url).split("#/runs/", 1)[1]

    def rows(self) -> list[str]:
        """The listed runs' ids, read in one script: a row at a time (a round trip each)
        took seconds on a loaded machine, and a list redrawn under the reads went stale
        at every try."""
        ids = self.driver.execute_script(
            "return Array.from(document.querySelectorAll('#runs tbody tr'),"
            " row => row.getAttribute('data-run-id'))"
        )
        return [str(run_id) for run_id in ids]


def submit(server: ServeProcess, spec: dict[str, Any]) -> str:
    created = httpx.post(f"{server.url}/v1/runs", json=spec, timeout=30)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def ended(server: ServeProcess, run_id: str) -> dict[str, Any]:
    result: dict[str, Any] = httpx.get(
        f"{server.url}/v1/runs/{run_id}", params={"wait": 30}, timeout=60
    ).json()
    return result


def status_is(page: Page, status: str) -> Callable[[Any], bool]:
    from selenium.webdriver.common.by import By

    return lambda driver: driver.find_element(By.ID, "run-status").text == status


def test_cancel_replay_fork_and_retry_from_the_run_page(
    server: ServeProcess, browser: object, tmp_path: Path
) -> None:
    page = Page(browser, server.url)

    # A running run (its call held in flight by the test) is cancelled by its button.
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
        id="held",
    )
    submit(server, held)
    page.open("#/runs/held")
    page.until(lambda _: started.exists())
    page.text("#run-status", "running")
    page.text('.call[data-call-id="call-hold"] .name', "hold_until")
    page.click_until("#run-cancel", status_is(page, "cancelled"))
    assert page.attribute("#run-cancel", "hidden") is not None
    gate.touch()

    # A finished run: its reasoning shown, its raw events one click away, replayed.
    two_steps = scripted(
        {
            "reasoning": "Two numbers: I should add them.",
            "text": "adding",
            "tool_calls": [{"id": "call-add", "name": "add", "input": {"a": 1, "b": 2}}],
        },
        {"text": "1+2=3"},
        tools=["add"],
        id="two-steps",
    )
    submit(server, two_steps)
    page.open("#/runs/two-steps")
    page.until(status_is(page, "succeeded"))
    page.text('.step[data-step="0"] .reasoning', "I should add them.")
    page.click_until("#run-replay", lambda d: page.attribute("#replay-report", "hidden") is None)
    page.text("#replay-report", "2 steps replayed: same messages and path")
    assert page.attribute("#replay-report", "data-diverged") == "false"

    # Forked at step 1 with a patch: a new run, step 0 copied, shown with its origin.
    from selenium.webdriver.support.ui import Select

    page.until(lambda _: len(Select(page.find("#fork-step")).options) == 2)
    Select(page.find("#fork-step")).select_by_value("1")
    page.click_until("#run-fork", lambda d: page.attribute("#fork-form", "hidden") is None)
    page.find("#fork-patch").send_keys('{"metadata": {"forked": "yes"}}')
    page.driver.set_window_size(1280, 1150)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "console-run.png"
    assert page.driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    page.click_until("#run-raw", lambda d: page.attribute("#raw", "hidden") is None)
    page.text("#raw-events", '"type":"finish"')
    page.click_until("#fork-start", lambda d: "#/runs/two-steps" not in d.current_url)
    fork_id = page.run_shown()
    page.until(status_is(page, "succeeded"))
    page.text("#run-links .origin-link", "forked from two-steps at step 1")
    page.text('.step[data-step="1"] .text', "1+2=3")
    # Step 0 is the original's, as recorded (its events are the original's): drawn copied.
    copied = '.step.copied[data-step="0"]'
    page.text(f"{copied} h3", "step 0 · copied from two-steps")
    page.text(f'{copied} .call[data-call-id="call-add"] .output', "3")
    assert not page.driver.find_elements("css selector", '#timeline .row[data-step="0"]')
    fork = ended(server, fork_id)
    assert fork["origin"] == {"run_id": "two-steps", "step": 1}
    assert fork["steps"][0]["tool_results"][0]["output"] == 3

    # Retried: the same spec again from the start, a run of its own.
    page.click_until("#run-retry", lambda d: f"#/runs/{fork_id}" not in d.current_url)
    retry_id = page.run_shown()
    page.until(status_is(page, "succeeded"))
    page.text("#run-links .origin-link", f"retry of {fork_id}")
    assert ended(server, retry_id)["text"] == "1+2=3"


def test_a_failed_step_is_drawn_failed_with_its_kind_and_message(
    server: ServeProcess, browser: object
) -> None:
    page = Page(browser, server.url)
    # One step scripted, a tool call in it: the run asks for a second step and fails.
    submit(server, scripted(calls(("add", {"a": 1, "b": 2})), tools=["add"], id="broken"))
    failure = ended(server, "broken")["error"]
    page.open("#/runs/broken")
    page.until(status_is(page, "failed"))
    step = failure["step"]
    row = f'#timeline .row[data-kind="model"][data-step="{step}"]'
    page.until(lambda _: page.attribute(row, "data-state") == "failed")
    page.text(row, f"failed ({failure['type']})")
    assert page.attribute(f"{row} .bar", "class") == "bar error"
    page.text(f'.step[data-step="{step}"] .step-error .error-kind', failure["type"])
    page.text(f'.step[data-step="{step}"] .step-error', "scripted model")
    page.text("#run-error .error-kind", failure["type"])


def test_parent_to_child_and_back_paging_and_search(server: ServeProcess, browser: object) -> None:
    page = Page(browser, server.url)
    child = scripted({"text": "the child's answer"})
    helper = {
        "type": "agent",
        "name": "helper",
        "description": "A helper agent",
        "spec": {k: v for k, v in child.items() if k != "prompt"},
    }
    parent = scripted(
        {"tool_calls": [{"id": "call-helper", "name": "helper", "input": {"prompt": "help"}}]},
        {"text": "done"},
        tools=[helper],
        id="parent",
    )
    submit(server, parent)
    child_id = ended(server, "parent")["children"]["call-helper"]

    page.open("#/runs/parent")
    page.until(status_is(page, "succeeded"))
    page.click_until(
        '.call[data-call-id="call-helper"] a.child-link',
        lambda d: d.current_url.endswith(f"#/runs/{child_id}"),
    )
    page.text("#run-id", child_id)
    page.text("#steps", "the child's answer")
    page.text("#run-links .parent-link", "sub-agent of parent")
    page.click_until("#run-links .parent-link a", lambda d: d.current_url.endswith("#/runs/parent"))
    page.until(status_is(page, "succeeded"))

    broken = scripted(calls(("add", {"a": 1, "b": 2})), tools=["add"], metadata={"team": "ops"})
    broken_id = submit(server, broken)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for n in range(103):
            spec = scripted({"text": "hi"}, id=f"bulk-{n:03}", metadata={"n": str(n)})
            assert http.post("/v1/runs", json=spec).status_code == 201
    assert ended(server, "bulk-102")["status"] == "succeeded"

    # 106 runs: the list shows 100, the next page the 6 oldest, and back.
    page.open("#/")
    page.until(lambda _: len(page.rows()) == 100 and page.rows()[0] == "bulk-102")
    page.click_until("#page-older", lambda _: page.find("#page-number").text == "page 2")
    oldest = ["bulk-002", "bulk-001", "bulk-000", broken_id, child_id, "parent"]
    page.until(lambda _: page.rows() == oldest)
    assert page.attribute("#page-older", "disabled") is not None
    page.text(
        f'tr[data-run-id="{broken_id}"] .error-kind', ended(server, broken_id)["error"]["type"]
    )
    page.driver.set_window_size(1280, 620)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "console-runs.png"
    assert page.driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    page.click_until("#page-newer", lambda _: page.find("#page-number").text == "page 1")
    page.until(lambda _: len(page.rows()) == 100)

    # Filtered by failure kind: the one failed run.
    from selenium.webdriver.support.ui import Select

    kind = ended(server, broken_id)["error"]["type"]
    Select(page.find("#filter-error-kind")).select_by_visible_text(kind)
    page.until(lambda _: page.rows() == [broken_id])
    Select(page.find("#filter-error-kind")).select_by_value("")
    page.until(lambda _: len(page.rows()) == 100)

    # Found by its id, then opened from the list.
    search = page.find("#filter-q")
    search.send_keys("bulk-042\n")
    page.until(lambda _: page.rows() == ["bulk-042"])
    page.click_until(
        'tr[data-run-id="bulk-042"]', lambda d: d.current_url.endswith("#/runs/bulk-042")
    )
    page.until(status_is(page, "succeeded"))


class HeldStream:
    """The first Chat Completions request streams its first `before` pieces, then holds
    the stream open until `release` is set: a call's arguments stay half-written."""

    def __init__(self, turn: Turn, before: int) -> None:
        self.turn, self.before = turn, before
        self.release = threading.Event()
        self.held = False

    def __call__(self, request: Recorded) -> Reply | None:
        if self.held or request.path != "/v1/chat/completions":
            return None
        self.held = True
        reply = render(self.turn, 0, request)
        assert reply.pieces is not None, "a streamed request"
        pieces = list(reply.pieces)

        def held() -> Iterator[bytes]:
            yield from pieces[: self.before]
            self.release.wait(120)
            yield from pieces[self.before :]

        reply.pieces = held()
        return reply


def test_a_calls_input_is_shown_as_the_model_streams_it(
    redis_url: str, browser: object, allow_loopback_specs: None
) -> None:
    args = {"a": 12.5, "b": 30}
    hold = HeldStream(Turn(tool_calls=[ToolCall("add", args, id="call-streamed")]), before=4)
    with FakeOpenAI([Turn(text="It is 42.5.")]) as fake:
        fake.routes.append(hold)
        worker = WorkerProcess(redis_url, "--tools", TOOLS, env={"OPENAI_API_KEY": "sk-test"})
        wait_ready(worker)
        server = ServeProcess(redis_url)
        try:
            model = {"provider": "openai", "name": "m-test", "base_url": fake.base_url}
            spec = {"model": model, "prompt": "add", "tools": [{"type": "function", "name": "add"}]}
            run_id = submit(server, {**spec, "id": "streamed"})
            page = Page(browser, server.url)
            page.open(f"#/runs/{run_id}")
            # Held mid-way: the role chunk, the call's name, then two 4-character fragments.
            streaming = '.call[data-call-id="call-streamed"] .streaming'
            page.text(streaming, 'input (streaming): {"a"')
            assert page.read_text("#run-status") == "running"
            hold.release.set()
            page.until(status_is(page, "succeeded"))
            page.text('.call[data-call-id="call-streamed"] .output', "42.5")
            page.text('.call[data-call-id="call-streamed"]', '"a": 12.5')
            assert not page.driver.find_elements("css selector", streaming)
        finally:
            hold.release.set()
            server.stop()
            worker.stop()
