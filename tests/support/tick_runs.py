"""A schedule's tick records its run before it creates it (the record is the claim; the
run is created right after, again by a re-delivery if the claiming worker died), so for a
moment a listed tick names a run that does not exist yet. Tests that follow a tick's run
wait for it to exist first."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import RunNotFoundError
from tests.support.waiting import eventually_async


async def run_exists(client: Client, run_id: str) -> bool:
    try:
        await client.runs.status(run_id)
    except RunNotFoundError:
        return False
    return True


async def tick_runs_created(client: Client, run_ids: Iterable[str], timeout_s: float) -> None:
    """Each of the ticks' runs exists (its tick's worker got past the record)."""
    for run_id in run_ids:
        await eventually_async(partial(run_exists, client, run_id), f"run {run_id}", timeout_s)
