"""`agentq batch status` and `batch wait --json` show the batch's cost: a figure, or
"cost unknown" when a line's model had no price (never $0)."""

from __future__ import annotations

import json

import pytest

from agentq.cli.batch import _progress_json, summary_line
from agentq.orchestrator.batches.api import BatchCounts, BatchInfo

pytestmark = pytest.mark.unit


def info(cost_usd: float | None) -> BatchInfo:
    return BatchInfo(
        id="b1",
        tenant="default",
        status="done",
        lines=2,
        concurrency=4,
        priority=1,
        counts=BatchCounts(succeeded=2),
        usage={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        cost_usd=cost_usd,
        created_at=0.0,
    )


def test_the_status_line_and_progress_json_carry_the_cost() -> None:
    assert summary_line(info(0.01234)).endswith("15 tokens, $0.0123")
    assert summary_line(info(None)).endswith("15 tokens, cost unknown")
    assert json.loads(_progress_json(info(0.5)))["cost_usd"] == 0.5
    assert json.loads(_progress_json(info(None)))["cost_usd"] is None
