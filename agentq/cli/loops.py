"""`agentq fork` and `agentq replay`: a run taken again from a step, or re-checked.

`fork RUN --at-step N [--patch JSON]` starts a new run with the first N steps of
RUN copied and the rest live, its spec merge-patched (RFC 7386); it prints the
new run's id. `replay RUN [--check] [--patch JSON]` runs today's loop over RUN's
recorded model responses and tool results, calling no provider and no tool, and
prints every step where today's code would send something else or take another
path; with `--check` a divergence exits 1 (a regression check in CI).
"""

from __future__ import annotations

import json
from typing import Any

import click

from agentq.cli.connect import open_client
from agentq.cli.errors import EXIT_BAD_INPUT, EXIT_RUN_FAILED, CliError, guarded
from agentq.cli.options import CONTEXT, REDIS_OPTION, json_option

_PATCH = click.option(
    "--patch",
    "patch_json",
    default=None,
    metavar="JSON",
    help='A JSON merge patch (RFC 7386) on the run\'s spec, e.g. \'{"system": "Be brief."}\'.',
)


def _patch(patch_json: str | None) -> dict[str, Any] | None:
    if patch_json is None:
        return None
    try:
        patch = json.loads(patch_json)
    except ValueError as exc:
        raise CliError(f"--patch is not JSON: {exc}", EXIT_BAD_INPUT) from None
    if not isinstance(patch, dict):
        raise CliError("--patch must be a JSON object (a merge patch of the spec)", EXIT_BAD_INPUT)
    return patch


@click.command("fork", context_settings=CONTEXT)
@click.argument("run_id")
@click.option(
    "--at-step",
    "at_step",
    type=click.IntRange(min=0),
    required=True,
    metavar="N",
    help="Copy steps 0..N-1 of RUN; step N runs live.",
)
@_PATCH
@REDIS_OPTION
def fork_command(run_id: str, at_step: int, patch_json: str | None, redis_url: str | None) -> None:
    """Start a new run from RUN's first N steps, its spec patched; print the new run id."""

    async def go() -> None:
        patch = _patch(patch_json)
        async with open_client(redis_url, "fork") as client:
            click.echo(await client.runs.fork(run_id, at_step, patch))

    guarded(go)()


@click.command("replay", context_settings=CONTEXT)
@click.argument("run_id")
@click.option("--check", is_flag=True, help="Exit 1 when any step diverges.")
@_PATCH
@REDIS_OPTION
@json_option("Print the report as JSON.")
def replay_command(
    run_id: str, check: bool, patch_json: str | None, redis_url: str | None, as_json: bool
) -> None:
    """Re-run RUN's loop from its record (no model, no tool) and report divergences."""

    async def go() -> bool:
        patch = _patch(patch_json)
        async with open_client(redis_url, "replay") as client:
            report = await client.runs.replay(run_id, patch)
        if as_json:
            click.echo(report.model_dump_json())
        else:
            for divergence in report.divergences:
                click.echo(divergence.line())
            verdict = "diverged" if report.diverged else "same messages and path"
            click.echo(f"{run_id}: {report.steps} steps replayed, {verdict}", err=True)
        return report.diverged

    if guarded(go)() and check:
        raise SystemExit(EXIT_RUN_FAILED)
