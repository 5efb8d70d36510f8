"""The pure cores of prepareStep, context management and fork, as tables of cases."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.loop.context import (
    DROPPED_RESULT,
    StoredSummary,
    bounds,
    compact,
    last_count,
    reusable,
    summary_input,
    tokens_to_compact,
    with_summary,
)
from agentq.orchestrator.loop.prepare import (
    StepOverrides,
    applied,
    called_before,
    check_step_rules,
    matching_rule,
    rule_overrides,
)
from agentq.orchestrator.runs.fork import fork_copy, merge_patch, patched_spec
from agentq.orchestrator.spec.run import RunSpec

pytestmark = pytest.mark.unit

SCRIPTED = {"provider": "scripted", "script": [{"text": "x"}]}


def spec(**extra: Any) -> RunSpec:
    return RunSpec.model_validate({"model": SCRIPTED, "prompt": "go", **extra})


def turn(n: int, size: int = 40) -> list[Message]:
    call = ToolCallPart(tool_call_id=f"c{n}", tool_name="search", input={"q": n})
    result = ToolResultPart(tool_call_id=f"c{n}", tool_name="search", output="r" * size)
    return [AssistantMessage(content=[call]), ToolMessage(content=[result])]


def history(turns: int, size: int = 40) -> list[Message]:
    out: list[Message] = [UserMessage(content="task")]
    for n in range(turns):
        out.extend(turn(n, size))
    return out


RULES = [
    {"when": {"step": 0}, "system": "first"},
    {"when": {"after_tool": "search"}, "active_tools": ["add"]},
    {"when": {"step_at_least": 3}, "tool_choice": "none"},
]


@pytest.mark.parametrize(
    ("step", "previous", "index"),
    [
        (0, set(), 0),
        (0, {"search"}, 0),  # the first match wins
        (1, {"search"}, 1),
        (1, {"add"}, None),
        (2, set(), None),
        (3, set(), 2),
        (7, {"search"}, 1),
    ],
)
def test_the_first_matching_rule_applies(step: int, previous: set[str], index: int | None) -> None:
    found = matching_rule(spec(steps=RULES).steps, step, previous)
    assert (found[0] if found else None) == index


@pytest.mark.parametrize(
    ("when", "error"),
    [
        ({}, "exactly one of"),
        ({"step": 0, "after_tool": "x"}, "exactly one of"),
        ({"step": -1}, "greater than or equal"),
        ({"stepp": 1}, "Extra inputs"),
    ],
)
def test_a_bad_when_is_refused(when: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        spec(steps=[{"when": when}])


def test_rules_naming_missing_tools_are_refused() -> None:
    check_step_rules(spec(steps=RULES), {"search", "add"})
    with pytest.raises(SpecError, match=r"steps\[1\] names tool 'add'"):
        check_step_rules(spec(steps=RULES), {"search"})
    with pytest.raises(SpecError, match=r"steps\[0\] names tool 'x'"):
        check_step_rules(spec(steps=[{"when": {"step": 0}, "tool_choice": {"tool": "x"}}]), set())


def test_overrides_merge_and_apply() -> None:
    base = spec(system="base", steps=RULES)
    assert base.steps is not None
    ruled = rule_overrides(base.steps[0])
    hooked = StepOverrides.model_validate({"active_tools": ["add"], "model": "openai:gpt-4o"})
    merged = ruled.then(hooked)
    assert merged.record() == {
        "system": "first",
        "active_tools": ["add"],
        "model": merged.model_dump(mode="json", exclude_none=True)["model"],
    }
    effective = applied(base, merged)
    assert (effective.system, effective.active_tools, effective.model.label) == (
        "first",
        ["add"],
        "openai:gpt-4o",
    )
    assert StepOverrides().empty
    assert applied(base, StepOverrides()) is base


def test_called_before_reads_the_last_assistant_message() -> None:
    assert called_before(history(2)) == {"search"}
    assert called_before([UserMessage(content="x")]) == set()
    assert called_before([AssistantMessage(content=[TextPart(text="hi")])]) == set()


@pytest.mark.parametrize(
    ("n_messages", "keep", "expected"),
    [
        (1, 4, (1, 1)),
        (7, 2, (1, 5)),
        (7, 1, (1, 5)),  # the tail would start at a tool message: its call comes along
        (7, 0, (1, 7)),
        (7, None, (1, 3)),  # the default keeps 4
    ],
)
def test_bounds_keep_the_task_and_whole_turns(
    n_messages: int, keep: int | None, expected: tuple[int, int]
) -> None:
    assert bounds(history(3)[:n_messages], keep) == expected


def test_drop_tool_results_and_drop_oldest() -> None:
    messages = history(3, size=400)
    dropped, rec = compact(
        messages, "drop_tool_results", max_input_tokens=10, keep_last=2, tokens=400
    )
    outputs = [p.output for m in dropped if isinstance(m, ToolMessage) for p in m.content]
    assert outputs == [DROPPED_RESULT, DROPPED_RESULT, "r" * 400]
    assert (rec.before_messages, rec.after_messages) == (7, 7)
    assert rec.after_tokens < rec.before_tokens

    oldest, rec = compact(messages, "drop_oldest", max_input_tokens=None, keep_last=2, tokens=400)
    assert oldest == [messages[0], *messages[5:]]
    assert rec.after_messages == 3
    # With a budget, only as many turns as needed go.
    some, _ = compact(messages, "drop_oldest", max_input_tokens=300, keep_last=2, tokens=350)
    assert some == [messages[0], *messages[3:]]


def test_whether_to_compact() -> None:
    messages = history(2)
    assert tokens_to_compact(messages, max_input_tokens=None, keep_last=9, previous=None) is None
    assert tokens_to_compact(messages, max_input_tokens=None, keep_last=2, previous=None)
    # Over budget, but nothing between the task and the tail.
    assert tokens_to_compact(messages, max_input_tokens=1, keep_last=4, previous=None) is None
    previous: dict[str, Any] = {
        "usage": {"input_tokens": 5000},
        "prepared": {"sent": {"n_messages": 3}},
    }
    assert last_count(previous) == (5000, 3)
    tokens = tokens_to_compact(messages, max_input_tokens=4000, keep_last=1, previous=previous)
    assert tokens is not None
    assert tokens > 5000
    compacted = {**previous, "prepared": {**previous["prepared"], "compaction": {}}}
    assert last_count(compacted) == (None, None)


def test_a_summary_is_reused_while_it_covers_enough() -> None:
    messages = history(3)
    head, tail = bounds(messages, 2)
    stored = StoredSummary(upto=tail, text="S")
    assert reusable(messages, head, tail, stored, None)
    older = StoredSummary(upto=3, text="S")
    assert not reusable(messages, head, tail, older, None)
    assert reusable(messages, head, tail, older, 10_000)
    assert not reusable(messages, head, tail, None, 10_000)
    sent = with_summary(messages, head, tail, "S")
    assert [m.role for m in sent] == ["user", "user", "assistant", "tool"]
    asked = summary_input(messages, head, tail, older)
    assert asked[1] == UserMessage(content="Summary of the earlier conversation:\nS")
    assert asked[2:-1] == messages[3:tail]


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": 1}, {"a": 2}, {"a": 2}),
        ({"a": 1, "b": 2}, {"a": None}, {"b": 2}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": None, "z": 3}}, {"a": {"x": 1, "z": 3}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": 1}, {"b": {"c": None}}, {"a": 1, "b": {}}),
        ({"a": 1}, [1], [1]),
    ],
)
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


def test_a_fork_copies_the_steps_before_n() -> None:
    import json

    resp = {"usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11}}
    steps = [
        {"resp": json.dumps(resp), "order": '["c0"]'},
        {"resp": json.dumps(resp), "order": "[]"},
        {},
    ]
    meta = {"step": "2", "n_initial": "1"}
    messages = ["m0", "a0", "t0", "a1", "a2"]
    copy = fork_copy("r1", 2, meta, messages, steps)
    assert copy.messages == ["m0", "a0", "t0", "a1"]
    assert copy.usage.input_tokens == 20
    assert len(copy.steps) == 2
    assert fork_copy("r1", 0, meta, messages, steps).messages == ["m0"]
    with pytest.raises(SpecError, match="between 0 and 2"):
        fork_copy("r1", 3, meta, messages, steps)
    assert patched_spec('{"id": "r1", "system": "a"}', {"system": "b"}) == {"system": "b"}
