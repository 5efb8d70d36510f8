"""The CLI's contract, in process: help everywhere, URL and environment checks, and
the one-line mapping of every foreseen error to its exit code."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from redis import exceptions as redis_errors

from agentq.cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_INFRASTRUCTURE,
    EXIT_RUN_FAILED,
    EXIT_TIMED_OUT,
    CliError,
    as_cli_error,
    check_redis_url,
    load_settings,
    shown_url,
)
from agentq.cli.main import main
from agentq.orchestrator.core.errors import (
    RunError,
    RunNotFoundError,
    RunStateError,
    RunTimeoutError,
    SpecError,
)

pytestmark = pytest.mark.unit


def commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        found.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            found += commands(command, f"{prefix}{name} ")
    return found


@pytest.mark.parametrize(("name", "command"), commands(main), ids=lambda v: str(v))
def test_every_command_has_short_help_and_every_option_help_text(
    name: str, command: click.Command
) -> None:
    done = CliRunner().invoke(main, [*name.split(), "-h"])
    assert done.exit_code == 0, done.output
    assert "Usage:" in done.output
    assert command.help
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"{name} {param.opts} has no help text"


@pytest.mark.parametrize(
    "url",
    [
        "localhost:6379",
        "http://localhost:6379",
        "https://x",
        "redis://localhost:abc/0",
        "",
        "redis+sentinel://s1:26379",
        "redis+sentinel://s1:26379/aq?sentinel_pasword=x",
    ],
)
def test_malformed_redis_urls_are_bad_input(url: str) -> None:
    with pytest.raises(CliError) as caught:
        check_redis_url(url)
    assert caught.value.code == EXIT_BAD_INPUT
    assert "invalid Redis URL" in caught.value.message


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost:6379/0",
        "rediss://h:6380",
        "unix:///tmp/r.sock",
        "memory://x",
        "redis+sentinel://s1:26379,s2:26380/aq/0",
        "rediss+sentinel://:pw@s1/aq?sentinel_password=spw",
    ],
)
def test_redis_urls_pass(url: str) -> None:
    assert check_redis_url(url) == url


def test_passwords_are_not_printed() -> None:
    assert shown_url("redis://:s3cret@host:6379/0") == "redis://:***@host:6379/0"
    assert shown_url("redis://user:s3cret@host/0") == "redis://user:***@host/0"
    assert shown_url("redis://host:6379/0") == "redis://host:6379/0"
    assert (
        shown_url("redis+sentinel://:s3cret@h1:1,h2:2/aq/0?sentinel_password=s3cret")
        == "redis+sentinel://:***@h1:1,h2:2/aq/0?sentinel_password=***"
    )


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("AGENTQ_CONCURRENCY", "abc", "AGENTQ_CONCURRENCY='abc'"),
        ("AGENTQ_RATE_LIMITS", "{bad", "AGENTQ_RATE_LIMITS is not valid JSON"),
        ("AGENTQ_LEASE_S", "-1", "AGENTQ_LEASE_S"),
    ],
)
def test_a_bad_environment_is_bad_input(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(CliError) as caught:
        load_settings()
    assert caught.value.code == EXIT_BAD_INPUT
    assert says in caught.value.message
    assert "spec" not in caught.value.message


@pytest.mark.parametrize(
    ("exc", "code", "says"),
    [
        (SpecError("bad"), EXIT_BAD_INPUT, "bad"),
        (RunNotFoundError("no run"), EXIT_BAD_INPUT, "no run"),
        (RunStateError("ended"), EXIT_BAD_INPUT, "ended"),
        (RunTimeoutError("slow"), EXIT_TIMED_OUT, "timed out"),
        (RunError("failed"), EXIT_RUN_FAILED, "failed"),
        (
            redis_errors.AuthenticationError("Authentication required."),
            EXIT_INFRASTRUCTURE,
            "PASSWORD",
        ),
        (
            redis_errors.ResponseError("NOAUTH Authentication required."),
            EXIT_INFRASTRUCTURE,
            "refused",
        ),
        (
            redis_errors.OutOfMemoryError("command not allowed"),
            EXIT_INFRASTRUCTURE,
            "out of memory",
        ),
        (
            redis_errors.InvalidResponse('Protocol error, got "<"'),
            EXIT_INFRASTRUCTURE,
            "not answer like a Redis",
        ),
        (redis_errors.ConnectionError("Error 111"), EXIT_INFRASTRUCTURE, "cannot reach Redis"),
        (redis_errors.TimeoutError("Timeout"), EXIT_INFRASTRUCTURE, "cannot reach Redis"),
        (TimeoutError(), EXIT_TIMED_OUT, "timed out"),
    ],
)
def test_foreseen_errors_map_to_one_line_and_their_code(
    exc: Exception, code: int, says: str
) -> None:
    mapped = as_cli_error(exc)
    assert mapped is not None
    assert mapped.code == code
    assert says in mapped.message
    assert "\n" not in mapped.message


def test_events_after_must_not_be_negative() -> None:
    done = CliRunner().invoke(main, ["events", "r", "--after", "-1", "--redis", "redis://x:1"])
    assert done.exit_code == EXIT_BAD_INPUT


def test_events_after_past_any_seq_is_bad_input() -> None:
    """A seq is a Redis counter (signed 64-bit): a larger one is the user's mistake, said
    before Redis is asked (which refuses it as an invalid stream id)."""
    done = CliRunner().invoke(
        main, ["events", "r", "--after", str(2**64), "--redis", "redis://127.0.0.1:1"]
    )
    assert done.exit_code == EXIT_BAD_INPUT
    errors = [line for line in done.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1
    assert "--after" in errors[0]


def test_the_stores_wrapped_redis_errors_keep_their_meaning() -> None:
    from agentq.orchestrator.core.errors import InfrastructureError

    try:
        try:
            raise redis_errors.OutOfMemoryError("command not allowed")
        except redis_errors.RedisError as exc:
            raise InfrastructureError(f"Redis: {exc}") from exc
    except InfrastructureError as wrapped:
        mapped = as_cli_error(wrapped)
    assert mapped is not None
    assert mapped.code == EXIT_INFRASTRUCTURE
    assert "out of memory" in mapped.message
