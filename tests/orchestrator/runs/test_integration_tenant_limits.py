"""AGENTQ_TENANT_LIMITS over a real redis-server and real worker processes: a tenant at
its cap is refused while another tenant is not, and its counts return to 0 however its
runs end (success, failure, cancel, a worker SIGKILLed mid-run and its job re-delivered).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import TenantLimitError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.tenant_limits import MAX_IN_FLIGHT, MAX_QUEUED
from tests.support.infra import REPO, WorkerProcess, start_worker
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

LIMITS = {"acme": {"max_in_flight": 2}, "*": {"max_in_flight": 3, "max_queued": 2}}
SETTINGS = Settings.model_validate({"tenant_limits": LIMITS})


def holding(tmp: Path, name: str) -> dict[str, object]:
    """A run whose one call waits until `tmp/gate` exists."""
    args = {"started": str(tmp / f"{name}.started"), "gate": str(tmp / "gate")}
    return scripted(calls(("hold_until", args)), {"text": "done"}, tools=["hold_until"])


async def load(client: Client, tenant: str) -> tuple[int, int]:
    """The tenant's (in flight, queued), summed over the partitions."""
    counts = (await client.runs.store.tenant_load(tenant)).values()
    return sum(i for i, _ in counts), sum(q for _, q in counts)


async def settled(client: Client, tenant: str) -> None:
    await eventually_async(lambda: load(client, tenant), f"{tenant}'s counts at 0", until=_zero)


def _zero(counts: tuple[int, int]) -> bool:
    return counts == (0, 0)


async def test_a_tenant_at_its_cap_is_refused_while_another_is_not(
    redis_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    start_worker(redis_url, workers)
    async with Client(redis_url, settings=SETTINGS) as client:
        held = [
            await client.runs.submit(holding(tmp_path, f"a{i}"), tenant="acme") for i in range(2)
        ]
        with pytest.raises(TenantLimitError) as refused:
            await client.runs.submit(holding(tmp_path, "a2"), tenant="acme")
        assert refused.value.limit == MAX_IN_FLIGHT
        assert refused.value.retryable
        assert refused.value.retry_after_s > 0
        assert refused.value.message == (
            "tenant 'acme' is at its tenant_max_in_flight of 2 runs (AGENTQ_TENANT_LIMITS): "
            "try again in 1 s"
        )
        # acme filling its cap takes nothing from another tenant (the `*` entry).
        other = await client.runs.submit(holding(tmp_path, "b0"), tenant="beta")
        assert (await load(client, "acme"))[0] == 2
        (tmp_path / "gate").touch()
        for run_id in [*held, other]:
            assert (await client.runs.wait(run_id, 60)).status == "succeeded"
        await settled(client, "acme")
        await settled(client, "beta")
        # Room again: the refused run goes through now.
        again = await client.runs.submit(holding(tmp_path, "a3"), tenant="acme")
        assert (await client.runs.wait(again, 60)).status == "succeeded"
        await settled(client, "acme")


async def test_queued_runs_are_capped_until_a_worker_starts_them(
    redis_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """The only worker is paused: every run stays queued (its first step not begun)."""
    worker = start_worker(redis_url, workers)
    worker.pause()
    async with Client(redis_url, settings=SETTINGS) as client:
        spec = scripted({"text": "done"})
        queued = [await client.runs.submit(spec, tenant="q") for _ in range(2)]
        assert await load(client, "q") == (2, 2)
        with pytest.raises(TenantLimitError) as refused:
            await client.runs.submit(spec, tenant="q")
        assert refused.value.limit == MAX_QUEUED
        worker.resume()
        for run_id in queued:
            assert (await client.runs.wait(run_id, 60)).status == "succeeded"
        await settled(client, "q")


async def test_counts_return_to_zero_after_failure_cancel_and_a_killed_worker(
    redis_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    start_worker(redis_url, workers)
    async with Client(redis_url, settings=SETTINGS) as client:
        failing = scripted(
            calls(("fail", {"message": "no"})),
            {"text": "unreached"},
            tools=[{"type": "function", "name": "fail", "on_error": "fail-run"}],
        )
        failed = await client.runs.submit(failing, tenant="acme")
        assert (await client.runs.wait(failed, 60)).status == "failed"
        cancelled = await client.runs.submit(holding(tmp_path, "c"), tenant="acme")
        await eventually_async(lambda: (tmp_path / "c.started").exists(), "the call started")
        await client.runs.cancel(cancelled)
        assert (await client.runs.wait(cancelled, 60)).status == "cancelled"
        await settled(client, "acme")

        marker = tmp_path / "marker"
        sleeper = scripted(
            calls(("mark_and_sleep", {"marker": str(marker), "seconds": 2})),
            {"text": "done"},
            tools=["mark_and_sleep"],
        )
        killed = await client.runs.submit(sleeper, tenant="acme")
        await eventually_async(marker.exists, "the call started on the worker")
        workers[0].kill()
        start_worker(redis_url, workers)
        assert (await client.runs.wait(killed, 60)).status == "succeeded"
        assert len(marker.read_text().split()) == 2  # the call was re-delivered
        await settled(client, "acme")


async def test_a_batchs_lines_are_not_refused(
    redis_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """acme's cap is full of held runs; its batch's lines are counted, not refused."""
    start_worker(redis_url, workers)
    async with Client(redis_url, settings=SETTINGS) as client:
        held = [
            await client.runs.submit(holding(tmp_path, f"h{i}"), tenant="acme") for i in range(2)
        ]
        lines = [{"vars": {"n": str(i)}} for i in range(4)]
        template = scripted({"text": "done"}, prompt="{{n}}")
        batch = await client.batches.submit(lines, template=template, tenant="acme")
        info = await eventually_async(
            lambda: client.batches.status(batch.batch_id, tenant="acme"),
            "the batch ended",
            until=lambda b: b.status == "done",
        )
        assert info.counts.succeeded == 4
        (tmp_path / "gate").touch()
        for run_id in held:
            assert (await client.runs.wait(run_id, 60)).status == "succeeded"
        await settled(client, "acme")


def test_a_bad_setting_is_one_line_and_exit_2() -> None:
    env = {"AGENTQ_TENANT_LIMITS": '{"acme": {"max_in_flight": 0}}', "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "agentq", "worker", "--redis", "redis://127.0.0.1:1"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "agentq: invalid environment: AGENTQ_TENANT_LIMITS (acme.max_in_flight)=0: "
        "Input should be greater than or equal to 1"
    )
