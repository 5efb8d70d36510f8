"""The batch sweep: ends the lines nothing else will end.

A line's end is normally recorded by its run's end job (see batch_admission). Two
things can lose it: an admission job arq gives up on after a non-transient error (its
admitted lines then have no run, or its run's end is never recorded), and an end job
that runs after the run's keys expired. Every worker of the model queue sweeps now and
then (like the reaper): a running line whose run has ended, or is gone, is settled from
what is left (a gone run fails the line with a message saying so), and a running batch
with queued lines gets a kick, which admits up to its concurrency, so a dropped kick
cannot strand it either.

A line must look stranded in two sweeps in a row: a run is created a moment after its
line's admission, and an end job may be on its way. Settling twice is harmless: the
settle transition records an end only while the record still names that run as running.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from agentq.orchestrator.batches.admission import ended_line, run_meta, settle_and_admit
from agentq.orchestrator.batches.state import BatchField, BatchSettle, BatchStatus, LineStatus

if TYPE_CHECKING:
    from agentq.orchestrator.client import Client

log = logging.getLogger("agentq.batch")

_SWEEP_TOKEN = "sweep:"


def line_of(run_id: str, run_prefix: str) -> int | None:
    """The line number in a batch run id `<prefix><line>.<attempt>`."""
    if not run_id.startswith(run_prefix):
        return None
    number, _, _attempt = run_id[len(run_prefix) :].rpartition(".")
    return int(number) if number.isdigit() else None


class BatchSweeper:
    """One worker's sweeps: remembers what looked stranded in its previous one."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._suspects: set[str] = set()
        self._seen: set[str] = set()

    async def sweep(self) -> int:
        """One pass over every tenant's unfinished batches; returns how many stranded
        lines it ended plus how many runs its settles created."""
        store = self.client.batches.store
        self._seen = set()
        acted = 0
        for tenant in await store.tenants():
            for batch_id in await store.all_batch_ids(tenant):
                meta = await store.meta(tenant, batch_id)
                if meta.get(BatchField.STATUS) in (BatchStatus.RUNNING, BatchStatus.CANCELLED):
                    acted += await self._sweep_batch(tenant, batch_id, meta)
        self._suspects = self._seen
        return acted

    def _twice(self, suspect: str) -> bool:
        """Whether this looked stranded in the previous sweep too (else remember it)."""
        if suspect in self._suspects:
            return True
        self._seen.add(suspect)
        return False

    async def _sweep_batch(self, tenant: str, batch_id: str, meta: dict[str, str]) -> int:
        acted = 0
        prefix = meta.get(BatchField.RUN_PREFIX, "")
        if int(meta.get(LineStatus.RUNNING, 0)) > 0:
            for run_id in await self.client.batches.store.running_run_ids(tenant, batch_id):
                ended = ended_line(run_id, await run_meta(self.client, run_id))
                line = line_of(run_id, prefix)
                if ended is None or line is None or not self._twice(f"{tenant}\0{run_id}"):
                    continue
                log.warning("batch %s line %d: ending stranded run %s", batch_id, line, run_id)
                record, ended_at = ended
                settle = BatchSettle(
                    batch_id=batch_id,
                    token=_SWEEP_TOKEN + run_id,
                    line=line,
                    run_id=run_id,
                    record=record,
                    ended_at=ended_at,
                )
                acted += 1 + await settle_and_admit(self.client, tenant, settle)
        room = int(meta.get(BatchField.INFLIGHT, 0)) < int(meta.get(BatchField.CONCURRENCY, 0))
        queued = int(meta.get(LineStatus.QUEUED, 0)) > 0
        stalled = meta.get(BatchField.STATUS) == BatchStatus.RUNNING and room and queued
        if stalled and self._twice(f"{tenant}\0{batch_id}\0kick"):
            token = f"{_SWEEP_TOKEN}{batch_id}:{uuid.uuid4().hex}"
            acted += await settle_and_admit(
                self.client, tenant, BatchSettle(batch_id=batch_id, token=token)
            )
        return acted
