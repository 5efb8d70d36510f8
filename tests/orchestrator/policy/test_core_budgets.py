"""Per-run budgets, judged purely (orchestrator/policy/budgets.py), under the
deployment's ceilings (orchestrator/spec/limits.py), and what a reached one does to a
step's plan (orchestrator/loop/budget.py)."""

from __future__ import annotations

import pytest

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.loop.budget import over_budget
from agentq.orchestrator.loop.plan import CallPlan, StepPlan
from agentq.orchestrator.policy.budgets import Budget, Reached, Spent
from agentq.orchestrator.runs.state import CallStatus, FailureKind, StepAfter
from agentq.orchestrator.spec.limits import RunLimits, budget_in_force, check_limits

pytestmark = pytest.mark.unit


def budget(**limits: float) -> Budget:
    return Budget(limits, frozenset(limits))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("limits", "spent", "reached"),
    [
        ({"max_total_tokens": 100}, Spent(total_tokens=99), None),
        ({"max_total_tokens": 100}, Spent(total_tokens=100), "max_total_tokens"),
        ({"max_input_tokens": 10}, Spent(input_tokens=10), "max_input_tokens"),
        ({"max_output_tokens": 10}, Spent(output_tokens=9), None),
        ({"max_cost_usd": 0.5}, Spent(cost_usd=0.5), "max_cost_usd"),
        ({"max_cost_usd": 0.5}, Spent(cost_usd=None), None),  # unknown: not judged
        # Calls at the limit leave the model free to answer; only over it is reached.
        ({"max_tool_calls": 2}, Spent(tool_calls=2), None),
        ({"max_tool_calls": 2}, Spent(tool_calls=3), "max_tool_calls"),
    ],
)
def test_before_a_step_a_limit_is_reached_when_the_next_step_must_go_over_it(
    limits: dict[str, float], spent: Spent, reached: str | None
) -> None:
    found = budget(**limits).before_step(spent)
    assert (found.name if found else None) == reached


@pytest.mark.parametrize(
    ("step", "reached"),
    [
        (Spent(total_tokens=40, tool_calls=1), None),
        (Spent(total_tokens=41), "max_total_tokens"),
        (Spent(tool_calls=2), "max_tool_calls"),  # more calls than are left
        (Spent(cost_usd=0.02), "max_cost_usd"),
    ],
)
def test_after_a_step_a_limit_is_reached_when_the_step_went_over_it(
    step: Spent, reached: str | None
) -> None:
    limits = budget(max_total_tokens=100, max_tool_calls=2, max_cost_usd=0.1)
    found = limits.after_step(Spent(total_tokens=60, tool_calls=1, cost_usd=0.09), step)
    assert (found.name if found else None) == reached


def test_the_message_names_the_limit_and_who_set_it() -> None:
    assert Reached("max_cost_usd", 0.5, 0.52, by_spec=True).message() == (
        "budget exceeded: max_cost_usd 0.5 (limits.max_cost_usd) reached, 0.52 spent"
    )
    assert "(AGENTQ_MAX_TOOL_CALLS)" in Reached("max_tool_calls", 3, 4, by_spec=False).message()


def test_a_spec_may_lower_a_ceiling_never_raise_it_and_gets_it_when_silent() -> None:
    settings = Settings(max_cost_usd=1.0, max_tool_calls=10)
    with pytest.raises(SpecError, match=r"limits.max_cost_usd: 5.0 is above .* ceiling of 1.0"):
        check_limits(RunLimits(max_cost_usd=5.0), settings)
    check_limits(RunLimits(max_cost_usd=0.5, max_total_tokens=10**9), settings)
    force = budget_in_force(RunLimits(max_cost_usd=0.5), settings)
    assert force.limits["max_cost_usd"] == 0.5
    assert force.limits["max_tool_calls"] == 10  # the ceiling, set by the deployment
    assert force.limits["max_total_tokens"] is None
    assert force.by_spec == frozenset({"max_cost_usd"})
    assert budget_in_force(RunLimits(), Settings()).empty


def plan(*names: str) -> StepPlan:
    calls = [
        CallPlan(id=f"c{i}", name=n, input={}, status=CallStatus.QUEUED, queue="tools")
        for i, n in enumerate(names)
    ]
    return StepPlan(step=3, text="", finish_reason="tool-calls", calls=calls, after="continue")


def test_a_step_over_budget_runs_no_call_then_fails_or_goes_on_to_a_last_step() -> None:
    reached = Reached("max_tool_calls", 1, 2, by_spec=True)
    failing = plan("add", "add")
    failure = over_budget(failing, reached, "fail", last=False)
    assert failure is not None
    assert (failure.kind, failure.limit, failure.step) == (
        FailureKind.BUDGET_EXCEEDED, "max_tool_calls", 3,
    )  # fmt: skip
    for call in failing.calls:
        assert call.status == CallStatus.DONE
        assert call.queue is None
        assert call.result is not None
        assert call.result.error_kind == ToolErrorKind.CANCELLED
    finishing = plan("add")
    assert over_budget(finishing, reached, "finish", last=False) is None
    assert finishing.after == StepAfter.CONTINUE  # the next step is the last
    last = plan("add")
    assert over_budget(last, reached, "finish", last=True) is None
    assert last.after == StepAfter.FINISH
