"""Cost accounting across real worker processes on a real redis-server: each step is
priced at the deployment's table (AGENTQ_PRICES) once, and its cost shows in the step's
event, the run's result and end event, its parent's (a sub-agent's), its batch's, and the
worker's Prometheus counter by tenant, provider and model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.messages import CostBreakdown
from tests.support.fake_openai import FakeOpenAI, Turn
from tests.support.infra import TOOLS, WorkerProcess, free_port, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

PRICES = {"scripted:*": {"input": 1.0, "cached_input": 0.5, "output": 2.0, "reasoning": 4.0}}
# 600 fresh + 400 cached input, 200 plain + 100 reasoning output tokens, per million:
USAGE = {"input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 300,
         "reasoning_tokens": 100}  # fmt: skip
STEP = CostBreakdown(
    input_usd=0.0006, cached_input_usd=0.0002, output_usd=0.0004, reasoning_usd=0.0004
)
STEP_USD = 0.0016


@pytest.fixture
def priced_worker(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> tuple[WorkerProcess, int]:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    port = free_port()
    env = {"AGENTQ_PRICES": str(prices)}
    worker = WorkerProcess(redis_url, "--tools", TOOLS, "--metrics-port", str(port), env=env)
    workers.append(worker)
    wait_ready(worker)
    return worker, port


def step(**answer: Any) -> dict[str, Any]:
    return {**answer, "usage": USAGE}


async def test_each_step_and_the_run_carry_their_cost(
    redis_url: str, priced_worker: tuple[WorkerProcess, int]
) -> None:
    spec = scripted(
        step(tool_calls=[{"name": "add", "input": {"a": 1, "b": 2}}]),
        step(text="3"),
        tools=["add"],
    )
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e.model_dump() async for e in client.runs.events(run_id)]
    assert result.status == "succeeded", result.error
    finishes = [e for e in events if e["type"] == "finish-step"]
    assert [e["usage"]["cost_usd"] for e in finishes] == [STEP_USD, STEP_USD]
    assert [s.usage.cost_breakdown for s in result.steps] == [STEP, STEP]
    assert result.usage.cost_usd == 2 * STEP_USD
    assert result.usage.cost_breakdown == STEP + STEP
    assert result.usage.input_tokens == 2000  # the tokens as reported
    (end,) = [e for e in events if e["type"] == "finish"]
    assert end["usage"]["cost_usd"] == pytest.approx(2 * STEP_USD)
    assert end["usage"]["cost_breakdown"]["reasoning_usd"] == pytest.approx(0.0008)


async def test_a_sub_agents_cost_rolls_up_into_its_parent(
    redis_url: str, priced_worker: tuple[WorkerProcess, int]
) -> None:
    child = {"model": {"provider": "scripted", "script": [step(text="from the child")]}}
    helper = {"type": "agent", "name": "helper", "description": "A helper", "spec": child}
    ask = step(tool_calls=[{"name": "helper", "input": {"prompt": "go"}, "id": "a1"}])
    spec = scripted(ask, step(text="done"), tools=[helper])
    async with Client(redis_url) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=60)
    assert result.status == "succeeded", result.error
    assert result.usage.cost_usd == 2 * STEP_USD  # its own steps
    assert result.child_usage.cost_usd == STEP_USD  # its sub-agent's
    assert result.child_usage.cost_breakdown == STEP


async def test_a_threads_cost_is_its_runs_sub_agents_included(
    redis_url: str, priced_worker: tuple[WorkerProcess, int]
) -> None:
    child = {"model": {"provider": "scripted", "script": [step(text="from the child")]}}
    helper = {"type": "agent", "name": "helper", "description": "A helper", "spec": child}
    ask = step(tool_calls=[{"name": "helper", "input": {"prompt": "go"}, "id": "a1"}])
    async with Client(redis_url) as client:
        first = await client.runs.submit(
            scripted(ask, step(text="done"), tools=[helper], thread_id="priced")
        )
        await client.runs.wait(first, timeout_s=60)
        second = await client.runs.submit(scripted(step(text="again"), thread_id="priced"))
        await client.runs.wait(second, timeout_s=60)
        view = await client.threads.get("priced")
    # Two steps and a sub-agent's one in the first run, one step in the second.
    assert view.usage.cost_usd == pytest.approx(4 * STEP_USD)
    assert view.usage.cost_breakdown == STEP + STEP + STEP + STEP
    assert view.usage.input_tokens == 4000


async def test_a_batch_shows_its_lines_cost(
    redis_url: str, priced_worker: tuple[WorkerProcess, int]
) -> None:
    template = scripted(step(text="done"), prompt="{{q}}")
    lines = [{"custom_id": f"c{i}", "vars": {"q": str(i)}} for i in range(3)]
    async with Client(redis_url) as client:
        await client.batches.submit(lines, template=template, batch_id="priced")
        info = await eventually_async(
            lambda: client.batches.status("priced"), "the batch to end", until=lambda i: i.ended
        )
        rows = [r async for r in client.batches.results("priced")]
    assert info.counts.succeeded == 3
    assert info.cost_usd == pytest.approx(3 * STEP_USD)
    assert [r.usage.cost_usd if r.usage else None for r in rows] == [STEP_USD] * 3


async def test_the_worker_counts_cost_by_tenant_provider_and_model(
    redis_url: str, priced_worker: tuple[WorkerProcess, int]
) -> None:
    _, port = priced_worker
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(scripted(step(text="hi")), tenant="acme")
        assert (await client.runs.wait(run_id, timeout_s=60)).usage.cost_usd == STEP_USD

    async def costs() -> dict[tuple[str, str, str], float]:
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{port}/metrics", timeout=10)).text
        return {
            (s.labels["tenant"], s.labels["provider"], s.labels["model"]): s.value
            for family in text_string_to_metric_families(text)
            if family.name == "agentq_cost_usd"
            for s in family.samples
            if s.name == "agentq_cost_usd_total"
        }

    # The worker counts the step's cost once its commit returned, and the commit that
    # ends the run is what the client's wait hears: the scrape can come first.
    samples = await eventually_async(costs, "the step's cost to be counted")
    assert samples == {("acme", "scripted", "scripted"): pytest.approx(STEP_USD)}


async def test_a_model_without_a_price_makes_the_cost_unknown_not_zero(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    usage = {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
    with FakeOpenAI([Turn(text="from the child", usage=usage)]) as server:
        env = {"AGENTQ_ALLOW_SPEC_ENDPOINTS": server.base_url, "AGENTQ_PRICES": str(prices)}
        workers.append(WorkerProcess(redis_url, "--tools", TOOLS, env=env))
        wait_ready(*workers)
        model = {"provider": "openai", "name": "no-such-model", "base_url": server.base_url}
        helper = {
            "type": "agent",
            "name": "helper",
            "description": "A helper",
            "spec": {"model": model},
        }
        ask = step(tool_calls=[{"name": "helper", "input": {"prompt": "go"}, "id": "a1"}])
        spec = scripted(ask, step(text="done"), tools=[helper])
        async with Client(redis_url) as client:
            run_id = await client.runs.submit(spec, tenant="acme")
            result = await client.runs.wait(run_id, timeout_s=60)
            tenant = await client.runs.usage("acme")
    assert result.status == "succeeded", result.error
    assert result.usage.cost_usd == 2 * STEP_USD  # its own steps have a price
    assert (result.child_usage.cost_usd, result.child_usage.cost_breakdown) == (None, None)
    assert result.child_usage.total_tokens == 16  # the tokens still count
    assert (tenant.cost_usd, tenant.total_tokens) == (None, 2 * 1300 + 16)
