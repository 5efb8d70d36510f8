"""Per-run budgets, judged purely: what a run has spent against the limits in force.

A limit is reached when the next model step would go over it: before a step, when the
run's tokens or cost are already at or over a limit (any step uses more), or its tool
calls over theirs; after a step, when the step took the tokens or cost over a limit or
asked for more tool calls than are left. What happens then is the spec's
`limits.on_limit` (orchestrator/spec/limits.py): the run fails `budget-exceeded`, or
gets one last step with tools disabled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

BudgetName = Literal[
    "max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost_usd", "max_tool_calls"
]
BUDGETS: tuple[BudgetName, ...] = (
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "max_cost_usd",
    "max_tool_calls",
)


@dataclass(frozen=True)
class Spent:
    """What a run has used so far (its sub-agents' included). `cost_usd` None: unknown
    (a model without a price), which no cost limit can judge."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = 0.0
    tool_calls: int = 0

    def plus(self, step: Spent) -> Spent:
        cost = (
            None
            if self.cost_usd is None or step.cost_usd is None
            else self.cost_usd + step.cost_usd
        )
        return Spent(
            self.input_tokens + step.input_tokens,
            self.output_tokens + step.output_tokens,
            self.total_tokens + step.total_tokens,
            cost,
            self.tool_calls + step.tool_calls,
        )

    def of(self, name: BudgetName) -> float | None:
        return {
            "max_input_tokens": self.input_tokens,
            "max_output_tokens": self.output_tokens,
            "max_total_tokens": self.total_tokens,
            "max_cost_usd": self.cost_usd,
            "max_tool_calls": self.tool_calls,
        }[name]


@dataclass(frozen=True)
class Reached:
    """A limit reached: which, its value, what was spent, and who set it."""

    name: BudgetName
    limit: float
    spent: float
    by_spec: bool

    def message(self) -> str:
        who = f"limits.{self.name}" if self.by_spec else f"AGENTQ_{self.name.upper()}"
        spent, limit = _figure(self.spent), _figure(self.limit)
        return f"budget exceeded: {self.name} {limit} ({who}) reached, {spent} spent"


def _figure(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Budget:
    """The limits in force (None: none), and which of them the spec set."""

    limits: dict[BudgetName, float | None]
    by_spec: frozenset[BudgetName] = frozenset()

    @property
    def empty(self) -> bool:
        return all(v is None for v in self.limits.values())

    def before_step(self, spent: Spent) -> Reached | None:
        """A limit the run cannot take another step under."""
        for name in BUDGETS:
            limit, used = self.limits.get(name), spent.of(name)
            if limit is None or used is None:
                continue
            over = used > limit if name == "max_tool_calls" else used >= limit
            if over:
                return Reached(name, limit, used, name in self.by_spec)
        return None

    def after_step(self, before: Spent, step: Spent) -> Reached | None:
        """A limit the step took the run over (its calls are then not run)."""
        after = before.plus(step)
        for name in BUDGETS:
            limit, used = self.limits.get(name), after.of(name)
            if limit is not None and used is not None and used > limit:
                return Reached(name, limit, used, name in self.by_spec)
        return None
