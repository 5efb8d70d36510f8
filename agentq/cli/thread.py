"""`agentq thread show|list`: a thread's runs and messages, and the threads there are.
A run joins a thread with `agentq submit|run --thread ID`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

import click

from agentq.cli.connect import with_client
from agentq.cli.options import CONTEXT, JSON_OPTION, REDIS_OPTION, TIMEOUT_OPTION

if TYPE_CHECKING:
    from agentq.orchestrator.client import Client
    from agentq.orchestrator.core.messages import Message
    from agentq.orchestrator.spec.run import DoubleTexting


@click.group(context_settings=CONTEXT)
def thread() -> None:
    """Conversations whose runs continue one another (`submit --thread ID`)."""


def _said(message: Message) -> str:
    """One line of a message: its text, or what its parts are."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    shown = []
    for part in content:
        kind = getattr(part, "type", "")
        if kind == "text":
            shown.append(part.text)
        elif kind == "tool-call":
            shown.append(f"[call {part.tool_name} {json.dumps(part.input, default=str)}]")
        elif kind == "tool-result":
            shown.append(f"[{part.tool_name} → {json.dumps(part.output, default=str)}]")
        else:
            shown.append(f"[{kind}]")
    return " ".join(shown)


@thread.command("create", context_settings=CONTEXT)
@click.argument("thread_id", required=False)
@click.option(
    "--double-texting",
    type=click.Choice(["reject", "enqueue", "interrupt", "rollback"]),
    default="reject",
    show_default=True,
    help="What a new run does while the thread's run goes on (a spec may override it).",
)
@REDIS_OPTION
@TIMEOUT_OPTION
def create(
    thread_id: str | None, double_texting: str, redis_url: str | None, timeout_s: float | None
) -> None:
    """Create a thread (THREAD_ID, or a new id) and print its id."""

    async def go(client: Client) -> None:
        policy = cast("DoubleTexting", double_texting)  # one of click's choices
        click.echo(await client.threads.create(thread_id, double_texting=policy))

    with_client(redis_url, "thread create", go, timeout_s)


@thread.command("show", context_settings=CONTEXT)
@click.argument("thread_id")
@REDIS_OPTION
@TIMEOUT_OPTION
@JSON_OPTION
def show(thread_id: str, redis_url: str | None, timeout_s: float | None, as_json: bool) -> None:
    """Show THREAD_ID: its status, its runs (oldest first) and its messages."""

    from agentq.cli.batch import cost_text

    async def go(client: Client) -> None:
        view = await client.threads.get(thread_id)
        if as_json:
            click.echo(view.model_dump_json(indent=2))
            return
        click.echo(f"thread {view.id}: {view.status}")
        u = view.usage
        click.echo(f"  usage {u.total_tokens} tokens, {cost_text(u.cost_usd)}")
        for run in view.runs:
            click.echo(f"  run {run.id}  {run.status}")
        for run_id in view.queued:
            click.echo(f"  run {run_id}  queued")
        for message in view.messages:
            click.echo(f"{message.role}: {_said(message)}")

    with_client(redis_url, "thread show", go, timeout_s)


@thread.command("list", context_settings=CONTEXT)
@REDIS_OPTION
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=10_000),
    default=20,
    show_default=True,
    help="At most this many threads, the most recently started first.",
)
@TIMEOUT_OPTION
@JSON_OPTION
def list_threads(redis_url: str | None, limit: int, timeout_s: float | None, as_json: bool) -> None:
    """List threads, the most recently started first."""

    async def go(client: Client) -> None:
        found = await client.threads.list(limit=limit)
        if as_json:
            click.echo(json.dumps([t.model_dump() for t in found], indent=2))
            return
        for summary in found:
            click.echo(f"{summary.id}\t{summary.status}\t{summary.current_run or '-'}")

    with_client(redis_url, "thread list", go, timeout_s)
