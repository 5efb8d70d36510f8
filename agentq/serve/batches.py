"""The batches API: submit a JSONL body (or a multipart upload), read a batch's status,
stream its results in input order, cancel, retry, raise its budget, list. A thin layer
over the Client's batch methods; the caller's tenant owns its batches (another tenant's is a 404).
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import IO, Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel
from starlette.datastructures import UploadFile

from agentq.orchestrator.batches.api import BatchInfo, BatchNotFoundError
from agentq.orchestrator.batches.input import BatchInputError
from agentq.orchestrator.batches.state import DEFAULT_BATCH_CONCURRENCY, LineStatus
from agentq.orchestrator.budgets.shared import SharedBudget
from agentq.serve.config import Limits
from agentq.serve.deps import caller, client_of, config_of
from agentq.serve.errors import ApiError, not_found
from agentq.serve.limits import check_batch_lines, check_submit_rate

router = APIRouter(prefix="/v1/batches", tags=["batches"])


class Requeued(BaseModel):
    id: str
    requeued: int


def _lines(spool: IO[bytes]) -> Iterator[str]:
    for raw in spool:
        yield raw.decode("utf-8")


def _count_lines(source: IO[bytes], limits: Limits) -> int:
    """The body's lines, each within the run spec size cap and at most `max_batch_lines`
    of them (413 naming the line or the limit), read from the spool before anything is
    stored; the source is rewound after."""
    lines = 0
    for number in itertools.count(1):
        raw = source.readline(limits.max_spec_bytes + 2)  # a bounded read of a long line
        if not raw:
            break
        if len(raw.rstrip(b"\r\n")) > limits.max_spec_bytes:
            raise ApiError(
                413,
                "too_large",
                f"line {number}: over {limits.max_spec_bytes} bytes (the run spec size cap)",
                field="body",
                limit="max_spec_bytes",
            )
        if raw.strip():
            lines += 1
        if lines > limits.max_batch_lines:
            raise ApiError(
                413,
                "too_large",
                f"a batch holds at most {limits.max_batch_lines} lines",
                field="body",
                limit="max_batch_lines",
            )
    source.seek(0)
    return lines


def _template(request: Request, agent: str | None, spec_text: str | None) -> Any:
    if agent is not None:
        agents = config_of(request).agents
        if agent not in agents:
            raise ApiError(422, "invalid_request", f"no agent {agent!r}", field="agent")
        return agents[agent]
    if spec_text is None:
        return None
    try:
        template = json.loads(spec_text)
    except ValueError as exc:
        raise ApiError(422, "invalid_request", f"spec: not JSON ({exc})", field="spec") from None
    if not isinstance(template, dict):
        raise ApiError(422, "invalid_request", "spec: expected an object", field="spec")
    return template


@router.post("", status_code=201)
async def submit(
    request: Request,
    id: Annotated[str | None, Query(max_length=96)] = None,
    concurrency: Annotated[int, Query(ge=1, le=100_000)] = DEFAULT_BATCH_CONCURRENCY,
    priority: Annotated[int, Query(ge=1, le=100)] = 1,
    agent: str | None = None,
    provider_batch: bool = False,
    max_cost_usd: Annotated[float | None, Query(gt=0)] = None,
    max_total_tokens: Annotated[int | None, Query(ge=1)] = None,
) -> Any:
    """Start a batch from a JSONL body (or a multipart upload: a `file` part, an optional
    `spec` part with the template). Each line is a RunSpec or a line over the template
    (`agent=NAME` of the server's agents, or the `spec` part). `priority` (1-100) is the
    weight of the batch's turns among its tenant's work. `metadata.KEY=VALUE`
    query parameters label the batch; `max_cost_usd` and `max_total_tokens` are its
    shared budget (raised by POST /v1/batches/{id}/budget). The same `id` again resumes
    its upload (201) or, once it was sealed, returns it as it is (200). A tenant whose
    own budget is reached is refused (402, `budget_reached`)."""
    principal = caller(request, "runs:write")
    metadata = {
        k.removeprefix("metadata."): v
        for k, v in request.query_params.items()
        if k.startswith("metadata.")
    }
    spec_text: str | None = None
    with tempfile.TemporaryFile() as spool:
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            form = await request.form()
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise ApiError(422, "invalid_request", "no 'file' part", field="file")
            spec_part = form.get("spec")
            if isinstance(spec_part, str):
                spec_text = spec_part
            elif isinstance(spec_part, UploadFile):
                spec_text = (await spec_part.read()).decode("utf-8")
            source: IO[bytes] = upload.file
        else:
            async for chunk in request.stream():
                spool.write(chunk)
            source = spool
        source.seek(0)
        template = _template(request, agent, spec_text)
        limits = config_of(request).limits
        lines = _count_lines(source, limits)
        client = client_of(request)
        await check_submit_rate(client.runs, principal.tenant)
        await check_batch_lines(client.runs, principal.tenant, lines, limits.batch_lines_per_minute)
        try:
            result = await client.batches.submit(
                _lines(source),
                template=template,
                batch_id=id,
                concurrency=concurrency,
                priority=priority,
                metadata=metadata,
                tenant=principal.tenant,
                provider_batch=provider_batch,
                max_line_bytes=limits.max_spec_bytes,
                max_cost_usd=max_cost_usd,
                max_total_tokens=max_total_tokens,
            )
        except (BatchInputError, UnicodeDecodeError) as exc:
            raise ApiError(422, "invalid_request", str(exc), field="body") from None
    return JSONResponse(
        {
            "id": result.batch_id,
            "lines": result.lines,
            "stored": result.stored,
            "resumed": result.resumed,
        },
        status_code=200 if result.existed else 201,
    )


@router.get("", response_model=list[BatchInfo])
async def list_batches(
    request: Request, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> list[BatchInfo]:
    """The caller's batches, newest first."""
    principal = caller(request, "runs:read")
    return await client_of(request).batches.list_batches(principal.tenant, limit)


async def _status(request: Request, batch_id: str, scope: str) -> tuple[str, BatchInfo]:
    principal = caller(request, scope)
    try:
        return principal.tenant, await client_of(request).batches.status(batch_id, principal.tenant)
    except BatchNotFoundError:
        raise not_found(f"no batch with id {batch_id!r}") from None


@router.get("/{batch_id}", response_model=BatchInfo)
async def status(request: Request, batch_id: str) -> BatchInfo:
    """Counts by line status, tokens, throughput, ETA and admission latency."""
    return (await _status(request, batch_id, "runs:read"))[1]


@router.get("/{batch_id}/results")
async def results(request: Request, batch_id: str, failed: bool = False) -> StreamingResponse:
    """One JSON line per input line, in input order (streamed): line, custom_id,
    run_id, status, text, usage, error. `failed=true` for the failed lines only."""
    tenant, _ = await _status(request, batch_id, "runs:read")
    client = client_of(request)
    statuses = [LineStatus.FAILED] if failed else []

    async def body() -> AsyncIterator[bytes]:
        page: list[str] = []
        async for row in client.batches.results(batch_id, tenant=tenant, statuses=statuses):
            page.append(row.model_dump_json() + "\n")
            if len(page) >= 200:
                yield "".join(page).encode()
                page = []
        if page:
            yield "".join(page).encode()

    return StreamingResponse(body(), media_type="application/x-ndjson")


@router.post("/{batch_id}/cancel", response_model=BatchInfo)
async def cancel(request: Request, batch_id: str) -> BatchInfo:
    """No new admissions; the runs in flight are cancelled."""
    tenant, _ = await _status(request, batch_id, "runs:write")
    return await client_of(request).batches.cancel(batch_id, tenant)


@router.post("/{batch_id}/budget", response_model=BatchInfo)
async def set_budget(request: Request, batch_id: str, budget: SharedBudget) -> BatchInfo:
    """Set or raise the batch's budget (the limits given replace those in force): the
    steps it held go on at once."""
    tenant, _ = await _status(request, batch_id, "runs:write")
    if budget.empty:
        raise ApiError(422, "invalid_request", "give max_cost_usd or max_total_tokens")
    return await client_of(request).batches.set_budget(
        batch_id,
        max_cost_usd=budget.max_cost_usd,
        max_total_tokens=budget.max_total_tokens,
        tenant=tenant,
    )


@router.post("/{batch_id}/retry", response_model=Requeued)
async def retry(
    request: Request, batch_id: str, failed: bool = True, cancelled: bool = False
) -> Requeued:
    """New runs for the lines that failed (and, with `cancelled=true`, were cancelled)."""
    tenant, _ = await _status(request, batch_id, "runs:write")
    wanted = ((LineStatus.FAILED, failed), (LineStatus.CANCELLED, cancelled))
    statuses = [s for s, on in wanted if on]
    if not statuses:
        raise ApiError(422, "invalid_request", "nothing to retry: give failed or cancelled")
    n = await client_of(request).batches.retry(batch_id, statuses, tenant)
    return Requeued(id=batch_id, requeued=n)
