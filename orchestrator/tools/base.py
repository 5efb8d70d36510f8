"""The tool-kind contract: what a kind of tool is, and the registry of kinds.

Names, one per concept:

- a **tool entry** (`ToolSpecBase` and a subclass per kind): what a run spec asks
  for; one entry may enable several tools (an MCP server's);
- a **tool announcement** (`ToolAnnouncement`): what a worker says it serves;
- a **tool** (`ToolDef`): one tool as resolved and frozen into a run at submit,
  with its kind's typed config;
- a **tool kind** (`ToolKindPlugin`): the plugin that turns entries into tools;
- an **offered tool** (`agentq.workers.models.OfferedTool`): a tool as a
  provider renders it for the model (name, description, schema);
- a **function tool** (`agentq.FunctionTool`): a `@tool` function, the
  code behind a `function` tool.

Every kind gets the same wrappers from its entry, applied by the resolver (the
way any pydantic-ai toolset gets `filtered`, `prefixed`, `approval_required`):
`tools` keeps only the named tools, `prefix` renames them, `needs_approval`
parks all of them (true) or the named ones (a list) for a human's approval.

A kind registers itself (`register_tool_kind`); the spec, the resolver, the
worker and the CLI dispatch on `type` / `kind` through this registry and need
no edit for a new kind. The executing side (`agentq.workers.tools`) has the
matching registry of executor factories.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationInfo,
    model_validator,
)

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.json_schema import validator_for
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.spec_model import SpecModel
from agentq.orchestrator.core.tool_errors import OnError
from agentq.orchestrator.policy.approval_rules import ApprovalRule, NeedsApproval
from agentq.orchestrator.policy.guardrails import GuardEntry
from agentq.orchestrator.policy.providers import ProviderInfo

if TYPE_CHECKING:
    from agentq.orchestrator.tools.workflow_catalogue import PublishedWorkflows


def _valid_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    from jsonschema.exceptions import SchemaError  # jsonschema loads on first use

    try:
        validator_for(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise ValueError(f"not a valid JSON Schema at {where}: {exc.message}") from None
    return schema


# The fields a kind's entry (or a deployment's declaration) shares: a tool name a model
# accepts, and an input schema checked to be JSON Schema 2020-12 when the spec is read.
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")]
InputSchema = Annotated[dict[str, Any], AfterValidator(_valid_json_schema)]


# The longest a call may stay parked (awaiting approval or an outside result).
MAX_PARK_TIMEOUT_S = 7 * 24 * 3600.0


class ToolRetry(SpecModel):
    """Retry a call whose tool fails with a retryable ToolError: up to `max_attempts`
    executions in all, waiting `backoff_s`, then twice that, … within the call's deadline."""

    max_attempts: int = Field(default=3, ge=1, le=10)
    backoff_s: float = Field(default=1.0, ge=0, le=60)


class ToolSpecBase(SpecModel):
    """The fields every tool entry has, whatever its kind."""

    type: str
    # Every call, the calls of the named tools, or those a rule picks
    # (orchestrator/policy/approval_rules.py).
    needs_approval: NeedsApproval = False
    timeout_s: float | None = Field(default=None, gt=0)
    # How long a parked call waits before it becomes a tool error; default: the
    # deployment's AGENTQ_PARK_TIMEOUT_S.
    park_timeout_s: float | None = Field(default=None, gt=0, le=MAX_PARK_TIMEOUT_S)
    retry: ToolRetry | None = None
    # Coerce the model's input to the schema where that loses nothing ("2" -> 2 for an
    # integer; orchestrator/loop/coercion.py) before validating it; false: as sent.
    coerce: bool = True
    # Larger outputs are cut, with a marker the model sees (default: the worker's
    # AGENTQ_MAX_TOOL_OUTPUT_BYTES).
    max_output_bytes: int | None = Field(default=None, gt=0)
    on_error: OnError = OnError.MODEL
    # A registered `@to_model_output` hook converting each output for the model (the run
    # records the output as it was); default: the tool's own, if it has one.
    to_model_output: str | None = None
    # Wrappers any kind gets: keep only these tools (by their own names) …
    tools: list[str] | None = None
    # … and expose them as prefix + own name.
    prefix: str | None = Field(default=None, pattern=r"^([A-Za-z_][A-Za-z0-9_.-]{0,31})?$")


class KindConfig(BaseModel):
    """A kind's own settings, frozen into each of its tools. Unknown kinds (a run
    whose kind this process never loaded) keep their settings as they were."""

    model_config = ConfigDict(extra="allow")


class ToolAnnouncement(BaseModel):
    """One tool a worker serves, as published in the registry."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: str
    queue: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    # Where the tool comes from within its kind: an MCP server, a code language.
    server: str | None = None
    seen_at: float = 0.0
    # Set on a provider a worker registered (kind "model-provider"), so that submit
    # knows it.
    model_provider: ProviderInfo | None = None
    # The tool's own to_model_output hook (`@tool(to_model_output=fn)`), by name.
    to_model_output: str | None = Field(default=None, exclude_if=lambda value: value is None)


class ToolDef(BaseModel):
    """A tool as frozen into a run at submit."""

    model_config = ConfigDict(extra="forbid")

    name: str  # as the model sees it
    kind: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    queue: str | None = None  # None: nothing executes it here (client, provider)
    # A call that parks until a job of this queue has started what answers it (an agent's
    # child run, a workflow's nodes): the `start_call` job. None: nothing starts it.
    start_queue: str | None = None
    needs_approval: bool = False
    # Calls wait for approval when this rule says so (needs_approval is then False).
    approval_rule: ApprovalRule | None = None
    timeout_s: float = 60.0
    # How long a call may stay parked before it becomes a tool error (None: no deadline;
    # the submitting client fills in its settings' default).
    park_timeout_s: float | None = None
    retry: ToolRetry | None = None  # None: a failing call is not executed again
    coerce: bool = True  # lossless coercion of the input before validation
    max_output_bytes: int | None = None  # None: the worker's setting
    # The run's `tool_output` guardrails, asked about each result of the tool (stamped at
    # submit, llm checks' models resolved: whoever records a result reads only the tool).
    output_guards: list[GuardEntry] = Field(
        default_factory=list, exclude_if=lambda names: not names
    )
    on_error: OnError = OnError.MODEL
    # The to_model_output hook each result is converted by for the model (its name).
    to_model_output: str | None = Field(default=None, exclude_if=lambda value: value is None)
    # The tool's own name where it is served, when the run exposes it as another.
    source_name: str | None = None
    config: SerializeAsAny[KindConfig] | None = None

    @model_validator(mode="before")
    @classmethod
    def _typed_config(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("config"), dict):
            kind = _KINDS.get(str(data.get("kind")))
            model = kind.config_model if kind is not None else KindConfig
            data = {**data, "config": model.model_validate(data["config"])}
        return data

    @property
    def served_name(self) -> str:
        return self.source_name or self.name


@dataclass(frozen=True)
class ResolveContext:
    """What a kind may look at when it resolves one entry at submit."""

    spec: Any  # the RunSpec (typed Any: the spec module imports this one)
    index: int
    registry: Mapping[str, ToolAnnouncement]  # live announcements only
    model_provider: ProviderInfo | None  # the provider the run's model goes to
    timeout_s: float  # the entry's, else the run's default
    # The deployment's settings, for what a kind lets a spec choose (e.g. network for code).
    settings: Settings
    # A sub-agent's child spec, checked as a run spec whose tools resolve here: the spec
    # module sits above the kinds, so it hands its check down (a RunSpec holds tool
    # entries; an agent entry holds a RunSpec). Raises ValidationError or SpecError.
    check_child_spec: Callable[[dict[str, Any]], None]
    # The deployment's published workflows, which a workflow entry may name, and those
    # being resolved around this entry (a workflow whose nodes call workflows).
    workflows: PublishedWorkflows = field(default_factory=dict)
    resolving: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"tools[{self.index}]"


class ToolKindPlugin(ABC):
    """One kind of tool. Subclass, set the class attributes, register an instance."""

    kind: ClassVar[str]
    spec_model: ClassVar[type[ToolSpecBase]]
    config_model: ClassVar[type[KindConfig]] = KindConfig
    # False when the tool's name means something to whoever runs it (a provider's
    # built-in tool): then `prefix` is refused.
    renamable: ClassVar[bool] = True
    # False when a call's result does not come from a worker executing it (it is posted,
    # a child run's, the provider's): no worker sees the output before it is recorded, so
    # `to_model_output` is refused.
    executed_by_worker: ClassVar[bool] = True

    @abstractmethod
    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        """The tools the entry enables, under their own names; a SpecError (an
        UnknownToolError when nothing serves them) otherwise."""

    def exposed_name(self, entry: Any, tool: ToolDef, ctx: ResolveContext) -> str:
        """The name the model sees when the entry gives no prefix."""
        return tool.name

    def describe(self, entry: Any) -> str:
        return f"the {self.kind} entry"

    def described_tool(self, source: Any, ctx: ResolveContext, name: str, **fields: Any) -> ToolDef:
        """A tool of this kind described as `source` describes it (the entry, or the
        announcement of the worker serving it): its description and input schema, the
        run's timeout; `fields` add to those or override them."""
        return ToolDef(
            **{
                "name": name,
                "kind": self.kind,
                "description": source.description,
                "input_schema": source.input_schema,
                "timeout_s": ctx.timeout_s,
                **fields,
            }
        )

    def registry_key(self, ann: ToolAnnouncement) -> str:
        """Where an announcement of this kind lives in the registry hash."""
        return f"{self.kind}:{ann.name}"

    def needs(self, tool: ToolDef) -> str:
        """The registry key a worker must announce to run the tool's calls: its job is
        claimed only by such workers of its queue (workers/queue/lua/take.lua), so pools
        with different tools share a queue. "" (the default): any worker of the queue."""
        return ""

    def call_entries(self, ann: ToolAnnouncement) -> list[tuple[str, dict[str, Any]]]:
        """How an announced tool of this kind is called on its own (`client.calls.call`,
        the gateway): the names it answers to, each with the tool entry a run spec would
        give to enable it. None by default: a kind that executes nowhere (client,
        provider) cannot be called without a run."""
        return []


_KINDS: dict[str, ToolKindPlugin] = {}


def register_tool_kind(plugin: ToolKindPlugin) -> None:
    """Make a kind usable in specs (in this process: submitters and workers alike)."""
    _KINDS[plugin.kind] = plugin


def tool_kind(kind: str) -> ToolKindPlugin | None:
    return _KINDS.get(kind)


def tool_kinds() -> list[str]:
    return sorted(_KINDS)


class StoredToolEntry(ToolSpecBase):
    """An entry of a kind this process did not load, in a spec read back from a run: it
    was checked at submit, and its tools are already resolved into the run."""

    model_config = ConfigDict(extra="allow")


# Validation context for a spec read back from the store (`RunSpec.model_validate_json(
# text, context=STORED_SPEC)`): a worker need not load every kind a run uses.
STORED_SPEC = {"agentq.stored": True}


def parse_tool_entry(value: Any, info: ValidationInfo) -> Any:
    """A spec's tool entry as its kind's model (pydantic reports errors inside it
    located as `tools.N.field`)."""
    if isinstance(value, ToolSpecBase):
        return value
    if not isinstance(value, dict) or "type" not in value:
        raise ValueError("a tool needs a 'type' (" + ", ".join(tool_kinds()) + ")")
    plugin = _KINDS.get(str(value["type"]))
    if plugin is None and isinstance(info.context, dict) and info.context.get("agentq.stored"):
        return StoredToolEntry.model_validate(value)
    if plugin is None:
        raise ValueError(f"unknown tool type {value['type']!r} (known: {', '.join(tool_kinds())})")
    return plugin.spec_model.model_validate(value)


def registry_key(ann: ToolAnnouncement) -> str:
    plugin = _KINDS.get(ann.kind)
    return plugin.registry_key(ann) if plugin is not None else f"{ann.kind}:{ann.name}"


def tool_needs(tool: ToolDef) -> str:
    """What a worker must serve to run the tool's calls (ToolKindPlugin.needs)."""
    plugin = _KINDS.get(tool.kind)
    return plugin.needs(tool) if plugin is not None else ""


def refuse(ctx: ResolveContext, message: str) -> SpecError:
    return SpecError(f"{ctx.where}: {message}")
