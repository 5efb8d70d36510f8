"""Batch-priced usage: which steps went through a provider batch API, and what it saved.

`commit_step` counts a step answered through a provider batch apart in the run's
meta hash (steps, input and output tokens). `batch_priced_usage(redis, run_ids,
settings)` sums that over runs, with an estimated saving: those tokens at the price
table's direct prices (`AGENTQ_PRICES`, orchestrator/cost/) times the model's
`batch_discount`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, TypeVar, cast

from pydantic import BaseModel
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.cost.compute import PER_TOKENS
from agentq.orchestrator.cost.prices import Prices, load_prices
from agentq.orchestrator.runs.state import MetaField

T = TypeVar("T")

_FIELDS = (MetaField.SPEC, MetaField.BATCH_STEPS, MetaField.BATCH_INPUT, MetaField.BATCH_OUTPUT)


class BatchPricedUsage(BaseModel):
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # USD, at the configured direct prices times the discount; None: no price for a model.
    estimated_saving_usd: float | None = None

    def __add__(self, other: BatchPricedUsage) -> BatchPricedUsage:
        saving = (
            None
            if self.estimated_saving_usd is None or other.estimated_saving_usd is None
            else self.estimated_saving_usd + other.estimated_saving_usd
        )
        return BatchPricedUsage(
            steps=self.steps + other.steps,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            estimated_saving_usd=saving,
        )


def run_usage(meta: Mapping[str, str], prices: Prices) -> BatchPricedUsage:
    """One run's batch-priced usage from its meta fields (pure)."""
    steps = int(meta.get(MetaField.BATCH_STEPS) or 0)
    tokens_in = int(meta.get(MetaField.BATCH_INPUT) or 0)
    tokens_out = int(meta.get(MetaField.BATCH_OUTPUT) or 0)
    saving: float | None = 0.0
    if steps:
        model: dict[str, Any] = json.loads(meta.get(MetaField.SPEC) or "{}").get("model") or {}
        price = prices.lookup([str(model.get("provider"))], str(model.get("name")))
        saving = (
            None
            if price is None
            else (tokens_in * price.input + tokens_out * price.output)
            / PER_TOKENS
            * price.batch_discount
        )
    return BatchPricedUsage(
        steps=steps, input_tokens=tokens_in, output_tokens=tokens_out, estimated_saving_usd=saving
    )


async def batch_priced_usage(
    redis: Redis, run_ids: Iterable[str], settings: Settings | None = None
) -> BatchPricedUsage:
    """The batch-priced usage of these runs, summed (runs whose keys expired count 0)."""
    prices = load_prices((settings or Settings()).prices)
    total = BatchPricedUsage(estimated_saving_usd=0.0)
    ids = list(run_ids)
    async with redis.pipeline(transaction=False) as pipe:
        for run_id in ids:
            pipe.hmget(keys.meta(run_id), list(_FIELDS))
        rows = cast(list[list[Any]], await cast(Awaitable[Any], pipe.execute()))
    for row in rows:
        meta = {
            str(f): (v.decode() if isinstance(v, bytes) else v)
            for f, v in zip(_FIELDS, row, strict=True)
            if v is not None
        }
        total += run_usage(meta, prices)
    return total
