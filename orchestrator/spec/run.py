"""The run spec: what a user submits. Validated before anything runs."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentq.orchestrator.concurrency.spec import Concurrency
from agentq.orchestrator.core.fairness import Fairness, Priority
from agentq.orchestrator.core.keys import RUN_ID_PATTERN
from agentq.orchestrator.core.messages import Message, UserMessage, normalize_message
from agentq.orchestrator.core.run_ids import CHILD_RUN_ID, PLACED_RUN_ID, TENANT_RUN_ID
from agentq.orchestrator.core.spec_model import SpecModel as _Spec
from agentq.orchestrator.output.spec import OutputSpec
from agentq.orchestrator.policy.guardrails import Guardrails
from agentq.orchestrator.policy.model_ref import ModelRef, parse_model
from agentq.orchestrator.policy.stop_conditions import StopCondition
from agentq.orchestrator.policy.webhooks import WebhookSpec
from agentq.orchestrator.spec.limits import RunLimits
from agentq.orchestrator.tools import ToolSpecBase, parse_tool_entry

TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

# A tool entry of any registered kind (see orchestrator/tools/).
ToolSpec = Annotated[SerializeAsAny[ToolSpecBase], BeforeValidator(parse_tool_entry)]


class ToolChoiceTool(_Spec):
    tool: str


ToolChoice = Literal["auto", "required", "none"] | ToolChoiceTool


class StepWhen(_Spec):
    """When a step rule applies: exactly one of its conditions."""

    step: int | None = Field(default=None, ge=0)
    after_tool: str | None = None
    step_at_least: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one(self) -> StepWhen:
        given = [n for n in ("step", "after_tool", "step_at_least") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("a 'when' needs exactly one of 'step', 'after_tool', 'step_at_least'")
        return self


class StepRule(_Spec):
    """prepareStep, declared: what a matching step sends instead of the run's defaults."""

    when: StepWhen
    model: Annotated[ModelRef, BeforeValidator(parse_model)] | None = None
    system: str | None = None
    tool_choice: ToolChoice | None = None
    active_tools: list[str] | None = None


class ContextPolicy(_Spec):
    """What is sent to the model is compacted when over budget (the history stays whole)."""

    max_input_tokens: int | None = Field(default=None, ge=1)
    keep_last_messages: int | None = Field(default=None, ge=0)
    strategy: Literal["drop_tool_results", "drop_oldest", "summarize"] = "drop_tool_results"
    summary_model: Annotated[ModelRef, BeforeValidator(parse_model)] | None = None

    @model_validator(mode="after")
    def _check(self) -> ContextPolicy:
        if self.max_input_tokens is None and self.keep_last_messages is None:
            raise ValueError("'context' needs 'max_input_tokens' or 'keep_last_messages'")
        if self.strategy != "summarize" and self.summary_model is not None:
            raise ValueError("'summary_model' is only for the 'summarize' strategy")
        return self


# What a new run on a thread does while the thread's run is still going (threads.md):
# refused (409), queued after it, or started at once, the running one cancelled (and,
# with rollback, dropped from the thread).
DoubleTexting = Literal["reject", "enqueue", "interrupt", "rollback"]

RUN_ID = RUN_ID_PATTERN  # no ':' or braces: an id can never name another run's keys


class RunSpec(_Spec):
    model: Annotated[ModelRef, BeforeValidator(parse_model)]
    system: str | None = None
    prompt: str | None = None
    messages: list[Annotated[Message, BeforeValidator(normalize_message)]] | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    active_tools: list[str] | None = None
    max_steps: int = Field(default=10, ge=1, le=1000)
    # Any element that holds ends the run (orchestrator/policy/stop_conditions.py).
    stop_when: list[StopCondition] = Field(default_factory=list)
    tool_timeout_s: float = Field(default=60.0, gt=0)
    # Where workers POST the run's selected events (orchestrator/policy/webhooks.py).
    webhooks: list[WebhookSpec] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    # The conversation this run continues (orchestrator/threads/): it starts from the
    # thread's history, then its own messages; an unknown thread is created by its run.
    thread_id: str | None = None
    # This request's double-texting policy (default: the thread's, else reject).
    double_texting: DoubleTexting | None = None
    # Whose turn its jobs wait for and how urgent they are (core/fairness.py).
    priority: Priority | None = None
    fairness: Fairness | None = None
    # At most `max` runs of its key hold a running job at once (orchestrator/concurrency/).
    concurrency: Concurrency | None = None
    # Per-step preparation and context management (orchestrator/loop/prepare.py).
    steps: list[StepRule] | None = None
    prepare_step: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
    context: ContextPolicy | None = None
    # Lower limits on the run tree than the deployment's ceilings (orchestrator/spec/limits.py).
    limits: RunLimits = Field(default_factory=RunLimits)
    # Structured output: the answer is a JSON value matching a schema (orchestrator/output/).
    output: OutputSpec | None = None
    # Registered @guardrail functions asked about the input and the final answer
    # (orchestrator/policy/guardrails.py).
    guardrails: Guardrails | None = None

    @field_validator("id", "thread_id")
    @classmethod
    def _check_id(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not RUN_ID.match(value):
            raise ValueError("must be 1-128 characters of letters, digits, '_', '.' or '-'")
        stored = isinstance(info.context, dict) and info.context.get("agentq.stored")
        if value is not None and CHILD_RUN_ID.match(value) and not stored:
            raise ValueError("ids of the form t<32 hex>.<16 hex> are sub-agents' child runs'")
        if value is not None and TENANT_RUN_ID.match(value) and not stored:
            raise ValueError("ids starting n<12 hex>. are the tenants' namespaces")
        if value is not None and PLACED_RUN_ID.match(value) and not stored:
            raise ValueError("ids starting c<12 hex>. are runs placed by a concurrency key")
        return value

    @model_validator(mode="after")
    def _check_input(self) -> RunSpec:
        if self.double_texting is not None and self.thread_id is None:
            raise ValueError("'double_texting' is a policy of runs on a thread ('thread_id')")
        if self.prompt is None and not self.messages:
            raise ValueError("a run needs a 'prompt' or a non-empty 'messages' list")
        if self.prompt is not None and self.messages:
            raise ValueError("give either 'prompt' or 'messages', not both")
        return self

    def initial_messages(self) -> list[Message]:
        if self.messages:
            return list(self.messages)
        return [UserMessage(content=self.prompt or "")]
