"""The run spec: what a user submits. Validated before anything runs."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from agentq.orchestrator.messages import Message, UserMessage, normalize_message


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScriptedToolCall(_Spec):
    name: str
    input: Any = None
    id: str | None = None


class ScriptedStep(_Spec):
    """One answer of the scripted provider: text, tool calls, or both."""

    text: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    # Answers to repair requests in this step (see `RepairPolicy`), in the order asked.
    repair: list[ScriptedToolCall] = Field(default_factory=list)


class RepairPolicy(_Spec):
    """Tool-call repair: when a call's input is invalid (unparseable or against the
    schema), ask the model again for that one call, up to `max_attempts` times, in a side
    request that never enters the run's history."""

    strategy: Literal["reask"] = "reask"
    max_attempts: int = Field(default=1, ge=1, le=5)


# Wire formats the workers speak; a spec naming another is refused at submit.
KNOWN_PROVIDERS = ("scripted", "openai", "anthropic", "openai-responses", "gemini")


# The tools each wire format can have its provider execute itself. The providers map
# these names onto their own tool types; a unit test keeps the two in step.
PROVIDER_TOOLS: dict[str, frozenset[str]] = {
    "anthropic": frozenset({"web_search", "web_fetch"}),
    "openai-responses": frozenset({"web_search", "code_interpreter"}),
    "gemini": frozenset({"web_search", "google_search"}),
}


class ModelRef(_Spec):
    provider: str
    name: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float = Field(default=120.0, gt=0)
    script: list[ScriptedStep] | None = None
    repair: RepairPolicy | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelRef:
        if self.provider not in KNOWN_PROVIDERS:
            raise ValueError(
                f"unknown provider {self.provider!r} (known: {', '.join(KNOWN_PROVIDERS)})"
            )
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


def _parse_model(value: Any) -> Any:
    if isinstance(value, str):
        provider, sep, name = value.partition(":")
        if not sep or not provider or not name:
            raise ValueError(f"model {value!r} is not of the form 'provider:name'")
        return {"provider": provider, "name": name}
    return value


TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


class _ToolSpec(_Spec):
    needs_approval: bool = False
    timeout_s: float | None = Field(default=None, gt=0)
    # Larger outputs are cut, with a marker the model sees (default: the worker's
    # AGENTQ_MAX_TOOL_OUTPUT_BYTES).
    max_output_bytes: int | None = Field(default=None, gt=0)


class FunctionToolSpec(_ToolSpec):
    type: Literal["function"] = "function"
    name: str


class ClientToolSpec(_ToolSpec):
    type: Literal["client"] = "client"
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})

    @field_validator("input_schema")
    @classmethod
    def _check_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(root)"
            raise ValueError(f"not a valid JSON Schema at {where}: {exc.message}") from None
        return schema


class McpToolSpec(_ToolSpec):
    """Enables the tools of an MCP server the deployment declared."""

    type: Literal["mcp"] = "mcp"
    server: str
    tools: list[str] | None = None
    prefix: str | None = None


class CodeLimits(_Spec):
    timeout_s: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    cpus: float | None = Field(default=None, gt=0)
    output_bytes: int | None = Field(default=None, gt=0)


class CodeToolSpec(_ToolSpec):
    type: Literal["code"] = "code"
    language: Literal["python", "javascript"]
    name: str | None = None
    session: Literal["run", "call"] = "call"
    network: bool = False
    limits: CodeLimits = Field(default_factory=CodeLimits)

    @property
    def tool_name(self) -> str:
        return self.name or ("run_python" if self.language == "python" else "run_javascript")


class ProviderToolSpec(_ToolSpec):
    """A tool the model provider executes itself (e.g. web search)."""

    type: Literal["provider"] = "provider"
    name: str
    options: dict[str, Any] = Field(default_factory=dict)


ToolSpec = Annotated[
    FunctionToolSpec | ClientToolSpec | McpToolSpec | CodeToolSpec | ProviderToolSpec,
    Field(discriminator="type"),
]


class ToolChoiceTool(_Spec):
    tool: str


ToolChoice = Literal["auto", "required", "none"] | ToolChoiceTool


class HasToolCall(_Spec):
    has_tool_call: str


class StepCountIs(_Spec):
    step_count_is: int = Field(ge=1)


StopCondition = HasToolCall | StepCountIs

RUN_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class RunSpec(_Spec):
    model: Annotated[ModelRef, BeforeValidator(_parse_model)]
    system: str | None = None
    prompt: str | None = None
    messages: list[Annotated[Message, BeforeValidator(normalize_message)]] | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    active_tools: list[str] | None = None
    max_steps: int = Field(default=10, ge=1, le=1000)
    stop_when: list[StopCondition] = Field(default_factory=list)
    tool_timeout_s: float = Field(default=60.0, gt=0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str | None) -> str | None:
        if value is not None and not RUN_ID.match(value):
            raise ValueError("must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
        return value

    @model_validator(mode="after")
    def _check_input(self) -> RunSpec:
        if self.prompt is None and not self.messages:
            raise ValueError("a run needs a 'prompt' or a non-empty 'messages' list")
        if self.prompt is not None and self.messages:
            raise ValueError("give either 'prompt' or 'messages', not both")
        for index, tool in enumerate(self.tools):
            offered = PROVIDER_TOOLS.get(self.model.provider, frozenset())
            if isinstance(tool, ProviderToolSpec) and tool.name not in offered:
                known = ", ".join(sorted(offered)) or "none"
                raise ValueError(
                    f"tools[{index}]: the {self.model.provider!r} provider cannot run "
                    f"{tool.name!r} itself (it offers: {known})"
                )
        return self

    def initial_messages(self) -> list[Message]:
        if self.messages:
            return list(self.messages)
        return [UserMessage(content=self.prompt or "")]
