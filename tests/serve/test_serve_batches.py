"""The batches API against a real `agentq serve`, worker process and redis-server."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

TEMPLATE = scripted(
    calls(("add", {"a": 1, "b": 2})), {"text": "sum"}, tools=["add"], prompt="{{q}}"
)


def finished(server: ServeProcess, batch_id: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        body: dict[str, Any] = httpx.get(f"{server.url}/v1/batches/{batch_id}").json()
        return body if body["status"] in ("done", "cancelled") else None

    found: dict[str, Any] | None = eventually(check, f"batch {batch_id} to end", 60)
    assert found is not None
    return found


def test_a_jsonl_body_becomes_a_batch_whose_results_stream_in_order(server: ServeProcess) -> None:
    body = "\n".join(
        json.dumps({"custom_id": f"q{i}", "spec": TEMPLATE, "vars": {"q": str(i)}})
        for i in range(5)
    )
    created = httpx.post(f"{server.url}/v1/batches?id=h1&concurrency=2", content=body)
    assert created.status_code == 201, created.text
    assert created.json()["lines"] == 5
    info = finished(server, "h1")
    assert info["counts"]["succeeded"] == 5
    rows = [
        json.loads(line)
        for line in httpx.get(f"{server.url}/v1/batches/h1/results").text.splitlines()
    ]
    assert [r["custom_id"] for r in rows] == [f"q{i}" for i in range(5)]
    assert {r["text"] for r in rows} == {"sum"}
    again = httpx.post(f"{server.url}/v1/batches?id=h1", content=body)
    assert again.status_code == 200
    listed = httpx.get(f"{server.url}/v1/batches").json()
    assert [b["id"] for b in listed] == ["h1"]


def test_an_upload_with_a_template_part_and_the_errors(server: ServeProcess) -> None:
    jsonl = "\n".join(json.dumps({"vars": {"q": str(i)}}) for i in range(3))
    created = httpx.post(
        f"{server.url}/v1/batches?id=h2",
        files={"file": ("in.jsonl", jsonl), "spec": (None, json.dumps(TEMPLATE))},
    )
    assert created.status_code == 201, created.text
    assert finished(server, "h2")["counts"]["succeeded"] == 3
    line = json.dumps({"custom_id": 1, "spec": TEMPLATE, "vars": {"q": "x"}})
    dup = httpx.post(f"{server.url}/v1/batches?id=h3", content=f"{line}\n{line}")
    assert dup.status_code == 422
    assert "line 2 repeats line 1" in dup.json()["error"]["message"]
    assert httpx.get(f"{server.url}/v1/batches/nope").status_code == 404
    retried = httpx.post(f"{server.url}/v1/batches/h2/retry")
    assert retried.json() == {"id": "h2", "requeued": 0}
