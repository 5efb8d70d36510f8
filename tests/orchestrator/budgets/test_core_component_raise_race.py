"""A raise that lands while a step is being held goes on at once, not at the sweeper's
recheck (AGENTQ_BUDGET_RECHECK_S, an hour here). A raise sends on the steps it reads as
held, and skips one whose job is in hand: a raise between a step's judgement and its hold
finds nothing held (the worker reads the budget again after the hold), and one after that
second read finds the holding job still in hand (the raise redrives it again once the job
has ended)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentq import embedded
from agentq.orchestrator.batches.api import BatchInfo
from agentq.orchestrator.budgets.ledger import BudgetLedger
from agentq.orchestrator.budgets.shared import Reached
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.redrive import Redriver
from agentq.orchestrator.runs.state import HoldStep, Outcome, Reply
from agentq.orchestrator.runs.store import RunStore
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component

PRICES = {"scripted:*": {"input": 1.0, "output": 2.0}}  # USD per million tokens
USAGE = {"input_tokens": 1000, "output_tokens": 300}  # $0.0016 a step
TEMPLATE = {"model": {"provider": "scripted", "script": [{"text": "done", "usage": USAGE}]}}
LINES = [{"custom_id": f"q{i}", "prompt": f"question {i}"} for i in range(4)]


def ended(info: BatchInfo) -> bool:
    return info.ended


async def half_a_batch(client: Client) -> BatchInfo:
    """Four runs one at a time, a budget reached after the second: raised by the test's
    hooks while the third's step is held, the batch finishes."""
    await client.batches.submit(
        LINES, template=TEMPLATE, batch_id="half", concurrency=1, max_cost_usd=0.0032
    )
    return await eventually_async(
        lambda: client.batches.status("half"), "the batch to finish", until=ended
    )


def settings(tmp_path: Path) -> Settings:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    return Settings(prices=str(prices), budget_recheck_s=3600)


async def test_a_raise_just_before_a_hold_lets_the_step_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    async with embedded(settings=settings(tmp_path)) as client:
        done = await half_a_batch(client)
    assert len(holds) == 1, holds  # the third run's step, held once and gone on
    assert (done.counts.succeeded, done.counts.failed) == (4, 0)
    assert done.budget is not None
    assert done.budget.held_runs == 0


async def test_a_raise_while_the_holding_job_ends_sends_the_step_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes: list[Outcome] = []
    redriven = asyncio.Event()
    raises: list[asyncio.Future[BatchInfo]] = []
    reached = BudgetLedger.reached
    redrive_run = Redriver.redrive_run

    async def raise_after_the_second_read(
        ledger: BudgetLedger, tenant: str, batch: str | None
    ) -> Reached | None:
        found = await reached(ledger, tenant, batch)
        if found is not None and not raises and await ledger.held(found.scope):
            # The worker's read after its hold: still reached. The raise comes now, while
            # the job that held the step is in hand, and redrives the held run once.
            raises.append(
                asyncio.ensure_future(client.batches.set_budget("half", max_cost_usd=1.0))
            )
            await redriven.wait()
        return found

    async def noted(redriver: Redriver, entry: str) -> tuple[Outcome, int]:
        answer = await redrive_run(redriver, entry)
        outcomes.append(answer[0])
        redriven.set()
        return answer

    monkeypatch.setattr(BudgetLedger, "reached", raise_after_the_second_read)
    monkeypatch.setattr(Redriver, "redrive_run", noted)
    async with embedded(settings=settings(tmp_path)) as client:
        done = await half_a_batch(client)
        await raises[0]
    assert outcomes[0] == Outcome.IN_HAND, outcomes
    assert Outcome.REDRIVEN in outcomes, outcomes
    assert (done.counts.succeeded, done.counts.failed) == (4, 0)
