"""Shared budgets' pure half: when a budget lets no new step start, what its message says,
and the deployment's AGENTQ_TENANT_BUDGETS entries (a tenant's own, else `*`)."""

from __future__ import annotations

import pytest

from agentq.orchestrator.budgets.ledger import BudgetLedger, spend_of
from agentq.orchestrator.budgets.shared import Scope, SharedBudget, Spend, judge, window
from agentq.orchestrator.budgets.tenants import budget_for, tenant_budgets
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings

pytestmark = pytest.mark.unit

BATCH = Scope("batch", "acme", "nightly")


@pytest.mark.parametrize(
    ("budget", "spend", "reached"),
    [
        (SharedBudget(max_cost_usd=5), Spend(4.99, 10), None),
        (SharedBudget(max_cost_usd=5), Spend(5.0, 10), ("max_cost_usd", 5.0)),  # at it
        (SharedBudget(max_cost_usd=5), Spend(5.2, 10), ("max_cost_usd", 5.2)),
        (SharedBudget(max_total_tokens=100), Spend(9.0, 99), None),
        (SharedBudget(max_total_tokens=100), Spend(0.0, 100), ("max_total_tokens", 100)),
        (SharedBudget(max_cost_usd=5, max_total_tokens=100), Spend(6, 200), ("max_cost_usd", 6)),
        (SharedBudget(), Spend(1e9, 10**9), None),  # no limit set
    ],
)
def test_a_budget_is_reached_at_its_limit(
    budget: SharedBudget, spend: Spend, reached: tuple[str, float] | None
) -> None:
    found = judge(BATCH, budget, spend)
    assert (None if found is None else (found.limit, found.spent)) == reached


def test_the_message_names_the_budget_the_spend_and_the_raise() -> None:
    found = judge(Scope("tenant", "acme"), SharedBudget(max_cost_usd=2500), Spend(2500.12, 0))
    assert found is not None
    assert found.message() == (
        "budget reached: tenant 'acme' max_cost_usd 2500, 2500.12 spent "
        "(raise it: agentq budget tenant acme --max-cost-usd N)"
    )
    assert (BATCH.id, Scope("tenant", "acme").id) == ("batch:acme:nightly", "tenant:acme")


def test_a_raise_replaces_only_the_limits_it_names() -> None:
    both = SharedBudget(max_cost_usd=5, max_total_tokens=100)
    assert both.raised(SharedBudget(max_cost_usd=10)) == SharedBudget(
        max_cost_usd=10, max_total_tokens=100
    )


def test_spend_sums_the_partitions_tokens_and_cost_by_kind() -> None:
    rows: list[list[str | None]] = [
        ["10", "0.5", None, None, "0.25", None],
        [None] * 6,
        ["5", "1", "0", "0", "0", "0"],
    ]
    assert spend_of(rows) == Spend(cost_usd=1.75, total_tokens=15)


def test_a_tenants_own_entry_replaces_the_default() -> None:
    budgets = tenant_budgets({"*": {"max_cost_usd": 100}, "acme": {"max_total_tokens": 10}})
    assert budget_for(budgets, "acme") == SharedBudget(max_total_tokens=10)
    assert budget_for(budgets, "globex") == SharedBudget(max_cost_usd=100)
    assert budget_for(tenant_budgets({"acme": {"max_cost_usd": 1}}), "globex") is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"acme": {"max_cost": 1}}, "AGENTQ_TENANT_BUDGETS['acme'].max_cost: Extra inputs"),
        ({"*": {"max_cost_usd": 0}}, "AGENTQ_TENANT_BUDGETS['*'].max_cost_usd: Input should be"),
    ],
)
def test_a_bad_entry_is_one_line_naming_it(
    raw: dict[str, dict[str, float | str]], message: str
) -> None:
    with pytest.raises(SpecError) as refused:
        tenant_budgets(raw)
    assert refused.value.message.startswith(message)


NOV_26 = 1795726800.0  # 2026-11-26 21:00 UTC


@pytest.mark.parametrize(
    ("period", "expected"),
    [("day", "2026-11-26"), ("month", "2026-11"), ("total", None), (None, None)],
)
def test_a_period_counts_in_its_utc_window(period: str | None, expected: str | None) -> None:
    assert window(period, NOV_26) == expected  # type: ignore[arg-type]


def test_a_tenants_steps_count_in_its_budgets_window_only_when_it_has_a_period() -> None:
    raw = {"acme": {"max_cost_usd": 5, "period": "month"}, "globex": {"max_cost_usd": 5}}
    settings = Settings.model_validate({"tenant_budgets": raw})
    ledger = BudgetLedger(None, settings, clock=lambda: NOV_26)  # type: ignore[arg-type]
    assert ledger.windows("acme") == (["2026-11"], 32 * 86400)
    assert ledger.windows("globex") == ([], 0)
    assert ledger.windows("nobody") == ([], 0)
    assert [s.id for s in ledger.scopes("acme", "b1")] == ["batch:acme:b1", "tenant:acme"]
    assert ledger.scopes("nobody", None) == []  # nothing to read before its steps
