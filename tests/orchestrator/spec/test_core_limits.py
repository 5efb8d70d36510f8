"""A spec's run-tree limits under the deployment's ceilings (pure): above a ceiling is
refused naming both, the lower of the two holds, and a child cannot raise its parent's."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.spec.limits import (
    Limit,
    RunLimits,
    check_limits,
    inherited,
    limit_in_force,
)
from agentq.orchestrator.spec.run import RunSpec
from tests.support.specs import scripted

pytestmark = pytest.mark.unit

CEILINGS = Settings(max_tree_runs=100, max_tree_steps=1000)


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        (
            {"max_tree_runs": 101},
            "limits.max_tree_runs: 101 is above this deployment's "
            "ceiling of 100 (AGENTQ_MAX_TREE_RUNS)",
        ),
        (
            {"max_tree_steps": 5000},
            "limits.max_tree_steps: 5000 is above this deployment's "
            "ceiling of 1000 (AGENTQ_MAX_TREE_STEPS)",
        ),
        ({"max_tree_runs": 100, "max_tree_steps": 1}, None),
        ({}, None),
    ],
)
def test_a_limit_above_its_ceiling_is_refused(limits: dict[str, int], error: str | None) -> None:
    spec = RunSpec.model_validate(scripted({"text": "hi"}, limits=limits))
    if error is None:
        check_limits(spec.limits, CEILINGS)
    else:
        with pytest.raises(SpecError) as raised:
            check_limits(spec.limits, CEILINGS)
        assert raised.value.message == error


def test_limits_are_whole_numbers_above_zero_and_named() -> None:
    for bad in ({"max_tree_runs": 0}, {"max_tree_steps": "many"}, {"max_runs": 3}):
        with pytest.raises(ValidationError):
            RunLimits.model_validate(bad)


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (RunLimits(), Limit(1000, by_spec=False, name="max_tree_steps")),
        (RunLimits(max_tree_steps=1000), Limit(1000, by_spec=False, name="max_tree_steps")),
        (RunLimits(max_tree_steps=20), Limit(20, by_spec=True, name="max_tree_steps")),
    ],
)
def test_the_lower_of_spec_and_ceiling_holds(limits: RunLimits, expected: Limit) -> None:
    assert limit_in_force(limits, CEILINGS, "max_tree_steps") == expected


def test_the_limit_in_force_says_who_set_it() -> None:
    assert Limit(20, True, "max_tree_steps").allows() == (
        "its run tree's spec allows 20 (limits.max_tree_steps)"
    )
    assert Limit(6, False, "max_tree_runs").allows() == (
        "this deployment allows 6 (AGENTQ_MAX_TREE_RUNS)"
    )


@pytest.mark.parametrize(
    ("parent", "child", "expected"),
    [
        (RunLimits(), RunLimits(), RunLimits()),
        (RunLimits(max_tree_runs=5), RunLimits(max_tree_runs=50), RunLimits(max_tree_runs=5)),
        (RunLimits(max_tree_runs=50), RunLimits(max_tree_runs=5), RunLimits(max_tree_runs=5)),
        (RunLimits(), RunLimits(max_tree_steps=7), RunLimits(max_tree_steps=7)),
        (RunLimits(max_tree_steps=7), RunLimits(), RunLimits(max_tree_steps=7)),
    ],
)
def test_a_child_cannot_raise_its_parents_limits(
    parent: RunLimits, child: RunLimits, expected: RunLimits
) -> None:
    assert inherited(parent, child) == expected
