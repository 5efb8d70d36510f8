"""Forking a run, the pure part: what a fork at step N copies, and its patched spec.

A fork is a new run whose first N steps are the original's, as recorded (the step
hashes: model responses, calls, tool results, whoever gave them: a worker, a
person through `tool-result`, an approval), whose history is the original's up to
step N, and which continues live from step N with the original's spec patched by
a JSON merge patch (RFC 7386). The step counter carries on, so a scripted model's
step k still answers `script[k]`. The new run records where it came from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.runs.state import CreateRun, MetaField, StepField
from agentq.orchestrator.runs.transitions import model_job


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def patched_spec(stored_spec: str, patch: Mapping[str, Any] | None) -> dict[str, Any]:
    """The original's spec (without its id: a fork is another run) with the patch applied."""
    spec = json.loads(stored_spec)
    spec.pop("id", None)
    patched = merge_patch(spec, dict(patch or {}))
    assert isinstance(patched, dict)
    return patched


class ForkCopy(BaseModel):
    """What a fork takes from its original, as the create transition writes it."""

    model_config = ConfigDict(extra="forbid")

    origin_run: str
    at_step: int
    messages: list[str]
    n_initial: int
    steps: list[dict[str, str]]
    usage: Usage

    def applied(self, args: CreateRun) -> CreateRun:
        """A create transition for the new run, made a fork of the original."""
        origin = {"run_id": self.origin_run, "step": self.at_step}
        start = json.loads(args.event)
        return args.model_copy(
            update={
                "messages": self.messages,
                "n_initial": self.n_initial,
                "start_step": self.at_step,
                "steps": self.steps,
                "usage": self.usage,
                "origin": json.dumps(origin),
                "event": event_json(
                    "start",
                    args.run_id,
                    model=start.get("model"),
                    metadata=start.get("metadata"),
                    forked_from=origin,
                ),
                "next_job": model_job(args.run_id, self.at_step),
            }
        )


def fork_copy(
    run_id: str,
    at_step: int,
    meta: Mapping[str, str],
    messages: Sequence[str],
    steps: Sequence[Mapping[str, str]],
) -> ForkCopy:
    """What a fork of `run_id` at `at_step` copies, or a SpecError saying why it cannot."""
    current = int(meta.get(MetaField.STEP, "0"))
    if at_step < 0 or at_step > current:
        raise SpecError(
            f"run {run_id!r} reached step {current}: --at-step must be between 0 and {current}"
        )
    n_initial = int(meta.get(MetaField.N_INITIAL, "0"))
    copied = [dict(s) for s in steps[:at_step]]
    if len(copied) < at_step or any(StepField.RESP not in s for s in copied):
        raise SpecError(f"run {run_id!r} has no complete record of its first {at_step} steps")
    n_messages = n_initial
    usage = Usage()
    for step in copied:
        n_messages += 1  # the step's assistant message
        if json.loads(step.get(StepField.ORDER, "[]")):
            n_messages += 1  # its tool message, appended when its results joined
        usage = usage + Usage.model_validate(json.loads(step[StepField.RESP])["usage"])
    return ForkCopy(
        origin_run=run_id,
        at_step=at_step,
        messages=list(messages[:n_messages]),
        n_initial=n_initial,
        steps=copied,
        usage=usage,
    )
