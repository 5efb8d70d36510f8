"""A tool kind registered from outside agentq runs through submit → execution, and gets
the wrappers every kind gets (filter, prefix, approval) without any kind-specific code."""

from __future__ import annotations

import pytest

from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.base import STORED_SPEC, StoredToolEntry
from agentq.workers.tools.assemble import optional_executors
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST, TIMEOUT_S, of_type, wait_event
from tests.support.plugins.echo_kind import EchoConfig, EchoToolSpec
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

ECHO = {
    "type": "echo",
    "names": ["shout", "whisper", "hum"],
    "tag": "T",
    "tools": ["shout", "whisper"],
    "prefix": "x_",
    "needs_approval": ["whisper"],
}


def test_the_spec_parses_the_outside_kind_as_its_own_model() -> None:
    spec = RunSpec.model_validate(scripted({"text": "ok"}, tools=[ECHO]))
    assert isinstance(spec.tools[0], EchoToolSpec)
    assert spec.tools[0].names == ["shout", "whisper", "hum"]
    assert RunSpec.model_validate_json(spec.model_dump_json()) == spec


async def test_an_outside_kind_runs_with_filter_prefix_and_approval() -> None:
    steps = [
        calls(("x_shout", {"text": "hi"}), ("x_whisper", {"text": "psst"})),
        {"text": "done"},
    ]
    async with embedded(executors=await optional_executors(), settings=FAST) as client:
        run_id = await client.runs.submit(scripted(*steps, tools=[ECHO]))
        asked = await wait_event(client, run_id, of_type("tool-approval-request"))
        assert isinstance(asked, ev.ToolApprovalRequest)
        assert asked.tool_name == "x_whisper"
        await client.runs.approve(run_id, asked.tool_call_id)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    outputs = {r.name: r.output for r in result.steps[0].tool_results}
    assert outputs == {
        "x_shout": {"tag": "T", "tool": "shout", "text": "hi"},
        "x_whisper": {"tag": "T", "tool": "whisper", "text": "psst"},
    }


async def test_the_kinds_tools_are_frozen_with_their_typed_config() -> None:
    async with embedded(executors=await optional_executors(), settings=FAST) as client:
        run_id = await client.runs.submit(scripted({"text": "ok"}, tools=[ECHO]))
        stored = [
            await client.runs.store.tool_def(run_id, n) for n in ("x_shout", "x_whisper", "x_hum")
        ]
        await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    shout, whisper, hum = (ToolDef.model_validate_json(t) if t else None for t in stored)
    assert hum is None  # filtered out
    assert shout is not None
    assert whisper is not None
    assert shout.config == EchoConfig(tag="T")
    assert (shout.source_name, shout.needs_approval, whisper.needs_approval) == (
        "shout",
        False,
        True,
    )


async def test_the_wrappers_refuse_what_the_entry_does_not_offer() -> None:
    async with embedded(executors=await optional_executors(), settings=FAST) as client:
        with pytest.raises(
            UnknownToolError, match=r"tools\[0\]: the echo entry has no tool named 'nope'"
        ):
            await client.runs.submit(scripted({"text": "ok"}, tools=[{**ECHO, "tools": ["nope"]}]))
        with pytest.raises(SpecError, match=r"tools\[0\].needs_approval: 'nope'"):
            await client.runs.submit(
                scripted({"text": "ok"}, tools=[{**ECHO, "needs_approval": ["nope"]}])
            )


async def test_without_a_worker_serving_the_kind_submit_refuses_it() -> None:
    async with embedded(settings=FAST) as client:
        with pytest.raises(UnknownToolError, match="no worker serves echo tools"):
            await client.runs.submit(scripted({"text": "ok"}, tools=[ECHO]))


def test_a_stored_spec_parses_where_the_kind_is_not_loaded() -> None:
    """A model worker need not load every kind a run uses: read back from the store, an
    entry of an unknown kind is kept as it was; at submit it is refused."""
    stored = scripted({"text": "ok"}, tools=[{"type": "elsewhere", "names": ["x"]}])
    with pytest.raises(ValueError, match="unknown tool type 'elsewhere'"):
        RunSpec.model_validate(stored)
    spec = RunSpec.model_validate(stored, context=STORED_SPEC)
    assert isinstance(spec.tools[0], StoredToolEntry)
    assert spec.model_dump(exclude_none=True)["tools"][0] == {
        "type": "elsewhere",
        "names": ["x"],
        "needs_approval": False,
        "coerce": True,
        "on_error": "model",
    }
