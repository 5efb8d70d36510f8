"""A shared budget and its judgement, pure: a limit in USD and tokens on a scope (a batch,
a tenant), what the scope has spent, and whether another step may start."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ScopeKind = Literal["batch", "tenant"]
LimitName = Literal["max_cost_usd", "max_total_tokens"]
LIMITS: tuple[LimitName, ...] = ("max_cost_usd", "max_total_tokens")


class SharedBudget(BaseModel):
    """What a scope may spend (None: no limit of that kind)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_cost_usd: float | None = Field(default=None, gt=0)
    max_total_tokens: int | None = Field(default=None, ge=1)

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

    @property
    def id(self) -> str:
        if self.kind == "batch":
            return f"batch:{self.tenant}:{self.batch}"
        return f"tenant:{self.tenant}"

    @property
    def name(self) -> str:
        return f"batch {self.batch!r}" if self.kind == "batch" else f"tenant {self.tenant!r}"

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


def judge(scope: Scope, budget: SharedBudget, spend: Spend) -> Reached | None:
    """The limit that lets no new step start: one spent to its value or past it."""
    for name in LIMITS:
        value = getattr(budget, name)
        if value is not None and spend.of(name) >= value:
            return Reached(scope, name, value, spend.of(name))
    return None
