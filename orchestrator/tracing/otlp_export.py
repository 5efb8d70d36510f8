"""The OTLP/HTTP span exporter of agentq's own tracer provider.

Configured by the standard variables, as the SDK's exporter reads them (a
`_TRACES_` variable wins over the general one): OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT,
_HEADERS, _TIMEOUT (seconds), _COMPRESSION (gzip, deflate, none), _CERTIFICATE,
_CLIENT_CERTIFICATE, _CLIENT_KEY; and the usual HTTP(S)_PROXY / NO_PROXY. A batch
is encoded by `otlp_wire` (the SDK encoder's bytes at a third of its CPU) and
posted on one keep-alive connection, reused from export to export; failures are
retried as the SDK's exporter retries them (429, 502, 503, 504 and connection
errors, exponential backoff with jitter or the server's Retry-After, within the
timeout). A keep-alive connection the server has closed meanwhile (idle
timeout, `Connection: close`, an HTTP/1.0 collector) is not a failure: the post
goes once more on a fresh connection, outside the attempts.

Why the standard library's `http.client` and not httpx: after the encoding,
the post is most of the exporter's CPU, and httpx's layers (its transport, the
httpcore connection pool, h11) cost several times what the post itself costs.
Process CPU per post of a 150 KB body to a sink in another process on
loopback, 300 posts after 20 to warm up, on this machine
(`python bench/otlp_post_bench.py`, three runs):

    sink keeps the connection (HTTP/1.1):  httpx 431 us, http.client 96 us,
                                           this exporter 103 us
    sink closes it (HTTP/1.0):             httpx 650 us, http.client 260 us,
                                           this exporter 275 us

With a 5 KB body (`--kb 5`) it is the same ~0.35 ms saved
a post: the saving is per post, whatever its size. A step's share is that over
the steps a batch holds: ~4 us at a full batch of 512 spans (~85 steps of ~6
spans, as in bench/tracing_bench.py), ~70 us when the 5 s schedule sends the
batch of a worker doing a step a second.

What else httpx did, this module does itself: proxies from HTTP(S)_PROXY,
ALL_PROXY and NO_PROXY (plain HTTP, forwarding or CONNECT, with the URL's
credentials; a proxy reached over TLS or SOCKS is bypassed with a warning, where
httpx followed it), the TLS trust httpx set up (SSL_CERT_FILE
or _DIR, else certifi), Basic credentials in the endpoint's URL. Every worker
has http.client loaded already.

Why not the SDK's exporter with another encoder: it brings `requests` and the
generated protobuf modules into the process, ~10,000 objects that live for
good, and every full garbage collection of a worker walks them (+4 ms a
collection here, ~0.04 ms a step). An application's own provider keeps
whatever exporter the application gave it.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import logging
import os
import random
import ssl
import threading
import time
import weakref
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import getproxies, proxy_bypass

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.util.re import parse_env_headers

from agentq.orchestrator.tracing.otlp_wire import SpanEncoder

log = logging.getLogger("agentq.tracing")

DEFAULT_ENDPOINT = "http://localhost:4318/"
TRACES_PATH = "v1/traces"
DEFAULT_TIMEOUT_S = 10.0
_RETRYABLE = frozenset({429, 502, 503, 504})
_MAX_ATTEMPTS = 6
_MIN_SOCKET_TIMEOUT_S = 0.05  # never 0: a socket timeout of 0 means non-blocking
# What a post on a connection the server has closed meets (RemoteDisconnected is a
# ConnectionResetError; TLS may say it with an end of stream of its own).
_CLOSED = (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError)


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


def _tls(environ: Mapping[str, str]) -> ssl.SSLContext:
    """The CA the variables name, else what httpx trusted: SSL_CERT_FILE/_DIR, else certifi."""
    ca = _setting(environ, "CERTIFICATE")
    cert = _setting(environ, "CLIENT_CERTIFICATE")
    key = _setting(environ, "CLIENT_KEY")
    if ca:
        context = ssl.create_default_context(cafile=ca)
    elif os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        context = ssl.create_default_context()  # OpenSSL reads both variables
    else:
        try:
            import certifi
        except ImportError:  # pragma: no cover - httpx, a dependency, brings it
            context = ssl.create_default_context()
        else:
            context = ssl.create_default_context(cafile=certifi.where())
    if cert:
        context.load_cert_chain(cert, key or None)
    return context


@dataclass(frozen=True)
class _Target:
    """Where a post goes: the endpoint's origin and request target, and a proxy if any."""

    https: bool
    host: str
    port: int
    target: str  # path and query, or the absolute URL for a plain-HTTP proxy
    proxy: tuple[str, int] | None
    authorization: str | None  # from user:password@ in the endpoint
    proxy_authorization: str | None  # from user:password@ in the proxy's URL


def _target(endpoint: str) -> _Target:
    url = urlsplit(endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"the OTLP endpoint {endpoint!r} is not an http(s) URL")
    https = url.scheme == "https"
    port = url.port or (443 if https else 80)
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    authorization = _basic(url.username, url.password)
    proxy = proxy_authorization = None
    proxies = getproxies()
    proxy_url = proxies.get(url.scheme) or proxies.get("all")
    if proxy_url and not proxy_bypass(url.hostname):
        via = urlsplit(proxy_url if "://" in proxy_url else f"http://{proxy_url}")
        if via.scheme != "http" or not via.hostname:
            shown = f"{via.scheme}://{via.hostname}"  # never the credentials
            log.warning("the proxy %s is no plain HTTP proxy; spans are posted directly", shown)
        else:
            proxy = (via.hostname, via.port or 80)
            proxy_authorization = _basic(via.username, via.password)
            if not https:  # a plain-HTTP proxy takes the absolute URL
                netloc = url.netloc.rpartition("@")[2]
                target = f"http://{netloc}{target}"
    return _Target(https, url.hostname, port, target, proxy, authorization, proxy_authorization)


def _basic(user: str | None, password: str | None) -> str | None:
    if user is None:
        return None
    pair = f"{unquote(user)}:{unquote(password or '')}"
    return "Basic " + base64.b64encode(pair.encode()).decode("ascii")


class WireSpanExporter(SpanExporter):
    def __init__(
        self, endpoint: str | None = None, environ: Mapping[str, str] | None = None
    ) -> None:
        env = os.environ if environ is None else environ
        self.endpoint = endpoint or traces_endpoint(env)
        self._timeout_s = _timeout_s(_setting(env, "TIMEOUT"))
        self._compression = (_setting(env, "COMPRESSION") or "none").lower()
        try:
            self._destination: _Target | None = _target(self.endpoint)
        except ValueError as exc:  # a worker that cannot export still works
            log.error("%s; no spans will be exported", exc)
            self._destination = None
        headers = {
            "Content-Type": "application/x-protobuf",
            "User-Agent": "agentq-otlp-exporter",
            **parse_env_headers(_setting(env, "HEADERS") or "", liberal=True),
        }
        for name, value in list(headers.items()):
            if any(c in name + value for c in "\r\n\0") or not name.strip():
                log.error("the OTLP header %r is no valid HTTP header; it is left out", name)
                del headers[name]
        authorization = self._destination and self._destination.authorization
        if authorization and not any(name.lower() == "authorization" for name in headers):
            headers["Authorization"] = authorization
        if self._compression in ("gzip", "deflate"):
            headers["Content-Encoding"] = self._compression
        to = self._destination
        if to and to.proxy_authorization and not to.https:  # https: on the CONNECT only
            headers["Proxy-Authorization"] = to.proxy_authorization
        self._headers = headers
        https = self._destination is not None and self._destination.https
        self._tls_context = _tls(env) if https else None
        self._encoder = SpanEncoder()
        self._stopped = threading.Event()
        # One export at a time owns the connection: the batch processor's thread,
        # or a force_flush from another thread.
        self._lock = threading.Lock()
        self._connection = self._new_connection()
        this = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _after_fork(this))

    def _new_connection(self) -> http.client.HTTPConnection:
        # Without a destination export() posts nothing: a connection that is never used.
        to = self._destination or _Target(False, "localhost", 4318, "/", None, None, None)
        host, port = to.proxy or (to.host, to.port)
        connection: http.client.HTTPConnection
        if to.https:
            connection = http.client.HTTPSConnection(
                host, port, timeout=self._timeout_s, context=self._tls_context
            )
            if to.proxy:
                credentials = to.proxy_authorization
                tunnel = {"Proxy-Authorization": credentials} if credentials else None
                connection.set_tunnel(to.host, to.port, tunnel)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=self._timeout_s)
        return connection

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped.is_set() or self._destination is None:
            return SpanExportResult.FAILURE
        try:
            body = self._compress(self._encoder.encode(spans))
        except Exception as exc:  # a span the encoder cannot write: the batch is lost
            log.error("could not encode %d spans: %s", len(spans), exc)
            return SpanExportResult.FAILURE
        with self._lock:
            try:
                return self._export(body, len(spans))
            finally:
                if self._stopped.is_set():  # shut down meanwhile
                    self._connection.close()

    def _export(self, body: bytes, count: int) -> SpanExportResult:
        deadline = time.monotonic() + self._timeout_s
        for attempt in range(_MAX_ATTEMPTS):
            backoff = 2**attempt * random.uniform(0.8, 1.2)
            try:
                status, retry_after = self._post(body, deadline)
            except (OSError, http.client.HTTPException) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if 200 <= status < 400:
                    return SpanExportResult.SUCCESS
                problem = f"HTTP {status}"
                if status not in _RETRYABLE:
                    log.error("exporting %d spans failed: %s", count, problem)
                    return SpanExportResult.FAILURE
                after = _seconds(retry_after)
                backoff = backoff if after is None else after
            if attempt + 1 == _MAX_ATTEMPTS or backoff > deadline - time.monotonic():
                break
            log.warning("exporting spans: %s; retrying in %.1f s", problem, backoff)
            if self._stopped.wait(backoff):
                break
        log.error("exporting %d spans failed: %s", count, problem)
        return SpanExportResult.FAILURE

    def _post(self, body: bytes, deadline: float) -> tuple[int, str | None]:
        """One attempt: the status and Retry-After. A kept-alive connection the
        server closed since the last post gets the post again on a fresh one."""
        reused = self._connection.sock is not None
        try:
            return self._round_trip(body, deadline)
        except _CLOSED:
            self._connection.close()
            if not reused:
                raise
            return self._round_trip(body, deadline)

    def _round_trip(self, body: bytes, deadline: float) -> tuple[int, str | None]:
        connection, to = self._connection, self._destination
        assert to is not None  # export() posts nothing without one
        timeout = max(deadline - time.monotonic(), _MIN_SOCKET_TIMEOUT_S)
        connection.timeout = timeout  # for a connect
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        try:
            connection.request("POST", to.target, body, self._headers)
            reply = connection.getresponse()
            reply.read()  # all of it, or the connection cannot carry the next post
        except BaseException:
            connection.close()  # a half-done exchange: the next post starts afresh
            raise
        # http.client has closed the connection already if the server will close it.
        return reply.status, reply.getheader("Retry-After")

    def _compress(self, data: bytes) -> bytes:
        if self._compression == "gzip":
            return gzip.compress(data)
        if self._compression == "deflate":
            return zlib.compress(data)
        return data

    def shutdown(self) -> None:
        self._stopped.set()  # ends a backoff wait at once
        # An export under way ends within its timeout, and closes the connection itself.
        if self._lock.acquire(timeout=self._timeout_s):
            try:
                self._connection.close()
            finally:
                self._lock.release()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # nothing is held here: the batch processor holds the spans

    def _after_fork(self) -> None:
        """In a forked child: the parent's connection is the parent's (closing the
        child's copy of the socket leaves it open), and the lock may have been held
        by a thread that did not survive the fork."""
        self._lock = threading.Lock()
        self._connection.close()
        self._connection = self._new_connection()


def _after_fork(ref: weakref.ReferenceType[Any]) -> None:
    exporter = ref()
    if exporter is not None:
        exporter._after_fork()


def _seconds(retry_after: str | None) -> float | None:
    try:
        return max(float(retry_after or ""), 0.0)
    except ValueError:
        return None
