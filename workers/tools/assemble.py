"""Building a worker's executors: one factory per tool kind, registered by the kind.

A factory looks at the worker's options and returns an executor, or None when
the worker does not serve that kind (no `--mcp-config`, no `--sandbox`); the
worker runtime starts it. A kind from outside registers its factory in a module the
worker loads (`agentq worker --tools MODULE`); nothing here names it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from agentq.orchestrator.core.errors import AgentqError, SpecError
from agentq.workers.tools.base import ToolExecutor

ToolsChanged = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class WorkerOptions:
    """What a worker was started with, as executor factories see it."""

    mcp_config: str | None = None
    sandbox: bool = False
    on_tools_changed: ToolsChanged | None = None
    # Where executors read secrets (MCP sampling's API keys): the worker's environment.
    env: Mapping[str, str] | None = None
    # The worker's Redis: the sandbox shares container ownership and run sessions there.
    redis_url: str | None = None


ExecutorFactory = Callable[[WorkerOptions], ToolExecutor | None]

_FACTORIES: dict[str, tuple[ExecutorFactory, str]] = {}


def register_executor(kind: str, factory: ExecutorFactory, *, flag: str | None = None) -> None:
    """Let workers of this process serve `kind` (the factory decides whether to).
    `flag` names the option that enabled it, for an error."""
    _FACTORIES[kind] = (factory, flag or kind)


def registered_executors() -> list[str]:
    return sorted(_FACTORIES)


def _mcp(options: WorkerOptions) -> ToolExecutor | None:
    if not options.mcp_config:
        return None
    from agentq.workers.tools.mcp import McpExecutor, load_mcp_config

    return McpExecutor(
        load_mcp_config(options.mcp_config),
        on_tools_changed=options.on_tools_changed,
        env=options.env,
    )


def _code(options: WorkerOptions) -> ToolExecutor | None:
    if not options.sandbox:
        return None
    from agentq.orchestrator.core.settings import Settings
    from agentq.sandbox.config import SandboxConfig
    from agentq.workers.tools.code import CodeExecutor

    config = SandboxConfig(allow_network=Settings().sandbox_allow_network)
    return CodeExecutor(config, redis_url=options.redis_url)


def _http(options: WorkerOptions) -> ToolExecutor | None:
    from agentq.orchestrator.core.settings import Settings

    settings = Settings()
    if not settings.allow_http_hosts.strip():
        return None  # the deployment allows no host: nothing to serve
    from agentq.workers.tools.http import HttpExecutor

    return HttpExecutor(settings, options.env)


register_executor("mcp", _mcp, flag="--mcp-config")
register_executor("code", _code, flag="--sandbox")
register_executor("http", _http, flag="AGENTQ_ALLOW_HTTP_HOSTS")


async def optional_executors(
    *,
    mcp_config: str | None = None,
    sandbox: bool = False,
    on_tools_changed: ToolsChanged | None = None,
    env: Mapping[str, str] | None = None,
    redis_url: str | None = None,
) -> list[ToolExecutor]:
    """Every registered kind's executor this worker serves (not started yet)."""
    options = WorkerOptions(mcp_config, sandbox, on_tools_changed, env, redis_url)
    executors: list[ToolExecutor] = []
    for factory, flag in list(_FACTORIES.values()):
        try:
            executor = factory(options)
        except AgentqError:
            raise
        except Exception as exc:
            raise SpecError(f"{flag}: unusable here ({type(exc).__name__}: {exc})") from None
        if executor is not None:
            executors.append(executor)
    return executors
