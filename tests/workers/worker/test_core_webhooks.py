"""A run's webhooks, delivered by a real worker process against a real redis-server:
a receiver that is down costs the run nothing and leaves a `webhook-failed` event in
`agentq events`; a receiver that is up gets the selected events in order, signed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.policy.signing import verify
from tests.support.infra import TOOLS, WorkerProcess, free_port, run_cli, wait_ready
from tests.support.receiver import Receiver
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

ALLOW = {
    "AGENTQ_ALLOW_WEBHOOK_HOSTS": "127.0.0.1",
    "AGENTQ_ALLOW_HTTP_ENVS": "HOOK_SECRET",
}
SECRET = "hook-s3cret"


@pytest.fixture
def worker(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(
        redis_url,
        "--tools",
        TOOLS,
        env={
            **ALLOW,
            "HOOK_SECRET": SECRET,
            "AGENTQ_WEBHOOK_BACKOFF_S": "0.01",
            "AGENTQ_WEBHOOK_MAX_ATTEMPTS": "3",
        },
    )
    wait_ready(process)
    yield process
    process.stop()


def spec_with_hook(url: str, events: list[str]) -> dict[str, Any]:
    return scripted(
        calls(("add", {"a": 1, "b": 2})),
        {"text": "3"},
        tools=["add"],
        webhooks=[{"url": url, "events": events, "secret_env": "HOOK_SECRET"}],
    )


async def submit_and_wait(redis_url: str, spec: dict[str, Any]) -> str:
    settings = Settings(
        redis_url=redis_url,
        allow_webhook_hosts=ALLOW["AGENTQ_ALLOW_WEBHOOK_HOSTS"],
        allow_http_envs=ALLOW["AGENTQ_ALLOW_HTTP_ENVS"],
    )
    async with Client(redis_url, settings=settings) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=60)
    assert result.status == "succeeded", result.error
    return run_id


def cli_events(redis_url: str, run_id: str) -> list[dict[str, Any]]:
    shown = run_cli("events", run_id, redis_url=redis_url)
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


async def test_a_receiver_that_is_down_fails_the_webhook_not_the_run(
    redis_url: str, worker: WorkerProcess
) -> None:
    down = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    run_id = await submit_and_wait(redis_url, spec_with_hook(down, ["finish"]))
    failed = eventually(
        lambda: [e for e in cli_events(redis_url, run_id) if e["type"] == "webhook-failed"],
        "a webhook-failed event",
        60,
    )
    assert failed[0]["url"] == down
    assert failed[0]["event_type"] == "finish"
    assert failed[0]["attempts"] == 3


async def test_a_receiver_gets_the_selected_events_in_order_signed(
    redis_url: str, worker: WorkerProcess
) -> None:
    receiver = Receiver([(500, {}), (200, {})])  # the first attempt fails: retried
    try:
        selected = ["start-step", "tool-result", "finish-step", "finish"]
        run_id = await submit_and_wait(redis_url, spec_with_hook(receiver.url, selected))
        expected = [e for e in cli_events(redis_url, run_id) if e["type"] in selected]
        deliveries = receiver.wait_for(len(expected) + 1)
        bodies = []
        for headers, body in deliveries:
            lower = {k.lower(): v for k, v in headers.items()}
            assert verify(SECRET, lower["x-agentq-timestamp"], body, lower["x-agentq-signature"])
            bodies.append(json.loads(body))
        assert bodies[0] == bodies[1]  # the retried first delivery
        delivered = bodies[1:]
        assert [(e["seq"], e["type"]) for e in delivered] == [
            (e["seq"], e["type"]) for e in expected
        ]
        assert not [e for e in cli_events(redis_url, run_id) if e["type"] == "webhook-failed"]
    finally:
        receiver.close()


async def test_submit_refuses_hooks_the_deployment_does_not_allow(redis_url: str) -> None:
    from agentq.orchestrator.core.errors import SpecError

    async with Client(redis_url, settings=Settings(redis_url=redis_url)) as client:
        with pytest.raises(SpecError, match=r"webhooks\[0\]\.url: this deployment allows no"):
            await client.runs.submit(spec_with_hook("http://127.0.0.1:9/hook", ["finish"]))
    settings = Settings(redis_url=redis_url, allow_webhook_hosts="127.0.0.1")
    async with Client(redis_url, settings=settings) as client:
        with pytest.raises(SpecError, match=r"webhooks\[0\]\.secret_env: 'HOOK_SECRET'"):
            await client.runs.submit(spec_with_hook("http://127.0.0.1:9/hook", ["finish"]))
