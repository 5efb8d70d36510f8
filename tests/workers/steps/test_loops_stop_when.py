"""Stop conditions through the embedded runtime and the scripted provider: each kind,
groups, and a `@stop_when` hook; the run's finish_reason names what ended it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.runs.result import StepResult
from agentq.workers.steps import hooks as step_hooks
from agentq.workers.steps.hooks import stop_when
from agentq.workers.tools.function_tools import FunctionTool, tool
from tests.support.embedded_runs import TIMEOUT_S, Embedded, all_events
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[[Sequence[FunctionTool]], Embedded]


@tool
def search(q: str) -> str:
    """Search for q."""
    return f"found {q}"


# Five steps, each with a text and a call; the recording provider's usage is 110 + 2n
# tokens at step n (tests/support/embedded_runs.py: usage_for).
SCRIPT = [
    {"text": f"step {n}" + (" DONE" if n == 2 else ""), **calls(("search", {"q": str(n)}))}
    for n in range(5)
]


@pytest.fixture
def seen() -> Iterator[list[StepResult]]:
    """Registers the test's hooks for the test only; records what `done_at_two` saw."""
    steps: list[StepResult] = []

    def done_at_two(step: StepResult) -> bool:
        steps.append(step)
        return step.index == 2 and step.tool_calls[0].input == {"q": "2"}

    async def broken_stop(step: StepResult) -> bool:
        raise ValueError("cannot judge")

    before = dict(step_hooks._RULE_HOOKS)
    stop_when(done_at_two)
    stop_when(name="broken_stop")(broken_stop)
    yield steps
    step_hooks._RULE_HOOKS.clear()
    step_hooks._RULE_HOOKS.update(before)


@pytest.mark.parametrize(
    ("conditions", "n_steps", "reason"),
    [
        ([{"step_count_is": 2}], 2, "stop_when: step_count_is 2"),
        ([{"has_text_matching": "DONE"}], 3, "stop_when: has_text_matching 'DONE'"),
        ([{"usage_exceeds": 300}], 3, "stop_when: usage_exceeds 300"),  # 110+112+114
        ([{"hook": "done_at_two"}], 3, "stop_when: hook 'done_at_two'"),
        (
            [{"all": [{"has_tool_call": "search"}, {"step_count_is": 4}]}],
            4,
            "stop_when: all [has_tool_call 'search', step_count_is 4]",
        ),
        (
            [{"any": [{"has_text_matching": "^never"}, {"hook": "done_at_two"}]}],
            3,
            "stop_when: any [has_text_matching '^never', hook 'done_at_two']",
        ),
        ([{"has_text_matching": "^never"}], 5, "tool-calls"),  # max_steps: the model's
    ],
)
async def test_each_condition_ends_the_run_and_names_itself(
    start: Start,
    seen: list[StepResult],
    conditions: list[dict[str, Any]],
    n_steps: int,
    reason: str,
) -> None:
    spec = scripted(*SCRIPT, tools=["search"], max_steps=5, stop_when=conditions)
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
        events = await all_events(client, result.id)
    assert result.status == "succeeded", result.error
    assert len(result.steps) == n_steps
    # The step's tool results are in before the run ends.
    assert [r.output for r in result.steps[-1].tool_results] == [f"found {n_steps - 1}"]
    assert result.finish_reason == reason
    (finish,) = [e.model_dump() for e in events if e.type == "finish"]
    assert finish["finish_reason"] == reason
    # Each step's own finish reason stays the model's.
    assert {e.model_dump()["finish_reason"] for e in events if e.type == "finish-step"} == {
        "tool-calls"
    }


async def test_the_hook_sees_each_step_result(start: Start, seen: list[StepResult]) -> None:
    spec = scripted(*SCRIPT, tools=["search"], stop_when=[{"hook": "done_at_two"}])
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.succeeded, result.error
    assert [(s.index, s.text, s.tool_calls[0].name) for s in seen] == [
        (0, "step 0", "search"),
        (1, "step 1", "search"),
        (2, "step 2 DONE", "search"),
    ]
    assert seen[1].usage.total_tokens == 112


async def test_a_hook_that_raises_fails_the_run_naming_it(
    start: Start, seen: list[StepResult]
) -> None:
    spec = scripted(*SCRIPT, tools=["search"], stop_when=[{"hook": "broken_stop"}])
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.step) == ("hook", 0)
    assert result.error.message == "stop_when hook 'broken_stop' raised ValueError: cannot judge"


async def test_bad_conditions_are_refused_at_submit(start: Start, seen: list[StepResult]) -> None:
    async with start([search]) as client:
        with pytest.raises(ValidationError, match="not a valid regular expression"):
            await client.runs.submit(
                scripted(*SCRIPT, tools=["search"], stop_when=[{"has_text_matching": "(DONE"}])
            )
        with pytest.raises(SpecError, match="stop_when: hook 'missing' is not a hook"):
            await client.runs.submit(
                scripted(*SCRIPT, tools=["search"], stop_when=[{"any": [{"hook": "missing"}]}])
            )
        with pytest.raises(SpecError, match=r"stop_when\[0\].all\[0\].has_tool_call: 'nope'"):
            await client.runs.submit(
                scripted(
                    *SCRIPT, tools=["search"], stop_when=[{"all": [{"has_tool_call": "nope"}]}]
                )
            )


async def test_a_backtracking_pattern_fails_the_run_limit(
    start: Start, seen: list[StepResult]
) -> None:
    """`(a|aa)+$` on a line of a's ending in b would keep Python's `re` busy for ever: the
    match stops at its timeout, and the run fails `limit` naming the pattern."""
    spec = scripted({"text": "a" * 64 + "b"}, stop_when=[{"has_text_matching": r"(a|aa)+$"}])
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.step) == ("limit", 0)
    assert result.error.message == ("the pattern '(a|aa)+$' did not finish matching within 0.25 s")


async def test_patterns_past_their_bounds_are_refused_at_submit(
    start: Start, seen: list[StepResult]
) -> None:
    async with start([search]) as client:
        for pattern, message in [
            ("x" * 501, "a pattern is at most 500 characters"),
            ("((a{1000}){1000}){1000}", "multiply to at most 10,000"),
        ]:
            with pytest.raises(ValidationError, match=message):
                await client.runs.submit(
                    scripted(*SCRIPT, tools=["search"], stop_when=[{"has_text_matching": pattern}])
                )


async def test_a_replay_plans_with_what_the_step_gathered(
    start: Start, seen: list[StepResult]
) -> None:
    """The hook's answers and the run's tokens are stored with each step: a replay, which
    calls no hook, takes the path the run took."""
    spec = scripted(
        *SCRIPT,
        tools=["search"],
        stop_when=[{"hook": "done_at_two"}, {"usage_exceeds": 10_000}],
    )
    async with start([search]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        replayed = await client.runs.replay(run_id)
    assert len(result.steps) == 3
    assert replayed.steps == 3
    assert replayed.divergences == []
