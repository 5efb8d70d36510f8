"""Every span agentq starts says what it is to an LLM trace viewer.

Arize Phoenix (and other OpenInference readers) sort spans by the
`openinference.span.kind` attribute, not by OpenTelemetry's SpanKind: at ingest
Phoenix derives it from `gen_ai.operation.name` for the agent, model and tool
spans, and shows everything else (the queue's `send`/`process` spans, the doors'
HTTP spans) as UNKNOWN. So the kind is set as each span starts, from the same
GenAI operation, on the tracers agentq uses: its own (`tracing.tracer()`, on
whatever provider is set) and the one `agentq serve` hands FastAPI for its door
spans. A span that names its kind already keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind
from opentelemetry.util.types import Attributes

if TYPE_CHECKING:
    # What the API's `Tracer.start_as_current_span` returns: its type is only there.
    from opentelemetry.util._decorator import _AgnosticContextManager

OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
GENAI_OPERATION = "gen_ai.operation.name"
# OpenInference's kinds for the GenAI operations agentq records; anything else is
# glue between the application's steps (a queue hop, a request at a door): CHAIN.
BY_OPERATION: Mapping[str, str] = {
    "invoke_agent": "AGENT",
    "chat": "LLM",
    "text_completion": "LLM",
    "generate_content": "LLM",
    "embeddings": "EMBEDDING",
    "execute_tool": "TOOL",
}
CHAIN = "CHAIN"


def openinference_kind(attributes: Attributes) -> str:
    """The OpenInference kind of a span started with these attributes."""
    operation = attributes.get(GENAI_OPERATION) if attributes else None
    return BY_OPERATION.get(operation, CHAIN) if isinstance(operation, str) else CHAIN


def with_kind(attributes: Attributes) -> dict[str, Any]:
    """`attributes` plus the span's OpenInference kind, unless they name one already."""
    kinded = dict(attributes) if attributes else {}
    if OPENINFERENCE_SPAN_KIND not in kinded:
        kinded[OPENINFERENCE_SPAN_KIND] = openinference_kind(kinded)
    return kinded


class KindedTracer(trace.Tracer):
    """A tracer whose spans all carry their OpenInference kind (`with_kind`)."""

    def __init__(self, inner: trace.Tracer) -> None:
        self.inner = inner

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        return self.inner.start_span(
            name,
            context=context,
            kind=kind,
            attributes=with_kind(attributes),
            links=links,
            start_time=start_time,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        )

    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> _AgnosticContextManager[Span]:
        return self.inner.start_as_current_span(
            name,
            context=context,
            kind=kind,
            attributes=with_kind(attributes),
            links=links,
            start_time=start_time,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
            end_on_exit=end_on_exit,
        )


class KindedTracerProvider(trace.TracerProvider):
    """`inner`'s tracers, kinded: what `agentq serve` gives FastAPI for its door spans."""

    def __init__(self, inner: trace.TracerProvider) -> None:
        self.inner = inner

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes = None,
    ) -> trace.Tracer:
        return KindedTracer(
            self.inner.get_tracer(
                instrumenting_module_name,
                instrumenting_library_version,
                schema_url=schema_url,
                attributes=attributes,
            )
        )
