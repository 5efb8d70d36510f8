"""The OpenInference kind every span agentq starts carries (orchestrator/tracing/kinds.py)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentq.orchestrator.tracing.kinds import (
    OPENINFERENCE_SPAN_KIND,
    KindedTracerProvider,
    openinference_kind,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("attributes", "kind"),
    [
        ({"gen_ai.operation.name": "invoke_agent"}, "AGENT"),
        ({"gen_ai.operation.name": "chat"}, "LLM"),
        ({"gen_ai.operation.name": "execute_tool"}, "TOOL"),
        ({"gen_ai.operation.name": "embeddings"}, "EMBEDDING"),
        ({"messaging.operation.type": "send"}, "CHAIN"),
        ({"gen_ai.operation.name": "something new"}, "CHAIN"),
        ({"gen_ai.operation.name": 3}, "CHAIN"),
        ({}, "CHAIN"),
        (None, "CHAIN"),
    ],
)
def test_the_kind_follows_the_genai_operation(attributes: dict[str, object], kind: str) -> None:
    assert openinference_kind(attributes) == kind  # type: ignore[arg-type]


def test_a_kinded_tracer_marks_every_span_and_keeps_a_given_kind() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = KindedTracerProvider(provider).get_tracer("t")

    tracer.start_span("chat m", attributes={"gen_ai.operation.name": "chat"}).end()
    tracer.start_span("POST /v1/runs").end()
    with tracer.start_as_current_span(
        "retrieve", attributes={OPENINFERENCE_SPAN_KIND: "RETRIEVER"}
    ):
        pass
    kinds = {
        s.name: (s.attributes or {})[OPENINFERENCE_SPAN_KIND] for s in exporter.get_finished_spans()
    }
    assert kinds == {"chat m": "LLM", "POST /v1/runs": "CHAIN", "retrieve": "RETRIEVER"}
