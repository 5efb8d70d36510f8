"""RunResult: what `wait` returns, assembled from the stored run (pure)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.concurrency.slots import KeyLimit
from agentq.orchestrator.core.messages import MESSAGE_ADAPTER, Message, ToolResultPart, Usage
from agentq.orchestrator.core.run_ids import ParentLink, child_run_id
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.runs.state import (
    TERMINAL_STATUSES,
    CallStatus,
    InputStatus,
    MetaField,
    RunFailure,
    RunStatus,
    StepField,
    stored_usage,
)

__all__ = ["TERMINAL_STATUSES", "RunResult", "RunStatus", "StepResult", "assemble"]


class ToolCallRecord(BaseModel):
    id: str
    name: str
    input: Any = None


class ToolResultRecord(BaseModel):
    tool_call_id: str
    name: str
    output: Any = None
    is_error: bool = False
    error_kind: ToolErrorKind | None = None
    provider_executed: bool = False


class StepResult(BaseModel):
    index: int
    text: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    tool_results: list[ToolResultRecord] = Field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = Field(default_factory=Usage)
    # When prepareStep or context management changed what the step sent: the rule, the
    # hook, the overrides, the compaction (orchestrator/loop/prepare.py).
    prepared: dict[str, Any] | None = None
    # Answered through a provider batch API (batch-priced).
    batch_priced: bool = False


class RunResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    status: RunStatus
    text: str = ""
    # The structured output, parsed, when the spec asked for one (orchestrator/output/).
    output: Any = None
    steps: list[StepResult] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    messages: list[Message] = Field(default_factory=list)
    error: RunFailure | None = None
    # Why a succeeded run ended: its last step's finish reason, or the stop condition
    # that ended it (`stop_when: has_text_matching 'DONE'`).
    finish_reason: str | None = None
    # Calls waiting on a human or an outside result: (step, call id, tool, why).
    pending: list[dict[str, Any]] = Field(default_factory=list)
    # Sub-agents: the parent's call this run answers (a child run), the child runs its
    # own agent calls started (call id -> run id), and what those used, apart from `usage`.
    parent: ParentLink | None = None
    children: dict[str, str] = Field(default_factory=dict)
    child_usage: Usage = Field(default_factory=Usage)
    # A fork's original: {"run_id", "step"} (orchestrator/runs/fork.py).
    origin: dict[str, Any] | None = None
    # A delayed run's start time (seconds since the epoch); status `scheduled` until then.
    start_at: float | None = None
    # Its concurrency key and max (orchestrator/concurrency/), when the spec named one.
    concurrency: KeyLimit | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == RunStatus.SUCCEEDED


def _result_record(part: ToolResultPart) -> ToolResultRecord:
    return ToolResultRecord(
        tool_call_id=part.tool_call_id,
        name=part.tool_name,
        output=part.output,
        is_error=part.is_error,
        error_kind=part.error_kind,
        provider_executed=part.provider_executed,
    )


def _step_result(raw: dict[str, str]) -> StepResult | None:
    if StepField.RESP not in raw:
        return None
    record = json.loads(raw[StepField.RESP])
    results = [_result_record(ToolResultPart.model_validate(r)) for r in record["provider_results"]]
    for call_id in json.loads(raw.get(StepField.ORDER, "[]")):
        if (result := raw.get(StepField.RESULT + call_id)) is not None:
            results.append(_result_record(ToolResultPart.model_validate_json(result)))
    return StepResult(
        index=record["index"],
        text=record["text"],
        tool_calls=[ToolCallRecord.model_validate(c) for c in record["tool_calls"]],
        tool_results=results,
        finish_reason=record["finish_reason"],
        usage=Usage.model_validate(record["usage"]),
        # Shown when something was changed; the digests (`sent`) are for replay.
        prepared={k: v for k, v in (record.get("prepared") or {}).items() if k != "sent"} or None,
        batch_priced=raw.get(StepField.BATCH) == "1",
    )


def _pending(raw: dict[str, str], step: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for field, status in raw.items():
        if field.startswith(StepField.INPUT_STATUS) and status == InputStatus.PENDING:
            request_id = field.removeprefix(StepField.INPUT_STATUS)
            request = json.loads(raw[StepField.INPUT + request_id])
            out.append(
                {"step": step, "request_id": request_id, "status": "awaiting-input", **request}
            )
    for call_id in json.loads(raw.get(StepField.ORDER, "[]")):
        status = raw.get(StepField.CALL_STATUS + call_id, "")
        if status in (CallStatus.AWAITING_APPROVAL, CallStatus.AWAITING_RESULT):
            call = json.loads(raw[StepField.CALL + call_id])
            if call.get("start_queue") and status == CallStatus.AWAITING_RESULT:
                continue  # a child run or a workflow answers it: nobody outside waits
            out.append(
                {
                    "step": step,
                    "tool_call_id": call_id,
                    "tool_name": call["name"],
                    "input": call.get("input"),
                    "status": status,
                }
            )
    return out


def _children(run_id: str, steps: list[StepResult], agent_tools: frozenset[str]) -> dict[str, str]:
    return {
        call.id: child_run_id(run_id, step.index, call.id)
        for step in steps
        for call in step.tool_calls
        if call.name in agent_tools
    }


def assemble(
    run_id: str,
    meta: dict[str, str],
    messages: list[str],
    steps: list[dict[str, str]],
    agent_tools: frozenset[str] = frozenset(),
) -> RunResult:
    """`agent_tools`: the names of the run's sub-agent tools (their calls start children)."""
    step_results = [s for s in (_step_result(raw) for raw in steps) if s is not None]
    n_initial = int(meta.get(MetaField.N_INITIAL, "0"))
    status = RunStatus(meta[MetaField.STATUS])
    # An ended run's parked calls stay recorded, but nobody can answer them any more.
    ended = status in TERMINAL_STATUSES
    pending = _pending(steps[-1], len(steps) - 1) if steps and not ended else []
    return RunResult(
        id=run_id,
        status=status,
        text=meta.get(MetaField.TEXT, step_results[-1].text if step_results else ""),
        output=json.loads(meta[MetaField.OUTPUT]) if MetaField.OUTPUT in meta else None,
        steps=step_results,
        usage=stored_usage(meta),
        messages=[MESSAGE_ADAPTER.validate_json(m) for m in messages[n_initial:]],
        error=RunFailure.model_validate_json(meta[MetaField.ERROR])
        if MetaField.ERROR in meta
        else None,
        pending=pending,
        finish_reason=steps[-1].get(StepField.FINISH_REASON)
        if steps and status == RunStatus.SUCCEEDED
        else None,
        parent=ParentLink.model_validate_json(meta[MetaField.PARENT])
        if MetaField.PARENT in meta
        else None,
        children=_children(run_id, step_results, agent_tools),
        child_usage=stored_usage(meta, children=True),
        origin=json.loads(meta[MetaField.ORIGIN]) if MetaField.ORIGIN in meta else None,
        start_at=float(meta[MetaField.START_AT]) if MetaField.START_AT in meta else None,
        concurrency=KeyLimit(key=meta[MetaField.CONC_KEY], max=int(meta[MetaField.CONC_MAX]))
        if MetaField.CONC_KEY in meta
        else None,
    )
