"""The two job kinds: a model step and a tool call. Both are idempotent.

Each job reads what it needs from the run store, does its work, and applies
one atomic transition. A re-delivered job finds its transition applied (or
the run closed) and stops; an unexpected failure fails the run rather than
leaving it stuck. A transient Redis failure (down, stalled, loading, out of
memory) never fails a run: the job is released and runs again, uncounted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from arq import Retry
from opentelemetry.trace import SpanKind
from pydantic_core import to_jsonable_python

from agentq.orchestrator import tracing
from agentq.orchestrator.envelopes import MODEL_QUEUE, JobEnvelope
from agentq.orchestrator.errors import ProviderError, ToolError
from agentq.orchestrator.events import event_json
from agentq.orchestrator.loop import CallPlan, error_result, offered_tools, plan_step
from agentq.orchestrator.messages import MESSAGE_ADAPTER, ToolResultPart
from agentq.orchestrator.redis_faults import is_transient_redis
from agentq.orchestrator.spec import RunSpec
from agentq.orchestrator.store import RunStore
from agentq.orchestrator.tool_resolution import ToolDef, ToolKind
from agentq.orchestrator.transitions import commit_args, result_args
from agentq.workers.executors.base import ToolContext, ToolExecutor, ToolNotServed
from agentq.workers.input_requests import InputRequests
from agentq.workers.liveness import OUTAGE
from agentq.workers.providers import ModelRequest, ProviderContext, ToolDefinition, make_provider
from agentq.workers.providers.base import DeltaSink, ModelResponse, Provider
from agentq.workers.providers.ratelimit import RateLimiter, call_model
from agentq.workers.repair_requests import repair_calls
from agentq.workers.sink import DeltaEvents

log = logging.getLogger("agentq.worker")

# A job that meets a Redis outage is released and tried again this much later; the
# process's one outage log (OUTAGE) says so once per outage, not once per job.
_REDIS_RETRY_S = 1.0


@dataclass
class WorkerDeps:
    store: RunStore
    http: httpx.AsyncClient
    executors: dict[ToolKind, ToolExecutor] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    max_deliveries: int = 5
    limiter: RateLimiter | None = None


def _deps(ctx: dict[str, Any]) -> WorkerDeps:
    deps: WorkerDeps = ctx["agentq"]
    return deps


async def generate(
    deps: WorkerDeps, provider: Provider, request: ModelRequest, sink: DeltaSink
) -> ModelResponse:
    """One model call: the fleet's shared rate limit, retries with backoff, a deadline."""
    limiter = deps.limiter if request.model.provider != "scripted" else None
    return await call_model(provider, request, sink, env=deps.env, limiter=limiter)


def _consumer_attrs(envelope: JobEnvelope, queue: str, job_id: str) -> dict[str, Any]:
    return {
        "messaging.system": "redis",
        "messaging.operation.type": "process",
        "messaging.destination.name": queue,
        "messaging.message.id": job_id,
        "agentq.run.id": envelope.run_id,
        "agentq.step": envelope.step,
        "agentq.queue_wait_ms": max(0.0, (time.time() - envelope.enqueued_at) * 1000),
    }


def _ended(outcome: str, envelope: JobEnvelope, status: str = "succeeded") -> None:
    if outcome in ("finished", "failed"):
        tracing.end_run(envelope.run_trace, envelope.run_id, status)


async def model_step(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = _deps(ctx)
    parent = envelope.trace or envelope.run_trace
    with tracing.span(
        f"process {MODEL_QUEUE}",
        parent=parent,
        kind=SpanKind.CONSUMER,
        attributes=_consumer_attrs(envelope, MODEL_QUEUE, ctx["job_id"]),
    ):
        if _exhausted(ctx, deps):
            await _guarded(ctx, deps, envelope, _poisoned_step(deps, envelope))
            return
        await _guarded(ctx, deps, envelope, _model_step(ctx, deps, envelope))


async def _poisoned_step(deps: WorkerDeps, envelope: JobEnvelope) -> None:
    outcome = await deps.store.fail_run(
        envelope.run_id,
        {
            "type": "internal",
            "message": f"model step {envelope.step} was delivered "
            f"{deps.max_deliveries} times and its worker died each time",
            "step": envelope.step,
        },
    )
    _ended(outcome, envelope, "failed")


def _exhausted(ctx: dict[str, Any], deps: WorkerDeps) -> bool:
    """A job past its deliveries: every earlier attempt died with its worker."""
    return int(ctx.get("job_try", 1)) > deps.max_deliveries


async def _guarded(ctx: dict[str, Any], deps: WorkerDeps, envelope: JobEnvelope, work: Any) -> None:
    """Run a job body. Transient Redis trouble releases the job to run again later (the
    runtime does not count that delivery); a call this worker cannot serve is released
    for another worker at once; anything else fails the run."""
    try:
        await work
    except ToolNotServed as exc:
        log.warning(
            "%s of run %s: %s; released for another worker",
            envelope.kind,
            envelope.run_id,
            exc.message,
        )
        not_served = ctx.get("not_served")
        if not_served is not None:
            not_served(ctx["job_id"])
        raise Retry(defer=0) from exc
    except Exception as exc:
        if is_transient_redis(exc):
            OUTAGE.failed(exc)
            raise Retry(defer=_REDIS_RETRY_S) from exc
        log.exception("%s of run %s failed", envelope.kind, envelope.run_id)
        try:
            outcome = await deps.store.fail_run(
                envelope.run_id,
                {
                    "type": "internal",
                    "message": f"{type(exc).__name__}: {exc}",
                    "step": envelope.step,
                },
            )
        except Exception as fail_exc:
            if is_transient_redis(fail_exc):
                OUTAGE.failed(fail_exc)
                raise Retry(defer=_REDIS_RETRY_S) from fail_exc
            raise
        _ended(outcome, envelope, "failed")
    else:
        OUTAGE.succeeded()


async def _model_step(ctx: dict[str, Any], deps: WorkerDeps, envelope: JobEnvelope) -> None:
    run_id, step = envelope.run_id, envelope.step
    begun = await deps.store.begin_step(
        run_id, step, event_json("start-step", run_id, step=step, attempt=ctx.get("job_try", 1))
    )
    if isinstance(begun, str):
        log.debug("model step %s/%d skipped: %s", run_id, step, begun)
        return
    spec = RunSpec.model_validate_json(begun.spec_json)
    tools = [ToolDef.model_validate_json(t) for t in begun.tool_jsons]
    request = ModelRequest(
        model=spec.model,
        system=spec.system,
        messages=[MESSAGE_ADAPTER.validate_json(m) for m in begun.message_jsons],
        tools=[
            ToolDefinition(
                name=t.name,
                description=t.description,
                input_schema=t.input_schema,
                provider_executed=t.kind == "provider",
                options=t.config.get("options", {}) if t.kind == "provider" else {},
            )
            for t in offered_tools(spec, tools)
        ],
        tool_choice=spec.tool_choice,
        step=step,
        timeout_s=spec.model.timeout_s,
    )
    provider = make_provider(spec.model, ProviderContext(http=deps.http, env=deps.env))
    sink = DeltaEvents(deps.store, run_id, step)
    with tracing.span(
        f"chat {spec.model.name}",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": spec.model.provider,
            "gen_ai.request.model": spec.model.name,
            "gen_ai.conversation.id": run_id,
        },
    ) as chat_span:
        try:
            response = await generate(deps, provider, request, sink)
        except ProviderError as exc:
            await sink.flush()
            outcome = await deps.store.fail_run(
                run_id,
                {"type": "provider", "message": exc.message, "status": exc.status, "step": step},
            )
            _ended(outcome, envelope, "failed")
            return
        await sink.flush()
        chat_span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
        chat_span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
        chat_span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
        response = await repair_calls(
            spec=spec,
            tools=tools,
            request=request,
            response=response,
            generate=lambda req, out: generate(deps, provider, req, out),
            store=deps.store,
            run_id=run_id,
        )
        plan = plan_step(spec, tools, step, response)
        hops = tracing.Hops(queue="tools")
        args = commit_args(run_id, plan, hops, envelope.run_trace)
        outcome = await deps.store.commit_step(run_id, args)
    if outcome in ("committed", "continued", "finished"):
        queues = [c.queue for c in plan.local_calls if c.status == "queued"]
        for preset, queue in zip(hops.allocated, queues, strict=False):
            hops.record([preset], queue)
        if outcome == "continued" and hops.allocated:
            hops.record(hops.allocated[-1:], MODEL_QUEUE)
    _ended(outcome, envelope)


async def tool_call(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = _deps(ctx)
    queue = ctx.get("queue", "tools")
    with tracing.span(
        f"process {queue}",
        parent=envelope.trace or envelope.run_trace,
        kind=SpanKind.CONSUMER,
        attributes=_consumer_attrs(envelope, queue, ctx["job_id"]),
    ):
        await _guarded(ctx, deps, envelope, _tool_call(ctx, deps, envelope))


async def _tool_call(ctx: dict[str, Any], deps: WorkerDeps, envelope: JobEnvelope) -> None:
    run_id, step, call_id = envelope.run_id, envelope.step, envelope.call_id or ""
    attempt = int(ctx.get("job_try", 1))
    status, call_json, tool_json = await deps.store.claim_call(
        run_id,
        step,
        call_id,
        event_json("tool-running", run_id, step=step, tool_call_id=call_id, attempt=attempt),
    )
    if status != "run" or call_json is None:
        log.debug("tool call %s/%d/%s skipped: %s", run_id, step, call_id, status)
        return
    call = CallPlan.model_validate_json(call_json)
    crashed: str | None = None
    if _exhausted(ctx, deps):
        # A poison call (it kills its worker): the model hears so, the run goes on.
        crashed = (
            f"the call to {call.name!r} was attempted {deps.max_deliveries} times "
            "and its worker died each time"
        )
    with tracing.span(
        f"execute_tool {call.name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
        },
    ) as tool_span:
        if crashed is not None:
            result = error_result(call.id, call.name, crashed)
        elif tool_json is None:
            result = error_result(
                call.id, call.name, f"tool {call.name!r} is not defined in this run"
            )
        else:
            result = await _execute(
                deps, ToolDef.model_validate_json(tool_json), call, envelope, attempt
            )
        tool_span.set_attribute("gen_ai.tool.type", "error" if result.is_error else "ok")
        hops = tracing.Hops(queue=MODEL_QUEUE)
        outcome = await deps.store.record_result(
            run_id, result_args(run_id, step, result, hops, envelope.run_trace)
        )
    if outcome == "continued":
        hops.record(hops.allocated)
    _ended(outcome, envelope)


async def _execute(
    deps: WorkerDeps, tool: ToolDef, call: CallPlan, envelope: JobEnvelope, attempt: int
) -> ToolResultPart:
    executor = deps.executors.get(tool.kind)
    if executor is None:
        return error_result(
            call.id, call.name, f"this worker cannot run {tool.kind} tools (misrouted call)"
        )

    async def progress(value: Any) -> None:
        await deps.store.emit(
            envelope.run_id,
            [
                event_json(
                    "tool-progress",
                    envelope.run_id,
                    step=envelope.step,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    output=to_jsonable_python(value, fallback=str),
                )
            ],
        )

    deadline_at = time.time() + tool.timeout_s
    context = ToolContext(
        run_id=envelope.run_id,
        step=envelope.step,
        call_id=call.id,
        tool=tool,
        attempt=attempt,
        deadline_at=deadline_at,
        progress=progress,
        elicit=InputRequests(
            deps.store,
            run_id=envelope.run_id,
            step=envelope.step,
            call_id=call.id,
            tool_name=call.name,
            attempt=attempt,
            deadline_at=deadline_at,
        ),
    )
    try:
        output = await executor.execute(tool, call.input, context)
    except ToolNotServed:
        raise  # another worker may serve it: not the model's business
    except ToolError as exc:
        return error_result(call.id, call.name, exc.message)
    except Exception as exc:  # a failing tool is the model's to see, not the run's end
        if is_transient_redis(exc):
            raise  # Redis failed under the tool (progress, elicitation): run it again
        return error_result(call.id, call.name, f"{type(exc).__name__}: {exc}")
    return ToolResultPart(
        tool_call_id=call.id,
        tool_name=call.name,
        output=to_jsonable_python(output, fallback=str),
    )
