"""Runs HTTP tools: one guarded request per call (`agentq.workers.tools.egress`).

The worker checks again what submit checked, with its own settings: the hosts its
deployment allows and the variables its headers may read, so a spec let through by a
more permissive submitter still reaches nothing this worker's deployment forbids.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from typing import Any

import httpx

from agentq.orchestrator.core.errors import ToolError, ToolTimeoutError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.policy.endpoints import Resolver
from agentq.orchestrator.tools import ToolAnnouncement, ToolDef
from agentq.orchestrator.tools.http import (
    HTTP_EXECUTOR_KIND,
    HTTP_EXECUTOR_NAME,
    QUERY_METHODS,
    HttpToolConfig,
    allowed_envs,
    expand_headers,
    fill_url,
    http_hosts,
)
from agentq.workers.tools.base import WorkerServices
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.egress import Fetched, GuardedHttp

# The response headers a tool's result shows (the rest is noise to a model).
SHOWN_HEADERS = (
    "content-type",
    "content-length",
    "location",
    "etag",
    "last-modified",
    "retry-after",
    "link",
)


class HttpExecutor:
    kind = "http"
    queue: str | None = None
    keeps_runs = False

    def __init__(
        self,
        settings: Settings | None = None,
        env: Mapping[str, str] | None = None,
        resolve: Resolver | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.env = dict(os.environ if env is None else env)
        self.resolve = resolve

    async def start(self, services: WorkerServices | None = None) -> None:
        return None

    async def announcements(self, queue: str) -> list[ToolAnnouncement]:
        return [
            ToolAnnouncement(
                name=HTTP_EXECUTOR_NAME,
                kind=HTTP_EXECUTOR_KIND,
                queue=queue,
                description="HTTP tools",
            )
        ]

    async def release_run(self, run_id: str) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def execute(self, tool: ToolDef, input: Any, ctx: ToolContext) -> Any:
        config = tool.config
        if not isinstance(config, HttpToolConfig):
            raise ToolError(f"tool {tool.name!r} has no HTTP configuration")
        args = input if isinstance(input, dict) else {}
        url, rest = fill_url(config.url, args)
        headers = expand_headers(config.headers, self.env, allowed_envs(self.settings))
        query = config.method in QUERY_METHODS
        guard = GuardedHttp(
            http_hosts(self.settings),
            only_hosts=frozenset(config.allow_hosts),
            resolve=self.resolve,
        )
        left_s = ctx.deadline_at - time.time() if ctx.deadline_at else tool.timeout_s
        if query and rest:
            url = _with_query(url, rest)
        try:
            fetched = await guard.send(
                config.method,
                url,
                headers=headers,
                json=rest if not query and rest else None,
                timeout_s=max(0.001, min(tool.timeout_s, left_s)),
                max_bytes=config.max_response_bytes,
            )
        except httpx.TimeoutException:
            raise ToolTimeoutError(f"{config.method} {url} timed out", retryable=True) from None
        except httpx.HTTPError as exc:
            raise ToolError(f"{config.method} {url} failed: {exc}", retryable=True) from None
        finally:
            await guard.aclose()
        return response_document(fetched)


def _with_query(url: str, inputs: Mapping[str, Any]) -> str:
    """`url` with the inputs added to its query. Its own parameters stay (a fixed
    `api-version=…`): httpx's `params=` would replace the whole query string."""
    target = httpx.URL(url)
    added = httpx.QueryParams({k: _query_value(v) for k, v in inputs.items()})
    query = httpx.QueryParams([*target.params.multi_items(), *added.multi_items()])
    return str(target.copy_with(params=query))


def _query_value(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return value
    return json.dumps(value)


def response_document(fetched: Fetched) -> dict[str, Any]:
    """Status, the shown headers, and the body (JSON parsed when it is JSON and whole)."""
    content_type = fetched.headers.get("content-type", "")
    body: Any = fetched.body.decode("utf-8", errors="replace")
    if "json" in content_type and not fetched.truncated and fetched.body:
        with contextlib.suppress(ValueError):
            body = json.loads(fetched.body)
    document: dict[str, Any] = {
        "status": fetched.status,
        "headers": {h: fetched.headers[h] for h in SHOWN_HEADERS if h in fetched.headers},
        "body": body,
    }
    if fetched.truncated:
        document["truncated"] = True
    return document
