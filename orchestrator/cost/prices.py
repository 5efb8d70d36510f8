"""The price table: USD per million tokens, by "PROVIDER:MODEL" or "ENDPOINT:MODEL".

The deployment provides it as a JSON file (`AGENTQ_PRICES`):

    {"openai:gpt-4o": {"input": 2.5, "cached_input": 1.25, "cache_write": 0,
                       "output": 10.0, "reasoning": 10.0, "batch_discount": 0.5},
     "local:*": {"input": 0, "output": 0}}

A model may hold `*` (any run of characters). Its entries come before the built-in
defaults (`defaults.py`, list prices that may be stale); within one table an exact key
beats a pattern and a longer pattern a shorter one, and an endpoint's name (the models
file's) beats its provider's. A model found in neither has no price: its steps count
tokens only and their cost is unknown (None), never 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.cost.defaults import DEFAULT_PRICES


class PricesFileError(SpecError):
    """The prices file is unusable (exit 2, like a bad flag)."""


class Price(BaseModel):
    """One model's prices, USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    # Unset: billed as plain input (cache reads and writes) or output (reasoning).
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    reasoning: float | None = Field(default=None, ge=0)
    # The fraction taken off a step answered through the provider's batch API.
    batch_discount: float = Field(default=0.5, ge=0, le=1)


@dataclass(frozen=True)
class PriceTable:
    """Prices by key; `lookup` finds a step's."""

    entries: Mapping[str, Price]

    @cached_property
    def _patterns(self) -> list[tuple[str, re.Pattern[str], Price]]:
        # Longest first: `openai:gpt-4o-mini*` before `openai:gpt-4o*`.
        wild = sorted((k for k in self.entries if "*" in k), key=len, reverse=True)
        return [(k, _compile(k), self.entries[k]) for k in wild]

    def lookup(self, names: Sequence[str], model: str) -> Price | None:
        """The price of `model` under the first of `names` (endpoint, then provider)
        that has one: an exact key, else the longest matching pattern."""
        for name in names:
            key = f"{name}:{model}"
            if (price := self.entries.get(key)) is not None:
                return price
            for _, pattern, price in self._patterns:
                if pattern.fullmatch(key):
                    return price
        return None


# How many (names, model) answers a Prices keeps: a worker serves a few models, but a
# spec names its model freely, so the memo is bounded (emptied when full).
LOOKUPS_KEPT = 1024


@dataclass(frozen=True)
class Prices:
    """The deployment's table over the built-in defaults."""

    deployment: PriceTable
    defaults: PriceTable

    @cached_property
    def _found(self) -> dict[tuple[tuple[str, ...], str], Price | None]:
        return {}

    def lookup(self, names: Sequence[str], model: str) -> Price | None:
        """As `PriceTable.lookup`, the deployment's first. Remembered: every model step
        prices its answer, and the patterns are tried in turn (tens of regexes); both
        tables are fixed once loaded, so an answer never goes stale."""
        key = (tuple(names), model)
        found = self._found
        if key in found:
            return found[key]
        price = self.deployment.lookup(names, model) or self.defaults.lookup(names, model)
        if len(found) >= LOOKUPS_KEPT:
            found.clear()
        found[key] = price
        return price


def _compile(key: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in key.split("*")))


_KEY = re.compile(r"^[A-Za-z0-9_.-]+:[^\s]+$")


def parse_table(data: object, where: str) -> PriceTable:
    """A price table from decoded JSON; a PricesFileError naming the bad entry."""
    if not isinstance(data, dict):
        raise PricesFileError(f'{where}: must be an object of "provider:model" keys')
    entries: dict[str, Price] = {}
    for key, value in data.items():
        if not _KEY.match(key):
            raise PricesFileError(f'{where}: {key!r} is not of the form "provider:model"')
        try:
            entries[key] = Price.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            at = f"{key}.{field}" if field else key
            raise PricesFileError(f"{where}: {at}: {first['msg']}") from None
    return PriceTable(entries)


def load_prices(path: str | Path | None) -> Prices:
    """The prices in force: the file at `path` (`AGENTQ_PRICES`; None: none) over the
    built-in defaults."""
    defaults = parse_table(DEFAULT_PRICES, "built-in prices")
    if path is None:
        return Prices(PriceTable({}), defaults)
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PricesFileError(f"prices file {file}: cannot read it ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise PricesFileError(f"prices file {file}: not valid JSON ({exc})") from None
    return Prices(parse_table(data, f"prices file {file}"), defaults)
