"""Provider batch lines and answers, and batch-priced usage: pure tables of cases."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentq.orchestrator.batches.usage import run_usage
from agentq.orchestrator.core import keys
from agentq.orchestrator.cost.prices import Prices, PriceTable, parse_table
from agentq.orchestrator.runs.state import MetaField
from agentq.workers.models.batch_api import (
    BatchLine,
    LineResult,
    anthropic_result,
    openai_line,
    openai_result,
)

pytestmark = pytest.mark.unit


def test_an_openai_line_is_the_direct_request_on_the_v1_path() -> None:
    line = openai_line(BatchLine("aq-0", "chat/completions", {"model": "m"}))
    assert line == {
        "custom_id": "aq-0",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m"},
    }


def _ok(body: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": "aq-1", "response": {"status_code": 200, "body": body}, "error": None}


def _failed(status: int) -> dict[str, Any]:
    body = {"error": {"message": "nope", "type": "x"}}
    return {"custom_id": "aq-1", "response": {"status_code": status, "body": body}, "error": None}


def _unfinished(code: str) -> dict[str, Any]:
    return {"custom_id": "aq-1", "response": None, "error": {"code": code, "message": code}}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (_ok({"id": "c"}), LineResult(custom_id="aq-1", body={"id": "c"})),
        (_failed(400), LineResult(custom_id="aq-1", error="nope", retryable=False)),
        (_failed(500), LineResult(custom_id="aq-1", error="nope", retryable=True)),
        (_failed(429), LineResult(custom_id="aq-1", error="nope", retryable=True)),
        (
            _unfinished("batch_expired"),
            LineResult(custom_id="aq-1", error="batch_expired", retryable=True),
        ),
        (
            _unfinished("batch_cancelled"),
            LineResult(custom_id="aq-1", error="batch_cancelled", retryable=True),
        ),
    ],
)
def test_openai_output_and_error_file_lines(line: dict[str, Any], expected: LineResult) -> None:
    assert openai_result(line) == expected


def _errored(kind: str) -> dict[str, Any]:
    return {"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": "m"}}}


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"type": "succeeded", "message": {"id": "msg"}}, ({"id": "msg"}, None, False)),
        (_errored("invalid_request_error"), (None, "m", False)),
        (_errored("overloaded_error"), (None, "m", True)),
        ({"type": "expired"}, (None, "the batch request expired", True)),
        ({"type": "canceled"}, (None, "the batch request canceled", True)),
    ],
)
def test_anthropic_result_lines(result: dict[str, Any], expected: tuple[Any, ...]) -> None:
    line = anthropic_result({"custom_id": "aq-2", "result": result})
    assert (line.body, line.error, line.retryable) == expected


def _meta(steps: int, tokens_in: int, tokens_out: int) -> dict[str, str]:
    spec = {"model": {"provider": "openai", "name": "gpt-x"}}
    return {
        MetaField.SPEC: json.dumps(spec),
        MetaField.BATCH_STEPS: str(steps),
        MetaField.BATCH_INPUT: str(tokens_in),
        MetaField.BATCH_OUTPUT: str(tokens_out),
    }


def _prices(table: dict[str, Any]) -> Prices:
    return Prices(parse_table(table, "test"), PriceTable({}))


@pytest.mark.parametrize(
    ("prices", "saving"),
    [
        (
            {"openai:gpt-x": {"input": 2, "output": 8}},
            (1_000_000 * 2.0 + 500_000 * 8.0) / 1e6 * 0.5,
        ),
        ({"openai:*": {"input": 1, "output": 1, "batch_discount": 0.4}}, 1.5 * 0.4),
        ({"anthropic:*": {"input": 1, "output": 1}}, None),  # no price for this model
    ],
)
def test_batch_priced_usage_and_saving(prices: dict[str, Any], saving: float | None) -> None:
    usage = run_usage(_meta(2, 1_000_000, 500_000), _prices(prices))
    assert (usage.steps, usage.input_tokens, usage.output_tokens) == (2, 1_000_000, 500_000)
    assert usage.estimated_saving_usd == (pytest.approx(saving) if saving is not None else None)


def test_a_run_without_batch_steps_saves_nothing() -> None:
    usage = run_usage({}, _prices({"openai:*": {"input": 1, "output": 1}}))
    assert usage.steps == 0
    assert usage.estimated_saving_usd == 0.0


def test_batch_members_round_trip_run_ids() -> None:
    member = keys.batch_member("run.with-dots_1", 7)
    assert keys.parse_batch_member(member) == ("run.with-dots_1", 7)
    assert keys.batch_step("r", 3).startswith(keys.meta("r"))  # the run's own slot
