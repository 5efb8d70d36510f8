"""The runs API: submit, read, list, follow, and answer what a run waits for."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel
from sse_starlette import EventSourceResponse

from agentq.orchestrator import tracing
from agentq.orchestrator.core.start_times import parse_instant
from agentq.orchestrator.runs.index import RunPage
from agentq.orchestrator.runs.result import TERMINAL_STATUSES, RunResult, RunStatus
from agentq.orchestrator.spec.run import RunSpec
from agentq.serve.auth import ADMIN, require
from agentq.serve.deps import (
    MAX_SEQ,
    caller,
    client_of,
    config_of,
    feeds_of,
    own_run,
    resume_point,
    run_owner,
    streams_of,
)
from agentq.serve.errors import ApiError, conflict, not_found
from agentq.serve.follow import follow
from agentq.serve.limits import check_spec_size, check_submit_rate

router = APIRouter(prefix="/v1/runs", tags=["runs"])


class Created(BaseModel):
    id: str


class Approval(BaseModel):
    approved: bool
    reason: str | None = None
    # The call runs with this input instead (an approval's; checked against the schema).
    input: Any = None


class ToolOutput(BaseModel):
    output: Any = None
    is_error: bool = False


class Answer(BaseModel):
    answer: dict[str, Any] | None = None
    decline: bool = False


class Outcome(BaseModel):
    id: str
    outcome: str


def _idempotent_id(key: str) -> str:
    """The run id an `Idempotency-Key` chooses (in the caller's namespace, as any id)."""
    return "idem-" + hashlib.sha256(key.encode()).hexdigest()[:32]


@router.post(
    "",
    status_code=201,
    response_model=Created,
    responses={
        200: {"model": Created, "description": "The run existed already"},
        202: {
            "description": "{id, queued}: created `queued` on its thread, it starts when "
            "the turn comes"
        },
    },
)
async def submit(
    request: Request,
    spec: Annotated[RunSpec, Body()],
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    start_at: Annotated[str | None, Query(max_length=64)] = None,
) -> Any:
    """Start a run. The same `id` (or `Idempotency-Key`) twice returns the existing run.
    Both are the caller's tenant's (the run's id, answered, is in its namespace).
    `?start_at=` (ISO 8601 with a zone, or Unix seconds) delays it: the run is created
    `scheduled` and starts then; a malformed or past time is a 400."""
    principal = caller(request, "runs:write")
    when = None if start_at is None else parse_instant(start_at)
    config = config_of(request)
    check_spec_size(spec.model_dump_json(exclude_none=True).encode(), config.limits.max_spec_bytes)
    client = client_of(request)
    if spec.id is None and idempotency_key:
        spec = spec.model_copy(update={"id": _idempotent_id(idempotency_key)})
    chosen = client.runs.chosen_id(spec, principal.tenant)
    if chosen is None or await run_owner(request, chosen) is None:
        # A resubmission costs no submit budget.
        await check_submit_rate(client.runs, principal.tenant)
    # The same spec again is the same run (200); another spec under one of the tenant's
    # ids is a 409 (Runs.create). Another tenant's ids are out of reach: no 409 for them.
    # The run's span is a child of this request's (its door span, or the caller's span
    # when this process does not trace).
    traceparent = tracing.current_carrier().get("traceparent") or request.headers.get("traceparent")
    run_id, created = await client.runs.create(
        spec, tenant=principal.tenant, traceparent=traceparent, start_at=when
    )
    queued = created and spec.thread_id is not None
    if queued and (await client.runs.status(run_id)).status == RunStatus.QUEUED:
        # Queued on its thread (double_texting enqueue): it starts when the turn comes.
        return JSONResponse({"id": run_id, "queued": True}, status_code=202)
    return JSONResponse({"id": run_id}, status_code=201 if created else 200)


@router.get("", response_model=RunPage)
async def list_runs(
    request: Request,
    status: str | None = None,
    model: Annotated[str | None, Query(max_length=200)] = None,
    error_kind: Annotated[str | None, Query(max_length=100)] = None,
    q: Annotated[str | None, Query(max_length=200)] = None,
    tenant: Annotated[str | None, Query(max_length=200)] = None,
    tool: Annotated[str | None, Query(max_length=200)] = None,
    created_after: float | None = None,
    created_before: float | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: str | None = None,
) -> RunPage:
    """The caller's runs, newest first. Filter with `status`, `model` (a substring of
    `provider:name`), `error_kind` (a failed run's kind), `metadata.KEY=VALUE` (any
    number), `q` (a substring of the id, the custom id or a metadata value) and
    `created_after` / `created_before` (Unix seconds), `tool` (a tool the run called);
    `next_cursor` continues the list. A request reads at most `AGENTQ_SERVE_LIST_SCAN_RUNS`
    runs: a filtered page may come back short (even empty) with a cursor, `scanned` saying
    how many runs it read. `tenant` lists another tenant's runs, for a key with the `admin`
    scope."""
    principal = caller(request, "runs:read")
    if tenant is not None and tenant != principal.tenant:
        require(principal, ADMIN)
    metadata = {
        k.removeprefix("metadata."): v
        for k, v in request.query_params.items()
        if k.startswith("metadata.")
    }
    try:
        return await client_of(request).runs.list(
            tenant or principal.tenant,
            status=status or None,
            metadata=metadata,
            model=model or None,
            error_kind=error_kind or None,
            search=q or None,
            tool=tool or None,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            cursor=cursor,
            scan_limit=config_of(request).limits.list_scan_runs,
        )
    except ValueError as exc:
        raise ApiError(422, "invalid_request", f"cursor: {exc}", field="cursor") from None


@router.get("/{run_id}", response_model=RunResult)
async def get_run(
    request: Request,
    run_id: str,
    wait: Annotated[float | None, Query(ge=0, le=300)] = None,
) -> RunResult:
    """The run as it stands; `?wait=S` holds the request until it ends or S seconds pass."""
    principal = await own_run(request, run_id, "runs:read")
    if wait:
        # Through the process's shared read: a thousand waits hold no connection each.
        with streams_of(request).held(principal.tenant):
            await feeds_of(request).wait_ended(run_id, wait)
    return await client_of(request).runs.result(run_id)


@router.get(
    "/{run_id}/events",
    responses={
        200: {
            "description": "Server-Sent Events (`id:` seq, `event:` type, `data:` JSON), "
            "or JSON lines with `Accept: application/x-ndjson`",
            "content": {"text/event-stream": {}, "application/x-ndjson": {}},
        }
    },
)
async def events(
    request: Request,
    run_id: str,
    after: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    """Follow the run's events until it ends. `Last-Event-ID` (or `?after=`) resumes."""
    principal = await own_run(request, run_id, "runs:read")
    limits = config_of(request).limits
    start = resume_point(after, last_event_id)
    stream = streams_of(request).holding(
        principal.tenant,
        follow(
            feeds_of(request),
            run_id,
            start,
            idle_s=limits.heartbeat_s,
            events_per_second=limits.events_per_second,
        ),
    )
    if "application/x-ndjson" in request.headers.get("accept", ""):

        async def lines() -> AsyncIterator[str]:
            async for frame in stream:
                # A blank line is the JSON-lines heartbeat (readers skip empty lines).
                yield "\n" if frame is None else frame.json + "\n"

        return StreamingResponse(
            lines(), media_type="application/x-ndjson", headers=_stream_headers()
        )

    async def sse() -> AsyncIterator[bytes]:
        async for frame in stream:
            if frame is not None:  # sse-starlette's pings are the heartbeats
                event = frame.event
                yield f"id: {event.seq}\nevent: {event.type}\ndata: {frame.json}\n\n".encode()

    return EventSourceResponse(sse(), ping=int(limits.heartbeat_s), headers=_stream_headers())


def _stream_headers() -> dict[str, str]:
    return {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def _pending_call(request: Request, run_id: str, call_id: str, wanted: str) -> None:
    """404 for a call the run never made; 409 for one that is not `wanted` now."""
    result = await client_of(request).runs.result(run_id)
    if result.status in TERMINAL_STATUSES:
        raise conflict(f"run {run_id!r} has ended ({result.status})")
    for pending in result.pending:
        if pending.get("tool_call_id") == call_id and "request_id" not in pending:
            if pending["status"] != wanted:
                raise conflict(
                    f"call {call_id!r} of run {run_id!r} is {pending['status']}, not {wanted}"
                )
            return
    made = any(call.id == call_id for step in result.steps for call in step.tool_calls)
    if not made:
        raise not_found(f"run {run_id!r} has no call {call_id!r}")
    raise conflict(f"call {call_id!r} of run {run_id!r} is not {wanted} (resolved or running)")


@router.post("/{run_id}/calls/{call_id}/approval", response_model=Outcome)
async def approve(request: Request, run_id: str, call_id: str, body: Approval) -> Outcome:
    """Approve or deny a call that waits for approval (the model sees a denial's reason)."""
    await own_run(request, run_id, "approve")
    await _pending_call(request, run_id, call_id, "awaiting-approval")
    await client_of(request).runs.approve(
        run_id, call_id, approved=body.approved, reason=body.reason, input=body.input
    )
    return Outcome(id=call_id, outcome="approved" if body.approved else "denied")


@router.post("/{run_id}/calls/{call_id}/result", response_model=Outcome)
async def post_result(request: Request, run_id: str, call_id: str, body: ToolOutput) -> Outcome:
    """Post the output of a call that waits for one (a client tool)."""
    await own_run(request, run_id, "runs:write")
    await _pending_call(request, run_id, call_id, "awaiting-result")
    await client_of(request).runs.submit_tool_result(
        run_id, call_id, body.output, is_error=body.is_error
    )
    return Outcome(id=call_id, outcome="error" if body.is_error else "posted")


@router.post("/{run_id}/input-requests/{request_id}", response_model=Outcome)
async def answer(request: Request, run_id: str, request_id: str, body: Answer) -> Outcome:
    """Answer a call's question (a forwarded MCP elicitation): `answer`, or `decline`."""
    await own_run(request, run_id, "approve")
    if body.decline == (body.answer is not None):
        raise ApiError(422, "invalid_request", "give either 'answer' or 'decline': true")
    result = await client_of(request).runs.result(run_id)
    if result.status in TERMINAL_STATUSES:
        raise conflict(f"run {run_id!r} has ended ({result.status})")
    if not any(p.get("request_id") == request_id for p in result.pending):
        raise not_found(f"run {run_id!r} has no open input request {request_id!r}")
    await client_of(request).runs.answer(run_id, request_id, None if body.decline else body.answer)
    return Outcome(id=request_id, outcome="declined" if body.decline else "answered")
