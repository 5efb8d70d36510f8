"""The typed inputs of the store's transitions, built from the pure core's decisions.

Pure: the same inputs give the same transitions (but for timestamps). Both the
workers (a step's plan, a call's result) and the client (approvals, posted
results) build their transitions here, so a result recorded from a worker and
one posted by a human take exactly the same path.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, TypeVar, overload

from agentq.orchestrator.core.envelopes import JobEnvelope, QueuedJob
from agentq.orchestrator.core.events import OUTPUT_REF, event_json, strict_json
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.messages import Message, ToolResultPart
from agentq.orchestrator.loop.plan import CallPlan, StepPlan
from agentq.orchestrator.policy.guardrails import Trip
from agentq.orchestrator.runs.children import ChildOf, parent_job
from agentq.orchestrator.runs.state import (
    PARKED_CALL_STATUSES,
    CallRecord,
    CallStatus,
    CommitStep,
    CreateRun,
    InputAnswer,
    InputRequest,
    InputStatus,
    Outcome,
    RecordResult,
    TransitionInput,
)
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tracing import run_carrier_submitted

Completion = TypeVar("Completion", bound=RecordResult)


def spec_hash(spec: RunSpec) -> str:
    """A spec's identity: sha256 of its canonical JSON (sorted keys, no nulls)."""
    canonical = json.dumps(
        spec.model_dump(mode="json", exclude_none=True), sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def create_args(
    run_id: str,
    spec: RunSpec,
    tools: Sequence[ToolDef],
    messages: Sequence[Message],
    child_of: ChildOf | None = None,
    submitted_by: str | None = None,
    start_at_ms: int | None = None,
    tenant: str | None = None,
) -> CreateRun:
    """`start_at_ms`: a delayed run's start; its first model step is a timer due then."""
    parent = child_of.parent if child_of is not None else None
    return CreateRun(
        run_id=run_id,
        spec=spec.model_dump_json(exclude_none=True),
        spec_hash=spec_hash(spec),
        tools={t.name: t.model_dump_json() for t in tools},
        tool_order=[t.name for t in tools],
        messages=[m.model_dump_json() for m in messages],
        # The run's span derives from its id; kept in the meta for anyone to look up,
        # with the span of the request that submitted it (its root's parent, or link).
        trace=json.dumps(run_carrier_submitted(run_id, submitted_by)),
        event=event_json(
            "start",
            run_id,
            model=spec.model.label,
            metadata=spec.metadata or None,
            parent=parent.model_dump() if parent is not None else None,
        ),
        next_job=model_job(run_id, 0, due_ms=start_at_ms),
        start_at_ms=start_at_ms,
        parent=parent.model_dump_json() if parent is not None else None,
        parent_job=parent_job(run_id, parent) if parent is not None else None,
        depth=child_of.depth if child_of is not None else 0,
        tenant=tenant,
    )


def model_job(run_id: str, step: int, *, due_ms: int | None = None) -> QueuedJob:
    envelope = JobEnvelope(kind="model_step", run_id=run_id, step=step)
    return queued_job(envelope, due_ms=due_ms)


def expiry_job(run_id: str, step: int, call: CallPlan) -> QueuedJob:
    """The timer that ends a parked call's wait (see expire_parked.lua)."""
    assert call.park_timeout_s is not None
    envelope = JobEnvelope(kind="park_expiry", run_id=run_id, step=step, call_id=call.id)
    return queued_job(envelope, defer_s=call.park_timeout_s)


def tool_job(run_id: str, step: int, call: CallPlan) -> QueuedJob:
    assert call.queue is not None
    envelope = JobEnvelope(
        kind="tool_call",
        run_id=run_id,
        step=step,
        call_id=call.id,
        timeout_s=call.timeout_s,
        needs=call.needs,
    )
    return queued_job(envelope, call.queue)


def start_job(run_id: str, step: int, call: CallPlan) -> QueuedJob:
    """The job that starts a parked call's work (a child run, a workflow)."""
    assert call.start_queue is not None
    envelope = JobEnvelope(kind="start_call", run_id=run_id, step=step, call_id=call.id)
    return queued_job(envelope, call.start_queue)


# Which of a transition's job fields its outcome enqueued (see the scripts' headers):
# commit_step enqueues its `jobs` before it joins or finishes; a join enqueues
# `next_job`; an approval its call's `job`. Any other outcome enqueued nothing.
_ENQUEUES: dict[Outcome, tuple[str, ...]] = {
    Outcome.CREATED: ("next_job",),
    Outcome.COMMITTED: ("jobs",),
    Outcome.FINISHED: ("jobs",),
    Outcome.CONTINUED: ("jobs", "next_job"),
    Outcome.APPROVED: ("job",),
}


def queued_jobs(args: TransitionInput, fields: Sequence[str]) -> list[QueuedJob]:
    """The jobs a transition's input carries in `fields` (absent fields carry none)."""
    jobs: list[QueuedJob] = []
    for field in fields:
        value = getattr(args, field, None)
        if isinstance(value, QueuedJob):
            jobs.append(value)
        elif isinstance(value, list):
            jobs.extend(job for job in value if isinstance(job, QueuedJob))
    return jobs


def enqueued_job_ids(args: TransitionInput, outcome: Outcome) -> list[str]:
    """The ids of the jobs the transition enqueued, given its reply's outcome (for the
    tracing layer's send spans)."""
    return [job.job_id for job in queued_jobs(args, _ENQUEUES.get(outcome, ()))]


def result_events(
    run_id: str, step: int, result: ToolResultPart, *, stored: bool = True
) -> list[str]:
    """The event of a call's result. `stored`: the transition writes the result into
    the step's hash (every call of the run's own), so the event refers to it there
    rather than carrying a second copy of the output (events.OUTPUT_REF); a provider-
    executed result, kept only in the step record, travels whole."""
    field = "error" if result.is_error else "output"
    shown: dict[str, Any] = (
        {OUTPUT_REF: field} if stored and result.output is not None else {field: result.output}
    )
    if result.is_error:
        return [
            event_json(
                "tool-error",
                run_id,
                step=step,
                tool_call_id=result.tool_call_id,
                tool_name=result.tool_name,
                kind=result.error_kind,
                **shown,
            )
        ]
    return [
        event_json(
            "tool-result",
            run_id,
            step=step,
            tool_call_id=result.tool_call_id,
            tool_name=result.tool_name,
            **shown,
            provider_executed=result.provider_executed or None,
        )
    ]


def trip_event(run_id: str, step: int, call_id: str, tool_name: str, trip: Trip) -> str:
    """A tool guardrail's trip, before the tool error the model sees."""
    return event_json(
        "guardrail-tripped",
        run_id,
        step=step,
        tool_call_id=call_id,
        tool_name=tool_name,
        stage=trip.stage,
        guardrail=trip.guardrail,
        reason=trip.reason,
    )


def step_record(plan: StepPlan, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """The step as stored once (the `resp` field) and shown in a RunResult; `usage`: its
    usage dumped already (the commit's finish-step event shows the same)."""
    return {
        "index": plan.step,
        "text": plan.text,
        "finish_reason": plan.finish_reason,
        "usage": plan.usage.model_dump() if usage is None else usage,
        "tool_calls": [{"id": c.id, "name": c.name, "input": c.input} for c in plan.calls],
        "provider_results": [
            c.result.model_dump() for c in plan.calls if c.result and c.result.provider_executed
        ],
        "provider_metadata": plan.provider_metadata,
        **({"prepared": plan.prepared} if plan.prepared is not None else {}),
        **({"output_mode": plan.output_mode} if plan.output_mode is not None else {}),
        # What the worker gathered for the stop conditions (a replay plans with it).
        **({"answers": plan.answers.model_dump()} if not plan.answers.empty else {}),
        **({"stop_reason": plan.stop_reason} if plan.stop_reason is not None else {}),
    }


def _shown(prepared: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the finish-step event says of the step's preparation: what was overridden
    (rule, hook, overrides, compaction), not the digests a replay compares."""
    shown = {k: v for k, v in (prepared or {}).items() if k != "sent"}
    return shown or None


def commit_args(run_id: str, plan: StepPlan) -> CommitStep:
    events: list[str] = []
    calls: list[CallRecord] = []
    jobs: list[QueuedJob] = []
    # Each read of these properties walks the calls again: read once here.
    local = plan.local_calls
    finishes_now = plan.finishes_now
    local_ids = {c.id for c in local}
    for call in plan.calls:
        events.append(
            event_json(
                "tool-call",
                run_id,
                step=plan.step,
                tool_call_id=call.id,
                tool_name=call.name,
                input=call.input,
                provider_executed=None if call.id in local_ids else True,
                coerced=call.coerced or None,
            )
        )
        if call.id not in local_ids:
            assert call.result is not None
            events.extend(result_events(run_id, plan.step, call.result, stored=False))
            continue
        calls.append(
            CallRecord(
                id=call.id,
                call=call.model_dump_json(exclude={"result"}),
                status=call.status,
                result=call.result.model_dump_json() if call.result else None,
            )
        )
        if call.status in PARKED_CALL_STATUSES and call.park_timeout_s is not None:
            jobs.append(expiry_job(run_id, plan.step, call))
        if call.status == CallStatus.AWAITING_APPROVAL:
            events.append(
                event_json(
                    "tool-approval-request",
                    run_id,
                    step=plan.step,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    input=call.input,
                )
            )
        elif call.status == CallStatus.DONE and call.result is not None:
            trip = plan.answers.tool_trips.get(call.id)
            if trip is not None:
                events.append(trip_event(run_id, plan.step, call.id, call.name, trip))
            events.extend(result_events(run_id, plan.step, call.result))
        elif call.status == CallStatus.QUEUED:
            jobs.append(tool_job(run_id, plan.step, call))
        if call.status == CallStatus.AWAITING_RESULT and call.start_queue is not None:
            jobs.append(start_job(run_id, plan.step, call))
    usage = plan.usage.model_dump()
    events.append(
        event_json(
            "finish-step",
            run_id,
            step=plan.step,
            finish_reason=plan.finish_reason,
            usage=usage,
            text=plan.text,
            prepared=_shown(plan.prepared),
        )
    )
    pending = sum(1 for c in local if c.status != CallStatus.DONE)
    return CommitStep(
        run_id=run_id,
        step=plan.step,
        resp=strict_json(step_record(plan, usage)),
        assistant=plan.assistant_message().model_dump_json(),
        text=plan.text,
        # The run's finish_reason if it ends with this step: the stop condition's name
        # when one ended it, else the model's.
        finish_reason=plan.stop_reason or plan.finish_reason,
        usage=plan.usage,
        after=plan.after,
        order=json.dumps([c.id for c in local]),
        calls=calls,
        events=events,
        jobs=jobs,
        pending=pending,
        parked=sum(1 for c in local if c.status in PARKED_CALL_STATUSES),
        finishes_now=finishes_now,
        next_job=None if finishes_now or pending else model_job(run_id, plan.step + 1),
        output=_output_json(plan),
        follow=[plan.retry.model_dump_json()] if plan.retry is not None else [],
        failure=plan.budget_failure,
    )


def _output_json(plan: StepPlan) -> str | None:
    if plan.output is None:
        return None
    return json.dumps(plan.output, ensure_ascii=False, separators=(",", ":"))


@overload
def result_args(run_id: str, step: int, result: ToolResultPart) -> RecordResult: ...


@overload
def result_args(
    run_id: str,
    step: int,
    result: ToolResultPart,
    *,
    completion: type[Completion],
) -> Completion: ...


def result_args(
    run_id: str,
    step: int,
    result: ToolResultPart,
    *,
    completion: type[RecordResult] = RecordResult,
) -> RecordResult:
    """A call's result as a completion: recorded from a worker (RecordResult), posted
    from outside (PostResult) or given at a parked call's deadline (ExpireParked)."""
    return completion(
        run_id=run_id,
        step=step,
        call_id=result.tool_call_id,
        result=result.model_dump_json(),
        events=result_events(run_id, step, result),
        next_job=model_job(run_id, step + 1),
    )


def input_request_args(
    run_id: str,
    step: int,
    *,
    call_id: str,
    tool_name: str,
    request_id: str,
    message: str,
    schema: dict[str, Any],
) -> InputRequest:
    request = {
        "tool_call_id": call_id,
        "tool_name": tool_name,
        "message": message,
        "schema": schema,
    }
    return InputRequest(
        run_id=run_id,
        step=step,
        call_id=call_id,
        request_id=request_id,
        request=json.dumps(request),
        event=event_json(
            "tool-input-request",
            run_id,
            step=step,
            tool_call_id=call_id,
            tool_name=tool_name,
            request_id=request_id,
            message=message,
            input=schema,
        ),
    )


def input_answer_args(
    run_id: str,
    step: int,
    *,
    request_id: str,
    call_id: str | None,
    outcome: InputStatus,
    content: dict[str, Any] | None = None,
) -> InputAnswer:
    """`outcome`: accepted (with `content`), declined, or expired (the call gave up)."""
    answer = None
    if outcome != InputStatus.EXPIRED:
        action = "accept" if outcome == InputStatus.ACCEPTED else "decline"
        answer = json.dumps({"action": action, "content": content})
    return InputAnswer(
        run_id=run_id,
        step=step,
        request_id=request_id,
        outcome=outcome,
        answer=answer,
        event=event_json(
            "tool-input-response",
            run_id,
            step=step,
            tool_call_id=call_id,
            request_id=request_id,
            outcome=outcome,
            output=content,
        ),
    )
