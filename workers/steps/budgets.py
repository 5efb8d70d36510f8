"""A step's budgets at the I/O edge: what the run has spent, read from its meta hash
only when a budget is in force (the judgement is pure: orchestrator/policy/budgets.py),
and what the step itself spent."""

from __future__ import annotations

from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.loop.plan import StepPlan
from agentq.orchestrator.policy.budgets import Spent
from agentq.orchestrator.runs.state import MetaField, rolled_up_usage
from agentq.orchestrator.runs.store import RunStore


def spent_of(usage: Usage, tool_calls: int) -> Spent:
    return Spent(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        cost_usd=usage.cost_usd,
        tool_calls=tool_calls,
    )


async def run_spent(store: RunStore, run_id: str) -> Spent:
    """The run's own steps and its sub-agents' so far; its own tool calls."""
    meta = await store.meta(run_id)
    return spent_of(rolled_up_usage(meta), int(meta.get(MetaField.TOOL_CALLS) or 0))


def step_spent(planned: StepPlan) -> Spent:
    return spent_of(planned.usage, len(planned.calls))
