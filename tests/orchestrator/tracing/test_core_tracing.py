"""Traces a person can read, as an OTLP/HTTP receiver in this process gets them.

One trace per run in every mode (distributed worker processes, the embedded
`agentq run`, an application's own tracer provider); flat (every job a child
of the run, linked to its send span); the GenAI and messaging attributes;
errors recorded; content only behind the opt-in; no secret anywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator import tracing
from agentq.orchestrator.core import keys
from tests.support.infra import REPO, TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.models import write_models_file
from tests.support.otlp import OtlpGrpcReceiver, OtlpReceiver, ReceivedSpan
from tests.support.specs import scripted
from tests.support.trace_shape import (
    ERROR,
    assert_flat_trace,
    assert_genai_attributes,
    assert_no_content,
    exception_events,
    has_root,
    parts,
    run_spans,
)

pytestmark = pytest.mark.integration

CONTENT_ON = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}


def _three_steps(run_id: str) -> dict[str, Any]:
    """Step 0 calls add and a raising tool in parallel, step 1 calls add, step 2 answers."""
    return scripted(
        {
            "tool_calls": [
                {"name": "add", "input": {"a": 1, "b": 2}},
                {"name": "fail", "input": {"message": "boom"}},
            ]
        },
        {"tool_calls": [{"name": "add", "input": {"a": 3, "b": 4}}]},
        {"text": "the sum is 7"},
        tools=["add", "fail"],
        id=run_id,
        system="You add numbers.",
    )


def _trace_of(receiver: OtlpReceiver | OtlpGrpcReceiver, run_id: str) -> list[ReceivedSpan]:
    """The run's spans, once its root is in. Only whole when every process that exported
    to `receiver` has exited (each flushes its spans as it stops): the root ends inside
    the run's last job, before that job's process span, and each worker exports its
    own spans in its own batches."""
    trace_id = format(tracing.run_ids(run_id)[0], "032x")
    spans = receiver.wait_for(
        lambda got: has_root(run_spans(got, trace_id)), f"the trace of run {run_id}"
    )
    return run_spans(spans, trace_id)


def _cli_run(spec: dict[str, Any], tmp_path: Path, *args: str, env: dict[str, str]) -> None:
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    done = run_cli("run", str(spec_path), "--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"


def _assert_raising_tool(spans: list[ReceivedSpan]) -> None:
    (failed,) = [s for s in spans if s.name == "execute_tool fail"]
    assert failed.status_code == ERROR
    assert failed.attributes["error.type"] == "RuntimeError"
    (event,) = exception_events(failed)
    assert event["exception.type"] == "RuntimeError"
    assert "boom" in event["exception.message"]
    for ok in (s for s in spans if s.name == "execute_tool add"):
        assert ok.status_code != ERROR
        assert ok.attributes["gen_ai.tool.type"] == "function"


def test_distributed_run_is_one_flat_trace(redis_url: str, tmp_path: Path) -> None:
    run_id = "trace-distributed-1"
    with OtlpReceiver() as receiver:
        model_worker = WorkerProcess(redis_url, "--queue", "model", env=receiver.env("model-w"))
        tool_worker = WorkerProcess(
            redis_url, "--queue", "tools", "--tools", TOOLS, env=receiver.env("tool-w")
        )
        try:
            wait_ready(model_worker, tool_worker)
            _cli_run(
                _three_steps(run_id), tmp_path, "--redis", redis_url, env=receiver.env("submitter")
            )
        finally:
            model_worker.stop()
            tool_worker.stop()
        spans = _trace_of(receiver, run_id)

    root = assert_flat_trace(spans)
    assert_genai_attributes(spans, run_id)
    assert_no_content(spans)
    assert {s.service for s in spans} == {"model-w", "tool-w", "submitter"}
    # The submitting process records the first send; the run's end records the root.
    (first_send,) = [s for s in spans if s.service == "submitter"]
    assert first_send.name == "send model"
    assert first_send.parent_id == root.span_id
    assert root.attributes["gen_ai.provider.name"] == "agentq.scripted"
    assert root.attributes["agentq.run.status"] == "succeeded"
    assert root.status_code != ERROR
    # A flat list of steps: 3 model jobs and 3 tool jobs, each one row under the run.
    process = sorted(
        (s for s in spans if s.parent_id == root.span_id and s.name.startswith("process")),
        key=lambda s: s.start_ns,
    )
    assert [s.name for s in process].count("process model") == 3
    assert [s.name for s in process].count("process tools") == 3
    assert len([s for s in spans if s.name == "chat scripted"]) == 3
    _assert_raising_tool(spans)
    calls = {s.attributes["gen_ai.tool.call.id"] for s in spans if s.name.startswith("execute")}
    assert calls == {"call_0_0", "call_0_1", "call_1_0"}


def test_embedded_run_records_content_behind_the_opt_in(tmp_path: Path) -> None:
    run_id = "trace-embedded-1"
    with OtlpReceiver() as receiver:
        _cli_run(
            _three_steps(run_id),
            tmp_path,
            "--tools",
            TOOLS,
            env={**receiver.env("embedded"), **CONTENT_ON},
        )
        spans = _trace_of(receiver, run_id)

    root = assert_flat_trace(spans)
    assert_genai_attributes(spans, run_id)
    _assert_raising_tool(spans)
    assert root.attributes["input.value"] == "go"
    assert root.attributes["output.value"] == "the sum is 7"
    chats = sorted((s for s in spans if s.name == "chat scripted"), key=lambda s: s.start_ns)
    first_in = parts(chats[0], "gen_ai.input.messages")
    assert first_in == [{"role": "user", "parts": [{"type": "text", "content": "go"}]}]
    assert parts(chats[0], "gen_ai.system_instructions") == [
        {"type": "text", "content": "You add numbers."}
    ]
    assert {t["name"] for t in parts(chats[0], "gen_ai.tool.definitions")} == {"add", "fail"}
    (out,) = parts(chats[0], "gen_ai.output.messages")
    assert out["finish_reason"] == "tool_call"
    assert [p["type"] for p in out["parts"]] == ["tool_call", "tool_call"]
    # The second step sees one tool message per tool result.
    tool_messages = [m for m in parts(chats[1], "gen_ai.input.messages") if m["role"] == "tool"]
    assert [m["parts"][0]["type"] for m in tool_messages] == ["tool_call_response"] * 2
    assert tool_messages[0]["parts"][0]["response"] == 3
    (last_out,) = parts(chats[2], "gen_ai.output.messages")
    assert last_out["parts"] == [{"type": "text", "content": "the sum is 7"}]
    (add_span,) = [s for s in spans if s.attributes.get("gen_ai.tool.call.id") == "call_1_0"]
    assert json.loads(add_span.attributes["gen_ai.tool.call.arguments"]) == {"a": 3, "b": 4}
    assert json.loads(add_span.attributes["gen_ai.tool.call.result"]) == 7


def test_embedded_run_without_opt_in_records_no_content(tmp_path: Path) -> None:
    run_id = "trace-embedded-2"
    with OtlpReceiver() as receiver:
        _cli_run(_three_steps(run_id), tmp_path, "--tools", TOOLS, env=receiver.env("embedded"))
        spans = _trace_of(receiver, run_id)
    assert_flat_trace(spans)
    assert_no_content(spans)


_APP_SCRIPT = """
import asyncio, sys
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "the-app"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=sys.argv[1])))
trace.set_tracer_provider(provider)

from agentq.workers.worker.embedded import embedded
from tests.support.sample_tools import add, fail

SPEC = %s

async def main():
    with trace.get_tracer("the-app").start_as_current_span("app request"):
        async with embedded(tools=[add, fail]) as client:
            result = await client.runs.wait(await client.runs.submit(SPEC), timeout_s=60)
    assert result.status == "succeeded", result

asyncio.run(main())
provider.shutdown()
"""


def test_an_applications_own_tracer_provider_gets_complete_traces(tmp_path: Path) -> None:
    """No OTEL_* variables: the application installed the SDK itself."""
    run_id = "trace-app-1"
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(_APP_SCRIPT % repr(_three_steps(run_id))))
    with OtlpReceiver() as receiver:
        done = subprocess.run(
            [sys.executable, str(script), receiver.endpoint],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        )
        assert done.returncode == 0, done.stderr
        spans = _trace_of(receiver, run_id)
        app = [s for s in receiver.spans if s.name == "app request"]
    assert_flat_trace(spans)
    assert {s.service for s in spans} == {"the-app"}
    # The app's own span is its own trace; the run's trace stands alone.
    assert len(app) == 1


def test_provider_error_fails_the_run_with_errors_recorded_and_no_secret(
    redis_url: str, tmp_path: Path
) -> None:
    from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn

    key = "sk-trace-secret-0123456789"
    run_id = "trace-4xx-1"
    turns = [
        Turn(tool_calls=[ToolCall("add", {"a": 1, "b": 2})]),
        Turn(status=404, error="no such model", error_type="not_found_error"),
    ]
    with OtlpReceiver() as receiver, FakeOpenAI(turns) as model:
        models = write_models_file(
            tmp_path / "models.json", local={"provider": "openai", "base_url": model.base_url}
        )
        env = {**receiver.env("worker"), "OPENAI_API_KEY": key, "AGENTQ_MODELS": models}
        env.update(CONTENT_ON)
        worker = WorkerProcess(redis_url, "--tools", TOOLS, env=env)
        try:
            wait_ready(worker)
            spec = {
                "id": run_id,
                "model": "local:m",
                "prompt": "add",
                "tools": [{"type": "function", "name": "add"}],
            }
            spec_path = tmp_path / "spec.json"
            spec_path.write_text(json.dumps(spec))
            done = run_cli("run", str(spec_path), "--json", "--redis", redis_url, env=env)
            assert done.returncode == 1, done.stderr
            assert key not in done.stdout
        finally:
            worker.stop()
        spans = _trace_of(receiver, run_id)

    root = assert_flat_trace(spans)
    assert_genai_attributes(spans, run_id)
    assert root.status_code == ERROR
    assert root.attributes["error.type"] == "provider"
    assert exception_events(root)
    assert root.attributes["gen_ai.provider.name"] == "openai"
    chats = sorted((s for s in spans if s.name == "chat m"), key=lambda s: s.start_ns)
    assert chats[0].status_code != ERROR
    assert chats[0].attributes["server.address"] == "127.0.0.1"
    assert chats[0].attributes["gen_ai.response.id"] == "chatcmpl-0"
    assert chats[0].attributes["gen_ai.response.model"]
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ["tool_call"]
    assert chats[1].status_code == ERROR
    assert chats[1].attributes["error.type"] == "404"
    assert exception_events(chats[1])
    for s in spans:
        assert key not in repr(s), s.name


def test_json_log_lines_lead_to_the_trace(redis_url: str, tmp_path: Path) -> None:
    run_id = "trace-logs-1"
    with OtlpReceiver() as receiver:
        worker = WorkerProcess(
            redis_url,
            "--tools",
            TOOLS,
            env={**receiver.env("worker"), "AGENTQ_LOG_FORMAT": "json"},
        )
        try:
            wait_ready(worker)
            spec = scripted(
                {"tool_calls": [{"name": "log_warning", "input": {"message": "hello"}}]},
                {"text": "ok"},
                tools=["log_warning"],
                id=run_id,
            )
            _cli_run(spec, tmp_path, "--redis", redis_url, env={})
        finally:
            worker.stop()
        spans = _trace_of(receiver, run_id)
        lines = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]

    (line,) = [li for li in lines if li.get("message") == "tool says: hello"]
    assert line["level"] == "warning"
    assert line["run_id"] == run_id
    assert line["queue"] == "tools"
    assert line["job_id"] == keys.tool_job_id(run_id, 0, "call_0_0")
    (tool_span,) = [s for s in spans if s.name == "execute_tool log_warning"]
    assert line["trace_id"] == tool_span.trace_id
    assert line["span_id"] == tool_span.span_id


_PARKING_SCRIPT = """
import asyncio

from agentq.workers.worker.embedded import embedded
from tests.support.sample_tools import add

APPROVE, EXPIRE = %s, %s


async def main():
    async with embedded(tools=[add]) as client:
        approve_id = await client.runs.submit(APPROVE)
        async for event in client.runs.events(approve_id, follow=True):
            if event.type == "tool-approval-request":
                await client.runs.approve(approve_id, event.tool_call_id)
        approved = await client.runs.wait(approve_id, timeout_s=60)
        expired = await client.runs.wait(await client.runs.submit(EXPIRE), timeout_s=60)
    assert approved.status == "succeeded", approved
    assert expired.status == "succeeded", expired

asyncio.run(main())
"""


def test_parked_calls_approved_or_expired_stay_in_the_flat_trace(tmp_path: Path) -> None:
    """The typed inputs' other jobs are stamped too: the approved call's job (stamped by
    client.runs.approve), each parked call's deferred expiry job, and the next step's job that
    an expiry enqueues (stamped by the park_expiry job)."""
    approve = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]},
        {"text": "3"},
        tools=[],
        id="trace-approve-1",
    )
    approve["tools"] = [{"type": "function", "name": "add", "needs_approval": True}]
    expire = scripted(
        {"tool_calls": [{"name": "ask_user", "input": {}}]},
        {"text": "no answer"},
        tools=[],
        id="trace-expire-1",
    )
    expire["tools"] = [{"type": "client", "name": "ask_user", "park_timeout_s": 0.2}]
    script = tmp_path / "parking.py"
    script.write_text(_PARKING_SCRIPT % (repr(approve), repr(expire)))
    with OtlpReceiver() as receiver:
        done = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **receiver.env("embedded")},
        )
        assert done.returncode == 0, done.stderr
        approved = _trace_of(receiver, "trace-approve-1")
        expired = _trace_of(receiver, "trace-expire-1")

    def sent(spans: list[ReceivedSpan]) -> set[str]:
        return {s.attributes["messaging.message.id"] for s in spans if s.name.startswith("send")}

    def processed(spans: list[ReceivedSpan]) -> set[str]:
        return {s.attributes["messaging.message.id"] for s in spans if s.name.startswith("process")}

    root = assert_flat_trace(approved)
    run_id = "trace-approve-1"
    call_job = keys.tool_job_id(run_id, 0, "call_0_0")
    # The approval's send span belongs to the run (client.runs.approve runs in no job's span).
    (approval_send,) = [
        s for s in approved if s.attributes.get("messaging.message.id") == call_job and s.kind == 4
    ]
    assert approval_send.parent_id == root.span_id
    assert keys.expiry_job_id(run_id, 0, "call_0_0") in sent(approved)
    assert {call_job, keys.model_job_id(run_id, 1)} <= processed(approved)

    assert_flat_trace(expired)
    run_id = "trace-expire-1"
    expiry_job = keys.expiry_job_id(run_id, 0, "call_0_0")
    assert {expiry_job, keys.model_job_id(run_id, 1)} <= sent(expired)
    assert {expiry_job, keys.model_job_id(run_id, 1)} <= processed(expired)


def test_an_embedded_run_exports_over_grpc_when_the_protocol_says_so(tmp_path: Path) -> None:
    run_id = "trace-grpc-1"
    with OtlpGrpcReceiver() as receiver:
        _cli_run(_three_steps(run_id), tmp_path, "--tools", TOOLS, env=receiver.env("grpc"))
        spans = _trace_of(receiver, run_id)
    assert_flat_trace(spans)
    assert_genai_attributes(spans, run_id)
    assert {s.service for s in spans} == {"grpc"}
