"""Which requests get a span: FastAPI's own OpenTelemetry SERVER spans (a child of the
caller's span when it sent a W3C `traceparent`), for the requests that act at a door
(submit, answer, cancel, lease) and not for the reads (GET, HEAD, OPTIONS: polls and
streams would bury the runs' spans), nor for a request that carries a credential in its
query string, which the span's `url.query` would keep. The span is current while its
request is handled: a run submitted under it has it as its span's parent (runs.py).
They go through agentq's kinded tracers, so a trace viewer shows them as CHAIN spans
(orchestrator/tracing/kinds.py) rather than of no kind. FastAPI's metrics and logs
stay off: `/metrics` is Prometheus's (metrics.py)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from fastapi.telemetry import TelemetryConfig
from opentelemetry import trace

from agentq.orchestrator import tracing

READS = frozenset({"GET", "HEAD", "OPTIONS"})
CREDENTIALS = frozenset({"key", "token", "access_token"})


def untraced(scope: MutableMapping[str, Any]) -> bool:
    """Whether a request goes without a span."""
    if scope.get("type") != "http" or scope.get("method") in READS:
        return True
    query = bytes(scope.get("query_string") or b"").decode("latin-1")
    return any(name in CREDENTIALS for name, _ in parse_qsl(query, keep_blank_values=True))


def door_spans() -> TelemetryConfig:
    """FastAPI's telemetry for the doors, on the provider set when the app is made
    (`agentq serve` sets its own up first). With none set, FastAPI's default: it
    records only if a provider appears later, without kinds."""
    config: TelemetryConfig = {
        "tracing": True,
        "operation_spans": False,  # dependency resolution, serialization: noise beside a run
        "metrics": False,
        "logs": False,
        "exclude": untraced,
    }
    if tracing.recording():
        # Given a provider, FastAPI traces every request: only when one records.
        config["tracer_provider"] = tracing.KindedTracerProvider(trace.get_tracer_provider())
    return config
