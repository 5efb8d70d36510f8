"""A raise that lands between a step's judgement on its budget and its hold: the step goes
on at once, not at the sweeper's recheck (AGENTQ_BUDGET_RECHECK_S, an hour here). A raise
sends on the steps held when it reads them, and skips one whose job is in hand, so without
the worker's second read such a step waited for the recheck."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentq import embedded
from agentq.orchestrator.batches.api import BatchInfo
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.state import HoldStep, Reply
from agentq.orchestrator.runs.store import RunStore
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component

PRICES = {"scripted:*": {"input": 1.0, "output": 2.0}}  # USD per million tokens
USAGE = {"input_tokens": 1000, "output_tokens": 300}  # $0.0016 a step
TEMPLATE = {"model": {"provider": "scripted", "script": [{"text": "done", "usage": USAGE}]}}


async def test_a_raise_just_before_a_hold_lets_the_step_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    holds: list[str] = []
    hold_step = RunStore.hold_step

    async def raised_first(store: RunStore, transition: HoldStep) -> Reply:
        # The worker judged the step on the old budget; the raise comes now, before the
        # hold is written, and finds nothing held.
        if not holds:
            await client.batches.set_budget("half", max_cost_usd=1.0)
        holds.append(transition.run_id)
        return await hold_step(store, transition)

    monkeypatch.setattr(RunStore, "hold_step", raised_first)
    settings = Settings(prices=str(prices), budget_recheck_s=3600)
    async with embedded(settings=settings) as client:
        lines = [{"custom_id": f"q{i}", "prompt": f"question {i}"} for i in range(4)]
        # One run at a time; the budget is reached after the second run's step.
        await client.batches.submit(
            lines, template=TEMPLATE, batch_id="half", concurrency=1, max_cost_usd=0.0032
        )

        def ended(info: BatchInfo) -> bool:
            return info.ended

        done = await eventually_async(
            lambda: client.batches.status("half"), "the batch to finish", until=ended
        )
    assert len(holds) == 1, holds  # the third run's step, held once and gone on
    assert (done.counts.succeeded, done.counts.failed) == (4, 0)
    assert done.budget is not None
    assert done.budget.held_runs == 0
