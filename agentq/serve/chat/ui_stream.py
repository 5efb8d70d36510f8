"""agentq events -> the AI SDK's UI message stream chunks (pure).

Chunk names and fields follow the `ai` package's `uiMessageChunkSchema` (v5 and later);
the Node test validates every chunk against that schema. The message id is the run id,
tool approvals use the call id as their approval id. Text and reasoning stream as parts:
one part is open at a time, and a delta of the other kind (or anything else) closes it.
A call's arguments stream as `tool-input-start` and `tool-input-delta` chunks, and its
`tool-call` event is `tool-input-available`. A run's structured output ends its part of
the message as a `data-output` chunk (a data part the client keeps on the message).
"""

from __future__ import annotations

import json
from typing import Any

from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core.events import Event
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.runs.result import StepResult

Chunk = dict[str, Any]

FINISH_REASONS = frozenset({"stop", "length", "content-filter", "tool-calls", "error", "other"})
_FINISH_ALIASES = {
    "tool_calls": "tool-calls",
    "content_filter": "content-filter",
    "max_tokens": "length",
}


def finish_reason(value: Any) -> str:
    reason = _FINISH_ALIASES.get(str(value), str(value))
    return reason if reason in FINISH_REASONS else "other"


def _error_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return str(value["message"])
    return json.dumps(value, default=str)


def _error_kind(kind: ToolErrorKind | None) -> Chunk:
    """The error's kind where the `ai` client keeps it on the tool part: the chunk schema
    has no field of its own for it, and `providerMetadata` is the namespaced map it
    keeps on the part (`part.resultProviderMetadata.agentq.errorKind`)."""
    return {} if kind is None else {"providerMetadata": {"agentq": {"errorKind": kind.value}}}


class UIChunks:
    """The chunks of one response; keeps which part (text or reasoning) is open and which
    calls were denied."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._open: tuple[str, str] | None = None  # ("text" | "reasoning", part id)
        self._denied: set[str] = set()
        self._steps: set[int] = set()
        # A step re-delivered after its worker died streams its text again from the
        # start, as a later attempt; the client cannot take back what it was sent. Per
        # (kind, step): the attempt streaming, the text the client has, and what the
        # current attempt has said so far.
        self._attempt: dict[tuple[str, int], int] = {}
        self._shown: dict[tuple[str, int], str] = {}
        self._said: dict[tuple[str, int], str] = {}
        # The latest attempt of each step seen: an earlier attempt's tool input is stale.
        self._latest: dict[int, int] = {}
        # The calls whose `tool-input-start` the client has: the schema refuses a delta
        # before its start, and `tool-input-available` needs no second start.
        self._started: set[str] = set()

    def start(self) -> Chunk:
        return {"type": "start", "messageId": self.run_id}

    def close(self, finish: ev.Finish) -> list[Chunk]:
        """This run ended (`finish`): close the open part and add its output, if any. The
        message may go on with another run (a held turn) or end with `finish`."""
        return [*self._close_part(), *_output(finish)]

    def _close_part(self) -> list[Chunk]:
        if self._open is None:
            return []
        kind, part_id = self._open
        self._open = None
        return [{"type": f"{kind}-end", "id": part_id}]

    def _delta(self, kind: str, event: ev.TextDelta | ev.ReasoningDelta) -> list[Chunk]:
        key = (kind, event.step)
        attempt = self._attempt.setdefault(key, event.attempt)
        if event.attempt < attempt:  # a late delta of an attempt a later one replaced
            return []
        if event.attempt > attempt:
            self._attempt[key], self._said[key] = event.attempt, ""
        said = self._said[key] = self._said.get(key, "") + event.delta
        shown = self._shown.get(key, "")
        if shown.startswith(said):  # the new attempt repeats what the client has
            return []
        fresh = not said.startswith(shown)  # it says something else: a part of its own
        self._shown[key] = said
        opened: list[Chunk] = []
        if fresh or self._open is None or self._open[0] != kind:
            opened = self._close_part()
            self._open = (kind, f"{kind}-{event.step}-{event.seq}")
            opened.append({"type": f"{kind}-start", "id": self._open[1]})
        delta = said if fresh else said[len(shown) :]
        return [*opened, {"type": f"{kind}-delta", "id": self._open[1], "delta": delta}]

    def _tool_input(self, event: ev.ToolInputStart | ev.ToolInputDelta) -> list[Chunk]:
        latest = self._latest.setdefault(event.step, event.attempt)
        if event.attempt < latest:  # a late piece of an attempt a later one replaced
            return []
        self._latest[event.step] = event.attempt
        call_id = event.tool_call_id
        if isinstance(event, ev.ToolInputStart):
            self._started.add(call_id)
            start = {"type": "tool-input-start", "toolCallId": call_id, "toolName": event.tool_name}
            return [*self._close_part(), start]
        if call_id not in self._started:
            return []
        return [{"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": event.delta}]

    def _tool_call(self, event: ev.ToolCall) -> list[Chunk]:
        provider = _provider(event.provider_executed)
        call_id, name = event.tool_call_id, event.tool_name
        start: list[Chunk] = []
        if call_id not in self._started:  # not streamed (scripted, unstreamed, provider's)
            start = [{"type": "tool-input-start", "toolCallId": call_id, "toolName": name}]
            start[0].update(provider)
        available = {"type": "tool-input-available", "toolCallId": call_id, "toolName": name}
        return [*self._close_part(), *start, {**available, "input": event.input, **provider}]

    def recall(self, step: StepResult) -> list[Chunk]:
        """A new message that goes on from a step an earlier response showed (the user
        answered its calls and wrote a new message at once): the step's calls again,
        with the results they already have, so the results still to come attach."""
        done = {r.tool_call_id: r for r in step.tool_results}
        chunks: list[Chunk] = [{"type": "start-step"}]
        for call in step.tool_calls:
            chunks.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": call.id,
                    "toolName": call.name,
                    "input": call.input,
                }
            )
            result = done.get(call.id)
            if result is None:
                continue
            chunks.append(
                {
                    "type": "tool-output-error",
                    "errorText": _error_text(result.output),
                    **_error_kind(result.error_kind),
                }
                if result.is_error
                else {"type": "tool-output-available", "output": result.output}
            )
            chunks[-1]["toolCallId"] = call.id
        return chunks

    def park(self) -> list[Chunk]:
        """The run waits for the user (an approval, a client tool): this response ends."""
        return [*self._close_part(), {"type": "finish", "finishReason": "tool-calls"}]

    def feed(self, event: Event) -> list[Chunk]:
        match event:
            case ev.StartStep(step=step, attempt=attempt):
                self._latest[step] = max(attempt, self._latest.get(step, attempt))
                if step in self._steps:  # a retried attempt of the same step
                    return []
                self._steps.add(step)
                return [{"type": "start-step"}]
            case ev.TextDelta():
                return self._delta("text", event)
            case ev.ReasoningDelta():
                return self._delta("reasoning", event)
            case ev.ToolInputStart() | ev.ToolInputDelta():
                return self._tool_input(event)
            case ev.ToolCall():
                return self._tool_call(event)
            case ev.ToolApprovalRequest(tool_call_id=call_id):
                return [
                    {"type": "tool-approval-request", "approvalId": call_id, "toolCallId": call_id}
                ]
            case ev.ToolApprovalResponse(tool_call_id=call_id, approved=approved):
                if approved:
                    return []
                self._denied.add(call_id)
                return [{"type": "tool-output-denied", "toolCallId": call_id}]
            case ev.ToolProgress(tool_call_id=call_id, output=output):
                return [
                    {
                        "type": "tool-output-available",
                        "toolCallId": call_id,
                        "output": output,
                        "preliminary": True,
                    }
                ]
            case ev.ToolResult(tool_call_id=call_id, output=output):
                return [
                    {
                        "type": "tool-output-available",
                        "toolCallId": call_id,
                        "output": output,
                        **_provider(event.provider_executed),
                    }
                ]
            case ev.ToolError(tool_call_id=call_id, error=error):
                if call_id in self._denied:  # the denial already said it
                    return []
                return [
                    {
                        "type": "tool-output-error",
                        "toolCallId": call_id,
                        "errorText": _error_text(error),
                        **_error_kind(event.kind),
                    }
                ]
            case ev.FinishStep():
                return [*self._close_part(), {"type": "finish-step"}]
            case ev.Finish(finish_reason=reason):
                return [
                    *self.close(event),
                    {"type": "finish", "finishReason": finish_reason(reason)},
                ]
            case ev.Error(error=error):
                return [*self._close_part(), {"type": "error", "errorText": _error_text(error)}]
            case ev.Abort(reason=reason):
                return [
                    *self._close_part(),
                    {"type": "abort", **({"reason": reason} if reason else {})},
                ]
            case _:
                return []


def _output(finish: ev.Finish) -> list[Chunk]:
    """The run's structured output as a data part, named by the run (a held turn's
    message may hold two runs' outputs); none when the spec asked for none."""
    if finish.output is None:
        return []
    return [{"type": "data-output", "id": finish.run_id, "data": finish.output}]


def _provider(executed: bool | None) -> Chunk:
    return {"providerExecuted": True} if executed else {}
