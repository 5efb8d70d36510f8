"""One limits model for every door (issue 25, item 6), over real HTTP and the CLI: each
limit is a setting, a client past it gets a 413 or 429 naming it, a chunked body is
measured like a declared one, and tool calls, batches and their lines count toward their
tenant's share."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import WorkerProcess, run_cli
from tests.support.rates import away_from_the_window_edge
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

KEYS = {"acme": "key-acme", "globex": "key-globex"}
HELLO = scripted({"text": "hello"})


@pytest.fixture
def limited(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    keys = "; ".join(f"{hash_key(key)} {tenant}" for tenant, key in KEYS.items())
    process = ServeProcess(
        redis_url,
        env={
            "AGENTQ_API_KEYS": keys,
            "AGENTQ_SERVE_MAX_BODY_BYTES": "20000",
            "AGENTQ_SERVE_MAX_SPEC_BYTES": "4000",
            "AGENTQ_SERVE_MAX_BATCH_BYTES": "50000",
            "AGENTQ_SERVE_MAX_BATCH_LINES": "5",
            "AGENTQ_SUBMITS_PER_MINUTE": "3",
            "AGENTQ_SERVE_BATCH_LINES_PER_MINUTE": "8",
        },
    )
    yield process
    process.stop()


def post(server: ServeProcess, path: str, who: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEYS[who]}", **kw.pop("headers", {})}
    return httpx.post(f"{server.url}{path}", headers=headers, timeout=30, **kw)


def refused(response: httpx.Response, status: int, limit: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["limit"] == limit, error
    return error


def chunks(total: int) -> Iterator[bytes]:
    """A body with no Content-Length: it is sent chunked."""
    for _ in range(total // 1000):
        yield b" " * 1000


def batch_body(*prompts: str) -> str:
    return "".join(
        json.dumps({**HELLO, "prompt": p, "custom_id": f"c{n}"}) + "\n"
        for n, p in enumerate(prompts)
    )


def test_a_chunked_body_over_the_limit_is_a_413_naming_it(limited: ServeProcess) -> None:
    refused(post(limited, "/v1/runs", "acme", content=chunks(30_000)), 413, "max_body_bytes")
    refused(post(limited, "/v1/batches", "acme", content=chunks(60_000)), 413, "max_batch_bytes")
    declared = post(limited, "/v1/batches", "acme", content=b" " * 60_000)
    refused(declared, 413, "max_batch_bytes")


def test_each_batch_line_obeys_the_spec_size_cap_and_the_line_limits(
    limited: ServeProcess,
) -> None:
    over = post(limited, "/v1/batches", "acme", content=batch_body("a", "b" * 5000))
    assert "line 2" in refused(over, 413, "max_spec_bytes")["message"]
    many = post(limited, "/v1/batches", "acme", content=batch_body(*"abcdef"))
    refused(many, 413, "max_batch_lines")
    listed = httpx.get(
        f"{limited.url}/v1/batches", headers={"Authorization": f"Bearer {KEYS['acme']}"}
    )
    assert listed.json() == []  # nothing refused was stored

    away_from_the_window_edge()
    assert post(limited, "/v1/batches", "globex", content=batch_body(*"abcde")).status_code == 201
    refused(
        post(limited, "/v1/batches", "globex", content=batch_body(*"abcd")),
        429,
        "batch_lines_per_minute",
    )


def test_tool_calls_and_batches_count_toward_the_submit_rate(limited: ServeProcess) -> None:
    away_from_the_window_edge()
    call = post(limited, "/v1/tools/add/calls", "acme", json={"input": {"a": 1, "b": 2}})
    assert call.status_code == 201, call.text
    assert post(limited, "/v1/batches", "acme", content=batch_body("a")).status_code == 201
    assert post(limited, "/v1/runs", "acme", json=HELLO).status_code == 201
    error = refused(post(limited, "/v1/runs", "acme", json=HELLO), 429, "submits_per_minute")
    assert "tool calls" in error["message"]
    refused(
        post(limited, "/v1/tools/add/calls", "acme", json={"input": {"a": 1, "b": 2}}),
        429,
        "submits_per_minute",
    )
    # Another tenant's share is its own.
    assert post(limited, "/v1/runs", "globex", json=HELLO).status_code == 201


def test_a_spec_limit_above_the_deployments_ceiling_is_refused_naming_both(
    limited: ServeProcess, redis_url: str, tmp_path: Path
) -> None:
    over = {**HELLO, "limits": {"max_tree_runs": 500}}
    answer = post(limited, "/v1/runs", "acme", json=over)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["message"] == (
        "limits.max_tree_runs: 500 is above this deployment's ceiling of 100 (AGENTQ_MAX_TREE_RUNS)"
    )
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({**HELLO, "limits": {"max_tree_steps": 1001}}))
    done = run_cli("submit", str(path), redis_url=redis_url)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "limits.max_tree_steps: 1001 is above this deployment's ceiling of 1000" in done.stderr
    assert "(AGENTQ_MAX_TREE_STEPS)" in done.stderr


def test_the_cli_refuses_an_over_size_batch_line_in_one_line(
    redis_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_text(batch_body("a", "b" * 300_000))
    done = run_cli("batch", "submit", str(path), redis_url=redis_url)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "line 2" in done.stderr
    assert "max_spec_bytes" in done.stderr
    listed = run_cli("batch", "list", "--json", redis_url=redis_url)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == ""  # nothing was stored


def _holding_agent(started: Path, gate: Path) -> dict[str, Any]:
    """A chat agent whose turn holds its stream open on a tool until `gate` exists."""
    return {
        "model": {
            "provider": "scripted",
            "script": [
                {
                    "tool_calls": [
                        {
                            "name": "hold_until",
                            "input": {"started": str(started), "gate": str(gate)},
                        }
                    ]
                },
                {"text": "released"},
            ],
        },
        "tools": [{"type": "function", "name": "hold_until"}],
    }


def _turn(chat_id: str) -> dict[str, Any]:
    return {
        "id": chat_id,
        "messages": [
            {"id": f"{chat_id}-m1", "role": "user", "parts": [{"type": "text", "text": "go"}]}
        ],
        "trigger": "submit-message",
    }


def test_chat_streams_take_the_tenants_share_of_open_streams(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    started, gate = tmp_path / "started", tmp_path / "gate"
    keys = "; ".join(f"{hash_key(key)} {tenant}" for tenant, key in KEYS.items())
    server = ServeProcess(
        redis_url,
        agents={"holder": _holding_agent(started, gate)},
        env={"AGENTQ_API_KEYS": keys, "AGENTQ_SERVE_STREAMS_PER_TENANT": "1"},
    )
    acme = {"Authorization": f"Bearer {KEYS['acme']}"}
    try:
        with httpx.Client(base_url=server.url, headers=acme, timeout=60) as http:
            with http.stream("POST", "/v1/agents/holder/chat", json=_turn("c1")) as open_chat:
                assert open_chat.status_code == 200
                lines = open_chat.iter_lines()
                first = json.loads(next(line for line in lines if line.startswith("data:"))[5:])
                run_id = first["messageId"]
                eventually(started.exists, "the chat's tool to start")
                # The open chat stream is acme's one stream: another chat, its resume, and
                # an event stream are refused before anything starts.
                refused(
                    http.post("/v1/agents/holder/chat", json=_turn("c2")), 429, "streams_per_tenant"
                )
                refused(http.get("/v1/agents/holder/chat/c2/stream"), 429, "streams_per_tenant")
                refused(http.get(f"/v1/runs/{run_id}/events"), 429, "streams_per_tenant")
                # Another tenant's share is its own.
                globex = {"Authorization": f"Bearer {KEYS['globex']}"}
                theirs = ("POST", "/v1/agents/holder/chat")
                with http.stream(*theirs, json=_turn("g1"), headers=globex) as their_chat:
                    assert their_chat.status_code == 200
                gate.touch()
                assert any(line == "data: [DONE]" for line in lines)
            # The slot came back with the stream's end; the refused turn started no run.
            assert http.get("/v1/agents/holder/chat/c2/stream").status_code == 204
            assert http.get(f"/v1/runs/{run_id}").json()["status"] == "succeeded"
    finally:
        server.stop()
