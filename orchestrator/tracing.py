"""One OpenTelemetry trace per run, across every process that touched it.

Spans follow the GenAI conventions: `invoke_agent` for the run, `chat {model}`
for a model step, `execute_tool {name}` for a call, with producer/consumer
spans (`publish {queue}` / `process {queue}`) around every queue hop so the
time spent waiting in a queue is visible.

A run outlives any process, so its `invoke_agent` span is allocated at submit
(ids only) and recorded by whichever process ends the run, with the submit
time as its start. The same trick serves a hop whose producer does not know
yet whether it will enqueue (the last tool result in enqueues the next step):
its span id is allocated up front and the span recorded only if it did.
`setup_tracing` installs an id generator that honours such preset ids.

Configured by the standard OTEL_* variables; with none set nothing is
installed and every call here is the API's no-op.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import random
import time
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    TraceFlags,
    format_span_id,
    format_trace_id,
)

_PRESET: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "agentq_preset_ids", default=None
)
_installed = False


def _recording() -> bool:
    """Whether any tracer provider (ours, or one the application installed) is set."""
    return _installed or not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


def tracer() -> trace.Tracer:
    return trace.get_tracer("agentq")


def tracing_configured() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "")
    if exporter == "none":
        return False
    return bool(
        exporter
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup_tracing(service_name: str) -> None:
    """Install a tracer provider from the OTEL_* environment, once per process."""
    global _installed
    if _installed or not tracing_configured():
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )
    from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

    class PresetIdGenerator(IdGenerator):
        def __init__(self) -> None:
            self._random = RandomIdGenerator()

        def generate_span_id(self) -> int:
            preset = _PRESET.get()
            return preset[1] if preset else self._random.generate_span_id()

        def generate_trace_id(self) -> int:
            preset = _PRESET.get()
            return preset[0] if preset else self._random.generate_trace_id()

    exporter: SpanExporter
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp") == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    provider = TracerProvider(resource=resource, id_generator=PresetIdGenerator())
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _installed = True


def shutdown_tracing() -> None:
    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if callable(shutdown):
        shutdown()


def carrier() -> dict[str, str]:
    """The current context as W3C headers, for a job envelope."""
    out: dict[str, str] = {}
    inject(out)
    return out


def context_from(carrier_: Mapping[str, str]) -> otel_context.Context:
    return extract(dict(carrier_))


# -- preset spans: allocated now, recorded later (or never) ----------------------


def allocate(parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """Allocate a span id under `parent` (or a new trace) and return it as a carrier."""
    parent_ctx = trace.get_current_span(context_from(parent) if parent else None)
    parent_sc = parent_ctx.get_span_context()
    trace_id = parent_sc.trace_id if parent_sc.is_valid else random.getrandbits(128)
    span_ctx = SpanContext(
        trace_id=trace_id,
        span_id=random.getrandbits(64),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    out: dict[str, str] = {}
    inject(out, context=trace.set_span_in_context(NonRecordingSpan(span_ctx)))
    if parent:
        out["x-agentq-parent"] = parent.get("traceparent", "")
    return out


def record_preset(
    name: str,
    preset: Mapping[str, str],
    *,
    start_ns: int,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
    end_ns: int | None = None,
) -> None:
    """Record the span whose ids `allocate` handed out."""
    if not _installed or not preset.get("traceparent"):
        return
    sc = trace.get_current_span(context_from(preset)).get_span_context()
    parent_tp = preset.get("x-agentq-parent", "")
    parent = context_from({"traceparent": parent_tp}) if parent_tp else otel_context.Context()
    token = _PRESET.set((sc.trace_id, sc.span_id))
    try:
        span = tracer().start_span(
            name, context=parent, kind=kind, attributes=dict(attributes or {}), start_time=start_ns
        )
    finally:
        _PRESET.reset(token)
    span.end(end_time=end_ns or time.time_ns())


@contextlib.contextmanager
def span(
    name: str,
    *,
    parent: Mapping[str, str] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
    start_ns: int | None = None,
) -> Iterator[Span]:
    if not _recording():
        # The hot path of every job: with no provider installed, skip the API's
        # no-op machinery altogether.
        yield trace.INVALID_SPAN
        return
    ctx = context_from(parent) if parent is not None else None
    with tracer().start_as_current_span(
        name, context=ctx, kind=kind, attributes=dict(attributes or {}), start_time=start_ns
    ) as current:
        yield current


def ids_of(carrier_: Mapping[str, str]) -> tuple[str, str]:
    sc = trace.get_current_span(context_from(carrier_)).get_span_context()
    return format_trace_id(sc.trace_id), format_span_id(sc.span_id)


class Hops:
    """Producer spans for the queue hops a transition may cause.

    Each call hands out a preset carrier for one job's envelope; `record` then
    records the spans of the hops that really happened.
    """

    def __init__(self, queue: str, parent: Mapping[str, str] | None = None) -> None:
        self.queue = queue
        self.parent = dict(parent) if parent is not None else carrier()
        self.allocated: list[dict[str, str]] = []
        self.start_ns = time.time_ns()

    def __call__(self) -> dict[str, str]:
        if not _installed:
            return {}
        preset = allocate(self.parent)
        self.allocated.append(preset)
        return preset

    def record(self, presets: list[dict[str, str]], queue: str | None = None) -> None:
        for preset in presets:
            record_preset(
                f"publish {queue or self.queue}",
                preset,
                start_ns=self.start_ns,
                kind=SpanKind.PRODUCER,
                attributes={
                    "messaging.system": "redis",
                    "messaging.operation.type": "publish",
                    "messaging.destination.name": queue or self.queue,
                },
            )


def new_run_trace(run_id: str) -> dict[str, str]:
    """Allocate the run's `invoke_agent` span; it is recorded when the run ends.

    Always allocated, even where this process does not trace: the workers that
    do then still share one trace per run."""
    preset = allocate(None)
    preset["x-agentq-start"] = str(time.time_ns())
    return preset


def end_run(run_trace: Mapping[str, str], run_id: str, status: str, agent: str = "agentq") -> None:
    if not run_trace:
        return
    record_preset(
        f"invoke_agent {agent}",
        run_trace,
        start_ns=int(run_trace.get("x-agentq-start", time.time_ns())),
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": run_id,
            "agentq.run.status": status,
        },
    )
