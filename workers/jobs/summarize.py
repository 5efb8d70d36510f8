"""The `summarize` job: a context summary written as its own job, then the step again.

A model step whose history is over budget under the `summarize` strategy, with no
stored summary that still does, does not call the summary model itself: it
enqueues this job and ends (so a single-slot model pool never waits on itself).
This job asks the summary model, stores the summary once (a re-delivered job finds
it stored), and enqueues the step again; that step finds the summary and sends it.
"""

from __future__ import annotations

from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, RESUMED_STEP, JobEnvelope, JobKind
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.messages import MESSAGE_ADAPTER
from agentq.orchestrator.runs.hook_jobs import enqueue_now
from agentq.orchestrator.runs.state import TERMINAL_STATUSES, MetaField, RunFailure
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools.base import STORED_SPEC
from agentq.workers.jobs.base import WorkerDeps, deps_of, guarded
from agentq.workers.jobs.registry import handles
from agentq.workers.steps.phases import fail
from agentq.workers.steps.prepare import StepPreparationFailed, ensure_summary


@handles(JobKind.SUMMARIZE)
async def summarize_job(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    with tracing.process_span(envelope, MODEL_QUEUE, ctx["job_id"]):
        await guarded(deps, envelope, _summarize(deps, envelope))


async def _summarize(deps: WorkerDeps, envelope: JobEnvelope) -> None:
    run_id, step = envelope.run_id, envelope.step
    meta, raw_messages, _ = await deps.store.snapshot(run_id)
    if meta[MetaField.STATUS] in TERMINAL_STATUSES or int(meta[MetaField.STEP]) != step:
        return  # the run ended or moved on meanwhile
    spec = RunSpec.model_validate_json(meta[MetaField.SPEC], context=STORED_SPEC)
    history = [MESSAGE_ADAPTER.validate_json(m) for m in raw_messages]
    try:
        await ensure_summary(deps.store, deps.models, run_id, spec, history)
    except StepPreparationFailed as exc:
        await fail(deps, run_id, RunFailure(kind=exc.kind, message=exc.message, step=step))
        return
    resumed = JobEnvelope(kind=JobKind.MODEL_STEP, run_id=run_id, step=step, call_id=RESUMED_STEP)
    await enqueue_now(deps.store, queued_job(resumed))
