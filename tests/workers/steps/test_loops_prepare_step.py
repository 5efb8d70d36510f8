"""prepareStep and context management on the embedded runtime: declarative rules, a
`@prepare_step` hook (and one that raises), compaction of what a step sends."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.messages import Message, SystemMessage, ToolMessage
from agentq.orchestrator.runs.result import StepResult
from agentq.orchestrator.spec.run import ToolChoiceTool
from agentq.workers.steps import hooks as step_hooks
from agentq.workers.steps.hooks import prepare_step
from agentq.workers.tools.function_tools import FunctionTool, tool
from tests.support.embedded_runs import TIMEOUT_S, Embedded, ModelLog, all_events
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component


@tool
def search(q: str) -> str:
    """Search for q."""
    return f"found {q} " + "x" * 400


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


Start = Callable[[Sequence[FunctionTool]], Embedded]


@pytest.fixture
def hooks() -> Iterator[list[tuple[int, int, int]]]:
    """Registers the test hooks for the test only; records what `seen` was called with."""
    seen: list[tuple[int, int, int]] = []

    def system_per_step(step: int, steps: list[StepResult], messages: list[Message]) -> Any:
        seen.append((step, len(steps), len(messages)))
        return {"system": f"hooked {step}", "active_tools": ["add"] if step else None}

    def broken(step: int, steps: list[StepResult], messages: list[Message]) -> Any:
        raise ValueError("no plan for this step")

    before = dict(step_hooks._HOOKS)
    prepare_step(system_per_step)
    prepare_step(name="broken")(broken)
    yield seen
    step_hooks._HOOKS.clear()
    step_hooks._HOOKS.update(before)


async def test_the_first_matching_rule_sets_model_system_and_tools(
    start: Start, model_log: ModelLog
) -> None:
    spec = scripted(
        calls(("search", {"q": "a"})),
        calls(("add", {"a": 1, "b": 2})),
        {"text": "done"},
        tools=["search", "add"],
        system="base",
        steps=[
            {"when": {"step": 0}, "system": "first", "tool_choice": {"tool": "search"}},
            {"when": {"after_tool": "search"}, "active_tools": ["add"]},
            {"when": {"step_at_least": 2}, "system": "late", "tool_choice": "none"},
        ],
    )
    async with start([search, add]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
        events = await all_events(client, result.id)
        raw = await client.redis.hget(keys.step(result.id, 1), "resp")  # type: ignore[misc]
    assert result.status == "succeeded", result.error
    first, second, third = (model_log.request(n) for n in range(3))
    assert first.system == "first"
    assert first.tool_choice == ToolChoiceTool(tool="search")
    assert [t.name for t in first.tools] == ["search", "add"]
    assert second.system == "base"
    assert [t.name for t in second.tools] == ["add"]
    assert (third.system, third.tool_choice, third.tools) == ("late", "none", [])
    finishes = [e.model_dump() for e in events if e.type == "finish-step"]
    assert finishes[0]["prepared"] == {
        "rule": 0,
        "overrides": {"system": "first", "tool_choice": {"tool": "search"}},
    }
    assert finishes[1]["prepared"]["rule"] == 1
    recorded = json.loads(raw)["prepared"]
    assert recorded["overrides"] == {"active_tools": ["add"]}
    assert recorded["sent"]["tools"] == ["add"]


async def test_a_rule_naming_a_tool_the_run_lacks_is_refused_at_submit(start: Start) -> None:
    spec = scripted(
        {"text": "x"}, tools=["add"], steps=[{"when": {"step": 0}, "active_tools": ["nope"]}]
    )
    async with start([add]) as client:
        with pytest.raises(SpecError, match=r"steps\[0\] names tool 'nope'"):
            await client.runs.submit(spec)
        with pytest.raises(ValidationError, match="exactly one of"):
            await client.runs.submit({**spec, "steps": [{"when": {"step": 0, "step_at_least": 1}}]})
        with pytest.raises(SpecError, match="prepare_step 'missing'"):
            await client.runs.submit({**spec, "steps": None, "prepare_step": "missing"})
        # A rule's model, and the summary model, are checked as the main model is.
        elsewhere = {"provider": "openai", "name": "gpt", "base_url": "http://10.1.2.3/v1"}
        with pytest.raises(SpecError, match="base_url"):
            await client.runs.submit({**spec, "steps": [{"when": {"step": 1}, "model": elsewhere}]})
        with pytest.raises(SpecError, match="base_url"):
            await client.runs.submit(
                {
                    **spec,
                    "steps": None,
                    "context": {
                        "keep_last_messages": 2,
                        "strategy": "summarize",
                        "summary_model": elsewhere,
                    },
                }
            )


async def test_a_hook_overrides_each_step_and_is_recorded(
    start: Start, model_log: ModelLog, hooks: list[tuple[int, int, int]]
) -> None:
    spec = scripted(
        calls(("add", {"a": 1, "b": 2})),
        {"text": "3"},
        tools=["search", "add"],
        prepare_step="system_per_step",
    )
    async with start([search, add]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
        events = await all_events(client, result.id)
    assert result.status == "succeeded", result.error
    assert hooks == [(0, 0, 1), (1, 1, 3)]
    assert [model_log.request(n).system for n in range(2)] == ["hooked 0", "hooked 1"]
    assert [t.name for t in model_log.request(1).tools] == ["add"]
    finishes = [e.model_dump() for e in events if e.type == "finish-step"]
    assert finishes[1]["prepared"]["hook"] == "system_per_step"
    assert finishes[1]["prepared"]["overrides"] == {"system": "hooked 1", "active_tools": ["add"]}


async def test_a_hook_that_raises_fails_the_step_naming_the_hook(
    start: Start, model_log: ModelLog, hooks: list[tuple[int, int, int]]
) -> None:
    spec = scripted({"text": "never"}, prepare_step="broken")
    async with start([]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind == "hook"
    assert result.error.step == 0
    assert result.error.message == (
        "prepare_step hook 'broken' raised ValueError: no plan for this step"
    )
    assert model_log.calls == []


async def test_drop_tool_results_compacts_what_is_sent_and_keeps_the_history(
    start: Start, model_log: ModelLog
) -> None:
    spec = scripted(
        calls(("search", {"q": "a"})),
        calls(("search", {"q": "b"})),
        calls(("search", {"q": "c"})),
        {"text": "done"},
        tools=["search"],
        context={"max_input_tokens": 150, "keep_last_messages": 2, "strategy": "drop_tool_results"},
    )
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
        events = await all_events(client, result.id)
    assert result.status == "succeeded", result.error
    compacted = [e.model_dump() for e in events if e.type == "context-compacted"]
    assert compacted, [e.type for e in events]
    assert all(c["after_tokens"] < c["before_tokens"] for c in compacted)
    last = model_log.request(3).messages
    outputs = [p.output for m in last if isinstance(m, ToolMessage) for p in m.content]
    assert outputs[0] == "[tool result left out to fit the context window]"
    assert outputs[-1].startswith("found c")  # the kept tail
    stored = [p.output for m in result.messages if isinstance(m, ToolMessage) for p in m.content]
    assert all(o.startswith("found") for o in stored)  # the history stays whole


async def test_summarize_stores_one_summary_and_reuses_it(
    start: Start, model_log: ModelLog
) -> None:
    spec = scripted(
        calls(("search", {"q": "a"})),
        calls(("search", {"q": "b"})),
        calls(("search", {"q": "c"})),
        {"text": "done"},
        tools=["search"],
        context={
            "keep_last_messages": 2,
            "strategy": "summarize",
            "summary_model": {
                "provider": "scripted",
                "script": [{"text": "S1"}, {"text": "S2"}, {"text": "S3"}],
            },
        },
    )
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
        events = await all_events(client, result.id)
        stored = json.loads(await client.redis.get(keys.context_summary(result.id)))
    assert result.status == "succeeded", result.error
    summaries = [
        c for c in model_log.calls if c.request.tool_choice == "none" and not c.request.tools
    ]
    sent = model_log.request(3).messages
    assert sent[1].content == "Summary of the earlier conversation:\n" + stored["text"]
    assert len(sent) == 4  # task, summary, the last two messages
    # Steps 2 and 3 outgrow the summary before them (no token budget: keep_last alone):
    # each is deferred to a summarize job, then runs again.
    starts = [e.step for e in events if e.type == "start-step"]
    assert starts == [0, 1, 2, 2, 3, 3]
    assert stored == {"upto": 5, "text": "S2", "count": len(summaries)}
    assert len(summaries) == 2
    assert any(
        e.type == "context-compacted" and e.model_dump()["strategy"] == "summarize" for e in events
    )
    assert not any(isinstance(m, SystemMessage) for m in sent)


async def test_a_failing_summary_model_fails_the_run_naming_it(start: Start) -> None:
    spec = scripted(
        calls(("search", {"q": "a"})),
        calls(("search", {"q": "b"})),
        {"text": "done"},
        tools=["search"],
        context={
            "keep_last_messages": 1,
            "strategy": "summarize",
            "summary_model": {"provider": "scripted", "script": []},
        },
    )
    async with start([search]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind == "provider"
    assert result.error.message.startswith("the summary model failed: ")
