"""A run's stored spec and tools are parsed once per text by a process, and a text the
contract refuses is still refused, each time (orchestrator/runs/definitions.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core.messages import UserMessage
from agentq.orchestrator.runs.definitions import (
    LARGEST_KEPT_SPEC,
    LARGEST_KEPT_TOOL,
    stored_spec,
    stored_tool,
)
from agentq.orchestrator.runs.state import BeginStepReply, Outcome
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.workers.steps.history_cache import completed

pytestmark = pytest.mark.unit

SPEC = RunSpec.model_validate(
    {
        "model": {"provider": "scripted", "script": [{"text": "done"}]},
        "prompt": "a template's prompt",
        "tools": [{"type": "function", "name": "noop"}],
    }
).model_dump_json(exclude_none=True)
TOOL = ToolDef(name="noop", kind="function", queue="tools").model_dump_json()


def _cold_reply(stamp: str) -> BeginStepReply:
    """begin_step's answer to a worker that holds none of the run's history."""
    message = UserMessage(content="hello").model_dump_json()
    return BeginStepReply(
        outcome=Outcome.OK, spec=SPEC, tools=[TOOL], messages=[message], stamp=stamp
    )


def test_runs_that_share_a_spec_and_tools_share_their_models() -> None:
    one, other = completed(None, _cold_reply("1")), completed(None, _cold_reply("2"))
    assert one.spec is other.spec
    assert one.tools[0] is other.tools[0]
    assert one.spec == RunSpec.model_validate_json(SPEC, context={"agentq.stored": True})
    assert one.messages == other.messages
    assert one.messages[0] is not other.messages[0]  # a run's history is its own


def test_a_text_the_contract_refuses_is_refused_each_time() -> None:
    bad_tool = TOOL.replace('"kind":"function"', '"kind":"function","unknown":1')
    bad_spec = SPEC.replace('"prompt"', '"unknown":1,"prompt"')
    for _ in range(2):
        with pytest.raises(ValidationError, match="unknown"):
            stored_tool(bad_tool)
        with pytest.raises(ValidationError, match="unknown"):
            stored_spec(bad_spec)


def test_a_spec_past_the_kept_size_is_parsed_each_time() -> None:
    long = SPEC.replace("a template's prompt", "x" * LARGEST_KEPT_SPEC)
    assert stored_spec(long) == stored_spec(long)
    assert stored_spec(long) is not stored_spec(long)
    assert stored_spec(SPEC) is stored_spec(SPEC)


def test_a_tool_past_the_kept_size_is_parsed_each_time() -> None:
    # A tool's schema comes from a tenant's spec or a server's listing: a large one is
    # not kept, so no tenant fills a process's memory with them.
    long = ToolDef(
        name="noop", kind="function", queue="tools", description="x" * LARGEST_KEPT_TOOL
    ).model_dump_json()
    assert stored_tool(long) == stored_tool(long)
    assert stored_tool(long) is not stored_tool(long)
    assert stored_tool(TOOL) is stored_tool(TOOL)
