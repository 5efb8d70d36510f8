"""A lease carries what a `@tool`'s ToolContext has (run, step, call, attempt, idempotency
key, deadline, tenant), and a lease that lapses re-delivers the same call: the next attempt,
the same key. Against a real `agentq serve` on loopback, real workers and redis-server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentq.orchestrator.core.run_ids import call_idempotency_key
from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess
from tests.support.remote_tools import remote_tools_file
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TENANT_KEY, WORKER_KEY = "key-acme", "key-node-worker"
KEY_LINES = f"{hash_key(TENANT_KEY)} acme; {hash_key(WORKER_KEY)} worker:node queue:node-tools"
RUN = scripted(
    {"tool_calls": [{"name": "shout", "input": {"text": "hi"}, "id": "c1"}]},
    {"text": "done"},
    tools=[{"type": "remote", "name": "shout", "timeout_s": 120}],
)


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = ServeProcess(
        redis_url,
        env={
            "AGENTQ_API_KEYS": KEY_LINES,
            "AGENTQ_REMOTE_TOOLS": remote_tools_file(),
            "AGENTQ_LEASE_S": "1",
        },
    )
    yield process
    process.stop()


def post(server: ServeProcess, path: str, key: str, body: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(f"{server.url}{path}", json=body, headers=headers, timeout=60)


def lease(server: ServeProcess, lease_s: float) -> dict[str, Any]:
    body = {"max": 1, "wait_s": 30, "lease_s": lease_s}
    leased = post(server, "/v1/queues/node-tools/lease", WORKER_KEY, body)
    assert leased.status_code == 200, leased.text
    (one,) = leased.json()["calls"]
    got: dict[str, Any] = one
    return got


def test_a_lease_carries_the_calls_context_and_keeps_its_key_across_deliveries(
    keyed: ServeProcess,
) -> None:
    created = post(keyed, "/v1/runs", TENANT_KEY, RUN)
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]

    first = lease(keyed, lease_s=1)  # never renewed: it lapses, the call is re-delivered
    call = first["call"]
    key = call_idempotency_key(run_id, 0, "c1")
    assert (call["run_id"], call["step"], call["call_id"]) == (run_id, 0, "c1")
    assert (call["attempt"], call["idempotency_key"], call["tenant"]) == (1, key, "acme")
    assert time.time() < call["deadline_at"] <= time.time() + 120

    second = lease(keyed, lease_s=60)
    assert second["lease"]["id"] != first["lease"]["id"]
    again = second["call"]
    assert (again["attempt"], again["idempotency_key"], again["tenant"]) == (2, key, "acme")
    answered = post(keyed, f"/v1/leases/{second['lease']['id']}/result", WORKER_KEY, {"output": 1})
    assert answered.status_code == 200, answered.text

    def run() -> dict[str, Any]:
        got: dict[str, Any] = httpx.get(
            f"{keyed.url}/v1/runs/{run_id}",
            params={"wait": 5},
            headers={"Authorization": f"Bearer {TENANT_KEY}"},
            timeout=30,
        ).json()
        return got

    ended = eventually(run, "the run to end", 60, until=lambda r: r["status"] != "running")
    assert ended["status"] == "succeeded", ended
