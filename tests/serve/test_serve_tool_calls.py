"""Tool calls without a run over real HTTP and the real CLI: a real redis-server, an
`agentq worker` process serving the tools, an `agentq serve` process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.integration

CALL_TOOLS = "tests/support/call_tools.py"
KEYS = {"acme": "key-acme", "narrow": "key-narrow", "globex": "key-globex"}


@pytest.fixture
def fleet(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS, "--tools", CALL_TOOLS)
    wait_ready(process)
    yield process
    process.stop()


@pytest.fixture
def api(redis_url: str, fleet: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(
        [
            f"{hash_key(KEYS['acme'])} acme",
            f"{hash_key(KEYS['narrow'])} acme tools:call,tool:add",
            f"{hash_key(KEYS['globex'])} globex",
        ]
    )
    process = ServeProcess(
        redis_url, env={"AGENTQ_API_KEYS": lines, "AGENTQ_SERVE_HEARTBEAT_S": "1"}
    )
    yield process
    process.stop()


def _http(api: ServeProcess, who: str) -> httpx.Client:
    return httpx.Client(
        base_url=api.url, headers={"Authorization": f"Bearer {KEYS[who]}"}, timeout=60
    )


def test_the_catalogue_lists_tools_with_schemas_per_key(api: ServeProcess) -> None:
    with _http(api, "acme") as http:
        tools = {t["name"]: t for t in http.get("/v1/tools").json()["tools"]}
    assert {"add", "count_up", "tiny_image", "linger"} <= set(tools)
    assert tools["add"]["input_schema"]["required"] == ["a", "b"]
    with _http(api, "narrow") as http:
        assert [t["name"] for t in http.get("/v1/tools").json()["tools"]] == ["add"]
        hidden = http.post("/v1/tools/echo/calls", json={"input": {"text": "x"}})
    assert hidden.status_code == 404
    assert httpx.get(f"{api.url}/v1/tools", timeout=30).status_code == 401


def test_a_call_with_wait_returns_its_result(api: ServeProcess) -> None:
    with _http(api, "acme") as http:
        done = http.post("/v1/tools/add/calls?wait=30", json={"input": {"a": 2, "b": 3}})
        failed = http.post("/v1/tools/fail/calls?wait=30", json={"input": {"message": "nope"}})
    assert done.status_code == 200, done.text
    assert done.json()["result"]["output"] == 5
    assert failed.status_code == 200
    assert failed.json()["result"]["is_error"] is True
    assert "nope" in failed.json()["result"]["error"]


def test_unknown_tools_and_bad_input_are_named(api: ServeProcess) -> None:
    with _http(api, "acme") as http:
        unknown = http.post("/v1/tools/nope/calls", json={"input": {}})
        invalid = http.post("/v1/tools/add/calls", json={"input": {"a": "x", "b": 1}})
    assert unknown.status_code == 404
    assert "'nope'" in unknown.json()["error"]["message"]
    assert invalid.status_code == 422
    assert invalid.json()["error"]["field"] == "input/a"


def test_a_started_call_is_read_and_followed_and_stays_the_tenants(api: ServeProcess) -> None:
    with _http(api, "acme") as http:
        started = http.post("/v1/tools/count_up/calls", json={"input": {"n": 3}})
        assert started.status_code == 201, started.text
        call_id = started.json()["id"]
        assert started.headers["location"] == f"/v1/tool-calls/{call_id}"
        with http.stream("GET", f"/v1/tool-calls/{call_id}/events") as stream:
            types = [
                json.loads(line.removeprefix("data: "))
                for line in stream.iter_lines()
                if line.startswith("data: ")
            ]
        state = http.get(f"/v1/tool-calls/{call_id}").json()
    assert [e["type"] for e in types if e["type"] == "tool-progress"] == ["tool-progress"] * 4
    assert types[-1]["type"] == "tool-result"
    assert state["status"] == "done"
    assert state["result"]["output"] == {"counted": 3}
    with _http(api, "globex") as other:
        assert other.get(f"/v1/tool-calls/{call_id}").status_code == 404


def test_each_progress_value_arrives_as_it_is_yielded(api: ServeProcess, tmp_path: Path) -> None:
    """`gated` yields its second value only once this test has seen its first progress
    (it creates the gate file then): a progress held back until the next value came
    would be seen only after `gated` gave up waiting."""
    gate = tmp_path / "seen-first"
    with _http(api, "acme") as http:
        started = http.post("/v1/tools/gated/calls", json={"input": {"gate": str(gate)}})
        assert started.status_code == 201, started.text
        call_id = started.json()["id"]
        progress: list[object] = []
        with http.stream("GET", f"/v1/tool-calls/{call_id}/events") as stream:
            for line in stream.iter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line.removeprefix("data: "))
                if event["type"] == "tool-progress":
                    progress.append(event["output"])
                    gate.touch()
                if event["type"] == "tool-result":
                    break
        state = http.get(f"/v1/tool-calls/{call_id}").json()
    assert state["result"]["output"] == "second"
    assert progress == ["first", "second"]


def test_an_idempotency_key_returns_the_first_call(api: ServeProcess) -> None:
    with _http(api, "acme") as http:
        headers = {"Idempotency-Key": "once"}
        first = http.post(
            "/v1/tools/add/calls?wait=30", json={"input": {"a": 1, "b": 1}}, headers=headers
        )
        again = http.post(
            "/v1/tools/add/calls?wait=30", json={"input": {"a": 1, "b": 1}}, headers=headers
        )
        clash = http.post("/v1/tools/add/calls", json={"input": {"a": 9, "b": 1}}, headers=headers)
    assert first.json()["id"] == again.json()["id"]
    assert again.json()["result"]["output"] == 2
    assert clash.status_code == 409


def test_the_cli_calls_a_tool(redis_url: str, fleet: WorkerProcess) -> None:
    ok = run_cli("call", "add", "--input", '{"a": 1, "b": 2}', redis_url=redis_url)
    assert (ok.returncode, ok.stdout.strip()) == (0, "3.0")
    progress = run_cli("call", "count_up", "--input", '{"n": 2}', "--json", redis_url=redis_url)
    assert progress.returncode == 0, progress.stderr
    assert json.loads(progress.stdout)["output"] == {"counted": 2}
    assert progress.stderr.count('"progress"') == 2  # and `{"counted": 2}` as it came
    failed = run_cli("call", "fail", "--input", '{"message": "bad"}', redis_url=redis_url)
    assert failed.returncode == 1
    assert "bad" in failed.stderr
    unknown = run_cli("call", "nope", redis_url=redis_url)
    assert unknown.returncode == 2
    assert "'nope'" in unknown.stderr
    invalid = run_cli("call", "add", "--input", '{"a": "x"}', redis_url=redis_url)
    assert invalid.returncode == 2
    assert "/a" in invalid.stderr


def test_a_started_call_can_be_cancelled(api: ServeProcess) -> None:
    with _http(api, "acme") as http:
        started = http.post("/v1/tools/linger/calls", json={"input": {"seconds": 120}})
        call_id = started.json()["id"]
        cancelled = http.post(f"/v1/tool-calls/{call_id}/cancel")
        again = http.post(f"/v1/tool-calls/{call_id}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["result"]["cancelled"] is True
    assert cancelled.json()["result"]["is_error"] is True
    assert again.json()["result"] == cancelled.json()["result"]  # it stays as it ended
