"""Parsing the MCP config: the desktop-client shape, agentq's keys, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.tools.mcp.config import (
    BearerAuth,
    ClientCredentialsAuth,
    McpConfigError,
    SamplingRoute,
    load_mcp_config,
    parse_mcp_config,
)

pytestmark = pytest.mark.unit


def one(server: dict[str, Any]) -> Any:
    return parse_mcp_config({"mcpServers": {"s": server}}).servers["s"]


@pytest.mark.parametrize(
    ("server", "transport"),
    [
        pytest.param({"command": "mcp-server-time"}, "stdio", id="command-is-stdio"),
        pytest.param({"url": "https://x.test/mcp"}, "streamable-http", id="url-is-http"),
        pytest.param({"url": "http://x.test/sse"}, "sse", id="sse-path-is-sse"),
        pytest.param({"url": "http://x.test/sse/?k=1"}, "sse", id="sse-path-with-query"),
        pytest.param({"url": "http://x.test/mcp", "transport": "sse"}, "sse", id="explicit"),
        pytest.param({"url": "http://x.test/sse", "type": "http"}, "streamable-http", id="vscode"),
        pytest.param(
            {"url": "http://x.test/a", "type": "streamableHttp"}, "streamable-http", id="camel"
        ),
        pytest.param({"command": "x", "type": "stdio"}, "stdio", id="type-stdio"),
    ],
)
def test_transport_is_inferred_or_given(server: dict[str, Any], transport: str) -> None:
    assert one(server).resolved_transport == transport


def test_defaults_and_agentq_keys() -> None:
    plain = one({"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]})
    assert (plain.args, plain.env, plain.timeout_s) == (["--local-timezone", "UTC"], {}, None)
    assert (plain.max_concurrency, plain.elicitation, plain.sampling) == (8, "decline", None)
    assert (plain.auth, plain.protocol, plain.disabled) == (None, "auto", False)
    tuned = one(
        {
            "url": "https://docs.test/mcp",
            "headers": {"X-Team": "a"},
            "timeout_s": 12.5,
            "max_concurrency": 2,
            "elicitation": "forward",
            "auth": {"type": "bearer", "token_env": "DOCS_TOKEN"},
        }
    )
    assert tuned.headers == {"X-Team": "a"}
    assert (tuned.timeout_s, tuned.max_concurrency, tuned.elicitation) == (12.5, 2, "forward")
    assert tuned.auth == BearerAuth(token_env="DOCS_TOKEN")
    oauth = one(
        {
            "url": "https://docs.test/mcp",
            "auth": {
                "type": "client_credentials",
                "token_url": "https://auth.test/token",
                "client_id_env": "ID",
                "client_secret_env": "SECRET",
                "scope": "tools",
            },
        }
    )
    assert isinstance(oauth.auth, ClientCredentialsAuth)
    assert oauth.auth.scope == "tools"


@pytest.mark.parametrize(
    ("sampling", "expected"),
    [
        pytest.param("decline", None, id="decline"),
        pytest.param(None, None, id="null"),
        pytest.param(
            {"model": "openai:gpt-4o-mini"},
            SamplingRoute(model=ModelRef(provider="openai", name="gpt-4o-mini")),
            id="string-model",
        ),
        pytest.param(
            {
                "model": {"provider": "openai", "name": "m", "base_url": "http://llm.test/v1"},
                "max_tokens": 256,
            },
            SamplingRoute(
                model=ModelRef(provider="openai", name="m", base_url="http://llm.test/v1"),
                max_tokens=256,
            ),
            id="object-model",
        ),
        pytest.param("forward", "forward", id="forward"),
    ],
)
def test_sampling_is_declined_or_routed(
    sampling: Any, expected: SamplingRoute | str | None
) -> None:
    assert one({"command": "x", "sampling": sampling}).sampling == expected


def test_sampling_defaults_to_declined() -> None:
    assert one({"command": "x"}).sampling is None


def test_disabled_servers_are_not_enabled() -> None:
    config = parse_mcp_config(
        {"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "disabled": True}}}
    )
    assert set(config.servers) == {"a", "b"}
    assert set(config.enabled) == {"a"}


def test_an_empty_config_is_valid() -> None:
    assert parse_mcp_config({"mcpServers": {}}).servers == {}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param([], "expected an object with an 'mcpServers' key", id="not-an-object"),
        pytest.param({"servers": {}}, "expected an object with an 'mcpServers' key", id="no-key"),
        pytest.param(
            {"mcpServers": {"t": {}}},
            "mcpServers.t: a server needs a 'command' (stdio) or a 'url' (HTTP)",
            id="neither-command-nor-url",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "url": "http://x/mcp"}}},
            "mcpServers.t: give either 'command' (stdio) or 'url' (HTTP), not both",
            id="both",
        ),
        pytest.param(
            {"mcpServers": {"time": {"command": "x", "timeout_s": 0}}},
            "mcpServers.time.timeout_s: Input should be greater than 0",
            id="timeout",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "max_concurrency": 0}}},
            "mcpServers.t.max_concurrency: Input should be greater than or equal to 1",
            id="concurrency",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "elicitation": "ask"}}},
            "mcpServers.t.elicitation: Input should be 'decline', 'accept-defaults' or 'forward'",
            id="elicitation",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "sampling": "accept"}}},
            "mcpServers.t.sampling: expected 'decline', 'forward' or an object such as",
            id="sampling-word",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "sampling": {}}}},
            "mcpServers.t.sampling.model: Field required",
            id="sampling-no-model",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "sampling": {"model": "gpt-x"}}}},
            "mcpServers.t.sampling.model: model 'gpt-x' is not of the form 'provider:name'",
            id="sampling-model-shape",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "sampling": {"model": "acme:m1"}}}},
            "mcpServers.t.sampling.model: unknown provider 'acme'",
            id="sampling-provider",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "sampling": {"model": {"provider": "openai"}}}}},
            "mcpServers.t.sampling.model: a model needs a 'name'",
            id="sampling-no-name",
        ),
        pytest.param(
            {
                "mcpServers": {
                    "t": {"command": "x", "sampling": {"model": "openai:m", "max_tokens": 0}}
                }
            },
            "mcpServers.t.sampling.max_tokens: Input should be greater than or equal to 1",
            id="sampling-max-tokens",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "sampling": {"model": "openai:m", "temp": 1}}}},
            "mcpServers.t.sampling.temp: Extra inputs are not permitted",
            id="sampling-typo",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "timeout": 5}}},
            "mcpServers.t.timeout: Extra inputs are not permitted",
            id="typo-key",
        ),
        pytest.param(
            {"mcpServers": {"t": {"url": "ftp://x/mcp"}}},
            "mcpServers.t.url: String should match pattern",
            id="url-scheme",
        ),
        pytest.param(
            {"mcpServers": {"t": {"url": "http://x/mcp", "type": "websocket"}}},
            "mcpServers.t: type 'websocket' is not a transport",
            id="unknown-type",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "transport": "sse"}}},
            "mcpServers.t: the sse transport needs a 'url'",
            id="transport-mismatch",
        ),
        pytest.param(
            {"mcpServers": {"t": {"command": "x", "headers": {"a": "b"}}}},
            "mcpServers.t: 'headers' and 'auth' apply to HTTP servers",
            id="headers-on-stdio",
        ),
        pytest.param(
            {"mcpServers": {"t": {"url": "http://x/mcp", "args": ["-v"]}}},
            "mcpServers.t: 'args', 'env' and 'cwd' apply to a 'command'",
            id="args-on-http",
        ),
        pytest.param(
            {"mcpServers": {"t": {"url": "http://x/mcp", "auth": {"type": "bearer"}}}},
            "mcpServers.t.auth.bearer.token_env: Field required",
            id="bearer-without-env",
        ),
        pytest.param(
            {"mcpServers": {"t": {"url": "http://x/mcp", "auth": {"type": "basic"}}}},
            "mcpServers.t.auth: Input tag 'basic'",
            id="unknown-auth",
        ),
        pytest.param(
            {"mcpServers": {"a:b": {"command": "x"}}},
            "mcpServers: server name 'a:b' must start with a letter",
            id="bad-name",
        ),
    ],
)
def test_bad_configs_name_the_server_and_field(data: Any, message: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_config(data)
    assert message in str(caught.value)


def test_load_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}}))
    assert list(load_mcp_config(path).servers) == ["time"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "cannot read it", id="missing"),
        pytest.param("{nope", "not valid JSON (line 1, column 2", id="not-json"),
        pytest.param('{"mcpServers": {"t": {}}}', "mcpServers.t: a server needs", id="invalid"),
    ],
)
def test_load_errors_name_the_file(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "mcp.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(McpConfigError, match=str(path)) as caught:
        load_mcp_config(path)
    assert message in str(caught.value)
