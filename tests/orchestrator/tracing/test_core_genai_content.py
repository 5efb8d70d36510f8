"""What agentq's spans say: the GenAI conventions' vocabulary and message-parts format."""

from __future__ import annotations

import json

import pytest

from agentq.orchestrator import tracing
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.loop.plan import CallPlan, StepPlan
from agentq.orchestrator.runs.state import CallStatus, MetaField, Outcome, StepAfter
from agentq.orchestrator.runs.transitions import commit_args, enqueued_job_ids, result_args
from agentq.orchestrator.tracing import genai_content as content

pytestmark = pytest.mark.unit


def test_messages_in_the_conventions_parts_format_one_tool_message_per_result() -> None:
    messages: list[Message] = [
        SystemMessage(content="be brief"),
        UserMessage(content=[TextPart(text="hi"), MediaPart(media_type="image/png", data="AAAA")]),
        AssistantMessage(
            content=[
                TextPart(text="adding"),
                ToolCallPart(tool_call_id="c1", tool_name="add", input={"a": 1}),
            ]
        ),
        ToolMessage(
            content=[
                ToolResultPart(tool_call_id="c1", tool_name="add", output=2),
                ToolResultPart(tool_call_id="c2", tool_name="x", output="no", is_error=True),
            ]
        ),
    ]
    assert json.loads(content.input_messages(messages)) == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "hi"},
                {"type": "blob", "mime_type": "image/png", "modality": "image", "content": ""},
            ],
        },
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "adding"},
                {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 1}},
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": 2}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c2", "response": "no"}]},
    ]


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [("stop", "stop"), ("tool-calls", "tool_call"), ("content-filter", "content_filter")],
)
def test_finish_reasons_in_the_conventions_vocabulary(ours: str, theirs: str) -> None:
    (out,) = json.loads(content.output_messages("", [], ours))
    assert out["finish_reason"] == theirs


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [("openai", "openai"), ("openai-responses", "openai"), ("gemini", "gcp.gemini")],
)
def test_well_known_provider_names(ours: str, theirs: str) -> None:
    assert content.provider_name(ours) == theirs


@pytest.mark.parametrize(
    ("kind", "tool_type"), [("function", "function"), ("client", "function"), ("mcp", "extension")]
)
def test_tool_type_is_the_kind_of_tool_not_its_outcome(kind: str, tool_type: str) -> None:
    assert content.tool_type(kind) == tool_type


def test_content_is_capped_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTQ_TRACE_CONTENT_MAX_CHARS", "10")
    capped = content.as_json("x" * 100)
    assert capped.startswith('"xxxxxxxxx')
    assert "truncated 92 chars" in capped


def test_run_content_only_behind_the_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"model": {"provider": "gemini", "name": "g"}, "prompt": "hello", "system": "s"}
    meta = {"status": "succeeded", "text": "bye", "u_in": "3", "u_out": "4", "step": "1"}
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    plain = content.run_attributes("r1", spec, meta)
    assert "input.value" not in plain
    assert plain["gen_ai.provider.name"] == "gcp.gemini"
    assert plain["gen_ai.usage.input_tokens"] == 3
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    full = content.run_attributes("r1", spec, meta)
    assert (full["input.value"], full["output.value"]) == ("hello", "bye")


def test_the_runs_span_ids_derive_from_its_id() -> None:
    assert tracing.run_ids("r1") == tracing.run_ids("r1")
    assert tracing.run_ids("r1") != tracing.run_ids("r2")
    trace_id, span_id = tracing.run_ids("r1")
    assert tracing.run_carrier("r1")["traceparent"] == f"00-{trace_id:032x}-{span_id:016x}-01"


def test_jobs_a_transition_enqueued_by_outcome() -> None:
    queued = CallPlan(id="c1", name="add", input={}, status=CallStatus.QUEUED, queue="tools")
    parked = CallPlan(
        id="c2", name="ok", input={}, status=CallStatus.AWAITING_APPROVAL, park_timeout_s=60
    )
    plan = StepPlan(
        step=0,
        text="",
        finish_reason="tool-calls",
        calls=[queued, parked],
        after=StepAfter.CONTINUE,
    )
    args = commit_args("r", plan)
    calls = [keys.tool_job_id("r", 0, "c1"), keys.expiry_job_id("r", 0, "c2")]
    assert enqueued_job_ids(args, Outcome.COMMITTED) == calls
    # With calls pending, the commit does not join: the next step's job is not sent.
    assert args.next_job is None
    assert enqueued_job_ids(args, Outcome.CONTINUED) == calls
    assert enqueued_job_ids(args, Outcome.DUPLICATE) == []
    recorded = result_args("r", 0, ToolResultPart(tool_call_id="c1", tool_name="add", output=3))
    assert enqueued_job_ids(recorded, Outcome.RECORDED) == []
    assert enqueued_job_ids(recorded, Outcome.CONTINUED) == [keys.model_job_id("r", 1)]
    # A job as the builders render it carries no trace context: the tracing layer stamps it.
    assert '"trace":{}' in recorded.next_job.payload
    # Without a tracer provider, stamping is free: the input comes back as it was.
    assert tracing.Hops("r").stamp(args) is args


def test_the_run_span_carries_cache_reads_and_writes_apart() -> None:
    meta: dict[str, str] = {
        MetaField.USAGE_INPUT: "125",
        MetaField.USAGE_CACHED: "100",
        MetaField.USAGE_CACHE_WRITE: "5",
    }
    attributes = content.run_attributes("r1", {"model": "openai:m"}, meta)
    assert attributes["gen_ai.usage.input_tokens"] == 125
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 5
