"""The `model_step` job: one step of a run, read as its phases (workers/steps/phases.py).

Begin the step, prepare it, build the request, generate the answer and repair what
the model got wrong (both within the step's `chat` span), plan what the answer means
and commit it. A step delivered past its deliveries fails the run: every earlier
attempt died with its worker.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import SpanKind

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, RESUMED_STEP, JobEnvelope, JobKind
from agentq.orchestrator.runs.state import FailureKind, RunFailure
from agentq.workers.jobs.base import WorkerDeps, attempt_of, deps_of, exhausted, guarded
from agentq.workers.jobs.registry import handles
from agentq.workers.queue.claims import job_ride
from agentq.workers.steps import phases
from agentq.workers.steps.genai_spans import chat_attributes, chat_result_attributes
from agentq.workers.steps.sink import DeltaEvents


@handles(JobKind.MODEL_STEP)
async def model_step(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    with tracing.process_span(envelope, MODEL_QUEUE, ctx["job_id"]):
        if exhausted(ctx, deps):
            await guarded(deps, envelope, _poisoned_step(deps, envelope))
            return
        await guarded(deps, envelope, _model_step(ctx, deps, envelope))


async def _poisoned_step(deps: WorkerDeps, envelope: JobEnvelope) -> None:
    await phases.fail(
        deps,
        envelope.run_id,
        RunFailure(
            kind=FailureKind.INTERNAL,
            message=f"model step {envelope.step} was delivered "
            f"{deps.max_deliveries} times and its worker died each time",
            step=envelope.step,
        ),
    )


async def _model_step(ctx: dict[str, Any], deps: WorkerDeps, envelope: JobEnvelope) -> None:
    run_id, step, attempt = envelope.run_id, envelope.step, attempt_of(ctx)
    begun = await phases.begin(deps, run_id, step, attempt)
    if begun is None or not await phases.guard_input(deps, begun):
        return
    prepared = await phases.prepare(deps, begun, resumed=envelope.call_id == RESUMED_STEP)
    if prepared is None:
        return
    spec = prepared.spec
    output = phases.output(deps, begun, prepared)
    request = phases.request(begun, prepared, output)
    sink = DeltaEvents(deps.store, run_id, step, attempt=attempt)
    with tracing.span(
        f"chat {spec.model.name}",
        kind=SpanKind.CLIENT,
        attributes=lambda: chat_attributes(request, run_id, deps.models.base_url(request)),
    ) as chat_span:
        generated = await phases.generate(deps, spec, request, sink, chat_span)
        if generated is None:
            return
        tracing.annotate(chat_span, lambda: chat_result_attributes(generated.response))
        response = await phases.repair(deps, begun, spec, request, generated.response, sink)
    response = phases.price(deps, spec, response, batched=generated.batched)
    plan = await phases.plan(deps, begun, prepared, response, sink, output)
    if plan is None:
        return
    await phases.commit(
        deps,
        begun,
        plan,
        model=spec.model,
        batched=generated.batched,
        ride=job_ride(ctx),
        sink=sink,
    )
