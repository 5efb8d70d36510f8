"""Calls without a run, pure: the catalogue's names, resolution, ids, and the call
transitions' scripts against their input models (as the run transitions' contract)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from agentq.orchestrator.calls.catalogue import (
    CallInputError,
    call_id_for,
    catalogue,
    listed,
    media_parts,
    resolve_call,
    validate_call_input,
)
from agentq.orchestrator.calls.state import CALL_INPUTS, CallTransitionInput
from agentq.orchestrator.core.errors import UnknownToolError
from agentq.orchestrator.core.keys import RUN_ID_PATTERN
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.machine.transition import ADDED_BY_STORE
from agentq.orchestrator.tools import ToolAnnouncement, registry_key

pytestmark = pytest.mark.unit

NOW = 1000.0


def _registry(*anns: ToolAnnouncement) -> dict[str, ToolAnnouncement]:
    return {registry_key(a): a.model_copy(update={"seen_at": NOW}) for a in anns}


FUNCTION = ToolAnnouncement(name="search", kind="function", queue="tools")
MCP_A = ToolAnnouncement(name="search", kind="mcp", queue="tools", server="a")
MCP_B = ToolAnnouncement(name="fetch", kind="mcp", queue="tools", server="b")
MCP_A_FETCH = ToolAnnouncement(name="fetch", kind="mcp", queue="tools", server="a")
CODE = ToolAnnouncement(name="run_python", kind="code", queue="sandbox", server="python")
CLIENT = ToolAnnouncement(name="ask", kind="client", queue="tools")


def test_names_resolve_to_one_tool_and_ties_need_the_qualified_name() -> None:
    tools = catalogue(_registry(FUNCTION, MCP_A, MCP_B, MCP_A_FETCH, CODE, CLIENT), NOW)
    assert tools["search"].announcement.kind == "function"  # its first name wins
    assert tools["a:search"].announcement == tools["a:search"].announcement
    assert tools["a:search"].announcement.server == "a"
    assert "fetch" not in tools  # two servers offer it
    assert tools["b:fetch"].announcement.server == "b"
    assert tools["code:python"] is tools["run_python"]
    assert "ask" not in tools  # a client tool executes nowhere
    assert [t.name for t in listed(tools)] == [
        "a:fetch",
        "a:search",
        "b:fetch",
        "run_python",
        "search",
    ]


def test_resolution_is_the_run_specs_and_unknown_names_are_named() -> None:
    registry = _registry(MCP_A, CODE)
    tools = catalogue(registry, NOW)
    tool = resolve_call("search", tools, registry, NOW, timeout_s=5, settings=Settings())
    assert (tool.kind, tool.queue, tool.timeout_s) == ("mcp", "tools", 5)
    assert tool.config is not None
    assert tool.config.model_dump() == {"server": "a", "tool": "search"}
    code = resolve_call("code:python", tools, registry, NOW, timeout_s=None, settings=Settings())
    assert code.queue == "sandbox"
    with pytest.raises(UnknownToolError, match="'nope'"):
        resolve_call("nope", tools, registry, NOW, timeout_s=None, settings=Settings())


def test_input_violations_carry_their_json_pointer() -> None:
    registry = _registry(
        FUNCTION.model_copy(
            update={
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "q": {"type": "object", "properties": {"n": {"type": "integer"}}}
                    },
                }
            }
        )
    )
    tool = resolve_call(
        "search", catalogue(registry, NOW), registry, NOW, timeout_s=None, settings=Settings()
    )
    validate_call_input(tool, {"q": {"n": 1}})
    with pytest.raises(CallInputError) as raised:
        validate_call_input(tool, {"q": {"n": "x"}})
    assert raised.value.violations == [{"path": "/q/n", "message": "'x' is not of type 'integer'"}]


def test_ids_are_derived_from_key_and_tenant() -> None:
    assert call_id_for("t", "k") == call_id_for("t", "k") != call_id_for("u", "k")
    assert RUN_ID_PATTERN.match(call_id_for("t", "k"))
    assert call_id_for("t", None) != call_id_for("t", None)


def test_media_parts_are_found_in_content_and_artifacts() -> None:
    output = {
        "content": [
            {"type": "text", "text": "x"},
            {"type": "media", "media_type": "image/png", "data": "AA"},
        ],
        "artifacts": [{"type": "media", "media_type": "text/csv", "data": "BB"}],
    }
    assert media_parts(output) == [
        {"media_type": "image/png", "data": "AA"},
        {"media_type": "text/csv", "data": "BB"},
    ]
    assert media_parts("plain") == []


LUA = resources.files("agentq.orchestrator.calls") / "lua"
BASE = set(CallTransitionInput.model_fields) | ADDED_BY_STORE


def _reads(source: str) -> set[str]:
    code = "\n".join(line.split("--", 1)[0] for line in source.splitlines())
    return set(re.findall(r"\bA\.([A-Za-z_]\w*)", code))


@pytest.mark.parametrize("model", CALL_INPUTS, ids=lambda m: m.script)
def test_a_call_script_reads_exactly_its_input_fields(model: type[CallTransitionInput]) -> None:
    source = (LUA / f"{model.script}.lua").read_text()
    assert source.startswith(f"-- {model.script}:")
    assert _reads(source) - BASE == set(model.model_fields) - BASE


def test_the_call_prelude_reads_only_common_fields() -> None:
    assert _reads((LUA / "call_prelude.lua").read_text()) <= BASE
