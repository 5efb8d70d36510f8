"""Keys never travel in URLs: the dashboard's session cookie, short-lived tokens, and an
access log that holds neither. A real `agentq serve`, a real chromium, the MCP SDK."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

KEY = "key-acme-long-lived-0123456789"
OTHER = "key-globex-long-lived-9876543210"


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    lines = f"{hash_key(KEY)} acme; {hash_key(OTHER)} globex"
    # info: uvicorn's access log is on, every request line is written to the log.
    process = ServeProcess(
        redis_url, "--mcp", "--log-level", "info", env={"AGENTQ_API_KEYS": lines}
    )
    yield process
    process.stop()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def mint(server: ServeProcess, body: dict[str, object], key: str = KEY) -> str:
    response = httpx.post(f"{server.url}/v1/tokens", json=body, headers=bearer(key), timeout=30)
    assert response.status_code == 201, response.text
    token = response.json()["token"]
    assert isinstance(token, str)
    return token


def test_a_session_leaves_no_key_or_token_in_any_log_line(
    keyed: ServeProcess, browser: object
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as when
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    url = keyed.url
    # A key in the query string is refused everywhere, whatever else the request carries.
    assert httpx.get(f"{url}/v1/runs?key={KEY}", timeout=30).status_code == 401
    spec = scripted(
        {"text": "adding", "tool_calls": [{"id": "c1", "name": "add", "input": {"a": 1, "b": 2}}]},
        {"text": "1+2=3"},
        tools=[{"type": "function", "name": "add", "needs_approval": True}],
        id="live-run",
    )
    created = httpx.post(f"{url}/v1/runs", json=spec, headers=bearer(KEY), timeout=30)
    assert created.status_code == 201
    run_id = created.json()["id"]  # "live-run" in acme's namespace

    # The dashboard: the key typed once becomes a cookie; its live view (EventSource)
    # follows the run as it parks and, once approved, ends.
    browser.get(url + "/")
    field = browser.find_element(By.ID, "api-key")
    field.send_keys(KEY)
    browser.execute_script("arguments[0].dispatchEvent(new Event('change'))", field)
    wait = WebDriverWait(browser, 60)
    wait.until(
        lambda b: b.find_element(By.ID, "api-key").get_attribute("placeholder") == "signed in"
    )
    cookie = browser.get_cookie("agentq_session")
    assert cookie is not None
    assert cookie["httpOnly"]
    assert cookie["sameSite"] == "Strict"
    assert browser.execute_script("return localStorage.length") == 0
    browser.get(f"{url}/#/runs/{run_id}")
    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "awaiting"))
    approved = httpx.post(
        f"{url}/v1/runs/{run_id}/calls/c1/approval",
        json={"approved": True},
        headers=bearer(KEY),
        timeout=30,
    )
    assert approved.status_code == 200, approved.text
    wait.until(when.text_to_be_present_in_element((By.ID, "steps"), "1+2=3"))
    # The session cookie is the dashboard's alone: not a header or URL credential.
    session = cookie["value"]
    assert httpx.get(f"{url}/v1/runs", headers=bearer(session), timeout=30).status_code == 401

    # An EventSource elsewhere: a token for the one run, in the URL.
    events = mint(keyed, {"run": run_id})
    with httpx.stream("GET", f"{url}/v1/runs/{run_id}/events?token={events}", timeout=30) as r:
        assert r.status_code == 200
        assert any(line.startswith("event: finish") for line in r.iter_lines())
    assert httpx.get(f"{url}/v1/runs?token={events}", timeout=30).status_code == 403
    assert httpx.get(f"{url}/v1/runs/{run_id}?token=aqt_forged.x", timeout=30).status_code == 401

    # An MCP client that cannot send headers: an mcp token in the URL.
    mcp = mint(keyed, {"purpose": "mcp"})

    async def call_add() -> str:
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=60.0)) as http,
            streamable_http_client(f"{url}/mcp?token={mcp}", http_client=http) as (read, write),
            ClientSession(read, write) as mcp_session,
        ):
            await mcp_session.initialize()
            result = await mcp_session.call_tool("add", {"a": 2, "b": 5})
            return str(result.content[0].model_dump().get("text"))

    import anyio

    assert anyio.run(call_add) == "7.0"
    assert httpx.get(f"{url}/v1/runs?token={mcp}", timeout=30).status_code == 403
    # A token never mints another token.
    again = httpx.post(f"{url}/v1/tokens", json={"purpose": "mcp"}, headers=bearer(mcp), timeout=30)
    assert again.status_code == 403

    keyed.stop()
    lines = keyed.log().splitlines()
    # The dashboard's EventSource, on its cookie (no credential in its URL), was answered.
    assert any(f'"GET /v1/runs/{run_id}/events HTTP/1.1" 200' in line for line in lines)
    assert any("token=REDACTED" in line for line in lines)
    for secret in (KEY, session, events, mcp):
        leaked = [line for line in lines if secret in line or secret[:40] in line]
        assert leaked == [], leaked


def test_a_revoked_token_gets_401_on_its_next_request(keyed: ServeProcess) -> None:
    url = keyed.url
    created = httpx.post(f"{url}/v1/runs", json=scripted({"text": "hi"}), headers=bearer(KEY))
    run_id = created.json()["id"]

    def minted(body: dict[str, object]) -> tuple[str, str]:
        response = httpx.post(f"{url}/v1/tokens", json=body, headers=bearer(KEY), timeout=30)
        assert response.status_code == 201, response.text
        return response.json()["token"], response.json()["id"]

    def read(token: str) -> httpx.Response:
        return httpx.get(f"{url}/v1/runs/{run_id}", params={"token": token}, timeout=30)

    def revoke(token_id: str, key: str = KEY) -> httpx.Response:
        return httpx.delete(f"{url}/v1/tokens/{token_id}", headers=bearer(key), timeout=30)

    token, token_id = minted({"run": run_id})
    kept, _ = minted({"run": run_id})
    assert read(token).status_code == 200
    # Another key cannot end it: to that key the token is unknown.
    assert revoke(token_id, OTHER).status_code == 404
    assert read(token).status_code == 200
    # Nor can the token itself: tokens are ended with the key that minted them.
    refused = httpx.delete(f"{url}/v1/tokens/{token_id}", params={"token": token}, timeout=30)
    assert refused.status_code == 403, refused.text

    assert revoke(token_id).status_code == 204
    gone = read(token)
    assert gone.status_code == 401, gone.text
    assert "revoked" in gone.json()["error"]["message"]
    assert revoke(token_id).status_code == 404  # ended already
    assert read(kept).status_code == 200  # the key's other tokens live on

    # The MCP door checks the same: a revoked mcp token opens no session.
    mcp, mcp_id = minted({"purpose": "mcp"})
    assert revoke(mcp_id).status_code == 204
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    opened = httpx.post(f"{url}/mcp", params={"token": mcp}, json=hello, headers=accept)
    assert opened.status_code == 401, opened.text

    # Signing out ends the session itself: a copy of its cookie is worth nothing after.
    signed_in = httpx.post(f"{url}/v1/session", json={"key": KEY}, timeout=30)
    cookie = {"agentq_session": signed_in.cookies["agentq_session"]}
    assert httpx.get(f"{url}/v1/runs", cookies=cookie, timeout=30).status_code == 200
    assert httpx.delete(f"{url}/v1/session", cookies=cookie, timeout=30).status_code == 204
    assert httpx.get(f"{url}/v1/runs", cookies=cookie, timeout=30).status_code == 401
