"""The sweeper's half for batches: an admission job a failover dropped is enqueued
again, as runs' and calls' jobs are (machine/sweeper.py).

Admission is done by jobs (batches/admission.py): a seal's or retry's kick, and the end
job each line's run enqueues when it ends. The batch transitions keep in their
partition's moving index a batch while it has lines to admit, and each admitted line
until its end is recorded (batches/lua/prelude.lua). A pass reads only the entries
unmoved for a while, and for each one enqueues again the job that was lost:

- a batch that could admit, whose last kick is neither queued nor held: a new kick;
- a line whose run was never created: the job that admitted it (its record names it),
  whose settle answers with the same admissions, so it creates the run; a kick is
  enqueued again in the batch's slot, an end job in its run's (`Redriver.redrive_ended`);
- a line whose run ended: that run's end job, which records the line's end.

Each is enqueued only if neither queued nor held, so a job that survived (one waiting
in a long queue) is never doubled. A line nothing can drive any more (its run and the
run that admitted it both gone) fails, saying so, and the batch goes on.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from agentq.orchestrator.batches.admission import (
    failed_record,
    kick_job,
    run_meta,
    settle_and_admit,
    vanished_message,
)
from agentq.orchestrator.batches.state import BatchRedrive, BatchSettle, LineStatus, RecordField
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import BatchJobEnvelope
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.machine.store import resolved
from agentq.orchestrator.machine.sweeper import Sweeper
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.redrive import Redriver
from agentq.orchestrator.runs.state import TERMINAL_STATUSES, MetaField

if TYPE_CHECKING:
    from agentq.orchestrator.client import Client

log = logging.getLogger("agentq.batch")

# The token of the settle by which a sweeper fails a line nothing can drive.
_SWEEP_TOKEN = "sweep:"


class BatchRedriver(Sweeper):
    def __init__(self, client: Client, runs: Redriver, *, after_s: float, limit: int) -> None:
        super().__init__(client.redis, keys.moving_batches, after_s=after_s, limit=limit)
        self.client = client
        self.store = client.batches.store
        self.runs = runs

    async def redrive(self, entry: str) -> int:
        """The entry is `[tenant, batch_id]` (a batch with lines to admit) or `[tenant,
        batch_id, line]` (an admitted line), as the batch transitions wrote it."""
        tenant, batch_id, *line = json.loads(entry)
        if not line:
            kick = kick_job(tenant, batch_id, f"redrive-{uuid.uuid4().hex}")
            redrive = BatchRedrive(batch_id=batch_id, entry=entry, job=kick)
            return (await self.store.redrive(tenant, redrive)).jobs
        return await self._line(tenant, batch_id, int(line[0]), entry)

    async def _line(self, tenant: str, batch_id: str, line: int, entry: str) -> int:
        with redis_errors_mapped():
            raw = await resolved(self.redis.hget(keys.batch_records(tenant, batch_id), str(line)))
        record: dict[str, Any] = json.loads(raw) if raw is not None else {}
        run_id = record.get(RecordField.RUN_ID)
        jobs, kick = 0, None
        if record.get(RecordField.STATUS) == LineStatus.RUNNING and run_id:
            status = (await run_meta(self.client, run_id)).get(MetaField.STATUS)
            if status in TERMINAL_STATUSES:
                jobs = await self.runs.redrive_ended(run_id)  # its end job
            elif status is None:  # never created: the job that admitted it was lost
                by = record.get(RecordField.ADMITTED_BY)
                admitter = BatchJobEnvelope.model_validate(by) if by is not None else None
                ended = admitter.run_id if admitter is not None else None
                if admitter is not None and ended is None:
                    kick = queued_job(admitter)  # a kick: enqueued again in the batch's slot
                elif ended is not None and await run_meta(self.client, ended):
                    jobs = await self.runs.redrive_ended(ended)
                else:
                    return await self._fail(tenant, batch_id, line, run_id)
        redrive = BatchRedrive(batch_id=batch_id, entry=entry, line=line, run_id=run_id, job=kick)
        return jobs + (await self.store.redrive(tenant, redrive)).jobs

    async def _fail(self, tenant: str, batch_id: str, line: int, run_id: str) -> int:
        """Nothing left can create the line's run: it fails, and its end admits the next."""
        log.warning("batch %s line %d: no job can create run %s", batch_id, line, run_id)
        settle = BatchSettle(
            batch_id=batch_id,
            token=_SWEEP_TOKEN + run_id,
            line=line,
            run_id=run_id,
            record=failed_record(vanished_message(run_id)),
        )
        return await settle_and_admit(self.client, tenant, settle)
