"""agentq's tracer provider: the OpenTelemetry SDK's, set up from the OTEL_* variables.

When a process is told where to send spans (OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT or
OTEL_TRACES_EXPORTER) and no application installed a provider first, agentq installs
the SDK's `TracerProvider` with one `BatchSpanProcessor` per exporter. Everything is
the SDK's and reads the SDK's variables: the sampler (OTEL_TRACES_SAMPLER), span
limits, the batch settings (OTEL_BSP_*), the resource (OTEL_RESOURCE_ATTRIBUTES,
OTEL_SERVICE_NAME), and each exporter its own (endpoint, headers, timeout,
compression, certificates).

Which exporters, as the SDK's auto-configuration reads OTEL_TRACES_EXPORTER (a
comma-separated list, `otlp` when unset, `none` for none): `otlp` speaks the protocol
OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL names, `http/protobuf` unless it says `grpc`
(that exporter is the `grpc` extra: `pip install 'agentq[grpc]'`); any other name is
an exporter registered under the `opentelemetry_traces_exporter` entry points
(`console`, `otlp_proto_http`, `otlp_proto_grpc`, or a third party's). `console` writes
to stderr, not the SDK's default stdout: stdout is the command's output (`run --json`).

An application's own provider is the application's: agentq neither replaces nor
flushes nor shuts it down.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from opentelemetry import trace

from agentq.orchestrator.core.errors import InfrastructureError

# The SDK is imported where a provider is made, not here: a process that traces
# nothing (a client, `agentq -h`) never loads it (~65 ms).
if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

HTTP_PROTOBUF = "http/protobuf"
GRPC = "grpc"
_EXPORTER_ENTRY_POINTS = "opentelemetry_traces_exporter"

_installed: TracerProvider | None = None  # the provider agentq installed, if any


def tracing_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the OTEL_* variables ask for spans to be exported somewhere."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "")
    if exporter == "none":
        return False
    return bool(
        exporter
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def otlp_protocol(environ: Mapping[str, str]) -> str:
    """The OTLP protocol the variables name (the traces-specific one wins)."""
    chosen = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", HTTP_PROTOBUF
    )
    return chosen.strip().lower() or HTTP_PROTOBUF


def _otlp_exporter(environ: Mapping[str, str]) -> SpanExporter:
    protocol = otlp_protocol(environ)
    if protocol == HTTP_PROTOBUF:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol == GRPC:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcSpanExporter,
            )
        except ImportError as exc:
            raise InfrastructureError(
                "OTLP over gRPC needs the gRPC exporter: pip install 'agentq[grpc]'"
            ) from exc
        return GrpcSpanExporter()
    raise InfrastructureError(
        f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported:"
        f" use {HTTP_PROTOBUF!r} (the default) or {GRPC!r}"
    )


def _console_exporter() -> SpanExporter:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    return ConsoleSpanExporter(out=sys.stderr)


def _registered_exporter(name: str) -> SpanExporter:
    found = entry_points(group=_EXPORTER_ENTRY_POINTS, name=name)
    if not found:
        raise InfrastructureError(f"OTEL_TRACES_EXPORTER names {name!r}: no such span exporter")
    exporter_class = next(iter(found)).load()
    exporter: SpanExporter = exporter_class()
    return exporter


def span_exporters(environ: Mapping[str, str] | None = None) -> list[SpanExporter]:
    """The exporters OTEL_TRACES_EXPORTER names (see the module's docstring)."""
    env = os.environ if environ is None else environ
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    makers = {"otlp": lambda: _otlp_exporter(env), "console": _console_exporter}
    return [
        makers[name]() if name in makers else _registered_exporter(name)
        for name in names
        if name and name != "none"
    ]


def setup_tracing(service_name: str) -> None:
    """Install the SDK's provider from the OTEL_* environment, unless a provider is set
    already (the application's, or ours from an earlier call) or nothing is configured.
    `service_name` names the process unless OTEL_SERVICE_NAME does."""
    global _installed
    if _provider_set() or not tracing_configured():
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    provider = TracerProvider(resource=resource)
    for exporter in span_exporters():
        provider.add_span_processor(BatchSpanProcessor(exporter))
    _installed = provider
    trace.set_tracer_provider(provider)


def _provider_set() -> bool:
    return not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


def installed_provider() -> TracerProvider | None:
    """The tracer provider agentq installed (`setup_tracing`), if it did."""
    return _installed


def flush_tracing(timeout_ms: int = 5000) -> None:
    """Export what agentq's own provider buffers (the end of an embedded session).
    An application's provider is the application's to flush."""
    if _installed is not None:
        _installed.force_flush(timeout_ms)


def shutdown_tracing() -> None:
    """Flush and stop the provider agentq installed (an application's is its own)."""
    if _installed is not None:
        _installed.shutdown()
