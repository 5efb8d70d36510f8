"""The options the `agentq` commands share, written once.

Like every module of the CLI it imports only click and the standard library at its
top, so that `agentq -h` costs about what Python and click do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def redis_option(
    help: str = "Redis URL, e.g. redis://localhost:6379/0 (default: $AGENTQ_REDIS_URL).",
) -> Callable[[F], F]:
    """`--redis URL` (or $AGENTQ_REDIS_URL) into `redis_url`."""
    return click.option(
        "--redis", "redis_url", envvar="AGENTQ_REDIS_URL", default=None, metavar="URL", help=help
    )


def timeout_option(
    help: str = "Give up after S seconds, whatever Redis does (exit 4).",
) -> Callable[[F], F]:
    """`--timeout S` (positive seconds) into `timeout_s`; each command says what it bounds."""
    return click.option(
        "--timeout",
        "timeout_s",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="S",
        help=help,
    )


def json_option(help: str = "Print JSON instead of text (for scripts).") -> Callable[[F], F]:
    """`--json` into `as_json`."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def tools_option(
    help: str = "Module name or .py file of @tool functions, or of plugins (tool kinds, "
    "providers); repeatable; the current directory is importable.",
) -> Callable[[F], F]:
    """`--tools MODULE`, repeatable, into `tool_modules`."""
    return click.option("--tools", "tool_modules", multiple=True, metavar="MODULE", help=help)


REDIS_OPTION = redis_option()
TIMEOUT_OPTION = timeout_option()
JSON_OPTION = json_option()
TOOLS_OPTION = tools_option()
MODELS_OPTION = click.option(
    "--models",
    "models_path",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Models file: the model endpoints specs may use (default: $AGENTQ_MODELS).",
)


def mcp_option(
    help: str = "MCP servers, as the mcpServers JSON of desktop clients "
    "(default: $AGENTQ_MCP_CONFIG).",
) -> Callable[[F], F]:
    """`--mcp-config FILE` (an existing file) into `mcp_config`."""
    return click.option(
        "--mcp-config",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        metavar="FILE",
        help=help,
    )


MCP_OPTION = mcp_option()
THREAD_OPTION = click.option(
    "--thread",
    "thread_id",
    default=None,
    metavar="ID",
    help="Continue thread ID: the run starts from its history (created by its first run).",
)
