"""A shared budget and its judgement, pure: a limit in USD and tokens on a scope (a batch,
a tenant), what the scope has spent, and whether another step may start."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ScopeKind = Literal["batch", "tenant"]
# A tenant's budget is on its spend in a window of time (UTC): a day, a month, or all of it.
Period = Literal["day", "month", "total"]
LimitName = Literal["max_cost_usd", "max_total_tokens"]
LIMITS: tuple[LimitName, ...] = ("max_cost_usd", "max_total_tokens")


class SharedBudget(BaseModel):
    """What a scope may spend (None: no limit of that kind)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_cost_usd: float | None = Field(default=None, gt=0)
    max_total_tokens: int | None = Field(default=None, ge=1)
    # A tenant's (None: its total spend); a batch's budget is on all its spend.
    period: Period | None = None

    @property
    def empty(self) -> bool:
        return self.max_cost_usd is None and self.max_total_tokens is None

    def raised(self, to: SharedBudget) -> SharedBudget:
        """This budget with `to`'s limits where `to` sets one."""
        return self.model_copy(update=to.model_dump(exclude_none=True))


@dataclass(frozen=True)
class Scope:
    """Whose budget: a batch of a tenant's, or a tenant's."""

    kind: ScopeKind
    tenant: str
    batch: str | None = None
    # A tenant's budget with a period: the window its spend is counted in now.
    window: str | None = None

    @property
    def id(self) -> str:
        if self.kind == "batch":
            return f"batch:{self.tenant}:{self.batch}"
        return f"tenant:{self.tenant}"

    @property
    def name(self) -> str:
        if self.kind == "batch":
            return f"batch {self.batch!r}"
        return f"tenant {self.tenant!r}" + (f" ({self.window})" if self.window else "")

    @property
    def raise_with(self) -> str:
        if self.kind == "batch":
            return f"agentq batch budget {self.batch}"
        return f"agentq budget tenant {self.tenant}"


@dataclass(frozen=True)
class Spend:
    """What a scope's steps have used: USD at the deployment's prices (steps without a
    price count their tokens only) and tokens."""

    cost_usd: float = 0.0
    total_tokens: int = 0

    def of(self, name: LimitName) -> float:
        return self.cost_usd if name == "max_cost_usd" else self.total_tokens


@dataclass(frozen=True)
class Reached:
    """A shared budget reached: whose, which limit, its value and what was spent."""

    scope: Scope
    limit: LimitName
    value: float
    spent: float

    def message(self) -> str:
        return (
            f"budget reached: {self.scope.name} {self.limit} {self.value:g}, "
            f"{self.spent:g} spent (raise it: {self.scope.raise_with} --{self.flag} N)"
        )

    @property
    def flag(self) -> str:
        return self.limit.replace("_", "-")


def window(period: Period | None, now_s: float) -> str | None:
    """The window a periodic budget counts spend in at `now_s` (UTC): `2026-11-26`,
    `2026-11`; None for a budget on the total."""
    if period is None or period == "total":
        return None
    at = datetime.fromtimestamp(now_s, UTC)
    return at.strftime("%Y-%m-%d" if period == "day" else "%Y-%m")


# How long a window's totals are kept: past its end, for a late reader of its last spend.
WINDOW_TTL_S: dict[Period, int] = {"day": 2 * 86400, "month": 32 * 86400, "total": 0}


def judge(scope: Scope, budget: SharedBudget, spend: Spend) -> Reached | None:
    """The limit that lets no new step start: one spent to its value or past it."""
    for name in LIMITS:
        value = getattr(budget, name)
        if value is not None and spend.of(name) >= value:
            return Reached(scope, name, value, spend.of(name))
    return None
