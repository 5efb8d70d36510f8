"""agentq's own export path: lean spans and the wire encoder say what the SDK's would.

The encoder's bytes are the SDK encoder's bytes (so any OTLP receiver decodes them as
it decodes the SDK's); a `LightSpan` exports as the SDK's span made by the same calls;
only the provider agentq installed gets either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)

from agentq.orchestrator import tracing
from agentq.orchestrator.tracing import light_spans, span_batches
from agentq.orchestrator.tracing.otlp_export import WireSpanExporter, traces_endpoint
from agentq.orchestrator.tracing.otlp_wire import SpanEncoder
from tests.support.otlp import OtlpReceiver
from tests.support.waiting import eventually

Scenario = Callable[[trace.Tracer], None]


class _Kept(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _provider(service: str = "test") -> tuple[TracerProvider, _Kept]:
    kept = _Kept()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    return provider, kept


def _remote(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))


def _steps(tracer: trace.Tracer) -> None:
    """What a job does with its spans, and what foreign code might do to them."""
    run = trace.set_span_in_context(NonRecordingSpan(_remote(0xABC, 0xDEF)))
    link = Link(_remote(0xABC, 0x123), {"why": "sent it"})
    with tracer.start_as_current_span(
        "process tools",
        context=run,
        kind=SpanKind.CONSUMER,
        attributes={"messaging.system": "redis", "agentq.step": 3},
        links=[link],
    ) as process:
        process.set_attribute("long", "x" * 500)
        with tracer.start_as_current_span(
            "execute_tool add",
            attributes={"gen_ai.tool.name": "add", "ratio": 0.5, "neg": -7, "ok": True},
            record_exception=False,
        ) as tool:
            tool.set_attributes({"reasons": ["stop", "length"], "ints": (1, 2), "empty": ""})
            tool.set_attribute("bad", {"a": object()})  # type: ignore[dict-item]
            tool.add_event("note", {"ünïcode": "é", "n": 2})
            tool.record_exception(RuntimeError("boom"))
            tool.set_status(Status(StatusCode.ERROR, "boom"))
            tool.set_status(Status(StatusCode.UNSET))  # never overrides
        send = tracer.start_span("send model", kind=SpanKind.PRODUCER)
        send.add_link(_remote(0xABC, 0x456))
        send.update_name("send model!")
        send.set_status(Status(StatusCode.OK))
        send.set_status(Status(StatusCode.ERROR, "too late"))  # OK is final
        send.end()
        send.set_attribute("after", "the end")  # an ended span takes nothing
    failing = tracer.start_as_current_span("root that fails")
    with pytest.raises(ValueError, match="bad input"), failing:
        raise ValueError("bad input")


def _sdk_spans(scenario: Scenario) -> list[ReadableSpan]:
    provider, kept = _provider()
    scenario(provider.get_tracer("agentq", "1", schema_url=tracing.SCHEMA_URL))
    return kept.spans


def _light_spans(scenario: Scenario) -> list[ReadableSpan]:
    provider, kept = _provider()
    scope = InstrumentationScope("agentq", "1", tracing.SCHEMA_URL)
    scenario(light_spans.LightTracer(provider, scope))
    return kept.spans


def _shape(spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
    """What a receiver reads, with the random ids and clocks made relative."""
    request = ExportTraceServiceRequest.FromString(SpanEncoder().encode(spans))
    (resource_spans,) = request.resource_spans
    (scoped,) = resource_spans.scope_spans
    names = {s.span_id: s.name for s in scoped.spans}
    shape = []
    for s in scoped.spans:
        assert s.start_time_unix_nano <= s.end_time_unix_nano
        events = []
        for e in s.events:
            attributes = {a.key: str(a.value) for a in e.attributes}
            attributes.pop("exception.stacktrace", None)  # its line numbers differ
            events.append((e.name, attributes))
        shape.append(
            {
                "name": s.name,
                "scope": (scoped.scope.name, scoped.scope.version, scoped.schema_url),
                "parent": names.get(s.parent_span_id, s.parent_span_id.hex()),
                "kind": s.kind,
                "flags": s.flags,
                "attributes": {a.key: str(a.value) for a in s.attributes},
                "events": events,
                "links": [
                    (k.trace_id.hex(), k.span_id.hex(), str(k.attributes), k.flags) for k in s.links
                ],
                "status": (s.status.code, s.status.message),
                "trace": s.trace_id.hex() if s.parent_span_id else "new",
            }
        )
    return shape


def test_the_wire_encoder_writes_the_sdk_encoders_bytes() -> None:
    spans = _sdk_spans(_steps)
    # Another resource and scope in the same batch, and a span with a trace state.
    provider, kept = _provider("other")
    state = TraceState([("vendor", "value")])
    parent = SpanContext(0x1, 0x2, is_remote=False, trace_flags=TraceFlags(1), trace_state=state)
    context = trace.set_span_in_context(NonRecordingSpan(parent))
    provider.get_tracer("someone.else").start_span("theirs", context=context).end()
    batch = [spans[0], *kept.spans, *spans[1:]]

    ours = SpanEncoder().encode(batch)

    assert ours == encode_spans(batch).SerializeToString()
    decoded = ExportTraceServiceRequest.FromString(ours)
    assert [len(r.scope_spans) for r in decoded.resource_spans] == [1, 1]
    assert sum(len(s.spans) for r in decoded.resource_spans for s in r.scope_spans) == len(batch)


def test_lean_spans_encode_to_the_sdk_encoders_bytes() -> None:
    """Lean spans go through the encoder's shortcut for agentq's usual span (no events,
    status unset, links without attributes) or its general path; both write what the
    SDK's encoder writes for the same spans."""
    provider, kept = _provider()
    tracer = light_spans.LightTracer(provider, InstrumentationScope("agentq", "1"))
    run = _remote(0xABC, 0xDEF)
    process = tracer.own_span(
        "process model",
        run,
        SpanKind.CONSUMER,
        {"messaging.system": "redis", "agentq.step": 3},
        (Link(_remote(0xABC, 0x123)), Link(SpanContext(0xABC, 0x124, is_remote=False))),
    )
    chat = tracer.own_span(
        "chat m", process.get_span_context(), SpanKind.CLIENT, {"n": 1.5, "t": ("a", "b")}
    )
    chat.end()
    tracer.own_span("send tools", process.get_span_context(), SpanKind.PRODUCER, {}).end()
    tracer.own_span("a root", trace.INVALID_SPAN_CONTEXT, SpanKind.INTERNAL, {}).end()
    state = TraceState([("vendor", "value")])
    stated = SpanContext(0x1, 0x2, is_remote=True, trace_flags=TraceFlags(1), trace_state=state)
    tracer.own_span("inherits a trace state", stated, SpanKind.INTERNAL, {}).end()
    failed = tracer.own_span("failed", run, SpanKind.INTERNAL, {})
    failed.set_status(Status(StatusCode.ERROR, "boom"))
    failed.end()
    tracer.own_span("linked", run, SpanKind.INTERNAL, {}, (Link(run, {"why": "x"}),)).end()
    process.end()

    spans = kept.spans
    assert len(spans) == 7
    assert SpanEncoder().encode(spans) == encode_spans(spans).SerializeToString()


def test_lean_spans_export_as_the_sdks_spans_made_by_the_same_calls() -> None:
    theirs = _shape(_sdk_spans(_steps))
    ours = _shape(_light_spans(_steps))

    assert ours == theirs
    failed = next(s for s in ours if s["name"] == "root that fails")
    assert failed["status"] == (2, "ValueError: bad input")
    assert [name for name, _ in failed["events"]] == ["exception"]


def test_lean_spans_follow_the_default_sampler_and_preset_ids() -> None:
    provider, kept = _provider()
    preset: list[tuple[int, int] | None] = [None]
    tracer = light_spans.LightTracer(provider, InstrumentationScope("agentq"), lambda: preset[0])
    unsampled = SpanContext(0x5, 0x6, is_remote=True, trace_flags=TraceFlags(0))
    child = tracer.start_span(
        "child", context=trace.set_span_in_context(NonRecordingSpan(unsampled))
    )
    assert not child.is_recording()
    assert not child.get_span_context().trace_flags.sampled
    preset[0] = (0x77, 0x88)
    root = tracer.start_span("run", context=otel_context.Context())
    later = _Kept()  # a processor added after the tracer was made gets the spans too
    provider.add_span_processor(SimpleSpanProcessor(later))
    root.end()
    assert (root.get_span_context().trace_id, root.get_span_context().span_id) == (0x77, 0x88)
    assert [s.name for s in kept.spans] == [s.name for s in later.spans] == ["run"]


def test_only_the_provider_agentq_installed_gets_lean_spans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ours, _ = _provider()
    application, _ = _provider()
    monkeypatch.setattr(tracing, "_installed", ours)

    assert isinstance(tracing._make_tracer(ours), light_spans.LightTracer)
    assert not isinstance(tracing._make_tracer(application), light_spans.LightTracer)
    # A sampler or a limit the SDK would apply: its own spans, then.
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "8")
    assert not isinstance(tracing._make_tracer(ours), light_spans.LightTracer)
    monkeypatch.delenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT")
    sampled_off = TracerProvider(sampler=ALWAYS_OFF)
    monkeypatch.setattr(tracing, "_installed", sampled_off)
    assert not light_spans.eligible(sampled_off)


def test_the_exporter_posts_lean_spans_a_receiver_decodes() -> None:
    with OtlpReceiver() as receiver:
        exporter = WireSpanExporter(endpoint=receiver.endpoint)
        spans = _light_spans(_steps)

        assert exporter.export(spans) == SpanExportResult.SUCCESS

        got = receiver.wait_for(lambda got: len(got) == len(spans), "the exported spans")
        exporter.shutdown()
    assert sorted(s.name for s in got) == sorted(s.name for s in spans)
    (process,) = [s for s in got if s.name == "process tools"]
    assert process.service == "test"
    assert process.attributes["agentq.step"] == 3
    assert process.links == (("0" * 29 + "abc", "0" * 13 + "123"),)


def test_the_exporter_reads_the_standard_variables() -> None:
    with OtlpReceiver() as receiver:
        base = receiver.endpoint.removesuffix("/v1/traces")
        environ = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": base,
            "OTEL_EXPORTER_OTLP_HEADERS": "x-team=agents,x-other=1",
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",  # the receiver gunzips
            "OTEL_EXPORTER_OTLP_TIMEOUT": "5",
        }
        exporter = WireSpanExporter(environ=environ)
        assert exporter.endpoint == base + "/v1/traces"

        assert exporter.export(_light_spans(_steps)) == SpanExportResult.SUCCESS

        receiver.wait_for(lambda got: len(got) == 4, "the gzipped spans")
        exporter.shutdown()
    assert traces_endpoint({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:1/x"}) == "http://h:1/x"
    assert traces_endpoint({}) == "http://localhost:4318/v1/traces"
    assert traces_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:2/"}) == "http://h:2/v1/traces"
    # A bad timeout is a warning, not a worker that cannot start.
    WireSpanExporter(environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}).shutdown()


class _Flaky:
    """An OTLP endpoint that answers `codes` in turn (then 200) and keeps the headers."""

    def __init__(self, *codes: int) -> None:
        self.codes = list(codes)
        self.headers: list[dict[str, str]] = []
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                flaky.headers.append(dict(self.headers))
                code = flaky.codes.pop(0) if flaky.codes else 200
                self.send_response(code)
                if code == 503:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_exporter_retries_what_is_transient_only() -> None:
    flaky = _Flaky(503, 503)
    try:
        environ = {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%20t"}
        exporter = WireSpanExporter(endpoint=flaky.endpoint, environ=environ)
        assert exporter.export(_light_spans(_steps)) == SpanExportResult.SUCCESS
        assert len(flaky.headers) == 3
        assert flaky.headers[-1]["authorization"] == "Bearer t"
        assert flaky.headers[-1]["Content-Type"] == "application/x-protobuf"

        flaky.codes = [400]
        assert exporter.export(_light_spans(_steps)) == SpanExportResult.FAILURE
        assert len(flaky.headers) == 4  # a bad request is not sent again
        exporter.shutdown()
        assert exporter.export(_light_spans(_steps)) == SpanExportResult.FAILURE
    finally:
        flaky.close()


def test_the_batcher_exports_full_batches_at_once_and_the_rest_on_flush() -> None:
    kept = _Kept()
    suppressed: list[object] = []

    class Watching(_Kept):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            suppressed.append(otel_context.get_value(span_batches._SUPPRESS))
            return kept.export(spans)

    environ = {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4", "OTEL_BSP_SCHEDULE_DELAY": "600000"}
    batcher = span_batches.SpanBatcher(Watching(), environ)
    provider = TracerProvider()
    provider.add_span_processor(batcher)
    tracer = light_spans.LightTracer(provider, InstrumentationScope("agentq"))
    for i in range(6):
        tracer.start_span(f"s{i}").end()
    # A full batch wakes the export thread, long before the schedule's delay.
    eventually(lambda: len(kept.spans), "a full batch exported", 10, until=lambda n: n == 4)
    batcher.force_flush()
    assert [s.name for s in kept.spans] == [f"s{i}" for i in range(6)]
    assert suppressed
    assert all(s is True for s in suppressed)  # posting records no span

    tracer.start_span("last").end()
    batcher.shutdown()  # exports what is left, then stops
    assert kept.spans[-1].name == "last"
    tracer.start_span("after").end()
    assert kept.spans[-1].name == "last"


def test_the_batcher_drops_spans_past_its_queue() -> None:
    kept = _Kept()
    batcher = span_batches.SpanBatcher(kept, {"OTEL_BSP_MAX_QUEUE_SIZE": "3"})
    provider = TracerProvider()
    provider.add_span_processor(batcher)
    tracer = light_spans.LightTracer(provider, InstrumentationScope("agentq"))
    with batcher._export_lock:  # the export thread takes nothing meanwhile
        for i in range(5):
            tracer.start_span(f"s{i}").end()
    batcher.shutdown()
    assert [s.name for s in kept.spans] == ["s0", "s1", "s2"]
