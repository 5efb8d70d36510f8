"""prepareStep, the pure part: which overrides a step gets, and what it then sends.

A step's request starts from the run's spec. A declarative rule of `spec.steps`
(the first whose `when` matches) and then the run's `prepare_step` hook may
override the model, the system prompt, the tool choice, the active tools and
(the hook only) the messages. What was overridden, and a digest of what was
sent, are recorded in the step, so that a replay can tell whether today's code
would send the same thing. No I/O here: the worker calls the hook and the model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.messages import AssistantMessage, Message, normalize_message
from agentq.orchestrator.policy.approval_rules import ApprovalHook
from agentq.orchestrator.policy.guardrails import GuardEntry, Guardrails, LlmGuard
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.policy.model_ref import parse_model as _parse_model
from agentq.orchestrator.policy.stop_conditions import hook_names
from agentq.orchestrator.spec.run import RunSpec, StepRule, ToolChoice, ToolChoiceTool
from agentq.orchestrator.tools import ToolAnnouncement, ToolDef

# The registry kinds a worker announces its `@prepare_step`, `@stop_when`,
# `@needs_approval`, `@guardrail` and `@to_model_output` hooks under.
PREPARE_STEP_KIND = "prepare-step"
STOP_WHEN_KIND = "stop-when"
NEEDS_APPROVAL_KIND = "needs-approval"
GUARDRAIL_KIND = "guardrail"
TO_MODEL_OUTPUT_KIND = "to-model-output"
# The built-in hook that asks a model for an llm guardrail's verdict (every worker
# serves it, with its own model client: workers/steps/llm_guard.py).
LLM_GUARDRAIL_KIND = "llm-guardrail"
HOOK_KINDS = (
    PREPARE_STEP_KIND,
    STOP_WHEN_KIND,
    NEEDS_APPROVAL_KIND,
    GUARDRAIL_KIND,
    TO_MODEL_OUTPUT_KIND,
    LLM_GUARDRAIL_KIND,
)


class StepOverrides(BaseModel):
    """What a rule or a hook changes for one step; unset fields keep the run's."""

    model_config = ConfigDict(extra="forbid")

    model: Annotated[ModelRef, BeforeValidator(_parse_model)] | None = None
    system: str | None = None
    tool_choice: ToolChoice | None = None
    active_tools: list[str] | None = None
    messages: list[Annotated[Message, BeforeValidator(normalize_message)]] | None = None

    @property
    def empty(self) -> bool:
        return not self.model_fields_set or all(
            getattr(self, name) is None for name in self.model_fields_set
        )

    def then(self, later: StepOverrides) -> StepOverrides:
        """These overrides with `later`'s set fields on top (a hook after a rule)."""
        update = {name: getattr(later, name) for name in later.model_fields_set}
        merged = self.model_copy(update=update)
        merged.__pydantic_fields_set__ = self.model_fields_set | later.model_fields_set
        return merged

    def record(self) -> dict[str, Any]:
        """JSON as stored in the step: only what was overridden."""
        return self.model_dump(mode="json", exclude_none=True)


def called_before(messages: Sequence[Message]) -> set[str]:
    """The tools the previous step called: those of the last assistant message."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return {p.tool_name for p in message.tool_calls()}
    return set()


def matching_rule(
    rules: Sequence[StepRule] | None, step: int, previous_calls: Collection[str]
) -> tuple[int, StepRule] | None:
    """The first rule whose `when` holds for this step, with its index."""
    for index, rule in enumerate(rules or ()):
        when = rule.when
        if (
            (when.step is not None and when.step == step)
            or (when.after_tool is not None and when.after_tool in previous_calls)
            or (when.step_at_least is not None and step >= when.step_at_least)
        ):
            return index, rule
    return None


def rule_overrides(rule: StepRule) -> StepOverrides:
    fields = {n: getattr(rule, n) for n in ("model", "system", "tool_choice", "active_tools")}
    return StepOverrides(**{n: v for n, v in fields.items() if v is not None})


def parse_overrides(value: Any, hook: str) -> StepOverrides:
    """A hook's return value (None, a dict or StepOverrides) as overrides."""
    if value is None:
        return StepOverrides()
    if isinstance(value, StepOverrides):
        return value
    if isinstance(value, dict):
        return StepOverrides.model_validate(value)
    raise TypeError(
        f"prepare_step hook {hook!r} returned {type(value).__name__}; "
        "expected a dict, StepOverrides or None"
    )


def applied(spec: RunSpec, overrides: StepOverrides) -> RunSpec:
    """The spec this step runs with (messages are not part of it)."""
    update = {
        name: getattr(overrides, name)
        for name in ("model", "system", "tool_choice", "active_tools")
        if getattr(overrides, name) is not None
    }
    return spec.model_copy(update=update) if update else spec


def digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class Hasher(Protocol):
    """A hashlib hash object (what `messages_digest` feeds)."""

    def update(self, data: bytes, /) -> None: ...
    def copy(self) -> Hasher: ...
    def hexdigest(self) -> str: ...


def digesting(hasher: Hasher, messages: Sequence[Message]) -> Hasher:
    """`hasher` fed with `messages`: a digest of a history can be carried on as the
    history grows (workers/steps/history_cache.py), not taken over it all at every step."""
    for message in messages:
        hasher.update(message.__pydantic_serializer__.to_json(message))
        hasher.update(b"\n")
    return hasher


def hasher_digest(hasher: Hasher) -> str:
    return hasher.hexdigest()[:16]


def messages_digest(messages: Sequence[Message]) -> str:
    """The messages' identity; pydantic's own JSON (its field order is the models')
    keeps this cheap on a long history: it is taken at every step."""
    return hasher_digest(digesting(hashlib.sha256(), messages))


def sent_record(
    spec: RunSpec,
    messages: Sequence[Message],
    offered: Sequence[str],
    *,
    known_digest: str | None = None,
) -> dict[str, Any]:
    """What a step sent, as digests a replay compares: small whatever the history's size.
    `known_digest`: the messages' digest when the caller has it already."""
    choice = spec.tool_choice
    return {
        "model": spec.model.label,
        "system": digest(spec.system),
        "tools": list(offered),
        "tool_choice": choice.model_dump() if isinstance(choice, ToolChoiceTool) else choice,
        "messages": known_digest or messages_digest(messages),
        "n_messages": len(messages),
    }


def check_step_rules(spec: RunSpec, tool_names: Collection[str]) -> None:
    """Refuse rules that name tools the run does not have (one line each)."""
    for index, rule in enumerate(spec.steps or ()):
        named = list(rule.active_tools or ())
        if isinstance(rule.tool_choice, ToolChoiceTool):
            named.append(rule.tool_choice.tool)
        if rule.when.after_tool is not None:
            named.append(rule.when.after_tool)
        for name in named:
            if name not in tool_names:
                raise SpecError(f"steps[{index}] names tool {name!r}, which the run does not have")


async def checked_preparation(
    spec: RunSpec,
    tools: Sequence[ToolDef],
    hooks: Mapping[str, Collection[str]],
    resolve: Callable[[ModelRef], Awaitable[ModelRef]],
) -> RunSpec:
    """The spec's step rules and context policy, checked at submit: every model one the
    deployment allows (as for the main model; resolved the same way), every tool named
    one the run has (`tools`, resolved), every hook one a live worker announced
    (`hooks`: names by kind)."""
    check_step_rules(spec, [t.name for t in tools])
    for tool in tools:
        asker = tool.approval_rule
        if isinstance(asker, ApprovalHook) and asker.hook not in hooks.get(NEEDS_APPROVAL_KIND, ()):
            raise SpecError(
                f"tool {tool.name!r}: needs_approval hook {asker.hook!r} is not a hook any live "
                "worker registered (@needs_approval in a module loaded with --tools)"
            )
        converter = tool.to_model_output
        if converter is not None and converter not in hooks.get(TO_MODEL_OUTPUT_KIND, ()):
            raise SpecError(
                f"tool {tool.name!r}: to_model_output hook {converter!r} is not a hook any live "
                "worker registered (@to_model_output in a module loaded with --tools)"
            )
    if spec.prepare_step is not None and spec.prepare_step not in hooks.get(PREPARE_STEP_KIND, ()):
        raise SpecError(
            f"prepare_step {spec.prepare_step!r} is not a hook any live worker registered "
            "(@prepare_step in a module loaded with --tools)"
        )
    for name in hook_names(spec.stop_when):
        if name not in hooks.get(STOP_WHEN_KIND, ()):
            raise SpecError(
                f"stop_when: hook {name!r} is not a hook any live worker registered "
                "(@stop_when in a module loaded with --tools)"
            )
    for name in spec.guardrails.names() if spec.guardrails is not None else ():
        if name not in hooks.get(GUARDRAIL_KIND, ()):
            raise SpecError(
                f"guardrails: {name!r} is not a guardrail any live worker registered "
                "(@guardrail in a module loaded with --tools)"
            )
    update: dict[str, Any] = {}
    if spec.steps:
        rules = []
        for rule in spec.steps:
            if rule.model is not None:
                rule = rule.model_copy(update={"model": await resolve(rule.model)})
            rules.append(rule)
        update["steps"] = rules
    if spec.context is not None and spec.context.summary_model is not None:
        summary = await resolve(spec.context.summary_model)
        update["context"] = spec.context.model_copy(update={"summary_model": summary})
    if spec.guardrails is not None and any(
        isinstance(e, LlmGuard) for e in spec.guardrails.entries()
    ):
        update["guardrails"] = await _resolved_llm_guards(spec.guardrails, resolve)
    return spec.model_copy(update=update) if update else spec


async def _resolved_llm_guards(
    guardrails: Guardrails, resolve: Callable[[ModelRef], Awaitable[ModelRef]]
) -> Guardrails:
    """Each llm check's model, one the deployment offers, resolved as the main model is
    (stored resolved: a worker calls it as given)."""

    async def one(entry: GuardEntry, where: str) -> GuardEntry:
        if isinstance(entry, str):
            return entry
        try:
            ref = ModelRef.model_validate(_parse_model(entry.llm.model))
        except ValidationError as exc:
            raise SpecError(f"{where}.llm.model: {exc.errors()[0]['msg']}") from None
        except ValueError as exc:
            raise SpecError(f"{where}.llm.model: {exc}".splitlines()[0]) from None
        try:
            resolved = (await resolve(ref)).model_dump(mode="json", exclude_none=True)
        except SpecError as exc:
            raise SpecError(f"{where}.llm.{exc.message}") from None
        return entry.model_copy(update={"llm": entry.llm.model_copy(update={"model": resolved})})

    update = {
        stage: [await one(e, f"guardrails.{stage}[{i}]") for i, e in enumerate(entries)]
        for stage, entries in (
            ("input", guardrails.input),
            ("output", guardrails.output),
            ("tool_input", guardrails.tool_input),
            ("tool_output", guardrails.tool_output),
        )
    }
    return guardrails.model_copy(update=update)


def announced_hooks(registry: Mapping[str, ToolAnnouncement]) -> dict[str, set[str]]:
    """The hooks live workers announced: names by kind."""
    out: dict[str, set[str]] = {kind: set() for kind in HOOK_KINDS}
    for a in registry.values():
        if a.kind in out:
            out[a.kind].add(a.name)
    return out
