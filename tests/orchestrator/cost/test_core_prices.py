"""The price table and what tokens cost at it (orchestrator/cost/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentq.orchestrator.core.messages import CostBreakdown, Usage
from agentq.orchestrator.cost.compute import Tokens, cost_of, priced
from agentq.orchestrator.cost.prices import (
    LOOKUPS_KEPT,
    Price,
    Prices,
    PricesFileError,
    PriceTable,
    load_prices,
    parse_table,
)

pytestmark = pytest.mark.unit

GPT = Price(input=2.5, cached_input=1.25, cache_write=0, output=10.0, reasoning=12.0)


@pytest.mark.parametrize(
    ("names", "model", "found"),
    [
        (["openai"], "gpt-4o", "exact"),
        (["openai"], "gpt-4o-2024-08-06", "gpt-4o-*"),
        (["openai"], "gpt-4o-mini-2024", "gpt-4o-mini*"),  # the longer pattern wins
        (["openai"], "o1", "any"),
        (["local", "openai"], "gpt-4o", "local"),  # the endpoint before its provider
        (["other", "openai"], "gpt-4o", "exact"),
        (["anthropic"], "claude", None),
    ],
)
def test_lookup_prefers_exact_then_longest_pattern_then_provider(
    names: list[str], model: str, found: str | None
) -> None:
    table = parse_table(
        {
            "openai:gpt-4o": {"input": 1, "output": 0},
            "openai:gpt-4o-*": {"input": 2, "output": 0},
            "openai:gpt-4o-mini*": {"input": 3, "output": 0},
            "openai:*": {"input": 4, "output": 0},
            "local:*": {"input": 5, "output": 0},
        },
        "test",
    )
    inputs = {"exact": 1, "gpt-4o-*": 2, "gpt-4o-mini*": 3, "any": 4, "local": 5}
    price = table.lookup(names, model)
    assert (price.input if price else None) == (inputs[found] if found else None)


def test_the_deployments_file_comes_before_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"openai:*": {"input": 9, "output": 9}}))
    assert load_prices(path).lookup(["openai"], "gpt-4o") == Price(input=9, output=9)
    defaults = load_prices(None)
    assert defaults.lookup(["openai"], "gpt-4o") == Price(input=2.5, cached_input=1.25, output=10.0)
    assert defaults.lookup(["anthropic"], "claude-sonnet-4-5").cache_write == 3.75  # type: ignore[union-attr]
    assert defaults.lookup(["scripted"], "scripted") == Price(input=0, output=0)
    assert defaults.lookup(["openai"], "no-such-model") is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", 'must be an object of "provider:model" keys'),
        ('{"gpt-4o": {"input": 1, "output": 1}}', "'gpt-4o' is not of the form"),
        ('{"openai:x": {"input": -1, "output": 1}}', "openai:x.input: Input should be greater"),
        ('{"openai:x": {"input": 1}}', "openai:x.output: Field required"),
        ('{"openai:x": {"input": 1, "output": 1, "cache": 2}}', "openai:x.cache: Extra inputs"),
        ("{", "not valid JSON"),
    ],
)
def test_a_bad_prices_file_is_one_clear_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(PricesFileError, match=message.replace("(", r"\(")) as raised:
        load_prices(path)
    assert "\n" not in str(raised.value)


def test_each_kind_of_token_is_billed_once_at_its_own_price() -> None:
    usage = Usage(
        input_tokens=1_000_000, cached_input_tokens=400_000, cache_write_tokens=100_000,
        output_tokens=300_000, reasoning_tokens=100_000,
    )  # fmt: skip
    assert Tokens.of(usage) == Tokens(
        input=500_000, cached_input=400_000, cache_write=100_000, output=200_000,
        reasoning=100_000,
    )  # fmt: skip
    cost = priced(usage, GPT.model_copy(update={"cache_write": 3.0}))
    assert cost.cost_breakdown == CostBreakdown(
        input_usd=1.25, cached_input_usd=0.5, cache_write_usd=0.3, output_usd=2.0,
        reasoning_usd=1.2,
    )  # fmt: skip
    assert cost.cost_usd == 5.25
    assert cost.input_tokens == usage.input_tokens  # the counts are untouched


def test_unset_prices_fall_back_and_batch_steps_get_the_discount() -> None:
    price = Price(input=4.0, output=8.0, batch_discount=0.5)
    full = cost_of(price, Tokens(*[1_000_000] * len(Tokens._fields)))
    assert full == CostBreakdown(
        input_usd=4.0, cached_input_usd=4.0, cache_write_usd=4.0, output_usd=8.0,
        reasoning_usd=8.0,
    )  # fmt: skip
    assert cost_of(price, Tokens(output=1_000_000), batch=True).total_usd == 4.0


def test_an_unknown_model_counts_tokens_and_its_cost_is_unknown_not_zero() -> None:
    usage = priced(Usage(input_tokens=10, output_tokens=5, total_tokens=15), None)
    assert (usage.cost_usd, usage.cost_breakdown, usage.total_tokens) == (None, None, 15)
    known = priced(Usage(input_tokens=1_000_000), Price(input=1, output=1))
    assert (known + usage).cost_usd is None  # a sum with an unknown part is unknown
    assert (known + known).cost_usd == 2.0
    assert (Usage() + known).cost_usd == 1.0  # nothing used costs nothing


def test_sums_stay_free_of_float_noise() -> None:
    cents = priced(Usage(input_tokens=1), Price(input=100_000, output=0))  # $0.1
    total = Usage()
    for _ in range(3):
        total += cents
    assert total.cost_usd == 0.3


def test_an_empty_table_finds_nothing() -> None:
    assert PriceTable({}).lookup(["openai"], "gpt-4o") is None


def test_a_lookup_is_remembered_and_stays_right() -> None:
    prices = Prices(
        PriceTable({"local:exact": Price(input=1, output=2)}),
        PriceTable({"local:*": Price(input=3, output=4), "other:m": Price(input=5, output=6)}),
    )
    for _ in range(2):  # the second round is answered from the memo
        assert prices.lookup(["local"], "exact") == Price(input=1, output=2)
        assert prices.lookup(["local"], "any") == Price(input=3, output=4)
        assert prices.lookup(["nowhere", "other"], "m") == Price(input=5, output=6)
        assert prices.lookup(["nowhere"], "m") is None
    for i in range(LOOKUPS_KEPT + 5):  # names a spec chose freely: the memo stays bounded
        assert prices.lookup(["nowhere"], f"m{i}") is None
    assert len(prices._found) <= LOOKUPS_KEPT
    assert prices.lookup(["local"], "exact") == Price(input=1, output=2)
