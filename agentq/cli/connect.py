"""How a command reaches the shared Redis its --redis option names: one Client, the
command's work within its --timeout, every foreseen error mapped to its exit code.

Imports only the standard library and agentq.cli.errors at its top (`agentq -h` stays
light): the Client is imported when a command runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from agentq.cli.errors import EXIT_BAD_INPUT, CliError, check_redis_url, guarded, load_settings

if TYPE_CHECKING:
    from agentq.orchestrator.client import Client
    from agentq.orchestrator.core.settings import Settings

T = TypeVar("T")


def shared_redis(redis_url: str | None, command: str) -> str:
    """The URL of a Redis that outlives this command, or exit 2 saying why it is needed."""
    from agentq.orchestrator.redis.connect import is_memory_url

    if not redis_url:
        raise CliError(
            f"`agentq {command}` needs a shared Redis: give --redis redis://HOST:6379/0 "
            "or set AGENTQ_REDIS_URL",
            EXIT_BAD_INPUT,
        )
    check_redis_url(redis_url)
    if is_memory_url(redis_url):
        raise CliError(
            f"`agentq {command}` needs a shared Redis, and {redis_url} lives inside this one "
            "command: what it holds vanishes when the command exits (`agentq run` uses the "
            "embedded Redis; for workers, use --redis redis://HOST:6379/0)",
            EXIT_BAD_INPUT,
        )
    return redis_url


def open_client(redis_url: str | None, command: str, settings: Settings | None = None) -> Client:
    """A Client of the shared Redis (`command` names the command in the error without one)."""
    from agentq.orchestrator.client import Client

    url = shared_redis(redis_url, command)
    return Client(url, settings=settings or load_settings())


def with_client(
    redis_url: str | None,
    command: str,
    use: Callable[[Client], Awaitable[T]],
    timeout_s: float | None = None,
    why: Callable[[], str] | None = None,
) -> T:
    """`use` a Client of the shared Redis, the whole within `timeout_s`; its value.
    `why` says what a timeout means (by default: Redis did not answer in time)."""

    async def go() -> T:
        async with open_client(redis_url, command) as opened:
            return await use(opened)

    if why is None:
        return guarded(go, timeout_s)()
    return guarded(go, timeout_s, why)()
