"""A spec's own expressions cannot pin a worker: each hostile form below, which Python's
`re` or jmespath would run for ever (or until memory ran out), ends in a typed outcome:
refused when the spec is read, or an ExpressionLimitError (a validation error for a JSON
Schema `pattern`) when it is evaluated."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from agentq.orchestrator.core.expression_limits import MAX_EXPRESSION_CHARS, ExpressionLimitError
from agentq.orchestrator.core.json_schema import validator_for
from agentq.orchestrator.policy.approval_rules import ApprovalWhen, asks
from agentq.orchestrator.policy.stop_conditions import StepFacts, StopCondition, stop_reason
from agentq.orchestrator.tools.workflow_graph import NodeOutcome, evaluate_condition

pytestmark = pytest.mark.unit

CONDITIONS = TypeAdapter(list[StopCondition])

# Backtracks exponentially on a run of a's that ends in something else.
EVIL_PATTERN = r"(a|aa)+$"
EVIL_TEXT = "a" * 64 + "b"
# Each `[@,@]` doubles the value: 2^80 references, which to_string (or ==) walks.
EVIL_JMESPATH = "[@,@]" + "|[@,@]" * 79 + "|to_string(@)"
# Each stage doubles a flat list (no sharing left to count).
EVIL_FLATTEN = "[@,@][]" + "|[@,@][]" * 60


def test_a_backtracking_stop_pattern_times_out_typed() -> None:
    (cond,) = CONDITIONS.validate_python([{"has_text_matching": EVIL_PATTERN}])
    with pytest.raises(ExpressionLimitError, match=r"did not finish matching within"):
        stop_reason([cond], StepFacts(step=0, text=EVIL_TEXT))


def test_a_sane_stop_pattern_still_matches() -> None:
    (cond,) = CONDITIONS.validate_python([{"has_text_matching": r"\bDONE\b"}])
    assert stop_reason([cond], StepFacts(step=0, text="all DONE")) == (
        r"stop_when: has_text_matching '\\bDONE\\b'"
    )


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("x" * (MAX_EXPRESSION_CHARS + 1), "a pattern is at most 500 characters"),
        # The regex compiler unrolls counts: this one would never finish compiling.
        ("((a{1000}){1000}){1000}", "counted repetitions ({m,n}) multiply to at most 10,000"),
        ("(DONE", "not a valid regular expression"),
    ],
)
def test_a_pattern_past_its_bounds_is_refused_when_read(pattern: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        CONDITIONS.validate_python([{"has_text_matching": pattern}])
    assert info.value.error_count() == 1
    shown = info.value.errors()[0]["msg"]
    assert message in shown
    assert "\n" not in shown


@pytest.mark.parametrize("expression", [EVIL_JMESPATH, EVIL_FLATTEN])
def test_a_copying_approval_rule_stops_typed(expression: str) -> None:
    assert len(expression) <= MAX_EXPRESSION_CHARS
    rule = ApprovalWhen(when=expression)
    with pytest.raises(ExpressionLimitError, match=r"the expression '\[@,@\]"):
        asks(rule, {"amount": 1})


def test_join_refuses_a_result_past_the_budget() -> None:
    # A long separator over a long list: one call, no copying.
    rule = ApprovalWhen(when="join(join(',', names), names)")
    with pytest.raises(ExpressionLimitError, match="join would build"):
        asks(rule, {"names": ["x" * 100] * 2000})


def test_an_over_long_approval_rule_is_refused_when_read() -> None:
    with pytest.raises(ValidationError, match="an expression is at most 500 characters"):
        ApprovalWhen(when="a || " * 101)


def test_a_copying_workflow_condition_stops_typed() -> None:
    outcomes = {"start": NodeOutcome(status="done", output=[1])}
    with pytest.raises(ExpressionLimitError):
        evaluate_condition("start | " + EVIL_JMESPATH, outcomes)


def test_a_backtracking_schema_pattern_is_a_validation_error() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"word": {"type": "string", "pattern": EVIL_PATTERN}},
        "patternProperties": {EVIL_PATTERN: {"type": "string"}},
    }
    errors = [
        e.message for e in validator_for(schema).iter_errors({"word": EVIL_TEXT, EVIL_TEXT: "x"})
    ]
    assert errors == [f"the pattern {EVIL_PATTERN!r} did not finish matching within 0.25 s"] * 2


def test_a_schema_pattern_past_its_bounds_is_an_invalid_schema() -> None:
    from jsonschema.exceptions import SchemaError

    schema = {"type": "string", "pattern": "((a{1000}){1000}){1000}"}
    with pytest.raises(SchemaError, match="multiply to at most 10,000"):
        validator_for(schema)
