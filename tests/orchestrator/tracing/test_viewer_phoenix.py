"""A distributed run read back from a real LLM trace viewer, Arize Phoenix.

Phoenix converts the GenAI attributes to its own (OpenInference) at ingest:
what a person sees there is what this test reads through Phoenix's REST API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator import tracing
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.phoenix import Phoenix
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.viewer]

RUN_ID = "phoenix-run-1"


@pytest.fixture(scope="module")
def phoenix() -> Iterator[Phoenix]:
    server = Phoenix()
    yield server
    server.stop()


def _env(phoenix: Phoenix, service: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": phoenix.otlp_endpoint,
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    }


def _spec() -> dict[str, Any]:
    return scripted(
        {
            "tool_calls": [
                {"name": "add", "input": {"a": 1, "b": 2}},
                {"name": "fail", "input": {"message": "the tool broke"}},
            ]
        },
        {"tool_calls": [{"name": "add", "input": {"a": 3, "b": 4}}]},
        {"text": "1 + 2 = 3 and 3 + 4 = 7"},
        tools=["add", "fail"],
        id=RUN_ID,
        prompt="add 1 and 2, then 3 and 4",
        system="You add numbers with the add tool.",
    )


def _wait_spans(phoenix: Phoenix, trace_id: str, timeout_s: float = 60) -> list[dict[str, Any]]:
    def complete(spans: list[dict[str, Any]]) -> bool:
        return any(s["name"].startswith("invoke_agent") for s in spans) and len(spans) >= 19

    return eventually(
        lambda: phoenix.spans(trace_id),
        "the run's spans in phoenix",
        timeout_s,
        0.2,
        until=complete,
    )


def _attr(span: dict[str, Any], dotted: str) -> Any:
    """An attribute, whether Phoenix returns it flat or nested by its dots."""
    attributes = span["attributes"]
    if dotted in attributes:
        return attributes[dotted]
    node: Any = attributes
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def test_a_distributed_run_reads_well_in_phoenix(
    phoenix: Phoenix, redis_url: str, tmp_path: Path
) -> None:
    print(f"phoenix became healthy in {phoenix.started_s:.1f} s")
    model_worker = WorkerProcess(redis_url, "--queue", "model", env=_env(phoenix, "agentq-model"))
    tool_worker = WorkerProcess(
        redis_url, "--queue", "tools", "--tools", TOOLS, env=_env(phoenix, "agentq-tools")
    )
    try:
        wait_ready(model_worker, tool_worker)
        spec_path = tmp_path / "spec.json"
        spec_path.write_text(json.dumps(_spec()))
        done = run_cli(
            "run", str(spec_path), "--json", redis_url=redis_url, env=_env(phoenix, "submitter")
        )
        assert done.returncode == 0, done.stderr
        trace_id = format(tracing.run_ids(RUN_ID)[0], "032x")
        spans = _wait_spans(phoenix, trace_id)
    finally:
        model_worker.stop()
        tool_worker.stop()

    by_kind: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_kind.setdefault(s["span_kind"], []).append(s)
    # Phoenix recognises the agent, the model calls and the tool calls; the queue's
    # plumbing is glue between them (CHAIN), and no span is of no kind.
    assert "UNKNOWN" not in by_kind, [s["name"] for s in by_kind["UNKNOWN"]]
    assert {s["name"].split()[0] for s in by_kind["CHAIN"]} == {"send", "process"}
    (root,) = by_kind["AGENT"]
    assert root["parent_id"] is None
    assert len(by_kind["LLM"]) == 3
    assert len(by_kind["TOOL"]) == 3

    # The trace's input and output: what Phoenix's trace list shows.
    assert _attr(root, "input.value") == "add 1 and 2, then 3 and 4"
    assert _attr(root, "output.value") == "1 + 2 = 3 and 3 + 4 = 7"
    (listed,) = [t for t in phoenix.traces() if t["trace_id"] == trace_id]
    assert listed["token_count_total"] >= 0

    # The failing tool's span carries the error: status and exception event.
    (failed,) = [s for s in by_kind["TOOL"] if s["name"] == "execute_tool fail"]
    assert failed["status_code"] == "ERROR"
    assert "the tool broke" in failed["status_message"]
    assert any(e["name"] == "exception" for e in failed["events"])
    for ok in (s for s in by_kind["TOOL"] if s["name"] == "execute_tool add"):
        assert ok["status_code"] != "ERROR"

    # A flat step list: every job is one row right under the run, in order.
    steps = sorted(
        (s for s in spans if s["parent_id"] == root["context"]["span_id"]),
        key=lambda s: s["start_time"],
    )
    names = [s["name"] for s in steps if s["name"].startswith("process")]
    assert names == [
        "process model",
        "process tools",
        "process tools",
        "process model",
        "process tools",
        "process model",
    ], names
    parents = {s["context"]["span_id"]: s["parent_id"] for s in spans}

    def depth(span_id: str) -> int:
        parent = parents[span_id]
        return 0 if parent is None else 1 + depth(parent)

    assert max(depth(s["context"]["span_id"]) for s in spans) <= 3
