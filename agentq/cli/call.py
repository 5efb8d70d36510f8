"""`agentq call TOOL --input JSON`: one of the fleet's tools, called without a run.

Exit 0 iff the tool's result is not an error (1 when it is); bad input (an unknown
tool, input breaking its schema) 2, infrastructure 3, as every command (cli_errors);
4 when no worker finished the call in time (`--timeout`, by default the tool's timeout
plus 30 s in the queue): the call is cancelled, so no worker runs it later.
Progress values go to stderr, one JSON line each; the output to stdout.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from agentq.cli.connect import with_client
from agentq.cli.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_RUN_FAILED, EXIT_TIMED_OUT, fail
from agentq.cli.options import CONTEXT, REDIS_OPTION, json_option, timeout_option

if TYPE_CHECKING:
    from agentq.orchestrator.calls.catalogue import ToolCallResult
    from agentq.orchestrator.client import Client


def _progress(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str), err=True)


def _show(result: ToolCallResult, as_json: bool) -> None:
    if as_json:
        click.echo(result.model_dump_json())
    elif result.is_error:
        click.echo(f"error: {result.error}", err=True)
    elif isinstance(result.output, str):
        click.echo(result.output)
    else:
        click.echo(json.dumps(result.output, ensure_ascii=False, indent=2))


@click.command("call", context_settings=CONTEXT)
@click.argument("tool_name", metavar="TOOL")
@click.option(
    "--input", "input_json", default="{}", metavar="JSON", help="The tool's input (default {})."
)
@REDIS_OPTION
@timeout_option(
    "Give up after S seconds, the call's deadline included (default: the tool's timeout plus"
    " 30 s in the queue); an unfinished call is cancelled (exit 4)."
)
@click.option(
    "--idempotency-key",
    default=None,
    metavar="KEY",
    help="A retried call returns the first one's result.",
)
@json_option("Print the whole result as JSON.")
def call(
    tool_name: str,
    input_json: str,
    redis_url: str | None,
    timeout_s: float | None,
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    """Call TOOL (a function, `server:tool` of an MCP server, `run_python`, ...) on the
    fleet, as a job of its own, and print its output."""
    try:
        tool_input = json.loads(input_json)
    except ValueError as exc:
        fail(f"--input is not valid JSON: {exc}", EXIT_BAD_INPUT)

    async def go(client: Client) -> ToolCallResult:
        return await client.calls.call(
            tool_name,
            tool_input,
            timeout_s=timeout_s,
            idempotency_key=idempotency_key,
            on_progress=_progress,
            wait_s=timeout_s,
        )

    result = with_client(redis_url, "call", go)
    if result.cancelled:
        fail(f"timed out: {result.error} (the call was cancelled)", EXIT_TIMED_OUT)
    _show(result, as_json)
    sys.exit(EXIT_RUN_FAILED if result.is_error else EXIT_OK)
