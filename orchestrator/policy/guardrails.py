"""Guardrails: registered `@guardrail` functions or llm checks a run names, asked at
fixed points.

`guardrails: {"input": [...], "output": [...], "tool_input": [...], "tool_output":
[...]}` on a run spec, each a list of guards: the name of a `@guardrail` function, or
`{"llm": {"prompt", "model"}}`, a model's structured verdict (workers/steps/llm_guard.py).
An `input` guard is asked about the run's input messages before step 0's model call;
an `output` guard about the run's final answer (the text, or the structured output)
before the run finishes; a `tool_input` guard about each valid call's input before it
is run (or waits for approval); a `tool_output` guard about each tool's result,
wherever it came from (orchestrator/runs/result_guards.py). A guard answers None (pass)
or a reason (it trips); the first that trips decides: the run fails `guardrail-tripped`
(input, output), or the call's result is a tool error the model sees (tool guards).
The guards are called as every hook is (workers/steps/hook_calls.py); what they are
asked and what a trip says are declared here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.messages import MESSAGE_ADAPTER
from agentq.orchestrator.core.spec_model import SpecModel
from agentq.orchestrator.policy.stop_conditions import HOOK_NAME

GuardName = Annotated[str, Field(pattern=HOOK_NAME)]
Stage = Literal["input", "output", "tool_input", "tool_output"]

# How a trip names an llm check (a `@guardrail` trip names its function).
LLM_GUARD_LABEL = "llm"


class LlmCheck(SpecModel):
    """A model asked whether what is checked trips: `prompt` says what to look for,
    `model` is a model reference as a run's `model` is (only one the deployment offers:
    resolved at submit, as a workflow's llm node's is)."""

    prompt: str = Field(min_length=1, max_length=8000)
    model: Any


class LlmGuard(SpecModel):
    """`{"llm": {"prompt": ..., "model": ...}}`: a guard that is a model's verdict."""

    llm: LlmCheck


# A guard: the name of a `@guardrail` function, or an llm check.
GuardEntry = GuardName | LlmGuard


def guard_label(entry: GuardEntry) -> str:
    return entry if isinstance(entry, str) else LLM_GUARD_LABEL


class Guardrails(SpecModel):
    """The guards of each stage, asked in order; the first that trips decides."""

    input: list[GuardEntry] = Field(default_factory=list)
    output: list[GuardEntry] = Field(default_factory=list)
    tool_input: list[GuardEntry] = Field(default_factory=list)
    tool_output: list[GuardEntry] = Field(default_factory=list)

    def entries(self) -> list[GuardEntry]:
        return [*self.input, *self.output, *self.tool_input, *self.tool_output]

    def names(self) -> list[str]:
        """Every `@guardrail` named, once (each must be announced by a live worker)."""
        return list(dict.fromkeys(e for e in self.entries() if isinstance(e, str)))


class Verdict(BaseModel):
    """What an llm check's model answers (the input of the one tool it must call)."""

    model_config = ConfigDict(extra="forbid")

    tripped: bool
    reason: str = ""


class GuardCheck(BaseModel):
    """What a guard is asked about: `value` is, by stage, the input messages (a list of
    `Message`), the final answer (its text, or the structured output), a call's input
    or a tool's output; `tool_name` names the call's tool (tool stages)."""

    model_config = ConfigDict(extra="forbid")

    stage: Stage
    value: Any = None
    tool_name: str | None = None


def check_from_json(raw: Any) -> GuardCheck:
    """A check as a remote guard receives it: the input messages as `Message` models,
    as a guard in the model step's own process gets them."""
    check = GuardCheck.model_validate(raw)
    if check.stage == "input":
        check.value = [MESSAGE_ADAPTER.validate_python(m) for m in check.value]
    return check


class Trip(BaseModel):
    """A guard that tripped, and why (a tool_input trip is stored with its step)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    guardrail: str
    stage: Stage
    reason: str

    @property
    def message(self) -> str:
        return f"{self.stage} guardrail {self.guardrail!r} tripped: {self.reason}"
