"""Batch-priced usage: which steps went through a provider batch API, and what it saved.

`commit_step` counts a step answered through a provider batch apart in the run's
meta hash (steps, input and output tokens). `batch_priced_usage(redis, run_ids,
settings)` sums that over runs (what `agentq batch status` reports), with an
estimated saving when the deployment configured direct prices
(`AGENTQ_PROVIDER_BATCH_PRICES`, USD per million tokens, and
`AGENTQ_PROVIDER_BATCH_DISCOUNT`, 0.5 by default).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, TypeVar, cast

from pydantic import BaseModel
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.settings import Settings
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


def price_of(
    prices: Mapping[str, tuple[float, float]], provider: str, model: str
) -> tuple[float, float] | None:
    return prices.get(f"{provider}:{model}") or prices.get(f"{provider}:*")


def run_usage(
    meta: Mapping[str, str], prices: Mapping[str, tuple[float, float]], discount: float
) -> BatchPricedUsage:
    """One run's batch-priced usage from its meta fields (pure)."""
    steps = int(meta.get(MetaField.BATCH_STEPS) or 0)
    tokens_in = int(meta.get(MetaField.BATCH_INPUT) or 0)
    tokens_out = int(meta.get(MetaField.BATCH_OUTPUT) or 0)
    saving: float | None = 0.0
    if steps:
        model: dict[str, Any] = json.loads(meta.get(MetaField.SPEC) or "{}").get("model") or {}
        price = price_of(prices, str(model.get("provider")), str(model.get("name")))
        saving = (
            None
            if price is None
            else (tokens_in * price[0] + tokens_out * price[1]) / 1e6 * discount
        )
    return BatchPricedUsage(
        steps=steps,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        estimated_saving_usd=saving if prices else None,
    )


async def batch_priced_usage(
    redis: Redis, run_ids: Iterable[str], settings: Settings | None = None
) -> BatchPricedUsage:
    """The batch-priced usage of these runs, summed (runs whose keys expired count 0)."""
    settings = settings or Settings()
    total = BatchPricedUsage(estimated_saving_usd=0.0 if settings.provider_batch_prices else None)
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
        total += run_usage(meta, settings.provider_batch_prices, settings.provider_batch_discount)
    return total
