"""The runs API over real HTTP: an `agentq serve` process, `agentq worker` processes and
a real redis-server. Every transition goes through the Client the service wraps."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from agentq.orchestrator.client import Client
from agentq.orchestrator.tools.workflow_catalogue import WorkflowDefinition
from tests.support.infra import REPO
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def events_of(server: ServeProcess, run_id: str, **headers: str) -> list[dict[str, Any]]:
    """The whole SSE stream of a run, as (id, event, data) checked for consistency."""
    out: list[dict[str, Any]] = []
    with (
        httpx.Client(timeout=60) as http,
        connect_sse(http, "GET", f"{server.url}/v1/runs/{run_id}/events", headers=headers) as sse,
    ):
        assert sse.response.headers["content-type"].startswith("text/event-stream")
        for message in sse.iter_sse():
            data = json.loads(message.data)
            assert message.id == str(data["seq"])
            assert message.event == data["type"]
            out.append(data)
    return out


def wait_for_event(server: ServeProcess, run_id: str, event_type: str) -> dict[str, Any]:
    with (
        httpx.Client(timeout=60) as http,
        connect_sse(http, "GET", f"{server.url}/v1/runs/{run_id}/events") as sse,
    ):
        for message in sse.iter_sse():
            if message.event == event_type:
                event: dict[str, Any] = json.loads(message.data)
                return event
    raise AssertionError(f"the stream ended without a {event_type} event")


def post(server: ServeProcess, path: str, body: Any = None, **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, headers=headers, timeout=30)


def get(server: ServeProcess, path: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{server.url}{path}", params=params, timeout=60)


ADD = scripted(
    {"text": "adding", "tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]},
    {"text": "1+2=3"},
    tools=["add"],
)


def test_submit_follow_and_read_a_run(server: ServeProcess) -> None:
    created = post(server, "/v1/runs", {**ADD, "id": "run-1", "metadata": {"team": "a"}})
    assert created.status_code == 201, created.text
    assert created.json() == {"id": "run-1"}
    again = post(server, "/v1/runs", {**ADD, "id": "run-1", "metadata": {"team": "a"}})
    assert again.status_code == 200
    assert again.json() == {"id": "run-1"}
    other = post(server, "/v1/runs", {**ADD, "id": "run-1"})  # another spec, same id
    assert other.status_code == 409
    assert other.json()["error"]["field"] == "id"

    events = events_of(server, "run-1")
    types = [e["type"] for e in events]
    assert types[0] == "start"
    assert types[-1] == "finish"
    assert "tool-result" in types
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))

    result = get(server, "/v1/runs/run-1", wait=30).json()
    assert result["status"] == "succeeded"
    assert result["text"] == "1+2=3"
    assert result["steps"][0]["tool_results"][0]["output"] == 3


def test_resume_with_last_event_id_and_ndjson(server: ServeProcess) -> None:
    run_id = post(server, "/v1/runs", ADD).json()["id"]
    everything = events_of(server, run_id)
    middle = everything[2]["seq"]
    resumed = events_of(server, run_id, **{"Last-Event-ID": str(middle)})
    assert resumed == everything[middle:]
    by_query = get(server, f"/v1/runs/{run_id}/events", after=middle)
    assert by_query.headers["content-type"].startswith("text/event-stream")

    with httpx.stream(
        "GET",
        f"{server.url}/v1/runs/{run_id}/events",
        headers={"Accept": "application/x-ndjson"},
        timeout=60,
    ) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    assert lines == everything


def test_refused_specs_name_the_field(server: ServeProcess) -> None:
    bad = post(server, "/v1/runs", {"model": "openai", "prompt": "hi"})
    assert bad.status_code == 422
    error = bad.json()["error"]
    assert error["type"] == "invalid_request"
    assert error["field"] == "model"
    assert "provider:name" in error["message"]

    unknown = post(server, "/v1/runs", scripted({"text": "x"}, tools=["nope"]))
    assert unknown.status_code == 422
    assert "nope" in unknown.json()["error"]["message"]

    missing = get(server, "/v1/runs/no-such-run")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found"


async def test_a_run_over_http_names_a_published_workflow(
    redis_url: str, server: ServeProcess
) -> None:
    workflow = {"type": "workflow", "workflow": "adder"}
    call = {"tool_calls": [{"name": "adder", "input": {"x": 2, "y": 3}}]}
    unknown = post(server, "/v1/runs", scripted(call, {"text": "5"}, tools=[workflow]))
    assert unknown.status_code == 422
    assert "no workflow named 'adder' is published" in unknown.json()["error"]["message"]

    adder = json.loads((REPO / "examples" / "adder_workflow.json").read_text())
    del adder["type"]
    async with Client(redis_url) as client:
        await client.fleet.publish_workflows([WorkflowDefinition.model_validate(adder)])
    created = post(server, "/v1/runs", scripted(call, {"text": "5"}, tools=[workflow]))
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    ended = wait_for_event(server, run_id, "finish")
    assert ended["type"] == "finish"
    result = get(server, f"/v1/runs/{run_id}").json()
    assert result["steps"][0]["tool_results"][0]["output"] == 5.0


def test_idempotency_key_returns_the_same_run(server: ServeProcess) -> None:
    first = post(server, "/v1/runs", ADD, **{"Idempotency-Key": "order-42"})
    second = post(server, "/v1/runs", ADD, **{"Idempotency-Key": "order-42"})
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json() == second.json()


def test_approval_404_409_and_client_tool_result(server: ServeProcess) -> None:
    spec = scripted(
        {"tool_calls": [{"id": "c1", "name": "add", "input": {"a": 2, "b": 2}}]},
        {"tool_calls": [{"id": "c2", "name": "pick_color", "input": {}}]},
        {"text": "done"},
        tools=[
            {"type": "function", "name": "add", "needs_approval": True},
            {"type": "client", "name": "pick_color"},
        ],
    )
    run_id = post(server, "/v1/runs", spec).json()["id"]
    wait_for_event(server, run_id, "tool-approval-request")

    unknown = post(server, f"/v1/runs/{run_id}/calls/zzz/approval", {"approved": True})
    assert unknown.status_code == 404, unknown.text
    assert "zzz" in unknown.json()["error"]["message"]
    wrong_kind = post(server, f"/v1/runs/{run_id}/calls/c1/result", {"output": 1})
    assert wrong_kind.status_code == 409
    assert "awaiting-approval" in wrong_kind.json()["error"]["message"]

    approved = post(server, f"/v1/runs/{run_id}/calls/c1/approval", {"approved": True})
    assert approved.status_code == 200, approved.text
    twice = post(server, f"/v1/runs/{run_id}/calls/c1/approval", {"approved": True})
    assert twice.status_code == 409

    wait_for_event(server, run_id, "tool-call")  # c2 … (the stream replays from the start)
    eventually(
        lambda: get(server, f"/v1/runs/{run_id}", wait=0.2).json()["pending"],
        "c2 to wait for its result",
        until=lambda pending: any(p.get("tool_call_id") == "c2" for p in pending),
    )
    posted = post(server, f"/v1/runs/{run_id}/calls/c2/result", {"output": {"color": "teal"}})
    assert posted.status_code == 200, posted.text

    final = get(server, f"/v1/runs/{run_id}", wait=30).json()
    assert final["status"] == "succeeded"
    outputs = [r["output"] for s in final["steps"] for r in s["tool_results"]]
    assert outputs == [4, {"color": "teal"}]
    ended = post(server, f"/v1/runs/{run_id}/calls/c2/result", {"output": 1})
    assert ended.status_code == 409
    assert "ended" in ended.json()["error"]["message"]


def test_an_approval_rule_and_an_edited_input_over_http(server: ServeProcess) -> None:
    spec = scripted(
        {"tool_calls": [{"id": "big", "name": "add", "input": {"a": 500, "b": 1}}]},
        {"text": "done"},
        tools=[{"type": "function", "name": "add", "needs_approval": {"when": "a > `100`"}}],
    )
    bad_rule = {**spec, "tools": [{**spec["tools"][0], "needs_approval": {"when": "a >"}}]}
    refused = post(server, "/v1/runs", bad_rule)
    assert refused.status_code == 422, refused.text
    assert "not a valid JMESPath expression" in refused.json()["error"]["message"]
    run_id = post(server, "/v1/runs", spec).json()["id"]
    wait_for_event(server, run_id, "tool-approval-request")

    path = f"/v1/runs/{run_id}/calls/big/approval"
    invalid = post(server, path, {"approved": True, "input": {"a": "x", "b": 1}})
    assert invalid.status_code == 422, invalid.text
    assert invalid.json()["error"]["message"] == (
        "the edited input is refused: Invalid input for tool 'add': a: 'x' is not of type 'number'"
    )
    assert [p["status"] for p in get(server, f"/v1/runs/{run_id}").json()["pending"]] == [
        "awaiting-approval"
    ]
    edited = post(server, path, {"approved": True, "input": {"a": 50, "b": 1}})
    assert edited.status_code == 200, edited.text

    final = get(server, f"/v1/runs/{run_id}", wait=30).json()
    assert final["status"] == "succeeded"
    assert [r["output"] for r in final["steps"][0]["tool_results"]] == [51]
    (response,) = [e for e in events_of(server, run_id) if e["type"] == "tool-approval-response"]
    assert (response["original_input"], response["input"]) == (
        {"a": 500, "b": 1},
        {"a": 50, "b": 1},
    )


def test_list_filter_and_page(server: ServeProcess) -> None:
    for n in range(5):
        spec = {**ADD, "id": f"list-{n}", "metadata": {"batch": "x" if n % 2 else "y"}}
        assert post(server, "/v1/runs", spec).status_code == 201
    for n in range(5):
        assert get(server, f"/v1/runs/list-{n}", wait=30).json()["status"] == "succeeded"

    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = get(server, "/v1/runs", **params).json()
        seen += [r["id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"list-{n}" for n in reversed(range(5))]

    odd = get(server, "/v1/runs", **{"metadata.batch": "x", "status": "succeeded"}).json()
    assert [r["id"] for r in odd["runs"]] == ["list-3", "list-1"]
    assert odd["runs"][0]["model"] == "scripted:scripted"
    bad = get(server, "/v1/runs", cursor="garbage")
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "cursor"


def test_cancel_service_endpoints_and_openapi(server: ServeProcess) -> None:
    spec = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 1}}]},
        {"text": "never"},
        tools=["add"],
    )
    spec["tools"][0]["needs_approval"] = True
    run_id = post(server, "/v1/runs", spec).json()["id"]
    wait_for_event(server, run_id, "tool-approval-request")
    cancelled = post(server, f"/v1/runs/{run_id}/cancel", {"reason": "enough"})
    assert cancelled.json() == {"id": run_id, "outcome": "cancelled"}
    assert events_of(server, run_id)[-1]["type"] == "abort"
    assert post(server, "/v1/runs/nope/cancel").status_code == 404

    assert get(server, "/healthz").json() == {"status": "ok"}
    assert get(server, "/readyz").json() == {"status": "ready"}
    fleet = get(server, "/v1/fleet").json()
    assert fleet["workers"] == 1
    assert set(fleet["queues"]) >= {"model", "tools"}
    schema = get(server, "/openapi.json").json()
    assert "/v1/runs/{run_id}/events" in schema["paths"]
    assert "/v1/agents/{name}/chat" in schema["paths"]
    assert get(server, "/docs").status_code == 200


def test_heartbeats_and_graceful_shutdown(redis_url: str, server: ServeProcess) -> None:
    spec = scripted({"tool_calls": [{"name": "add", "input": {"a": 1, "b": 1}}]}, tools=["add"])
    spec["tools"][0]["needs_approval"] = True
    run_id = post(server, "/v1/runs", spec).json()["id"]
    lines: list[str] = []
    heartbeat = threading.Event()
    ended = threading.Event()

    errors: list[BaseException] = []

    def read() -> None:
        try:
            with httpx.stream("GET", f"{server.url}/v1/runs/{run_id}/events", timeout=60) as r:
                for line in r.iter_lines():
                    lines.append(line)
                    if line.startswith(":"):
                        heartbeat.set()
        except httpx.HTTPError as exc:  # a stream cut mid-body is not a graceful end
            errors.append(exc)
        ended.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert heartbeat.wait(30), lines  # the run is parked: only heartbeats flow
    # uvicorn re-raises the signal once it has shut down gracefully.
    assert server.terminate() in (0, -15), server.log()
    assert ended.wait(30)
    assert not errors, errors
    assert any(line.startswith("event: tool-approval-request") for line in lines)


def test_many_streams_of_one_run_share_a_feed_without_gaps(server: ServeProcess) -> None:
    spec = scripted(
        {"text": "first", "tool_calls": [{"id": "c1", "name": "add", "input": {"a": 1, "b": 1}}]},
        {"text": "second"},
        tools=["add"],
    )
    spec["tools"][0]["needs_approval"] = True
    run_id = post(server, "/v1/runs", spec).json()["id"]
    before = events_of_until(server, run_id, "tool-approval-request")
    results: dict[int, list[dict[str, Any]]] = {}
    joined = threading.Barrier(7)

    def read(after: int) -> None:
        headers = {"Last-Event-ID": str(after)} if after else {}
        out: list[dict[str, Any]] = []
        with (
            httpx.Client(timeout=60) as http,
            connect_sse(
                http, "GET", f"{server.url}/v1/runs/{run_id}/events", headers=headers
            ) as sse,
        ):
            first = True
            for message in sse.iter_sse():
                out.append(json.loads(message.data))
                if first:
                    first = False
                    joined.wait(30)
        results[after] = out

    starts = [0, 1, 2, 3, 4, len(before) - 1]
    readers = [threading.Thread(target=read, args=(a,), daemon=True) for a in starts]
    for reader in readers:
        reader.start()
    joined.wait(30)  # every stream has caught up and follows the live feed
    assert post(server, f"/v1/runs/{run_id}/calls/c1/approval", {"approved": True}).is_success
    for reader in readers:
        reader.join(60)
    everything = events_of(server, run_id)
    assert everything[-1]["type"] == "finish"
    for after in starts:
        assert results[after] == everything[after:], after


def events_of_until(server: ServeProcess, run_id: str, event_type: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with (
        httpx.Client(timeout=60) as http,
        connect_sse(http, "GET", f"{server.url}/v1/runs/{run_id}/events") as sse,
    ):
        for message in sse.iter_sse():
            out.append(json.loads(message.data))
            if message.event == event_type:
                return out
    raise AssertionError(f"no {event_type} event")


def test_a_delayed_run_over_http(server: ServeProcess) -> None:
    later = datetime.fromtimestamp(time.time() + 3600, UTC).isoformat(timespec="seconds")
    created = httpx.post(
        f"{server.url}/v1/runs", params={"start_at": later}, json=scripted({"text": "x"})
    )
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    run = get(server, f"/v1/runs/{run_id}").json()
    assert run["status"] == "scheduled"
    assert run["start_at"] == datetime.fromisoformat(later).timestamp()
    assert post(server, f"/v1/runs/{run_id}/cancel").json()["outcome"] == "cancelled"
    assert get(server, f"/v1/runs/{run_id}").json()["status"] == "cancelled"

    for bad, says in [("tomorrow", "ISO 8601"), ("2020-01-01T00:00Z", "in the past")]:
        refused = httpx.post(
            f"{server.url}/v1/runs", params={"start_at": bad}, json=scripted({"text": "x"})
        )
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert (error["type"], error["field"]) == ("invalid_request", "start_at")
        assert says in error["message"]
        assert "\n" not in error["message"]
