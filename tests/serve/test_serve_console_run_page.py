"""The run page's answers in a real headless browser (Debian's chromium driven by
Selenium): a call approved with its input edited in the page's JSON editor (refused while
it is not JSON or not valid for the tool's schema, the call still waiting), a call's
question answered and a client tool's output sent by keyboard alone, and the raw events a
click away, at a phone's width. A real worker, `agentq serve` and redis-server."""

from __future__ import annotations

import pytest

from tests.serve.test_serve_console import Page, ended, status_is, submit
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

EDITOR = '.item[data-call-id="call-add"] textarea.approve-input'
APPROVE = 'button.approve[data-call-id="call-add"]'
ERROR = '.item[data-call-id="call-add"] .form-error'


def test_approve_with_edited_input_answer_a_question_and_a_client_tool(
    server: ServeProcess, browser: object
) -> None:
    from selenium.webdriver.common.keys import Keys

    page = Page(browser, server.url)
    page.driver.set_window_size(390, 900)  # a phone's width
    gated = {"type": "function", "name": "add", "needs_approval": True}
    submit(
        server,
        scripted(
            {"tool_calls": [{"id": "call-add", "name": "add", "input": {"a": 1, "b": 2}}]},
            {"text": "done"},
            tools=[gated],
            id="gated",
        ),
    )
    page.open("#/runs/gated")
    page.until(status_is(page, "awaiting"))
    editor = page.find(EDITOR)
    assert '"a": 1' in editor.get_attribute("value")

    # Not JSON, then not the tool's schema: refused in the page, the call still waits.
    editor.clear()
    editor.send_keys("{not json")
    page.find(APPROVE).click()
    page.text(ERROR, "the input is not JSON")
    editor.clear()
    editor.send_keys('{"a": "forty", "b": 2}')
    page.find(APPROVE).click()
    page.text(ERROR, "the edited input is refused")
    assert page.read_text("#run-status") == "awaiting"

    # Valid: the call runs with the edited input.
    editor.clear()
    editor.send_keys('{"a": 40, "b": 2}')
    page.find(APPROVE).click()
    page.until(status_is(page, "succeeded"))
    page.text('.call[data-call-id="call-add"] .output', "42")
    page.click_until("#run-raw", lambda _: page.attribute("#raw", "hidden") is None)
    page.text("#raw-events", '"original_input":{"a":1,"b":2}')
    assert ended(server, "gated")["steps"][0]["tool_results"][0]["output"] == 42
    wide = "return [document.documentElement.scrollWidth, window.innerWidth]"
    scroll, width = page.driver.execute_script(wide)
    assert scroll <= width

    # A call's question, answered by keyboard: type, Tab to "Answer", Enter.
    submit(
        server,
        scripted(
            {"tool_calls": [{"id": "call-ask", "name": "ask_name", "input": {"greeting": "Hi"}}]},
            {"text": "greeted"},
            tools=["ask_name"],
            id="asking",
        ),
    )
    page.open("#/runs/asking")
    page.text("#pending-items", "What is your name?")
    answer = page.find(".item[data-request-id] textarea.answer-input")
    answer.send_keys('{"name": "Ada"}', Keys.TAB)
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)
    page.until(status_is(page, "succeeded"))
    page.text('.call[data-call-id="call-ask"] .output', "Hi, Ada")

    # A client tool's output, by keyboard too.
    submit(
        server,
        scripted(
            {"tool_calls": [{"id": "call-pick", "name": "pick", "input": {}}]},
            {"text": "picked"},
            tools=[{"type": "client", "name": "pick"}],
            id="client",
        ),
    )
    page.open("#/runs/client")
    output = page.find('.item[data-call-id="call-pick"] textarea')
    output.send_keys('{"color": "teal"}', Keys.TAB)
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)
    page.until(status_is(page, "succeeded"))
    page.text('.call[data-call-id="call-pick"] .output', "teal")


def test_a_run_page_opened_before_its_run_exists_follows_it_once_it_does(
    server: ServeProcess, browser: object
) -> None:
    """A schedule's tick names its run before the run is created (and a thread names its
    queued turn): a page opened on such an id used to keep the 404 (the browser does not
    retry a refused event stream) and never showed the run."""
    page = Page(browser, server.url)
    page.open("#/runs/not-yet")
    page.text("#run-status", "no run")
    submit(server, scripted({"text": "here at last"}, tools=[], id="not-yet"))
    page.until(status_is(page, "succeeded"))
    page.text("#steps", "here at last")  # drawn from the event stream, followed again
