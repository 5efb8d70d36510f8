"""A worker joins only a fleet of its own state layout (`fleet/layout.py`).

Two checks at a worker's start, before it claims anything:

- the live workers' records (`listings`): any of another layout, an earlier release's
  record without one included, and the newcomer refuses. This is what stops a worker of
  this release beside one from before layouts were recorded, which knows of no key.
- the fleet's layout key (`aq:layout`), claimed in one script: free or already ours, it
  is (re)set to ours; held by another layout, the newcomer refuses. Two workers of
  different layouts starting at once both find no record of the other (a record is
  written at the first beat, after the executors start), but only one claims the key.

Every beat keeps the key for `WORKER_STALE_S`, the time after which the records count a
silent worker as gone, so a fleet whose workers all died frees it as it frees their
records; a worker that stops cleanly as the last one lets it go at once. A running
worker whose beat finds another layout in the key does nothing new: the newcomer is
the one that refuses, so an upgrade that would mix layouts fails visibly (the new
workers exit, the old keep serving) instead of corrupting runs.

`agentq serve` writes run state too: at its start it makes the same two checks
(`check`) and claims nothing.
"""

from __future__ import annotations

from redis.asyncio import Redis

from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.fleet.layout import describe
from agentq.orchestrator.fleet.listings import WORKER_STALE_S, WorkerRecord, live_workers
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import text

LAYOUT = "aq:layout"  # string: the state layout of the live fleet, for WORKER_STALE_S
UPGRADE_DOC = "docs/deploy/helm.md#upgrading-across-a-change-of-the-run-states-layout"
_CLAIM = scripts.script("agentq.orchestrator.fleet", "claim_layout")
_RELEASE = scripts.script("agentq.orchestrator.fleet", "release_layout")
THIS_WORKER = "this worker"  # who refuses, as the refusal names it


class MixedFleetError(InfrastructureError):
    """A worker of one state layout would join live workers of another."""


def refusal(ours: int, theirs: int, who: str, this: str = THIS_WORKER) -> MixedFleetError:
    """The one line the operator reads: both layouts, and what to do."""
    return MixedFleetError(
        f"{this} reads and writes the run state in layout {describe(ours)}, but {who} "
        f"on this Redis use layout {describe(theirs)}: workers of two layouts would corrupt "
        "each other's runs, so this one does not start. Drain the old pool first (scale it "
        "to zero), then start the new one; see "
        f"{UPGRADE_DOC}"
    )


async def claim(redis: Redis, layout: int) -> int:
    """Take or keep the fleet's layout key for ours; the layout it holds now."""
    script = redis.register_script(_CLAIM)
    held = await script(keys=[LAYOUT], args=[layout, int(WORKER_STALE_S * 1000)])
    return int(text(held))


async def join(redis: Redis, layout: int) -> None:
    """At a worker's start: raise `MixedFleetError` unless every live worker is of
    `layout`, and claim the key for it (the records first: a worker that refuses
    because of them leaves the key as it was)."""
    await _refuse_other_records(redis, layout, THIS_WORKER)
    _refuse_key(layout, await claim(redis, layout), THIS_WORKER)


async def check(redis: Redis, layout: int, this: str) -> None:
    """For a process that writes run state beside the fleet without being one of its
    workers (`agentq serve`: a submit, an approval, a cancel): raise `MixedFleetError`
    if live workers, or the fleet's layout key, are of another layout. It claims
    nothing: a fleet is its workers, and a server alone leaves the key free."""
    await _refuse_other_records(redis, layout, this)
    held = await redis.get(LAYOUT)
    if held is not None:
        _refuse_key(layout, int(text(held)), this)


async def _refuse_other_records(redis: Redis, layout: int, this: str) -> None:
    others = [w for w in await live_workers(redis) if w.layout != layout]
    if others:
        raise refusal(layout, others[0].layout, _workers(others), this)


def _refuse_key(layout: int, held: int, this: str) -> None:
    if held != layout:
        who = f"workers that started or beat within {WORKER_STALE_S:g} s"
        raise refusal(layout, held, who, this)


async def leave(redis: Redis, layout: int) -> None:
    """A worker stopping cleanly, its record already forgotten: if it was the last live
    worker, the fleet's layout is free at once (a fleet drained for an upgrade need not
    wait out the key). A worker starting meanwhile whose record is not written yet loses
    the key until its first beat takes it again."""
    if not await live_workers(redis):
        await redis.register_script(_RELEASE)(keys=[LAYOUT], args=[layout])


def _workers(records: list[WorkerRecord]) -> str:
    first = records[0]
    more = f" and {len(records) - 1} more" if len(records) > 1 else ""
    return f"live workers ({first.id} on {first.host}{more})"
