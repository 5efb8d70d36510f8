"""`client.budgets`: the shared budgets of batches and tenants (orchestrator/budgets/) as
their operator sees them, and their raise, which sends the steps they held on.

A raise writes the new budget first, then redrives each run held under it (the runs'
sweeper's own transition, runs/redrive.py: the held step's model job enqueued again
unless in hand). The worker that holds a step reads the budget again once the hold is
written (workers/steps/budgets.py): a step held after the raise's write goes on by itself.
One held before it whose job is still in hand (the worker ending it) is redriven again,
`IN_HAND_RETRIES` times `IN_HAND_WAIT_S` apart, until its job has ended. Every held run is
also scored for the sweeper's recheck (AGENTQ_BUDGET_RECHECK_S): no held step waits on a
raise that missed it for longer.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from agentq.orchestrator.budgets.ledger import BudgetLedger
from agentq.orchestrator.budgets.shared import Scope, SharedBudget, judge
from agentq.orchestrator.budgets.tenants import budget_for
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.redrive import Redriver
from agentq.orchestrator.runs.state import Outcome
from agentq.orchestrator.runs.store import RunStore

# A held run whose step's job is in hand when the raise redrives it: most often the job
# that held it, still ending. Redriven again this often, this far apart.
IN_HAND_RETRIES = 10
IN_HAND_WAIT_S = 0.1


class BudgetStatus(BaseModel):
    """A scope's budget in force, what it spent, and the steps it holds."""

    scope: str
    window: str | None = None  # a periodic tenant budget's window now (UTC)
    budget: SharedBudget | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    # The reached limit's message (None: steps may start); the runs held at a step.
    reached: str | None = None
    held_runs: int = 0


class SharedBudgets:
    def __init__(self, store: RunStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.ledger = BudgetLedger(store.redis, settings)

    async def status(self, scope: Scope) -> BudgetStatus:
        budget, spend = await self.ledger.status(scope)
        reached = judge(scope, budget, spend) if budget is not None else None
        return BudgetStatus(
            scope=scope.id,
            window=scope.window,
            budget=budget,
            spent_usd=spend.cost_usd,
            spent_tokens=spend.total_tokens,
            reached=reached.message() if reached is not None else None,
            held_runs=len(await self.ledger.held(scope)),
        )

    async def set_budget(self, scope: Scope, budget: SharedBudget) -> BudgetStatus:
        """Set the limits `budget` names (the others stay), then send the held steps on."""
        await self.ledger.set_budget(scope, budget)
        redriver = Redriver(
            self.store, after_s=self.settings.redrive_after_s, limit=self.settings.redrive_batch
        )
        pending = await self.ledger.held(scope)
        for attempt in range(IN_HAND_RETRIES + 1):
            in_hand = [
                run_id
                for run_id in pending
                if (await redriver.redrive_run(run_id))[0] == Outcome.IN_HAND
            ]
            if not in_hand or attempt == IN_HAND_RETRIES:
                break
            await asyncio.sleep(IN_HAND_WAIT_S)
            # Still held: the job in hand was the one that held it, and has ended by now.
            still = set(await self.ledger.held(scope))
            pending = [run_id for run_id in in_hand if run_id in still]
        return await self.status(scope)

    async def tenant(self, tenant: str) -> BudgetStatus:
        return await self.status(self.ledger.tenant_scope(tenant))

    async def set_tenant(
        self,
        tenant: str,
        *,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
    ) -> BudgetStatus:
        """Raise (or set) a tenant's budget over the deployment's AGENTQ_TENANT_BUDGETS
        entry; the tenant's held steps go on and its submits are accepted again. A tenant
        the deployment gives no budget (no entry of its own, no `*`) is a SpecError: its
        steps are never checked against one."""
        if budget_for(self.ledger.tenants, tenant) is None:
            raise SpecError(
                f"tenant {tenant!r} has no budget to raise: give it one in "
                "AGENTQ_TENANT_BUDGETS (its own entry or '*')"
            )
        budget = SharedBudget(max_cost_usd=max_cost_usd, max_total_tokens=max_total_tokens)
        return await self.set_budget(self.ledger.tenant_scope(tenant), budget)
