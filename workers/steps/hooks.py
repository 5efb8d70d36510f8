"""Hooks a worker registers: `@prepare_step`, `@stop_when`, `@needs_approval`,
`@guardrail`, `@to_model_output`.

`@prepare_step`: a function that changes a step before it runs.

A run names one with `"prepare_step": "NAME"`. The hook is called with the step
number, the steps so far (`StepResult`s) and the messages about to be sent, and
returns overrides: a dict or `StepOverrides` with any of `model`, `system`,
`tool_choice`, `active_tools`, `messages` (or None: no change). Sync or async.

Decorating registers the hook in this process, the way a plugin module
registers a provider; a worker that loaded it announces it (kind
`prepare-step`), so that submit can check the name and a model step on a
worker without it can send the hook to a queue of a worker with it.

`@stop_when` (a run's `{"hook": NAME}` stop condition) is called with the step's
result (a `StepResult`: text, tool calls, usage) and returns whether the run
ends. `@needs_approval` (a tool's `"needs_approval": {"hook": NAME}`) is called
with a call's input and its tool's name and returns whether the call waits for
approval. Both answer a bool, sync or async, and are called as prepare_step
hooks are (workers/steps/hook_calls.py: in the model step when its worker
registered them, else as a job on a queue of a worker that announced them).

`@guardrail` (named in a run's `guardrails`) is called with a `GuardCheck` (the
stage and what is checked) and answers None to pass or a reason to trip; it is
called the same way (orchestrator/policy/guardrails.py).

`@to_model_output` (a tool's `"to_model_output": NAME`, or `@tool(to_model_output=fn)`)
is called with a call's output and answers what the model sees of it
(orchestrator/core/model_output.py); its registry is the tools layer's
(workers/tools/model_output.py), listed here with the others.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, overload

from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.core.model_output import model_output
from agentq.orchestrator.loop.prepare import (
    GUARDRAIL_KIND,
    LLM_GUARDRAIL_KIND,
    NEEDS_APPROVAL_KIND,
    PREPARE_STEP_KIND,
    STOP_WHEN_KIND,
    TO_MODEL_OUTPUT_KIND,
    StepOverrides,
    parse_overrides,
)
from agentq.orchestrator.policy.guardrails import LLM_GUARD_LABEL
from agentq.orchestrator.runs.result import StepResult
from agentq.orchestrator.tools import ToolAnnouncement
from agentq.workers.tools.model_output import registered_converters


@dataclass(frozen=True)
class PrepareStepHook:
    name: str
    fn: Callable[..., Any]

    async def __call__(
        self, step: int, steps: Sequence[StepResult], messages: Sequence[Message]
    ) -> StepOverrides:
        kwargs = {"step": step, "steps": list(steps), "messages": list(messages)}
        if inspect.iscoroutinefunction(self.fn):
            value = await self.fn(**kwargs)
        else:
            value = await asyncio.to_thread(self.fn, **kwargs)
        return parse_overrides(value, self.name)


_HOOKS: dict[str, PrepareStepHook] = {}


@overload
def prepare_step(fn: Callable[..., Any], /) -> PrepareStepHook: ...


@overload
def prepare_step(*, name: str | None = None) -> Callable[[Callable[..., Any]], PrepareStepHook]: ...


def prepare_step(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None
) -> PrepareStepHook | Callable[[Callable[..., Any]], PrepareStepHook]:
    """Register a prepare_step hook: `@prepare_step` or `@prepare_step(name=...)`."""

    def register(f: Callable[..., Any]) -> PrepareStepHook:
        hook = PrepareStepHook(name=name or f.__name__, fn=f)
        _HOOKS[hook.name] = hook
        return hook

    return register(fn) if fn is not None else register


def registered_hooks() -> dict[str, PrepareStepHook]:
    return dict(_HOOKS)


def _a_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"returned {type(value).__name__}, not a bool")
    return value


def _a_reason(value: Any) -> str | None:
    """A guardrail's answer: None (pass) or why it trips."""
    if value is not None and not (isinstance(value, str) and value):
        raise TypeError(f"returned {value!r}, not None (pass) or a reason (trip)")
    return value


@dataclass(frozen=True)
class RuleHook:
    """A hook that answers a question of the loop: yes/no (`@stop_when`,
    `@needs_approval`), or pass/why not (`@guardrail`); `answer` checks what it returned."""

    kind: str
    name: str
    fn: Callable[..., Any]
    answer: Callable[[Any], Any] = _a_bool

    async def __call__(self, *args: Any) -> Any:
        if inspect.iscoroutinefunction(self.fn):
            value = await self.fn(*args)
        else:
            value = await asyncio.to_thread(self.fn, *args)
        return self.answer(value)


_RULE_HOOKS: dict[tuple[str, str], RuleHook] = {}


def _rule_decorator(
    kind: str,
    fn: Callable[..., Any] | None,
    name: str | None,
    answer: Callable[[Any], Any] = _a_bool,
) -> RuleHook | Callable[[Callable[..., Any]], RuleHook]:
    def register(f: Callable[..., Any]) -> RuleHook:
        hook = RuleHook(kind=kind, name=name or f.__name__, fn=f, answer=answer)
        _RULE_HOOKS[(kind, hook.name)] = hook
        return hook

    return register(fn) if fn is not None else register


@overload
def stop_when(fn: Callable[..., Any], /) -> RuleHook: ...


@overload
def stop_when(*, name: str | None = None) -> Callable[[Callable[..., Any]], RuleHook]: ...


def stop_when(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None
) -> RuleHook | Callable[[Callable[..., Any]], RuleHook]:
    """Register a stop condition hook: `@stop_when` or `@stop_when(name=...)`; called
    with the step's `StepResult`, it returns True to end the run."""
    return _rule_decorator(STOP_WHEN_KIND, fn, name)


@overload
def needs_approval(fn: Callable[..., Any], /) -> RuleHook: ...


@overload
def needs_approval(*, name: str | None = None) -> Callable[[Callable[..., Any]], RuleHook]: ...


def needs_approval(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None
) -> RuleHook | Callable[[Callable[..., Any]], RuleHook]:
    """Register an approval rule hook: `@needs_approval` or `@needs_approval(name=...)`;
    called with a call's input and its tool's name, it returns True to park the call."""
    return _rule_decorator(NEEDS_APPROVAL_KIND, fn, name)


@overload
def guardrail(fn: Callable[..., Any], /) -> RuleHook: ...


@overload
def guardrail(*, name: str | None = None) -> Callable[[Callable[..., Any]], RuleHook]: ...


def guardrail(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None
) -> RuleHook | Callable[[Callable[..., Any]], RuleHook]:
    """Register a guardrail: `@guardrail` or `@guardrail(name=...)`; called with a
    `GuardCheck`, it returns None to let the run go on or a reason to trip."""
    return _rule_decorator(GUARDRAIL_KIND, fn, name, _a_reason)


def llm_guardrail(fn: Callable[..., Any]) -> RuleHook:
    """Serve the built-in llm guardrail (workers/steps/llm_guard.py) with `fn`, called
    with a `GuardCheck` and the entry's `LlmCheck`; it answers as a `@guardrail` does."""
    hook = _rule_decorator(LLM_GUARDRAIL_KIND, fn, LLM_GUARD_LABEL, _a_reason)
    assert isinstance(hook, RuleHook)
    return hook


def rule_hook(kind: str, name: str) -> RuleHook | None:
    return registered_rule_hooks().get((kind, name))


def registered_rule_hooks() -> dict[tuple[str, str], RuleHook]:
    """The rule hooks, and the `to_model_output` converters (registered in the tools
    layer, which `@tool` belongs to), which answer their normalized output."""
    converters = {
        (TO_MODEL_OUTPUT_KIND, name): RuleHook(TO_MODEL_OUTPUT_KIND, name, fn, model_output)
        for name, fn in registered_converters().items()
    }
    return {**_RULE_HOOKS, **converters}


def hook_announcements(queue: str) -> list[ToolAnnouncement]:
    """What a worker serving `queue` announces for its hooks."""
    prepare = [
        ToolAnnouncement(
            name=name, kind=PREPARE_STEP_KIND, queue=queue, description="prepare_step hook"
        )
        for name in sorted(_HOOKS)
    ]
    return prepare + [
        ToolAnnouncement(name=name, kind=kind, queue=queue, description=f"{kind} hook")
        for kind, name in sorted(registered_rule_hooks())
    ]
