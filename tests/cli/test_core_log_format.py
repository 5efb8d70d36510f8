"""Worker log lines: JSON that leads to the trace and names the run, job and queue."""

from __future__ import annotations

import json
import logging

import pytest

from agentq.logs import JsonFormatter, TextFormatter
from agentq.orchestrator.tracing import JOB_LOG_CONTEXT

pytestmark = pytest.mark.unit


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("agentq.worker", logging.WARNING, __file__, 1, message, (), None)


def test_a_json_line_names_the_job_it_was_written_in() -> None:
    token = JOB_LOG_CONTEXT.set({"run_id": "r1", "job_id": "aq:r1:0:model", "queue": "model"})
    try:
        line = json.loads(JsonFormatter().format(_record("slow provider")))
        text = TextFormatter().format(_record("slow provider"))
    finally:
        JOB_LOG_CONTEXT.reset(token)
    assert line["level"] == "warning"
    assert line["message"] == "slow provider"
    assert (line["run_id"], line["job_id"], line["queue"]) == ("r1", "aq:r1:0:model", "model")
    assert text.endswith("slow provider [run r1 job aq:r1:0:model]")


def test_outside_a_job_a_line_is_just_the_message() -> None:
    line = json.loads(JsonFormatter().format(_record("started")))
    assert "run_id" not in line
    assert "trace_id" not in line  # no span is current
    assert TextFormatter().format(_record("started")).endswith("started")


def test_a_json_line_names_the_call_a_tool_logged_in() -> None:
    record = _record("charging")
    record.__dict__.update(call_id="c1", span_id="00f067aa0ba902b7")
    line = json.loads(JsonFormatter().format(record))
    assert (line["call_id"], line["span_id"]) == ("c1", "00f067aa0ba902b7")
