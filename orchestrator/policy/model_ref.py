"""A spec's model: which provider (or deployment endpoint), which model, its options;
and the scripted provider's answers. Checked against the deployment at submit
(`policy/endpoints.py`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agentq.orchestrator.core.spec_model import SpecModel as _Spec
from agentq.orchestrator.policy.providers import PROVIDER_NAME


class ScriptedToolCall(_Spec):
    name: str
    input: Any = None
    id: str | None = None


class ScriptedUsage(_Spec):
    """The tokens a scripted answer reports (as a provider would), for tests and demos of
    usage, cost and budgets."""

    input_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)


class ScriptedStep(_Spec):
    """One answer of the scripted provider: text, tool calls, or both."""

    text: str = ""
    # Streamed as reasoning before the text (as a thinking model shows it); never the answer.
    reasoning: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    # Answers to repair requests in this step (see `RepairPolicy`), in the order asked.
    repair: list[ScriptedToolCall] = Field(default_factory=list)
    usage: ScriptedUsage | None = None


class RepairPolicy(_Spec):
    """Tool-call repair: when a call's input is invalid (unparseable or against the
    schema), ask the model again for that one call, up to `max_attempts` times, in a side
    request that never enters the run's history."""

    strategy: Literal["reask"] = "reask"
    max_attempts: int = Field(default=1, ge=1, le=5)


class ModelRef(_Spec):
    # A provider of the provider table, or an endpoint of the deployment's models
    # file (looked up first); checked at submit, where the table is known.
    provider: str = Field(pattern=PROVIDER_NAME.pattern)
    name: str = ""
    endpoint: str | None = Field(default=None, pattern=PROVIDER_NAME.pattern)
    # Honoured only where the deployment allows it (see orchestrator/policy/endpoints.py).
    base_url: str | None = None
    api_key_env: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float = Field(default=120.0, gt=0)
    script: list[ScriptedStep] | None = None
    repair: RepairPolicy | None = None
    # Route the step through the provider's batch API (half price, answered within hours):
    # the step parks until a collector brings its answer back (workers/models/batch/).
    batch: bool = False

    @model_validator(mode="after")
    def _check(self) -> ModelRef:
        if self.provider == "scripted":
            if self.script is None:
                raise ValueError("the scripted provider needs a 'script' list")
            self.name = self.name or "scripted"
        elif self.script is not None:
            raise ValueError("'script' is only for the scripted provider")
        elif not self.name:
            raise ValueError("a model needs a 'name' (or use the form 'provider:name')")
        return self

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.name}"


def parse_model(value: Any) -> Any:
    if isinstance(value, str):
        provider, sep, name = value.partition(":")
        if not sep or not provider or not name:
            raise ValueError(f"model {value!r} is not of the form 'provider:name'")
        return {"provider": provider, "name": name}
    return value
