"""Structured output over real HTTP: an `agentq serve` process, `agentq worker`
processes and a real redis-server. The run resource and its `finish` event carry the
output; a bad schema is a 422 naming the field."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration

INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"number": {"type": "string"}, "total": {"type": "number"}},
    "required": ["number", "total"],
}
GOOD = {"number": "A-1", "total": 12.5}


def finish_event(server: ServeProcess, run_id: str) -> dict[str, Any]:
    with (
        httpx.Client(timeout=60) as http,
        connect_sse(http, "GET", f"{server.url}/v1/runs/{run_id}/events") as sse,
    ):
        for message in sse.iter_sse():
            if message.event in ("finish", "error"):
                event: dict[str, Any] = json.loads(message.data)
                return event
    raise AssertionError("the stream ended without the run's end")


def test_the_run_resource_and_its_finish_event_carry_the_output(server: ServeProcess) -> None:
    spec = scripted(
        calls(("final_result", {"number": "A-1", "total": "?"})),
        calls(("final_result", GOOD)),
        output={"schema": INVOICE, "mode": "tool"},
    )
    created = httpx.post(f"{server.url}/v1/runs", json=spec, timeout=30)
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    finish = finish_event(server, run_id)
    assert finish["type"] == "finish"
    assert finish["output"] == GOOD
    run = httpx.get(f"{server.url}/v1/runs/{run_id}", timeout=30).json()
    assert run["status"] == "succeeded"
    assert run["output"] == GOOD


def test_output_invalid_is_the_runs_typed_error_with_the_last_attempt(
    server: ServeProcess,
) -> None:
    spec = scripted({"text": "no idea"}, output={"schema": INVOICE, "max_retries": 0})
    created = httpx.post(f"{server.url}/v1/runs", json=spec, timeout=30)
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    assert finish_event(server, run_id)["type"] == "error"
    run = httpx.get(f"{server.url}/v1/runs/{run_id}", timeout=30).json()
    assert run["status"] == "failed"
    assert run["error"]["type"] == "output-invalid"
    assert run["error"]["attempt"] == "no idea"
    assert run["output"] is None


def test_a_bad_schema_is_a_422_naming_the_field(server: ServeProcess) -> None:
    spec = scripted({"text": "x"}, output={"schema": {"type": "object", "required": "total"}})
    bad = httpx.post(f"{server.url}/v1/runs", json=spec, timeout=30)
    assert bad.status_code == 422, bad.text
    error = bad.json()["error"]
    assert error["field"].startswith("output")
    assert "not a valid JSON Schema" in error["message"]
