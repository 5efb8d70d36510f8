"""What a step gathers before its plan looks at the calls' inputs only for a guard or an
approval hook: without one, each call's input is parsed and validated once, by the plan
(which still refuses an invalid one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.loop import plan as plan_module
from agentq.orchestrator.loop.plan import Answers, plan_step
from agentq.orchestrator.runs.state import CallStatus
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.workers.steps import answers
from tests.support.embedded_runs import memory_run_store

pytestmark = pytest.mark.component

SPEC = RunSpec.model_validate(
    {
        "model": {"provider": "scripted", "script": [{"text": "done"}]},
        "prompt": "add",
        "tools": [{"type": "function", "name": "add"}],
    }
)
ADD = ToolDef(
    name="add",
    kind="function",
    queue="tools",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    },
)
RESPONSE = ModelResponse(
    tool_calls=[
        ProviderToolCall(name="add", arguments='{"a": 1}'),
        ProviderToolCall(name="add", arguments='{"b": "x"}'),
    ],
    finish_reason="tool-calls",
)


@pytest.fixture
async def store() -> AsyncIterator[RunStore]:
    async with memory_run_store("answers") as store:
        yield store


async def test_without_guard_or_hook_each_input_is_validated_once_by_the_plan(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    validated: list[Any] = []

    def counted(tool: ToolDef, value: Any) -> None:
        validated.append(value)
        plain(tool, value)

    plain = plan_module.validate_input
    monkeypatch.setattr(answers, "validate_input", counted)
    monkeypatch.setattr(plan_module, "validate_input", counted)

    gathered = await answers.gather(store, "r1", 0, SPEC, [ADD], RESPONSE)
    assert gathered == Answers()
    assert validated == []

    planned = plan_step(SPEC, [ADD], 0, RESPONSE, answers=gathered)
    assert validated == [{"a": 1}, {"b": "x"}]
    good, bad = planned.calls
    assert good.status == CallStatus.QUEUED
    assert bad.status == CallStatus.DONE
    assert bad.result is not None
    assert bad.result.is_error  # refused by the plan: a tool error the model sees
