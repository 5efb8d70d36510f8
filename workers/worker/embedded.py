"""The embedded mode: client and workers in one process on an in-memory Redis.

    async with embedded(tools=[add]) as client:
        result = await client.runs.wait(await client.runs.submit(spec))

Same jobs, same transitions, same events as the distributed mode; only the
Redis is in memory and the workers are tasks of this process.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence

from agentq.orchestrator import tracing
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.connect import forget_memory_server, is_memory_url
from agentq.workers.tools.base import ToolExecutor
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.tools.function_tools import FunctionTool
from agentq.workers.worker.runtime import WorkerRuntime


@contextlib.asynccontextmanager
async def embedded(
    *,
    tools: Sequence[FunctionTool] = (),
    executors: Sequence[ToolExecutor] = (),
    redis_url: str | None = None,
    settings: Settings | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """Start in-process workers and yield a client on the same Redis.

    Without `redis_url`, a fresh in-memory Redis is used and dropped on exit. Runs are
    traced like the distributed mode's: to the application's tracer provider if it set
    one, else to what the OTEL_* variables configure (flushed on exit).
    """
    tracing.setup_tracing("agentq")
    url = redis_url or f"memory://embedded-{uuid.uuid4().hex}"
    all_executors: list[ToolExecutor] = [FunctionExecutor(tools), *executors]
    runtime = WorkerRuntime(
        url,
        executors=all_executors,
        queues=sorted({MODEL_QUEUE, TOOLS_QUEUE}),
        settings=settings,
        env=env,
    )
    await runtime.start()
    client = Client(url, settings=settings)
    try:
        yield client
    finally:
        await client.aclose()
        await runtime.stop()
        tracing.flush_tracing()
        if redis_url is None and is_memory_url(url):
            forget_memory_server(url)
