"""Keys, tenants, scopes and limits over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess, run_cli
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

KEYS = {
    "acme": "key-acme-secret",
    "globex": "key-globex-secret",
    "reader": "key-acme-reader",
}
SPEC = scripted({"text": "hello"}, tools=[])


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(
        [
            f"{hash_key(KEYS['acme'])} acme",
            f"{hash_key(KEYS['globex'])} globex",
            f"{hash_key(KEYS['reader'])} acme runs:read",
        ]
    )
    process = ServeProcess(
        redis_url,
        "--cors-origin",
        "http://127.0.0.1:3000",
        env={
            "AGENTQ_API_KEYS": lines,
            "AGENTQ_SUBMITS_PER_MINUTE": "3",
            "AGENTQ_SERVE_MAX_BODY_BYTES": "20000",
            "AGENTQ_SERVE_MAX_SPEC_BYTES": "4000",
        },
    )
    yield process
    process.stop()


def call(
    server: ServeProcess, method: str, path: str, who: str | None, **kw: Any
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}"} if who else {}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)


def test_keys_tenants_and_scopes(keyed: ServeProcess) -> None:
    assert call(keyed, "POST", "/v1/runs", None, json=SPEC).status_code == 401
    wrong = httpx.get(f"{keyed.url}/v1/runs", headers={"Authorization": "Bearer nope"}, timeout=30)
    assert wrong.status_code == 401
    assert wrong.json()["error"]["type"] == "unauthorized"

    run_id = call(keyed, "POST", "/v1/runs", "acme", json=SPEC).json()["id"]
    mine = call(keyed, "GET", f"/v1/runs/{run_id}", "acme", params={"wait": 30})
    assert mine.json()["status"] == "succeeded"
    # Another tenant's run does not exist for you, whatever you try.
    for method, path in [
        ("GET", f"/v1/runs/{run_id}"),
        ("GET", f"/v1/runs/{run_id}/events"),
        ("POST", f"/v1/runs/{run_id}/cancel"),
    ]:
        other = call(keyed, method, path, "globex")
        assert other.status_code == 404, (method, path, other.text)
    assert call(keyed, "GET", "/v1/runs", "globex").json()["runs"] == []
    assert [r["id"] for r in call(keyed, "GET", "/v1/runs", "acme").json()["runs"]] == [run_id]
    assert [r["tenant"] for r in call(keyed, "GET", "/v1/runs", "reader").json()["runs"]] == [
        "acme"
    ]
    # The same id from another tenant is not a way in: it names a run of its own.
    taken = call(keyed, "POST", "/v1/runs", "globex", json={**SPEC, "id": run_id})
    assert taken.status_code == 201, taken.text
    assert taken.json()["id"] != run_id

    read_only = call(keyed, "POST", "/v1/runs", "reader", json=SPEC)
    assert read_only.status_code == 403
    assert "runs:write" in read_only.json()["error"]["message"]


def test_limits_and_cors(keyed: ServeProcess) -> None:
    huge = call(keyed, "POST", "/v1/runs", "acme", json={**SPEC, "system": "x" * 30000})
    assert huge.status_code == 413
    assert huge.json()["error"]["type"] == "too_large"
    big_spec = call(keyed, "POST", "/v1/runs", "acme", json={**SPEC, "system": "x" * 5000})
    assert big_spec.status_code == 413
    assert big_spec.json()["error"]["field"] == "spec"

    # 3 per minute: 7 submits straddle at most one window edge, so one is refused.
    statuses = [call(keyed, "POST", "/v1/runs", "globex", json=SPEC) for _ in range(7)]
    refused = [r for r in statuses if r.status_code == 429]
    assert refused, [r.status_code for r in statuses]
    assert 1 <= int(refused[0].headers["retry-after"]) <= 61
    assert refused[0].json()["error"]["type"] == "rate_limited"
    # Another tenant's budget is its own.
    assert call(keyed, "POST", "/v1/runs", "acme", json=SPEC).status_code == 201

    preflight = httpx.options(
        f"{keyed.url}/v1/runs",
        headers={
            "Origin": "http://127.0.0.1:3000",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
        timeout=30,
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://127.0.0.1:3000"
    stranger = httpx.options(
        f"{keyed.url}/v1/runs",
        headers={"Origin": "http://127.0.0.2:9", "Access-Control-Request-Method": "POST"},
        timeout=30,
    )
    assert "access-control-allow-origin" not in stranger.headers


def test_no_keys_means_loopback_only(redis_url: str) -> None:
    refused = run_cli("serve", "--host", "0.0.0.0", "--port", "1", redis_url=redis_url)
    assert refused.returncode == 2
    assert "without API keys" in refused.stderr
    assert "--insecure" in refused.stderr
