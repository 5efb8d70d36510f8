"""Which of the SDK's exporters agentq's provider gets, from the OTEL_* variables."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.tracing.provider import span_exporters, tracing_configured

pytestmark = pytest.mark.unit

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(
    ("environ", "kinds"),
    [
        (ENDPOINT, [OTLPSpanExporter]),
        ({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, [OTLPSpanExporter]),
        ({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, [GrpcSpanExporter]),
        ({**ENDPOINT, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, [GrpcSpanExporter]),
        (
            {
                **ENDPOINT,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            [OTLPSpanExporter],
        ),
        ({"OTEL_TRACES_EXPORTER": "console"}, [ConsoleSpanExporter]),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, [OTLPSpanExporter, ConsoleSpanExporter]),
        ({"OTEL_TRACES_EXPORTER": "otlp_proto_grpc"}, [GrpcSpanExporter]),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
    ],
)
def test_the_variables_choose_the_sdks_exporters(
    environ: dict[str, str], kinds: list[type[object]]
) -> None:
    exporters = span_exporters(environ)
    assert [type(e) for e in exporters] == kinds
    for exporter in exporters:
        exporter.shutdown()


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "not supported"),
        ({"OTEL_TRACES_EXPORTER": "carrier-pigeon"}, "no such span exporter"),
    ],
)
def test_an_exporter_the_sdk_lacks_is_the_operators_error(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(InfrastructureError, match=message):
        span_exporters(environ)


@pytest.mark.parametrize(
    ("environ", "configured"),
    [
        ({}, False),
        (ENDPOINT, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_tracing_is_set_up_only_when_the_variables_ask(
    environ: dict[str, str], configured: bool
) -> None:
    assert tracing_configured(environ) is configured
