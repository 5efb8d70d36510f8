"""agentq's tracer on the current provider, looked up without the environment.

Every job asks for it a dozen times; with no provider set, the API's
`get_tracer_provider()` looks a variable up in os.environ on each call. Each case runs
in a process of its own: a provider, once set, stays set.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

_COUNTING = """
import os
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentq.orchestrator import tracing


class Counting(dict):
    looked_up = 0

    def __contains__(self, key):
        Counting.looked_up += 1
        return super().__contains__(key)


os.environ = Counting(os.environ)
for _ in range(100):
    with tracing.span("chat"):
        pass
assert not tracing.recording()
print("looked up", Counting.looked_up)

# A provider the application sets later is still found.
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
with tracing.span("chat"):
    pass
print("recorded", [s.name for s in exporter.get_finished_spans()])
"""


def _run(script: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_no_provider_costs_no_look_up_and_one_set_later_records() -> None:
    out = _run(_COUNTING)
    assert "looked up 0\n" in out
    assert "recorded ['chat']\n" in out


def test_a_provider_the_environment_names_is_still_loaded() -> None:
    script = "from agentq.orchestrator import tracing; print(tracing.recording())"
    assert _run(script, OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider") == "True\n"
    assert _run(script) == "False\n"
