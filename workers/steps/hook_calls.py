"""A registered hook called for a step: here, or as a `hook` job where it is registered.

Every hook kind (`@prepare_step`, `@stop_when`, `@needs_approval`, `@guardrail`,
`@to_model_output`) is called the same way: when this process registered it, at once;
else as a `hook` job on a queue of a worker that announced it, whose reply the step waits
for within its deadline (orchestrator/runs/hook_jobs.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.core.messages import MESSAGE_ADAPTER, Message
from agentq.orchestrator.loop.prepare import (
    GUARDRAIL_KIND,
    LLM_GUARDRAIL_KIND,
    NEEDS_APPROVAL_KIND,
    PREPARE_STEP_KIND,
    STOP_WHEN_KIND,
    TO_MODEL_OUTPUT_KIND,
)
from agentq.orchestrator.policy.guardrails import LlmCheck, check_from_json
from agentq.orchestrator.runs import hook_jobs
from agentq.orchestrator.runs.hook_jobs import LABELS, HookFailed, HookRequest
from agentq.orchestrator.runs.result import StepResult, assemble
from agentq.orchestrator.runs.store import RunStore
from agentq.workers.steps.hooks import registered_hooks, rule_hook


def registered(request: HookRequest) -> bool:
    if request.kind == PREPARE_STEP_KIND:
        return request.name in registered_hooks()
    return rule_hook(request.kind, request.name) is not None


def failure(request: HookRequest, exc: BaseException) -> str:
    return f"{request.label} raised {type(exc).__name__}: {exc}"


async def call(
    store: RunStore, run_id: str, step: int, request: HookRequest, timeout_s: float
) -> Any:
    """The hook's answer as JSON, or HookFailed."""
    if not registered(request):
        return await hook_jobs.ask(store, run_id, step, request, timeout_s)
    with tracing.span(f"{LABELS.get(request.kind, request.kind)} {request.name}"):
        try:
            return await invoke(store, run_id, step, request)
        except Exception as exc:
            tracing.record_exception(exc)
            raise HookFailed(failure(request, exc)) from exc


async def invoke(store: RunStore, run_id: str, step: int, request: HookRequest) -> Any:
    """Call the hook this process registered; its answer as JSON."""
    if request.kind == PREPARE_STEP_KIND:
        hook = registered_hooks()[request.name]
        steps, messages = await hook_inputs(store, run_id)
        overrides = await hook(step, steps, messages)
        return overrides.model_dump(mode="json", exclude_unset=True)
    rule = rule_hook(request.kind, request.name)
    assert rule is not None
    return await rule(*_ARGS[request.kind](request.args))


# Each rule kind's arguments, from their JSON.
_ARGS: dict[str, Callable[[list[Any]], list[Any]]] = {
    STOP_WHEN_KIND: lambda args: [StepResult.model_validate(args[0])],
    NEEDS_APPROVAL_KIND: lambda args: list(args),
    GUARDRAIL_KIND: lambda args: [check_from_json(args[0])],
    LLM_GUARDRAIL_KIND: lambda args: [check_from_json(args[0]), LlmCheck.model_validate(args[1])],
    TO_MODEL_OUTPUT_KIND: lambda args: list(args),
}


async def hook_inputs(store: RunStore, run_id: str) -> tuple[list[StepResult], list[Message]]:
    """The steps so far and the run's messages, as a prepare_step hook receives them."""
    meta, raw_messages, raw_steps = await store.snapshot(run_id)
    result = assemble(run_id, meta, raw_messages, raw_steps)
    return result.steps, [MESSAGE_ADAPTER.validate_json(m) for m in raw_messages]
