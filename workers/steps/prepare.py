"""A model step's preparation, at the I/O edge: rules, the hook, context compaction.

The decisions are pure (orchestrator/loop/prepare.py, orchestrator/loop/context.py);
this module reads what they need from the run store, calls the prepare_step hook
(workers/steps/hook_calls.py: here when this process registered it, else as a job on a
queue of a worker that announced it), calls the summary model, and says what the step
will send and how to record it (`PreparedStep.record`, stored in the step and its
finish-step event).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import JobEnvelope, JobKind
from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.keys import context_summary
from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.loop.context import (
    Compaction,
    StoredSummary,
    bounds,
    compact,
    record,
    reusable,
    summary_input,
    tokens_to_compact,
    with_summary,
)
from agentq.orchestrator.loop.plan import offered_tools
from agentq.orchestrator.loop.prepare import (
    PREPARE_STEP_KIND,
    StepOverrides,
    applied,
    called_before,
    matching_rule,
    rule_overrides,
    sent_record,
)
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.hook_jobs import HookFailed, HookRequest, enqueue_now
from agentq.orchestrator.runs.state import FailureKind, StepField
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.workers.models import ModelRequest
from agentq.workers.models.base import DiscardDeltas
from agentq.workers.models.model_client import ModelClient
from agentq.workers.steps import hook_calls


class StepPreparationFailed(Exception):
    """The step cannot be prepared (the hook raised, is served nowhere, or the summary
    model failed): the run fails with this message."""

    def __init__(self, message: str, kind: FailureKind = FailureKind.HOOK) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


class StepDeferred(Exception):
    """The step needs a context summary first: a `summarize` job was enqueued, which
    runs the step again once the summary is stored (workers/jobs/summarize.py)."""


@dataclass
class PreparedStep:
    spec: RunSpec  # the run's spec with this step's overrides applied
    messages: list[Message]  # what is sent
    record: dict[str, Any]  # stored with the step ("prepared")


async def prepare(
    store: RunStore,
    models: ModelClient,
    run_id: str,
    step: int,
    spec: RunSpec,
    tools: list[ToolDef],
    history: list[Message],
    *,
    resumed: bool = False,
    history_digest: str | None = None,
) -> PreparedStep:
    """`resumed`: the step runs again after its summary job; it never defers twice.
    `history_digest`: `history`'s messages digest, when the caller keeps one."""
    overrides = StepOverrides()
    rec: dict[str, Any] = {}
    matched = matching_rule(spec.steps, step, called_before(history))
    if matched is not None:
        rec["rule"], rule = matched
        overrides = rule_overrides(rule)
    if spec.prepare_step:
        rec["hook"] = spec.prepare_step
        request = HookRequest(kind=PREPARE_STEP_KIND, name=spec.prepare_step)
        try:
            value = await hook_calls.call(store, run_id, step, request, spec.model.timeout_s)
        except HookFailed as exc:
            raise StepPreparationFailed(exc.message) from exc
        hooked = StepOverrides.model_validate(value)
        rec["hook_overrides"] = hooked.record()  # a replay applies them to today's rules
        overrides = overrides.then(hooked)
    effective = applied(spec, overrides)
    messages = list(overrides.messages) if overrides.messages is not None else history
    if spec.context is not None:
        may_defer = not resumed and overrides.messages is None
        messages, compaction = await _compacted(
            store, models, run_id, step, spec, messages, may_defer=may_defer
        )
        if compaction is not None:
            rec["compaction"] = compaction.model_dump(exclude_none=True)
    if not overrides.empty:
        rec["overrides"] = overrides.record()
    rec["sent"] = sent_record(
        effective,
        messages,
        [t.name for t in offered_tools(effective, tools)],
        known_digest=history_digest if messages is history else None,
    )
    return PreparedStep(spec=effective, messages=messages, record=rec)


# -- context compaction ---------------------------------------------------------------


async def _compacted(
    store: RunStore,
    models: ModelClient,
    run_id: str,
    step: int,
    spec: RunSpec,
    messages: list[Message],
    *,
    may_defer: bool,
) -> tuple[list[Message], Compaction | None]:
    policy = spec.context
    assert policy is not None
    tokens = tokens_to_compact(
        messages,
        max_input_tokens=policy.max_input_tokens,
        keep_last=policy.keep_last_messages,
        previous=await _previous_record(store, run_id, step),
    )
    if tokens is None:
        return messages, None
    with tracing.span("context.compact") as span:
        if policy.strategy == "summarize":
            out, compaction = await _summarized(
                store, models, run_id, step, spec, messages, tokens, may_defer=may_defer
            )
        else:
            out, compaction = compact(
                messages,
                policy.strategy,
                max_input_tokens=policy.max_input_tokens,
                keep_last=policy.keep_last_messages,
                tokens=tokens,
            )
        tracing.annotate(
            span,
            lambda: {
                f"agentq.context.{k}": v
                for k, v in compaction.model_dump(exclude={"summary"}).items()
                if v is not None
            },
        )
    if len(out) == len(messages) and out == messages:
        return messages, None
    await store.emit(
        run_id,
        [
            event_json(
                "context-compacted", run_id, step=step, **compaction.model_dump(exclude_none=True)
            )
        ],
    )
    return out, compaction


async def _previous_record(store: RunStore, run_id: str, step: int) -> dict[str, Any] | None:
    if step == 0:
        return None
    with redis_errors_mapped():
        raw = await store.redis.hget(keys.step(run_id, step - 1), StepField.RESP)  # type: ignore[misc]
    return json.loads(raw) if raw else None


async def _summarized(
    store: RunStore,
    models: ModelClient,
    run_id: str,
    step: int,
    spec: RunSpec,
    messages: list[Message],
    tokens: int,
    *,
    may_defer: bool,
) -> tuple[list[Message], Compaction]:
    """The stored summary when it still does; else a `summarize` job writes one and the
    step runs again (StepDeferred), or, when the step cannot be run again as it is (it
    was resumed already, or a hook chose its messages), the summary is written here."""
    policy = spec.context
    assert policy is not None
    head, tail = bounds(messages, policy.keep_last_messages)
    stored = await load_summary(store, run_id)
    if not reusable(messages, head, tail, stored, policy.max_input_tokens):
        if may_defer:
            job = queued_job(JobEnvelope(kind=JobKind.SUMMARIZE, run_id=run_id, step=step))
            await enqueue_now(store, job)
            raise StepDeferred
        stored = await write_summary(store, models, run_id, spec, messages, stored)
    assert stored is not None
    out = with_summary(messages, head, stored.upto, stored.text)
    compaction = record("summarize", messages, out, tokens, summary_upto=stored.upto)
    return out, compaction.model_copy(update={"summary": stored.text})


async def ensure_summary(
    store: RunStore, models: ModelClient, run_id: str, spec: RunSpec, messages: list[Message]
) -> None:
    """The summary job's work: a summary that covers the history's middle, written once
    (a re-delivered job finds it written)."""
    policy = spec.context
    assert policy is not None
    head, tail = bounds(messages, policy.keep_last_messages)
    stored = await load_summary(store, run_id)
    if not reusable(messages, head, tail, stored, policy.max_input_tokens):
        await write_summary(store, models, run_id, spec, messages, stored)


async def load_summary(store: RunStore, run_id: str) -> StoredSummary | None:
    with redis_errors_mapped():
        raw = await store.redis.get(context_summary(run_id))
    return StoredSummary.model_validate_json(raw) if raw else None


async def write_summary(
    store: RunStore,
    models: ModelClient,
    run_id: str,
    spec: RunSpec,
    messages: list[Message],
    previous: StoredSummary | None,
) -> StoredSummary:
    """Ask the summary model (the run's model unless named) for a summary of the
    history's middle and store it once: later steps reuse it until the history
    outgrows it."""
    policy = spec.context
    assert policy is not None
    head, upto = bounds(messages, policy.keep_last_messages)
    model = policy.summary_model or spec.model
    count = previous.count + 1 if previous else 1
    request = ModelRequest(
        model=model,
        messages=summary_input(messages, head, upto, previous),
        tool_choice="none",
        # The scripted model answers the run's n-th summary with script[n-1].
        step=count - 1,
        timeout_s=model.timeout_s,
    )
    with tracing.span(
        f"chat {model.name}",
        attributes=lambda: {
            "gen_ai.request.model": model.name,
            "gen_ai.operation.name": "chat",
            "agentq.context.summary": True,
        },
    ):
        try:
            response = await models.generate_within(request, DiscardDeltas(), model.timeout_s)
        except ProviderError as exc:
            raise StepPreparationFailed(
                f"the summary model failed: {exc.message}", FailureKind.PROVIDER
            ) from exc
    summary = StoredSummary(upto=upto, text=response.text, count=count)
    with redis_errors_mapped():
        await store.redis.set(
            context_summary(run_id), summary.model_dump_json(), ex=store.retention_s
        )
    return summary
