"""A step's budgets at the I/O edge: what the run has spent, read from its meta hash
only when a budget is in force (the judgement is pure: orchestrator/policy/budgets.py),
and what the step itself spent; and the shared budgets of its batch and tenant
(orchestrator/budgets/), which hold the step instead of failing the run."""

from __future__ import annotations

import logging

from agentq.orchestrator.budgets.ledger import BudgetLedger
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.loop.plan import StepPlan
from agentq.orchestrator.policy.budgets import Spent
from agentq.orchestrator.runs.state import HoldStep, MetaField, Outcome, rolled_up_usage
from agentq.orchestrator.runs.store import RunStore

log = logging.getLogger("agentq.worker")


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


async def held_by_shared(
    ledger: BudgetLedger,
    store: RunStore,
    settings: Settings,
    run_id: str,
    step: int,
    tenant: str,
    batch: str | None,
) -> bool:
    """Whether a shared budget of the run's holds its begun step (then held: hold_step.lua,
    a `step-held` event naming the budget, no model call).

    A raise writes the budget, then sends on the steps held under it, and skips a step whose
    job is in hand: a raise between this read and the hold, or while this job still runs,
    would miss it, and the step would wait for the sweeper's recheck
    (AGENTQ_BUDGET_RECHECK_S). So the budget is read again once held: a step the raise
    missed goes on now (its commit clears the hold), as one it found would."""
    reached = await ledger.reached(tenant, batch)
    if reached is None:
        return False
    scope, message = reached.scope.id, reached.message()
    log.info("model step %s/%d held: %s", run_id, step, message)
    event = event_json("step-held", run_id, step=step, budget=scope, message=message)
    recheck_ms = int(settings.budget_recheck_s * 1000)
    held = await store.hold_step(
        HoldStep(run_id=run_id, step=step, scope=scope, event=event, recheck_ms=recheck_ms)
    )
    if held.outcome == Outcome.HELD and await ledger.reached(tenant, batch) is None:
        log.info("model step %s/%d goes on: its budget was raised as it was held", run_id, step)
        return False
    return True
