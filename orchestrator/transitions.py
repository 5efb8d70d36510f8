"""Arguments of the store's transitions, built from the pure core's decisions.

Pure: the same inputs give the same arguments (but for timestamps). Both the
workers (a step's plan, a call's result) and the client (approvals, posted
results) build their transitions here, so a result recorded from a worker and
one posted by a human take exactly the same path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentq.orchestrator.envelopes import MODEL_QUEUE, JobEnvelope, queued_job
from agentq.orchestrator.events import event_json
from agentq.orchestrator.loop import CallPlan, StepPlan
from agentq.orchestrator.messages import ToolResultPart


def model_job(run_id: str, step: int) -> dict[str, Any]:
    envelope = JobEnvelope(kind="model_step", run_id=run_id, step=step)
    return queued_job(envelope, MODEL_QUEUE).model_dump()


def tool_job(run_id: str, step: int, call: CallPlan) -> dict[str, Any]:
    assert call.queue is not None
    envelope = JobEnvelope(
        kind="tool_call", run_id=run_id, step=step, call_id=call.id, timeout_s=call.timeout_s
    )
    return queued_job(envelope, call.queue).model_dump()


# Which of a transition's jobs its outcome enqueued (for the tracing layer's send spans).
_ENQUEUES: dict[str, tuple[str, ...]] = {
    "created": ("next_job",),
    "committed": ("jobs",),
    "finished": ("jobs",),
    "continued": ("jobs", "next_job"),
    "approved": ("job",),
}


def enqueued_job_ids(args: Mapping[str, Any], outcome: str) -> list[str]:
    ids: list[str] = []
    for field in _ENQUEUES.get(outcome, ()):
        value = args.get(field)
        jobs = value if isinstance(value, list) else [value] if value else []
        ids.extend(str(job["job_id"]) for job in jobs)
    return ids


def result_events(run_id: str, step: int, result: ToolResultPart) -> list[str]:
    if result.is_error:
        return [
            event_json(
                "tool-error",
                run_id,
                step=step,
                tool_call_id=result.tool_call_id,
                tool_name=result.tool_name,
                error=result.output,
            )
        ]
    return [
        event_json(
            "tool-result",
            run_id,
            step=step,
            tool_call_id=result.tool_call_id,
            tool_name=result.tool_name,
            output=result.output,
            provider_executed=result.provider_executed or None,
        )
    ]


def step_record(plan: StepPlan) -> dict[str, Any]:
    """The step as stored once (the `resp` field) and shown in a RunResult."""
    return {
        "index": plan.step,
        "text": plan.text,
        "finish_reason": plan.finish_reason,
        "usage": plan.usage.model_dump(),
        "tool_calls": [{"id": c.id, "name": c.name, "input": c.input} for c in plan.calls],
        "provider_results": [
            c.result.model_dump() for c in plan.calls if c.result and c.result.provider_executed
        ],
        "provider_metadata": plan.provider_metadata,
    }


def commit_args(run_id: str, plan: StepPlan) -> dict[str, Any]:
    events: list[str] = []
    calls: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    local_ids = {c.id for c in plan.local_calls}
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
            )
        )
        if call.id not in local_ids:
            assert call.result is not None
            events.extend(result_events(run_id, plan.step, call.result))
            continue
        calls.append(
            {
                "id": call.id,
                "call": call.model_dump_json(exclude={"result"}),
                "status": call.status,
                "result": call.result.model_dump_json() if call.result else None,
            }
        )
        if call.status == "awaiting-approval":
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
        elif call.status == "done" and call.result is not None:
            events.extend(result_events(run_id, plan.step, call.result))
        elif call.status == "queued":
            jobs.append(tool_job(run_id, plan.step, call))
    events.append(
        event_json(
            "finish-step",
            run_id,
            step=plan.step,
            finish_reason=plan.finish_reason,
            usage=plan.usage.model_dump(),
            text=plan.text,
        )
    )
    return {
        "step": plan.step,
        "resp": json.dumps(step_record(plan), default=str),
        "assistant": plan.assistant_message().model_dump_json(),
        "text": plan.text,
        "finish_reason": plan.finish_reason,
        "usage": plan.usage.model_dump(),
        "after": plan.after,
        "order": json.dumps([c.id for c in plan.local_calls]),
        "calls": calls,
        "events": events,
        "jobs": jobs,
        "pending": sum(1 for c in plan.local_calls if c.status != "done"),
        "parked": sum(1 for c in plan.local_calls if c.status.startswith("awaiting")),
        "finishes_now": plan.finishes_now,
        "next_job": model_job(run_id, plan.step + 1),
    }


def result_args(run_id: str, step: int, result: ToolResultPart) -> dict[str, Any]:
    return {
        "step": step,
        "call_id": result.tool_call_id,
        "result": result.model_dump_json(),
        "events": result_events(run_id, step, result),
        "next_job": model_job(run_id, step + 1),
    }


def input_request_args(
    run_id: str,
    step: int,
    *,
    call_id: str,
    tool_name: str,
    request_id: str,
    message: str,
    schema: dict[str, Any],
) -> dict[str, Any]:
    request = {
        "tool_call_id": call_id,
        "tool_name": tool_name,
        "message": message,
        "schema": schema,
    }
    return {
        "step": step,
        "request_id": request_id,
        "request": json.dumps(request),
        "event": event_json(
            "tool-input-request",
            run_id,
            step=step,
            tool_call_id=call_id,
            tool_name=tool_name,
            request_id=request_id,
            message=message,
            input=schema,
        ),
    }


def input_answer_args(
    run_id: str,
    step: int,
    *,
    request_id: str,
    call_id: str | None,
    outcome: str,
    content: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`outcome`: accepted (with `content`), declined, or expired (the call gave up)."""
    answer = None
    if outcome != "expired":
        action = "accept" if outcome == "accepted" else "decline"
        answer = json.dumps({"action": action, "content": content})
    return {
        "step": step,
        "request_id": request_id,
        "outcome": outcome,
        "answer": answer,
        "event": event_json(
            "tool-input-response",
            run_id,
            step=step,
            tool_call_id=call_id,
            request_id=request_id,
            outcome=outcome,
            output=content,
        ),
    }
