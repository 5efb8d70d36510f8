"""What a step's tokens cost at a price, pure.

A `Usage` counts the whole prompt in `input_tokens` (cache reads and writes included,
as every wire format maps it) and the whole answer in `output_tokens` (reasoning
included): each kind is billed once, at its own price.
"""

from __future__ import annotations

from typing import NamedTuple

from agentq.orchestrator.core.messages import CostBreakdown, Usage, round_usd
from agentq.orchestrator.cost.prices import Price

PER_TOKENS = 1_000_000  # prices are per million tokens


class Tokens(NamedTuple):
    """A step's tokens split into the kinds a provider bills apart. (A tuple: every step
    prices its answer, and a frozen dataclass costs several times as much to build.)"""

    input: int = 0  # neither read from nor written to a cache
    cached_input: int = 0
    cache_write: int = 0
    output: int = 0  # other than reasoning
    reasoning: int = 0

    @classmethod
    def of(cls, usage: Usage) -> Tokens:
        written = usage.cache_write_tokens
        return cls(
            input=max(usage.input_tokens - usage.cached_input_tokens - written, 0),
            cached_input=usage.cached_input_tokens,
            cache_write=written,
            output=max(usage.output_tokens - usage.reasoning_tokens, 0),
            reasoning=usage.reasoning_tokens,
        )


def cost_of(price: Price, tokens: Tokens, *, batch: bool = False) -> CostBreakdown:
    """The tokens at `price`; `batch`: answered through the provider's batch API."""
    factor = (1 - price.batch_discount if batch else 1.0) / PER_TOKENS

    def usd(count: int, per_million: float | None, fallback: float) -> float:
        return round_usd(count * (fallback if per_million is None else per_million) * factor)

    return CostBreakdown(
        input_usd=usd(tokens.input, price.input, price.input),
        cached_input_usd=usd(tokens.cached_input, price.cached_input, price.input),
        cache_write_usd=usd(tokens.cache_write, price.cache_write, price.input),
        output_usd=usd(tokens.output, price.output, price.output),
        reasoning_usd=usd(tokens.reasoning, price.reasoning, price.output),
    )


def priced(usage: Usage, price: Price | None, *, batch: bool = False) -> Usage:
    """`usage` with its cost; unknown (None) without a price."""
    if price is None:
        return usage.model_copy(update={"cost_usd": None, "cost_breakdown": None})
    breakdown = cost_of(price, Tokens.of(usage), batch=batch)
    return usage.model_copy(update={"cost_usd": breakdown.total_usd, "cost_breakdown": breakdown})
