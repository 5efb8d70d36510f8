"""Run events: the append-only stream a client follows, one typed model per event type.

Events are stored as JSON without their `seq`; the sequence is the stream entry id
(`0-<seq>`), assigned atomically with the transition that emits the event, so a reader
resumes after any seq without gaps or duplicates. `parse_event` turns a stored entry
into its model; `Event` is the union of the models, discriminated on `type`, so a
reader matches on the class (`case TextDelta(delta=d):`) instead of reading fields by
string. Names follow the AI SDK's stream parts where the two overlap.

The wire form (HTTP, SSE, the CLI's `events`) is `wire_json`: the fields the emitter
wrote, in the order emitters write them.
The fields each model declares are what the emitters (the `event_json` calls, and
`finish_run` in the runs' Lua prelude) write; a test reads the emitters to keep the
two equal. Models forbid unknown fields so a field added to an emitter and not here
fails a test rather than vanishing from the wire.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal, get_args

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.core.tool_errors import ToolErrorKind

EventType = Literal[
    "start",
    "start-step",
    "step-held",
    "model-retry",
    "text-delta",
    "reasoning-delta",
    "tool-input-start",
    "tool-input-delta",
    "tool-call",
    "tool-call-repair",
    "tool-approval-request",
    "tool-approval-response",
    "tool-input-request",
    "tool-input-response",
    "tool-running",
    "tool-progress",
    "tool-log",
    "tool-result",
    "tool-error",
    "guardrail-tripped",
    "finish-step",
    "context-compacted",
    "finish",
    "error",
    "abort",
    # After the run's other events (perhaps after it ended): a webhook gave up on one.
    "webhook-failed",
]


class _Event(BaseModel):
    """What every event carries. A tool call without a run (`client.calls`) has its own
    stream: there `run_id` is the call's id and its events have no `step`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int
    type: str  # each model narrows it to its own literal (the union's discriminator)
    run_id: str
    at: float


# -- the run and its steps --------------------------------------------------------


class Start(_Event):
    """The run was created (or forked from another run's step)."""

    type: Literal["start"]
    model: str | None = None  # the model's label; a fork of a run without one has none
    metadata: dict[str, Any] | None = None
    parent: dict[str, Any] | None = None  # a child run's parent call (run_id, step, call_id)
    forked_from: dict[str, Any] | None = None


class StartStep(_Event):
    """A model step's job started; attempt > 1 when a worker died mid-step."""

    type: Literal["start-step"]
    step: int
    attempt: int = 1


class StepHeld(_Event):
    """A shared budget (a batch's or a tenant's, orchestrator/budgets/) is reached: the
    step's model call did not start. It starts again (a new `start-step`) when the budget
    is raised or its window rolls over."""

    type: Literal["step-held"]
    step: int
    budget: str  # the budget's scope: `batch:<tenant>:<id>` or `tenant:<tenant>`
    message: str


class ModelRetry(_Event):
    """A failed model call is about to be retried."""

    type: Literal["model-retry"]
    step: int
    reason: str  # the HTTP status only: a provider's message may echo a key
    delay_s: float
    attempt: int
    max_attempts: int


class TextDelta(_Event):
    type: Literal["text-delta"]
    step: int
    attempt: int = 1  # deltas of an attempt a later one replaced are stale
    delta: str


class ReasoningDelta(_Event):
    type: Literal["reasoning-delta"]
    step: int
    attempt: int = 1
    delta: str


class ToolInputStart(_Event):
    """The model began a call: its arguments stream next, as `tool-input-delta` events,
    and its `tool-call` event (the AI SDK's `tool-input-available`) has them whole."""

    type: Literal["tool-input-start"]
    step: int
    attempt: int = 1  # as a text delta's: a later attempt's calls replace these
    tool_call_id: str
    tool_name: str


class ToolInputDelta(_Event):
    """A piece of a call's arguments (JSON text) as the provider streamed it."""

    type: Literal["tool-input-delta"]
    step: int
    attempt: int = 1
    tool_call_id: str
    delta: str


class FinishStep(_Event):
    type: Literal["finish-step"]
    step: int
    finish_reason: str
    usage: Usage
    text: str
    # What was overridden while preparing the step (rule, hook, overrides, compaction).
    prepared: dict[str, Any] | None = None


class ContextCompacted(_Event):
    """The step's history was compacted before the model call (loop.context.Compaction)."""

    type: Literal["context-compacted"]
    step: int
    strategy: str
    before_tokens: int
    after_tokens: int
    before_messages: int
    after_messages: int
    summary_upto: int | None = None
    summary: str | None = None


# -- tool calls (`step` is None on a standalone call's stream) --------------------


class ToolCall(_Event):
    type: Literal["tool-call"]
    step: int | None = None
    tool_call_id: str
    tool_name: str
    input: Any = None
    provider_executed: bool | None = None  # the provider ran it (web search, …)
    # Where the input was coerced to the schema before validation ("2" -> 2; "a", "b/c").
    coerced: list[str] | None = None


class ToolCallRepair(_Event):
    """A call's invalid input was sent back for repair; `repaired` says if that worked."""

    type: Literal["tool-call-repair"]
    step: int
    tool_call_id: str
    tool_name: str
    input: Any = None
    error: str
    repaired: bool
    repaired_input: Any = None
    attempts: int


class ToolApprovalRequest(_Event):
    type: Literal["tool-approval-request"]
    step: int
    tool_call_id: str
    tool_name: str
    input: Any = None


class ToolApprovalResponse(_Event):
    type: Literal["tool-approval-response"]
    step: int
    tool_call_id: str
    tool_name: str | None = None
    approved: bool
    reason: str | None = None
    # An approver who edited the call's input: what the model asked, and what runs.
    original_input: Any = None
    input: Any = None


class ToolInputRequest(_Event):
    """A running tool asks for input (MCP elicitation, or sampling when `kind` says so)."""

    type: Literal["tool-input-request"]
    step: int | None = None
    tool_call_id: str
    tool_name: str
    request_id: str
    kind: str | None = None
    message: str = ""
    input: Any = None  # the requested schema, or the sampling request


class ToolInputResponse(_Event):
    type: Literal["tool-input-response"]
    step: int
    tool_call_id: str
    request_id: str
    outcome: str
    output: Any = None


class ToolRunning(_Event):
    """A worker claimed the call; attempt > 1 when an earlier worker died running it."""

    type: Literal["tool-running"]
    step: int | None = None
    tool_call_id: str
    attempt: int = 1
    tool_name: str | None = None  # a run's claim adds it; a standalone call's has none


class ToolProgress(_Event):
    type: Literal["tool-progress"]
    step: int | None = None
    tool_call_id: str
    tool_name: str
    output: Any = None


class ToolLog(_Event):
    """A log line an MCP server sent while running a standalone call."""

    type: Literal["tool-log"]
    tool_call_id: str
    tool_name: str
    level: str
    data: Any = None
    logger: str | None = None


class ToolResult(_Event):
    type: Literal["tool-result"]
    step: int | None = None
    tool_call_id: str
    tool_name: str
    output: Any = None
    provider_executed: bool | None = None


class ToolError(_Event):
    type: Literal["tool-error"]
    step: int | None = None
    tool_call_id: str
    tool_name: str
    error: Any = None
    # None only for an error posted with a conversation's history, never for our calls.
    kind: ToolErrorKind | None = None


class GuardrailTripped(_Event):
    """A tool guardrail tripped: the call was not run (`tool_input`) or its output was
    withheld (`tool_output`); the model sees a tool error naming the guard. (A trip of
    the run's input or output fails the run: its `error` event says so.)"""

    type: Literal["guardrail-tripped"]
    step: int
    tool_call_id: str
    tool_name: str
    stage: str
    guardrail: str
    reason: str


# -- the run's end (written by `finish_run` in the runs' Lua prelude) -------------


class Finish(_Event):
    type: Literal["finish"]
    status: str
    usage: Usage
    text: str
    finish_reason: str = "stop"
    # The run's structured output, when its spec asked for one (orchestrator/output/).
    output: Any = None


class Error(_Event):
    type: Literal["error"]
    status: str
    usage: Usage
    error: dict[str, Any]  # the RunFailure: type, message, step, status


class Abort(_Event):
    """The run was cancelled."""

    type: Literal["abort"]
    status: str
    usage: Usage
    reason: str | None = None


class WebhookFailed(_Event):
    """A webhook gave up delivering one of the run's events (perhaps after its end)."""

    type: Literal["webhook-failed"]
    url: str
    event_seq: int
    event_type: str
    attempts: int
    error: str


Event = Annotated[
    Start
    | StartStep
    | StepHeld
    | ModelRetry
    | TextDelta
    | ReasoningDelta
    | ToolInputStart
    | ToolInputDelta
    | ToolCall
    | ToolCallRepair
    | ToolApprovalRequest
    | ToolApprovalResponse
    | ToolInputRequest
    | ToolInputResponse
    | ToolRunning
    | ToolProgress
    | ToolLog
    | ToolResult
    | ToolError
    | GuardrailTripped
    | FinishStep
    | ContextCompacted
    | Finish
    | Error
    | Abort
    | WebhookFailed,
    Field(discriminator="type"),
]
_EVENT: TypeAdapter[Event] = TypeAdapter(Event)


def _type_of(model: type[_Event]) -> str:
    tag: str = get_args(model.model_fields["type"].annotation)[0]
    return tag


# Every event type's model; Annotated[Union[...], …] -> the union's members.
EVENT_MODELS: dict[str, type[_Event]] = {_type_of(m): m for m in get_args(get_args(Event)[0])}

# The run has ended: nothing but late reports (webhook-failed) follows one of these.
TERMINAL = (Finish, Error, Abort)
TERMINAL_EVENTS: frozenset[str] = frozenset(_type_of(m) for m in TERMINAL)


def event_json(type_: EventType, run_id: str, **fields: Any) -> str:
    """Serialize an event for the stream (seq is added by the store)."""
    body: dict[str, Any] = {"type": type_, "run_id": run_id, "at": time.time()}
    body.update({k: v for k, v in fields.items() if v is not None})
    return strict_json(body)


def strict_json(body: dict[str, Any]) -> str:
    """An event's JSON (or a step's record), by orjson: a step writes several events,
    and json.dumps took a tenth of a worker's CPU per job. orjson writes NaN and
    infinities as null (JSON has neither, and a browser's JSON.parse refuses them); an
    integer past 64 bits, which a model may put in a tool's input, it cannot write, so
    json writes that body."""
    try:
        return orjson.dumps(body, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(body, ensure_ascii=False, default=str, separators=(",", ":"))


def stream_seq(entry_id: str) -> int:
    """An event's sequence number from its stream id, `0-<seq>` (Redis numbers the events
    of a stream 1, 2, ...: orchestrator/machine/lua/emit.lua)."""
    return int(entry_id.partition("-")[2])


def parse_event(seq: int, raw: bytes | str | dict[str, Any]) -> Event:
    """A stored event (its JSON body, outputs resolved) and its stream sequence as its model."""
    body = dict(raw) if isinstance(raw, dict) else json.loads(raw)
    body["seq"] = seq
    return _EVENT.validate_python(body)


def wire_json(event: Event) -> str:
    """The event as the HTTP API, SSE and `agentq events` send it: the fields its emitter
    wrote (no defaults filled in), nulls left out."""
    return event.model_dump_json(exclude_unset=True, exclude_none=True)


# A run's tool-result / tool-error event is stored without the call's output, which the
# step's hash holds once (the call's result): in its place the event names the field the
# output fills (`output` or `error`), and readers put it back (`with_output`).
OUTPUT_REF = "output_ref"


def stored_output(body: dict[str, Any]) -> str | None:
    """The field a stored event's output fills once resolved, or None when the event
    carries all it shows."""
    field = body.get(OUTPUT_REF)
    return field if isinstance(field, str) else None


def with_output(body: dict[str, Any], output: Any) -> dict[str, Any]:
    """The event as it was emitted: the output in the place of its reference (left out
    when None, as `event_json` leaves out every None field)."""
    field = stored_output(body)
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key != OUTPUT_REF:
            out[key] = value
        elif field is not None and output is not None:
            out[field] = output
    return out
