"""An agent whose model calls MCP tools through `agentq worker` processes: a real MCP
server over stdio, a real redis-server, and a local OpenAI-compatible model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.events import Event
from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn
from tests.support.infra import WorkerProcess, run_cli, wait_ready
from tests.support.mcp_servers.launch import own_server_stdio

pytestmark = pytest.mark.e2e


@pytest.fixture
def mcp_worker(
    redis_url: str, tmp_path: Path, allow_loopback_specs: None
) -> Iterator[WorkerProcess]:
    config = tmp_path / "mcp.json"
    server = own_server_stdio(elicitation="forward", timeout_s=60)
    config.write_text(json.dumps({"mcpServers": {"own": server}}))
    worker = WorkerProcess(
        redis_url, "--mcp-config", str(config), env={"OPENAI_API_KEY": "sk-test"}
    )
    wait_ready(worker, timeout_s=60)
    yield worker
    worker.stop()


async def test_model_calls_mcp_tools_through_worker_processes(
    redis_url: str, mcp_worker: WorkerProcess
) -> None:
    turns = [
        Turn(
            tool_calls=[
                ToolCall("add", {"a": 2, "b": 3}, id="c_add"),
                ToolCall("count", {"steps": 3}, id="c_count"),
                ToolCall("tiny_image", {}, id="c_img"),
                ToolCall("fail", {"message": "boom"}, id="c_fail"),
            ]
        ),
        Turn(tool_calls=[ToolCall("greet", {}, id="c_greet")]),
        Turn(text="all done"),
    ]
    with FakeOpenAI(turns) as model:
        spec = {
            "model": {"provider": "openai", "name": "m", "base_url": model.base_url},
            "prompt": "use the tools",
            "tools": [
                {
                    "type": "mcp",
                    "server": "own",
                    "tools": ["add", "count", "tiny_image", "fail", "greet"],
                }
            ],
        }
        async with Client(redis_url) as client:
            run_id = await client.runs.submit(spec)
            seen: list[Event] = []
            async for event in client.runs.events(run_id, follow=True):
                seen.append(event)
                if event.type == "tool-input-request":
                    extra = event.model_dump()
                    assert extra["message"] == "Who are you?"
                    assert "name" in extra["input"]["properties"]
                    pending = (await client.runs.result(run_id)).pending
                    assert pending[0]["status"] == "awaiting-input"
                    answered = await asyncio.to_thread(
                        run_cli,
                        "answer",
                        run_id,
                        extra["request_id"],
                        "--json",
                        '{"name": "Grace", "age": 85}',
                        redis_url=redis_url,
                    )
                    assert answered.returncode == 0, answered.stderr
            result = await asyncio.wait_for(client.runs.wait(run_id), 30)
        sent = [r.body for r in model.requests]

    assert result.status == "succeeded", (result.error, mcp_worker.log())
    outputs = {r.tool_call_id: r for step in result.steps for r in step.tool_results}
    assert outputs["c_add"].output == {"content": [], "structured": {"sum": 5}}
    assert outputs["c_count"].output == "counted 3"
    assert [p["type"] for p in outputs["c_img"].output["content"]] == ["media"]
    assert outputs["c_fail"].is_error
    assert "boom" in outputs["c_fail"].output
    assert outputs["c_greet"].output == "hello Grace (85)"
    assert any(e.type == "tool-progress" and e.tool_call_id == "c_count" for e in seen)
    # the MCP server's one question and its answer (tool-input-start/-delta are the
    # model's streamed arguments, not questions)
    assert [e.type for e in seen if e.type in ("tool-input-request", "tool-input-response")] == [
        "tool-input-request",
        "tool-input-response",
    ]
    # The model was offered the server's own tool names and schemas.
    offered = {t["function"]["name"] for t in sent[0]["tools"]}
    assert offered == {"add", "count", "tiny_image", "fail", "greet"}
    # The tool error went back to the model with the next request.
    tool_messages = [m for m in sent[1]["messages"] if m["role"] == "tool"]
    assert any("boom" in m["content"] for m in tool_messages)
