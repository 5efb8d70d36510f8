"""RunResult: what `wait` returns, assembled from the stored run (pure)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.messages import MESSAGE_ADAPTER, Message, ToolResultPart, Usage

RunStatus = Literal["running", "awaiting", "succeeded", "failed", "cancelled"]
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})


class ToolCallRecord(BaseModel):
    id: str
    name: str
    input: Any = None


class ToolResultRecord(BaseModel):
    tool_call_id: str
    name: str
    output: Any = None
    is_error: bool = False
    provider_executed: bool = False


class StepResult(BaseModel):
    index: int
    text: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    tool_results: list[ToolResultRecord] = Field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = Field(default_factory=Usage)


class RunResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    status: RunStatus
    text: str = ""
    steps: list[StepResult] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    messages: list[Message] = Field(default_factory=list)
    error: dict[str, Any] | None = None
    # Calls waiting on a human or an outside result: (step, call id, tool, why).
    pending: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


def _result_record(part: ToolResultPart) -> ToolResultRecord:
    return ToolResultRecord(
        tool_call_id=part.tool_call_id,
        name=part.tool_name,
        output=part.output,
        is_error=part.is_error,
        provider_executed=part.provider_executed,
    )


def _step_result(raw: dict[str, str]) -> StepResult | None:
    if "resp" not in raw:
        return None
    record = json.loads(raw["resp"])
    results = [_result_record(ToolResultPart.model_validate(r)) for r in record["provider_results"]]
    for call_id in json.loads(raw.get("order", "[]")):
        if f"r:{call_id}" in raw:
            results.append(_result_record(ToolResultPart.model_validate_json(raw[f"r:{call_id}"])))
    return StepResult(
        index=record["index"],
        text=record["text"],
        tool_calls=[ToolCallRecord.model_validate(c) for c in record["tool_calls"]],
        tool_results=results,
        finish_reason=record["finish_reason"],
        usage=Usage.model_validate(record["usage"]),
    )


def _pending(raw: dict[str, str], step: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for field, status in raw.items():
        if field.startswith("ins:") and status == "pending":
            request_id = field[len("ins:") :]
            request = json.loads(raw[f"in:{request_id}"])
            out.append(
                {"step": step, "request_id": request_id, "status": "awaiting-input", **request}
            )
    for call_id in json.loads(raw.get("order", "[]")):
        status = raw.get(f"st:{call_id}", "")
        if status.startswith("awaiting"):
            call = json.loads(raw[f"c:{call_id}"])
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


def assemble(
    run_id: str, meta: dict[str, str], messages: list[str], steps: list[dict[str, str]]
) -> RunResult:
    step_results = [s for s in (_step_result(raw) for raw in steps) if s is not None]
    n_initial = int(meta.get("n_initial", "0"))
    pending = _pending(steps[-1], len(steps) - 1) if steps else []
    return RunResult(
        id=run_id,
        status=meta["status"],
        text=meta.get("text", step_results[-1].text if step_results else ""),
        steps=step_results,
        usage=Usage(
            input_tokens=int(meta.get("u_in", 0)),
            output_tokens=int(meta.get("u_out", 0)),
            total_tokens=int(meta.get("u_total", 0)),
            cached_input_tokens=int(meta.get("u_cached", 0)),
            reasoning_tokens=int(meta.get("u_reason", 0)),
        ),
        messages=[MESSAGE_ADAPTER.validate_json(m) for m in messages[n_initial:]],
        error=json.loads(meta["error"]) if "error" in meta else None,
        pending=pending,
    )
