"""The runs list over real HTTP (`agentq serve`, `agentq worker`, a real redis-server):
cursor paging past 100, search by id / custom id / metadata, and every filter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration


def get(server: ServeProcess, path: str, key: str | None = None, **params: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(f"{server.url}{path}", params=params, headers=headers, timeout=60)


def ids(page: dict[str, Any]) -> list[str]:
    return [r["id"] for r in page["runs"]]


def test_page_past_100_search_and_filter(server: ServeProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for n in range(104):
            spec = scripted({"text": "hi"}, id=f"bulk-{n:03}", metadata={"n": str(n)})
            assert http.post("/v1/runs", json=spec).status_code == 201
        # One step scripted, a tool call in it: the run asks for a second step and fails.
        broken = scripted(
            calls(("add", {"a": 1, "b": 2})),
            tools=["add"],
            id="order-7",
            metadata={"customer": "Ada Lovelace"},
        )
        assert http.post("/v1/runs", json=broken).status_code == 201
        assert http.get("/v1/runs/order-7", params={"wait": 30}).json()["status"] == "failed"
        last = http.get("/v1/runs/bulk-103", params={"wait": 30}).json()
        assert last["status"] == "succeeded"

    first = get(server, "/v1/runs", limit=100).json()
    assert ids(first)[:2] == ["order-7", "bulk-103"]
    assert len(ids(first)) == 100
    second = get(server, "/v1/runs", limit=100, cursor=first["next_cursor"]).json()
    assert ids(second) == [f"bulk-{n:03}" for n in reversed(range(5))]

    failed = get(server, "/v1/runs", error_kind=first["runs"][0]["error_kind"]).json()
    assert ids(failed) == ["order-7"]
    assert failed["runs"][0]["custom_id"] == "order-7"
    assert ids(get(server, "/v1/runs", error_kind="limit").json()) == []
    assert ids(get(server, "/v1/runs", q="ada love").json()) == ["order-7"]  # metadata
    assert ids(get(server, "/v1/runs", q="bulk-05").json()) == [
        f"bulk-05{n}" for n in range(9, -1, -1)
    ]
    assert ids(get(server, "/v1/runs", q="BULK-042").json()) == ["bulk-042"]
    assert len(ids(get(server, "/v1/runs", model="scripted", limit=500).json())) == 105
    assert ids(get(server, "/v1/runs", model="gpt-4o").json()) == []

    created = {r["id"]: r["created_at"] for r in first["runs"] + second["runs"]}
    window = get(
        server,
        "/v1/runs",
        created_after=created["bulk-010"],
        created_before=created["bulk-013"],
    ).json()
    assert ids(window) == ["bulk-013", "bulk-012", "bulk-011"]
    assert get(server, "/v1/runs", created_before=created["bulk-001"]).json()["runs"][-1]["id"] == (
        "bulk-000"
    )


KEYS = {"acme": "key-acme-list", "globex": "key-globex-list", "ops": "key-ops-admin"}


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(
        [
            f"{hash_key(KEYS['acme'])} acme",
            f"{hash_key(KEYS['globex'])} globex",
            f"{hash_key(KEYS['ops'])} ops runs:read,admin",
        ]
    )
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": lines})
    yield process
    process.stop()


def test_only_an_admin_key_lists_another_tenants_runs(keyed: ServeProcess) -> None:
    headers = {"Authorization": f"Bearer {KEYS['acme']}"}
    spec = scripted({"text": "hi"}, id="acme-run")
    created = httpx.post(f"{keyed.url}/v1/runs", json=spec, headers=headers, timeout=30)
    run_id = created.json()["id"]

    refused = get(keyed, "/v1/runs", KEYS["globex"], tenant="acme")
    assert refused.status_code == 403
    assert "admin" in refused.json()["error"]["message"]
    assert ids(get(keyed, "/v1/runs", KEYS["acme"], tenant="acme").json()) == [run_id]
    assert ids(get(keyed, "/v1/runs", KEYS["ops"], tenant="acme", q="acme-run").json()) == [run_id]
    assert ids(get(keyed, "/v1/runs", KEYS["ops"]).json()) == []  # its own tenant's
