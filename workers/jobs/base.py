"""What every job of a run shares: the worker's dependencies and the guard around a job.

Each job reads what it needs from the run store, does its work, and applies one
atomic transition. A re-delivered job finds its transition applied (or the run
closed) and stops; an unexpected failure fails the run rather than leaving it stuck.
A transient Redis failure (down, stalled, loading, out of memory) never fails a run:
the job is released and runs again, uncounted.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NoReturn

from arq import Retry

from agentq.orchestrator import tracing
from agentq.orchestrator.budgets.ledger import BudgetLedger
from agentq.orchestrator.calls.store import CallStore
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import JobEnvelope, JobKind
from agentq.orchestrator.core.run_ids import ParentLink
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.tool_output import DEFAULT_MAX_OUTPUT_BYTES
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.orchestrator.runs.ended import run_ended
from agentq.orchestrator.runs.state import FailureKind, MetaField, Outcome, Reply, RunFailure
from agentq.orchestrator.runs.store import RunStore
from agentq.workers.models.batch.store import ProviderBatchStore
from agentq.workers.models.model_client import ModelClient
from agentq.workers.queue.liveness import OUTAGE
from agentq.workers.queue.outcome import JobOutcome, report
from agentq.workers.steps.history_cache import HistoryCache
from agentq.workers.steps.phases import ModelCallMetrics
from agentq.workers.tools.base import ToolExecutor

log = logging.getLogger("agentq.worker")

# A job that meets a Redis outage is released and tried again this much later; the
# process's one outage log (OUTAGE) says so once per outage, not once per job.
REDIS_RETRY_S = 1.0
# The ctx entry holding the worker's Client (client_of).
_CLIENT = "agentq_client"


def client_of(ctx: dict[str, Any]) -> Client:
    """One Client per worker on the worker's own connection and settings: the jobs that
    drive the fleet's own objects through it (batch admission, schedule ticks) share it."""
    client: Client | None = ctx.get(_CLIENT)
    if client is None:
        deps = ctx["agentq"]
        settings = getattr(deps, "settings", None) or Settings()
        client = Client(redis=deps.store.redis, settings=settings)
        ctx[_CLIENT] = client
    return client


@dataclass
class WorkerDeps:
    store: RunStore
    models: ModelClient
    executors: dict[str, ToolExecutor] = field(default_factory=dict)
    max_deliveries: int = 5
    metrics: ModelCallMetrics | None = None
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    settings: Settings = field(default_factory=Settings)
    # Provider batch records (None: `"batch": true` steps call the model directly).
    batches: ProviderBatchStore | None = None
    # The histories this worker read, for the runs' next steps (None: sized from settings).
    history: HistoryCache | None = None

    def __post_init__(self) -> None:
        if self.history is None:
            self.history = HistoryCache(self.settings.history_cache_bytes)

    @property
    def histories(self) -> HistoryCache:
        assert self.history is not None
        return self.history

    @cached_property
    def budgets(self) -> BudgetLedger:
        """The shared budgets a step may be held by, on the run store's connection."""
        return BudgetLedger(self.store.redis, self.settings)

    @cached_property
    def calls(self) -> CallStore:
        """The store of calls without a run, on the run store's connection."""
        return CallStore(self.store.redis, retention_s=self.store.retention_s)


def deps_of(ctx: dict[str, Any]) -> WorkerDeps:
    deps: WorkerDeps = ctx["agentq"]
    return deps


def attempt_of(ctx: dict[str, Any]) -> int:
    return int(ctx.get("job_try", 1))


def exhausted(ctx: dict[str, Any], deps: WorkerDeps) -> bool:
    """A job past its deliveries: every earlier attempt died with its worker."""
    return attempt_of(ctx) > deps.max_deliveries


async def ended(deps: WorkerDeps, outcome: Outcome, envelope: JobEnvelope) -> None:
    if outcome in (Outcome.FINISHED, Outcome.FAILED):
        await run_ended(deps.store, envelope.run_id)


def retrying(exc: Exception) -> NoReturn:
    OUTAGE.failed(exc)  # one log line per outage, not one per job
    tracing.record_exception(exc)
    raise Retry(defer=REDIS_RETRY_S) from exc


async def guarded(deps: WorkerDeps, envelope: JobEnvelope, work: Awaitable[None]) -> None:
    """Run a job body. Transient Redis trouble (mapped by the store, or raw from a direct
    call) releases the job to run again later (the runtime does not count that delivery);
    anything else fails the run. (A worker never holds a job it cannot run: the claim
    takes only jobs whose `needs` its tool set has.)"""
    try:
        await work
    except Exception as exc:
        if is_transient_redis(exc):
            retrying(exc)
        try:
            await _fail_internal(deps, envelope, exc)
        except Exception as fail_exc:
            if is_transient_redis(fail_exc):
                retrying(fail_exc)
            raise
    else:
        OUTAGE.succeeded(wrote=True)  # its transitions wrote


async def _fail_internal(deps: WorkerDeps, envelope: JobEnvelope, exc: Exception) -> None:
    log.error("%s of run %s failed", envelope.kind, envelope.run_id, exc_info=exc)
    report(JobOutcome.FAILED)
    tracing.record_exception(exc)
    reply = await deps.store.fail_run(
        envelope.run_id,
        RunFailure(
            kind=FailureKind.INTERNAL, message=f"{type(exc).__name__}: {exc}", step=envelope.step
        ),
    )
    await ended(deps, reply.outcome, envelope)


async def answered(deps: WorkerDeps, envelope: JobEnvelope, work: Awaitable[Reply | None]) -> None:
    """End the parent run's span when the answer a job posted finished it."""
    reply = await work
    if reply is not None and reply.outcome in (Outcome.FINISHED, Outcome.FAILED):
        parent = envelope.run_id
        if envelope.kind == JobKind.CHILD_ENDED:
            meta = await deps.store.meta(envelope.run_id)
            parent = ParentLink.model_validate_json(meta[MetaField.PARENT]).run_id
        await run_ended(deps.store, parent)
