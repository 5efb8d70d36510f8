"""`agentq batch submit|status|wait|results|cancel|retry|budget|list`: thin layers over the
Client's batch methods. The batch lives in Redis: every command may exit at any time.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from agentq.cli.connect import open_client, with_client
from agentq.cli.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_RUN_FAILED, CliError, guarded
from agentq.cli.options import CONTEXT, JSON_OPTION, REDIS_OPTION, timeout_option

if TYPE_CHECKING:
    from rich.console import Console

    from agentq.orchestrator.batches.api import BatchInfo, LineResult
    from agentq.orchestrator.client import Client

POLL_S = 0.5


def _read_json(path: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {what} {path!r}: {exc}", EXIT_BAD_INPUT) from None
    if not isinstance(value, dict):
        raise CliError(f"{what} {path!r}: expected a JSON object", EXIT_BAD_INPUT)
    return value


def _template(spec_path: str | None, agent: str | None, agents_path: str | None) -> Any:
    if spec_path and agent:
        raise CliError("give --spec or --agent, not both", EXIT_BAD_INPUT)
    if spec_path:
        return _read_json(spec_path, "template")
    if agent:
        if not agents_path:
            raise CliError(
                "--agent needs the agents file of `agentq serve`: give --agents FILE or set "
                "AGENTQ_AGENTS",
                EXIT_BAD_INPUT,
            )
        agents = _read_json(agents_path, "agents file")
        if agent not in agents:
            known = ", ".join(sorted(agents)) or "none"
            raise CliError(f"no agent {agent!r} in {agents_path} (it has: {known})", EXIT_BAD_INPUT)
        return agents[agent]
    return None


def _metadata(pairs: tuple[str, ...]) -> dict[str, str]:
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--metadata {pair!r}: expected KEY=VALUE", EXIT_BAD_INPUT)
        found[key] = value
    return found


@click.group(context_settings=CONTEXT)
def batch() -> None:
    """Batches of runs from JSONL: submit, follow, collect results in input order.

    \b
    A batch lives in Redis; the workers admit its lines as runs end, at most
    --concurrency at a time. Every command may exit and be run again.
    """


@batch.command("submit", context_settings=CONTEXT)
@click.argument("path", metavar="FILE.jsonl", type=click.Path(dir_okay=False))
@REDIS_OPTION
@click.option("--spec", "spec_path", default=None, metavar="TEMPLATE.json", help="Template.")
@click.option("--agent", default=None, metavar="NAME", help="Template: an agent of --agents.")
@click.option(
    "--agents",
    "agents_path",
    envvar="AGENTQ_AGENTS",
    default=None,
    metavar="FILE",
    help="The agents file of `agentq serve` (default: $AGENTQ_AGENTS).",
)
@click.option("--id", "batch_id", default=None, help="The batch id (the same id resumes).")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=128,  # batches/state.py's DEFAULT_BATCH_CONCURRENCY, written out to keep -h light
    show_default=True,
    help="Runs of the batch in flight at most.",
)
@click.option(
    "--priority",
    type=click.IntRange(min=1, max=100),
    default=1,
    show_default=True,
    help="Its lines take N of the tenant's jobs for 1 of a priority-1 batch (or direct run).",
)
@click.option("--metadata", "metadata", multiple=True, metavar="K=V", help="Repeatable.")
@click.option(
    "--provider-batch",
    is_flag=True,
    help="Route every line's model steps through the provider's batch API (model.batch).",
)
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="The batch's budget in USD: reached, its runs' next steps wait (`batch budget`).",
)
@click.option(
    "--max-total-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="The batch's budget in tokens.",
)
@JSON_OPTION
def submit(
    path: str,
    redis_url: str | None,
    spec_path: str | None,
    agent: str | None,
    agents_path: str | None,
    batch_id: str | None,
    concurrency: int,
    priority: int,
    metadata: tuple[str, ...],
    provider_batch: bool,
    max_cost_usd: float | None,
    max_total_tokens: int | None,
    as_json: bool,
) -> None:
    """Store FILE.jsonl's lines as a batch and print its id. Each line is a RunSpec, or
    {"custom_id", "spec"?, "vars"?, "prompt"?, "messages"?} over the template."""

    def check() -> Any:
        if not Path(path).exists() or Path(path).is_dir():
            raise CliError(f"no input file {path!r}", EXIT_BAD_INPUT)
        return _template(spec_path, agent, agents_path)

    async def go() -> None:
        template = check()
        async with open_client(redis_url, "batch submit") as client:
            result = await client.batches.submit(
                path,
                template=template,
                batch_id=batch_id,
                concurrency=concurrency,
                priority=priority,
                metadata=_metadata(metadata),
                provider_batch=provider_batch,
                max_cost_usd=max_cost_usd,
                max_total_tokens=max_total_tokens,
                on_chunk=lambda n: click.echo(f"stored {n} lines", err=True),
            )
        if as_json:
            click.echo(result.model_dump_json())
        else:
            if result.resumed:
                click.echo(f"resumed: {result.stored} more lines stored", err=True)
            if result.existed:
                click.echo("this batch was submitted before: nothing uploaded", err=True)
            click.echo(result.batch_id)

    guarded(go)()


def summary_line(info: BatchInfo) -> str:
    c = info.counts
    rate = f"{info.runs_per_s:.1f}/s" if info.runs_per_s else "-"
    eta = f"{info.eta_s:.0f}s" if info.eta_s is not None else "-"
    line = (
        f"{info.id} {info.status}: {c.succeeded} succeeded, {c.failed} failed, "
        f"{c.cancelled} cancelled, {c.running} running, {c.queued} queued of {info.lines}; "
        f"{rate}, ETA {eta}, {info.usage['total_tokens']} tokens, {cost_text(info.cost_usd)}"
    )
    budget = info.budget
    if budget is None or budget.budget is None:
        return line
    limits = budget.budget
    line += f"\nbudget: ${budget.spent_usd:,.4f}"
    if limits.max_cost_usd is not None:
        line += f" of ${limits.max_cost_usd:,.4f}"
    line += f", {budget.spent_tokens} tokens"
    if limits.max_total_tokens is not None:
        line += f" of {limits.max_total_tokens}"
    if budget.reached is not None:
        line += f"; {budget.held_runs} runs held: {budget.reached}"
    return line


def cost_text(usd: float | None) -> str:
    """A cost as the CLI shows it: unknown when a model had no price (never $0)."""
    return "cost unknown" if usd is None else f"${usd:,.4f}"


@batch.command("status", context_settings=CONTEXT)
@click.argument("batch_id")
@REDIS_OPTION
@JSON_OPTION
def status(batch_id: str, redis_url: str | None, as_json: bool) -> None:
    """Counts by status, tokens, throughput and ETA."""

    async def go(client: Client) -> None:
        info = await client.batches.status(batch_id)
        click.echo(info.model_dump_json(indent=2) if as_json else summary_line(info))

    with_client(redis_url, "batch status", go)


class ProgressView:
    """The live progress bar of `batch wait` on a terminal (rich)."""

    def __init__(self, console: Console) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=None, complete_style="green", finished_style="green"),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[counts]}"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("ETA {task.fields[eta]}"),
            TextColumn("{task.fields[tokens]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task("batch", total=1, counts="", rate="", eta="", tokens="")

    def update(self, info: BatchInfo) -> None:
        from rich.text import Text

        c = info.counts
        counts = Text.assemble(
            (f"✓ {c.succeeded}", "green"),
            " ",
            (f"✗ {c.failed}", "red"),
            " ",
            (f"⊘ {c.cancelled}", "yellow"),
            " ",
            (f"▶ {c.running}", "cyan"),
        )
        self.progress.update(
            self.task,
            description=info.id,
            total=max(1, info.lines),
            completed=c.ended,
            counts=counts.markup,
            rate=f"{info.runs_per_s:.1f} runs/s" if info.runs_per_s else "- runs/s",
            eta=_duration(info.eta_s),
            tokens=f"{info.usage['total_tokens']:,} tok, {cost_text(info.cost_usd)}",
        )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _progress_json(info: BatchInfo) -> str:
    return json.dumps(
        {
            "batch_id": info.id,
            "status": info.status,
            "lines": info.lines,
            **info.counts.model_dump(),
            "runs_per_s": info.runs_per_s,
            "eta_s": info.eta_s,
            "total_tokens": info.usage["total_tokens"],
            "cost_usd": info.cost_usd,
        }
    )


async def follow(
    client: Client, batch_id: str, show: Callable[[BatchInfo], None], poll_s: float = POLL_S
) -> BatchInfo:
    """Show the batch's status until it ends."""
    while True:
        info = await client.batches.status(batch_id)
        show(info)
        if info.ended:
            return info
        await asyncio.sleep(poll_s)


@batch.command("wait", context_settings=CONTEXT)
@click.argument("batch_id")
@REDIS_OPTION
@timeout_option("Give up after S seconds (exit 4; the batch goes on).")
def wait(batch_id: str, redis_url: str | None, timeout_s: float | None) -> None:
    """Follow the batch until every line ended: a live progress bar on a terminal,
    JSON lines (one per second) otherwise. Exit 0 iff every line succeeded."""

    from rich.console import Console

    async def go() -> BatchInfo:
        async with open_client(redis_url, "batch wait") as client:
            if sys.stdout.isatty():
                view = ProgressView(Console())
                with view.progress:
                    return await follow(client, batch_id, view.update)
            last = [0.0]

            def emit(info: BatchInfo) -> None:
                now = time.monotonic()
                if now - last[0] >= 1.0 or info.ended:
                    last[0] = now
                    click.echo(_progress_json(info))

            return await follow(client, batch_id, emit)

    info = guarded(go, timeout_s)()
    sys.exit(EXIT_OK if info.counts.succeeded == info.lines else EXIT_RUN_FAILED)


def _write_results(out: IO[str], rows: list[LineResult]) -> None:
    for row in rows:
        out.write(row.model_dump_json(exclude={"line"}) + "\n")


@batch.command("results", context_settings=CONTEXT)
@click.argument("batch_id")
@REDIS_OPTION
@click.option("-o", "--output", default=None, metavar="FILE", help="Write to FILE.")
@click.option("--failed", is_flag=True, help="Only the lines that failed.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv"]),
    default="jsonl",
    show_default=True,
    help="csv: a header, then a row per line with a flat output's fields as columns.",
)
def results(
    batch_id: str, redis_url: str | None, output: str | None, failed: bool, fmt: str
) -> None:
    """One JSON line per input line, in input order: custom_id, run_id, status, text,
    output, usage, error. Streamed (csv: written once all lines are read, since the
    outputs' fields make the header)."""
    from agentq.cli.batch_csv import write_csv
    from agentq.orchestrator.batches.state import LineStatus

    statuses = [LineStatus.FAILED] if failed else []

    async def go(out: IO[str]) -> None:
        async with open_client(redis_url, "batch results") as client:
            page: list[LineResult] = []
            async for row in client.batches.results(batch_id, statuses=statuses):
                page.append(row)
                if fmt == "jsonl" and len(page) >= 500:
                    _write_results(out, page)
                    page = []
            if fmt == "csv":
                write_csv(out, page)
            else:
                _write_results(out, page)

    if output is None:
        guarded(go)(sys.stdout)
        return
    with Path(output).open("w", encoding="utf-8") as out:
        guarded(go)(out)


@batch.command("cancel", context_settings=CONTEXT)
@click.argument("batch_id")
@REDIS_OPTION
def cancel(batch_id: str, redis_url: str | None) -> None:
    """No new admissions; the runs in flight are cancelled."""

    async def go(client: Client) -> None:
        click.echo(summary_line(await client.batches.cancel(batch_id)))

    with_client(redis_url, "batch cancel", go)


@batch.command("retry", context_settings=CONTEXT)
@click.argument("batch_id")
@REDIS_OPTION
@click.option("--failed", is_flag=True, help="The lines that failed (the default).")
@click.option("--cancelled", is_flag=True, help="The lines that were cancelled.")
def retry(batch_id: str, redis_url: str | None, failed: bool, cancelled: bool) -> None:
    """New runs for the lines that failed (or were cancelled)."""
    from agentq.orchestrator.batches.state import LineStatus

    statuses = [LineStatus.FAILED] if failed or not cancelled else []
    if cancelled:
        statuses.append(LineStatus.CANCELLED)

    async def go(client: Client) -> None:
        n = await client.batches.retry(batch_id, statuses)
        click.echo(f"{n} lines requeued")

    with_client(redis_url, "batch retry", go)


@batch.command("budget", context_settings=CONTEXT)
@click.argument("batch_id")
@REDIS_OPTION
@click.option(
    "--max-cost-usd", type=click.FloatRange(min=0, min_open=True), default=None, help="USD."
)
@click.option("--max-total-tokens", type=click.IntRange(min=1), default=None, help="Tokens.")
def budget(
    batch_id: str, redis_url: str | None, max_cost_usd: float | None, max_total_tokens: int | None
) -> None:
    """Set or raise the batch's budget: the steps it held go on at once."""

    async def go(client: Client) -> None:
        if max_cost_usd is None and max_total_tokens is None:
            raise CliError("give --max-cost-usd or --max-total-tokens", EXIT_BAD_INPUT)
        info = await client.batches.set_budget(
            batch_id, max_cost_usd=max_cost_usd, max_total_tokens=max_total_tokens
        )
        click.echo(summary_line(info))

    with_client(redis_url, "batch budget", go)


@batch.command("list", context_settings=CONTEXT)
@REDIS_OPTION
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most N."
)
@JSON_OPTION
def list_batches(redis_url: str | None, limit: int, as_json: bool) -> None:
    """The batches, newest first."""

    async def go(client: Client) -> None:
        for info in await client.batches.list_batches(limit=limit):
            click.echo(info.model_dump_json() if as_json else summary_line(info))

    with_client(redis_url, "batch list", go)
