"""The ASGI application: routes, errors, limits, CORS and the dashboard's files."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

from agentq.orchestrator.client import Client
from agentq.serve import (
    api_docs,
    batches,
    credentials,
    errors,
    meta,
    remote,
    run_actions,
    runs,
    schedules,
    threads,
    usage,
)
from agentq.serve import metrics as serve_metrics
from agentq.serve.config import ServeConfig
from agentq.serve.deps import look_up_token
from agentq.serve.door_spans import door_spans
from agentq.serve.feeds import CallFeeds, RunFeeds
from agentq.serve.limits import BodyLimit, OpenStreams
from agentq.serve.metrics import MetricsMiddleware, ServeMetrics
from agentq.serve.tokens import Signer, token_secret
from agentq.workers.tools.remote_service import RemoteService

STATIC = resources.files("agentq.serve") / "static"


def create_app(config: ServeConfig) -> FastAPI:
    # The console's own routes stand on the rest of serve, as the chat door does.
    from agentq.serve.console import concurrency, depths

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings = config.settings.model_copy(
            update={
                "redis_max_connections": config.limits.redis_connections,
                "redis_pool_wait_s": config.limits.redis_wait_s,
            }
        )
        client = Client(config.redis_url, settings=settings)
        client.runs.on_end(metrics.run_ended)
        app.state.client = client
        app.state.feeds = RunFeeds(client)
        app.state.signer = Signer((await token_secret(client, config)).encode())
        app.state.call_feeds = CallFeeds(client)
        app.state.remote = RemoteService(client, config.remote_tools)
        await app.state.remote.start()
        app.state.depths = depths.DepthSampler(client.fleet, config.limits.depth_sample_s)
        try:
            async with contextlib.AsyncExitStack() as stack:
                await stack.enter_async_context(app.state.depths.running())
                if gateway is not None:
                    await stack.enter_async_context(
                        gateway.running(client.calls, app.state.call_feeds)
                    )
                yield
        finally:
            await app.state.remote.aclose()
            await app.state.feeds.aclose()
            await app.state.call_feeds.aclose()
            await client.aclose()

    app = FastAPI(
        # Before any door: whether the token a request carries is live (deps.py).
        dependencies=[Depends(look_up_token)],
        title="agentq",
        summary="LLM agent loops as durable distributed jobs on Redis",
        version="0.1.0",
        lifespan=lifespan,
        # FastAPI's own OpenTelemetry SERVER spans, on the provider `agentq serve` set up
        # (server.py): the doors that act, not the reads (door_spans.py).
        telemetry=door_spans(),
        # FastAPI's /docs and /redoc load their assets from a CDN: /docs is ours
        # (api_docs.py), served from the wheel.
        docs_url=None,
        redoc_url=None,
    )
    app.state.config = config
    metrics = app.state.metrics = ServeMetrics()
    streams = app.state.streams = OpenStreams(
        config.limits.max_streams, config.limits.streams_per_tenant
    )
    metrics.held.set_function(streams.held_total)
    gateway = None
    if config.mcp:
        from starlette.routing import Route

        from agentq.serve.mcp_gateway import MCP_PATH, McpGateway

        gateway = McpGateway(config.keys, host=config.host)
        app.router.routes.append(Route(MCP_PATH, endpoint=gateway))
    errors.install(app)
    app.include_router(meta.router)
    app.include_router(depths.router)
    app.include_router(concurrency.router)
    app.include_router(api_docs.router)
    app.include_router(serve_metrics.router)
    app.include_router(credentials.router)
    app.include_router(runs.router)
    app.include_router(run_actions.router)
    app.include_router(usage.router)
    app.include_router(batches.router)
    app.include_router(threads.router)
    app.include_router(schedules.router)
    app.include_router(remote.router)
    from agentq.serve.chat import door as chat

    app.include_router(chat.router)
    from agentq.serve import tool_calls

    app.include_router(tool_calls.router)
    app.add_middleware(
        BodyLimit,
        max_bytes=config.limits.max_body_bytes,
        # A batch's JSONL is spooled to disk, not held in memory: it may be large.
        larger={batches.router.prefix: ("max_batch_bytes", config.limits.max_batch_bytes)},
    )
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["authorization", "content-type", "idempotency-key", "last-event-id"],
            expose_headers=["x-vercel-ai-ui-message-stream", "retry-after"],
        )
    # Outermost: it times and counts what every other layer answered (a 413, a 429).
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    static_dir = str(STATIC)
    app.mount("/static", StaticFiles(directory=static_dir), name="static")

    @app.get("/", include_in_schema=False, response_class=HTMLResponse)
    async def dashboard() -> FileResponse:
        return FileResponse(f"{static_dir}/index.html", media_type="text/html")

    return app
