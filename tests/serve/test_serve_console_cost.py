"""Cost on the dashboard in a real headless browser (Debian's chromium driven by Selenium):
a run page's tokens and cost, its own and its sub-agents', and a batch's cost so far with
the whole batch's at that rate while lines remain, on its page and in the batches list.
Priced runs on a real worker, a real `agentq serve` and redis-server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.serve.test_serve_console import Page, ended, status_is, submit
from tests.serve.test_serve_console_batches import submit_batch
from tests.serve.test_serve_console_runs_list import USAGE, priced
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

__all__ = ["priced"]

pytestmark = pytest.mark.integration


def test_a_runs_cost_and_its_sub_agents_and_a_batchs_cost_as_it_goes(
    priced: ServeProcess, browser: object, tmp_path: Path
) -> None:
    page = Page(browser, priced.url)
    child = scripted({"text": "the child's answer", "usage": USAGE})
    helper = {
        "type": "agent",
        "name": "helper",
        "description": "A helper agent",
        "spec": {k: v for k, v in child.items() if k != "prompt"},
    }
    parent = scripted(
        {"tool_calls": [{"id": "c", "name": "helper", "input": {"prompt": "go"}}], "usage": USAGE},
        {"text": "done", "usage": USAGE},
        tools=[helper],
        id="parent",
    )
    submit(priced, parent)
    assert ended(priced, "parent")["status"] == "succeeded"
    page.open("#/runs/parent")
    page.until(status_is(page, "succeeded"))
    page.text("#run-usage", "2200 tokens · $0.006000 · 2 steps")
    page.text("#run-usage", "sub-agents: 1100 tokens · $0.003000")

    # A batch of three lines, the first held in its call: two ended cost $0.006, so
    # the three at that rate $0.009; released, the held line's two steps make $0.012.
    started, gate = tmp_path / "started", tmp_path / "gate"
    hold = {"name": "hold_until", "input": {"started": str(started), "gate": str(gate)}}
    held = scripted(
        {"tool_calls": [hold], "usage": USAGE}, {"text": "ok", "usage": USAGE}, tools=["hold_until"]
    )
    quick = scripted({"text": "ok", "usage": USAGE})
    lines = [{"custom_id": f"l{i}", "spec": spec} for i, spec in enumerate([held, quick, quick])]
    try:
        submit_batch(priced, "priced", lines)
        page.open("#/batches/priced")
        page.until(lambda _: started.exists())
        page.text("#batch-cost", "$0.006000 for 2 ended lines · ≈ $0.009000 for all 3 at that rate")
    finally:
        gate.touch()
    page.text("#batch-status", "done")
    page.text("#batch-cost", "$0.012000 for 3 ended lines")
    page.open("#/batches")
    page.text('#batches tr[data-batch-id="priced"] .cost', "$0.012000")
