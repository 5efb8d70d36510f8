"""Stop conditions, the pure part: parsing (a bad element refused with one error) and
which element of `stop_when` ends the run, by name."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from agentq.orchestrator.policy.stop_conditions import (
    StepFacts,
    StopCondition,
    hook_names,
    leaves,
    needs_usage,
    stop_reason,
)

pytestmark = pytest.mark.unit

CONDITIONS = TypeAdapter(list[StopCondition])


def parsed(raw: list[Any]) -> list[StopCondition]:
    return CONDITIONS.validate_python(raw)


FACTS = StepFacts(
    step=2,
    call_names=frozenset({"search"}),
    text="All DONE here",
    run_tokens=500,
    hooks={"yes": True, "no": False},
    output_valid=True,
)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ([], None),
        ([{"has_tool_call": "search"}], "stop_when: has_tool_call 'search'"),
        ([{"has_tool_call": "final"}], None),
        ([{"step_count_is": 3}], "stop_when: step_count_is 3"),
        ([{"step_count_is": 4}], None),
        ([{"has_text_matching": "DONE"}], "stop_when: has_text_matching 'DONE'"),
        ([{"has_text_matching": "^DONE"}], None),
        ([{"usage_exceeds": 499}], "stop_when: usage_exceeds 499"),
        ([{"usage_exceeds": 500}], None),  # exceeds: strictly above
        ([{"hook": "yes"}], "stop_when: hook 'yes'"),
        ([{"hook": "no"}], None),
        ([{"hook": "never-asked"}], None),
        ([{"output_valid": True}], "stop_when: output_valid"),
        (
            [{"all": [{"output_valid": True}, {"step_count_is": 3}]}],
            "stop_when: all [output_valid, step_count_is 3]",
        ),
        (
            [{"all": [{"has_tool_call": "search"}, {"has_text_matching": "DONE"}]}],
            "stop_when: all [has_tool_call 'search', has_text_matching 'DONE']",
        ),
        ([{"all": [{"has_tool_call": "search"}, {"hook": "no"}]}], None),
        (
            [{"any": [{"hook": "no"}, {"step_count_is": 1}]}],
            "stop_when: any [hook 'no', step_count_is 1]",
        ),
        ([{"any": [{"hook": "no"}, {"usage_exceeds": 1000}]}], None),
        (
            [{"all": [{"any": [{"hook": "no"}, {"hook": "yes"}]}, {"step_count_is": 2}]}],
            "stop_when: all [any [hook 'no', hook 'yes'], step_count_is 2]",
        ),
        # The list is any-of: the first element that holds names the reason.
        (
            [{"hook": "no"}, {"step_count_is": 2}, {"hook": "yes"}],
            "stop_when: step_count_is 2",
        ),
    ],
)
def test_stop_reason_names_the_first_element_that_holds(raw: list[Any], reason: str | None) -> None:
    assert stop_reason(parsed(raw), FACTS) == reason


@pytest.mark.parametrize(
    ("raw", "loc", "message"),
    [
        ([{"has_text_matching": "(unclosed"}], (0, "has_text_matching"), "not a valid regular"),
        ([{"nope": 1}], (0,), "a stop condition has one key"),
        ([{"step_count_is": 1, "hook": "x"}], (0,), "a stop condition has one key"),
        ([{"all": [{"has_text_matching": "["}]}], (0, "all", "all", 0), "not a valid regular"),
        ([{"all": []}], (0, "all", "all"), "at least 1 item"),
        ([{"hook": "no spaces"}], (0, "hook", "hook"), "should match pattern"),
        ([{"usage_exceeds": -1}], (0, "usage_exceeds"), "greater than or equal to 0"),
        ([{"output_valid": False}], (0, "output_valid"), "Input should be True"),
    ],
)
def test_a_bad_condition_is_one_error_where_it_is(
    raw: list[Any], loc: tuple[Any, ...], message: str
) -> None:
    with pytest.raises(ValidationError) as info:
        parsed(raw)
    assert info.value.error_count() == 1
    error = info.value.errors()[0]
    assert error["loc"][: len(loc)] == loc
    assert message in error["msg"]


def test_output_valid_holds_only_on_a_valid_output() -> None:
    invalid = StepFacts(step=2, text="All DONE here")
    conds = parsed([{"any": [{"output_valid": True}, {"hook": "no"}]}])
    assert stop_reason(conds, invalid) is None
    assert stop_reason(conds, FACTS) == "stop_when: any [output_valid, hook 'no']"


def test_walking_the_conditions() -> None:
    conds = parsed(
        [
            {"hook": "a"},
            {"all": [{"hook": "b"}, {"any": [{"hook": "a"}, {"usage_exceeds": 5}]}]},
        ]
    )
    assert hook_names(conds) == ["a", "b"]
    assert needs_usage(conds)
    assert not needs_usage(parsed([{"step_count_is": 2}]))
    assert [where for where, _ in leaves(conds)] == [
        "stop_when[0]",
        "stop_when[1].all[0]",
        "stop_when[1].all[1].any[0]",
        "stop_when[1].all[1].any[1]",
    ]
