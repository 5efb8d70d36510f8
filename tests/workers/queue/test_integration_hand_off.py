"""A job's end hands the job its transition enqueues to its worker's claim loop that
waits on that job's queue (workers/queue/arq_worker.py: `_HandOff`), on a real
redis-server: the transition pushes no wake-up token for it and the claim rides in the
job's last round trip. Held here: no token and no BLPOP per hop, the worker's
concurrency still bounds its jobs (the waiting claim keeps the hand-off's slot back), and
a hand-off whose claim never comes leaves its job to the fallback poll, never stranded.
Nothing here is timed: a fallback poll far past the test's wait (3600 s) shows that a
run moved by hand-offs alone; a short one is what picks a lost hand-off's job up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.machine import scripts
from agentq.workers.queue import arq_worker, claims
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration

_running = 0
_most = 0


@tool
async def counted() -> str:
    """Counts how many of its calls run at once here."""
    global _running, _most
    _running += 1
    _most = max(_most, _running)
    try:
        await asyncio.sleep(0.02)  # long enough for the others to start, if they may
    finally:
        _running -= 1
    return "ok"


async def _calls_of(url: str, command: str) -> int:
    """How many times Redis ran a command, inside scripts included (INFO commandstats)."""
    async with Redis.from_url(url) as redis:
        stats: dict[str, Any] = await redis.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def _take_calls(entries: list[dict[str, Any]]) -> int:
    """How many of SLOWLOG's entries are TAKE calls (the claim's script, riding or not)."""
    takes = {scripts.sha(claims.TAKE), scripts.sha(claims.TAKE_RIDING)}
    called = 0
    for entry in entries:
        words = [w.decode() if isinstance(w, bytes) else str(w) for w in entry["command"].split()]
        if len(words) > 1 and words[0].upper() == "EVALSHA" and words[1] in takes:
            called += 1
    return called


async def _run(url: str, spec: dict[str, Any], settings: Settings) -> str:
    runtime = WorkerRuntime(url, executors=[FunctionExecutor([counted])], settings=settings)
    await runtime.start()
    try:
        async with Client(url) as client:
            run_id = await client.runs.submit(spec)
            result = await client.runs.wait(run_id, timeout_s=60)
            return result.status
    finally:
        await runtime.stop()


async def test_a_run_moves_by_hand_offs_with_no_wake_up_tokens(
    redis_url: str,
) -> None:
    steps = 6
    spec = scripted(
        *[calls(("counted", {})) for _ in range(steps)],
        {"text": "done"},
        tools=["counted"],
        max_steps=steps + 1,
    )
    pushed, popped = await _calls_of(redis_url, "lpush"), await _calls_of(redis_url, "blpop")
    # No fallback poll within the test: every hop is a token (before) or a hand-off.
    assert await _run(redis_url, spec, Settings(idle_poll_s=3600)) == "succeeded"
    # The create's token wakes the first claim; each of the 13 hops after it (a model
    # step's job to the tools queue, a result's to the model queue) pushed one before.
    # On this fresh Redis the first commit_step and record_result find their scripts
    # missing (NOSCRIPT): the hand-off's claim ran before the transition, sent again
    # alone, so the worker pushes the token the transition left out (two).
    assert await _calls_of(redis_url, "lpush") - pushed <= 1 + 2
    # Each loop's first wait, and one per token.
    assert await _calls_of(redis_url, "blpop") - popped <= 2 + 3


async def test_a_hand_off_takes_no_slot_past_the_workers_concurrency(redis_url: str) -> None:
    global _most
    _most = 0
    spec = scripted(
        calls(*[("counted", {}) for _ in range(6)]),
        calls(("counted", {})),
        {"text": "done"},
        tools=["counted"],
    )
    # Two slots: the tools loop waits with one, keeping the other for a hand-off.
    assert await _run(redis_url, spec, Settings(concurrency=2, idle_poll_s=3600)) == "succeeded"
    assert 1 <= _most <= 2


async def test_a_hand_off_whose_claim_never_comes_leaves_its_job_to_the_fallback_poll(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost: list[str] = []

    def queue(self: arq_worker._HandOff, pipe: Any) -> None:
        if self.sleeper is not None:
            lost.append(self.sleeper.wake_key)
            pipe.ping()  # the claim's place in the pipeline, claiming nothing

    async def settle(self: arq_worker._HandOff, reply: Any, acked: bool) -> None:
        return None

    monkeypatch.setattr(arq_worker._HandOff, "queue", queue)
    # (the job's end goes in its own call, not in the claim that never comes)
    monkeypatch.setattr(arq_worker._HandOff, "carries_end", lambda self, ender: False)
    monkeypatch.setattr(arq_worker._HandOff, "settle", settle)
    spec = scripted(
        calls(("counted", {})), calls(("counted", {})), {"text": "done"}, tools=["counted"]
    )
    # The transitions pushed no token for the jobs handed off: only the poll finds them.
    assert await _run(redis_url, spec, Settings(idle_poll_s=0.2)) == "succeeded"
    assert lost


async def test_a_jobs_end_rides_in_the_claim_that_hands_its_next_job_on(redis_url: str) -> None:
    # Each hop's end and the claim of the job it hands on go in one TAKE call, not two.
    steps = 6
    spec = scripted(
        *[calls(("counted", {})) for _ in range(steps)],
        {"text": "done"},
        tools=["counted"],
        max_steps=steps + 1,
    )
    async with Redis.from_url(redis_url) as redis:
        await redis.config_set("slowlog-log-slower-than", 0)
        await redis.config_set("slowlog-max-len", 100_000)
        await redis.slowlog_reset()
        assert await _run(redis_url, spec, Settings(idle_poll_s=3600)) == "succeeded"
        entries = await redis.slowlog_get(-1)
        await redis.config_set("slowlog-log-slower-than", 10_000)
    called = _take_calls(entries)
    # 13 jobs, 12 hops: one call per job's end (with the claim of the job it hands on),
    # and a few beside them (each loop's first wait; on this fresh Redis the first
    # commit_step and record_result find their scripts missing and push a token, whose
    # claim goes alone). Two calls a hop would be 24 or more (33 before).
    assert called <= 13 + 8


async def test_a_jobs_end_that_claims_nothing_goes_inside_its_transition(redis_url: str) -> None:
    """Runs at once on one worker: a job that ends while its claim loop waits (the
    loop takes what becomes ready) claims nothing, and its end goes inside its last
    transition's script (claims.ending), with no TAKE call of its own: fewer TAKE calls
    than jobs (each end was one, or shared one with a hand-off's claim, before)."""
    runs = 10
    spec = scripted(calls(("counted", {}), ("counted", {})), {"text": "done"}, tools=["counted"])
    runtime = WorkerRuntime(
        redis_url, executors=[FunctionExecutor([counted])], settings=Settings(idle_poll_s=3600)
    )
    async with Redis.from_url(redis_url) as redis:
        await redis.config_set("slowlog-log-slower-than", 0)
        await redis.config_set("slowlog-max-len", 100_000)
        await runtime.start()
        try:
            async with Client(redis_url) as client:
                ids = await asyncio.gather(*[client.runs.submit(spec) for _ in range(runs)])
                await redis.slowlog_reset()  # (the submits' and the worker's start)
                for run_id in ids:
                    assert (await client.runs.wait(run_id, timeout_s=60)).status == "succeeded"
        finally:
            await runtime.stop()
        entries = await redis.slowlog_get(-1)
        await redis.config_set("slowlog-log-slower-than", 10_000)
    called = _take_calls(entries)
    assert called < 4 * runs  # 4 jobs a run: two model steps and two calls
