"""`http`: one HTTP request to an allowed host, filled from the call's input.

`{"type": "http", "name", "method", "url": "https://api.example/items/{id}", "headers":
{"Authorization": "Bearer ${env:TOKEN}"}, "allow_hosts", "timeout_s",
"max_response_bytes"}`. Inputs fill the URL's `{placeholders}` (percent-encoded); the
others go in the query (GET, HEAD, DELETE) or the JSON body. A header may name a
variable of the worker's environment, only one the deployment lists
(`AGENTQ_ALLOW_HTTP_ENVS`); hosts must be allowed by the deployment
(`AGENTQ_ALLOW_HTTP_HOSTS`), and the worker checks every address after DNS and on every
redirect (`agentq.workers.tools.egress`). Workers serve HTTP tools when the deployment allows
some host.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal
from urllib.parse import quote

from pydantic import Field

from agentq.orchestrator.core.errors import SpecError, ToolError, UnknownToolError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.policy.egress import HostAllowList, check_spec_host, split_url
from agentq.orchestrator.tools.base import (
    KindConfig,
    ResolveContext,
    ToolDef,
    ToolKindPlugin,
    ToolName,
    ToolSpecBase,
)

Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
QUERY_METHODS = frozenset({"GET", "HEAD", "DELETE"})
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
# The kind of a worker's announcement that it executes HTTP tools (not a tool itself).
HTTP_EXECUTOR_KIND = "http-executor"
HTTP_EXECUTOR_NAME = "http"
DEFAULT_MAX_RESPONSE_BYTES = 1_000_000


class HttpToolSpec(ToolSpecBase):
    type: Literal["http"] = "http"
    name: ToolName
    description: str = ""
    method: Method = "GET"
    url: str
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    headers: dict[str, str] = Field(default_factory=dict)
    # The hosts this tool may reach (redirects included); default: the URL's host.
    allow_hosts: list[str] | None = None
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, gt=0, le=50_000_000)


class HttpToolConfig(KindConfig):
    method: Method
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    allow_hosts: list[str]
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


def http_hosts(settings: Settings) -> HostAllowList:
    return HostAllowList.parse(settings.allow_http_hosts, "AGENTQ_ALLOW_HTTP_HOSTS")


def allowed_envs(settings: Settings) -> frozenset[str]:
    return frozenset(v.strip() for v in settings.allow_http_envs.split(",") if v.strip())


def check_headers(headers: dict[str, str], allowed: frozenset[str], where: str) -> None:
    for name, value in headers.items():
        if name.lower() == "host" or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name):
            raise SpecError(f"{where}.headers: {name!r} may not be set")
        for env in ENV_REF.findall(value):
            if env not in allowed:
                raise SpecError(
                    f"{where}.headers.{name}: ${{env:{env}}} is not a variable specs may name "
                    "(the deployment lists those in AGENTQ_ALLOW_HTTP_ENVS)"
                )


def expand_headers(
    headers: dict[str, str], env: dict[str, str], allowed: frozenset[str]
) -> dict[str, str]:
    """Headers with `${env:NAME}` filled from the worker's environment (allowed names
    only; a missing variable is a ToolError naming it, never an empty secret)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in allowed:
            raise ToolError(f"header variable {name} is not allowed on this worker")
        if name not in env:
            raise ToolError(f"header variable {name} is not set on this worker")
        return env[name]

    return {k: ENV_REF.sub(value, v) for k, v in headers.items()}


def fill_url(template: str, input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The URL with its placeholders filled (encoded), and the inputs it did not use."""
    used: set[str] = set()

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in input:
            raise ToolError(f"the URL needs input {name!r}")
        used.add(name)
        raw = input[name]
        return quote(raw if isinstance(raw, str) else json.dumps(raw), safe="")

    url = PLACEHOLDER.sub(value, template)
    return url, {k: v for k, v in input.items() if k not in used}


def _template_host(url: str, where: str) -> str:
    parts = split_url(PLACEHOLDER.sub("x", url), where)
    if "{" in url.split("://", 1)[-1].split("/", 1)[0]:
        raise SpecError(f"{where}: the host may not be a placeholder")
    return (parts.hostname or "").lower()


class HttpKind(ToolKindPlugin):
    kind = "http"
    spec_model = HttpToolSpec
    config_model = HttpToolConfig

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        where = f"{ctx.where}"
        deployment = http_hosts(ctx.settings)
        host = _template_host(entry.url, f"{where}.url")
        check_spec_host(PLACEHOLDER.sub("x", entry.url), deployment, f"{where}.url")
        hosts = [h.lower().rstrip(".") for h in (entry.allow_hosts or [host])]
        if host not in hosts:
            raise SpecError(f"{where}.url: host {host!r} is not in the tool's allow_hosts")
        for extra in hosts:
            if not deployment.allows(extra):
                raise SpecError(f"{where}.allow_hosts: {deployment.refusal(extra)}")
        check_headers(entry.headers, allowed_envs(ctx.settings), where)
        found = next(
            (a for a in ctx.registry.values() if a.kind == HTTP_EXECUTOR_KIND),
            None,
        )
        if found is None:
            raise UnknownToolError(
                f"{where}: no worker serves HTTP tools (workers do when "
                "AGENTQ_ALLOW_HTTP_HOSTS is set)"
            )
        return [
            self.described_tool(
                entry,
                ctx,
                entry.name,
                queue=found.queue,
                config=HttpToolConfig(
                    method=entry.method,
                    url=entry.url,
                    headers=entry.headers,
                    allow_hosts=hosts,
                    max_response_bytes=entry.max_response_bytes,
                ),
            )
        ]

    def describe(self, entry: Any) -> str:
        return f"the HTTP tool {entry.name!r}"

    def needs(self, tool: ToolDef) -> str:
        # Only workers allowed HTTP hosts run HTTP tools: the executor's registry key.
        return f"{HTTP_EXECUTOR_KIND}:{HTTP_EXECUTOR_NAME}"
