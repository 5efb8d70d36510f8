"""The embedded mode: client and workers in one process on an in-memory Redis.

    async with embedded(tools=[add]) as client:
        result = await client.runs.wait(await client.runs.submit(spec))

Same jobs, same transitions, same events as the distributed mode; only the
Redis is in memory and the workers are tasks of this process. They serve every
queue their executors announce on (the sandbox's too), and an in-memory session
delivers its runs' webhooks before it ends: nobody else could.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
from agentq.workers.worker.webhooks import undelivered

log = logging.getLogger("agentq.embedded")

_WEBHOOK_POLL_S = 0.05


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
        queues=sorted({MODEL_QUEUE, TOOLS_QUEUE} | {e.queue for e in all_executors if e.queue}),
        settings=settings,
        env=env,
    )
    await runtime.start()
    client = Client(url, settings=settings)
    try:
        yield client
        if is_memory_url(url):
            await _finish_webhooks(client, (settings or Settings()).embedded_webhook_wait_s)
    finally:
        await client.aclose()
        await runtime.stop()
        tracing.flush_tracing()
        if redis_url is None and is_memory_url(url):
            forget_memory_server(url)


async def _finish_webhooks(client: Client, wait_s: float) -> None:
    """Let the workers deliver what is still due, for `wait_s` at most; then say in one
    line what is left, as the in-memory Redis and its events end with the session."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_all_delivered(client), wait_s)
    left = await undelivered(client.redis)
    if left:
        shown = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
        log.warning(
            "webhook deliveries left undelivered after %g s, dropped with the in-memory "
            "Redis: run %s (AGENTQ_EMBEDDED_WEBHOOK_WAIT_S waits longer)",
            wait_s,
            shown,
        )


async def _all_delivered(client: Client) -> None:
    # Polled: the deliveries settle in Redis, by whichever dispatcher holds each run.
    while True:
        if not await undelivered(client.redis):
            return
        await asyncio.sleep(_WEBHOOK_POLL_S)
