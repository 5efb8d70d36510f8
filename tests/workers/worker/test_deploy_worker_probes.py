"""A worker's Prometheus metrics and health probes, over real HTTP, against a real
redis-server and a real `agentq worker` process (and, for the probes' failure modes, a
runtime in this process whose Redis is stopped or whose event loop is blocked)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import queue_key
from agentq.orchestrator.fleet.queues import known_queues, queue_stats, queues_document
from agentq.orchestrator.redis.connect import connect
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.health import HealthServer, readiness_check
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.embedded_runs import of_type, wait_event
from tests.support.fake_openai import FakeOpenAI, Turn
from tests.support.infra import TOOLS, RedisServer, WorkerProcess, free_port, free_ports, run_cli
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=10)


def wait_until_ready(url: str, worker: WorkerProcess, timeout_s: float = 30) -> None:
    def ready() -> bool:
        assert worker.proc.poll() is None, worker.log()
        try:
            return get(url).status_code == 200
        except httpx.TransportError:
            return False  # not listening yet

    eventually(ready, f"{url} to become ready", timeout_s)


def scrape(url: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(get(url).text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name` over the samples whose labels include `labels`."""
    wanted = set(labels.items())
    found = [v for (n, ls), v in samples.items() if n == name and wanted <= ls]
    assert found, f"no sample {name} {labels}"
    return sum(found)


@pytest.fixture
def probed_worker(redis_url: str, allow_loopback_specs: None) -> Iterator[dict[str, Any]]:
    # The spec's model goes to a loopback fake: allow_loopback_specs lets it (and the
    # worker process started here inherits that environment).
    metrics_port, health_port = free_ports(2)
    worker = WorkerProcess(
        redis_url,
        "--tools",
        TOOLS,
        "--metrics-port",
        str(metrics_port),
        "--health-port",
        str(health_port),
        "--probe-host",
        "127.0.0.1",
        env={
            "OPENAI_API_KEY": "sk-metrics",
            "AGENTQ_RATE_LIMITS": json.dumps({"openai:*": [1000, None]}),
        },
    )
    try:
        wait_until_ready(f"http://127.0.0.1:{health_port}/readyz", worker)
        yield {
            "worker": worker,
            "metrics": f"http://127.0.0.1:{metrics_port}/metrics",
            "health": f"http://127.0.0.1:{health_port}",
        }
    finally:
        worker.stop()


async def test_a_worker_counts_its_jobs_model_calls_and_queues(
    redis_url: str, probed_worker: dict[str, Any]
) -> None:
    calls = [
        {"name": "add", "input": {"a": 1, "b": 2}},
        {"name": "noop", "input": {}},
        {"name": "fail", "input": {"message": "on purpose"}},  # raises: a tool error
    ]
    spec = scripted({"tool_calls": calls}, {"text": "done"}, tools=["add", "noop", "fail"])
    with FakeOpenAI([Turn(text="hello"), Turn(status=400)]) as server:
        openai = {
            "model": {"provider": "openai", "name": "gpt-test", "base_url": server.base_url},
            "prompt": "hi",
        }
        async with Client(redis_url) as client:
            runs = [await client.runs.submit(spec, tenant="acme"), await client.runs.submit(openai)]
            results = [await client.runs.wait(run, timeout_s=60) for run in runs]
            refused = await client.runs.submit(openai, tenant="acme")  # the provider says 400
            results.append(await client.runs.wait(refused, timeout_s=60))
            napping = await client.runs.submit(
                scripted(
                    {"tool_calls": [{"name": "nap", "input": {"seconds": 600, "tag": "z"}}]},
                    {"text": "never"},
                    tools=["nap"],
                )
            )
            await wait_event(client, napping, of_type("tool-running"))
            await client.runs.cancel(napping)  # its running job is stopped
    statuses = [r.status for r in results]
    assert statuses == ["succeeded", "succeeded", "failed"], [r.error for r in results]
    # A timer due in an hour is not work on hand: depth 0.
    redis.Redis.from_url(redis_url).zadd(
        keys.timers("tools"), {"timer-job": (time.time() + 3600) * 1000}
    )

    def cancelled(samples: Samples) -> bool:
        wanted = {("kind", "tool_call"), ("outcome", "cancelled")}
        return any(n == "agentq_jobs_ended_total" and wanted <= ls for (n, ls) in samples)

    samples = await asyncio.to_thread(
        eventually,
        lambda: scrape(probed_worker["metrics"]),
        "the cancelled job to be counted",
        until=cancelled,
    )

    model_steps = {"queue": "model", "kind": "model_step"}
    tool_calls = {"queue": "tools", "kind": "tool_call"}
    ended = "agentq_jobs_ended_total"
    assert value(samples, "agentq_jobs_started_total", **model_steps) == 5
    assert value(samples, ended, outcome="succeeded", **model_steps) == 4
    assert value(samples, ended, outcome="failed", **model_steps) == 1
    assert value(samples, "agentq_jobs_started_total", **tool_calls) == 4
    assert value(samples, ended, outcome="succeeded", **tool_calls) == 2
    assert value(samples, ended, outcome="tool_error", **tool_calls) == 1
    assert value(samples, ended, outcome="cancelled", **tool_calls) == 1
    assert value(samples, "agentq_job_execution_seconds_count", **tool_calls) == 4
    assert value(samples, "agentq_job_queue_wait_seconds_count", **model_steps) == 5
    assert ("agentq_jobs_redelivered_total", frozenset(tool_calls.items())) not in samples
    runs_ended = "agentq_runs_ended_total"
    assert value(samples, runs_ended, tenant="acme", status="succeeded", failure_kind="") == 1
    assert value(samples, runs_ended, tenant="acme", status="failed", failure_kind="provider") == 1
    assert value(samples, runs_ended, tenant="default", status="succeeded") == 1
    assert value(samples, "agentq_model_requests_total", provider="scripted", outcome="ok") == 3
    gpt = {"provider": "openai", "model": "gpt-test"}
    assert value(samples, "agentq_model_requests_total", outcome="ok", **gpt) == 1
    assert value(samples, "agentq_model_requests_total", outcome="error", **gpt) == 1
    assert value(samples, "agentq_model_tokens_total", direction="output", **gpt) > 0
    assert value(samples, "agentq_rate_limit_wait_seconds_count", **gpt) == 2
    assert value(samples, "agentq_queue_depth", queue="tools") == 0
    assert value(samples, "agentq_queue_ready", queue="tools") == 0
    assert value(samples, "agentq_queue_held", queue="tools") == 0
    assert value(samples, "agentq_queue_depth", queue="model") == 0
    assert value(samples, "agentq_queue_oldest_job_age_seconds", queue="model") == 0


def test_a_worker_is_alive_and_ready_over_http(probed_worker: dict[str, Any]) -> None:
    live = get(probed_worker["health"] + "/livez")
    ready = get(probed_worker["health"] + "/readyz")
    assert (live.status_code, live.json()) == (200, {"ok": True, "problems": []})
    assert (ready.status_code, ready.json()) == (200, {"ok": True, "problems": []})
    assert get(probed_worker["health"] + "/nope").status_code == 404


def test_a_taken_port_is_one_line_and_exit_2(redis_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli(
            "worker",
            "--metrics-port",
            str(port),
            "--probe-host",
            "127.0.0.1",
            redis_url=redis_url,
            timeout_s=60,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "agentq: cannot serve probes on 127.0.0.1: Address already in use"
    ]


async def test_readiness_fails_while_redis_is_down_and_liveness_holds() -> None:
    server = RedisServer()
    runtime = WorkerRuntime(server.url, executors=[FunctionExecutor([])])
    health: HealthServer | None = None
    try:
        await runtime.start()
        loop = asyncio.get_running_loop()
        health = HealthServer(
            readiness_check(runtime, timeout_s=1), loop, port=free_port(), host="127.0.0.1"
        ).start()
        base = f"http://127.0.0.1:{health.port}"
        assert (await asyncio.to_thread(get, base + "/readyz")).status_code == 200
        server.stop()
        ready = await asyncio.to_thread(get, base + "/readyz")
        assert ready.status_code == 503
        assert any(p.startswith("redis: ") for p in ready.json()["problems"]), ready.json()
        assert (await asyncio.to_thread(get, base + "/livez")).status_code == 200
    finally:
        if health is not None:
            health.close()
        await runtime.stop()
        server.stop()


async def test_a_blocked_event_loop_is_not_alive() -> None:
    async def ready() -> list[str]:
        return []

    loop = asyncio.get_running_loop()
    health = HealthServer(ready, loop, port=free_port(), host="127.0.0.1", timeout_s=0.2).start()
    try:
        answers: list[httpx.Response] = []
        probe = threading.Thread(
            target=lambda: answers.append(get(f"http://127.0.0.1:{health.port}/livez"))
        )
        probe.start()
        probe.join()  # blocks this event loop until the probe has its answer
        [live] = answers
        assert live.status_code == 503
        assert "event loop did not answer" in live.json()["problems"][0]
        assert (
            await asyncio.to_thread(get, f"http://127.0.0.1:{health.port}/livez")
        ).status_code == 200
    finally:
        health.close()


async def test_queue_stats_read_depth_readiness_and_age(redis_url: str) -> None:
    r = connect(redis_url)
    try:
        now = 1_000_000.0
        await r.zadd(queue_key("tools"), {"a": (now - 30) * 1000, "b": (now - 5) * 1000})
        # A retry waiting out its delay and a running job (+inf) in the queue; a timer
        # fallen due (ready: a pool at zero must see it) and one due later beside it.
        await r.zadd(queue_key("tools"), {"later": (now + 60) * 1000, "busy": float("inf")})
        await r.zadd(keys.timers("tools"), {"due": (now - 40) * 1000, "t": (now + 9) * 1000})
        await r.zadd(queue_key("sandbox"), {"c": now * 1000})
        stats = await queue_stats(r, ["tools", "sandbox", "model"], now_s=now)
        empty = {
            "depth": 0,
            "ready": 0,
            "running": 0,
            "held": 0,
            "scheduled": 0,
            "oldest_age_s": 0.0,
        }
        tools = {
            "depth": 4,
            "ready": 3,
            "running": 1,
            "held": 0,
            "scheduled": 2,
            "oldest_age_s": 40.0,
        }
        assert queues_document(stats) == {
            "queues": {
                "tools": tools,
                "sandbox": {**empty, "depth": 1, "ready": 1},
                "model": empty,
            }
        }
        assert await known_queues(r) == ["sandbox", "tools"]
    finally:
        await r.aclose()
