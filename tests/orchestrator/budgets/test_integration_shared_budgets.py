"""Shared budgets (a batch's, a tenant's) over a real redis-server and real worker
processes, with the scripted model priced by a table: a budget reached holds its runs'
next steps (running steps finish and are charged), the batch shows `paused`, a tenant's
submits are refused naming the budget, and a raise sends every held step on with no run
lost; a worker SIGKILLed mid-batch neither loses nor doubles a charge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.batches.api import BatchInfo
from agentq.orchestrator.budgets.shared import Scope
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import BudgetReachedError
from agentq.orchestrator.core.settings import Settings
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

PRICES = {"scripted:*": {"input": 1.0, "output": 2.0}}  # USD per million tokens
USAGE = {"input_tokens": 1000, "output_tokens": 300}  # $0.0016 a step
STEP_USD = 0.0016
ADD = {"name": "add", "input": {"a": 1, "b": 2}}
RUNS = 6
CONCURRENCY = 2
# Each line: a step that calls `add`, then a step that answers: $0.0032 a run.
LINE = scripted(
    {"tool_calls": [ADD], "usage": USAGE}, {"text": "done", "usage": USAGE}, tools=["add"]
)
TENANT_BUDGETS = {"acme": {"max_cost_usd": 2 * STEP_USD}}


def start_worker(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path, **env: str
) -> WorkerProcess:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    worker = WorkerProcess(redis_url, "--tools", TOOLS, env={"AGENTQ_PRICES": str(prices), **env})
    workers.append(worker)
    wait_ready(worker)
    return worker


def lines(n: int) -> list[dict[str, Any]]:
    return [{"custom_id": f"c{i}"} for i in range(n)]


def quiet(info: BatchInfo) -> bool:
    """Paused with every running line held at a step: nothing more is being spent."""
    budget = info.budget
    return (
        info.status == "paused"
        and budget is not None
        and info.counts.running > 0
        and budget.held_runs == info.counts.running
    )


async def test_a_batch_budget_pauses_the_batch_and_a_raise_finishes_every_run(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    start_worker(redis_url, workers, tmp_path)
    half = RUNS * 2 * STEP_USD / 2
    async with Client(redis_url) as client:
        await client.batches.submit(
            lines(RUNS), template=LINE, batch_id="half", max_cost_usd=half, concurrency=CONCURRENCY
        )
        paused = await eventually_async(
            lambda: client.batches.status("half"), "the batch to pause", until=quiet
        )
        assert paused.budget is not None
        spent = paused.budget.spent_usd
        # Reached, and past it by at most the steps that were running when it was: one
        # per running run (the batch runs CONCURRENCY at a time).
        assert half <= spent <= half + CONCURRENCY * STEP_USD + 1e-9
        assert paused.counts.failed == 0
        assert paused.budget.reached is not None
        assert "budget reached: batch 'half' max_cost_usd 0.0096" in paused.budget.reached
        held = [r.run_id async for r in client.batches.results("half") if r.status == "running"]
        events = [e.model_dump() async for e in client.runs.events(str(held[0]))]
        (event,) = [e for e in events if e["type"] == "step-held"]
        assert event["budget"] == Scope("batch", paused.tenant, "half").id

        raised = await client.batches.set_budget("half", max_cost_usd=1.0)
        assert raised.budget is not None
        assert raised.budget.reached is None
        done = await eventually_async(
            lambda: client.batches.status("half"), "the batch to end", until=lambda i: i.ended
        )
        rows = [r async for r in client.batches.results("half")]
        # Its spend is kept as long as the batch is, not for ever.
        assert await client.redis.ttl(keys.batch_usage(done.tenant, "half")) > 0
    assert (done.counts.succeeded, done.counts.failed) == (RUNS, 0)
    assert done.status == "done"
    assert done.budget is not None
    assert done.budget.spent_usd == pytest.approx(RUNS * 2 * STEP_USD)
    assert sum(r.usage.cost_usd or 0 for r in rows if r.usage) == pytest.approx(
        done.budget.spent_usd
    )


async def test_a_tenant_budget_holds_that_tenant_while_another_goes_on(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    start_worker(redis_url, workers, tmp_path, AGENTQ_TENANT_BUDGETS=json.dumps(TENANT_BUDGETS))
    settings = Settings.model_validate({"tenant_budgets": TENANT_BUDGETS})
    long_run = scripted(
        *({"tool_calls": [ADD], "usage": USAGE} for _ in range(3)),
        {"text": "done", "usage": USAGE},
        tools=["add"],
    )
    async with Client(redis_url, settings=settings) as client:
        acme = await client.runs.submit(long_run, tenant="acme")

        async def held() -> list[dict[str, Any]]:
            return [e.model_dump() async for e in client.runs.events(acme) if e.type == "step-held"]

        (event,) = await eventually_async(held, "acme's run to be held")
        assert event["budget"] == "tenant:acme"
        assert event["step"] == 2  # two steps spent $0.0032, the budget
        assert (await client.runs.status(acme)).held == "tenant:acme"

        other = await client.runs.submit(long_run, tenant="other")
        assert (await client.runs.wait(other, timeout_s=60)).status == "succeeded"
        with pytest.raises(BudgetReachedError, match="budget reached: tenant 'acme'") as refused:
            await client.runs.submit(scripted({"text": "hi"}), tenant="acme")
        assert (refused.value.budget, refused.value.limit) == ("tenant:acme", "max_cost_usd")
        status = await client.budgets.tenant("acme")
        assert status.held_runs == 1
        assert status.spent_usd == pytest.approx(2 * STEP_USD)

        await client.budgets.set_tenant("acme", max_cost_usd=1.0)
        result = await client.runs.wait(acme, timeout_s=60)
        assert result.status == "succeeded", result.error
        assert result.usage.cost_usd == pytest.approx(4 * STEP_USD)
        assert (await client.runs.status(acme)).held is None
        again = await client.runs.submit(scripted({"text": "hi"}), tenant="acme")
        assert (await client.runs.wait(again, timeout_s=60)).status == "succeeded"


async def test_a_worker_killed_mid_batch_neither_loses_nor_doubles_a_charge(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    worker = start_worker(redis_url, workers, tmp_path)
    n = 20
    async with Client(redis_url) as client:
        await client.batches.submit(lines(n), template=LINE, batch_id="k", max_cost_usd=10.0)

        async def spent() -> float:
            return (await client.budgets.status(Scope("batch", "default", "k"))).spent_usd

        # Killed while the batch's steps are being taken and charged.
        await eventually_async(spent, "the first charge", until=lambda usd: usd > 0)
        worker.kill()
        start_worker(redis_url, workers, tmp_path)
        done = await eventually_async(
            lambda: client.batches.status("k"), "the batch to end", 120, until=lambda i: i.ended
        )
        rows = [r async for r in client.batches.results("k")]
    assert done.counts.succeeded == n
    assert done.budget is not None
    # Each recorded step charged once: the batch's spend is its runs' recorded cost.
    recorded = sum(r.usage.cost_usd or 0 for r in rows if r.usage)
    assert done.budget.spent_usd == pytest.approx(recorded)
    assert recorded == pytest.approx(n * 2 * STEP_USD)


async def test_a_lines_sub_agent_spends_the_batchs_budget(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    start_worker(redis_url, workers, tmp_path)
    child = {"model": {"provider": "scripted", "script": [{"text": "ok", "usage": USAGE}]}}
    helper = {"type": "agent", "name": "helper", "description": "A helper", "spec": child}
    ask = {"tool_calls": [{"name": "helper", "input": {"prompt": "go"}}], "usage": USAGE}
    template = scripted(ask, {"text": "done", "usage": USAGE}, tools=[helper])
    async with Client(redis_url) as client:
        await client.batches.submit(lines(1), template=template, batch_id="sub", max_cost_usd=1.0)
        done = await eventually_async(
            lambda: client.batches.status("sub"), "the batch to end", until=lambda i: i.ended
        )
    assert done.counts.succeeded == 1
    assert done.budget is not None
    assert done.budget.spent_usd == pytest.approx(3 * STEP_USD)  # two steps and the child's


async def test_a_daily_tenant_budget_resumes_by_itself_in_a_new_window(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    daily = {"acme": {"max_cost_usd": 2 * STEP_USD, "period": "day"}}
    start_worker(
        redis_url,
        workers,
        tmp_path,
        AGENTQ_TENANT_BUDGETS=json.dumps(daily),
        # The sweeper looks at a held run again soon: a new window needs no raise.
        AGENTQ_BUDGET_RECHECK_S="0.2",
        AGENTQ_REDRIVE_AFTER_S="0.5",
    )
    settings = Settings.model_validate({"tenant_budgets": daily})
    long_run = scripted(
        *({"tool_calls": [ADD], "usage": USAGE} for _ in range(3)),
        {"text": "done", "usage": USAGE},
        tools=["add"],
    )
    async with Client(redis_url, settings=settings) as client:
        acme = await client.runs.submit(long_run, tenant="acme")
        held = await eventually_async(
            lambda: client.budgets.tenant("acme"), "acme held", until=lambda s: s.held_runs
        )
        assert held.window is not None
        assert held.reached is not None
        assert f"budget reached: tenant 'acme' ({held.window}) max_cost_usd" in held.reached
        today = keys.tenant_window_usage(held.window)
        assert 0 < await client.redis.ttl(today) <= 2 * 86400  # kept past its day only
        # The day ends: today's spend is yesterday's, and the next window starts empty.
        await client.redis.rename(today, keys.tenant_window_usage("1999-12-31"))
        result = await client.runs.wait(acme, timeout_s=60)
        assert result.status == "succeeded", result.error
        assert (await client.budgets.tenant("acme")).spent_usd == pytest.approx(2 * STEP_USD)
        assert (await client.runs.usage("acme")).cost_usd == pytest.approx(4 * STEP_USD)
