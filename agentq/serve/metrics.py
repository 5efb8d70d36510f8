"""Prometheus metrics of an `agentq serve` process, at `GET /metrics`.

One ASGI middleware sees every request: how long until its response started (an SSE
stream counts until its headers, not while it stays open), the SSE streams open, and
the submissions at each door by tenant and outcome; the remote tools' lease route
counts the calls it leased. The tenant is the one its key named (`deps.caller` leaves
it in the request's state); a request refused before its key was read has none. Runs
this process ended (a cancel) are counted by the same listener the workers use
(orchestrator/runs/ended.py).
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentq.orchestrator.runs.ended import EndedRuns
from agentq.serve.auth import METRICS_SCOPE
from agentq.serve.deps import caller

router = APIRouter(tags=["service"])

# The doors that start work, by (method, route template).
SUBMIT_DOORS = {
    ("POST", "/v1/runs"): "runs",
    ("POST", "/v1/batches"): "batches",
    ("POST", "/v1/tools/{name}/calls"): "tool_calls",
    ("POST", "/v1/agents/{name}/chat"): "chat",
}
_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_UNMATCHED = "unmatched"  # no route: one label, not one per path tried


def submit_outcome(status: int) -> str:
    """A submission's outcome as its submitter sees it, from the response's status."""
    if status < 400:
        return "accepted"
    return {
        400: "invalid",
        401: "unauthorized",
        403: "unauthorized",
        404: "not_found",
        409: "conflict",
        413: "too_large",
        422: "invalid",
        429: "rate_limited",
    }.get(status, "error")


class ServeMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.latency = Histogram(
            "agentq_http_request_duration_seconds",
            "From a request's arrival to its response's start.",
            ["method", "route", "status"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.streams = Gauge(
            "agentq_sse_streams_open", "Server-sent event streams open.", ["route"], registry=r
        )
        # Set from the process's OpenStreams (app.py): how close it is to its limits.
        self.held = Gauge(
            "agentq_streams_held",
            "Event streams, `?wait=` requests and lease long-polls this process holds open.",
            registry=r,
        )
        self.submits = Counter(
            "agentq_submits",
            "Submissions by door (runs, batches, tool_calls, chat), tenant and outcome.",
            ["door", "tenant", "outcome"],
            registry=r,
        )
        self.remote_leases = Counter(
            "agentq_remote_leases",
            "Tool calls remote services leased from this process, by queue.",
            ["queue"],
            registry=r,
        )
        self.run_ended = EndedRuns(r)


class MetricsMiddleware:
    """Times every HTTP request and counts its streams and submissions."""

    def __init__(self, app: ASGIApp, metrics: ServeMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an app that raised before answering
        stream: str | None = None

        async def sending(message: Message) -> None:
            nonlocal status, stream
            if message["type"] == "http.response.start":
                status = int(message["status"])
                route = _route(scope)
                self.metrics.latency.labels(scope["method"], route, str(status)).observe(
                    time.perf_counter() - started
                )
                if _is_event_stream(message):
                    stream = route
                    self.metrics.streams.labels(route).inc()
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if stream is not None:
                self.metrics.streams.labels(stream).dec()
            door = SUBMIT_DOORS.get((scope["method"], _route(scope)))
            if door is not None:
                tenant = str(scope.get("state", {}).get("tenant", ""))
                self.metrics.submits.labels(door, tenant, submit_outcome(status)).inc()


def _route(scope: Scope) -> str:
    """The matched route's template (`/v1/runs/{run_id}`), never the raw path: ids would
    make a series per run."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else _UNMATCHED


def _is_event_stream(message: Message) -> bool:
    for name, value in message.get("headers", ()):
        if name.lower() == b"content-type":
            return bytes(value).startswith(b"text/event-stream")
    return False


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """The Prometheus exposition of this process (every tenant's counts: a key needs the
    `metrics` scope, which no key has unless it names it)."""
    caller(request, METRICS_SCOPE)
    registry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
