"""The deployment's tenant budgets (`AGENTQ_TENANT_BUDGETS`), pure:

    AGENTQ_TENANT_BUDGETS='{"*": {"max_cost_usd": 100, "period": "day"},
                            "acme": {"max_cost_usd": 2500, "period": "month"}}'

A tenant's own entry replaces `*` whole; a tenant with neither has no budget, and its
steps are not checked against one. The operator raises a tenant's budget in Redis
(`agentq budget tenant`, ledger.py), over the entry, for tenants that have one; the
period stays the entry's. A budget with a `period` is on the tenant's spend in the
current day or month (UTC: shared.py's `window`; each step is counted in its window's
totals too, which expire after it); without one, on its total spend.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from agentq.orchestrator.budgets.shared import SharedBudget
from agentq.orchestrator.core.errors import SpecError

ANY_TENANT = "*"


def tenant_budgets(raw: Mapping[str, Mapping[str, float | str]]) -> dict[str, SharedBudget]:
    """The setting's entries, each checked (SpecError naming the tenant and the field)."""
    budgets: dict[str, SharedBudget] = {}
    for tenant, entry in raw.items():
        try:
            budgets[tenant] = SharedBudget.model_validate(entry)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(p) for p in error["loc"])
            raise SpecError(f"AGENTQ_TENANT_BUDGETS[{tenant!r}].{field}: {error['msg']}") from None
    return budgets


def budget_for(budgets: Mapping[str, SharedBudget], tenant: str) -> SharedBudget | None:
    """The tenant's entry, else `*`, else none."""
    return budgets.get(tenant, budgets.get(ANY_TENANT))
