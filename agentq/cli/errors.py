"""How the CLI fails: one line on stderr and an exit code from a fixed contract.

Exit codes (documented in the README; scripts may rely on them):

    0    success (for `run`/`wait`: the run succeeded)
    1    the run failed or was cancelled
    2    bad input: arguments, a spec, a file, an environment variable, a run or call id
    3    infrastructure: Redis unreachable, refusing, full, or not a Redis; Docker missing
    4    timed out (`--timeout`)
    130  interrupted (Ctrl-C)

Every error the CLI can foresee is mapped here, at the boundary, from the
libraries' own exception trees; nothing a user types produces a traceback.
`AGENTQ_DEBUG=1` re-raises unforeseen errors with their traceback.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import click

from agentq.orchestrator.core.errors import (
    AgentqError,
    RunError,
    RunNotFoundError,
    RunStateError,
    RunTimeoutError,
    SpecError,
)

if TYPE_CHECKING:
    from pydantic import ValidationError
    from redis.exceptions import RedisError

    from agentq.orchestrator.core.settings import Settings

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INFRASTRUCTURE = 3
EXIT_TIMED_OUT = 4
EXIT_INTERRUPTED = 130

REDIS_SCHEMES = (
    "redis",
    "rediss",
    "unix",
    "memory",
    "redis+cluster",
    "redis+sentinel",
    "rediss+sentinel",
)

T = TypeVar("T")


class CliError(Exception):
    """A failure the CLI reports as one line with its exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"agentq: {message}", err=True)
    sys.exit(code)


def spec_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "spec"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"invalid spec: {where}: {message}{more}"


def shown_url(url: str) -> str:
    """A Redis URL fit to print: any password (a sentinel's too) replaced by ***."""
    shown = re.sub(r"^([^:/]+://[^:/@]*:)[^@/]*@", r"\1***@", url)
    return re.sub(r"([?&]sentinel_password=)[^&]*", r"\1***", shown)


def check_redis_url(url: str) -> str:
    """`url` if it can name a Redis, else a CliError (exit 2) saying what is wrong."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in REDIS_SCHEMES:
        raise CliError(
            f"invalid Redis URL {shown_url(url)!r}: it must start with redis://, rediss://, "
            "unix://, redis+cluster://, redis+sentinel://, rediss+sentinel:// or memory:// "
            "(e.g. redis://localhost:6379/0)",
            EXIT_BAD_INPUT,
        )
    if scheme == "redis+cluster":
        return url  # host:port[,host:port...]: checked when the client is made
    if scheme.endswith("+sentinel"):
        from agentq.orchestrator.redis.sentinel import parse_sentinel_url

        try:
            parse_sentinel_url(url)
        except ValueError as exc:
            raise CliError(f"invalid Redis URL {shown_url(url)!r}: {exc}", EXIT_BAD_INPUT) from None
        return url
    try:
        urlsplit(url).port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        raise CliError(f"invalid Redis URL {shown_url(url)!r}: {exc}", EXIT_BAD_INPUT) from None
    return url


def load_settings() -> Settings:
    """The AGENTQ_* environment, or a CliError naming the variable that is wrong."""
    # Imported here, as in every CLI module: `agentq -h` loads click and nothing heavy.
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from agentq.orchestrator.core.settings import Settings

    _warn_unknown_variables()
    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "AGENTQ_" + "_".join(str(p) for p in first["loc"][:1]).upper()
        value = first.get("input")
        # Within a structured variable (a JSON object), where: `acme.max_in_flight`.
        inner = ".".join(str(p) for p in first["loc"][1:])
        where = f" ({inner})" if inner else ""
        return _bad_env(f"{name}{where}={value!r}: {first['msg']}")
    except SettingsError as exc:
        found = re.search(r'field "(\w+)"', str(exc))
        name = f"AGENTQ_{found.group(1).upper()}" if found else "an AGENTQ_ variable"
        return _bad_env(f"{name} is not valid JSON")


@functools.cache
def _warn_unknown_variables() -> None:
    """Once per process: settings are loaded by more than one step of a command."""
    from agentq.cli.environment import known_variables, unknown_variable_warnings
    from agentq.orchestrator.core.settings import Settings

    for line in unknown_variable_warnings(os.environ, known_variables(Settings.model_fields)):
        click.echo(f"agentq: {line}", err=True)


def _bad_env(message: str) -> NoReturn:
    raise CliError(f"invalid environment: {message}", EXIT_BAD_INPUT)


def redis_error(exc: RedisError) -> CliError:
    """What a Redis failure means to the person at the terminal."""
    from redis import exceptions as redis_errors

    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, redis_errors.AuthenticationError) or "NOAUTH" in text:
        return CliError(
            f"Redis refused the connection: {text} "
            "(give the password in the URL: redis://:PASSWORD@HOST:6379/0)",
            EXIT_INFRASTRUCTURE,
        )
    if isinstance(exc, redis_errors.OutOfMemoryError) or text.startswith("OOM"):
        return CliError(
            f"Redis is out of memory (maxmemory reached): {text}; nothing was changed",
            EXIT_INFRASTRUCTURE,
        )
    if isinstance(exc, redis_errors.InvalidResponse):
        return CliError(
            f"the server does not answer like a Redis server ({text}): is the URL's port right?",
            EXIT_INFRASTRUCTURE,
        )
    if isinstance(exc, (redis_errors.ConnectionError, redis_errors.TimeoutError)):
        return CliError(f"cannot reach Redis: {text}", EXIT_INFRASTRUCTURE)
    return CliError(f"Redis error: {text}", EXIT_INFRASTRUCTURE)


def as_cli_error(exc: BaseException) -> CliError | None:
    """The one-line report for a foreseen error, or None."""
    from pydantic import ValidationError
    from redis import exceptions as redis_errors

    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, AgentqError) and isinstance(exc.__cause__, redis_errors.RedisError):
        return redis_error(exc.__cause__)  # the store's wrapping: say what Redis did
    if isinstance(exc, ValidationError):
        return CliError(spec_error(exc), EXIT_BAD_INPUT)
    if isinstance(exc, (SpecError, RunNotFoundError, RunStateError)):
        return CliError(exc.message, EXIT_BAD_INPUT)
    if isinstance(exc, RunTimeoutError):
        return CliError(f"timed out: {exc.message}", EXIT_TIMED_OUT)
    if isinstance(exc, RunError):
        return CliError(exc.message, EXIT_RUN_FAILED)
    if isinstance(exc, redis_errors.RedisError):
        return redis_error(exc)
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return CliError("timed out", EXIT_TIMED_OUT)
    if isinstance(exc, OSError):
        return CliError(f"cannot reach Redis: {exc}", EXIT_INFRASTRUCTURE)
    if isinstance(exc, AgentqError):
        return CliError(exc.message, EXIT_INFRASTRUCTURE)
    return None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _redis_was_slow() -> str:
    return "Redis did not answer in time"


async def within(
    timeout_s: float | None, work: Coroutine[Any, Any, T], why: Callable[[], str] = _redis_was_slow
) -> T:
    """The whole command, connecting included, bounded by `--timeout` (exit 4); `why`
    says, when the time is up, what the command was waiting for."""
    if timeout_s is None:
        return await work
    try:
        return await asyncio.wait_for(work, timeout_s)
    except TimeoutError:
        raise CliError(
            f"timed out: gave up after {timeout_s:g} s (--timeout): {why()}", EXIT_TIMED_OUT
        ) from None


def _load_client() -> None:
    """Import the client before a command's clock starts: `--timeout` bounds the wait on
    Redis, not Python loading the client's modules (the commands import it lazily, so
    that `agentq -h` stays fast), which took 1-3 s on a shared 2-core machine at load 7
    and 7-12 s at load 12, timing out `agentq wait` on a run already ended."""
    import agentq.orchestrator.client  # noqa: F401


def guarded(
    fn: Callable[..., Coroutine[Any, Any, T]],
    timeout_s: float | None = None,
    why: Callable[[], str] = _redis_was_slow,
) -> Callable[..., T]:
    """Run an async command within `timeout_s`; map every foreseen error to one line
    and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            if timeout_s is not None:
                _load_client()
            return asyncio.run(within(timeout_s, fn(*args, **kwargs), why))
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader went away (`agentq events RUN | head`): not an error of ours.
            _silence_stdout()
            sys.exit(EXIT_OK)
        except Exception as exc:
            known = as_cli_error(exc)
            if known is not None:
                fail(known.message, known.code)
            if os.environ.get("AGENTQ_DEBUG"):
                raise
            fail(
                f"internal error: {type(exc).__name__}: {exc} "
                "(AGENTQ_DEBUG=1 shows the traceback; please report it)",
                EXIT_INFRASTRUCTURE,
            )

    return wrapper
