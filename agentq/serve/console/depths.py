"""Queue depths over time, for the console's chart: `agentq serve` samples every queue's
depth (ready + running, as `GET /v1/queues` reads it) each `AGENTQ_SERVE_DEPTH_SAMPLE_S`
and keeps the last `KEEP` samples; `GET /v1/queues/history` answers them.

Kept in the process, not in Redis: the chart is a glance at the last hour or so, and the
long history is Prometheus's (`agentq_queue_depth` on `/metrics`). Each replica answers
the samples it took since it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from pydantic import BaseModel

from agentq.orchestrator.fleet.api import Fleet
from agentq.serve.auth import ADMIN
from agentq.serve.deps import caller

KEEP = 720  # an hour at the default 5 s

log = logging.getLogger(__name__)
router = APIRouter(tags=["service"])


class DepthSample(BaseModel):
    at: float  # Unix seconds
    queues: dict[str, int]  # queue -> depth


class DepthHistory(BaseModel):
    interval_s: float
    samples: list[DepthSample]  # oldest first


class DepthSampler:
    def __init__(self, fleet: Fleet, interval_s: float) -> None:
        self.fleet = fleet
        self.interval_s = interval_s
        self.samples: deque[DepthSample] = deque(maxlen=KEEP)

    async def sample(self) -> None:
        stats = await self.fleet.queues()
        self.samples.append(
            DepthSample(at=time.time(), queues={q: s.depth for q, s in stats.items()})
        )

    async def run(self) -> None:
        while True:
            try:
                await self.sample()
            except Exception:  # a Redis outage leaves a gap in the chart, not a dead sampler
                log.warning("sampling queue depths failed", exc_info=True)
            await asyncio.sleep(self.interval_s)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        task = asyncio.create_task(self.run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def history(self) -> DepthHistory:
        return DepthHistory(interval_s=self.interval_s, samples=list(self.samples))


@router.get("/v1/queues/history", response_model=DepthHistory)
async def history(request: Request) -> DepthHistory:
    """Each queue's depth (ready + running) as this process sampled it, oldest first,
    every `interval_s`, for the last hour or so. Scope `admin`, as `/v1/queues`."""
    caller(request, ADMIN)
    sampler: DepthSampler = request.app.state.depths
    return sampler.history()
