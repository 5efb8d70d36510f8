"""Shared budgets over HTTP against a real `agentq serve`, a priced worker process and a
redis-server: a batch's budget at submit (`max_cost_usd`) pauses it, its owner raises
it (POST /v1/batches/{id}/budget) and every line finishes, another tenant's key cannot
raise it (404); a tenant over its AGENTQ_TENANT_BUDGETS entry is refused with a 402
naming the budget."""

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
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

KEYS = {"acme": "key-acme", "globex": "key-globex"}
PRICES = {"scripted:*": {"input": 2.0, "output": 10.0}}  # USD per million tokens
USAGE = {"input_tokens": 1000, "output_tokens": 100}  # $0.003 a step
BUDGETS = json.dumps({"acme": {"max_cost_usd": 0.003}})
LINE = scripted(
    {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}], "usage": USAGE},
    {"text": "done", "usage": USAGE},
    tools=["add"],
)


@pytest.fixture
def keyed(redis_url: str, workers: list[WorkerProcess], tmp_path: Path) -> Iterator[ServeProcess]:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    env = {"AGENTQ_PRICES": str(prices), "AGENTQ_TENANT_BUDGETS": BUDGETS}
    workers.append(WorkerProcess(redis_url, "--tools", TOOLS, env=env))
    wait_ready(*workers)
    lines = "; ".join(f"{hash_key(key)} {tenant}" for tenant, key in KEYS.items())
    process = ServeProcess(
        redis_url, env={"AGENTQ_API_KEYS": lines, "AGENTQ_TENANT_BUDGETS": BUDGETS}
    )
    yield process
    process.stop()


def call(server: ServeProcess, method: str, path: str, who: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=60, **kw)


def test_a_batch_budget_pauses_it_and_only_its_owner_raises_it(keyed: ServeProcess) -> None:
    body = "\n".join(json.dumps({"custom_id": f"l{i}", "spec": LINE}) for i in range(4))
    created = call(keyed, "POST", "/v1/batches?id=b1&max_cost_usd=0.006", "globex", content=body)
    assert created.status_code == 201, created.text

    def batch() -> dict[str, Any]:
        got: dict[str, Any] = call(keyed, "GET", "/v1/batches/b1", "globex").json()
        return got

    paused = eventually(batch, "the batch to pause", until=lambda b: b["status"] == "paused")
    assert paused["budget"]["budget"]["max_cost_usd"] == 0.006
    assert "budget reached: batch 'b1' max_cost_usd 0.006" in paused["budget"]["reached"]

    raise_ = {"max_cost_usd": 1.0}
    other = call(keyed, "POST", "/v1/batches/b1/budget", "acme", json=raise_)
    assert other.status_code == 404  # another tenant's batch does not exist for acme
    assert call(keyed, "POST", "/v1/batches/b1/budget", "globex", json={}).status_code == 422
    raised = call(keyed, "POST", "/v1/batches/b1/budget", "globex", json=raise_)
    assert raised.status_code == 200, raised.text
    done = eventually(batch, "the batch to end", until=lambda b: b["status"] == "done")
    assert (done["counts"]["succeeded"], done["counts"]["failed"]) == (4, 0)
    assert done["budget"]["spent_usd"] == pytest.approx(4 * 2 * 0.003)


def test_a_tenant_over_its_budget_is_refused_with_402(keyed: ServeProcess) -> None:
    one = scripted({"text": "hi", "usage": USAGE})
    created = call(keyed, "POST", "/v1/runs", "acme", json=one)
    assert created.status_code == 201, created.text
    ended = call(keyed, "GET", f"/v1/runs/{created.json()['id']}?wait=60", "acme")
    assert ended.json()["status"] == "succeeded", ended.text
    refused = call(keyed, "POST", "/v1/runs", "acme", json=one)
    assert refused.status_code == 402, refused.text
    error = refused.json()["error"]
    assert (error["type"], error["limit"]) == ("budget_reached", "max_cost_usd")
    assert error["message"].startswith("budget reached: tenant 'acme' max_cost_usd 0.003")
    batch = call(keyed, "POST", "/v1/batches?id=b2", "acme", content=json.dumps(one))
    assert batch.status_code == 402
    assert call(keyed, "POST", "/v1/runs", "globex", json=one).status_code == 201
