"""A run's guardrails asked, and a tool's result guarded before the model sees it.

Every result of a call whose tool carries the run's `tool_output` guards passes them
before it is recorded, wherever it came from: a worker's tool job, a remote service's
lease, a client tool's result posted by the CLI, HTTP or Python, a child run's answer, a
workflow's output. A trip withholds the output: the model sees a `denied` tool error
naming the guard, after a `guardrail-tripped` event; a guard that cannot answer
withholds it too (an output nobody could check is not passed on), as an `execution`
error. Who asks decides how a guard is called (`ask`): a worker calls the guards it
registered itself (workers/steps/hook_calls.py), anyone else asks a worker that
announced them (a `hook` job, hook_jobs.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.loop.plan import error_result
from agentq.orchestrator.loop.prepare import GUARDRAIL_KIND, LLM_GUARDRAIL_KIND
from agentq.orchestrator.policy.guardrails import (
    LLM_GUARD_LABEL,
    GuardCheck,
    GuardEntry,
    Trip,
    guard_label,
)
from agentq.orchestrator.runs import hook_jobs
from agentq.orchestrator.runs.hook_jobs import HookFailed, HookRequest
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.tools import ToolDef

# How a hook is called: (store, run id, step, request, timeout) -> its JSON answer.
Ask = Callable[[RunStore, str, int, HookRequest, float], Awaitable[Any]]


async def first_trip(
    store: RunStore,
    run_id: str,
    step: int,
    guards: Sequence[GuardEntry],
    check: GuardCheck,
    timeout_s: float,
    ask: Ask = hook_jobs.ask,
) -> Trip | None:
    """The first of `guards` that trips on `check`, asked in order; raises HookFailed
    when one cannot answer. An llm check is the built-in llm guardrail hook, asked with
    its prompt and model as any `@guardrail` is."""
    args = [check.model_dump(mode="json")]
    for guard in guards:
        request = (
            HookRequest(kind=GUARDRAIL_KIND, name=guard, args=args)
            if isinstance(guard, str)
            else HookRequest(
                kind=LLM_GUARDRAIL_KIND,
                name=LLM_GUARD_LABEL,
                args=[*args, guard.llm.model_dump(mode="json")],
            )
        )
        reason = await ask(store, run_id, step, request, timeout_s)
        if reason is not None:
            if not isinstance(reason, str) or not reason:
                raise HookFailed(f"{request.label} answered {reason!r}")
            return Trip(guardrail=guard_label(guard), stage=check.stage, reason=reason)
    return None


async def guarded_result(
    store: RunStore,
    run_id: str,
    step: int,
    tool: ToolDef | None,
    result: ToolResultPart,
    ask: Ask = hook_jobs.ask,
) -> ToolResultPart:
    """The result, or a tool error in its place when a `tool_output` guard trips on it
    (or cannot answer). An error is not guarded: it says nothing of the tool's."""
    if tool is None or not tool.output_guards or result.is_error:
        return result
    check = GuardCheck(stage="tool_output", value=result.output, tool_name=tool.name)
    try:
        trip = await first_trip(store, run_id, step, tool.output_guards, check, tool.timeout_s, ask)
    except HookFailed as exc:
        return error_result(
            result.tool_call_id, result.tool_name, exc.message, ToolErrorKind.EXECUTION
        )
    if trip is None:
        return result
    tripped = event_json(
        "guardrail-tripped",
        run_id,
        step=step,
        tool_call_id=result.tool_call_id,
        tool_name=result.tool_name,
        stage=trip.stage,
        guardrail=trip.guardrail,
        reason=trip.reason,
    )
    await store.emit(run_id, [tripped])
    return error_result(result.tool_call_id, result.tool_name, trip.message, ToolErrorKind.DENIED)
