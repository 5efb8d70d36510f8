"""`agentq batch results --format csv`, the pure part: columns from the outputs' fields."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from agentq.cli.batch_csv import write_csv
from agentq.orchestrator.batches.api import LineResult
from agentq.orchestrator.batches.state import LineStatus

pytestmark = pytest.mark.unit


def row(line: int, output: Any = None, **kw: Any) -> LineResult:
    status = LineStatus.SUCCEEDED if output is not None or "text" in kw else LineStatus.FAILED
    return LineResult(line=line, custom_id=f"l{line}", run_id=f"r{line}", status=status,
                      output=output, **kw)  # fmt: skip


def table(rows: list[LineResult]) -> list[list[str]]:
    out = io.StringIO()
    write_csv(out, rows)
    return list(csv.reader(io.StringIO(out.getvalue())))


def test_fields_become_columns_in_the_order_first_seen() -> None:
    rows = [row(1, {"a": 1, "b": "x,y"}), row(2, error="boom"), row(3, {"c": True, "a": 2})]
    assert table(rows) == [
        ["custom_id", "run_id", "status", "error", "a", "b", "c"],
        ["l1", "r1", "succeeded", "", "1", "x,y", ""],
        ["l2", "r2", "failed", "boom", "", "", ""],
        ["l3", "r3", "succeeded", "", "2", "", "true"],
    ]


def test_a_nested_value_is_one_json_cell_and_a_clashing_name_is_prefixed() -> None:
    rows = [row(1, {"status": "paid", "lines": [{"x": 1}]})]
    assert table(rows) == [
        ["custom_id", "run_id", "status", "error", "output.status", "lines"],
        ["l1", "r1", "succeeded", "", "paid", '[{"x": 1}]'],
    ]


def test_without_outputs_the_text_is_the_column() -> None:
    assert table([row(1, text="hello")]) == [
        ["custom_id", "run_id", "status", "error", "text"],
        ["l1", "r1", "succeeded", "", "hello"],
    ]
