"""Prometheus metrics of a worker process (`agentq worker --metrics-port P`).

Counters and histograms are fed by six hooks: `instrument` wraps the job functions
(started, in flight, ended by outcome as users mean it, redelivered, queue wait,
execution time), `observe_run_started` counts the runs whose first step began here,
`run_ended` hears each run this process ended (by tenant, status and failure kind),
`observe_model_call` wraps a model call (requests, tokens), `observe_cost` counts a
recorded step's cost (by tenant, provider and model), and `TimedRateLimiter`
times the fleet's shared rate limit. Gauges are read when Prometheus scrapes:
queue depth and oldest job age from Redis (on the worker's own event loop, so
the scrape thread never shares a connection), the process's job slots per queue
(counting them counts the workers), whether it is riding out a Redis outage,
sandbox containers and MCP sessions from the executors. Each `WorkerMetrics` has a
registry of its own, so several runtimes in one process (tests, the embedded mode)
never collide.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from arq import Retry
from arq.typing import WorkerCoroutine
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.asyncio import Redis

from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.fleet.queues import queue_stats
from agentq.orchestrator.runs.ended import EndedRuns
from agentq.workers.models.ratelimit import LimitKey, RateLimiter
from agentq.workers.queue.liveness import OUTAGE
from agentq.workers.queue.outcome import JobOutcome, reporting, returned

if TYPE_CHECKING:
    from agentq.workers.models.base import ModelResponse

log = logging.getLogger("agentq.worker")

# Queue waits and job times run from milliseconds (a hop) to many minutes (a long tool).
_TIME_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
_SCRAPE_TIMEOUT_S = 2.0

Job = Callable[[dict[str, Any], dict[str, Any]], Coroutine[Any, Any, None]]


class WorkerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        job = ["queue", "kind"]
        model = ["provider", "model"]
        r = self.registry
        self.jobs_started = Counter("agentq_jobs_started", "Jobs started.", job, registry=r)
        self.jobs_ended = Counter(
            "agentq_jobs_ended",
            "Jobs by how they ended (succeeded, tool_error, failed, cancelled, released).",
            [*job, "outcome"],
            registry=r,
        )
        self.jobs_in_flight = Gauge(
            "agentq_jobs_in_flight", "Jobs running in this process.", ["queue"], registry=r
        )
        self.runs_started = Counter(
            "agentq_runs_started",
            "Runs whose first model step began in this process, by tenant (a fork, which "
            "continues from a later step, is not counted).",
            ["tenant"],
            registry=r,
        )
        self.jobs_redelivered = Counter(
            "agentq_jobs_redelivered",
            "Deliveries after the first (a worker died or gave the job back).",
            job,
            registry=r,
        )
        self.queue_wait = Histogram(
            "agentq_job_queue_wait_seconds",
            "From enqueue to the first start.",
            job,
            buckets=_TIME_BUCKETS_S,
            registry=r,
        )
        self.execution = Histogram(
            "agentq_job_execution_seconds",
            "Time in the job function.",
            job,
            buckets=_TIME_BUCKETS_S,
            registry=r,
        )
        self.model_requests = Counter(
            "agentq_model_requests",
            "Model calls by outcome (ok, error).",
            [*model, "outcome"],
            registry=r,
        )
        self.model_tokens = Counter(
            "agentq_model_tokens",
            "Tokens by direction (input, output).",
            [*model, "direction"],
            registry=r,
        )
        self.cost = Counter(
            "agentq_cost_usd",
            "What model steps recorded in this process cost, USD at the price table (steps "
            "without a price count in agentq_unpriced_steps instead).",
            ["tenant", *model],
            registry=r,
        )
        self.unpriced = Counter(
            "agentq_unpriced_steps",
            "Model steps whose model has no price (their tokens count, their cost is unknown).",
            ["tenant", *model],
            registry=r,
        )
        self.run_ended = EndedRuns(r)
        self.rate_limit_wait = Histogram(
            "agentq_rate_limit_wait_seconds",
            "Time a model call waited for the fleet's shared rate limit.",
            model,
            buckets=(0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )

    # -- the hooks ----------------------------------------------------------

    async def observe_model_call(
        self, provider: str, model: str, call: Awaitable[ModelResponse]
    ) -> ModelResponse:
        """Await a model call, counting it (ok or error) and its tokens."""
        try:
            response = await call
        except BaseException:
            self.model_requests.labels(provider, model, "error").inc()
            raise
        self.model_requests.labels(provider, model, "ok").inc()
        self.model_tokens.labels(provider, model, "input").inc(response.usage.input_tokens)
        self.model_tokens.labels(provider, model, "output").inc(response.usage.output_tokens)
        return response

    def observe_cost(self, tenant: str, provider: str, model: str, usage: Usage) -> None:
        """Count a recorded step's cost (once: only the commit that recorded it calls this)."""
        if usage.cost_usd is None:
            self.unpriced.labels(tenant, provider, model).inc()
        else:
            self.cost.labels(tenant, provider, model).inc(usage.cost_usd)

    def observe_run_started(self, tenant: str) -> None:
        self.runs_started.labels(tenant).inc()

    def job_started(self, queue: str, kind: str, job_try: int, enqueued_at: float | None) -> None:
        self.jobs_started.labels(queue, kind).inc()
        self.jobs_in_flight.labels(queue).inc()
        if job_try > 1:
            self.jobs_redelivered.labels(queue, kind).inc()
        elif enqueued_at is not None:
            self.queue_wait.labels(queue, kind).observe(max(0.0, time.time() - enqueued_at))

    def job_ended(self, queue: str, kind: str, elapsed_s: float, outcome: JobOutcome) -> None:
        self.jobs_ended.labels(queue, kind, outcome.value).inc()
        self.jobs_in_flight.labels(queue).dec()
        self.execution.labels(queue, kind).observe(elapsed_s)

    def watch(self, runtime: Watched, loop: asyncio.AbstractEventLoop) -> None:
        """Read `runtime`'s queues and executors at every scrape."""
        self.registry.register(_RuntimeCollector(runtime, loop))

    def serve(self, port: int, host: str = "0.0.0.0") -> Callable[[], None]:
        """Serve /metrics from a thread; returns what stops it."""
        server, thread = start_http_server(port, addr=host, registry=self.registry)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(5)

        return stop


def instrument(job: Job) -> WorkerCoroutine:
    """Count and time a job function, when its worker keeps metrics (ctx["metrics"])."""
    kind = job.__name__

    @functools.wraps(job)
    async def observed(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
        metrics: WorkerMetrics | None = ctx.get("metrics")
        if metrics is None:
            return await job(ctx, payload)
        queue = str(ctx.get("queue", ""))
        metrics.job_started(queue, kind, int(ctx.get("job_try", 1)), payload.get("enqueued_at"))
        started = time.perf_counter()
        outcome = JobOutcome.FAILED
        with reporting() as reported:
            try:
                await job(ctx, payload)
                outcome = returned(reported)
            except Retry:
                outcome = JobOutcome.RELEASED
                raise
            except asyncio.CancelledError:
                outcome = JobOutcome.CANCELLED
                raise
            finally:
                metrics.job_ended(queue, kind, time.perf_counter() - started, outcome)

    return observed


class TimedRateLimiter(RateLimiter):
    """The shared rate limiter, timing how long each call waited for it."""

    def __init__(self, *args: Any, metrics: WorkerMetrics | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.metrics = metrics

    async def acquire(self, key: LimitKey, tokens: int, deadline: float | None = None) -> str:
        if self.metrics is None:
            return await super().acquire(key, tokens, deadline)
        started = time.perf_counter()
        try:
            return await super().acquire(key, tokens, deadline)
        finally:
            waited = time.perf_counter() - started
            self.metrics.rate_limit_wait.labels(key.provider, key.model).observe(waited)


# -- read at scrape time ------------------------------------------------------


class Watched(Protocol):
    """What the collector reads of a WorkerRuntime."""

    redis: Redis | None
    queues: list[str]
    executors: list[Any]
    settings: Settings


class _RuntimeCollector(Collector):
    def __init__(self, runtime: Watched, loop: asyncio.AbstractEventLoop) -> None:
        self.runtime = runtime
        self.loop = loop

    def collect(self) -> Iterator[Any]:
        yield from self._process()
        yield from self._queues()
        for executor in self.runtime.executors:
            yield from _sandbox_metrics(executor)
            yield from _mcp_metrics(executor)

    def _process(self) -> Iterator[Any]:
        slots = GaugeMetricFamily(
            "agentq_worker_slots",
            "Jobs this process runs at once per queue (one series per worker and queue: "
            "count them to count the workers).",
            labels=["queue"],
        )
        for queue in self.runtime.queues:
            slots.add_metric([queue], self.runtime.settings.concurrency)
        down = GaugeMetricFamily(
            "agentq_redis_outage", "1 while this process rides out a Redis outage, else 0."
        )
        down.add_metric([], 0 if OUTAGE.since is None else 1)
        outages = CounterMetricFamily(
            "agentq_redis_outages", "Redis outages this process rode out (or is riding out)."
        )
        outages.add_metric([], OUTAGE.started)
        yield from (slots, down, outages)

    def _queues(self) -> Iterator[Any]:
        redis = self.runtime.redis
        if redis is None:
            return
        try:
            future = asyncio.run_coroutine_threadsafe(
                queue_stats(redis, self.runtime.queues), self.loop
            )
            stats = future.result(_SCRAPE_TIMEOUT_S)
        except Exception as exc:  # a scrape during an outage shows no queue gauges
            log.warning("metrics: cannot read queue depths: %s", exc)
            return
        depth = GaugeMetricFamily(
            "agentq_queue_depth",
            "Jobs ready or running (timers not yet due and held jobs do not count): what "
            "pools scale on.",
            labels=["queue"],
        )
        ready = GaugeMetricFamily(
            "agentq_queue_ready", "Jobs due now and not held by their key.", labels=["queue"]
        )
        held = GaugeMetricFamily(
            "agentq_queue_held",
            "Jobs due but held while their concurrency key is at its max (not in the depth).",
            labels=["queue"],
        )
        age = GaugeMetricFamily(
            "agentq_queue_oldest_job_age_seconds",
            "How long the oldest due job has been due.",
            labels=["queue"],
        )
        for name, s in stats.items():
            depth.add_metric([name], s.depth)
            ready.add_metric([name], s.ready)
            held.add_metric([name], s.held)
            age.add_metric([name], s.oldest_age_s)
        yield from (depth, ready, held, age)


def _sandbox_metrics(executor: Any) -> Iterator[Any]:
    manager = getattr(executor, "manager", None)
    stats = getattr(manager, "stats", None)
    if manager is None or stats is None:
        return
    pools: Sequence[Any] = list(getattr(manager, "_pools", {}).values())
    size = GaugeMetricFamily(
        "agentq_sandbox_containers", "Sandbox containers by state.", labels=["state"]
    )
    size.add_metric(["idle"], sum(int(getattr(p, "idle", 0)) for p in pools))
    capacity = getattr(manager, "_capacity", None)
    size.add_metric(["in_use"], int(getattr(capacity, "used", 0)))
    starts = CounterMetricFamily(
        "agentq_sandbox_starts", "Calls by how their container started.", labels=["start"]
    )
    starts.add_metric(["warm"], stats.warm_starts)
    starts.add_metric(["cold"], stats.cold_starts)
    yield from (size, starts)


def _mcp_metrics(executor: Any) -> Iterator[Any]:
    servers: dict[str, Any] | None = getattr(executor, "servers", None)
    if getattr(executor, "kind", None) != "mcp" or servers is None:
        return
    up = GaugeMetricFamily(
        "agentq_mcp_sessions", "Live MCP sessions per server (0 or 1).", labels=["server"]
    )
    opened = CounterMetricFamily(
        "agentq_mcp_sessions_opened", "MCP sessions opened per server.", labels=["server"]
    )
    for name, connection in servers.items():
        up.add_metric([name], 1 if connection.connected else 0)
        opened.add_metric([name], int(getattr(connection, "connects", 0)))
    yield from (up, opened)
