"""Replaying a run: today's loop, fed the run's recorded model responses and tool results.

No provider and no tool is called. For each recorded step, the history is rebuilt
the way today's code builds it (assistant messages from the recorded responses,
tool messages from the recorded results), the step is prepared the way today's
code prepares it (step rules, the hook's recorded overrides, context compaction
with the recorded summaries) and the result is compared with what the step
recorded it sent; then today's planner is run on the recorded response and its
path (which calls, parked or queued or answered at once; continue or finish)
compared with the recorded one. Every difference is a `Divergence`: a
regression check for prompt and loop changes. Pure: the caller reads the run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from agentq.orchestrator.core.messages import (
    MESSAGE_ADAPTER,
    Message,
    ToolMessage,
    ToolResultPart,
    Usage,
)
from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.loop.context import (
    bounds,
    compact,
    tokens_to_compact,
    with_summary,
)
from agentq.orchestrator.loop.plan import Answers, StepPlan, offered_tools, plan_step
from agentq.orchestrator.loop.prepare import (
    StepOverrides,
    applied,
    called_before,
    matching_rule,
    messages_digest,
    rule_overrides,
    sent_record,
)
from agentq.orchestrator.output.judge import StepOutput, attempts_in
from agentq.orchestrator.runs.state import MetaField, StepField
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef

# The fields of a step's `sent` record, in the order a divergence is reported.
_SENT_FIELDS = ("model", "system", "tools", "tool_choice", "n_messages", "messages")


class Divergence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: int
    what: str  # "system", "messages", "tools", ..., or "path"
    recorded: Any = None
    today: Any = None

    def line(self) -> str:
        return (
            f"step {self.step}: {self.what} differs: recorded {_short(self.recorded)}, "
            f"today {_short(self.today)}"
        )


class ReplayReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    steps: int
    divergences: list[Divergence] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def diverged(self) -> bool:
        return bool(self.divergences)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def recorded_response(resp: Mapping[str, Any]) -> ModelResponse:
    """A step's model response as its record keeps it."""
    provider_results = {r["tool_call_id"]: r.get("output") for r in resp["provider_results"]}
    return ModelResponse(
        text=resp["text"],
        tool_calls=[
            ProviderToolCall(
                id=c["id"],
                name=c["name"],
                arguments=c.get("input"),
                provider_executed=c["id"] in provider_results,
                provider_result=provider_results.get(c["id"]),
            )
            for c in resp["tool_calls"]
        ],
        finish_reason=resp["finish_reason"],
        usage=Usage.model_validate(resp["usage"]),
        provider_metadata=resp.get("provider_metadata") or {},
    )


def _prepared_today(
    spec: RunSpec,
    tools: list[ToolDef],
    step: int,
    history: list[Message],
    recorded: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
) -> tuple[RunSpec, list[Message]]:
    """What today's preparation would send at this step; the hook's overrides and the
    summary (model outputs both) are taken from the record."""
    overrides = StepOverrides()
    matched = matching_rule(spec.steps, step, called_before(history))
    if matched is not None:
        overrides = rule_overrides(matched[1])
    if "hook_overrides" in recorded:
        overrides = overrides.then(StepOverrides.model_validate(recorded["hook_overrides"]))
    effective = applied(spec, overrides)
    messages = list(overrides.messages) if overrides.messages is not None else history
    policy = spec.context
    if policy is None:
        return effective, messages
    tokens = tokens_to_compact(
        messages,
        max_input_tokens=policy.max_input_tokens,
        keep_last=policy.keep_last_messages,
        previous=previous,
    )
    if tokens is None:
        return effective, messages
    if policy.strategy != "summarize":
        out, _ = compact(
            messages,
            policy.strategy,
            max_input_tokens=policy.max_input_tokens,
            keep_last=policy.keep_last_messages,
            tokens=tokens,
        )
        return effective, out
    compaction = recorded.get("compaction") or {}
    if compaction.get("summary") is None:
        return effective, messages  # today's code would summarize: the sent record says so
    head, _ = bounds(messages, policy.keep_last_messages)
    return effective, with_summary(
        messages, head, compaction["summary_upto"], compaction["summary"]
    )


def _path(plan: StepPlan) -> list[Any]:
    calls = [[c.id, c.name, str(c.status)] for c in plan.calls]
    return [calls, str(plan.after)]


def _recorded_path(raw: Mapping[str, str], resp: Mapping[str, Any]) -> list[Any]:
    calls = []
    for c in resp["tool_calls"]:
        stored = raw.get(StepField.CALL + c["id"])
        status = json.loads(stored)["status"] if stored else "done"
        calls.append([c["id"], c["name"], status])
    return [calls, raw.get(StepField.AFTER, "")]


def _results(raw: Mapping[str, str], plan: StepPlan) -> ToolMessage | None:
    """The step's tool message: its recorded results in today's call order."""
    parts = [
        ToolResultPart.model_validate_json(raw[StepField.RESULT + c.id])
        for c in plan.local_calls
        if StepField.RESULT + c.id in raw
    ]
    return ToolMessage(content=parts) if parts else None


def _output(
    spec: RunSpec, resp: Mapping[str, Any], history: Sequence[Message]
) -> StepOutput | None:
    """The output the step was judged for, in the mode it recorded (the endpoint's, which
    a replay does not resolve again)."""
    mode = resp.get("output_mode")
    if spec.output is None or mode is None:
        return None
    return StepOutput(spec=spec.output, mode=mode, attempts=attempts_in(history))


def replay(
    run_id: str,
    spec: RunSpec,
    tools: list[ToolDef],
    meta: Mapping[str, str],
    messages: Sequence[str],
    steps: Sequence[Mapping[str, str]],
) -> ReplayReport:
    """Today's loop over the run's record; every difference from what it recorded."""
    n_initial = int(meta.get(MetaField.N_INITIAL, "0"))
    history: list[Message] = [MESSAGE_ADAPTER.validate_json(m) for m in messages[:n_initial]]
    stored = [MESSAGE_ADAPTER.validate_json(m) for m in messages]
    out: list[Divergence] = []
    previous: dict[str, Any] | None = None
    replayed = 0
    for step, raw in enumerate(steps):
        if StepField.RESP not in raw:
            break  # the step never committed: nothing recorded to replay
        resp = json.loads(raw[StepField.RESP])
        recorded = resp.get("prepared") or {}
        effective, sent = _prepared_today(spec, tools, step, history, recorded, previous)
        offered = [t.name for t in offered_tools(effective, tools)]
        today = sent_record(effective, sent, offered)
        if "sent" in recorded:
            out.extend(
                Divergence(step=step, what=f, recorded=recorded["sent"][f], today=today[f])
                for f in _SENT_FIELDS
                if recorded["sent"].get(f) != today[f]
            )
        elif stored[: len(history)] != history:
            # A step recorded before steps recorded what they sent: compare the histories.
            out.append(
                Divergence(
                    step=step,
                    what="messages",
                    recorded=messages_digest(stored[: len(history)]),
                    today=messages_digest(history),
                )
            )
        answers = Answers.model_validate(resp.get("answers") or {})
        plan = plan_step(
            effective,
            tools,
            step,
            recorded_response(resp),
            answers,
            _output(effective, resp, history),
        )
        if _path(plan) != _recorded_path(raw, resp):
            out.append(
                Divergence(
                    step=step, what="path", recorded=_recorded_path(raw, resp), today=_path(plan)
                )
            )
        history.append(plan.assistant_message())
        if plan.retry is not None:
            history.append(plan.retry)
        results = _results(raw, plan)
        if results is not None:
            history.append(results)
        previous = resp
        replayed += 1
    return ReplayReport(run_id=run_id, steps=replayed, divergences=out)
