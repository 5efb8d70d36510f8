"""Routing by tool: a worker claims only the jobs of tools it serves, so workers with
different tool sets share a queue. A rolling deploy that adds a tool (old workers {a},
new workers {a, b}) goes through under load, and a pool restarted while another pool
with other tools shares its queue gets its calls back: nothing failed, refused or
stuck. Real worker processes on a real redis-server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentq.orchestrator.client import Client
from agentq.orchestrator.runs.result import RunResult
from tests.support.infra import TOOLS, WorkerProcess, free_ports, run_cli, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

SHOUT = '''
from agentq import tool


@tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()
'''

# Signs that a worker took a job it cannot run (the routing this replaces).
WRONG_WORKER = ("released for another worker", "is not registered on this worker")


@pytest.fixture
def shout_tools(tmp_path: Path) -> str:
    module = tmp_path / "shout_tools.py"
    module.write_text(SHOUT)
    return str(module)


@pytest.fixture
def fleet() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def start(fleet: list[WorkerProcess], redis_url: str, *args: str) -> WorkerProcess:
    worker = WorkerProcess(redis_url, *args)
    fleet.append(worker)
    wait_ready(worker)
    return worker


def add_spec(i: int) -> dict[str, Any]:
    step = {"tool_calls": [{"name": "add", "input": {"a": i, "b": 1}}]}
    return scripted(step, {"text": f"added {i}"}, tools=["add"])


def shout_spec(i: int) -> dict[str, Any]:
    step = {"tool_calls": [{"name": "shout", "input": {"text": f"hi {i}"}}]}
    return scripted(step, {"text": f"shouted {i}"}, tools=["shout"])


def outputs(result: RunResult) -> list[Any]:
    assert result.status == "succeeded", result.error
    return [(r.is_error, r.output) for r in result.steps[0].tool_results]


def stop_gracefully(worker: WorkerProcess) -> None:
    worker.terminate()
    assert worker.proc.wait(30) == 0, worker.log()


async def test_a_rolling_deploy_that_adds_a_tool_goes_through_under_load(
    redis_url: str, fleet: list[WorkerProcess], shout_tools: str
) -> None:
    old = [start(fleet, redis_url, "--tools", TOOLS) for _ in range(2)]
    async with Client(redis_url) as client:
        submitted: list[tuple[str, str, int]] = []
        load_on = True

        async def load() -> None:
            i = 0
            while load_on:
                submitted.append(("add", await client.runs.submit(add_spec(i)), i))
                i += 1
                await asyncio.sleep(0.02)

        loader = asyncio.create_task(load())
        # The rollout, one pod at a time (maxUnavailable 0: a new one up, then an old one
        # down); the new pods serve `shout` too, and runs needing it come with them.
        # (Blocking steps in threads: the load goes on meanwhile.)
        for n, retiring in enumerate(old):
            args = ("--tools", TOOLS, "--tools", shout_tools)
            await asyncio.to_thread(start, fleet, redis_url, *args)
            for i in range(n * 5, n * 5 + 5):
                submitted.append(("shout", await client.runs.submit(shout_spec(i)), i))
            await asyncio.to_thread(stop_gracefully, retiring)
        load_on = False
        await loader
        results = await asyncio.gather(
            *(client.runs.wait(run_id, timeout_s=120) for _, run_id, _ in submitted)
        )

    for (tool, _, i), result in zip(submitted, results, strict=True):
        if tool == "add":
            assert outputs(result) == [(False, i + 1.0)]
        else:
            assert outputs(result) == [(False, f"HI {i}")]
    assert sum(1 for t, _, _ in submitted if t == "add") > 10  # it was under load
    for worker in fleet:
        assert worker.proc.poll() in (None, 0), worker.log()  # none refused to start
        assert not any(sign in worker.log() for sign in WRONG_WORKER), worker.log()


async def test_a_pool_restarted_beside_another_pool_on_its_queue_gets_its_calls(
    redis_url: str, fleet: list[WorkerProcess], shout_tools: str
) -> None:
    # The deployment declares `add` (its pool may be down): submit accepts it meanwhile.
    published = run_cli("catalog", "publish", "--tools", TOOLS, redis_url=redis_url)
    assert published.returncode == 0, published.stderr
    adders = start(fleet, redis_url, "--tools", TOOLS)
    shouters = start(fleet, redis_url, "--tools", shout_tools)  # same queue: tools
    async with Client(redis_url) as client:
        before = [await client.runs.submit(add_spec(1)), await client.runs.submit(shout_spec(1))]
        stop_gracefully(adders)  # the adders' pool restarts: none of it is up
        during = await client.runs.submit(add_spec(2))  # `add` is waiting for its pool
        shouted = await client.runs.wait(await client.runs.submit(shout_spec(2)), timeout_s=60)
        assert outputs(shouted) == [(False, "HI 2")]  # the other pool goes on
        assert (await client.runs.status(during)).status == "running"
        start(fleet, redis_url, "--tools", TOOLS)  # the pool is back
        results = [await client.runs.wait(r, timeout_s=60) for r in (*before, during)]

    assert [outputs(r) for r in results] == [[(False, 2.0)], [(False, "HI 1")], [(False, 3.0)]]
    assert not any(sign in shouters.log() for sign in WRONG_WORKER), shouters.log()
    for worker in fleet:
        assert worker.proc.poll() in (None, 0), worker.log()


# -- jobs that run a hook or a workflow node route the same way -----------------------------

HOOKS = "tests/support/loop_hooks.py"


def shout_workflow(i: int) -> dict[str, Any]:
    """A run calling a workflow whose tool node runs `shout`."""
    workflow = {
        "type": "workflow",
        "name": "shouter",
        "description": "Shouts the text",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "graph": {
            "nodes": [
                {"id": "in", "kind": "input"},
                {
                    "id": "loud",
                    "kind": "tool",
                    "tool": {"type": "function", "name": "shout"},
                    "input": {"text": "{{in.text}}"},
                },
                {"id": "out", "kind": "output", "value": "{{loud}}"},
            ],
            "edges": [["in", "loud"], ["loud", "out"]],
        },
    }
    step = {"tool_calls": [{"name": "shouter", "input": {"text": f"hi {i}"}}]}
    return scripted(step, {"text": f"shouted {i}"}, tools=[workflow])


def hooked_spec(i: int) -> dict[str, Any]:
    return {**scripted({"text": f"hooked {i}"}), "prepare_step": "numbered_system"}


def job_counts(metrics_url: str) -> dict[tuple[str, str], float]:
    """A worker's ended jobs by (kind, outcome), scraped from its /metrics."""
    counts: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(httpx.get(metrics_url, timeout=10).text):
        for sample in family.samples:
            if sample.name == "agentq_jobs_ended_total":
                key = (sample.labels["kind"], sample.labels["outcome"])
                counts[key] = counts.get(key, 0) + sample.value
    return counts


async def test_hook_and_workflow_node_jobs_go_only_to_workers_that_serve_them(
    redis_url: str, fleet: list[WorkerProcess], shout_tools: str
) -> None:
    start(fleet, redis_url, "--queue", "model")
    # Two workers on the tools queue: only one has the hook and `shout`.
    serving_port, lacking_port = free_ports(2)
    metrics = ("--metrics-port", str(serving_port), "--queue", "tools", "--tools", TOOLS)
    start(fleet, redis_url, *metrics, "--tools", HOOKS, "--tools", shout_tools)
    lacking = start(
        fleet, redis_url, "--queue", "tools", "--tools", TOOLS, "--metrics-port", str(lacking_port)
    )
    async with Client(redis_url) as client:
        runs = [await client.runs.submit(hooked_spec(i)) for i in range(8)]
        runs += [await client.runs.submit(shout_workflow(i)) for i in range(8)]
        results = [await client.runs.wait(run_id, timeout_s=120) for run_id in runs]

    for result in results[:8]:
        assert result.status == "succeeded", result.error
    for i, result in enumerate(results[8:]):
        assert outputs(result) == [(False, f"HI {i}")]
    # A job is counted once it returned, after the transition that let its run go on:
    # a run can end (and its wait return) before its last node or hook job is counted.
    served = await eventually_async(
        lambda: job_counts(f"http://127.0.0.1:{serving_port}/metrics"),
        "every hook and node job to be counted",
        until=lambda counts: (
            counts.get(("hook_job", "succeeded"), 0) >= 8
            and counts.get(("workflow_node", "succeeded"), 0) >= 8
        ),
    )
    assert served[("hook_job", "succeeded")] == 8
    assert served[("workflow_node", "succeeded")] >= 8  # (a lapsed lease may run one twice)
    assert not [k for k in served if k[1] == "released"], served
    # The lacking worker never took one of those jobs (so never gave one back).
    assert job_counts(f"http://127.0.0.1:{lacking_port}/metrics") == {}, lacking.log()
    assert not any(sign in lacking.log() for sign in WRONG_WORKER), lacking.log()
