"""`ToolContext` on its own: the idempotency key, the deadline, the logger's trace join."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from agentq import ToolContext
from agentq.orchestrator.tools import ToolDef

pytestmark = pytest.mark.unit

TOOL = ToolDef(name="charge", kind="function", queue="tools")


def _ctx(run_id: str = "r1", step: int = 0, call_id: str = "c1", attempt: int = 1) -> ToolContext:
    return ToolContext(
        run_id=run_id, step=step, call_id=call_id, tool=TOOL, attempt=attempt, deadline_at=1e9
    )


def test_the_idempotency_key_is_the_calls_whatever_the_delivery() -> None:
    key = _ctx().idempotency_key
    assert _ctx(attempt=2).idempotency_key == key
    others = {c.idempotency_key for c in (_ctx(run_id="r2"), _ctx(step=1), _ctx(call_id="c2"))}
    assert key not in others
    assert len(others) == 3


def test_the_deadline_is_a_utc_datetime() -> None:
    assert _ctx().deadline == datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC)


async def test_without_a_home_the_history_is_empty_and_the_owner_the_default() -> None:
    ctx = _ctx()
    assert await ctx.messages() == []
    assert (await ctx.with_owner()).tenant == "default"


def test_the_logger_joins_the_current_span(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentq.tool")
    ctx = _ctx()
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("execute_tool charge") as span:
        ctx.logger.info("charged %d", 3, extra={"amount": 3})
    ctx.logger.info("outside any span")
    inside, outside = (vars(r) for r in caplog.records)
    assert inside["name"] == "agentq.tool.charge"
    assert (inside["run_id"], inside["step"], inside["call_id"], inside["amount"]) == (
        "r1",
        0,
        "c1",
        3,
    )
    context = span.get_span_context()
    assert inside["trace_id"] == trace.format_trace_id(context.trace_id)
    assert inside["span_id"] == trace.format_span_id(context.span_id)
    assert "trace_id" not in outside
    assert outside["call_id"] == "c1"
