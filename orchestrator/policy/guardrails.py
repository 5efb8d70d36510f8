"""Guardrails: registered `@guardrail` functions a run names, asked at fixed points.

`guardrails: {"input": [NAME...], "output": [NAME...]}` on a run spec. An `input`
guard is asked about the run's input messages before step 0's model call; an
`output` guard about the run's final answer (the text, or the structured output)
before the run finishes. A guard answers None (pass) or a reason (it trips); the
first that trips ends the run failed with `guardrail-tripped`. The guards are
called as every hook is (workers/steps/hook_calls.py); what they are asked and
what a trip says are declared here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.messages import MESSAGE_ADAPTER
from agentq.orchestrator.core.spec_model import SpecModel
from agentq.orchestrator.policy.stop_conditions import HOOK_NAME

GuardName = Annotated[str, Field(pattern=HOOK_NAME)]
Stage = Literal["input", "output"]


class Guardrails(SpecModel):
    """The guards of each stage, asked in order; the first that trips decides."""

    input: list[GuardName] = Field(default_factory=list)
    output: list[GuardName] = Field(default_factory=list)

    def names(self) -> list[str]:
        """Every guard named, once (each must be announced by a live worker)."""
        return list(dict.fromkeys([*self.input, *self.output]))


class GuardCheck(BaseModel):
    """What a guard is asked about: `value` is, by stage, the input messages (a list of
    `Message`) or the final answer (its text, or the structured output)."""

    model_config = ConfigDict(extra="forbid")

    stage: Stage
    value: Any = None


def check_from_json(raw: Any) -> GuardCheck:
    """A check as a remote guard receives it: the input messages as `Message` models,
    as a guard in the model step's own process gets them."""
    check = GuardCheck.model_validate(raw)
    if check.stage == "input":
        check.value = [MESSAGE_ADAPTER.validate_python(m) for m in check.value]
    return check


@dataclass(frozen=True)
class Trip:
    """A guard that tripped, and why."""

    guardrail: str
    stage: Stage
    reason: str

    @property
    def message(self) -> str:
        return f"{self.stage} guardrail {self.guardrail!r} tripped: {self.reason}"
