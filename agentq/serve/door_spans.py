"""Which requests get a span: FastAPI's own OpenTelemetry SERVER spans (a child of the
caller's span when it sent a W3C `traceparent`), for the requests that act at a door
(submit, answer, cancel, lease) and not for the reads (GET, HEAD, OPTIONS: polls and
streams would bury the runs' spans), nor for a request that carries a credential in its
query string, which the span's `url.query` would keep. The span is current while its
request is handled: a run submitted under it has it as its span's parent (runs.py).
FastAPI's metrics and logs stay off: `/metrics` is Prometheus's (metrics.py)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from fastapi.telemetry import TelemetryConfig

READS = frozenset({"GET", "HEAD", "OPTIONS"})
CREDENTIALS = frozenset({"key", "token", "access_token"})


def untraced(scope: MutableMapping[str, Any]) -> bool:
    """Whether a request goes without a span."""
    if scope.get("type") != "http" or scope.get("method") in READS:
        return True
    query = bytes(scope.get("query_string") or b"").decode("latin-1")
    return any(name in CREDENTIALS for name, _ in parse_qsl(query, keep_blank_values=True))


DOOR_SPANS: TelemetryConfig = {
    "tracing": True,
    "operation_spans": False,  # dependency resolution, serialization: noise beside a run
    "metrics": False,
    "logs": False,
    "exclude": untraced,
}
