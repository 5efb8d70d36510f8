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
from typing import Any, NoReturn

from arq import Retry
from arq.typing import WorkerCoroutine
from opentelemetry.trace import SpanKind

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import (
    MODEL_QUEUE,
    RESUMED_STEP,
    JobEnvelope,
    JobKind,
    job_id,
)
from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.spec import RunSpec
from agentq.orchestrator.core.tool_output import (
    DEFAULT_MAX_OUTPUT_BYTES,
    bounded_result,
    progress_value,
)
from agentq.orchestrator.loop.plan import CallPlan, error_result, offered_tools, plan_step
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.orchestrator.runs.children import ParentLink
from agentq.orchestrator.runs.state import (
    BeginStep,
    CallStatus,
    ClaimCall,
    ExpireParked,
    FailureKind,
    MetaField,
    Outcome,
    Reply,
    RunFailure,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import commit_args, enqueued_job_ids, result_args
from agentq.orchestrator.tools.provider import ProviderToolConfig
from agentq.orchestrator.tools.resolution import ToolDef
from agentq.workers.jobs.batch_admit import batch_admit
from agentq.workers.jobs.call import call_job
from agentq.workers.jobs.prepare_step import prepare_step_job
from agentq.workers.jobs.summarize import summarize_job
from agentq.workers.models import ModelRequest, ModelResponse, OfferedTool
from agentq.workers.models.batch.step import Route, batch_answer
from agentq.workers.models.batch.store import ProviderBatchStore
from agentq.workers.models.model_client import ModelClient
from agentq.workers.queue.claims import job_ride
from agentq.workers.steps.genai_spans import (
    chat_attributes,
    chat_result_attributes,
    tool_attributes,
    tool_result_attributes,
)
from agentq.workers.steps.history_cache import HistoryCache, asking, completed
from agentq.workers.steps.prepare import StepDeferred, StepPreparationFailed, prepare
from agentq.workers.steps.repair import repair_calls
from agentq.workers.steps.sink import DeltaEvents
from agentq.workers.tools import agent as sub_agents
from agentq.workers.tools import workflow as workflows
from agentq.workers.tools.base import ToolContext, ToolExecutor, ToolNotServed
from agentq.workers.tools.execution import run_executor
from agentq.workers.tools.input_requests import InputRequests
from agentq.workers.worker.liveness import OUTAGE
from agentq.workers.worker.metrics import WorkerMetrics, observe_model_call

log = logging.getLogger("agentq.worker")

# A job that meets a Redis outage is released and tried again this much later; the
# process's one outage log (OUTAGE) says so once per outage, not once per job.
_REDIS_RETRY_S = 1.0


@dataclass
class WorkerDeps:
    store: RunStore
    models: ModelClient
    executors: dict[str, ToolExecutor] = field(default_factory=dict)
    max_deliveries: int = 5
    metrics: WorkerMetrics | None = None
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


def _deps(ctx: dict[str, Any]) -> WorkerDeps:
    deps: WorkerDeps = ctx["agentq"]
    return deps


async def _ended(deps: WorkerDeps, outcome: Outcome, envelope: JobEnvelope) -> None:
    if outcome in (Outcome.FINISHED, Outcome.FAILED):
        await tracing.end_run(deps.store, envelope.run_id)


async def model_step(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = _deps(ctx)
    with tracing.process_span(envelope, MODEL_QUEUE, ctx["job_id"]):
        if _exhausted(ctx, deps):
            await _guarded(deps, envelope, _poisoned_step(deps, envelope), ctx)
            return
        await _guarded(deps, envelope, _model_step(ctx, deps, envelope), ctx)


async def _poisoned_step(deps: WorkerDeps, envelope: JobEnvelope) -> None:
    reply = await deps.store.fail_run(
        envelope.run_id,
        RunFailure(
            kind=FailureKind.INTERNAL,
            message=f"model step {envelope.step} was delivered "
            f"{deps.max_deliveries} times and its worker died each time",
            step=envelope.step,
        ),
    )
    await _ended(deps, reply.outcome, envelope)


def _exhausted(ctx: dict[str, Any], deps: WorkerDeps) -> bool:
    """A job past its deliveries: every earlier attempt died with its worker."""
    return int(ctx.get("job_try", 1)) > deps.max_deliveries


async def _guarded(
    deps: WorkerDeps, envelope: JobEnvelope, work: Any, ctx: dict[str, Any] | None = None
) -> None:
    """Run a job body. Transient Redis trouble (mapped by the store, or raw from a direct
    call) releases the job to run again later (the runtime does not count that delivery);
    a call this worker cannot serve is released for another worker at once; anything
    else fails the run."""
    try:
        await work
    except ToolNotServed as exc:
        log.warning(
            "%s of run %s: %s; released for another worker",
            envelope.kind,
            envelope.run_id,
            exc.message,
        )
        not_served = (ctx or {}).get("not_served")
        if ctx is not None and not_served is not None:
            not_served(ctx["job_id"])
        raise Retry(defer=0) from exc
    except Exception as exc:
        if is_transient_redis(exc):
            _retrying(exc)
        try:
            await _fail_internal(deps, envelope, exc)
        except Exception as fail_exc:
            if is_transient_redis(fail_exc):
                _retrying(fail_exc)
            raise
    else:
        OUTAGE.succeeded()


def _retrying(exc: Exception) -> NoReturn:
    OUTAGE.failed(exc)  # one log line per outage, not one per job
    tracing.record_exception(exc)
    raise Retry(defer=_REDIS_RETRY_S) from exc


async def _fail_internal(deps: WorkerDeps, envelope: JobEnvelope, exc: Exception) -> None:
    log.error("%s of run %s failed", envelope.kind, envelope.run_id, exc_info=exc)
    tracing.record_exception(exc)
    reply = await deps.store.fail_run(
        envelope.run_id,
        RunFailure(
            kind=FailureKind.INTERNAL, message=f"{type(exc).__name__}: {exc}", step=envelope.step
        ),
    )
    await _ended(deps, reply.outcome, envelope)


async def _model_step(ctx: dict[str, Any], deps: WorkerDeps, envelope: JobEnvelope) -> None:
    run_id, step = envelope.run_id, envelope.step
    held = deps.histories.get(run_id)
    begin = BeginStep(
        run_id=run_id,
        step=step,
        event=event_json("start-step", run_id, step=step, attempt=ctx.get("job_try", 1)),
    )
    begun = await deps.store.begin_step(asking(held, begin))
    if begun.outcome != Outcome.OK:
        log.debug("model step %s/%d skipped: %s", run_id, step, begun.outcome)
        return
    whole = completed(held, begun)
    deps.histories.put(run_id, whole)
    spec, tools, history = whole.spec, list(whole.tools), list(whole.messages)
    try:  # prepareStep and context management (workers/steps/prepare.py)
        prepared = await prepare(
            deps.store,
            deps.models,
            run_id,
            step,
            spec,
            tools,
            history,
            resumed=envelope.call_id == RESUMED_STEP,
            history_digest=whole.digest,
        )
    except StepDeferred:
        return  # its context summary is written first (workers/jobs/summarize.py)
    except StepPreparationFailed as exc:
        failed = await deps.store.fail_run(
            run_id, RunFailure(kind=exc.kind, message=exc.message, step=step)
        )
        await _ended(deps, failed.outcome, envelope)
        return
    spec = prepared.spec
    if begun.parent:  # a sub-agent's child run: its parent's call shows its progress
        await sub_agents.forward_step(deps.store, begun.parent, run_id, {"step": step})
    request = ModelRequest(
        model=spec.model,
        system=spec.system,
        messages=prepared.messages,
        tools=[
            OfferedTool(
                name=t.name,
                description=t.description,
                input_schema=t.input_schema,
                provider_executed=isinstance(t.config, ProviderToolConfig),
                options=t.config.options if isinstance(t.config, ProviderToolConfig) else {},
            )
            for t in offered_tools(spec, tools)
        ],
        tool_choice=spec.tool_choice,
        step=step,
        timeout_s=spec.model.timeout_s,
    )
    sink = DeltaEvents(deps.store, run_id, step, attempt=int(ctx.get("job_try", 1)))
    with tracing.span(
        f"chat {spec.model.name}",
        kind=SpanKind.CLIENT,
        attributes=lambda: chat_attributes(request, run_id, deps.models.base_url(request)),
    ) as chat_span:
        try:
            batched = await _batch_route(deps, spec, request, sink)
            if batched is Route.PARK:
                log.debug("model step %s/%d parked for a provider batch", run_id, step)
                tracing.annotate(chat_span, lambda: {"agentq.provider_batch": "parked"})
                return
            if batched is Route.DIRECT:
                response = await observe_model_call(
                    deps.metrics,
                    request.model.provider,
                    request.model.name,
                    deps.models.generate(request, sink),
                )
            else:
                response = batched
                tracing.annotate(chat_span, lambda: {"agentq.provider_batch": "answered"})
        except ProviderError as exc:
            tracing.record_exception(exc, str(exc.status) if exc.status else None)
            await sink.flush()
            failed = await deps.store.fail_run(
                run_id,
                RunFailure(
                    kind=FailureKind.PROVIDER, message=exc.message, status=exc.status, step=step
                ),
            )
            await _ended(deps, failed.outcome, envelope)
            return
        await sink.flush()
        tracing.annotate(chat_span, lambda: chat_result_attributes(response))
        response = await repair_calls(
            spec=spec,
            tools=tools,
            request=request,
            response=response,
            generate=deps.models.generate,
            store=deps.store,
            run_id=run_id,
        )
    plan = plan_step(spec, tools, step, response)
    plan.prepared = prepared.record
    hops = tracing.Hops(run_id)
    args = hops.stamp(commit_args(run_id, plan))
    if not isinstance(batched, Route):
        args = args.model_copy(update={"batch": True})
    committed = await deps.store.commit_step(args, ride=job_ride(ctx))
    hops.sent(enqueued_job_ids(args, committed.outcome))
    if committed.outcome == Outcome.FINISHED:
        deps.histories.drop(run_id)  # no step of the run comes next
    if begun.parent:
        await sub_agents.forward_step(deps.store, begun.parent, run_id, sub_agents.step_shown(plan))
    await _ended(deps, committed.outcome, envelope)


async def _batch_route(
    deps: WorkerDeps, spec: RunSpec, request: ModelRequest, sink: DeltaEvents
) -> ModelResponse | Route:
    """A `"batch": true` step parks its request, or takes the answer a collector brought
    (workers/models/batch/); every other step calls the model directly."""
    if not spec.model.batch or deps.batches is None:
        return Route.DIRECT
    return await batch_answer(deps.batches, deps.models, request, sink.run_id, sink.step, sink)


async def tool_call(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = _deps(ctx)
    queue = ctx.get("queue", "tools")
    with tracing.process_span(envelope, queue, ctx["job_id"]):
        await _guarded(deps, envelope, _tool_call(ctx, deps, envelope), ctx)


async def _tool_call(ctx: dict[str, Any], deps: WorkerDeps, envelope: JobEnvelope) -> None:
    run_id, step, call_id = envelope.run_id, envelope.step, envelope.call_id or ""
    attempt = int(ctx.get("job_try", 1))
    claim = await deps.store.claim_call(
        ClaimCall(
            run_id=run_id,
            step=step,
            call_id=call_id,
            event=event_json(
                "tool-running", run_id, step=step, tool_call_id=call_id, attempt=attempt
            ),
        )
    )
    if claim.outcome != Outcome.CLAIMED or claim.call is None:
        log.debug("tool call %s/%d/%s skipped: %s", run_id, step, call_id, claim.outcome)
        return
    call = CallPlan.model_validate_json(claim.call)
    tool_json = claim.tool
    crashed: str | None = None
    if _exhausted(ctx, deps):
        # A poison call (it kills its worker): the model hears so, the run goes on.
        crashed = (
            f"the call to {call.name!r} was attempted {deps.max_deliveries} times "
            "and its worker died each time"
        )
    tool = ToolDef.model_validate_json(tool_json) if tool_json else None
    with tracing.span(
        f"execute_tool {call.name}", attributes=lambda: tool_attributes(call, tool, run_id)
    ) as tool_span:
        if crashed is not None:
            result = error_result(call.id, call.name, crashed)
        elif tool is None:
            result = error_result(
                call.id, call.name, f"tool {call.name!r} is not defined in this run"
            )
        else:
            result = await _execute(deps, tool, call, envelope, attempt)
        result = bounded_result(result, _output_limit(tool_json, deps))
        tracing.annotate(tool_span, lambda: tool_result_attributes(result))
        if result.is_error:
            tracing.mark_error(tool_span, "tool_error", str(result.output))
    hops = tracing.Hops(run_id)
    args = hops.stamp(result_args(run_id, step, result))
    recorded = await deps.store.record_result(args, ride=job_ride(ctx))
    hops.sent(enqueued_job_ids(args, recorded.outcome))
    await _ended(deps, recorded.outcome, envelope)


async def park_expiry(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    """A parked call's deadline: unless it was resolved meanwhile, it becomes a tool
    error the model sees, and the run goes on (expire_parked.lua)."""
    envelope = JobEnvelope.model_validate(payload)
    deps = _deps(ctx)
    with tracing.process_span(envelope, MODEL_QUEUE, ctx.get("job_id") or job_id(envelope)):
        await _guarded(deps, envelope, _park_expiry(deps, envelope), ctx)


async def _park_expiry(deps: WorkerDeps, envelope: JobEnvelope) -> None:
    run_id, step, call_id = envelope.run_id, envelope.step, envelope.call_id or ""
    call_json, status = await deps.store.call_state(run_id, step, call_id)
    if call_json is None:
        return  # the run has moved on or expired
    call = CallPlan.model_validate_json(call_json)
    within = f"within {call.park_timeout_s:g} s" if call.park_timeout_s is not None else "in time"
    wanted = "approved" if status == CallStatus.AWAITING_APPROVAL else "given a result"
    result = error_result(
        call.id, call.name, f"The call to {call.name!r} was not {wanted} {within}."
    )
    hops = tracing.Hops(run_id)
    args = hops.stamp(result_args(run_id, step, result, completion=ExpireParked))
    expired = await deps.store.expire_parked(args)
    log.debug("parked call %s/%d/%s: %s", run_id, step, call_id, expired.outcome)
    hops.sent(enqueued_job_ids(args, expired.outcome))
    await _ended(deps, expired.outcome, envelope)


def _output_limit(tool_json: str | None, deps: WorkerDeps) -> int:
    tool = ToolDef.model_validate_json(tool_json) if tool_json else None
    return (tool.max_output_bytes if tool else None) or deps.max_output_bytes


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
                    output=progress_value(value),
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
            park_timeout_s=tool.park_timeout_s,
        ),
    )
    return await run_executor(executor, tool, call, context)


async def start_call(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    """Start what answers a parked call: a sub-agent's child run."""
    envelope = JobEnvelope.model_validate(payload)
    deps = _deps(ctx)
    with tracing.process_span(envelope, MODEL_QUEUE, ctx.get("job_id") or job_id(envelope)):
        await _guarded(deps, envelope, _answered(deps, envelope, _start_call(deps, envelope)), ctx)


async def _start_call(deps: WorkerDeps, envelope: JobEnvelope) -> Reply | None:
    call_json, _ = await deps.store.call_state(
        envelope.run_id, envelope.step, envelope.call_id or ""
    )
    name = CallPlan.model_validate_json(call_json).name if call_json else ""
    tool_json = await deps.store.tool_def(envelope.run_id, name) if name else None
    if tool_json is not None and ToolDef.model_validate_json(tool_json).kind == "workflow":
        return await workflows.start_workflow(deps.store, envelope)
    return await sub_agents.start_child(deps.store, deps.settings, envelope)


async def workflow_node(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    """One node of a workflow call (on the model queue, or its tool's queue)."""
    envelope = JobEnvelope.model_validate(payload)
    deps = _deps(ctx)
    queue = ctx.get("queue", MODEL_QUEUE)
    work = workflows.run_node(
        deps.store, deps.models, deps.executors, envelope, int(ctx.get("job_try", 1))
    )
    with tracing.process_span(envelope, queue, ctx.get("job_id") or job_id(envelope)):
        await _guarded(deps, envelope, _answered(deps, envelope, work), ctx)


async def child_ended(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    """A child run ended: answer its parent's call (the job's run is the child)."""
    envelope = JobEnvelope.model_validate(payload)
    deps = _deps(ctx)
    with tracing.process_span(envelope, MODEL_QUEUE, ctx.get("job_id") or job_id(envelope)):
        await _guarded(
            deps,
            envelope,
            _answered(deps, envelope, sub_agents.child_ended(deps.store, envelope)),
            ctx,
        )


async def _answered(deps: WorkerDeps, envelope: JobEnvelope, work: Any) -> None:
    """End the parent run's span when the answer a job posted finished it."""
    reply = await work
    if reply is not None and reply.outcome == Outcome.FINISHED:
        parent = envelope.run_id
        if envelope.kind == "child_ended":
            meta = await deps.store.meta(envelope.run_id)
            parent = ParentLink.model_validate_json(meta[MetaField.PARENT]).run_id
        await tracing.end_run(deps.store, parent)


# The arq function of each job kind: the job's `f` is its kind (envelopes.queued_job).
JOB_FUNCTIONS: dict[JobKind, WorkerCoroutine] = {
    "model_step": model_step,
    "tool_call": tool_call,
    "park_expiry": park_expiry,
    "batch_admit": batch_admit,
    "call": call_job,
    "prepare_step": prepare_step_job,
    "summarize": summarize_job,
    "start_call": start_call,
    "child_ended": child_ended,
    "workflow_node": workflow_node,
}
