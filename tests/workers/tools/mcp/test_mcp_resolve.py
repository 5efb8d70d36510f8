"""How a run's MCP entries resolve against announced tools: names, collisions, refusals."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.spec.resolution import resolve_tools
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolAnnouncement, registry_key
from agentq.orchestrator.tools.announcements import ANNOUNCEMENT_TTL_S
from agentq.orchestrator.tools.mcp import McpToolConfig, mcp_server_announcement

pytestmark = pytest.mark.unit

NOW = 1_000_000.0


def announce(server: str, *names: str, seen_at: float = NOW) -> dict[str, ToolAnnouncement]:
    anns = [
        ToolAnnouncement(
            name=name,
            kind="mcp",
            queue=f"q-{server}",
            description=f"{name} on {server}",
            input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
            server=server,
            seen_at=seen_at,
        )
        for name in names
    ]
    return {registry_key(a): a for a in anns}


REGISTRY = {
    **announce("time", "get_current_time", "convert_time"),
    **announce("docs", "search", "fetch"),
    **announce("web", "search", "browse"),
    **announce("old", "stale_tool", seen_at=NOW - ANNOUNCEMENT_TTL_S - 1),
    # Connected, offering no tools (yet): served all the same.
    "mcp-server:empty": mcp_server_announcement("empty", "q-empty").model_copy(
        update={"seen_at": NOW}
    ),
}


def spec_of(*entries: dict[str, Any]) -> RunSpec:
    return RunSpec.model_validate(
        {
            "model": {"provider": "scripted", "script": []},
            "prompt": "hi",
            "tools": [{"type": "mcp", **e} for e in entries],
        }
    )


def resolve(*entries: dict[str, Any]) -> list[tuple[str, str, str]]:
    out = []
    for t in resolve_tools(spec_of(*entries), REGISTRY, NOW):
        assert isinstance(t.config, McpToolConfig)
        out.append((t.name, t.config.server, t.config.tool))
    return out


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        pytest.param(
            [{"server": "time"}],
            [
                ("convert_time", "time", "convert_time"),
                ("get_current_time", "time", "get_current_time"),
            ],
            id="own-names-when-nothing-collides",
        ),
        pytest.param(
            [{"server": "docs"}],
            [("fetch", "docs", "fetch"), ("search", "docs", "search")],
            id="a-server-the-run-does-not-enable-does-not-collide",
        ),
        pytest.param(
            [{"server": "docs"}, {"server": "web"}],
            [
                ("fetch", "docs", "fetch"),
                ("docs_search", "docs", "search"),
                ("browse", "web", "browse"),
                ("web_search", "web", "search"),
            ],
            id="both-servers-of-a-collision",
        ),
        pytest.param(
            [{"server": "docs", "tools": ["search"], "prefix": "d."}],
            [("d.search", "docs", "search")],
            id="explicit-prefix-always-applies",
        ),
        pytest.param(
            [{"server": "time", "tools": ["get_current_time"], "prefix": ""}],
            [("get_current_time", "time", "get_current_time")],
            id="empty-prefix-is-a-choice-too",
        ),
        pytest.param(
            [{"server": "time", "tools": ["get_current_time"]}],
            [("get_current_time", "time", "get_current_time")],
            id="subset-of-tools",
        ),
    ],
)
def test_names_offered_to_the_model(
    entries: list[dict[str, Any]], expected: list[tuple[str, str, str]]
) -> None:
    assert resolve(*entries) == expected


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        pytest.param({"server": "nope"}, "no worker serves the MCP server 'nope'", id="unknown"),
        pytest.param({"server": "old"}, "no worker serves the MCP server 'old'", id="stale"),
        pytest.param(
            {"server": "time", "tools": ["get_current_time", "nope"]},
            "has no tool named 'nope'",
            id="unknown-tool",
        ),
    ],
)
def test_refused_at_submit(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(UnknownToolError, match=message):
        resolve(entry)


def test_a_connected_server_with_no_tools_is_served() -> None:
    assert resolve({"server": "empty"}) == []
    assert registry_key(mcp_server_announcement("empty", "q")) == "mcp-server:empty"


def test_a_server_with_no_tools_has_none_to_pick() -> None:
    with pytest.raises(UnknownToolError, match="has no tool named 'search'"):
        resolve({"server": "empty", "tools": ["search"]})


def test_same_server_twice_without_prefix_is_a_duplicate() -> None:
    with pytest.raises(SpecError, match="two tools are named"):
        resolve({"server": "time"}, {"server": "time"})


def test_schema_description_and_queue_pass_through() -> None:
    entry = {"server": "docs", "tools": ["fetch"], "needs_approval": True, "timeout_s": 5}
    [tool] = resolve_tools(spec_of(entry), REGISTRY, NOW)
    assert tool.input_schema == REGISTRY["mcp:docs:fetch"].input_schema
    assert (tool.description, tool.queue, tool.kind) == ("fetch on docs", "q-docs", "mcp")
    assert (tool.needs_approval, tool.timeout_s) == (True, 5.0)


def test_approval_for_some_tools_of_a_server() -> None:
    entry = {"server": "time", "needs_approval": ["convert_time"]}
    tools = resolve_tools(spec_of(entry), REGISTRY, NOW)
    assert {t.name: t.needs_approval for t in tools} == {
        "convert_time": True,
        "get_current_time": False,
    }
