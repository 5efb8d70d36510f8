"""The job of a tool call without a run (`client.calls.call`): claim, execute, record once.

The same executors, retry policy, output bounds and spans as a run's tool call
(`handlers.tool_call`); only the state it reads and writes is the call's own
(`CallStore`). A re-delivered job whose call has its result (recorded, or cancelled)
does nothing; a job past its deliveries records that its worker died each time.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from arq import Retry

from agentq.orchestrator import tracing
from agentq.orchestrator.calls.catalogue import claim_call_args, finish_call_args
from agentq.orchestrator.calls.store import CallStore
from agentq.orchestrator.core.envelopes import JobEnvelope
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.tool_output import bounded_result, progress_value
from agentq.orchestrator.loop.plan import CallPlan, error_result
from agentq.orchestrator.redis.connect import MAX_BLOCK_S
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.orchestrator.runs.state import Outcome
from agentq.orchestrator.tools.resolution import ToolDef
from agentq.workers.steps.genai_spans import tool_attributes, tool_result_attributes
from agentq.workers.tools.base import ToolContext, ToolNotServed
from agentq.workers.tools.execution import run_executor
from agentq.workers.worker.liveness import OUTAGE

if TYPE_CHECKING:
    from agentq.workers.jobs.handlers import WorkerDeps

log = logging.getLogger("agentq.worker")

_REDIS_RETRY_S = 1.0


async def call_job(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps: WorkerDeps = ctx["agentq"]
    queue = ctx.get("queue", "tools")
    parent = tracing.carrier_context(envelope.run_trace)
    with tracing.process_span(envelope, queue, ctx["job_id"], parent=parent):
        try:
            await _call(ctx, deps, envelope)
        except ToolNotServed as exc:
            log.warning("call %s: %s; released for another worker", envelope.run_id, exc.message)
            not_served = ctx.get("not_served")
            if not_served is not None:
                not_served(ctx["job_id"])
            raise Retry(defer=0) from exc
        except Exception as exc:
            if not is_transient_redis(exc):
                raise
            OUTAGE.failed(exc)
            tracing.record_exception(exc)
            raise Retry(defer=_REDIS_RETRY_S) from exc
        else:
            OUTAGE.succeeded()


async def _call(ctx: dict[str, Any], deps: WorkerDeps, envelope: JobEnvelope) -> None:
    call_id = envelope.run_id
    attempt = int(ctx.get("job_try", 1))
    calls = CallStore(deps.store.redis, retention_s=deps.store.retention_s)
    claim = await calls.claim(claim_call_args(call_id, attempt))
    if claim.outcome != Outcome.CLAIMED or claim.call is None or claim.tool is None:
        log.debug("call %s skipped: %s", call_id, claim.outcome)
        return
    call = CallPlan.model_validate_json(claim.call)
    tool = ToolDef.model_validate_json(claim.tool)
    with tracing.span(
        f"execute_tool {call.name}", attributes=lambda: tool_attributes(call, tool, call_id)
    ) as tool_span:
        if attempt > deps.max_deliveries:
            result = error_result(
                call.id,
                call.name,
                f"the call to {call.name!r} was attempted {deps.max_deliveries} times "
                "and its worker died each time",
            )
        else:
            result = await _execute(deps, calls, tool, call, attempt)
        result = bounded_result(result, tool.max_output_bytes or deps.max_output_bytes)
        tracing.annotate(tool_span, lambda: tool_result_attributes(result))
        if result.is_error:
            tracing.mark_error(tool_span, "tool_error", str(result.output))
    recorded = await calls.finish(finish_call_args(call_id, result))
    log.debug("call %s: %s", call_id, recorded.outcome)


async def _execute(
    deps: WorkerDeps, calls: CallStore, tool: ToolDef, call: CallPlan, attempt: int
) -> ToolResultPart:
    executor = deps.executors.get(tool.kind)
    if executor is None:
        return error_result(
            call.id, call.name, f"this worker cannot run {tool.kind} tools (misrouted call)"
        )

    async def progress(value: Any) -> None:
        await calls.emit(
            call.id,
            [
                event_json(
                    "tool-progress",
                    call.id,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    output=progress_value(value),
                )
            ],
        )

    async def forward_log(level: str, data: Any, logger: str | None) -> None:
        await calls.emit(
            call.id,
            [
                event_json(
                    "tool-log",
                    call.id,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    level=level,
                    data=data,
                    logger=logger,
                )
            ],
        )

    inputs = CallInputRequests(calls, call, attempt, deadline_at=time.time() + tool.timeout_s)
    context = ToolContext(
        run_id=call.id,
        step=0,
        call_id=call.id,
        tool=tool,
        attempt=attempt,
        deadline_at=time.time() + tool.timeout_s,
        progress=progress,
        log=forward_log,
        elicit=inputs,
        sample=inputs.sample,
    )
    return await run_executor(executor, tool, call, context)


class CallInputRequests:
    """The `elicit` callable of a call without a run: a `tool-input-request` event on the
    call's stream, then the answer its caller posts (`ToolCalls.answer`; the MCP gateway
    asks its own client), or None when declined or the deadline passes. `sample` asks
    the same way for a model's answer (`"kind": "sampling"`, the request as `input`)."""

    def __init__(self, calls: CallStore, call: CallPlan, attempt: int, deadline_at: float):
        self.calls = calls
        self.call = call
        self.deadline_at = deadline_at
        # Ids differ across attempts, so a re-delivered call never reads an old answer.
        self._ids = (f"{call.id}.{attempt}.{n}" for n in itertools.count(1))

    async def __call__(self, message: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        return await self._ask(message=message, input=schema)

    async def sample(self, request: dict[str, Any]) -> dict[str, Any] | None:
        return await self._ask(kind="sampling", message="", input=request)

    async def _ask(self, **request: Any) -> dict[str, Any] | None:
        request_id = next(self._ids)
        event = event_json(
            "tool-input-request",
            self.call.id,
            tool_call_id=self.call.id,
            tool_name=self.call.name,
            request_id=request_id,
            **request,
        )
        if not await self.calls.emit(self.call.id, [event]):
            return None  # the call has ended
        raw = None
        while raw is None and time.time() < self.deadline_at:
            slice_s = min(MAX_BLOCK_S, max(0.0, self.deadline_at - time.time()))
            raw = await self.calls.wait_answer(self.call.id, request_id, slice_s)
        if raw is None:
            return None
        answer = json.loads(raw)
        if answer.get("action") != "accept":
            return None
        content: dict[str, Any] = answer.get("content") or {}
        return content
