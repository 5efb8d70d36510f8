"""Real OTLP trace receivers on loopback (HTTP and gRPC): what the exporters of worker
processes send."""

from __future__ import annotations

import gzip
import threading
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
    TraceServiceServicer,
    add_TraceServiceServicer_to_server,
)

from tests.support.waiting import eventually


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    service: str
    attributes: dict[str, Any]
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    status_message: str = ""
    events: tuple[tuple[str, dict[str, Any]], ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (trace id, span id)
    scope: str = ""
    scope_version: str = ""
    schema_url: str = ""
    start_ns: int = 0
    end_ns: int = 0


def received_spans(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    """The spans of one export request, as a test reads them."""
    spans = []
    for resource_spans in request.resource_spans:
        service = next(
            (
                a.value.string_value
                for a in resource_spans.resource.attributes
                if a.key == "service.name"
            ),
            "",
        )
        for scope in resource_spans.scope_spans:
            for s in scope.spans:
                spans.append(
                    ReceivedSpan(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex(),
                        kind=s.kind,
                        service=service,
                        attributes={a.key: _value(a.value) for a in s.attributes},
                        status_code=s.status.code,
                        status_message=s.status.message,
                        events=tuple(
                            (e.name, {a.key: _value(a.value) for a in e.attributes})
                            for e in s.events
                        ),
                        links=tuple((k.trace_id.hex(), k.span_id.hex()) for k in s.links),
                        scope=scope.scope.name,
                        scope_version=scope.scope.version,
                        schema_url=scope.schema_url,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                    )
                )
    return spans


class _Receiver:
    """What both receivers share: the spans received, and waiting for them."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()

    def _received(self, request: ExportTraceServiceRequest) -> None:
        got = received_spans(request)
        with self._lock:
            self.spans.extend(got)

    def wait_for(self, check: Any, what: str, timeout_s: float = 20.0) -> list[ReceivedSpan]:
        """The spans received, once `check(spans)` holds (a deadline, not a sleep)."""
        return eventually(lambda: list(self.spans), what, timeout_s, until=check)


class OtlpReceiver(_Receiver):
    """OTLP/HTTP (protobuf), the SDK exporter's default protocol."""

    def __init__(self) -> None:
        super().__init__()
        received = self._received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                received(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def env(self, service: str) -> dict[str, str]:
        """The environment that makes a process export its spans here, promptly."""
        return {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.endpoint,
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_SERVICE_NAME": service,
        }

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class OtlpGrpcReceiver(_Receiver):
    """OTLP/gRPC: the trace service a collector serves on :4317, on a free port."""

    def __init__(self) -> None:
        super().__init__()
        received = self._received

        class Service(TraceServiceServicer):
            # `Export`: the generated service's method name.
            def Export(
                self, request: ExportTraceServiceRequest, context: Any
            ) -> ExportTraceServiceResponse:
                received(request)
                return ExportTraceServiceResponse()

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        # The generated gRPC module has no annotations.
        add_TraceServiceServicer_to_server(Service(), self._server)  # type: ignore[no-untyped-call]
        self._port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._port}"  # http: the exporter's plain-text channel

    def __enter__(self) -> OtlpGrpcReceiver:
        self._server.start()
        return self

    def env(self, service: str) -> dict[str, str]:
        """The environment that makes a process export its spans here over gRPC."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_SERVICE_NAME": service,
        }

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None
