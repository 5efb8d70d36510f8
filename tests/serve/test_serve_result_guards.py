"""Results that come from outside a worker's tool job pass the run's `tool_output`
guards too: a remote service's leased call and a client tool's result posted over HTTP.
`agentq serve` registers no guard, so it asks the worker that did (a `hook` job); a
trip is the same `denied` tool error and `guardrail-tripped` event as a worker's. A
real `agentq serve` on loopback, a real worker, redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.remote_tools import remote_tools_file
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

GUARDS = "tests/support/guardrail_hooks.py"
ENDED = ("succeeded", "failed", "cancelled")
TRIPPED = "tool_output guardrail 'not_thirteen' tripped: an unlucky number"


@pytest.fixture
def server(redis_url: str) -> Iterator[ServeProcess]:
    """A worker that registered the guards, and a server that did not."""
    worker = WorkerProcess(redis_url, "--tools", TOOLS, "--tools", GUARDS)
    wait_ready(worker)
    process = ServeProcess(
        redis_url, env={"AGENTQ_REMOTE_TOOLS": remote_tools_file(), "AGENTQ_LEASE_S": "30"}
    )
    yield process
    process.stop()
    worker.stop()


def post(server: ServeProcess, path: str, body: Any) -> httpx.Response:
    response = httpx.post(f"{server.url}{path}", json=body, timeout=60)
    assert response.status_code in (200, 201), response.text
    return response


def finished(server: ServeProcess, run_id: str) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        got: dict[str, Any] = httpx.get(
            f"{server.url}/v1/runs/{run_id}", params={"wait": 5}, timeout=30
        ).json()
        return got

    return eventually(run, f"run {run_id} to end", 60, until=lambda r: r["status"] in ENDED)


def trips(server: ServeProcess, run_id: str) -> list[tuple[str, str, str]]:
    response = httpx.get(
        f"{server.url}/v1/runs/{run_id}/events",
        headers={"accept": "application/x-ndjson"},
        timeout=30,
    )
    seen = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    return [
        (e["stage"], e["guardrail"], e["tool_name"])
        for e in seen
        if e["type"] == "guardrail-tripped"
    ]


def guarded_run(tool: dict[str, Any]) -> dict[str, Any]:
    return scripted(
        calls((tool["name"], {"text": "hi"})),
        {"text": "done"},
        tools=[tool],
        guardrails={"tool_output": ["not_thirteen"]},
    )


def test_a_remote_service_s_result_is_guarded(server: ServeProcess) -> None:
    run_id = post(server, "/v1/runs", guarded_run({"type": "remote", "name": "shout"})).json()["id"]
    leased = post(server, "/v1/queues/node-tools/lease", {"max": 1, "wait_s": 30, "lease_s": 30})
    (one,) = leased.json()["calls"]
    post(server, f"/v1/leases/{one['lease']['id']}/result", {"output": 13})
    run = finished(server, run_id)
    assert run["status"] == "succeeded", run
    (result,) = run["steps"][0]["tool_results"]
    assert (result["output"], result["is_error"], result["error_kind"]) == (TRIPPED, True, "denied")
    assert trips(server, run_id) == [("tool_output", "not_thirteen", "shout")]


def test_a_client_tool_s_result_posted_over_http_is_guarded(server: ServeProcess) -> None:
    run_id = post(server, "/v1/runs", guarded_run({"type": "client", "name": "ask"})).json()["id"]

    def pending() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = httpx.get(f"{server.url}/v1/runs/{run_id}", timeout=30).json()[
            "pending"
        ]
        return got

    (call,) = eventually(pending, "the client call to wait", 30, until=bool)
    post(server, f"/v1/runs/{run_id}/calls/{call['tool_call_id']}/result", {"output": 13})
    run = finished(server, run_id)
    assert run["status"] == "succeeded", run
    (result,) = run["steps"][0]["tool_results"]
    assert (result["output"], result["is_error"], result["error_kind"]) == (TRIPPED, True, "denied")
    assert trips(server, run_id) == [("tool_output", "not_thirteen", "ask")]
