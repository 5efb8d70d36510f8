"""What a step's plan needs besides the model's answer, gathered at the I/O edge.

The stop conditions and approval rules are judged purely (orchestrator/policy/) on
facts some of which only a worker can get: the run's token total (read from the
run only when a `usage_exceeds` asks), what the `@stop_when` hooks the spec names
answer when called with the step's result, which valid calls a `tool_input`
guardrail trips on, and what a tool's `@needs_approval` hook answers for each other
valid call of it. They are gathered here, before
`plan_step`, and stored with the step (`Answers`), so a replay plans the same.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from agentq.orchestrator.core.errors import ToolInputError
from agentq.orchestrator.loop.plan import (
    Answers,
    call_ids,
    lenient_parse,
    offered_tools,
    parse_arguments,
    validate_input,
)
from agentq.orchestrator.loop.prepare import NEEDS_APPROVAL_KIND, STOP_WHEN_KIND
from agentq.orchestrator.policy.approval_rules import ApprovalHook
from agentq.orchestrator.policy.guardrails import GuardCheck, Trip
from agentq.orchestrator.policy.stop_conditions import hook_names, needs_usage
from agentq.orchestrator.runs import result_guards
from agentq.orchestrator.runs.hook_jobs import HookFailed, HookRequest
from agentq.orchestrator.runs.result import StepResult, ToolCallRecord
from agentq.orchestrator.runs.state import MetaField
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.workers.models import ModelResponse
from agentq.workers.steps import hook_calls
from agentq.workers.steps.prepare import StepPreparationFailed


async def gather(
    store: RunStore,
    run_id: str,
    step: int,
    spec: RunSpec,
    tools: list[ToolDef],
    response: ModelResponse,
) -> Answers:
    """Raises StepPreparationFailed (the run fails) when a hook raises, is served by no
    live worker or does not answer within the model's timeout."""
    run_tokens = 0
    if needs_usage(spec.stop_when):
        # The totals before this step: the step's own usage is added when it commits.
        meta = await store.meta(run_id)
        run_tokens = int(meta.get(MetaField.USAGE_TOTAL, 0))
    ask = functools.partial(_ask, store, run_id, step, spec.model.timeout_s)
    names = hook_names(spec.stop_when)
    stop_hooks: dict[str, bool] = {}
    if names:
        result = step_result(step, response).model_dump(mode="json")
        for name in names:
            stop_hooks[name] = await ask(HookRequest(kind=STOP_WHEN_KIND, name=name, args=[result]))
    # Only a `tool_input` guardrail or an approval hook looks at the calls' inputs here
    # (plan_step parses and validates every call's input): without one, none is parsed
    # and validated twice.
    guarded = spec.guardrails is not None and bool(spec.guardrails.tool_input)
    hooked = any(isinstance(t.approval_rule, ApprovalHook) for t in tools)
    calls = list(_valid_calls(spec, tools, step, response)) if guarded or hooked else []
    trips = await _tool_trips(store, run_id, step, spec, calls)
    return Answers(
        run_tokens=run_tokens,
        stop_hooks=stop_hooks,
        # A call a guard tripped on is not run: nothing to approve.
        approvals=await _approvals(ask, [c for c in calls if c[0] not in trips]),
        tool_trips=trips,
    )


def _valid_calls(
    spec: RunSpec, tools: list[ToolDef], step: int, response: ModelResponse
) -> Iterator[tuple[str, ToolDef, Any]]:
    """Each call of an offered tool whose input is valid, with its id and input (an
    invalid call is answered with a tool error at once: nothing to guard or approve)."""
    by_name = {t.name: t for t in offered_tools(spec, tools)}
    for call_id, raw in zip(call_ids(step, response), response.tool_calls, strict=True):
        tool = by_name.get(raw.name)
        if tool is None or raw.provider_executed:
            continue
        try:
            value = parse_arguments(raw.arguments)
            validate_input(tool, value)
        except ToolInputError:
            continue
        yield call_id, tool, value


async def _tool_trips(
    store: RunStore, run_id: str, step: int, spec: RunSpec, calls: list[tuple[str, ToolDef, Any]]
) -> dict[str, Trip]:
    """The calls a `tool_input` guardrail trips on (they are not run)."""
    names = spec.guardrails.tool_input if spec.guardrails is not None else []
    trips: dict[str, Trip] = {}
    for call_id, tool, value in calls if names else ():
        check = GuardCheck(stage="tool_input", value=value, tool_name=tool.name)
        try:
            trip = await result_guards.first_trip(
                store, run_id, step, names, check, spec.model.timeout_s, hook_calls.call
            )
        except HookFailed as exc:
            raise StepPreparationFailed(exc.message) from exc
        if trip is not None:
            trips[call_id] = trip
    return trips


async def _approvals(
    ask: Callable[[HookRequest], Awaitable[bool]], calls: list[tuple[str, ToolDef, Any]]
) -> dict[str, bool]:
    """Each call of a tool with an approval hook: whether it waits."""
    out: dict[str, bool] = {}
    for call_id, tool, value in calls:
        if not isinstance(tool.approval_rule, ApprovalHook):
            continue
        hook = tool.approval_rule.hook
        out[call_id] = await ask(
            HookRequest(kind=NEEDS_APPROVAL_KIND, name=hook, args=[value, tool.name])
        )
    return out


def step_result(step: int, response: ModelResponse) -> StepResult:
    """The step as a `@stop_when` hook sees it: its text, calls and usage (its tool
    results are not in yet: the run ends once they are)."""
    return StepResult(
        index=step,
        text=response.text,
        tool_calls=[
            ToolCallRecord(id=call_id, name=raw.name, input=lenient_parse(raw.arguments))
            for call_id, raw in zip(call_ids(step, response), response.tool_calls, strict=True)
        ],
        finish_reason=response.finish_reason,
        usage=response.usage,
    )


async def _ask(
    store: RunStore, run_id: str, step: int, timeout_s: float, request: HookRequest
) -> bool:
    """What a rule hook answered (workers/steps/hook_calls.py: here, or as a job)."""
    try:
        value = await hook_calls.call(store, run_id, step, request, timeout_s)
    except HookFailed as exc:
        raise StepPreparationFailed(exc.message) from exc
    if not isinstance(value, bool):
        raise StepPreparationFailed(f"{request.label} answered {value!r}, not true or false")
    return value
