"""Batches of structured-output runs through the CLI (`agentq batch submit/wait/results`,
an `agentq worker` process, a real redis-server): `output` on each result line, and
`--format csv` with a flat output's fields as columns."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentq.cli.errors import EXIT_RUN_FAILED
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready

pytestmark = pytest.mark.e2e

INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"number": {"type": "string"}, "total": {"type": "number"}},
    "required": ["number", "total"],
}


def line(custom_id: str, answer: str) -> dict[str, Any]:
    """A full run spec per line: the scripted model answers `answer`."""
    return {
        "custom_id": custom_id,
        "model": {"provider": "scripted", "script": [{"text": answer}]},
        "prompt": "Extract the invoice.",
        "output": {"schema": INVOICE, "mode": "prompted", "max_retries": 0},
    }


ROWS = [
    line("a", '{"number": "A-1", "total": 12.5}'),
    line("b", "no invoice here"),  # not JSON, and no retry: output-invalid
    line("c", '{"number": "C-3", "total": 0}'),
]


@pytest.fixture
def worker(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS)
    wait_ready(process)
    yield process
    process.stop()


def test_batch_results_carry_each_lines_output_and_flatten_to_csv(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    submitted = run_cli("batch", "submit", str(lines), "--id", "inv", redis_url=redis_url)
    assert submitted.returncode == 0, submitted.stderr
    waited = run_cli("batch", "wait", "inv", "--timeout", "60", redis_url=redis_url)
    # One line failed (output-invalid): the batch ended, not every line succeeded.
    assert waited.returncode == EXIT_RUN_FAILED, waited.stderr + worker.log()

    jsonl = run_cli("batch", "results", "inv", redis_url=redis_url)
    assert jsonl.returncode == 0, jsonl.stderr
    rows = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert [r["output"] for r in rows] == [
        {"number": "A-1", "total": 12.5},
        None,
        {"number": "C-3", "total": 0},
    ]
    assert rows[1]["status"] == "failed"
    assert "invalid" in rows[1]["error"]

    table = run_cli("batch", "results", "inv", "--format", "csv", redis_url=redis_url)
    assert table.returncode == 0, table.stderr
    assert list(csv.reader(io.StringIO(table.stdout))) == [
        ["custom_id", "run_id", "status", "error", "number", "total"],
        ["a", rows[0]["run_id"], "succeeded", "", "A-1", "12.5"],
        ["b", rows[1]["run_id"], "failed", rows[1]["error"], "", ""],
        ["c", rows[2]["run_id"], "succeeded", "", "C-3", "0"],
    ]
