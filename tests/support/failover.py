"""A primary SIGKILLed halfway through the submits of many two-step runs (behind
Sentinel, or one shard of a Cluster): submits cut by the failover are retried, and every
accepted run is judged once the promoted replica serves."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.redis.faults import is_transient
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually


def spec(prefix: str, i: int) -> dict[str, object]:
    """Run i: one short call, then a text naming i (its id makes a retried submit
    idempotent)."""
    return scripted(
        calls(("nap", {"seconds": 0.05, "tag": f"r{i}"})),
        {"text": f"done {i}"},
        tools=["nap"],
        id=f"{prefix}-{i}",
    )


async def submit_until_accepted(client: Client, run_spec: dict[str, object]) -> str:
    """A submit cut by the failover is retried until Redis accepts it."""
    while True:
        try:
            return await client.runs.submit(run_spec)
        except InfrastructureError as exc:
            if not is_transient(exc):
                raise
            await asyncio.sleep(0.1)


@dataclass
class Failover:
    """When the primary died and when its replica took over."""

    killed_at: float = 0.0
    promoted_at: float = 0.0
    promoted: threading.Event = field(default_factory=threading.Event)

    def kill(self, kill: Callable[[], None], is_promoted: Callable[[], bool]) -> None:
        """Kill the primary now and watch, from a thread, for the promotion."""
        kill()
        self.killed_at = time.monotonic()

        def watch() -> None:
            eventually(is_promoted, "the replica to be promoted", 60, 0.02)
            self.promoted_at = time.monotonic()
            self.promoted.set()

        threading.Thread(target=watch, daemon=True).start()

    def promotion_s(self) -> float:
        return round(self.promoted_at - self.killed_at, 2)


@dataclass
class Verdict:
    wrong: list[str]  # the runs that did not succeed with their own text
    duplicate_results: int  # results recorded more than once for one call
    last_done: float  # when the last run was seen ended (monotonic)


async def judge(client: Client, ids: list[str], timeout_s: float) -> Verdict:
    """Wait for every run (run i must say `done i`), then count the wrong ones and any
    call whose result was recorded twice."""
    results = await asyncio.gather(
        *(client.runs.wait(run_id, timeout_s=timeout_s) for run_id in ids)
    )
    last_done = time.monotonic()
    duplicates = 0
    wrong = []
    for i, (run_id, result) in enumerate(zip(ids, results, strict=True)):
        events = [e async for e in client.runs.events(run_id)]
        per_call = Counter(e.tool_call_id for e in events if e.type == "tool-result")
        duplicates += sum(n - 1 for n in per_call.values())
        if result.status != "succeeded" or result.text != f"done {i}" or not per_call:
            wrong.append(f"{run_id}: {result.status} {result.text!r} {result.error}")
    return Verdict(wrong, duplicates, last_done)
