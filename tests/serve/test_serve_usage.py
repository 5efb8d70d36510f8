"""`GET /v1/usage`: a tenant's tokens and cost, and no other tenant's (adversarial: two
tenants' keys against a real `agentq serve`, a priced worker process and a
redis-server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

KEYS = {"acme": "key-acme", "globex": "key-globex"}
PRICES = {"scripted:*": {"input": 2.0, "output": 10.0}}  # USD per million tokens
USAGE = {"input_tokens": 1000, "output_tokens": 100}  # $0.002 + $0.001 a step


@pytest.fixture
def keyed(redis_url: str, workers: list[WorkerProcess], tmp_path: Path) -> Iterator[ServeProcess]:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    workers.append(WorkerProcess(redis_url, "--tools", TOOLS, env={"AGENTQ_PRICES": str(prices)}))
    wait_ready(*workers)
    lines = "; ".join(f"{hash_key(key)} {tenant}" for tenant, key in KEYS.items())
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": lines})
    yield process
    process.stop()


def call(server: ServeProcess, method: str, path: str, who: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=60, **kw)


def run(server: ServeProcess, who: str, steps: int) -> None:
    script = [{"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}], "usage": USAGE}] * (
        steps - 1
    ) + [{"text": "done", "usage": USAGE}]
    created = call(server, "POST", "/v1/runs", who, json=scripted(*script, tools=["add"]))
    assert created.status_code == 201, created.text
    ended = call(server, "GET", f"/v1/runs/{created.json()['id']}?wait=60", who)
    assert ended.json()["status"] == "succeeded", ended.text


def test_each_tenant_sees_its_own_usage_and_cost_only(keyed: ServeProcess) -> None:
    run(keyed, "acme", steps=2)
    run(keyed, "acme", steps=1)
    run(keyed, "globex", steps=1)
    acme = call(keyed, "GET", "/v1/usage", "acme").json()
    globex = call(keyed, "GET", "/v1/usage", "globex").json()
    assert (acme["input_tokens"], acme["output_tokens"]) == (3000, 300)
    assert acme["cost_usd"] == pytest.approx(0.009)
    assert acme["cost_breakdown"]["output_usd"] == pytest.approx(0.003)
    assert (globex["input_tokens"], globex["cost_usd"]) == (1000, pytest.approx(0.003))
    # No parameter names another tenant: the key decides whose totals come back.
    sneaky = call(keyed, "GET", "/v1/usage?tenant=acme", "globex").json()
    assert sneaky == globex
