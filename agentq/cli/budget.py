"""`agentq budget tenant NAME`: a tenant's shared budget (orchestrator/budgets/) as the
operator sees it, and its raise over the deployment's AGENTQ_TENANT_BUDGETS entry.
A batch's budget is `agentq batch budget`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agentq.cli.connect import with_client
from agentq.cli.options import CONTEXT, JSON_OPTION, REDIS_OPTION

if TYPE_CHECKING:
    from agentq.orchestrator.client import Client
    from agentq.orchestrator.runs.shared_budgets import BudgetStatus


@click.group(context_settings=CONTEXT)
def budget() -> None:
    """Shared budgets: what a tenant's runs may spend across the fleet."""


def status_line(status: BudgetStatus) -> str:
    limits = status.budget
    usd = (
        "" if limits is None or limits.max_cost_usd is None else f" of ${limits.max_cost_usd:,.4f}"
    )
    tokens = (
        ""
        if limits is None or limits.max_total_tokens is None
        else f" of {limits.max_total_tokens}"
    )
    scope = status.scope + (f" ({status.window})" if status.window else "")
    line = f"{scope}: ${status.spent_usd:,.4f}{usd}, {status.spent_tokens} tokens{tokens}"
    if status.reached is not None:
        line += f"; {status.held_runs} runs held: {status.reached}"
    return line


@budget.command("tenant", context_settings=CONTEXT)
@click.argument("tenant")
@REDIS_OPTION
@click.option(
    "--max-cost-usd", type=click.FloatRange(min=0, min_open=True), default=None, help="USD."
)
@click.option("--max-total-tokens", type=click.IntRange(min=1), default=None, help="Tokens.")
@JSON_OPTION
def tenant(
    tenant: str,
    redis_url: str | None,
    max_cost_usd: float | None,
    max_total_tokens: int | None,
    as_json: bool,
) -> None:
    """Show TENANT's budget and spend; with a limit, raise it (its held steps go on)."""

    async def go(client: Client) -> None:
        if max_cost_usd is None and max_total_tokens is None:
            status = await client.budgets.tenant(tenant)
        else:
            status = await client.budgets.set_tenant(
                tenant, max_cost_usd=max_cost_usd, max_total_tokens=max_total_tokens
            )
        click.echo(status.model_dump_json(indent=2) if as_json else status_line(status))

    with_client(redis_url, "budget tenant", go)
