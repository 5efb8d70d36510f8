"""Threads over real HTTP: a run continues its thread, one run holds the turn (409), and a
thread is invisible and unusable with another tenant's key, whatever name is tried."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentq.orchestrator.core.run_ids import tenant_run_id
from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

KEYS = {"acme": "key-acme-secret", "globex": "key-globex-secret"}
SECRET = "acme's card ends in 4242"


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(f"{hash_key(key)} {tenant}" for tenant, key in KEYS.items())
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": lines})
    yield process
    process.stop()


# What each model step reports (the scripted provider reports none unless told).
USAGE = {"input_tokens": 30, "output_tokens": 12}  # 42 tokens a step


def call(server: ServeProcess, method: str, path: str, who: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)


def run_to_end(server: ServeProcess, who: str, spec: dict[str, Any]) -> dict[str, Any]:
    created = call(server, "POST", "/v1/runs", who, json=spec)
    assert created.status_code == 201, created.text
    done = call(server, "GET", f"/v1/runs/{created.json()['id']}", who, params={"wait": 30})
    assert done.json()["status"] == "succeeded", done.text
    body: dict[str, Any] = done.json()
    return body


def said(messages: list[dict[str, Any]]) -> str:
    return repr(messages)


def test_a_thread_continues_and_is_its_tenants_alone(keyed: ServeProcess) -> None:
    made = call(keyed, "POST", "/v1/threads", "acme", json={"id": "support"})
    assert made.status_code == 201
    assert made.json() == {"id": "support"}
    first = run_to_end(
        keyed,
        "acme",
        scripted({"text": "noted", "usage": USAGE}, prompt=SECRET, thread_id="support"),
    )
    second = run_to_end(
        keyed, "acme", scripted({"text": "ok", "usage": USAGE}, prompt="and?", thread_id="support")
    )
    view = call(keyed, "GET", "/v1/threads/support", "acme").json()
    assert view["status"] == "idle"
    assert [r["id"] for r in view["runs"]] == [first["id"], second["id"]]
    assert SECRET in said(view["messages"])
    assert "and?" in said(view["messages"])
    # Its usage: its two runs', summed.
    assert view["usage"]["total_tokens"] == 2 * 42
    assert view["usage"]["input_tokens"] == first["usage"]["input_tokens"] * 2

    # Another tenant: no thread of that name, nor under acme's namespaced name.
    for path in ["/v1/threads/support", f"/v1/threads/{tenant_run_id('acme', 'support')}"]:
        other = call(keyed, "GET", path, "globex")
        assert other.status_code == 404, (path, other.text)
        assert SECRET not in other.text
    assert call(keyed, "GET", "/v1/threads", "globex").json() == {"threads": []}
    # Submitting on the same name starts globex's own thread, from nothing of acme's.
    theirs = run_to_end(
        keyed, "globex", scripted({"text": "hi"}, prompt="mine", thread_id="support")
    )
    own = call(keyed, "GET", "/v1/threads/support", "globex").json()
    assert [r["id"] for r in own["runs"]] == [theirs["id"]]
    assert SECRET not in said(own["messages"])
    assert "mine" in said(own["messages"])
    namespaced = call(
        keyed,
        "POST",
        "/v1/runs",
        "globex",
        json=scripted({"text": "x"}, thread_id=tenant_run_id("acme", "support")),
    )
    assert namespaced.status_code == 422, namespaced.text
    # acme's thread is as it was; globex's run reached it in no way.
    again = call(keyed, "GET", "/v1/threads/support", "acme").json()
    assert [r["id"] for r in again["runs"]] == [first["id"], second["id"]]
    assert [t["id"] for t in call(keyed, "GET", "/v1/threads", "acme").json()["threads"]] == [
        "support"
    ]


def test_a_new_run_while_the_threads_run_goes_on_is_a_409(keyed: ServeProcess) -> None:
    parked = scripted(
        {"tool_calls": [{"name": "ask_user", "input": {}, "id": "c1"}]},
        {"text": "done"},
        tools=[{"type": "client", "name": "ask_user"}],
        thread_id="busy",
    )
    busy = call(keyed, "POST", "/v1/runs", "acme", json=parked).json()["id"]
    refused = call(
        keyed, "POST", "/v1/runs", "acme", json=scripted({"text": "x"}, thread_id="busy")
    )
    assert refused.status_code == 409, refused.text
    assert "in progress" in refused.json()["error"]["message"]
    view = call(keyed, "GET", "/v1/threads/busy", "acme").json()
    assert [r["id"] for r in view["runs"]] == [busy]


def test_a_thread_that_enqueues_answers_202_and_runs_it_after(keyed: ServeProcess) -> None:
    made = call(keyed, "POST", "/v1/threads", "acme", json={"id": "q", "double_texting": "enqueue"})
    assert made.status_code == 201
    parked = scripted(
        {"tool_calls": [{"name": "ask_user", "input": {}, "id": "c1"}]},
        {"text": "done"},
        tools=[{"type": "client", "name": "ask_user"}],
        thread_id="q",
    )
    first = call(keyed, "POST", "/v1/runs", "acme", json=parked).json()["id"]
    queued = call(keyed, "POST", "/v1/runs", "acme", json=scripted({"text": "next"}, thread_id="q"))
    assert queued.status_code == 202, queued.text
    assert queued.json()["queued"] is True
    second = queued.json()["id"]
    view = call(keyed, "GET", "/v1/threads/q", "acme").json()
    assert view["queued"] == [second]
    assert view["double_texting"] == "enqueue"
    # The queued run is there at once: its status, its owner's alone.
    assert call(keyed, "GET", f"/v1/runs/{second}", "acme").json()["status"] == "queued"
    assert call(keyed, "GET", f"/v1/runs/{second}", "globex").status_code == 404
    assert call(keyed, "GET", "/v1/threads/q", "globex").status_code == 404
    eventually(
        lambda: call(keyed, "GET", f"/v1/runs/{first}", "acme").json()["status"] == "awaiting",
        "the first run parks",
    )
    posted = call(keyed, "POST", f"/v1/runs/{first}/calls/c1/result", "acme", json={"output": 1})
    assert posted.status_code == 200, posted.text
    done = call(keyed, "GET", f"/v1/runs/{second}", "acme", params={"wait": 30}).json()
    assert done["status"] == "succeeded"
    assert [r["id"] for r in call(keyed, "GET", "/v1/threads/q", "acme").json()["runs"]] == [
        first,
        second,
    ]
