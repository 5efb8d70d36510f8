"""MCP server declarations: the desktop-client JSON shape plus agentq's keys.

A deployment (never a run spec) declares the servers a worker may start or
connect to:

    {"mcpServers": {
        "time": {"command": "mcp-server-time", "args": [], "env": {}},
        "docs": {"url": "https://example.com/mcp", "headers": {"X-Team": "a"},
                 "timeout_s": 30, "max_concurrency": 4, "elicitation": "forward",
                 "auth": {"type": "bearer", "token_env": "DOCS_TOKEN"},
                 "sampling": {"model": "openai:gpt-4o-mini", "max_tokens": 1024}}}}

Secrets never live in the file: auth names environment variables, read when
a connection is made, so a rotated token is picked up on reconnect.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.policy.model_ref import parse_model as _parse_model

Transport = Literal["stdio", "streamable-http", "sse"]

# Other clients spell the transport differently (VS Code: "type": "http");
# accepting their spellings lets users paste the block they already have.
_TRANSPORT_ALIASES: dict[str, Transport] = {
    "stdio": "stdio",
    "streamable-http": "streamable-http",
    "streamable_http": "streamable-http",
    "streamableHttp": "streamable-http",
    "http": "streamable-http",
    "sse": "sse",
}

# Server names end up in registry keys (`mcp:{server}:{tool}`) and in tool-name
# prefixes the model sees, so they must be plain identifiers.
SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,47}$")


class McpConfigError(SpecError):
    """The MCP config file is missing, not JSON, or declares a server wrongly."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BearerAuth(_Model):
    """A static bearer token taken from an environment variable."""

    type: Literal["bearer"] = "bearer"
    token_env: str = Field(min_length=1)


class ClientCredentialsAuth(_Model):
    """OAuth 2 client credentials grant against a fixed token endpoint."""

    type: Literal["client_credentials"] = "client_credentials"
    token_url: str = Field(pattern=r"^https?://")
    client_id_env: str = Field(min_length=1)
    client_secret_env: str = Field(min_length=1)
    scope: str | None = None
    audience: str | None = None


AuthConfig = Annotated[BearerAuth | ClientCredentialsAuth, Field(discriminator="type")]


class SamplingRoute(_Model):
    """Where a server's `sampling/createMessage` requests go: one model, chosen by the
    deployment. The server's model preferences are advisory and ignored."""

    model: Annotated[ModelRef, BeforeValidator(_parse_model)]
    # A cap on what the server may ask for: its `maxTokens` is lowered to this.
    max_tokens: int | None = Field(default=None, ge=1)

    @field_validator("model")
    @classmethod
    def _known_provider(cls, model: ModelRef) -> ModelRef:
        from agentq.workers.models import known_providers

        if model.endpoint is None and model.provider not in known_providers():
            raise ValueError(
                f"unknown provider {model.provider!r} (known: "
                f"{', '.join(known_providers())}; or name an endpoint of the models file)"
            )
        return model


def _sampling_tag(value: Any) -> str:
    return "as-forward" if value == "forward" else "as-route"


# "forward", or a route (an object): told apart up front, so that a bad route's errors
# name its fields rather than also saying it is not "forward".
SamplingChoice = Annotated[
    Annotated[SamplingRoute, Tag("as-route")] | Annotated[Literal["forward"], Tag("as-forward")],
    Discriminator(_sampling_tag),
]


class McpServerConfig(_Model):
    """One entry of `mcpServers`."""

    # Desktop-client keys.
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    disabled: bool = False
    # agentq keys.
    transport: Transport | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    connect_timeout_s: float = Field(default=30.0, gt=0)
    max_concurrency: int = Field(default=8, ge=1, le=1024)
    elicitation: Literal["decline", "accept-defaults", "forward"] = "decline"
    # Given as "decline" (the default), "forward" (ask whoever drives the call: the MCP
    # gateway's client, when it declared sampling) or a route to a model; None means
    # declined, and then the client does not even declare the sampling capability.
    sampling: SamplingChoice | None = None
    auth: AuthConfig | None = None
    # "auto" probes the 2026 `server/discover` and falls back to `initialize`;
    # "legacy" pins the handshake for servers that mishandle the probe.
    protocol: Literal["auto", "legacy"] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _alias_type(cls, data: Any) -> Any:
        if isinstance(data, dict) and "type" in data:
            data = dict(data)
            spelled = data.pop("type")
            if "transport" in data:
                raise ValueError("give either 'type' or 'transport', not both")
            if spelled not in _TRANSPORT_ALIASES:
                raise ValueError(
                    f"type {spelled!r} is not a transport (stdio, streamable-http, sse)"
                )
            data["transport"] = _TRANSPORT_ALIASES[spelled]
        return data

    @field_validator("sampling", mode="before")
    @classmethod
    def _check_sampling(cls, value: Any) -> Any:
        if value is None or value == "decline":
            return None
        if value == "forward":
            return value
        if not isinstance(value, dict):
            raise ValueError(
                "expected 'decline', 'forward' or an object such as "
                '{"model": "openai:gpt-4o-mini"}'
            )
        return value

    @model_validator(mode="after")
    def _check_shape(self) -> McpServerConfig:
        if self.command is not None and self.url is not None:
            raise ValueError("give either 'command' (stdio) or 'url' (HTTP), not both")
        if self.command is None and self.url is None:
            raise ValueError("a server needs a 'command' (stdio) or a 'url' (HTTP)")
        transport = self.resolved_transport
        if transport == "stdio":
            if self.command is None:
                raise ValueError("the stdio transport needs a 'command'")
            if self.headers or self.auth is not None:
                raise ValueError("'headers' and 'auth' apply to HTTP servers, not to a 'command'")
        elif self.url is None:
            raise ValueError(f"the {transport} transport needs a 'url'")
        elif self.args or self.env or self.cwd is not None:
            raise ValueError("'args', 'env' and 'cwd' apply to a 'command', not to a 'url'")
        return self

    @property
    def resolved_transport(self) -> Transport:
        if self.transport is not None:
            return self.transport
        if self.command is not None:
            return "stdio"
        # The SSE transport's endpoint conventionally ends in /sse; anything
        # else is the current streamable HTTP transport.
        path = (self.url or "").split("?", 1)[0].rstrip("/")
        return "sse" if path.endswith("/sse") else "streamable-http"


class McpConfig(_Model):
    """Every server a worker serves, by name."""

    servers: dict[str, McpServerConfig] = Field(default_factory=dict, alias="mcpServers")

    @field_validator("servers")
    @classmethod
    def _check_names(cls, servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in servers:
            if not SERVER_NAME.match(name):
                raise ValueError(
                    f"server name {name!r} must start with a letter and hold only letters, "
                    "digits, '_' or '-' (at most 48)"
                )
        return servers

    @property
    def enabled(self) -> dict[str, McpServerConfig]:
        return {name: s for name, s in self.servers.items() if not s.disabled}


def parse_mcp_config(data: Any, *, source: str = "MCP config") -> McpConfig:
    """Validate an already-decoded config, or raise McpConfigError naming the field."""
    if not isinstance(data, dict) or "mcpServers" not in data:
        raise McpConfigError(f"{source}: expected an object with an 'mcpServers' key")
    try:
        return McpConfig.model_validate(data)
    except ValidationError as exc:
        raise McpConfigError(f"{source}: {_describe(exc)}") from None


def load_mcp_config(path: str | os.PathLike[str]) -> McpConfig:
    """Read and validate the JSON file given by `--mcp-config` / `$AGENTQ_MCP_CONFIG`."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise McpConfigError(f"MCP config {file}: cannot read it ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            f"MCP config {file}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    return parse_mcp_config(data, source=f"MCP config {file}")


def _describe(exc: ValidationError) -> str:
    """One line per problem, located as `mcpServers.NAME.FIELD`."""
    lines = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        # Union members show up as loc parts ("bearer", "function-after[...]");
        # they say nothing to someone editing a JSON file.
        loc = [p for p in loc if not p.startswith(("function-", "tagged-union[", "as-"))]
        where = ".".join(loc) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {message}")
    return "; ".join(lines)
