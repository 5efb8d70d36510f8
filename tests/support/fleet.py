"""A batch of runs through a fleet of worker processes, and what its events say.

Each run has three steps: two parallel `nap` calls, two more, then text. Every
output is predictable from the run's index, so a wrong or swapped result shows.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.events import Event
from agentq.orchestrator.runs.result import RunResult
from tests.support.infra import TOOLS, RedisServer, WorkerProcess, wait_ready

NAP_S = 0.3


def batch_spec(i: int, nap_s: float = NAP_S) -> dict[str, Any]:
    def calls(step: int) -> list[dict[str, Any]]:
        return [
            {"name": "nap", "input": {"seconds": nap_s, "tag": f"r{i}s{step}c{c}"}}
            for c in range(2)
        ]

    return {
        "model": {
            "provider": "scripted",
            "script": [{"tool_calls": calls(0)}, {"tool_calls": calls(1)}, {"text": f"done {i}"}],
        },
        "prompt": "go",
        "tools": [{"type": "function", "name": "nap"}],
        "tool_timeout_s": 60,
    }


def expected_outputs(i: int) -> list[list[str]]:
    return [[f"r{i}s{s}c{c}" for c in range(2)] for s in range(2)]


@dataclass
class Figures:
    runs: int = 0
    succeeded: int = 0
    wrong_results: int = 0
    duplicate_results: int = 0
    duplicate_steps: int = 0
    event_gaps: int = 0
    worker_died_reports: int = 0
    counted_deliveries: int = 0  # tool-running or start-step events with attempt > 1
    failures: list[str] = field(default_factory=list)

    def line(self, name: str, **extra: Any) -> str:
        fields = {k: v for k, v in self.__dict__.items() if k != "failures"}
        fields.update(extra)
        return f"FAULTS {name}: " + " ".join(f"{k}={v}" for k, v in fields.items())


def judge(i: int, result: RunResult, events: list[Event], figures: Figures) -> None:
    figures.runs += 1
    if result.status == "succeeded":
        figures.succeeded += 1
    else:
        figures.failures.append(f"{result.id}: {result.status} {result.error}")
    outputs = [[r.output for r in step.tool_results] for step in result.steps[:2]]
    if result.status == "succeeded" and (
        outputs != expected_outputs(i) or result.text != f"done {i}"
    ):
        figures.wrong_results += 1
        figures.failures.append(f"{result.id}: wrong outputs {outputs} {result.text!r}")
    seqs = [e.seq for e in events]
    if seqs != list(range(1, len(seqs) + 1)):
        figures.event_gaps += 1
    results = Counter(e.tool_call_id for e in events if e.type in ("tool-result", "tool-error"))
    figures.duplicate_results += sum(n - 1 for n in results.values() if n > 1)
    finished = Counter(e.step for e in events if e.type == "finish-step")
    figures.duplicate_steps += sum(n - 1 for n in finished.values() if n > 1)
    for step in result.steps:
        for r in step.tool_results:
            if r.is_error and "died" in str(r.output):
                figures.worker_died_reports += 1
    figures.counted_deliveries += sum(
        1
        for e in events
        if e.type in ("tool-running", "start-step") and e.model_dump().get("attempt", 1) > 1
    )


async def run_batch(
    url: str,
    n: int,
    *,
    timeout_s: float = 300,
    nap_s: float = NAP_S,
    submitted: threading.Event | None = None,
) -> tuple[Figures, list[str]]:
    """Submit n runs, wait for all of them, judge them. Returns the figures and run ids.

    `submitted` is set once every run is created: a fault that must not meet the
    submissions (a submit, unlike a wait, does not retry through an outage) starts on
    it, not after a guess at how long n submits take on a loaded machine."""
    figures = Figures()
    async with Client(url) as client:
        ids = [await client.runs.submit(batch_spec(i, nap_s)) for i in range(n)]
        if submitted is not None:
            submitted.set()
        results = await asyncio.gather(*(client.runs.wait(r, timeout_s=timeout_s) for r in ids))
        for i, (run_id, result) in enumerate(zip(ids, results, strict=True)):
            events = [e async for e in client.runs.events(run_id)]
            judge(i, result, events, figures)
    return figures, ids


def start_workers(
    url: str, n: int, *extra: str, env: dict[str, str] | None = None
) -> list[WorkerProcess]:
    workers = [WorkerProcess(url, "--tools", TOOLS, *extra, env=env) for _ in range(n)]
    wait_ready(*workers)
    return workers


def median(values: list[float]) -> float:
    return round(statistics.median(values), 2) if values else float("nan")


def aof_redis() -> RedisServer:
    return RedisServer(appendonly=True)


def wall() -> float:
    return time.monotonic()
