"""A run's usage as its meta hash keeps it: tokens (HINCRBY), cost by kind of token
(HINCRBYFLOAT) and how many steps had no price, its own and its children's apart."""

from __future__ import annotations

from collections.abc import Mapping

from agentq.orchestrator.core.messages import CostBreakdown, Usage, round_usd
from agentq.orchestrator.runs.state.status import (
    CHILD_COST_FIELDS,
    CHILD_USAGE_FIELDS,
    COST_FIELDS,
    USAGE_FIELDS,
    MetaField,
)


def stored_usage(
    meta: Mapping[str, str],
    *,
    children: bool = False,
    token_fields: Mapping[str, str] | None = None,
    cost_fields: Mapping[str, str] | None = None,
) -> Usage:
    """The run's own usage (or, `children`, what its sub-agents and workflows used); with
    `token_fields` and `cost_fields`, a hash that names its fields so (a tenant's)."""
    tokens: Mapping[str, str] = token_fields or (CHILD_USAGE_FIELDS if children else USAGE_FIELDS)
    costs: Mapping[str, str] = cost_fields or (CHILD_COST_FIELDS if children else COST_FIELDS)
    unpriced = MetaField.CHILD_UNPRICED if children else MetaField.UNPRICED
    usage = Usage(**{name: int(meta.get(field) or 0) for name, field in tokens.items()})
    if int(meta.get(unpriced) or 0):
        return usage.model_copy(update={"cost_usd": None, "cost_breakdown": None})
    breakdown = CostBreakdown(
        **{name: round_usd(float(meta.get(field) or 0)) for name, field in costs.items()}
    )
    return usage.model_copy(update={"cost_usd": breakdown.total_usd, "cost_breakdown": breakdown})


def rolled_up_usage(meta: Mapping[str, str]) -> Usage:
    """A run's usage and its children's, together (what its parent is charged)."""
    return stored_usage(meta) + stored_usage(meta, children=True)
