"""Batches through `Client` (`client.batches`): submit (a streamed, resumable upload),
status, results in input order, cancel, retry, list. The batch itself lives in Redis (see
store.py); its lines are admitted by the workers (see admission.py), never by this process.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from agentq.orchestrator.batches.admission import kick_job
from agentq.orchestrator.batches.input import (
    BatchInputError,
    BatchLine,
    duplicate_message,
    numbered,
    parse_line,
)
from agentq.orchestrator.batches.state import (
    DEFAULT_BATCH_CONCURRENCY,
    LINE_END_STATUSES,
    MAX_BATCH_PRIORITY,
    BatchCancel,
    BatchField,
    BatchOpen,
    BatchOutcome,
    BatchRetry,
    BatchSeal,
    BatchStatus,
    BatchUpload,
    LineStatus,
    RecordField,
    UploadLine,
)
from agentq.orchestrator.batches.store import BatchStore
from agentq.orchestrator.budgets.ledger import batch_budget
from agentq.orchestrator.budgets.shared import Scope, SharedBudget
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunNotFoundError
from agentq.orchestrator.core.messages import Usage, round_usd
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.faults import maps_redis_errors, redis_errors_mapped
from agentq.orchestrator.runs.api import Runs
from agentq.orchestrator.runs.creation import derived_placement
from agentq.orchestrator.runs.shared_budgets import BudgetStatus, SharedBudgets

UPLOAD_CHUNK = 500  # lines per upload transition
RETRY_CHUNK = 2000  # lines per retry transition
BATCH_ID_MAX = 96

BatchSource = str | Path | Iterable[str | Mapping[str, Any]]


class BatchNotFoundError(RunNotFoundError):
    """No batch with that id (or it passed its retention)."""


class BatchCounts(BaseModel):
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0

    @property
    def ended(self) -> int:
        return self.succeeded + self.failed + self.cancelled


class BatchInfo(BaseModel):
    """A batch's status: counts by line status, tokens, throughput and ETA."""

    id: str
    tenant: str
    status: BatchStatus
    lines: int
    last_line: int = 0  # the highest line number (blank input lines keep their numbers)
    concurrency: int
    priority: int
    counts: BatchCounts
    usage: dict[str, int]
    # USD, the ended lines' at the deployment's prices; None: a line's model had no price.
    cost_usd: float | None = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float
    sealed_at: float | None = None
    finished_at: float | None = None
    runs_per_s: float | None = None  # lines ended per second since the seal
    eta_s: float | None = None
    admission_latency_avg_s: float | None = None
    admission_latency_max_s: float | None = None
    # Its shared budget (orchestrator/budgets/), when one was set: the limits, what its
    # runs' steps spent so far, and the steps it holds.
    budget: BudgetStatus | None = None

    @property
    def ended(self) -> bool:
        return self.status in (BatchStatus.DONE, BatchStatus.CANCELLED) and (
            self.counts.running == 0
        )


class LineResult(BaseModel):
    """One line of `batch results`."""

    line: int
    custom_id: str
    run_id: str | None = None
    status: LineStatus
    text: str | None = None
    # The run's structured output, when its spec asked for one (orchestrator/output/).
    output: Any = None
    # Tokens and cost (its run's and their sub-agents'), as `RunResult.usage` shows them.
    usage: Usage | None = None
    error: str | None = None


class SubmitResult(BaseModel):
    batch_id: str
    lines: int  # lines the batch holds
    stored: int  # stored by this call (the rest were stored by an earlier, interrupted one)
    resumed: bool
    existed: bool  # sealed before: nothing was uploaded


def _info(meta: Mapping[str, str], now: float) -> BatchInfo:
    counts = BatchCounts(**{s.value: int(meta.get(s.value, 0)) for s in LineStatus})
    sealed = float(meta[BatchField.SEALED_AT]) if BatchField.SEALED_AT in meta else None
    finished = float(meta[BatchField.FINISHED_AT]) if BatchField.FINISHED_AT in meta else None
    rate = eta = None
    if sealed is not None and counts.ended:
        elapsed = max(1e-6, (finished or now) - sealed)
        rate = counts.ended / elapsed
        left = counts.queued + counts.running
        eta = left / rate if left else 0.0
    n_admit = int(meta.get(BatchField.ADMIT_LATENCY_N, 0))
    return BatchInfo(
        id=meta[BatchField.ID],
        tenant=meta[BatchField.TENANT],
        status=BatchStatus(meta[BatchField.STATUS]),
        lines=int(meta.get(BatchField.LINES, 0)),
        last_line=int(meta.get(BatchField.LAST_LINE, 0)),
        concurrency=int(meta.get(BatchField.CONCURRENCY, 0)),
        priority=int(meta.get(BatchField.PRIORITY, 1)),
        counts=counts,
        usage={
            "input_tokens": int(meta.get(BatchField.USAGE_INPUT, 0)),
            "output_tokens": int(meta.get(BatchField.USAGE_OUTPUT, 0)),
            "total_tokens": int(meta.get(BatchField.USAGE_TOTAL, 0)),
        },
        cost_usd=None
        if int(meta.get(BatchField.UNPRICED, 0))
        else round_usd(float(meta.get(BatchField.COST, 0))),
        metadata=json.loads(meta.get(BatchField.METADATA) or "{}"),
        created_at=float(meta.get(BatchField.CREATED_AT, 0)),
        sealed_at=sealed,
        finished_at=finished,
        runs_per_s=rate,
        eta_s=eta,
        admission_latency_avg_s=(
            float(meta.get(BatchField.ADMIT_LATENCY_SUM, 0)) / n_admit if n_admit else None
        ),
        admission_latency_max_s=(
            float(meta[BatchField.ADMIT_LATENCY_MAX])
            if BatchField.ADMIT_LATENCY_MAX in meta
            else None
        ),
    )


def line_result(line: int, record: Mapping[str, Any]) -> LineResult:
    return LineResult(
        line=line,
        custom_id=str(record.get(RecordField.CUSTOM_ID, line)),
        run_id=record.get(RecordField.RUN_ID),
        status=LineStatus(record.get(RecordField.STATUS, LineStatus.QUEUED)),
        text=record.get(RecordField.TEXT),
        output=json.loads(record[RecordField.OUTPUT]) if RecordField.OUTPUT in record else None,
        usage=record.get(RecordField.USAGE) or None,
        error=record.get(RecordField.ERROR),
    )


def _provider_batched(line: BatchLine) -> BatchLine:
    model = line.spec.model.model_copy(update={"batch": True})
    return replace(line, spec=line.spec.model_copy(update={"model": model}))


def _check_batch_id(batch_id: str) -> str:
    if not keys.RUN_ID_PATTERN.match(batch_id) or len(batch_id) > BATCH_ID_MAX:
        raise BatchInputError(
            f"batch id {batch_id!r}: use 1-{BATCH_ID_MAX} letters, digits, '_', '.' or '-'"
        )
    return batch_id


def _texts(source: BatchSource) -> Iterator[str]:
    """The source's lines as text, read lazily (a file is never loaded whole)."""
    if isinstance(source, str | Path):
        with Path(source).open(encoding="utf-8") as handle:
            yield from handle
        return
    for item in source:
        yield item if isinstance(item, str) else json.dumps(item)


class Batches:
    """The batch operations of one Client. Every method raises agentq's own errors only
    (a Redis failure is an InfrastructureError)."""

    def __init__(self, redis: Redis, settings: Settings, runs: Runs) -> None:
        self.redis = redis
        self.settings = settings
        self.runs = runs
        self.store = BatchStore(redis, settings.tenant_limits)
        self.budgets = SharedBudgets(runs.store, settings)

    @maps_redis_errors
    async def submit(
        self,
        source: BatchSource,
        *,
        template: Mapping[str, Any] | None = None,
        batch_id: str | None = None,
        concurrency: int = DEFAULT_BATCH_CONCURRENCY,
        priority: int = 1,
        metadata: Mapping[str, Any] | None = None,
        tenant: str | None = None,
        provider_batch: bool = False,
        on_chunk: Callable[[int], None] | None = None,
        max_line_bytes: int | None = None,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
    ) -> SubmitResult:
        """Store the lines (in chunks; a resubmission of the same id skips the lines
        stored already) and seal the batch, which starts its admission by the workers.

        Raises BatchInputError naming the line for a malformed line, an unknown field, a
        duplicate custom_id, or an input without lines; then nothing was started and the
        partial upload (the chunks before the faulty line's) is discarded.
        `provider_batch` routes every line's model steps through the provider's batch
        API (`model.batch`). A line over `max_line_bytes` (the run spec size cap,
        `settings.max_spec_bytes` by default) is a BatchInputError naming it.
        `max_cost_usd`, `max_total_tokens`: the batch's shared budget (raised later by
        `set_budget`); a tenant whose own budget is reached is refused
        (BudgetReachedError). `priority` (1-100): the weight of the batch's fairness key
        in its tenant's turns (a batch of 3 takes three jobs for one of a batch of 1)."""
        tenant = tenant or DEFAULT_TENANT
        budget = SharedBudget(max_cost_usd=max_cost_usd, max_total_tokens=max_total_tokens)
        await self.runs.check_budget(tenant)
        max_line = max_line_bytes or self.settings.max_spec_bytes
        batch_id = _check_batch_id(batch_id or uuid.uuid4().hex)
        if concurrency < 1:
            raise BatchInputError("concurrency must be at least 1")
        if not 1 <= priority <= MAX_BATCH_PRIORITY:
            raise BatchInputError(f"priority must be 1-{MAX_BATCH_PRIORITY}")
        opened = await self.store.open(
            tenant,
            BatchOpen(
                batch_id=batch_id,
                tenant=tenant,
                # Kept by a resumed upload: the nonce of the batch's first open stands.
                run_prefix=keys.batch_run_prefix(tenant, batch_id, uuid.uuid4().hex[:16]),
                concurrency=concurrency,
                priority=priority,
                metadata=json.dumps(dict(metadata or {})),
                retention_s=self.settings.retention_s,
                upload_ttl_s=self.settings.batch_upload_ttl_s,
            ),
        )
        if opened.outcome == BatchOutcome.EXISTS:
            return SubmitResult(
                batch_id=batch_id, lines=opened.lines, stored=0, resumed=False, existed=True
            )
        if not budget.empty:
            # Before its first line is admitted: no step of it runs unbudgeted.
            await self.budgets.ledger.set_budget(Scope("batch", tenant, batch_id), budget)
        line_meta = {"batch": batch_id}
        stored = read = 0
        duplicates: list[tuple[int, int, str]] = []
        # custom_id -> its first line: a repeat is refused before its chunk is stored.
        first_lines: dict[str, int] = {}
        try:
            chunk: list[BatchLine] = []
            for number, text in numbered(_texts(source)):
                # (at most 4 bytes a character: most lines need no encoding to tell)
                if len(text) > max_line // 4 and len(text.encode()) > max_line:
                    raise BatchInputError(
                        f"line {number}: over {max_line} bytes (the run spec size cap, "
                        "max_spec_bytes)"
                    )
                parsed = parse_line(text, number, template, line_meta)
                first = first_lines.setdefault(parsed.custom_id, number)
                if first != number:
                    raise BatchInputError(duplicate_message([(number, first, parsed.custom_id)]))
                chunk.append(_provider_batched(parsed) if provider_batch else parsed)
                read += 1
                if len(chunk) >= UPLOAD_CHUNK:
                    stored += await self._upload(tenant, batch_id, chunk, duplicates)
                    chunk = []
                    if on_chunk:
                        on_chunk(read)
            if chunk:
                stored += await self._upload(tenant, batch_id, chunk, duplicates)
                if on_chunk:
                    on_chunk(read)
            if duplicates:
                raise BatchInputError(duplicate_message(duplicates))
            if not read:
                raise BatchInputError("the input has no lines: a batch needs at least one")
        except BatchInputError:
            await self.discard(tenant, batch_id)
            raise
        kick = kick_job(tenant, batch_id, "seal")
        sealed = await self.store.seal(tenant, BatchSeal(batch_id=batch_id, lines=read, kick=kick))
        if sealed.outcome == BatchOutcome.INCOMPLETE:
            raise BatchInputError(
                f"batch {batch_id!r} holds {sealed.lines} lines but the input has {read}: "
                "resume it with the same file, or choose another id"
            )
        return SubmitResult(
            batch_id=batch_id,
            lines=read,
            stored=stored,
            resumed=opened.outcome == BatchOutcome.RESUMED,
            existed=False,
        )

    async def _upload(
        self,
        tenant: str,
        batch_id: str,
        chunk: Sequence[BatchLine],
        duplicates: list[tuple[int, int, str]],
    ) -> int:
        lines = [
            UploadLine(
                line=b.line,
                custom_id=b.custom_id,
                spec=b.spec.model_dump_json(exclude_none=True),
                placement=derived_placement(b.spec, tenant),
            )
            for b in chunk
        ]
        reply = await self.store.upload(
            tenant,
            BatchUpload(
                batch_id=batch_id,
                lines=lines,
                upload_ttl_s=self.settings.batch_upload_ttl_s,
            ),
        )
        if reply.outcome != BatchOutcome.STORED:
            raise BatchInputError(f"batch {batch_id!r} is {reply.status}: its upload is closed")
        duplicates.extend((d.line, d.first, d.custom_id) for d in reply.duplicates)
        return reply.stored

    async def discard(self, tenant: str, batch_id: str) -> None:
        """Drop a batch that never started (its upload was refused)."""
        meta = await self.store.meta(tenant, batch_id)
        if meta.get(BatchField.STATUS) != BatchStatus.UPLOADING:
            return
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(*keys.batch_keys(tenant, batch_id))
            pipe.zrem(keys.batch_index(tenant), batch_id)
            await pipe.execute()

    @maps_redis_errors
    async def status(self, batch_id: str, tenant: str | None = None) -> BatchInfo:
        meta = await self.store.meta(tenant or DEFAULT_TENANT, batch_id)
        if not meta:
            raise BatchNotFoundError(f"no batch with id {batch_id!r}")
        info = _info(meta, time.time())
        if batch_budget(meta) is None:
            return info
        budget = await self.budgets.status(Scope("batch", info.tenant, batch_id))
        paused = budget.reached is not None and info.status == BatchStatus.RUNNING
        return info.model_copy(
            update={"budget": budget, "status": BatchStatus.PAUSED if paused else info.status}
        )

    @maps_redis_errors
    async def set_budget(
        self,
        batch_id: str,
        *,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
        tenant: str | None = None,
    ) -> BatchInfo:
        """Set or raise the batch's budget (the limits given replace those in force); the
        steps it held go on at once."""
        tenant = tenant or DEFAULT_TENANT
        budget = SharedBudget(max_cost_usd=max_cost_usd, max_total_tokens=max_total_tokens)
        if budget.empty:
            raise BatchInputError("a budget needs max_cost_usd or max_total_tokens")
        if budget.period is not None:
            raise BatchInputError("a batch's budget is on all its spend: it has no period")
        if not await self.store.meta(tenant, batch_id):
            raise BatchNotFoundError(f"no batch with id {batch_id!r}")
        await self.budgets.set_budget(Scope("batch", tenant, batch_id), budget)
        return await self.status(batch_id, tenant)

    async def results(
        self,
        batch_id: str,
        *,
        tenant: str | None = None,
        statuses: Sequence[str] = (),
    ) -> AsyncIterator[LineResult]:
        """One result per line in input order (only `statuses` when given), a page at a
        time: a 100,000-line batch never sits in memory."""
        tenant = tenant or DEFAULT_TENANT
        info = await self.status(batch_id, tenant)
        wanted = set(statuses)
        with redis_errors_mapped():
            records = self.store.records(tenant, batch_id, lines=_last_line(info))
            async for line, record in records:
                result = line_result(line, record)
                if not wanted or result.status in wanted:
                    yield result

    @maps_redis_errors
    async def cancel(self, batch_id: str, tenant: str | None = None) -> BatchInfo:
        """No new admissions; the runs in flight are cancelled (their ends settle the
        lines, so the batch ends when the last one does)."""
        tenant = tenant or DEFAULT_TENANT
        reply = await self.store.cancel(tenant, BatchCancel(batch_id=batch_id))
        if reply.outcome == BatchOutcome.UNKNOWN_BATCH:
            raise BatchNotFoundError(f"no batch with id {batch_id!r}")
        for run_id in reply.running:
            try:
                await self.runs.cancel(run_id, reason=f"batch {batch_id} cancelled")
            except RunNotFoundError:
                continue  # admitted, its run not created yet: its creator cancels it
        return await self.status(batch_id, tenant)

    @maps_redis_errors
    async def retry(
        self,
        batch_id: str,
        statuses: Sequence[str] = (LineStatus.FAILED,),
        tenant: str | None = None,
    ) -> int:
        """New runs for the lines that ended in `statuses`; returns how many."""
        tenant = tenant or DEFAULT_TENANT
        info = await self.status(batch_id, tenant)
        wanted = [LineStatus(s) for s in statuses]
        bad = [s for s in wanted if s not in LINE_END_STATUSES or s == LineStatus.SUCCEEDED]
        if bad:
            raise BatchInputError(f"retry takes failed or cancelled lines, not {bad[0]}")
        last = _last_line(info)
        nonce = uuid.uuid4().hex[:12]
        requeued = 0
        first = 1
        while True:
            end = min(last, first + RETRY_CHUNK - 1)
            final = end >= last
            reply = await self.store.retry(
                tenant,
                BatchRetry(
                    batch_id=batch_id,
                    first=first,
                    last=end,
                    statuses=wanted,
                    kick=kick_job(tenant, batch_id, f"retry-{nonce}") if final else None,
                ),
            )
            if reply.outcome == BatchOutcome.UNKNOWN_BATCH:
                raise BatchNotFoundError(f"no batch with id {batch_id!r}")
            if reply.outcome == BatchOutcome.CLOSED:
                raise BatchInputError(f"batch {batch_id!r} is still uploading")
            requeued += reply.requeued
            if final:
                return requeued
            first = end + 1

    @maps_redis_errors
    async def list_batches(self, tenant: str | None = None, limit: int = 50) -> list[BatchInfo]:
        tenant = tenant or DEFAULT_TENANT
        now = time.time()
        found = []
        for batch_id in await self.store.batch_ids(tenant, limit):
            meta = await self.store.meta(tenant, batch_id)
            if meta:
                found.append(_info(meta, now))
        return found


def _last_line(info: BatchInfo) -> int:
    return info.last_line
