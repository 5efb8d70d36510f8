"""`agentq schedule create|list|pause|resume|delete|runs`: thin layers over
`client.schedules`. A schedule lives in Redis and the workers fire its ticks: no command
stays up for it."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

import click

from agentq.cli.connect import with_client
from agentq.cli.options import CONTEXT, JSON_OPTION, REDIS_OPTION

if TYPE_CHECKING:
    from agentq.orchestrator.client import Client
    from agentq.orchestrator.schedules.api import ScheduleInfo
    from agentq.orchestrator.schedules.state import TickRecord

TENANT_OPTION = click.option(
    "--tenant", default=None, metavar="NAME", help="The tenant whose schedule it is."
)


def _when(epoch_s: float | None) -> str:
    if epoch_s is None:
        return "-"
    return datetime.fromtimestamp(epoch_s).astimezone().isoformat(timespec="seconds")


def summary_line(info: ScheduleInfo) -> str:
    state = "paused" if info.paused else f"next {_when(info.next_tick_at)}"
    return (
        f"{info.name}  {info.cron!r} {info.tz}  {state}  "
        f"fired {info.fired}, skipped {info.skipped}  overlap {info.overlap}"
    )


def _skipped(record: TickRecord) -> str:
    """Why a tick fired no run (a refusal with its one line)."""
    why = f"skipped: {record.skipped}"
    return f"{why}: {record.error}" if record.error else why


@click.group(context_settings=CONTEXT)
def schedule() -> None:
    """Cron schedules: a run of a spec at each tick, fired by the workers.

    \b
    There is no scheduler process: whichever worker claims a tick fires it, once.
    """


@schedule.command("create", context_settings=CONTEXT)
@click.argument("name")
@click.option(
    "--cron", required=True, help="Five fields ('0 9 * * MON-FRI'), or six: seconds last."
)
@click.option("--spec", "spec_path", required=True, metavar="SPEC", help="The run spec (JSON).")
@click.option("--tz", default="UTC", show_default=True, help="The IANA zone the cron reads in.")
@click.option(
    "--overlap",
    type=click.Choice(["skip", "allow", "cancel-previous"]),
    default="skip",
    show_default=True,
    help="A tick while the previous run still goes: no run, another, or cancel it first.",
)
@click.option(
    "--catchup",
    type=click.Choice(["one", "skip"]),
    default="one",
    show_default=True,
    help="Ticks missed while no worker ran: fire once on recovery, or not at all.",
)
@TENANT_OPTION
@REDIS_OPTION
@JSON_OPTION
def create(
    name: str,
    cron: str,
    spec_path: str,
    tz: str,
    overlap: str,
    catchup: str,
    tenant: str | None,
    redis_url: str | None,
    as_json: bool,
) -> None:
    """Create schedule NAME (the same again is a no-op; its spec is checked as a submit)."""
    from agentq.cli.main import _read_spec

    async def go(client: Client) -> None:
        spec = _read_spec(spec_path)  # inside: a bad file is one line, exit 2
        info = await client.schedules.create(
            name, cron=cron, spec=spec, tz=tz, overlap=overlap, catchup=catchup, tenant=tenant
        )
        click.echo(info.model_dump_json() if as_json else summary_line(info))

    with_client(redis_url, "schedule create", go)


@schedule.command("list", context_settings=CONTEXT)
@TENANT_OPTION
@REDIS_OPTION
@JSON_OPTION
def list_schedules(tenant: str | None, redis_url: str | None, as_json: bool) -> None:
    """The schedules, oldest first."""

    async def go(client: Client) -> None:
        for info in await client.schedules.list(tenant=tenant):
            click.echo(info.model_dump_json() if as_json else summary_line(info))

    with_client(redis_url, "schedule list", go)


@schedule.command("pause", context_settings=CONTEXT)
@click.argument("name")
@TENANT_OPTION
@REDIS_OPTION
def pause(name: str, tenant: str | None, redis_url: str | None) -> None:
    """No tick of NAME fires until it is resumed."""

    async def go(client: Client) -> None:
        click.echo(summary_line(await client.schedules.pause(name, tenant=tenant)))

    with_client(redis_url, "schedule pause", go)


@schedule.command("resume", context_settings=CONTEXT)
@click.argument("name")
@TENANT_OPTION
@REDIS_OPTION
def resume(name: str, tenant: str | None, redis_url: str | None) -> None:
    """NAME's ticks fire again from the first after now (none missed while paused)."""

    async def go(client: Client) -> None:
        click.echo(summary_line(await client.schedules.resume(name, tenant=tenant)))

    with_client(redis_url, "schedule resume", go)


@schedule.command("delete", context_settings=CONTEXT)
@click.argument("name")
@TENANT_OPTION
@REDIS_OPTION
def delete(name: str, tenant: str | None, redis_url: str | None) -> None:
    """Delete schedule NAME (the runs it fired stay)."""

    async def go(client: Client) -> None:
        await client.schedules.delete(name, tenant=tenant)
        click.echo(f"deleted {name}")

    with_client(redis_url, "schedule delete", go)


@schedule.command("runs", context_settings=CONTEXT)
@click.argument("name")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most N."
)
@TENANT_OPTION
@REDIS_OPTION
@JSON_OPTION
def runs(name: str, limit: int, tenant: str | None, redis_url: str | None, as_json: bool) -> None:
    """What NAME's latest ticks did, newest first: each one's run, or why none."""

    async def go(client: Client) -> None:
        for record in await client.schedules.runs(name, tenant=tenant, limit=limit):
            if as_json:
                click.echo(json.dumps(record.model_dump(exclude_none=True)))
            else:
                click.echo(f"{_when(record.tick)}  {record.run_id or _skipped(record)}")

    with_client(redis_url, "schedule runs", go)
