"""HTTP auth against the test server guarded by bearer tokens: a static token from
the environment, and OAuth 2 client credentials with the token cached."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.errors import ToolError
from agentq.workers.tools.mcp import McpExecutor
from agentq.workers.tools.mcp.config import parse_mcp_config
from tests.support.mcp_servers.launch import call_context, mcp_tool, own_server_http

pytestmark = pytest.mark.integration


async def echo(executor: McpExecutor, server: str, text: str) -> Any:
    tool = mcp_tool(server, "echo")
    return await executor.execute(tool, {"text": text}, call_context(tool))


async def stats(executor: McpExecutor, server: str) -> dict[str, int]:
    tool = mcp_tool(server, "stats")
    result = await executor.execute(tool, {}, call_context(tool))
    return dict(result["structured"])


async def test_static_bearer_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OWN_TOKEN", "s3cret")
    monkeypatch.setenv("WRONG_TOKEN", "guess")
    async with own_server_http("streamable-http", "--static-token", "s3cret") as url:
        config = parse_mcp_config(
            {
                "mcpServers": {
                    "good": {"url": url, "auth": {"type": "bearer", "token_env": "OWN_TOKEN"}},
                    "bad": {"url": url, "auth": {"type": "bearer", "token_env": "WRONG_TOKEN"}},
                    "none": {"url": url},
                }
            }
        )
        async with McpExecutor(config) as executor:
            assert {a.server for a in await executor.announcements("q")} == {"good"}
            assert await echo(executor, "good", "in") == "in"
            for server in ("bad", "none"):
                with pytest.raises(ToolError, match=f"cannot connect to the MCP server '{server}'"):
                    await echo(executor, server, "out")


async def test_client_credentials_token_is_fetched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OWN_CLIENT_ID", "agentq-worker")
    monkeypatch.setenv("OWN_CLIENT_SECRET", "shh")
    args = ("--client-id", "agentq-worker", "--client-secret", "shh")
    async with own_server_http("streamable-http", *args) as url:
        token_url = url.removesuffix("/mcp") + "/token"
        auth = {
            "type": "client_credentials",
            "token_url": token_url,
            "client_id_env": "OWN_CLIENT_ID",
            "client_secret_env": "OWN_CLIENT_SECRET",
            "scope": "tools",
        }
        config = parse_mcp_config({"mcpServers": {"own": {"url": url, "auth": auth}}})
        async with McpExecutor(config) as executor:
            for text in ("a", "b", "c"):
                assert await echo(executor, "own", text) == text
            # Every request of the session carried the one cached token.
            assert (await stats(executor, "own"))["tokens_issued"] == 1


async def test_client_credentials_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OWN_CLIENT_ID", "agentq-worker")
    monkeypatch.setenv("OWN_CLIENT_SECRET", "wrong")
    args = ("--client-id", "agentq-worker", "--client-secret", "shh")
    async with own_server_http("streamable-http", *args) as url:
        auth = {
            "type": "client_credentials",
            "token_url": url.removesuffix("/mcp") + "/token",
            "client_id_env": "OWN_CLIENT_ID",
            "client_secret_env": "OWN_CLIENT_SECRET",
        }
        config = parse_mcp_config({"mcpServers": {"own": {"url": url, "auth": auth}}})
        async with McpExecutor(config) as executor:
            with pytest.raises(ToolError, match="token endpoint answered 401"):
                await echo(executor, "own", "x")


async def test_missing_token_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UNSET_TOKEN_VAR", raising=False)
    async with own_server_http("streamable-http", "--static-token", "t") as url:
        config = parse_mcp_config(
            {
                "mcpServers": {
                    "own": {"url": url, "auth": {"type": "bearer", "token_env": "UNSET_TOKEN_VAR"}}
                }
            }
        )
        async with McpExecutor(config) as executor:
            with pytest.raises(ToolError, match="UNSET_TOKEN_VAR is not set"):
                await echo(executor, "own", "x")
