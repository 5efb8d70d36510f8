"""The dashboard in a real headless browser: Debian's chromium driven by Selenium
through chromium-driver (no browser download)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import shown_text
from tests.support.infra import REPO
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration

ARTIFACTS = REPO / "test-artifacts"


def test_watch_a_run_and_approve_a_call_by_clicking(
    server: ServeProcess, browser: object, tmp_path: Path
) -> None:
    from selenium.common.exceptions import (
        ElementNotInteractableException,
        NoSuchElementException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement
    from selenium.webdriver.support import expected_conditions as when
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    wait = WebDriverWait(browser, 60)

    def act(css: str, action: Callable[[WebElement], object]) -> None:
        """Find an element and act on it in one attempt. The page redraws live, so an
        element found a moment ago may be gone (stale) or not yet shown (a redraw puts
        it back hidden for a moment) under the action: then nothing happened, so try
        again, unless the run has already left `awaiting` (what the action is for)."""

        def attempt(driver: WebDriver) -> bool:
            if "awaiting" not in (shown_text(driver, "#run-status") or ""):
                return True
            action(driver.find_element(By.CSS_SELECTOR, css))
            return True  # done, unless the element went stale under the action (retried)

        WebDriverWait(
            browser,
            60,
            poll_frequency=0.2,
            ignored_exceptions=(
                StaleElementReferenceException,
                NoSuchElementException,
                ElementNotInteractableException,
            ),
        ).until(attempt)

    quick = scripted(
        {"text": "adding", "tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]},
        {"text": "1+2=3"},
        tools=["add"],
        id="quick-run",
        metadata={"team": "ops"},
    )
    parked = scripted(
        {
            "text": "Let me check both, in parallel.",
            "tool_calls": [
                {"id": "call-noop", "name": "noop", "input": {}},
                {"id": "call-add", "name": "add", "input": {"a": 20, "b": 22}},
            ],
        },
        {"text": "The sum is 42. Done."},
        tools=["noop", {"type": "function", "name": "add", "needs_approval": True}],
        id="needs-approval",
        prompt="check and add",
    )
    browser.get(server.url + "/")
    for spec in (quick, parked):
        assert httpx.post(f"{server.url}/v1/runs", json=spec, timeout=30).status_code == 201

    # The runs list updates live: the quick run shows up and finishes.
    wait.until(
        when.text_to_be_present_in_element(
            (By.CSS_SELECTOR, 'tr[data-run-id="quick-run"] .status'), "succeeded"
        )
    )
    wait.until(
        when.text_to_be_present_in_element(
            (By.CSS_SELECTOR, 'tr[data-run-id="needs-approval"] .status'), "awaiting"
        )
    )
    assert "worker" in (shown_text(browser, "#fleet") or "")

    browser.find_element(By.CSS_SELECTOR, 'tr[data-run-id="needs-approval"]').click()
    approve_button = (By.CSS_SELECTOR, 'button.approve[data-call-id="call-add"]')
    wait.until(when.element_to_be_clickable(approve_button))
    wait.until(when.presence_of_element_located((By.CSS_SELECTOR, ".bar.wait")))
    # Looked up again, not held: a live redraw replaces the button (a held one goes stale).
    wait.until(when.visibility_of_element_located(approve_button))
    act('button.approve[data-call-id="call-add"]', lambda button: button.click())
    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "succeeded"))
    wait.until(when.text_to_be_present_in_element((By.ID, "steps"), "The sum is 42. Done."))
    wait.until(
        when.text_to_be_present_in_element(
            (By.CSS_SELECTOR, '.call[data-call-id="call-add"] .output'), "42"
        )
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, '#timeline .row[data-kind="model"]')) == 2
    assert len(browser.find_elements(By.CSS_SELECTOR, '#timeline .row[data-kind="call"]')) == 2
    assert browser.find_element(By.ID, "pending").get_attribute("hidden") is not None

    # A client tool's output, typed into the run page's form.
    client_run = scripted(
        {"tool_calls": [{"id": "call-pick", "name": "pick_color", "input": {}}]},
        {"text": "Teal it is."},
        tools=[{"type": "client", "name": "pick_color"}],
        id="client-tool",
        prompt="pick a color",
    )
    assert httpx.post(f"{server.url}/v1/runs", json=client_run, timeout=30).status_code == 201
    browser.get(server.url + "/#/runs/client-tool")
    wait.until(
        when.presence_of_element_located((By.CSS_SELECTOR, '.item[data-call-id="call-pick"]'))
    )

    def post_output(form: WebElement) -> None:
        area = form.find_element(By.TAG_NAME, "textarea")
        area.clear()
        area.send_keys('{"color": "teal"}')
        form.find_element(By.CSS_SELECTOR, "button.post-result").click()

    act('.item[data-call-id="call-pick"]', post_output)
    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "succeeded"))
    wait.until(
        when.text_to_be_present_in_element(
            (By.CSS_SELECTOR, '.call[data-call-id="call-pick"] .output'), "teal"
        )
    )

    browser.get(server.url + "/#/runs/needs-approval")
    wait.until(when.text_to_be_present_in_element((By.ID, "steps"), "The sum is 42. Done."))
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "dashboard.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_follow_a_batch_to_its_failed_lines_run(server: ServeProcess, browser: object) -> None:
    from selenium.common.exceptions import (
        ElementNotInteractableException,
        NoSuchElementException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as when
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    wait = WebDriverWait(browser, 60)

    def click_until(css: str, arrived: Callable[[WebDriver], bool]) -> None:
        """Click an element of a page that redraws every second: a click on an element
        replaced under it (stale) or not shown yet did nothing, so try again until the
        click's effect is seen."""

        def attempt(driver: WebDriver) -> bool:
            if not arrived(driver):
                driver.find_element(By.CSS_SELECTOR, css).click()
            return arrived(driver)

        WebDriverWait(
            browser,
            60,
            poll_frequency=0.2,
            ignored_exceptions=(
                StaleElementReferenceException,
                NoSuchElementException,
                ElementNotInteractableException,
            ),
        ).until(attempt)

    good = scripted({"text": "fine"}, prompt="{{q}}")
    # One step scripted, a tool call in it: the run asks for a second step and fails.
    bad = scripted(calls(("add", {"a": 1, "b": 2})), tools=["add"], prompt="{{q}}")
    body = "\n".join(
        json.dumps({"custom_id": f"q{i}", "spec": bad if i == 1 else good, "vars": {"q": "x"}})
        for i in range(3)
    )
    created = httpx.post(f"{server.url}/v1/batches?id=web1", content=body, timeout=30)
    assert created.status_code == 201, created.text

    browser.get(server.url + "/#/batches")
    row = 'tr[data-batch-id="web1"]'
    wait.until(when.text_to_be_present_in_element((By.CSS_SELECTOR, f"{row} .status"), "done"))
    wait.until(when.text_to_be_present_in_element((By.CSS_SELECTOR, f"{row} .ended"), "3 / 3"))
    wait.until(when.text_to_be_present_in_element((By.CSS_SELECTOR, f"{row} .failed"), "1"))

    click_until(row, lambda driver: driver.current_url.endswith("#/batches/web1"))
    wait.until(when.text_to_be_present_in_element((By.ID, "batch-status"), "done"))
    counts = (By.ID, "batch-counts")
    wait.until(when.text_to_be_present_in_element(counts, "2 succeeded · 1 failed"))
    failed = '#batch-failures tr[data-line="2"]'
    wait.until(when.text_to_be_present_in_element((By.CSS_SELECTOR, failed), "q1"))
    link = f"{failed} a"
    run_id = str(wait.until(lambda driver: shown_text(driver, link)))
    assert run_id.startswith("web1.")
    click_until(link, lambda driver: driver.current_url.endswith(f"#/runs/{run_id}"))
    wait.until(when.text_to_be_present_in_element((By.ID, "run-id"), run_id))
    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "failed"))
    wait.until(when.text_to_be_present_in_element((By.ID, "run-error"), "scripted model"))


def test_a_tool_error_shows_its_kind(server: ServeProcess, browser: object) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as when
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    wait = WebDriverWait(browser, 60)
    spec = scripted(
        {
            "tool_calls": [
                {"id": "call-fail", "name": "fail", "input": {"message": "boom"}},
                {"id": "call-ghost", "name": "ghost", "input": {}},
            ]
        },
        {"text": "Both went wrong."},
        tools=["fail"],
        id="tool-errors",
    )
    assert httpx.post(f"{server.url}/v1/runs", json=spec, timeout=30).status_code == 201
    browser.get(server.url + "/#/runs/tool-errors")
    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "succeeded"))
    for call_id, kind in (("call-fail", "execution"), ("call-ghost", "no-such-tool")):
        badge = (By.CSS_SELECTOR, f'.call[data-call-id="{call_id}"] .error .error-kind')
        wait.until(when.text_to_be_present_in_element(badge, kind))
    # Waited on, not read once: the run page redraws a call as its events arrive, so an
    # element found a moment ago may be gone (a stale reference) when it is read.
    ghost = (By.CSS_SELECTOR, '.call[data-call-id="call-ghost"] .error')
    wait.until(
        when.text_to_be_present_in_element_attribute(ghost, "data-error-kind", "no-such-tool")
    )
    wait.until(when.text_to_be_present_in_element(ghost, "unavailable tool 'ghost'"))


def _workflow(name: str, nodes: list[dict[str, Any]], edges: list[list[str]]) -> dict[str, Any]:
    return {"type": "workflow", "name": name, "graph": {"nodes": nodes, "edges": edges}}


def _tool_node(node_id: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": node_id,
        "kind": "tool",
        "tool": {"type": "function", "name": tool},
        "input": tool_input,
    }


PIPELINE = _workflow(
    "pipeline",
    [
        {"id": "in", "kind": "input"},
        _tool_node("held", "hold_until", {"started": "{{in.started}}", "gate": "{{in.gate}}"}),
        _tool_node("double", "add", {"a": "{{in.x}}", "b": "{{in.x}}"}),
        {"id": "big", "kind": "condition", "if": "double > `10`"},
        {"id": "yes", "kind": "template", "template": "big: {{double}}"},
        {"id": "no", "kind": "template", "template": "small"},
        {"id": "out", "kind": "output", "value": {"held": "{{held}}", "yes": "{{yes}}"}},
    ],
    [
        ["in", "held"], ["in", "double"], ["double", "big"], ["big", "yes", "true"],
        ["big", "no", "false"], ["held", "out"], ["yes", "out"], ["no", "out"],
    ],
)  # fmt: skip
BROKEN = _workflow(
    "broken",
    [
        {"id": "in", "kind": "input"},
        _tool_node("boom", "fail", {"message": "no luck"}),
        {"id": "out", "kind": "output", "value": "{{boom}}"},
    ],
    [["in", "boom"], ["boom", "out"]],
)


def test_a_workflow_calls_nodes_are_drawn_live_with_their_results(
    server: ServeProcess, browser: object, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as when
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    wait = WebDriverWait(browser, 60)
    started, gate = tmp_path / "started", tmp_path / "gate"
    held = {"x": 6, "started": str(started), "gate": str(gate)}
    spec = scripted(
        {
            "tool_calls": [
                {"id": "wf-ok", "name": "pipeline", "input": held},
                {"id": "wf-bad", "name": "broken", "input": {}},
            ]
        },
        {"text": "One workflow gave its output, the other failed."},
        tools=[PIPELINE, BROKEN],
        id="workflows",
    )
    assert httpx.post(f"{server.url}/v1/runs", json=spec, timeout=30).status_code == 201
    browser.get(server.url + "/#/runs/workflows")

    def node_state(call: str, node: str, state: str) -> None:
        css = f'.call[data-call-id="{call}"] .node[data-node="{node}"]'
        wait.until(
            when.text_to_be_present_in_element_attribute(
                (By.CSS_SELECTOR, css), "data-state", state
            )
        )

    def node_text(call: str, node: str, text: str) -> None:
        css = f'.call[data-call-id="{call}"] .node[data-node="{node}"]'
        wait.until(when.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))

    # Held in flight by the test: its node runs and the output node waits for it.
    wait.until(lambda _: started.exists())
    node_state("wf-ok", "held", "running")
    node_state("wf-ok", "out", "waiting")
    node_state("wf-ok", "yes", "done")
    gate.touch()

    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "succeeded"))
    for node, text in [
        ("in", '"x":6'),
        ("held", "released"),
        ("double", "12"),
        ("big", "true"),
        ("yes", "big: 12.0"),
        ("out", '"yes":"big: 12.0"'),
    ]:
        node_state("wf-ok", node, "done")
        node_text("wf-ok", node, text)
    node_state("wf-ok", "no", "skipped")
    node_text("wf-ok", "no", "← big (false)")
    node_state("wf-bad", "in", "done")
    node_state("wf-bad", "boom", "failed")
    node_text("wf-bad", "boom", "RuntimeError: no luck")
    node_state("wf-bad", "out", "not-run")

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "dashboard-workflow.png"
    browser.set_window_size(1280, 1600)  # the whole step, both calls' graphs, in view
    assert browser.find_element(By.ID, "steps").screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_schedules_are_listed_paused_and_followed_to_their_runs(
    server: ServeProcess, browser: object
) -> None:
    from selenium.common.exceptions import (
        ElementNotInteractableException,
        NoSuchElementException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as when
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    wait = WebDriverWait(browser, 60)

    def click_until(css: str, arrived: Callable[[WebDriver], bool]) -> None:
        """Click an element of a page that redraws every second until its effect shows."""

        def attempt(driver: WebDriver) -> bool:
            if not arrived(driver):
                driver.find_element(By.CSS_SELECTOR, css).click()
            return arrived(driver)

        WebDriverWait(
            browser,
            60,
            poll_frequency=0.2,
            ignored_exceptions=(
                StaleElementReferenceException,
                NoSuchElementException,
                ElementNotInteractableException,
            ),
        ).until(attempt)

    body = {"name": "pulse", "cron": "* * * * * *", "spec": scripted({"text": "tick"})}
    created = httpx.post(f"{server.url}/v1/schedules", json=body, timeout=30)
    assert created.status_code == 201, created.text

    browser.get(server.url + "/#/schedules")
    row = 'tr[data-schedule="pulse"]'
    wait.until(when.text_to_be_present_in_element((By.CSS_SELECTOR, f"{row} .cron"), "* * * * * *"))
    wait.until(lambda driver: int(shown_text(driver, f"{row} .fired") or 0) >= 1)

    def paused(driver: WebDriver) -> bool:
        return shown_text(driver, f"{row} .next") == "paused"

    click_until(f"{row} button.pause", paused)
    assert httpx.get(f"{server.url}/v1/schedules/pulse", timeout=30).json()["paused"] is True
    run_id = str(wait.until(lambda driver: shown_text(driver, f"{row} a")))
    click_until(f"{row} a", lambda driver: driver.current_url.endswith(f"#/runs/{run_id}"))
    wait.until(when.text_to_be_present_in_element((By.ID, "run-id"), run_id))
    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "succeeded"))


# Holds the page's GETs of one run until the test releases them; each released answer's
# body is read by a json() that marks, in a task after the page's own continuations (which
# are microtasks), that the page has done with it.
HOLD_RUN = """
(() => {
  const held = [];
  window.__held = 0;
  window.__consumed = 0;
  const realFetch = window.fetch.bind(window);
  window.fetch = async (path, options = {}) => {
    if (path !== "/v1/runs/left-behind" || (options.method || "GET") !== "GET") {
      return realFetch(path, options);
    }
    const real = await realFetch(path, options);
    const text = await real.text();
    window.__held += 1;
    await new Promise((resolve) => held.push(resolve));
    const answer = new Response(text, { status: real.status, headers: real.headers });
    answer.json = async () => {
      setTimeout(() => { window.__consumed += 1; }, 0);
      return JSON.parse(text);
    };
    return answer;
  };
  window.__release = () => { for (const resolve of held.splice(0)) resolve(); };
})();
"""


def test_a_run_page_left_while_its_request_was_out_does_not_draw_into_the_next(
    server: ServeProcess, browser: object
) -> None:
    """Run pages share their elements' ids: an answer for the page left behind (a
    finished run) used to write its status and pending calls into the next run's page,
    which then showed `succeeded` and no call to answer."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as when
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    wait = WebDriverWait(browser, 60)
    finished = scripted({"text": "done"}, tools=[], id="left-behind")
    assert httpx.post(f"{server.url}/v1/runs", json=finished, timeout=30).status_code == 201
    ended = httpx.get(f"{server.url}/v1/runs/left-behind?wait=30", timeout=40).json()
    assert ended["status"] == "succeeded", ended
    awaiting = scripted(
        {"tool_calls": [{"id": "call-pick", "name": "pick_color", "input": {}}]},
        {"text": "Teal it is."},
        tools=[{"type": "client", "name": "pick_color"}],
        id="next-page",
        prompt="pick a color",
    )
    assert httpx.post(f"{server.url}/v1/runs", json=awaiting, timeout=30).status_code == 201

    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOLD_RUN})
    browser.get(server.url + "/#/runs/left-behind")
    wait.until(lambda driver: driver.execute_script("return window.__held") >= 1)
    browser.execute_script("location.hash = '#/runs/next-page'")
    pending_call = (By.CSS_SELECTOR, '.item[data-call-id="call-pick"]')
    wait.until(when.presence_of_element_located(pending_call))
    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "awaiting"))

    held = browser.execute_script("const n = window.__held; window.__release(); return n;")
    wait.until(lambda driver: driver.execute_script("return window.__consumed") >= held)
    assert browser.find_element(By.ID, "run-id").text == "next-page"
    assert browser.find_element(By.ID, "run-status").text == "awaiting"
    assert browser.find_elements(*pending_call)
