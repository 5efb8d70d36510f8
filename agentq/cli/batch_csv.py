"""`agentq batch results --format csv`: one row per line, a flat structured output's
fields as columns (pure: rows in, CSV out)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentq.orchestrator.batches.api import LineResult

FIXED = ("custom_id", "run_id", "status", "error")


def output_columns(rows: Sequence[LineResult]) -> list[str]:
    """The outputs' keys, in the order first seen (lines without an output have none)."""
    seen: dict[str, None] = {}
    for row in rows:
        if isinstance(row.output, dict):
            seen.update(dict.fromkeys(row.output))
    return list(seen)


def _cell(value: Any) -> str:
    # A flat schema's values are scalars; anything nested stays one cell, as JSON.
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def write_csv(out: IO[str], rows: Sequence[LineResult]) -> None:
    """The header, then a row per line. Without any output the answer is a `text`
    column; an output field named like a fixed column is `output.<name>`."""
    keys = output_columns(rows)
    names = [f"output.{k}" if k in FIXED else k for k in keys] or ["text"]
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*FIXED, *names])
    for row in rows:
        fixed = [row.custom_id, row.run_id, row.status.value, row.error]
        output = row.output if isinstance(row.output, dict) else {}
        values = [output.get(k) for k in keys] if keys else [row.text]
        writer.writerow([_cell(v) for v in (*fixed, *values)])
