"""`agentq batch submit --max-cost-usd`, `batch status` (paused, the budget line),
`batch budget` (the raise that finishes the batch) and `agentq budget tenant`: real CLI
processes, a priced worker process and a real redis-server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import cast

import pytest
import redis

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

PRICES = {"scripted:*": {"input": 1.0, "output": 2.0}}  # USD per million tokens
USAGE = {"input_tokens": 1000, "output_tokens": 300}  # $0.0016 a step
TEMPLATE = scripted(
    {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}], "usage": USAGE},
    {"text": "done", "usage": USAGE},
    tools=["add"],
)
BUDGETS = json.dumps({"acme": {"max_cost_usd": 0.5}})


def test_a_batch_pauses_at_its_budget_and_the_cli_raises_it(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    workers.append(WorkerProcess(redis_url, "--tools", TOOLS, env={"AGENTQ_PRICES": str(prices)}))
    wait_ready(*workers)
    lines, template = tmp_path / "in.jsonl", tmp_path / "template.json"
    lines.write_text("".join(json.dumps({"custom_id": f"c{i}"}) + "\n" for i in range(4)))
    template.write_text(json.dumps(TEMPLATE))
    submitted = run_cli(
        "batch", "submit", str(lines), "--spec", str(template), "--id", "cb",
        "--max-cost-usd", "0.0048", redis_url=redis_url,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr

    def status() -> str:
        return run_cli("batch", "status", "cb", redis_url=redis_url).stdout

    async def held() -> bool:  # paused, and a run's step held already
        async with Client(redis_url) as client:
            info = await client.batches.status("cb")
        budget = info.budget
        reached = budget is not None and budget.reached is not None and budget.held_runs > 0
        return info.status == "paused" and reached

    # Waited for through the client (no `agentq` process per look), then shown by the CLI.
    eventually(lambda: asyncio.run(held()), "the batch to pause with a run held")
    paused = status()
    assert "budget: $0.0" in paused
    assert "runs held: budget reached: batch 'cb' max_cost_usd 0.0048" in paused
    (run_id, *_) = cast(list[bytes], redis.Redis.from_url(redis_url).hkeys(keys.budgets_held()))
    shown = run_cli("status", run_id.decode(), "--json", redis_url=redis_url)
    assert json.loads(shown.stdout)["held"] == "batch:default:cb"
    text = run_cli("status", run_id.decode(), redis_url=redis_url).stdout
    assert "held: budget batch:default:cb is reached (raising it sends the step on)" in text

    bare = run_cli("batch", "budget", "cb", redis_url=redis_url)
    assert (bare.returncode, bare.stderr.strip()) == (
        2, "agentq: give --max-cost-usd or --max-total-tokens"
    )  # fmt: skip
    raised = run_cli("batch", "budget", "cb", "--max-cost-usd", "1", redis_url=redis_url)
    assert raised.returncode == 0, raised.stderr
    assert "of $1.0000" in raised.stdout
    waited = run_cli("batch", "wait", "cb", redis_url=redis_url)
    assert waited.returncode == 0, waited.stderr
    assert "cb done: 4 succeeded, 0 failed" in status()


def test_budget_tenant_shows_and_raises_only_a_budgeted_tenant(redis_url: str) -> None:
    env = {"AGENTQ_TENANT_BUDGETS": BUDGETS}
    shown = run_cli("budget", "tenant", "acme", redis_url=redis_url, env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "tenant:acme: $0.0000 of $0.5000, 0 tokens"
    raised = run_cli(
        "budget", "tenant", "acme", "--max-cost-usd", "2", redis_url=redis_url, env=env
    )
    assert raised.stdout.strip() == "tenant:acme: $0.0000 of $2.0000, 0 tokens"
    nobody = run_cli(
        "budget", "tenant", "nobody", "--max-cost-usd", "2", redis_url=redis_url, env=env
    )
    assert nobody.returncode == 2
    assert nobody.stderr.strip() == (
        "agentq: tenant 'nobody' has no budget to raise: give it one in "
        "AGENTQ_TENANT_BUDGETS (its own entry or '*')"
    )


@pytest.mark.parametrize("command", [["worker"], ["budget", "tenant", "acme"]])
def test_a_bad_tenant_budget_is_one_line_and_exit_2(command: list[str]) -> None:
    env = {"AGENTQ_TENANT_BUDGETS": json.dumps({"acme": {"max_cost": 1}})}
    done = run_cli(*command, redis_url="redis://127.0.0.1:1/0", env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "agentq: AGENTQ_TENANT_BUDGETS['acme'].max_cost: Extra inputs are not permitted"
    )
