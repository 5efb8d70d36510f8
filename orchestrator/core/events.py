"""Run events: the append-only stream a client follows.

Events are stored as JSON without their `seq`; the sequence is the stream
entry id (`0-<seq>`), assigned atomically with the transition that emits the
event, so a reader resumes after any seq without gaps or duplicates.
Names follow the AI SDK's stream parts where the two overlap.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

EventType = Literal[
    "start",
    "start-step",
    "model-retry",
    "text-delta",
    "reasoning-delta",
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
    "finish-step",
    "context-compacted",
    "finish",
    "error",
    "abort",
    # After the run's other events (perhaps after it ended): a webhook gave up on one.
    "webhook-failed",
]

TERMINAL_EVENTS: frozenset[str] = frozenset({"finish", "error", "abort"})


class Event(BaseModel):
    """An event as a reader sees it. Fields beyond the common ones vary by type."""

    model_config = ConfigDict(extra="allow")

    seq: int
    type: EventType
    run_id: str
    at: float
    step: int | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None


def event_json(type_: EventType, run_id: str, **fields: Any) -> str:
    """Serialize an event for the stream (seq is added by the store)."""
    body: dict[str, Any] = {"type": type_, "run_id": run_id, "at": time.time()}
    body.update({k: v for k, v in fields.items() if v is not None})
    return json.dumps(body, ensure_ascii=False, default=str, separators=(",", ":"))


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


def parse_event(seq: int, raw: bytes | str | dict[str, Any]) -> Event:
    body = dict(raw) if isinstance(raw, dict) else json.loads(raw)
    body["seq"] = seq
    return Event.model_validate(body)
