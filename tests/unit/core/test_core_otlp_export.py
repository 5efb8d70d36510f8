"""agentq's OTLP/HTTP exporter against a real HTTP(S) server on loopback.

What a collector can do to it: answer on one keep-alive connection or close it after
every answer (HTTP/1.0), drop a kept-alive connection unannounced, ask for a retry,
refuse a batch, not listen at all, or sit behind TLS with a private CA and ask for a
client certificate. Spans arrive decodable by `opentelemetry-proto` every time.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import ipaddress
import logging
import os
import socket
import ssl
import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentq.orchestrator.tracing.otlp_export import WireSpanExporter

WAIT_S = 30.0  # a deadline for what happens at once; never a measure of speed


def _serving(server: ThreadingHTTPServer) -> threading.Thread:
    """`server` answering on a thread of its own until `_stop`."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    return thread


def _stop(server: ThreadingHTTPServer, thread: threading.Thread) -> None:
    server.shutdown()
    server.server_close()
    thread.join(WAIT_S)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    span_names: list[str]
    connection: tuple[str, int]  # the client's address: one per TCP connection


@dataclass
class Collector:
    """An OTLP/HTTP endpoint in the test process. `codes` are answered in turn (then
    200); `closes` says how it ends a connection after an answer: "never" (keep-alive),
    "http/1.0" (says so: HTTP/1.0), "silently" (HTTP/1.1 keep-alive promised, then
    the socket is closed anyway, as a collector's idle timeout does)."""

    closes: Literal["never", "http/1.0", "silently"] = "never"
    tls: ssl.SSLContext | None = None
    codes: list[int] = field(default_factory=list)
    retry_after: str = "0"
    received: list[Received] = field(default_factory=list)
    closed: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    answered: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0" if collector.closes == "http/1.0" else "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                names = [
                    s.name
                    for resource_spans in request.resource_spans
                    for scoped in resource_spans.scope_spans
                    for s in scoped.spans
                ]
                code = collector.codes.pop(0) if collector.codes else 200
                collector.received.append(
                    Received(self.path, dict(self.headers), names, self.client_address)
                )
                self.send_response(code)
                if code in (429, 503):
                    self.send_header("Retry-After", collector.retry_after)
                self.send_header("Content-Type", "application/x-protobuf")
                reply = b"" if code == 200 else b"not now"
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                if collector.closes == "silently":
                    self.close_connection = True
                collector.answered.set()

            def log_message(self, *args: Any) -> None:
                return None

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def shutdown_request(self, request: Any) -> None:
                super().shutdown_request(request)
                collector.closed.release()

        self.server = Server(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if self.tls else "http"
        self.origin = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.endpoint = self.origin + "/v1/traces"
        self._thread = _serving(self.server)

    def close(self) -> None:
        _stop(self.server, self._thread)


@pytest.fixture
def collectors() -> Iterator[list[Collector]]:
    made: list[Collector] = []
    yield made
    for collector in made:
        collector.close()


def _collector(collectors: list[Collector], **options: Any) -> Collector:
    collector = Collector(**options)
    collectors.append(collector)
    return collector


def _spans(*names: str) -> list[ReadableSpan]:
    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "exporter-test"}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("agentq")
    for name in names:
        with tracer.start_as_current_span(name, attributes={"gen_ai.tool.name": name}):
            pass
    return list(kept.get_finished_spans())


def _names(received: Sequence[Received]) -> list[str]:
    return [name for r in received for name in r.span_names]


def _export_in_thread(exporter: WireSpanExporter, spans: Sequence[ReadableSpan]) -> Any:
    """Export on another thread; returns the thread and where its result lands."""
    results: list[SpanExportResult] = []
    thread = threading.Thread(target=lambda: results.append(exporter.export(spans)))
    thread.start()
    return thread, results


def test_batches_go_on_one_kept_alive_connection_and_decode(
    collectors: list[Collector],
) -> None:
    collector = _collector(collectors)
    exporter = WireSpanExporter(endpoint=collector.endpoint, environ={})
    try:
        for batch in (("chat", "execute_tool add"), ("invoke_agent",), ("chat",)):
            assert exporter.export(_spans(*batch)) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert _names(collector.received) == ["chat", "execute_tool add", "invoke_agent", "chat"]
    assert {r.path for r in collector.received} == {"/v1/traces"}
    assert len({r.connection for r in collector.received}) == 1
    assert collector.received[0].headers["Content-Type"] == "application/x-protobuf"


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_the_standard_variables_set_path_headers_and_compression(
    collectors: list[Collector], compression: str
) -> None:
    collector = _collector(collectors)
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.origin + "/",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-team=agents,authorization=Bearer%20t",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=tracing",  # the signal's own wins
        "OTEL_EXPORTER_OTLP_COMPRESSION": compression,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "5",
    }
    exporter = WireSpanExporter(environ=environ)
    try:
        assert exporter.export(_spans("chat")) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    (got,) = collector.received
    assert got.path == "/v1/traces"
    assert got.headers["Content-Encoding"] == compression
    assert got.headers["x-team"] == "tracing"
    assert "authorization" not in got.headers  # the general variable is not merged in
    assert got.span_names == ["chat"]


def test_an_endpoint_with_a_query_or_without_a_path(collectors: list[Collector]) -> None:
    collector = _collector(collectors)
    for endpoint, path in (
        (collector.origin + "/otlp/traces?tenant=a&x=1", "/otlp/traces?tenant=a&x=1"),
        (collector.origin, "/"),
    ):
        exporter = WireSpanExporter(environ={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint})
        try:
            assert exporter.export(_spans("chat")) == SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()
        assert collector.received[-1].path == path


def test_503_with_retry_after_is_retried_and_400_is_not(
    collectors: list[Collector], caplog: pytest.LogCaptureFixture
) -> None:
    collector = _collector(collectors, codes=[503])
    exporter = WireSpanExporter(endpoint=collector.endpoint, environ={})
    try:
        assert exporter.export(_spans("chat")) == SpanExportResult.SUCCESS
        assert _names(collector.received) == ["chat", "chat"]

        collector.codes = [400]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="agentq.tracing"):
            assert exporter.export(_spans("bad")) == SpanExportResult.FAILURE
        assert _names(collector.received) == ["chat", "chat", "bad"]  # not sent again
        (line,) = caplog.records
        assert line.levelno == logging.ERROR
        assert "HTTP 400" in line.getMessage()

        # The connection is still good after the refusals (their bodies were read).
        assert exporter.export(_spans("after")) == SpanExportResult.SUCCESS
        assert len({r.connection for r in collector.received}) == 1
    finally:
        exporter.shutdown()


def test_a_collector_that_closes_after_every_answer_gets_every_batch(
    collectors: list[Collector], caplog: pytest.LogCaptureFixture
) -> None:
    collector = _collector(collectors, closes="http/1.0")
    exporter = WireSpanExporter(endpoint=collector.endpoint, environ={})
    try:
        with caplog.at_level(logging.WARNING, logger="agentq.tracing"):
            for name in ("one", "two", "three"):
                assert exporter.export(_spans(name)) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert _names(collector.received) == ["one", "two", "three"]
    assert len({r.connection for r in collector.received}) == 3
    assert not caplog.records


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_kept_alive_connection_closed_unannounced_is_no_failed_attempt(
    collectors: list[Collector], caplog: pytest.LogCaptureFixture, pki: Pki, scheme: str
) -> None:
    tls = _server_tls(pki, client_certificate=False) if scheme == "https" else None
    collector = _collector(collectors, closes="silently", tls=tls)
    environ = {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki.ca)}
    exporter = WireSpanExporter(endpoint=collector.endpoint, environ=environ)
    try:
        with caplog.at_level(logging.WARNING, logger="agentq.tracing"):
            for name in ("one", "two", "three"):
                assert exporter.export(_spans(name)) == SpanExportResult.SUCCESS
                # The collector has closed the socket the exporter keeps for the next post.
                assert collector.closed.acquire(timeout=WAIT_S)
    finally:
        exporter.shutdown()
    assert _names(collector.received) == ["one", "two", "three"]
    assert len({r.connection for r in collector.received}) == 3
    assert not caplog.records  # no "retrying in" warning: the reconnect is not an attempt


def test_nothing_listening_fails_within_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    # A bound socket that does not listen: connecting to it is refused, and no
    # other process can take the port meanwhile.
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{bound.getsockname()[1]}/v1/traces"
        exporter = WireSpanExporter(endpoint=endpoint, environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
        with caplog.at_level(logging.WARNING, logger="agentq.tracing"):
            thread, results = _export_in_thread(exporter, _spans("lost"))
            thread.join(WAIT_S)
        assert not thread.is_alive()
        exporter.shutdown()
    assert results == [SpanExportResult.FAILURE]
    assert caplog.records[-1].levelno == logging.ERROR
    assert "ConnectionRefusedError" in caplog.records[-1].getMessage()


def test_shutdown_ends_a_backoff_wait(collectors: list[Collector]) -> None:
    collector = _collector(collectors, codes=[503], retry_after="600")
    exporter = WireSpanExporter(
        endpoint=collector.endpoint, environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "3600"}
    )
    thread, results = _export_in_thread(exporter, _spans("chat"))
    assert collector.answered.wait(WAIT_S)  # the 503 is in: the exporter waits 600 s
    exporter.shutdown()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert results == [SpanExportResult.FAILURE]
    assert exporter.export(_spans("late")) == SpanExportResult.FAILURE
    assert _names(collector.received) == ["chat"]


# -- TLS: a private CA, a server certificate for 127.0.0.1, a client certificate ------------


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _issue(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    usage: list[x509.ObjectIdentifier] | None = None,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, signer = issuer or (name, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
            critical=False,
        )
    )
    if issuer is None:  # the CA
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        ).add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True
        ).add_extension(x509.ExtendedKeyUsage(usage or []), critical=False)
        if usage == [ExtendedKeyUsageOID.SERVER_AUTH]:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
    return builder.sign(signer, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Path:
    key_path = path.with_suffix(".key")
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    where = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue("agentq test CA", ca_key, None)
    _write(where / "ca.pem", ca, ca_key)
    made = {}
    for who, usage in (
        ("server", ExtendedKeyUsageOID.SERVER_AUTH),
        ("client", ExtendedKeyUsageOID.CLIENT_AUTH),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(f"agentq test {who}", key, (ca.subject, ca_key), [usage])
        made[who] = (where / f"{who}.pem", _write(where / f"{who}.pem", cert, key))
    return Pki(where / "ca.pem", *made["server"], *made["client"])


def _server_tls(pki: Pki, client_certificate: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if client_certificate:
        context.load_verify_locations(pki.ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def test_https_with_the_ca_the_variables_name(collectors: list[Collector], pki: Pki) -> None:
    collector = _collector(collectors, tls=_server_tls(pki, client_certificate=False))
    environ = {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki.ca)}
    exporter = WireSpanExporter(endpoint=collector.endpoint, environ=environ)
    try:
        for name in ("one", "two"):
            assert exporter.export(_spans(name)) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert _names(collector.received) == ["one", "two"]
    assert len({r.connection for r in collector.received}) == 1


def test_https_with_a_client_certificate(collectors: list[Collector], pki: Pki) -> None:
    collector = _collector(collectors, tls=_server_tls(pki, client_certificate=True))
    environ = {
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": str(pki.ca),
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": str(pki.client_cert),
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": str(pki.client_key),
    }
    exporter = WireSpanExporter(endpoint=collector.endpoint, environ=environ)
    try:
        assert exporter.export(_spans("mutual")) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert _names(collector.received) == ["mutual"]


def test_https_to_a_server_the_exporter_does_not_trust_fails(
    collectors: list[Collector], pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    collector = _collector(collectors, tls=_server_tls(pki, client_certificate=False))
    exporter = WireSpanExporter(
        endpoint=collector.endpoint, environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "0.5"}
    )
    try:
        with caplog.at_level(logging.ERROR, logger="agentq.tracing"):
            assert exporter.export(_spans("untrusted")) == SpanExportResult.FAILURE
    finally:
        exporter.shutdown()
    assert collector.received == []
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.records[-1].getMessage()


def test_an_endpoint_that_is_no_http_url_fails_exports_not_the_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="agentq.tracing"):
        exporter = WireSpanExporter(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"})
    assert "is not an http(s) URL" in caplog.records[-1].getMessage()
    assert exporter.export(_spans("nowhere")) == SpanExportResult.FAILURE
    exporter.shutdown()


def test_a_forked_child_posts_on_a_connection_of_its_own(collectors: list[Collector]) -> None:
    collector = _collector(collectors)
    exporter = WireSpanExporter(endpoint=collector.endpoint, environ={})
    try:
        assert exporter.export(_spans("parent")) == SpanExportResult.SUCCESS
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's outcome is its exit status
            ok = exporter.export(_spans("child")) == SpanExportResult.SUCCESS
            os._exit(0 if ok else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert exporter.export(_spans("parent again")) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert _names(collector.received) == ["parent", "child", "parent again"]
    parent, child_connection, again = (r.connection for r in collector.received)
    assert parent == again != child_connection  # the parent's connection was left alone


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
_BASIC = "Basic " + base64.b64encode(b"who:s@cret").decode()  # of who:s%40cret@ in a URL


def test_the_proxy_variables_as_httpx_honoured_them(
    collectors: list[Collector], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    proxy = _collector(collectors)  # a forward proxy sees the absolute URL
    monkeypatch.setenv("HTTP_PROXY", proxy.origin.replace("://", "://who:s%40cret@"))
    exporter = WireSpanExporter(endpoint="http://collector.example:4318/v1/traces", environ={})
    try:
        assert exporter.export(_spans("proxied")) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    (got,) = proxy.received
    assert got.path == "http://collector.example:4318/v1/traces"
    assert got.headers["Host"] == "collector.example:4318"
    assert got.headers["Proxy-Authorization"] == _BASIC

    # NO_PROXY names the collector: straight to it, past a proxy that is not there.
    collector = _collector(collectors)
    with socket.socket() as nowhere:
        nowhere.bind(("127.0.0.1", 0))
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{nowhere.getsockname()[1]}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        exporter = WireSpanExporter(endpoint=collector.endpoint, environ={})
        try:
            assert exporter.export(_spans("direct")) == SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()
    assert _names(collector.received) == ["direct"]

    # ALL_PROXY when the scheme has none; a SOCKS proxy is not followed, and said so.
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.setenv("ALL_PROXY", proxy.origin)
    exporter = WireSpanExporter(endpoint="http://collector.example:4318/v1/traces", environ={})
    try:
        assert exporter.export(_spans("all")) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert proxy.received[-1].path == "http://collector.example:4318/v1/traces"
    monkeypatch.setenv("ALL_PROXY", "socks5://user:secret@127.0.0.1:1080")
    with caplog.at_level(logging.WARNING, logger="agentq.tracing"):
        exporter = WireSpanExporter(endpoint=collector.endpoint, environ={})
    try:
        assert exporter.export(_spans("socks")) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert _names(collector.received) == ["direct", "socks"]
    (warning,) = caplog.records
    assert "socks5://127.0.0.1" in warning.getMessage()
    assert "secret" not in warning.getMessage()


def test_a_header_no_server_would_accept_is_left_out(
    collectors: list[Collector], caplog: pytest.LogCaptureFixture
) -> None:
    collector = _collector(collectors)
    environ = {"OTEL_EXPORTER_OTLP_HEADERS": "x-good=1,x-bad=a%0D%0Ainjected%3A%20yes"}
    with caplog.at_level(logging.ERROR, logger="agentq.tracing"):
        exporter = WireSpanExporter(endpoint=collector.endpoint, environ=environ)
    try:
        assert exporter.export(_spans("chat")) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    (got,) = collector.received
    assert got.headers["x-good"] == "1"
    assert "x-bad" not in got.headers
    assert "injected" not in got.headers
    assert "'x-bad'" in caplog.records[-1].getMessage()


def test_exports_from_several_threads_share_the_connection_in_turn(
    collectors: list[Collector],
) -> None:
    # The batch processor's thread and a force_flush on another thread may export at once.
    collector = _collector(collectors)
    exporter = WireSpanExporter(endpoint=collector.endpoint, environ={})
    start = threading.Barrier(4)
    results: list[SpanExportResult] = []

    def export_some(thread: int) -> None:
        start.wait(WAIT_S)
        for batch in range(5):
            results.append(exporter.export(_spans(f"t{thread}b{batch}")))

    threads = [threading.Thread(target=export_some, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    exporter.shutdown()
    assert results == [SpanExportResult.SUCCESS] * 20
    assert sorted(_names(collector.received)) == sorted(
        f"t{t}b{b}" for t in range(4) for b in range(5)
    )
    assert len({r.connection for r in collector.received}) == 1


class _TunnellingProxy:
    """An HTTP proxy that only tunnels (CONNECT), as HTTPS_PROXY proxies do for https."""

    def __init__(self) -> None:
        self.tunnels: list[tuple[str, str | None]] = []  # (target, Proxy-Authorization)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_CONNECT(self) -> None:
                host, _, port = self.path.rpartition(":")
                proxy.tunnels.append((self.path, self.headers.get("Proxy-Authorization")))
                with socket.create_connection((host, int(port)), timeout=WAIT_S) as upstream:
                    self.send_response(200, "Connection established")
                    self.end_headers()
                    back = threading.Thread(target=_relay, args=(upstream, self.connection))
                    back.start()
                    _relay(self.connection, upstream)
                    back.join(WAIT_S)
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://who:s%40cret@127.0.0.1:{self.server.server_address[1]}"
        self._thread = _serving(self.server)

    def close(self) -> None:
        _stop(self.server, self._thread)


def _relay(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        return


def test_https_through_a_tunnelling_proxy(
    collectors: list[Collector], pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    collector = _collector(collectors, tls=_server_tls(pki, client_certificate=False))
    proxy = _TunnellingProxy()
    try:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        environ = {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(pki.ca)}
        exporter = WireSpanExporter(endpoint=collector.endpoint, environ=environ)
        try:
            for name in ("one", "two"):
                assert exporter.export(_spans(name)) == SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()
    finally:
        proxy.close()
    # One tunnel for both posts, with the credentials of HTTPS_PROXY's URL.
    assert proxy.tunnels == [(collector.origin.removeprefix("https://"), _BASIC)]
    assert _names(collector.received) == ["one", "two"]
