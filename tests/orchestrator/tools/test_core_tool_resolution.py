"""resolve_tools and check_tool_references: a spec's tools against the registry."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.spec.resolution import check_tool_references, resolve_tools
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolAnnouncement, ToolDef, registry_key
from agentq.orchestrator.tools.announcements import ANNOUNCEMENT_TTL_S
from agentq.orchestrator.tools.code import code_registry_key
from agentq.orchestrator.tools.mcp import McpToolConfig, mcp_registry_key
from agentq.orchestrator.tools.provider import ProviderToolConfig

pytestmark = pytest.mark.unit

NOW = 1_000_000.0
ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}


def ann(
    name: str, kind: str = "function", queue: str = "tools", seen_at: float = NOW, **kw: Any
) -> ToolAnnouncement:
    return ToolAnnouncement.model_validate(
        {"name": name, "kind": kind, "queue": queue, "seen_at": seen_at, **kw}
    )


def registry(*anns: ToolAnnouncement) -> dict[str, ToolAnnouncement]:
    return {registry_key(a): a for a in anns}


REGISTRY = registry(
    ann("add", description="Add.", input_schema=ADD_SCHEMA),
    ann("mul", queue="gpu"),
    ann("search", kind="mcp", server="docs", queue="mcp"),
    ann("fetch", kind="mcp", server="docs", queue="mcp"),
    ann("run_python", kind="code", server="python", queue="sandbox"),
)


def make_spec(tools: list[dict[str, Any]], **kw: Any) -> RunSpec:
    return RunSpec.model_validate({"model": "openai:m", "prompt": "p", "tools": tools, **kw})


def test_registry_keys() -> None:
    assert registry_key(ann("add")) == "add"
    assert registry_key(ann("search", kind="mcp", server="docs")) == mcp_registry_key(
        "docs", "search"
    )
    assert registry_key(ann("run_python", kind="code", server="python")) == code_registry_key(
        "python"
    )


def test_function_tool_takes_schema_and_queue_from_the_announcement() -> None:
    (tool,) = resolve_tools(make_spec([{"type": "function", "name": "add"}]), REGISTRY, NOW)
    assert tool == ToolDef(
        name="add",
        kind="function",
        description="Add.",
        input_schema=ADD_SCHEMA,
        queue="tools",
        timeout_s=60.0,
    )


@pytest.mark.parametrize(
    ("tool_kw", "spec_kw", "timeout_s", "approval"),
    [
        ({}, {}, 60.0, False),
        ({}, {"tool_timeout_s": 5}, 5.0, False),
        ({"timeout_s": 2.5}, {"tool_timeout_s": 5}, 2.5, False),
        ({"needs_approval": True}, {}, 60.0, True),
    ],
)
def test_timeouts_and_approval(
    tool_kw: dict[str, Any], spec_kw: dict[str, Any], timeout_s: float, approval: bool
) -> None:
    (tool,) = resolve_tools(
        make_spec([{"type": "function", "name": "mul", **tool_kw}], **spec_kw), REGISTRY, NOW
    )
    assert (tool.queue, tool.timeout_s, tool.needs_approval) == ("gpu", timeout_s, approval)


def test_client_tool_needs_no_worker() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    (tool,) = resolve_tools(
        make_spec(
            [{"type": "client", "name": "ask", "description": "Ask.", "input_schema": schema}]
        ),
        {},
        NOW,
    )
    assert tool == ToolDef(
        name="ask", kind="client", description="Ask.", input_schema=schema, queue=None
    )


def test_provider_tool_has_no_queue() -> None:
    (tool,) = resolve_tools(
        make_spec(
            [{"type": "provider", "name": "web_search", "options": {"k": 1}}],
            model="anthropic:claude",
        ),
        {},
        NOW,
    )
    assert (tool.kind, tool.queue, tool.config) == (
        "provider",
        None,
        ProviderToolConfig(options={"k": 1}),
    )


def test_mcp_and_code_tools() -> None:
    tools = resolve_tools(
        make_spec(
            [
                {"type": "mcp", "server": "docs", "prefix": "docs_"},
                {"type": "code", "language": "python", "limits": {"timeout_s": 3}},
            ]
        ),
        REGISTRY,
        NOW,
    )
    assert [(t.name, t.kind, t.queue) for t in tools] == [
        ("docs_fetch", "mcp", "mcp"),
        ("docs_search", "mcp", "mcp"),
        ("run_python", "code", "sandbox"),
    ]
    assert tools[0].config == McpToolConfig(server="docs", tool="fetch")
    assert tools[0].source_name == "fetch"  # renamed by the prefix
    assert tools[2].timeout_s == 3


def test_order_follows_the_spec() -> None:
    tools = resolve_tools(
        make_spec(
            [
                {"type": "function", "name": "mul"},
                {"type": "client", "name": "c"},
                {"type": "function", "name": "add"},
            ]
        ),
        REGISTRY,
        NOW,
    )
    assert [t.name for t in tools] == ["mul", "c", "add"]


@pytest.mark.parametrize(
    ("tools", "reg", "now", "fragments"),
    [
        pytest.param(
            [{"type": "function", "name": "nope"}],
            REGISTRY,
            NOW,
            ["tools[0]", "'nope'", "agentq worker --tools MODULE"],
            id="unknown-function",
        ),
        pytest.param(
            [{"type": "function", "name": "add"}, {"type": "function", "name": "gone"}],
            REGISTRY,
            NOW,
            ["tools[1]", "'gone'", "agentq worker --tools"],
            id="second-unknown",
        ),
        pytest.param(
            [{"type": "function", "name": "add"}],
            REGISTRY,
            NOW + ANNOUNCEMENT_TTL_S + 1,
            ["tools[0]", "'add'", "agentq worker --tools"],
            id="stale-announcement",
        ),
        pytest.param(
            [{"type": "function", "name": "add"}],
            {},
            NOW,
            ["'add'"],
            id="empty-registry",
        ),
        pytest.param(
            [{"type": "function", "name": "x"}],
            registry(ann("x", kind="mcp", server="x")),
            NOW,
            ["'x'"],
            id="function-name-is-an-mcp-tool",
        ),
        pytest.param(
            [{"type": "mcp", "server": "wiki"}],
            REGISTRY,
            NOW,
            ["tools[0]", "MCP server 'wiki'"],
            id="unknown-mcp-server",
        ),
        pytest.param(
            [{"type": "mcp", "server": "docs", "tools": ["search", "nope"]}],
            REGISTRY,
            NOW,
            ["'docs'", "no tool named 'nope'"],
            id="unknown-mcp-tool",
        ),
        pytest.param(
            [{"type": "code", "language": "javascript"}],
            REGISTRY,
            NOW,
            ["javascript", "--sandbox"],
            id="no-sandbox",
        ),
    ],
)
def test_unknown_tools(
    tools: list[dict[str, Any]], reg: dict[str, ToolAnnouncement], now: float, fragments: list[str]
) -> None:
    with pytest.raises(UnknownToolError) as info:
        resolve_tools(make_spec(tools), reg, now)
    for fragment in fragments:
        assert fragment in info.value.message


def test_announcement_just_inside_the_ttl_is_live() -> None:
    (tool,) = resolve_tools(
        make_spec([{"type": "function", "name": "add"}]), REGISTRY, NOW + ANNOUNCEMENT_TTL_S
    )
    assert tool.name == "add"


@pytest.mark.parametrize(
    ("tools", "spec_kw", "fragments"),
    [
        pytest.param(
            [{"type": "function", "name": "add"}, {"type": "function", "name": "add"}],
            {},
            ["tools:", "two tools are named 'add'"],
            id="duplicate-function",
        ),
        pytest.param(
            [{"type": "function", "name": "add"}, {"type": "client", "name": "add"}],
            {},
            ["two tools are named 'add'"],
            id="function-and-client",
        ),
        pytest.param(
            [
                {"type": "mcp", "server": "docs"},
                {"type": "mcp", "server": "docs", "tools": ["search"]},
            ],
            {},
            ["two tools are named 'search'"],
            id="mcp-twice-without-prefix",
        ),
        pytest.param(
            [{"type": "function", "name": "add"}],
            {"tool_choice": {"tool": "mul"}},
            ["tool_choice", "'mul'"],
            id="tool-choice",
        ),
        pytest.param(
            [{"type": "function", "name": "add"}],
            {"active_tools": ["add", "mul"]},
            ["active_tools", "'mul'"],
            id="active-tools",
        ),
        pytest.param(
            [{"type": "function", "name": "add"}],
            {"stop_when": [{"step_count_is": 2}, {"has_tool_call": "final"}]},
            ["stop_when[1].has_tool_call", "'final'"],
            id="stop-when",
        ),
    ],
)
def test_bad_references(
    tools: list[dict[str, Any]], spec_kw: dict[str, Any], fragments: list[str]
) -> None:
    with pytest.raises(SpecError) as info:
        resolve_tools(make_spec(tools, **spec_kw), REGISTRY, NOW)
    assert not isinstance(info.value, UnknownToolError)
    for fragment in fragments:
        assert fragment in info.value.message


def test_good_references() -> None:
    spec = make_spec(
        [{"type": "function", "name": "add"}, {"type": "client", "name": "final"}],
        tool_choice={"tool": "final"},
        active_tools=["add", "final"],
        stop_when=[{"has_tool_call": "final"}],
    )
    assert [t.name for t in resolve_tools(spec, REGISTRY, NOW)] == ["add", "final"]


@pytest.mark.parametrize(
    ("names", "spec_kw", "ok"),
    [
        (["a", "b"], {}, True),
        (["a", "a"], {}, False),
        ([], {"active_tools": []}, True),
        ([], {"tool_choice": "required"}, True),
        (["a"], {"tool_choice": {"tool": "a"}}, True),
        (["a"], {"tool_choice": {"tool": "b"}}, False),
        (["a"], {"active_tools": ["b"]}, False),
        (["a"], {"stop_when": [{"has_tool_call": "a"}]}, True),
        (["a"], {"stop_when": [{"has_tool_call": "b"}]}, False),
    ],
)
def test_check_tool_references(names: list[str], spec_kw: dict[str, Any], ok: bool) -> None:
    spec = RunSpec.model_validate({"model": "openai:m", "prompt": "p", **spec_kw})
    defs = [ToolDef(name=n, kind="client") for n in names]
    if ok:
        check_tool_references(spec, defs)
    else:
        with pytest.raises(SpecError):
            check_tool_references(spec, defs)
