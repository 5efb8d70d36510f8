"""Forwarded tool calls are a worker's business, not a tenant's (issue 25, item 1).

Adversarial, against a real `agentq serve` on loopback and a real redis-server: tenant A's
run forwards a call carrying a secret to a remote queue; every lease endpoint is tried
with no key, tenant A's and tenant B's keys, a worker key for another queue and another
worker key for the same queue. Only the worker key that took the lease sees the call and
answers it, and A's run ends with that worker's output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess, run_cli
from tests.support.receiver import Receiver
from tests.support.remote_tools import remote_tools_file
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

KEYS = {
    "tenant_a": "key-tenant-a",
    "tenant_b": "key-tenant-b",
    "worker": "key-node-worker",
    "twin": "key-node-worker-2",  # another worker key for the same queue
    "elsewhere": "key-other-worker",  # a worker key for another queue
}
KEY_LINES = "; ".join(
    [
        f"{hash_key(KEYS['tenant_a'])} acme",
        f"{hash_key(KEYS['tenant_b'])} globex",
        f"{hash_key(KEYS['worker'])} worker:node queue:node-tools",
        f"{hash_key(KEYS['twin'])} worker:node-2 queue:node-tools",
        f"{hash_key(KEYS['elsewhere'])} worker:other queue:other-tools",
    ]
)
SECRET = "secret of tenant A"
RUN = scripted(
    calls(("shout", {"text": SECRET})),
    {"text": "done"},
    tools=[{"type": "remote", "name": "shout"}],
)
ENDED = ("succeeded", "failed", "cancelled")


def post(server: ServeProcess, path: str, who: str | None, body: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}"} if who else {}
    return httpx.post(f"{server.url}{path}", json=body, headers=headers, timeout=60)


def serve(redis_url: str, remote_tools: str) -> ServeProcess:
    return ServeProcess(
        redis_url,
        env={
            "AGENTQ_API_KEYS": KEY_LINES,
            "AGENTQ_REMOTE_TOOLS": remote_tools,
            "AGENTQ_LEASE_S": "2",
        },
    )


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = serve(redis_url, remote_tools_file())
    yield process
    process.stop()


def submit(server: ServeProcess) -> str:
    created = post(server, "/v1/runs", "tenant_a", RUN)
    assert created.status_code == 201, created.text
    run_id: str = created.json()["id"]
    return run_id


def finished(server: ServeProcess, run_id: str) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        got: dict[str, Any] = httpx.get(
            f"{server.url}/v1/runs/{run_id}",
            params={"wait": 5},
            headers={"Authorization": f"Bearer {KEYS['tenant_a']}"},
            timeout=30,
        ).json()
        return got

    return eventually(run, f"run {run_id} to end", 60, until=lambda r: r["status"] in ENDED)


def tool_events(server: ServeProcess, run_id: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{server.url}/v1/runs/{run_id}/events",
        headers={
            "Authorization": f"Bearer {KEYS['tenant_a']}",
            "accept": "application/x-ndjson",
        },
        timeout=30,
    )
    seen = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    return [e for e in seen if e["type"].startswith("tool-")]


def assert_refused(response: httpx.Response, status: int, error_type: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["type"] == error_type, response.text
    assert SECRET not in response.text


def test_only_the_worker_key_that_took_a_lease_sees_and_answers_the_call(
    keyed: ServeProcess,
) -> None:
    run_id = submit(keyed)
    lease_path = "/v1/queues/node-tools/lease"
    ask = {"max": 10, "wait_s": 0}
    assert_refused(post(keyed, lease_path, None, ask), 401, "unauthorized")
    for tenant in ("tenant_a", "tenant_b"):  # a tenant key never leases, its own calls neither
        refused = post(keyed, lease_path, tenant, ask)
        assert_refused(refused, 403, "forbidden")
        assert "worker key" in refused.json()["error"]["message"]
    # A worker key reads and writes no tenant's runs.
    read = httpx.get(
        f"{keyed.url}/v1/runs/{run_id}",
        headers={"Authorization": f"Bearer {KEYS['worker']}"},
        timeout=30,
    )
    assert_refused(read, 403, "forbidden")
    assert_refused(post(keyed, "/v1/runs", "worker", RUN), 403, "forbidden")
    refused = post(keyed, lease_path, "elsewhere", ask)
    assert_refused(refused, 403, "forbidden")
    assert "may not lease queue 'node-tools'" in refused.json()["error"]["message"]

    taken = post(keyed, lease_path, "worker", {"max": 1, "wait_s": 30, "lease_s": 60})
    assert taken.status_code == 200, taken.text
    ((leased),) = taken.json()["calls"]
    assert leased["call"]["input"] == {"text": SECRET}
    lease_id = leased["lease"]["id"]

    forged = {
        "heartbeat": {"lease_s": 60},
        "progress": {"progress": "FORGED"},
        "result": {"output": "FORGED"},
    }
    for endpoint, body in forged.items():
        path = f"/v1/leases/{lease_id}/{endpoint}"
        assert_refused(post(keyed, path, None, body), 401, "unauthorized")
        for tenant in ("tenant_a", "tenant_b"):
            assert_refused(post(keyed, path, tenant, body), 403, "forbidden")
        # Another worker's key learns nothing of the lease: to it, no such lease exists.
        for other in ("elsewhere", "twin"):
            assert_refused(post(keyed, path, other, body), 404, "not_found")

    beat = post(keyed, f"/v1/leases/{lease_id}/heartbeat", "worker", {"lease_s": 60})
    assert beat.status_code == 200, beat.text
    answered = post(keyed, f"/v1/leases/{lease_id}/result", "worker", {"output": "HONEST"})
    assert answered.json() == {"recorded": True}, answered.text
    # How the lease ended is its holder's to know; to anyone else it is unknown.
    late = {"output": "LATE"}
    again = post(keyed, f"/v1/leases/{lease_id}/result", "worker", late)
    assert_refused(again, 409, "lease_answered")
    assert "the call already has its result" in again.json()["error"]["message"]
    assert "re-delivered" not in again.text
    stranger = post(keyed, f"/v1/leases/{lease_id}/result", "twin", late)
    assert_refused(stranger, 404, "not_found")
    assert "re-delivered" not in stranger.text

    assert finished(keyed, run_id)["status"] == "succeeded"
    seen = tool_events(keyed, run_id)
    assert [e["output"] for e in seen if e["type"] == "tool-result"] == ["HONEST"]
    assert "FORGED" not in str(seen)


def test_a_lapsed_lease_says_so_to_its_holder_only_and_its_call_goes_back(
    keyed: ServeProcess,
) -> None:
    run_id = submit(keyed)
    lease_path = "/v1/queues/node-tools/lease"
    taken = post(keyed, lease_path, "worker", {"max": 1, "wait_s": 30, "lease_s": 1})
    ((leased),) = taken.json()["calls"]
    lease_id = leased["lease"]["id"]
    progress = f"/v1/leases/{lease_id}/progress"
    lapsed = eventually(
        lambda: post(keyed, progress, "worker", {"progress": "working"}),
        "the lease to lapse unrenewed",
        60,
        until=lambda r: r.status_code != 200,
    )
    assert_refused(lapsed, 410, "lease_lapsed")
    late = post(keyed, f"/v1/leases/{lease_id}/result", "worker", {"output": "LATE"})
    assert_refused(late, 410, "lease_lapsed")
    assert "went back to its queue" in late.json()["error"]["message"]
    assert_refused(post(keyed, progress, "twin", {"progress": "x"}), 404, "not_found")

    # What the holder was told is true: the call is leased again, and answered once.
    again = post(keyed, lease_path, "worker", {"max": 1, "wait_s": 30, "lease_s": 60})
    ((second),) = again.json()["calls"]
    assert second["call"]["attempt"] == 2
    answered = post(
        keyed, f"/v1/leases/{second['lease']['id']}/result", "worker", {"output": "HONEST"}
    )
    assert answered.json() == {"recorded": True}, answered.text
    assert finished(keyed, run_id)["status"] == "succeeded"
    seen = tool_events(keyed, run_id)
    assert [e["output"] for e in seen if e["type"] == "tool-result"] == ["HONEST"]


def test_a_pushed_call_kept_by_its_receiver_is_answered_by_its_queue_key_only(
    redis_url: str, worker: WorkerProcess
) -> None:
    """A receiver that answers 202 keeps the lease: the lease is held by the queue, so any
    worker key of that queue reports it, and no other key does."""
    receiver = Receiver([(202, {})])
    hook = {"url": receiver.url, "secret_env": "PUSH_SECRET"}
    server = ServeProcess(
        redis_url,
        env={
            "AGENTQ_API_KEYS": KEY_LINES,
            "AGENTQ_REMOTE_TOOLS": remote_tools_file(**{"node-tools": hook}),
            "PUSH_SECRET": "s3cret",
        },
    )
    try:
        run_id = submit(server)
        pushed = json.loads(receiver.wait_for(1)[0][1])
        result = f"/v1/leases/{pushed['lease']['id']}/result"
        assert_refused(post(server, result, "tenant_b", {"output": "FORGED"}), 403, "forbidden")
        assert_refused(post(server, result, "elsewhere", {"output": "FORGED"}), 404, "not_found")
        answered = post(server, result, "twin", {"output": "PUSHED"})
        assert answered.json() == {"recorded": True}, answered.text
        assert finished(server, run_id)["status"] == "succeeded"
        outputs = [e["output"] for e in tool_events(server, run_id) if e["type"] == "tool-result"]
        assert outputs == ["PUSHED"]
    finally:
        server.stop()
        receiver.close()


A_HASH = hash_key(KEYS["tenant_a"])


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"AGENTQ_API_KEYS": f"{A_HASH} acme workers"}, "entry 1: a tenant key cannot hold"),
        (
            {"AGENTQ_API_KEYS": f"{A_HASH} acme queue:node-tools"},
            "entry 1: a tenant key cannot hold 'queue:node-tools'",
        ),
        (
            {"AGENTQ_API_KEYS": f"{A_HASH} worker:node"},
            "entry 1: a worker key names the queues it may lease",
        ),
        (
            {"AGENTQ_API_KEYS": f"{A_HASH} worker:node runs:read"},
            "entry 1: a worker key holds queue:NAME scopes only",
        ),
        ({"AGENTQ_REMOTE_TOOLS": "/nonexistent/remote.json"}, "cannot read remote tools file"),
        ({"AGENTQ_LEASE_S": "soon"}, "AGENTQ_LEASE_S='soon'"),
    ],
)
def test_serve_refuses_bad_configuration_in_one_line(
    redis_url: str, env: dict[str, str], says: str
) -> None:
    refused = run_cli("serve", "--port", "1", redis_url=redis_url, env=env)
    assert refused.returncode == 2, refused.stderr
    assert says in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
