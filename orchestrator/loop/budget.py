"""What a budget reached means for a step's plan, pure (the judgement is
orchestrator/policy/budgets.py; the worker gathers what was spent).

A step that went over a budget is recorded, its usage counted, but its tool calls are
not run: each is answered at once with a `cancelled` tool error naming the limit. Then
the run fails `budget-exceeded` (`on_limit: "fail"`, the commit carries the failure), or
goes on to one last step with tools disabled (`"finish"`), which ends the run whatever
it answers.
"""

from __future__ import annotations

from typing import Literal

from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.loop.plan import StepPlan, error_result
from agentq.orchestrator.policy.budgets import Reached
from agentq.orchestrator.runs.state import CallStatus, FailureKind, RunFailure, StepAfter


def budget_failure(reached: Reached, step: int) -> RunFailure:
    return RunFailure(
        kind=FailureKind.BUDGET_EXCEEDED, message=reached.message(), step=step, limit=reached.name
    )


def over_budget(
    planned: StepPlan, reached: Reached, on_limit: Literal["fail", "finish"], *, last: bool
) -> RunFailure | None:
    """Apply a reached budget to the plan (its calls refused; the last step ends the run);
    the failure the commit ends the run with, if any."""
    for call in planned.local_calls:
        if call.result is None:
            message = f"not run: {reached.message()}"
            call.status = CallStatus.DONE
            call.result = error_result(call.id, call.name, message, ToolErrorKind.CANCELLED)
            call.queue = None
    if last:
        planned.after = StepAfter.FINISH
        return None
    return budget_failure(reached, planned.step) if on_limit == "fail" else None
