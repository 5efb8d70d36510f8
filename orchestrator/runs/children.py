"""Sub-agents' child runs: how a child is named, linked to its parent's call, and built.

A child run is an ordinary run with two more fields in its meta: its parent's call
(run id, step, call id) and the job its end enqueues (`child_ended`). That job carries
the child's id in its hash tag, so the child's end-of-run transition enqueues it
atomically on the child's own slot; a worker then answers the parent's call through
the same `post_result` transition a client tool's result takes (write-once, so a
re-delivered job cannot answer twice). Pure: no I/O here.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.core.envelopes import JobEnvelope, QueuedJob
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.queued_job import JOB_EXPIRES_MS
from agentq.orchestrator.core.run_ids import ParentLink
from agentq.orchestrator.core.templating import render
from agentq.orchestrator.spec.limits import RunLimits, inherited

# A child's end may come long after it started: its job must not expire before.
_PARENT_JOB_EXPIRES_MS = 30 * JOB_EXPIRES_MS


class ChildOf(BaseModel):
    """What makes a new run a child: its parent's call and its depth (1: a top run's)."""

    model_config = ConfigDict(extra="forbid")

    parent: ParentLink
    depth: int


def parent_job(child_run_id: str, link: ParentLink) -> QueuedJob:
    """The `child_ended` job the child's end enqueues (its id carries the child's tag)."""
    envelope = JobEnvelope(
        kind="child_ended", run_id=child_run_id, step=link.step, call_id=link.call_id
    )
    return queued_job(envelope).model_copy(update={"expires_ms": _PARENT_JOB_EXPIRES_MS})


def child_spec(template: dict[str, Any], tool_input: Any, limits: RunLimits) -> dict[str, Any]:
    """The child's spec: the template with the call's input filled in; the input's
    `prompt` (or the whole input as JSON) becomes the prompt when the template has none.
    Its `limits` are at most its parent's (`limits`). ValidationError: invalid limits."""
    values = tool_input if isinstance(tool_input, dict) else {"input": tool_input}
    spec: dict[str, Any] = render(template, values)
    spec.pop("id", None)  # a child's id is derived from its parent's call
    own = RunLimits.model_validate(spec.get("limits") or {})
    spec["limits"] = inherited(limits, own).model_dump(exclude_none=True, exclude_defaults=True)
    if spec.get("prompt") is None and not spec.get("messages"):
        prompt = values.get("prompt")
        spec["prompt"] = prompt if isinstance(prompt, str) else json.dumps(values)
    return spec


def _within(spec: dict[str, Any], limits: RunLimits) -> dict[str, Any]:
    own = RunLimits.model_validate(spec.get("limits") or {})
    return {**spec, "limits": inherited(limits, own).model_dump(exclude_none=True)}


def node_call_spec(template: dict[str, Any], tool_input: Any, limits: RunLimits) -> dict[str, Any]:
    """A tool node's one-call child spec (orchestrator/tools/workflow.py: call_template):
    its scripted step calls the tool with the node's input."""
    (step,) = template["model"]["script"]
    (call,) = step["tool_calls"]
    script = [{"tool_calls": [{**call, "input": tool_input}]}]
    spec = {**template, "model": {**template["model"], "script": script}}
    return _within({**spec, "prompt": f"call {call['name']}"}, limits)


def node_child_spec(
    template: dict[str, Any], prompt: str, system: str | None, limits: RunLimits
) -> dict[str, Any]:
    """A workflow node's child spec: its template (orchestrator/tools/workflow.py:
    child_template) with the node's prompt and system as rendered, and limits at most its
    parent's. (Not rendered as a whole: the template's tools may hold templates of their
    own, a sub-agent's.)"""
    spec = {**template, "prompt": prompt, **({"system": system} if system else {})}
    return _within(spec, limits)
