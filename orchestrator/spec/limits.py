"""A run spec's limits on its run tree and its budgets, under the deployment's ceilings.

A spec may lower a ceiling (`limits: {"max_tree_runs": 20}`), never raise it: a value
above is refused at submit. What holds is the lower of the two, and a child run's
limits are at most its parent's, so a tree keeps the limits its top run was given
whatever its children's specs say. Pure: the workers that start children and take steps
apply what these functions decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.spec_model import SpecModel
from agentq.orchestrator.policy.budgets import BUDGETS, Budget, BudgetName

TreeLimitName = Literal["max_tree_runs", "max_tree_steps"]

# Each limit's deployment ceiling: the setting (AGENTQ_<NAME>) of the same name.
TREE_LIMITS: tuple[TreeLimitName, ...] = ("max_tree_runs", "max_tree_steps")


class RunLimits(SpecModel):
    """What a spec allows its run tree: its runs, its top run included, and their model
    steps in all (unset: the deployment's ceiling); and the run's budgets (its own steps
    and its sub-agents', unset: the deployment's ceiling, if any), judged by
    orchestrator/policy/budgets.py, and what reaching one does."""

    max_tree_runs: int | None = Field(default=None, ge=1)
    max_tree_steps: int | None = Field(default=None, ge=1)
    max_input_tokens: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    # "fail": the run fails `budget-exceeded`; "finish": one last step, tools disabled.
    on_limit: Literal["fail", "finish"] = "fail"


@dataclass(frozen=True)
class Limit:
    """A limit in force and who set it, for the error that names it."""

    value: int
    by_spec: bool
    name: TreeLimitName

    def allows(self) -> str:
        if self.by_spec:
            return f"its run tree's spec allows {self.value} (limits.{self.name})"
        return f"this deployment allows {self.value} (AGENTQ_{self.name.upper()})"


def check_limits(limits: RunLimits, settings: Settings) -> None:
    """Refuse a spec limit above the deployment's ceiling (SpecError naming both)."""
    for name in (*TREE_LIMITS, *BUDGETS):
        value, ceiling = getattr(limits, name), getattr(settings, name)
        if value is not None and ceiling is not None and value > ceiling:
            raise SpecError(
                f"limits.{name}: {value} is above this deployment's ceiling of {ceiling} "
                f"(AGENTQ_{name.upper()})"
            )


def limit_in_force(limits: RunLimits, settings: Settings, name: TreeLimitName) -> Limit:
    """The lower of the spec's limit and the deployment's ceiling."""
    value, ceiling = getattr(limits, name), getattr(settings, name)
    if value is not None and value < ceiling:
        return Limit(value, by_spec=True, name=name)
    return Limit(ceiling, by_spec=False, name=name)


def budget_in_force(limits: RunLimits, settings: Settings) -> Budget:
    """Each budget: the spec's (at most the ceiling, checked at submit), else the
    deployment's ceiling (AGENTQ_MAX_COST_USD, …), else none."""
    values: dict[BudgetName, float | None] = {}
    by_spec: set[BudgetName] = set()
    for name in BUDGETS:
        value = getattr(limits, name)
        if value is not None:
            by_spec.add(name)
        values[name] = value if value is not None else getattr(settings, name)
    return Budget(values, frozenset(by_spec))


def inherited(parent: RunLimits, child: RunLimits) -> RunLimits:
    """A child's limits: its spec's, the tree's lowered to its parent's (a child cannot
    raise them); its budgets are its own run's."""
    lowest: dict[str, int | None] = {}
    for name in TREE_LIMITS:
        given = [v for v in (getattr(parent, name), getattr(child, name)) if v is not None]
        lowest[name] = min(given) if given else None
    return child.model_copy(update=lowest)
