"""One trace per run across worker processes, with the right parents."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from agentq.orchestrator import Client
from agentq.orchestrator.settings import Settings
from tests.integration.core.test_core_workers import TOOLS, scripted, wait_ready
from tests.support.infra import WorkerProcess
from tests.support.models import write_models_file
from tests.support.otlp import OtlpReceiver


async def test_spans_from_two_worker_processes_share_one_trace(redis_url: str) -> None:
    with OtlpReceiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }
        model_worker = WorkerProcess(
            redis_url, "--queue", "model", env={**env, "OTEL_SERVICE_NAME": "model-worker"}
        )
        tool_worker = WorkerProcess(
            redis_url,
            "--queue",
            "tools",
            "--tools",
            TOOLS,
            env={**env, "OTEL_SERVICE_NAME": "tool-worker"},
        )
        try:
            wait_ready(model_worker, tool_worker)
            spec = scripted(
                {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]},
                {"text": "3"},
                tools=["add"],
            )
            async with Client(redis_url) as client:
                result = await client.wait(await client.submit(spec), timeout_s=60)
            assert result.status == "succeeded"
        finally:
            model_worker.stop()  # SIGTERM flushes the exporters
            tool_worker.stop()
        deadline = time.monotonic() + 10
        while not any(s.name.startswith("invoke_agent") for s in receiver.spans):
            assert time.monotonic() < deadline, [s.name for s in receiver.spans]
            await asyncio.sleep(0.05)
        spans = list(receiver.spans)

    by_id = {s.span_id: s for s in spans}
    assert len({s.trace_id for s in spans}) == 1, {(s.name, s.trace_id) for s in spans}
    assert {s.service for s in spans} == {"model-worker", "tool-worker"}

    (run,) = [s for s in spans if s.name.startswith("invoke_agent")]
    assert run.parent_id == ""

    def parent(span_name: str) -> list[str]:
        return sorted(
            by_id[s.parent_id].name if s.parent_id in by_id else "?"
            for s in spans
            if s.name == span_name
        )

    chats = [s for s in spans if s.name == "chat scripted"]
    assert len(chats) == 2
    assert parent("chat scripted") == ["process model", "process model"]
    assert parent("execute_tool add") == ["process tools"]
    (tool_span,) = [s for s in spans if s.name == "execute_tool add"]
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_0_0"
    assert tool_span.service == "tool-worker"
    assert "gen_ai.usage.input_tokens" in chats[0].attributes
    # Every queue hop is a producer span followed by a consumer span.
    assert parent("process tools") == ["publish tools"]
    assert parent("process model") == ["invoke_agent agentq", "publish model"]
    # Every span descends from the run's span.
    for s in spans:
        node = s
        while node.parent_id:
            node = by_id[node.parent_id]
        assert node is run, s.name


async def test_api_keys_appear_in_no_span(redis_url: str, tmp_path: Path) -> None:
    from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn

    key = "sk-trace-secret-0123456789"
    turns = [Turn(tool_calls=[ToolCall("add", {"a": 1, "b": 2})]), Turn(text="3")]
    with OtlpReceiver() as receiver, FakeOpenAI(turns) as model:
        env = {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OPENAI_API_KEY": key,
            "AGENTQ_MODELS": write_models_file(
                tmp_path / "models.json", local={"provider": "openai", "base_url": model.base_url}
            ),
        }
        worker = WorkerProcess(redis_url, "--tools", TOOLS, env=env)
        try:
            wait_ready(worker)
            spec = {
                "model": "local:m",
                "prompt": "add",
                "tools": [{"type": "function", "name": "add"}],
            }
            settings = Settings(models=env["AGENTQ_MODELS"])
            async with Client(redis_url, settings=settings) as client:
                result = await client.wait(await client.submit(spec), timeout_s=60)
            assert result.status == "succeeded"
            assert key not in result.model_dump_json()
        finally:
            worker.stop()
        deadline = time.monotonic() + 10
        while not any(s.name.startswith("invoke_agent") for s in receiver.spans):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        spans = list(receiver.spans)
    assert any(s.name == "chat m" for s in spans)
    for s in spans:
        assert key not in repr(s), s.name
