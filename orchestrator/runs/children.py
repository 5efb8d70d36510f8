"""Sub-agents' child runs: how a child is named, linked to its parent's call, and built.

A child run is an ordinary run with two more fields in its meta: its parent's call
(run id, step, call id) and the job its end enqueues (`child_ended`). That job carries
the child's id in its hash tag, so the child's end-of-run transition enqueues it
atomically on the child's own slot; a worker then answers the parent's call through
the same `post_result` transition a client tool's result takes (write-once, so a
re-delivered job cannot answer twice). Pure: no I/O here.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.core.envelopes import JobEnvelope, QueuedJob
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.queued_job import JOB_EXPIRES_MS
from agentq.orchestrator.core.templating import render

# The input a sub-agent takes when its tool gives no input_schema.
DEFAULT_AGENT_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "The task for the sub-agent."}},
    "required": ["prompt"],
    "additionalProperties": False,
}
# A child's end may come long after it started: its job must not expire before.
_PARENT_JOB_EXPIRES_MS = 30 * JOB_EXPIRES_MS


class ParentLink(BaseModel):
    """The parent's call a child run answers."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    step: int
    call_id: str


class ChildOf(BaseModel):
    """What makes a new run a child: its parent's call and its depth (1: a top run's)."""

    model_config = ConfigDict(extra="forbid")

    parent: ParentLink
    depth: int


# A child run's id: `t<its trace id>.<digest of the parent's call>`. Its trace id is its
# top run's, so every process puts the child's spans in the parent's trace without a
# lookup (tracing derives a run's ids from its id alone); a spec may not choose one.
CHILD_RUN_ID = re.compile(r"^t(?P<trace>[0-9a-f]{32})\.(?P<digest>[0-9a-f]{16})$")


def run_trace_id(run_id: str) -> int:
    """The id of the trace a run's spans belong to: its own, or (a child) its top run's."""
    child = CHILD_RUN_ID.match(run_id)
    if child is not None:
        return int(child["trace"], 16)
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big") or 1


def child_run_id(parent_run_id: str, step: int, call_id: str) -> str:
    """The child's id, derived from the parent's call: starting it twice is a no-op."""
    digest = hashlib.sha256(f"{parent_run_id}\0{step}\0{call_id}".encode()).hexdigest()[:16]
    return f"t{run_trace_id(parent_run_id):032x}.{digest}"


def call_span_id(run_id: str, call_id: str) -> int:
    """The span id of a sub-agent call (`execute_tool`), the parent of its child's run span."""
    digest = hashlib.sha256(f"{run_id}\0call\0{call_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def parent_job(child_run_id: str, link: ParentLink) -> QueuedJob:
    """The `child_ended` job the child's end enqueues (its id carries the child's tag)."""
    envelope = JobEnvelope(
        kind="child_ended", run_id=child_run_id, step=link.step, call_id=link.call_id
    )
    return queued_job(envelope).model_copy(update={"expires_ms": _PARENT_JOB_EXPIRES_MS})


def child_spec(template: dict[str, Any], tool_input: Any) -> dict[str, Any]:
    """The child's spec: the template with the call's input filled in; the input's
    `prompt` (or the whole input as JSON) becomes the prompt when the template has none."""
    values = tool_input if isinstance(tool_input, dict) else {"input": tool_input}
    spec: dict[str, Any] = render(template, values)
    spec.pop("id", None)  # a child's id is derived from its parent's call
    if spec.get("prompt") is None and not spec.get("messages"):
        prompt = values.get("prompt")
        spec["prompt"] = prompt if isinstance(prompt, str) else json.dumps(values)
    return spec
