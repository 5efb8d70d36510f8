"""A process's log lines: readable text for a person, or one JSON object per line that
leads to its trace (`trace_id`, `span_id`) and names the run, job and queue it is about.

    agentq worker --log-format json      # or AGENTQ_LOG_FORMAT=json
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Literal

from opentelemetry import trace

from agentq.orchestrator.tracing import JOB_LOG_CONTEXT

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")


def _job_fields() -> dict[str, Any]:
    fields: dict[str, Any] = dict(JOB_LOG_CONTEXT.get() or {})
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        fields["trace_id"] = trace.format_trace_id(context.trace_id)
        fields["span_id"] = trace.format_span_id(context.span_id)
    return fields


# What a record may carry of its own (a tool's `ctx.logger` adds them, workers/tools/
# context.py): they name the call, and the span current where it was logged.
_RECORD_FIELDS = ("run_id", "step", "call_id", "trace_id", "span_id")


def _record_fields(record: logging.LogRecord) -> dict[str, Any]:
    return {name: vars(record)[name] for name in _RECORD_FIELDS if name in vars(record)}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **_job_fields(),
            **_record_fields(record),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """The classic line, with the run and job in brackets when there is one."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(name)s %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        job = JOB_LOG_CONTEXT.get()
        if job:
            return f"{text} [run {job['run_id']} job {job['job_id']}]"
        return text


def configure_logging(log_format: LogFormat, level: int) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
