"""The OTLP/HTTP span exporter of agentq's own tracer provider.

Configured by the standard variables, as the SDK's exporter reads them (a
`_TRACES_` variable wins over the general one): OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT,
_HEADERS, _TIMEOUT (seconds), _COMPRESSION (gzip, deflate, none), _CERTIFICATE,
_CLIENT_CERTIFICATE, _CLIENT_KEY. A batch is encoded by `otlp_wire` (the SDK
encoder's bytes at a third of its CPU) and posted with httpx, which every
worker has loaded already; failures are retried as the SDK's exporter retries
them (429, 502, 503, 504 and connection errors, exponential backoff with
jitter or the server's Retry-After, within the timeout).

Why not the SDK's exporter with another encoder: it brings `requests` and the
generated protobuf modules into the process, ~10,000 objects that live for
good, and every full garbage collection of a worker walks them (+4 ms a
collection here, ~0.04 ms a step). An application's own provider keeps
whatever exporter the application gave it.
"""

from __future__ import annotations

import gzip
import logging
import os
import random
import ssl
import threading
import time
import zlib
from collections.abc import Mapping, Sequence

import httpx
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.util.re import parse_env_headers

from agentq.orchestrator.otlp_wire import SpanEncoder

log = logging.getLogger("agentq.tracing")

DEFAULT_ENDPOINT = "http://localhost:4318/"
TRACES_PATH = "v1/traces"
DEFAULT_TIMEOUT_S = 10.0
_RETRYABLE = frozenset({429, 502, 503, 504})
_MAX_ATTEMPTS = 6


def _setting(environ: Mapping[str, str], name: str) -> str | None:
    """OTEL_EXPORTER_OTLP_TRACES_{name}, else OTEL_EXPORTER_OTLP_{name}."""
    value = environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or environ.get(
        f"OTEL_EXPORTER_OTLP_{name}"
    )
    return value.strip() if value else None


def traces_endpoint(environ: Mapping[str, str]) -> str:
    """The traces variable as it is; the general one is a base the signal path joins."""
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces:
        return traces.strip()
    base = (environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT).strip()
    return base + ("" if base.endswith("/") else "/") + TRACES_PATH


def _timeout_s(raw: str | None) -> float:
    try:
        return float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        log.warning("OTLP timeout %r is not a number; using %g s", raw, DEFAULT_TIMEOUT_S)
        return DEFAULT_TIMEOUT_S


def _tls(environ: Mapping[str, str]) -> ssl.SSLContext | bool:
    ca = _setting(environ, "CERTIFICATE")
    cert = _setting(environ, "CLIENT_CERTIFICATE")
    key = _setting(environ, "CLIENT_KEY")
    if not (ca or cert):
        return True
    context = ssl.create_default_context(cafile=ca or None)
    if cert:
        context.load_cert_chain(cert, key or None)
    return context


class WireSpanExporter(SpanExporter):
    def __init__(
        self, endpoint: str | None = None, environ: Mapping[str, str] | None = None
    ) -> None:
        env = os.environ if environ is None else environ
        self.endpoint = endpoint or traces_endpoint(env)
        self._timeout_s = _timeout_s(_setting(env, "TIMEOUT"))
        self._compression = (_setting(env, "COMPRESSION") or "none").lower()
        headers = {
            "Content-Type": "application/x-protobuf",
            "User-Agent": "agentq-otlp-exporter",
            **parse_env_headers(_setting(env, "HEADERS") or "", liberal=True),
        }
        if self._compression in ("gzip", "deflate"):
            headers["Content-Encoding"] = self._compression
        self._client = httpx.Client(headers=headers, verify=_tls(env), timeout=self._timeout_s)
        self._encoder = SpanEncoder()
        self._stopped = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped.is_set():
            return SpanExportResult.FAILURE
        try:
            body = self._compress(self._encoder.encode(spans))
        except Exception as exc:  # a span the encoder cannot write: the batch is lost
            log.error("could not encode %d spans: %s", len(spans), exc)
            return SpanExportResult.FAILURE
        deadline = time.monotonic() + self._timeout_s
        for attempt in range(_MAX_ATTEMPTS):
            remaining = deadline - time.monotonic()
            backoff = 2**attempt * random.uniform(0.8, 1.2)
            try:
                reply = self._client.post(self.endpoint, content=body, timeout=max(remaining, 0))
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if 200 <= reply.status_code < 400:
                    return SpanExportResult.SUCCESS
                problem = f"HTTP {reply.status_code}"
                if reply.status_code not in _RETRYABLE:
                    log.error("exporting %d spans failed: %s", len(spans), problem)
                    return SpanExportResult.FAILURE
                after = _retry_after(reply)
                backoff = backoff if after is None else after
            if attempt + 1 == _MAX_ATTEMPTS or backoff > deadline - time.monotonic():
                break
            log.warning("exporting spans: %s; retrying in %.1f s", problem, backoff)
            if self._stopped.wait(backoff):
                break
        log.error("exporting %d spans failed: %s", len(spans), problem)
        return SpanExportResult.FAILURE

    def _compress(self, data: bytes) -> bytes:
        if self._compression == "gzip":
            return gzip.compress(data)
        if self._compression == "deflate":
            return zlib.compress(data)
        return data

    def shutdown(self) -> None:
        self._stopped.set()
        self._client.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # nothing is held here: the batch processor holds the spans


def _retry_after(reply: httpx.Response) -> float | None:
    try:
        return max(float(reply.headers.get("Retry-After", "")), 0.0)
    except ValueError:
        return None
